"""Holds 8 GiB of device memory and hangs: after the timeout the memory must be free."""
import time

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()

    def forward(self, x):
        self.hog = torch.empty(2 << 30, dtype=torch.float32, device=x.device).fill_(1.0)
        torch.cuda.synchronize()
        while True:
            time.sleep(1)
