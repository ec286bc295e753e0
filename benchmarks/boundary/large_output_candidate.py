import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty((3 * x.shape[0], x.shape[1]), dtype=x.dtype, device=x.device)
        n = x.shape[0]
        out[:n].copy_(x)
        torch.mul(x, 2.0, out=out[n:2 * n])
        torch.tanh(x, out=out[2 * n:])
        return out
