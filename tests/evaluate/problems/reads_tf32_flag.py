"""A problem whose output shows the precision flags it ran under: x + 1 when cuDNN may use
TF32 (PyTorch's default), x when not (the evaluator's strict fp32). On a CPU the flag changes
no arithmetic, so this is how a test sees which settings each side of an evaluation used."""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x + float(torch.backends.cudnn.allow_tf32)


def get_inputs():
    return [torch.rand(16, 32)]


def get_init_inputs():
    return []
