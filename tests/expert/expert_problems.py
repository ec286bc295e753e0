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
    "linear_mean_half": problem(
        "        self.fc = nn.Linear(10, 24)\n",
        "        return torch.mean(-self.fc(x), dim=-1) * 0.5 + 1.0\n", "[torch.randn(2, 3, 10)]"),
    "relu_max_col": problem("", "        return torch.max(torch.relu(x - 1.0), dim=1)[0] * 2.0\n",
                            "[torch.randn(3, 20, 9)]"),
    "scale_softmax_tanh": problem("", "        return torch.tanh(torch.softmax(x * 0.5, dim=-1))\n",
                                  "[torch.randn(4, 50)]"),
    "split_scale_layernorm": problem("        self.ln = nn.LayerNorm(30000)\n",
                                     "        return torch.sigmoid(self.ln(x * 3.0 + 1.0))\n",
                                     "[torch.randn(2, 30000)]"),
    # Triton GEMM with fused epilogue: sizes that are not multiples of the tiles
    "linear_relu_odd": problem("        self.fc = nn.Linear(37, 45)\n", "        return torch.relu(self.fc(x))\n",
                               "[torch.randn(33, 37)]"),
    "linear3d_sigmoid": problem(
        "        self.fc = nn.Linear(24, 10)\n        self.b = nn.Parameter(torch.randn(10))\n",
        "        return torch.sigmoid(self.fc(x) * 0.5 - self.b)\n", "[torch.randn(2, 5, 24)]"),
    "addmm_scale": problem(
        "        self.w = nn.Parameter(torch.randn(18, 21))\n        self.b = nn.Parameter(torch.randn(21))\n",
        "        return torch.addmm(self.b, x, self.w) * 2.0\n", "[torch.randn(7, 18)]"),
    "linear_residual_clone": problem(
        "        self.fc = nn.Linear(20, 36)\n",
        "        x = self.fc(x)\n        r = x.clone().detach()\n        return x * 0.5 + r\n",
        "[torch.randn(40, 20)]"),
    "gemm_fp16_tanh": problem(
        "        self.w = nn.Parameter(torch.randn(40, 24, dtype=torch.float16) * 0.2)\n",
        "        return torch.tanh(torch.matmul(x, self.w) * 0.5)\n",
        "[torch.randn(19, 40, dtype=torch.float16)]"),
    "gemm_bf16_relu": problem(
        "        self.fc = nn.Linear(40, 24, dtype=torch.bfloat16)\n",
        "        return torch.relu(self.fc(x))\n", "[torch.randn(19, 40, dtype=torch.bfloat16)]"),
    "bmm_add": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, a, b, c):\n        return torch.bmm(a, b) + c\n"
        "def get_inputs():\n    return [torch.randn(3, 17, 20), torch.randn(3, 20, 9), torch.randn(3, 17, 9)]\n"
        "def get_init_inputs():\n    return []\n"),
    "matmul_transposed_both": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, a, b):\n        return torch.matmul(a.T, b.T)\n"
        "def get_inputs():\n    return [torch.randn(40, 23), torch.randn(30, 40)]\n"
        "def get_init_inputs():\n    return []\n"),
    # pooling kernels
    "max_pool1d_dilated": problem("        self.pool = nn.MaxPool1d(3, stride=2, padding=1, dilation=2)\n",
                                  "        return self.pool(x)\n", "[torch.randn(2, 3, 21)]"),
    "max_pool2d_ceil": problem("", "        return F.max_pool2d(x, 3, stride=2, padding=1, ceil_mode=True)\n",
                               "[torch.randn(2, 3, 10, 9)]"),
    "max_pool3d": problem("        self.pool = nn.MaxPool3d((2, 3, 2), stride=(1, 2, 2), padding=(0, 1, 1))\n",
                          "        return self.pool(x)\n", "[torch.randn(2, 2, 5, 7, 6)]"),
    "avg_pool1d_pad": problem("        self.pool = nn.AvgPool1d(8, stride=1, padding=4)\n",
                              "        return self.pool(x)\n", "[torch.randn(2, 3, 30)]"),
    "avg_pool2d_nopad_count": problem(
        "", "        return F.avg_pool2d(x, 3, 2, 1, True, False)\n", "[torch.randn(2, 3, 9, 8)]"),
    "avg_pool2d_divisor": problem("        self.pool = nn.AvgPool2d(2, padding=1, divisor_override=3)\n",
                                  "        return self.pool(x)\n", "[torch.randn(1, 2, 5, 6)]"),
    "avg_pool3d": problem("        self.pool = nn.AvgPool3d(3, stride=2, padding=1)\n", "        return self.pool(x)\n",
                          "[torch.randn(2, 3, 7, 6, 9)]"),
    "tanh_bias_max_pool": problem(
        "        self.bias = nn.Parameter(torch.randn(4, 1, 1))\n        self.pool = nn.MaxPool2d(2)\n",
        "        return self.pool(torch.tanh(x) * 2.0 + self.bias)\n", "[torch.randn(2, 4, 9, 8)]"),
    "scale_avg_pool3d_bias": problem(
        "        self.s1 = nn.Parameter(torch.tensor(0.5))\n        self.pool = nn.AvgPool3d(2)\n"
        "        self.bias = nn.Parameter(torch.randn(3, 1, 1, 1))\n        self.s2 = nn.Parameter(torch.tensor(1.5))\n",
        "        x = self.pool(x * self.s1)\n        return (x + self.bias) * self.s2\n",
        "[torch.randn(2, 3, 4, 6, 5)]"),
    "two_gemms_relu": problem(  # one epilogue, two products: the second GEMM's output is the first's epilogue input
        "        self.w1 = nn.Parameter(torch.randn(12, 10))\n        self.w2 = nn.Parameter(torch.randn(12, 10))\n",
        "        return torch.relu(x @ self.w1 + x @ self.w2)\n", "[torch.randn(6, 12)]"),
    "param_add_max_pool1d": problem(  # a prologue input that varies over the window: read per tap
        "        self.w = nn.Parameter(torch.randn(9))\n",
        "        return F.max_pool1d(torch.relu(x + self.w), 2, 2)\n", "[torch.randn(2, 3, 9)]"),
    # depthwise convolutions (one filter per channel) as windowed kernels
    "dwconv2d_bias_relu": problem(
        "        self.conv = nn.Conv2d(6, 6, 3, stride=2, padding=1, dilation=2, groups=6)\n",
        "        return torch.relu(self.conv(x))\n", "[torch.randn(2, 6, 13, 11)]"),
    "dwconv1d_nobias": problem("        self.conv = nn.Conv1d(5, 5, 4, padding=2, groups=5, bias=False)\n",
                               "        return self.conv(x)\n", "[torch.randn(3, 5, 17)]"),
    "dwconv3d": problem("        self.conv = nn.Conv3d(3, 3, (2, 3, 3), stride=(1, 2, 1), groups=3)\n",
                        "        return self.conv(x)\n", "[torch.randn(2, 3, 5, 9, 8)]"),
    # rows longer than a tile (BLOCK 128): several column blocks per row, the last partial,
    # with an epilogue tensor that varies along the row
    "avg_pool1d_long_rows": problem(
        "        self.pool = nn.AvgPool1d(8, stride=1, padding=4)\n        self.b = nn.Parameter(torch.randn(301))\n",
        "        return self.pool(x) + self.b\n", "[torch.randn(2, 3, 300)]"),
    "dwconv2d_wide_rows": problem("        self.conv = nn.Conv2d(3, 3, 3, stride=(1, 2), padding=1, groups=3)\n",
                                  "        return torch.tanh(self.conv(x))\n", "[torch.randn(2, 3, 5, 530)]"),
    # tiles with no bounds check at all (every tap inside, rows and columns complete), with
    # per-column checks only (the row's last tile, or (D, H) padding), and checked per tap
    "max_pool1d_long_rows": problem("        self.pool = nn.MaxPool1d(4, stride=1)\n",
                                    "        return self.pool(x)\n", "[torch.randn(2, 3, 300)]"),
    "tanh_max_pool1d_long_rows": problem("        self.pool = nn.MaxPool1d(3, stride=1, padding=1)\n",
                                         "        return self.pool(torch.tanh(x) * 2.0 - 1.0)\n",
                                         "[torch.randn(2, 3, 300)]"),
    "avg_pool2d_long_rows_nopad_count": problem(
        "", "        return F.avg_pool2d(x, (2, 3), (2, 1), (0, 1), False, False)\n", "[torch.randn(2, 3, 7, 300)]"),
    "dwconv2d_valid_wide_rows": problem("        self.conv = nn.Conv2d(3, 3, 3, groups=3)\n",
                                        "        return self.conv(x)\n", "[torch.randn(2, 3, 6, 300)]"),
    # dense convolutions as implicit GEMMs (padding, stride, dilation; K not a multiple of
    # BLOCK_K; a 1-D one)
    "conv1d_dilated_strided": problem("        self.conv = nn.Conv1d(5, 7, 3, stride=3, dilation=4, padding=2)\n",
                                      "        return self.conv(x)\n", "[torch.randn(2, 5, 61)]"),
    "conv2d_stride_pad_min": problem(
        "        self.conv = nn.Conv2d(3, 20, (3, 2), stride=(2, 1), padding=(1, 2), bias=False)\n",
        "        return torch.min(self.conv(x) * 2.0, dim=1, keepdim=True)[0]\n", "[torch.randn(2, 3, 11, 9)]"),
    "conv2d_valid_dilated": problem("        self.conv = nn.Conv2d(4, 6, 3, stride=(1, 2), dilation=(2, 1))\n",
                                    "        return self.conv(x)\n", "[torch.randn(2, 4, 12, 13)]"),
    "grouped_conv_multiplier2": problem("        self.conv = nn.Conv2d(4, 8, 3, groups=4)\n",
                                        "        return self.conv(x)\n", "[torch.randn(2, 4, 9, 9)]"),
    # losses reduced to one value
    "kl_div_log": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, p, q):\n        return F.kl_div(torch.log(p), q, reduction='batchmean')\n"
        "def get_inputs():\n    return [torch.rand(37, 300).softmax(dim=-1), torch.rand(37, 300).softmax(dim=-1)]\n"
        "def get_init_inputs():\n    return []\n"),
    # natural logs in a pointwise chain (log, and softplus's log)
    "log_softplus_chain": problem("", "        return torch.log(x.abs() + 1.0) * F.softplus(x) - 0.5\n",
                                  "[torch.randn(9, 130)]"),
    "kl_div_log_target_sum": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return F.kl_div(x, t, reduction='sum', log_target=True)\n"
        "def get_inputs():\n    return [torch.randn(5, 7, 11).log_softmax(-1), torch.randn(5, 7, 11).log_softmax(-1)]\n"
        "def get_init_inputs():\n    return []\n"),
    "kl_div_none": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return F.kl_div(x, t, reduction='none')\n"
        "def get_inputs():\n    return [torch.randn(4, 9), torch.rand(4, 9)]\n"
        "def get_init_inputs():\n    return []\n"),
    # element-wise losses reduced to one value (the input of the first through a pointwise prologue)
    "mse_loss_scaled": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return F.mse_loss(x * 2.0, t)\n"
        "def get_inputs():\n    return [torch.randn(37, 300), torch.randn(37, 300)]\n"
        "def get_init_inputs():\n    return []\n"),
    "l1_loss_sum": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return F.l1_loss(x, t, reduction='sum')\n"
        "def get_inputs():\n    return [torch.randn(5, 7, 11), torch.randn(5, 7, 11)]\n"
        "def get_init_inputs():\n    return []\n"),
    "smooth_l1_beta": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return F.smooth_l1_loss(x, t, beta=0.5)\n"
        "def get_inputs():\n    return [torch.randn(4099), torch.randn(4099)]\n"
        "def get_init_inputs():\n    return []\n"),
    "huber_delta": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return F.huber_loss(x, t, delta=2.0)\n"
        "def get_inputs():\n    return [torch.randn(64, 130) * 3.0, torch.randn(64, 130)]\n"
        "def get_init_inputs():\n    return []\n"),
    "mse_loss_none": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return F.mse_loss(x, t, reduction='none')\n"
        "def get_inputs():\n    return [torch.randn(4, 9), torch.randn(4, 9)]\n"
        "def get_init_inputs():\n    return []\n"),
    # instance norm without affine parameters: a layer norm over each (sample, channel)'s spatial dims
    "instance_norm2d": problem("        self.norm = nn.InstanceNorm2d(6)\n", "        return self.norm(x)\n",
                               "[torch.randn(3, 6, 9, 13) * 2.0 + 0.5]"),
    "instance_norm1d_relu": problem("        self.norm = nn.InstanceNorm1d(4, eps=1e-3)\n",
                                    "        return torch.relu(self.norm(x))\n", "[torch.randn(2, 4, 300)]"),
    "instance_norm2d_affine": problem("        self.norm = nn.InstanceNorm2d(6, affine=True)\n",
                                      "        return self.norm(x)\n", "[torch.randn(3, 6, 9, 13)]"),
    # argmax / argmin over one dim (first index of the extreme; ties from rounding)
    "argmax_mid": problem("", "        return torch.argmax(x, dim=1)\n", "[torch.randn(4, 37, 6)]"),
    "argmin_ties_keepdim": problem("", "        return torch.round(x).argmin(dim=-1, keepdim=True)\n",
                                   "[torch.randn(6, 70) * 2.0]"),
    "argmax_long_rows": problem("", "        return torch.argmax(torch.abs(x), -1)\n", "[torch.randn(3, 5000)]"),
    "argmin_dim0": problem("", "        return torch.argmin(x, 0)\n", "[torch.randn(45, 3, 7)]"),
    # scans: inclusive, reversed (through flip), exclusive (cat of the neutral value and the
    # scan of all but the last element), with a mask, along the last dim or an inner one
    "cumsum_rows": problem("", "        return torch.cumsum(x, dim=1)\n", "[torch.randn(4, 300)]"),
    "cumsum_long_rows": problem("", "        return x.cumsum(-1)\n", "[torch.randn(3, 9000)]"),
    "cumprod_dim0": problem("", "        return torch.cumprod(x, dim=0)\n", "[torch.rand(40, 9, 5) * 0.2 + 0.4]"),
    "cumsum_reverse": problem("", "        return torch.cumsum(x.flip(-1), dim=-1).flip(-1)\n",
                              "[torch.randn(5, 6000)]"),
    "cumprod_reverse_mid": problem("", "        return torch.flip(torch.cumprod(torch.flip(x, [1]), 1), dims=[1])\n",
                                   "[torch.rand(3, 50, 4) * 0.2 + 0.4]"),
    "cumsum_exclusive": problem(
        "",
        "        part = torch.cumsum(x.narrow(dim=1, start=0, length=x.size(1) - 1), dim=1)\n"
        "        return torch.cat((torch.zeros_like(x.select(1, 0).unsqueeze(1)), part), dim=1)\n",
        "[torch.randn(6, 5000)]"),
    "cumprod_exclusive_mid": problem(
        "",
        "        part = x.narrow(1, 0, x.size(1) - 1).cumprod(1)\n"
        "        return torch.cat([torch.ones_like(x[:, :1]), part], 1)\n",
        "[torch.rand(2, 33, 5) * 0.2 + 0.4]"),
    "cumsum_masked": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, mask):\n        return torch.cumsum(x * mask, dim=1)\n"
        "def get_inputs():\n    return [torch.randn(7, 3000), torch.rand(7, 3000) > 0.5]\n"
        "def get_init_inputs():\n    return []\n"),
    # no whole-model trace (a Python loop over x.size(1)): the submodules that trace are
    # lowered in place, the loop stays as written (the cell is called once per step)
    "untraceable_loop": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.cell = nn.Sequential(nn.Linear(12, 16), nn.Tanh())\n"
        "        self.norm = nn.LayerNorm(16)\n        self.head = nn.Linear(16, 5)\n"
        "    def forward(self, x):\n        h = x.new_zeros(x.size(0), 16)\n"
        "        for t in range(x.size(1)):\n"
        "            h = self.cell(torch.cat([x[:, t], h[:, :4]], dim=1))\n"
        "        return torch.softmax(self.head(self.norm(h)), dim=-1)\n"
        "def get_inputs():\n    return [torch.randn(3, 5, 8)]\n"
        "def get_init_inputs():\n    return []\n"),
    # the same with a convolution in the traced submodule (run channels-last there)
    "untraceable_conv_loop": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.block = nn.Sequential(nn.Conv2d(3, 6, 3, padding=1), nn.ReLU())\n"
        "        self.mix = nn.Parameter(torch.randn(3, 6, 1, 1))\n"
        "    def forward(self, x):\n"
        "        for t in range(x.size(0) // 2):\n"
        "            x = x + (self.block(x).unsqueeze(1) * self.mix).sum(2) * 0.5\n"
        "        return x\n"
        "def get_inputs():\n    return [torch.randn(4, 3, 7, 9)]\n"
        "def get_init_inputs():\n    return []\n"),
    # every element reduced to one value: a hinge loss (targets broadcast along rows, ints
    # or floats), a sum of squares, a plain mean
    "hinge_mean_int_targets": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return torch.mean(torch.clamp(1 - x * t, min=0))\n"
        "def get_inputs():\n    return [torch.randn(8, 3001), torch.randint(0, 2, (3001,)) * 2 - 1]\n"
        "def get_init_inputs():\n    return []\n"),
    "hinge_mean_col_targets": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return torch.clamp(1.0 - x * t, min=0.0).mean()\n"
        "def get_inputs():\n    return [torch.randn(64, 33), (torch.randint(0, 2, (64, 1)) * 2 - 1).float()]\n"
        "def get_init_inputs():\n    return []\n"),
    "sum_of_squares": problem("", "        return (x * x).sum()\n", "[torch.randn(5, 7, 300)]"),
    "mean_all": problem("", "        return x.mean()\n", "[torch.randn(9000) + 3.0]"),
    # Python numbers as forward arguments (A * s), and integer / bool tensors read into a float result
    "scalar_times_matrix": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, A, s):\n        return A * s\n"
        "def get_inputs():\n    return [torch.randn(37, 129), 3.5]\n"
        "def get_init_inputs():\n    return []\n"),
    "scalar_affine_int": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, a, b):\n        return torch.relu(x * a + b)\n"
        "def get_inputs():\n    return [torch.randn(4, 6, 50), -2, 0.25]\n"
        "def get_init_inputs():\n    return []\n"),
    "int_tensor_half": problem("", "        return (x > 0).long() * 0.5 + x.long() * 0.25\n",
                               "[torch.randn(3, 70) * 4.0]"),
    # batch norm (training-mode statistics and their running update; eval mode reads the
    # running statistics: see test_kernels), group norm with and without affine, F.group_norm,
    # instance norm with affine parameters, with a fused activation
    "batch_norm2d": problem("        self.bn = nn.BatchNorm2d(5)\n", "        return self.bn(x)\n",
                            "[torch.randn(3, 5, 9, 11) * 2.0 + 1.0]"),
    # planes of S >= 256 elements: in eval mode, the affine kernel by (n, c) planes
    "batch_norm2d_planes": problem("        self.bn = nn.BatchNorm2d(3)\n", "        return self.bn(x)\n",
                                   "[torch.randn(2, 3, 20, 33)]"),
    "batch_norm1d_relu": problem("        self.bn = nn.BatchNorm1d(7, affine=False, momentum=0.3)\n",
                                 "        return torch.relu(self.bn(x))\n", "[torch.randn(16, 7) + 0.5]"),
    "group_norm3d": problem("        self.gn = nn.GroupNorm(4, 12, eps=1e-3)\n", "        return self.gn(x)\n",
                            "[torch.randn(2, 12, 3, 5, 6) * 3.0]"),
    "group_norm_func_no_affine": problem("", "        return F.group_norm(x, 3) * 2.0\n",
                                         "[torch.randn(4, 9, 700)]"),
    "instance_norm2d_affine_gelu": problem("        self.norm = nn.InstanceNorm2d(6, affine=True)\n",
                                           "        return F.gelu(self.norm(x))\n", "[torch.randn(3, 6, 9, 13)]"),
    # convolutions past the dense 1-D/2-D kernel: 3-D, grouped, transposed (output padding,
    # dilation, groups), as implicit GEMMs per group
    "conv3d_strided_pad": problem("        self.conv = nn.Conv3d(3, 5, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 2))\n",
                                  "        return self.conv(x)\n", "[torch.randn(2, 3, 5, 7, 6)]"),
    "conv2d_grouped_dilated": problem("        self.conv = nn.Conv2d(6, 9, 3, groups=3, dilation=2, padding=1, bias=False)\n",
                                      "        return self.conv(x)\n", "[torch.randn(2, 6, 9, 10)]"),
    "conv_transpose1d_outpad": problem(
        "        self.conv = nn.ConvTranspose1d(4, 6, 3, stride=2, padding=1, output_padding=1, dilation=2)\n",
        "        return self.conv(x)\n", "[torch.randn(3, 4, 11)]"),
    "conv_transpose2d_grouped": problem(
        "        self.conv = nn.ConvTranspose2d(6, 4, (3, 2), stride=(2, 1), padding=(1, 0), groups=2)\n",
        "        return self.conv(x)\n", "[torch.randn(2, 6, 5, 7)]"),
    # convolutions left in the library, run channels-last, with the kernels after them
    # (a pointwise chain with a broadcast parameter, a pool, a channel norm) reading that layout
    "conv2d_bias_tanh_pool": problem(
        "        self.conv = nn.Conv2d(3, 8, 3)\n        self.bias = nn.Parameter(torch.randn(8, 1, 1))\n"
        "        self.pool = nn.MaxPool2d(2)\n",
        "        return self.pool(torch.tanh(self.conv(x) + self.bias))\n", "[torch.randn(2, 3, 10, 12)]"),
    "conv2d_bias_residual": problem(
        "        self.conv = nn.Conv2d(3, 12, 3)\n        self.bias = nn.Parameter(torch.randn(12, 1, 1))\n",
        "        y = self.conv(x)\n        return torch.relu(y + self.bias) * y\n", "[torch.randn(2, 3, 11, 13)]"),
    "conv_transpose3d_scale_clamp": problem(
        "        self.conv = nn.ConvTranspose3d(3, 5, 3, stride=2, padding=1)\n",
        "        return torch.clamp(self.conv(x) * 0.5, -0.2, 0.2)\n", "[torch.randn(2, 3, 3, 4, 5)]"),
    "conv3d_group_norm_relu": problem(
        "        self.conv = nn.Conv3d(4, 6, 2)\n        self.norm = nn.GroupNorm(3, 6)\n",
        "        return torch.relu(self.norm(self.conv(x)))\n", "[torch.randn(2, 4, 4, 5, 3)]"),
    # convolutions whose bias the kernel after them adds (fold): a reduction over channels,
    # a pooling window, a reduction over positions (the channel an outer dim), a softmax over
    # channels; and a parameter varying along one dim, added before a row reduction
    "conv_transpose2d_min_tanh": problem(
        "        self.conv = nn.ConvTranspose2d(4, 6, 3, stride=2, padding=1, output_padding=1)\n",
        "        return torch.tanh(torch.min(self.conv(x), dim=1, keepdim=True)[0])\n", "[torch.randn(2, 4, 5, 6)]"),
    "conv_transpose3d_avg_pool": problem(
        "        self.conv = nn.ConvTranspose3d(3, 4, 3, stride=2, padding=1)\n        self.pool = nn.AvgPool3d(2)\n",
        "        return self.pool(self.conv(x) * 0.5)\n", "[torch.randn(2, 3, 3, 4, 5)]"),
    "conv2d_amax_hw": problem("        self.conv = nn.Conv2d(3, 5, 3)\n",
                              "        return torch.amax(self.conv(x) * 2.0, dim=(2, 3))\n", "[torch.randn(2, 3, 9, 8)]"),
    "conv3d_softmax_channels": problem("        self.conv = nn.Conv3d(3, 6, 2)\n",
                                       "        return torch.softmax(self.conv(x), dim=1)\n", "[torch.randn(2, 3, 4, 5, 3)]"),
    "param_bias_sum_rows": problem("        self.b = nn.Parameter(torch.randn(7, 1))\n",
                                   "        return torch.sum(torch.tanh(x + self.b), dim=-1)\n", "[torch.randn(4, 7, 33)]"),
    "conv_relu_linear": problem("        self.conv = nn.Conv2d(3, 4, 3)\n        self.fc = nn.Linear(4 * 7 * 7, 10)\n",
                                "        return self.fc(torch.flatten(torch.relu(self.conv(x)), 1))\n",
                                "[torch.randn(2, 3, 9, 9)]"),
    "param_bias_sum_dim0": problem("        self.b = nn.Parameter(torch.randn(7, 1))\n",
                                   "        return torch.sum(x * self.b, dim=0)\n", "[torch.randn(5, 7, 6)]"),
    # pools of a channels-last convolution's output (their channels-last form): an average
    # with padding, ceil mode and the padding left out of the count, then an epilogue; a
    # dilated 3-D max with padding after a ReLU
    "conv2d_avg_pool_ceil": problem(
        "        self.conv = nn.Conv2d(3, 6, 3)\n",
        "        y = F.avg_pool2d(self.conv(x), 3, stride=2, padding=1, ceil_mode=True, count_include_pad=False)\n"
        "        return y * 2.0\n", "[torch.randn(2, 3, 11, 10)]"),
    "conv3d_max_pool_dilated": problem(
        "        self.conv = nn.Conv3d(2, 5, 2)\n        self.pool = nn.MaxPool3d(3, stride=2, padding=1, dilation=2)\n",
        "        return self.pool(torch.relu(self.conv(x)))\n", "[torch.randn(2, 2, 8, 9, 10)]"),
    # a min over the depth of a 3-D convolution's output: NDHWC columns along H, W and C, enough
    # outputs for the strided form (the channels-last candidate is offered)
    "conv3d_min_depth": problem(
        "        self.conv = nn.Conv3d(3, 128, 1)\n",
        "        return torch.min(self.conv(x), dim=2)[0] * 2.0\n", "[torch.randn(1, 3, 2, 32, 32)]"),
    # a sum over every dim but the batch of a convolution's output: rows longer than one tile
    # (one program a row in the strided form)
    "conv2d_sum_chw": problem("        self.conv = nn.Conv2d(3, 8, 3)\n",
                              "        return torch.sum(self.conv(x), dim=(1, 2, 3))\n", "[torch.randn(2, 3, 14, 14)]"),
    "conv_transpose3d_bias": problem("        self.conv = nn.ConvTranspose3d(3, 4, 2, stride=2, bias=True)\n",
                                     "        return self.conv(x)\n", "[torch.randn(2, 3, 3, 4, 5)]"),
    # cross-entropy against class indices: mean with ignored targets, sum, long rows
    "cross_entropy_ignore": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return F.cross_entropy(x, t, ignore_index=2)\n"
        "def get_inputs():\n    return [torch.randn(37, 5) * 3.0, torch.randint(0, 5, (37,))]\n"
        "def get_init_inputs():\n    return []\n"),
    "cross_entropy_module_sum": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.loss = nn.CrossEntropyLoss(reduction='sum')\n"
        "    def forward(self, x, t):\n        return self.loss(x, t)\n"
        "def get_inputs():\n    return [torch.randn(6, 5000), torch.randint(0, 5000, (6,))]\n"
        "def get_init_inputs():\n    return []\n"),
    # einsum contractions that are matrix products (2-D B, read transposed, batched)
    "einsum_4d_matrix": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, y):\n        return torch.einsum('bijl,lk->bijk', x, y)\n"
        "def get_inputs():\n    return [torch.randn(2, 3, 5, 17), torch.randn(17, 9)]\n"
        "def get_init_inputs():\n    return []\n"),
    "einsum_transposed_b": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, y):\n        return torch.relu(torch.einsum('ik,jk->ij', x, y))\n"
        "def get_inputs():\n    return [torch.randn(7, 20), torch.randn(11, 20)]\n"
        "def get_init_inputs():\n    return []\n"),
    "einsum_batched": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, y):\n        return torch.einsum('bnij,bnjk->bnik', x, y)\n"
        "def get_inputs():\n    return [torch.randn(2, 3, 6, 10), torch.randn(2, 3, 10, 5)]\n"
        "def get_init_inputs():\n    return []\n"),
    # row statistics of two or three inputs: a cosine-similarity loss, triplet margin losses
    "cosine_similarity_loss": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, x, t):\n        return torch.mean(1 - F.cosine_similarity(x, t, dim=1))\n"
        "def get_inputs():\n    return [torch.randn(9, 3000), torch.randn(9, 3000)]\n"
        "def get_init_inputs():\n    return []\n"),
    "triplet_margin_module": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.loss = nn.TripletMarginLoss(margin=0.5)\n"
        "    def forward(self, a, p, n):\n        return self.loss(a, p, n)\n"
        "def get_inputs():\n    return [torch.randn(12, 70), torch.randn(12, 70), torch.randn(12, 70)]\n"
        "def get_init_inputs():\n    return []\n"),
    "triplet_margin_func_sum": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, a, p, n):\n        return F.triplet_margin_loss(a, p, n, margin=2.0, reduction='sum')\n"
        "def get_inputs():\n    return [torch.randn(5, 33), torch.randn(5, 33), torch.randn(5, 33) * 0.5]\n"
        "def get_init_inputs():\n    return []\n"),
    # scaled dot-product attention: odd lengths and head dims, causal with L != S, a scale
    "sdpa_plain": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v)\n"
        "def get_inputs():\n    return [torch.randn(2, 3, 37, 20), torch.randn(2, 3, 45, 20), torch.randn(2, 3, 45, 24)]\n"
        "def get_init_inputs():\n    return []\n"),
    "sdpa_causal_scaled": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=0.3)\n"
        "def get_inputs():\n    return [torch.randn(2, 70, 16), torch.randn(2, 150, 16), torch.randn(2, 150, 16)]\n"
        "def get_init_inputs():\n    return []\n"),
    "sdpa_causal_square": HEAD + (
        "class Model(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "    def forward(self, q, k, v):\n        return F.scaled_dot_product_attention(q, k, v, is_causal=True)\n"
        "def get_inputs():\n    return [torch.randn(1, 2, 130, 32), torch.randn(1, 2, 130, 32), torch.randn(1, 2, 130, 32)]\n"
        "def get_init_inputs():\n    return []\n"),
    "data_dependent": problem("", "        if x.sum() > 0:\n            return x\n        return -x\n",
                              "[torch.randn(4)]"),
}
