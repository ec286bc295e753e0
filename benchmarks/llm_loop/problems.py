"""Three small CPU problems for the scripted-model benchmark, each with the candidate files
the scripted model picks from: correct ones at three speeds, a wrong result, a file that
fails to build (a misspelt name at module level, so it fails when it is loaded: the CPU
stand-in for a kernel that does not compile), and one whose forward outlives the
evaluator's call limit. All were written for this benchmark by hand."""

from __future__ import annotations

HEADER = "import time\nimport torch\nimport torch.nn as nn\n\n\n"

RELU_SCALE = HEADER + '''class Model(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
        y = x
        for _ in range(6):  # the same relu, applied again and again
            y = torch.where(y > 0, y, torch.zeros_like(y))
        return y * self.scale


def get_inputs():
    return [torch.randn(512, 512)]


def get_init_inputs():
    return [1.5]
'''


def _relu_scale(body: str) -> str:
    return HEADER + f'''class ModelNew(nn.Module):
    def __init__(self, scale: float):
        super().__init__()
        self.scale = scale

    def forward(self, x):
{body}
'''


SOFTMAX = HEADER + '''class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        m = x.max(dim=1, keepdim=True).values
        e = torch.exp(x - m)
        e = e.clone().contiguous()
        s = e.sum(dim=1, keepdim=True)
        return (e / s).clone()


def get_inputs():
    return [torch.randn(256, 1024)]


def get_init_inputs():
    return []
'''


def _softmax(body: str) -> str:
    return HEADER + f'''class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
{body}
'''


LINEAR_RELU = HEADER + '''class Model(nn.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)

    def forward(self, x):
        y = x @ self.linear.weight.t()
        y = y + self.linear.bias
        y = y.clone()
        return torch.relu(y).clone()


def get_inputs():
    return [torch.randn(256, 256)]


def get_init_inputs():
    return [256, 256]
'''


def _linear_relu(body: str) -> str:
    return HEADER + f'''class ModelNew(nn.Module):
    def __init__(self, n_in: int, n_out: int):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)

    def forward(self, x):
{body}
'''


def _broken(source: str) -> str:
    return source.replace("class ModelNew", "_act = torch.nn.functional.rleu\n\n\nclass ModelNew")


_HANG = "        time.sleep(60)\n        return x"

#: problem name -> (reference source, {variant: candidate source})
PROBLEMS: dict[str, tuple[str, dict[str, str]]] = {
    "relu_scale": (RELU_SCALE, {
        "fastest": _relu_scale("        return torch.clamp_min(x, 0.0).mul_(self.scale)"),
        "fast": _relu_scale("        return torch.relu(x) * self.scale"),
        "slow": _relu_scale("        y = x\n        for _ in range(12):\n"
                            "            y = torch.where(y > 0, y, torch.zeros_like(y))\n        return y * self.scale"),
        "wrong": _relu_scale("        return x * self.scale"),
        "compile_error": _broken(_relu_scale("        return torch.relu(x) * self.scale")),
        "timeout": _relu_scale(_HANG),
    }),
    "softmax": (SOFTMAX, {
        "fastest": _softmax("        return torch.softmax(x, dim=1)"),
        "fast": _softmax("        e = torch.exp(x - x.max(dim=1, keepdim=True).values)\n"
                         "        return e / e.sum(dim=1, keepdim=True)"),
        "slow": _softmax("        out = torch.empty_like(x)\n        for i in range(0, x.shape[0], 8):\n"
                         "            out[i:i + 8] = torch.softmax(x[i:i + 8].clone(), dim=1)\n        return out"),
        "wrong": _softmax("        return torch.softmax(x, dim=0)"),
        "compile_error": _broken(_softmax("        return torch.softmax(x, dim=1)")),
        "timeout": _softmax(_HANG),
    }),
    "linear_relu": (LINEAR_RELU, {
        "fastest": _linear_relu("        return torch.addmm(self.linear.bias, x, self.linear.weight.t()).clamp_min_(0.0)"),
        "fast": _linear_relu("        return torch.relu(self.linear(x))"),
        "slow": _linear_relu("        y = torch.stack([row @ self.linear.weight.t() for row in x.split(32)]).reshape(x.shape[0], -1)\n"
                             "        return torch.relu(y + self.linear.bias).clone()"),
        "wrong": _linear_relu("        return torch.relu(x @ self.linear.weight.t())"),
        "compile_error": _broken(_linear_relu("        return torch.relu(self.linear(x))")),
        "timeout": _linear_relu(_HANG),
    }),
}
