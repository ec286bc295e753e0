"""Honest candidate of training_flag.py in eval mode, as the evaluator judges."""
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x * 3.0
