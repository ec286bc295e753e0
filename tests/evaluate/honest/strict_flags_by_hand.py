"""A candidate that reads the precision flags like its problem (reads_tf32_flag) but first
turns cuDNN's TF32 off, as a candidate that wants strict fp32 would: correct against the
strict reference, and the flag it changed is reported."""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x):
        torch.backends.cudnn.allow_tf32 = False
        return x + float(torch.backends.cudnn.allow_tf32)
