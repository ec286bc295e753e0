"""Small KernelBench-format problems for the expert generator's tests (sources as strings)."""

HEAD = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n\n"


def problem(init: str, forward: str, inputs: str, init_inputs: str = "[]", init_args: str = "") -> str:
    return HEAD + (
        "class Model(nn.Module):\n"
        f"    def __init__(self{init_args}):\n"
        "        super().__init__()\n"
        f"{init}"
        "    def forward(self, x):\n"
        f"{forward}"
        f"def get_inputs():\n    return {inputs}\n"
        f"def get_init_inputs():\n    return {init_inputs}\n"
    )


PROBLEMS = {
    "elementwise_chain": problem(
        "        self.scale = nn.Parameter(torch.randn(6, 1, 1))\n",
        "        y = torch.sigmoid(x) * self.scale - 0.25\n        return F.leaky_relu(torch.tanh(y), 0.1)\n",
        "[torch.randn(2, 6, 5, 7)]"),
    "bias_gelu": problem(
        "        self.linear = nn.Linear(12, 20)\n        self.bias = nn.Parameter(torch.randn(20))\n",
        "        return F.gelu(self.linear(x) + self.bias)\n", "[torch.randn(3, 12)]"),
    "softmax": problem("", "        return torch.softmax(x, dim=1)\n", "[torch.randn(5, 300)]"),
    "softmax_dim0": problem("", "        return F.softmax(x, dim=0)\n", "[torch.randn(33, 40)]"),
    "log_softmax": problem("", "        return torch.log_softmax(x, dim=-1)\n", "[torch.randn(4, 70)]"),
    "logsumexp": problem("", "        return torch.logsumexp(x, dim=1, keepdim=True)\n", "[torch.randn(6, 50)]"),
    "layernorm": problem("        self.ln = nn.LayerNorm((8, 16))\n", "        return self.ln(x)\n",
                         "[torch.randn(3, 8, 16) * 2 + 1]"),
    "rmsnorm": problem(
        "        self.eps = 1e-5\n",
        "        rms = torch.sqrt(torch.mean(x ** 2, dim=1, keepdim=True) + self.eps)\n        return x / rms\n",
        "[torch.randn(2, 12, 5, 3)]"),
    "rmsnorm_module": problem("        self.norm = nn.RMSNorm(24)\n", "        return self.norm(x)\n",
                              "[torch.randn(4, 24)]"),
    "gemm_bias_relu": problem(
        "        self.fc = nn.Linear(16, 24)\n        self.b = nn.Parameter(torch.randn(24))\n",
        "        return torch.relu(torch.matmul(x, self.fc.weight.t()) + self.b)\n", "[torch.randn(5, 16)]"),
    "conv_relu": problem("        self.conv = nn.Conv2d(3, 8, 3)\n", "        return torch.relu(self.conv(x))\n",
                         "[torch.randn(2, 3, 9, 9)]"),
    "pooling": problem("        self.pool = nn.MaxPool2d(2)\n", "        return self.pool(x)\n",
                       "[torch.randn(2, 3, 8, 8)]"),
    "reduction_sum": problem("", "        return torch.sum(x, dim=1, keepdim=True)\n", "[torch.randn(4, 37, 6)]"),
    "reduction_mean_row": problem("", "        return x.mean(dim=-1)\n", "[torch.randn(7, 90)]"),
    "reduction_max": problem("", "        return torch.max(x, dim=1)[0]\n", "[torch.randn(3, 20, 9)]"),
    "global_avg_pool": problem("", "        return torch.mean(x, dim=[2, 3], keepdim=True)\n",
                               "[torch.randn(2, 5, 6, 7)]"),
    "amax_last_two": problem("", "        return torch.amax(x, dim=(-2, -1))\n", "[torch.randn(3, 4, 33)]"),
    # few long rows: split into chunks (two kernels)
    "split_softmax": problem("", "        return torch.softmax(x, dim=1)\n", "[torch.randn(2, 40000)]"),
    "split_log_softmax": problem("", "        return torch.log_softmax(x, dim=-1)\n", "[torch.randn(2, 33000)]"),
    "split_logsumexp": problem("", "        return torch.logsumexp(x, dim=1)\n", "[torch.randn(3, 20000)]"),
    "split_layernorm": problem("        self.ln = nn.LayerNorm((100, 200))\n", "        return self.ln(x)\n",
                               "[torch.randn(3, 100, 200) * 3 + 5]"),
    "split_rmsnorm": problem("        self.norm = nn.RMSNorm(20000, eps=1e-6)\n", "        return self.norm(x)\n",
                             "[torch.randn(2, 20000)]"),
    "split_sum": problem("", "        return x.sum(dim=1)\n", "[torch.randn(3, 20000)]"),
    "split_max": problem("", "        return torch.amax(x, dim=(1, 2), keepdim=True)\n",
                         "[torch.randn(2, 100, 300)]"),
    # pointwise before and after a reduction/softmax/norm: fused into its kernel
    "gemm_div_sum_scale": problem(
        "        self.weight = nn.Parameter(torch.randn(24, 10))\n        self.scaling = 1.5\n",
        "        x = torch.matmul(x, self.weight.T)\n        x = x / 2\n"
        "        x = torch.sum(x, dim=1, keepdim=True)\n        return x * self.scaling\n", "[torch.randn(6, 10)]"),
    "relu_max_col": problem("", "        return torch.max(torch.relu(x - 1.0), dim=1)[0] * 2.0\n",
                            "[torch.randn(3, 20, 9)]"),
    "scale_softmax_tanh": problem("", "        return torch.tanh(torch.softmax(x * 0.5, dim=-1))\n",
                                  "[torch.randn(4, 50)]"),
    "split_scale_layernorm": problem("        self.ln = nn.LayerNorm(30000)\n",
                                     "        return torch.sigmoid(self.ln(x * 3.0 + 1.0))\n",
                                     "[torch.randn(2, 30000)]"),
    "data_dependent": problem("", "        if x.sum() > 0:\n            return x\n        return -x\n",
                              "[torch.randn(4)]"),
}
