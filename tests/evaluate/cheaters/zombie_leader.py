"""Cheat: starts a helper process at its first call whose first thread leaves by the raw exit
system call while another thread goes on running, so the helper reads as a zombie in
/proc/<pid>/stat (work hidden from a watcher that skips zombies would run there)."""
import ctypes
import os
import threading
import time

import torch
import torch.nn as nn

SYS_EXIT = {"x86_64": 60, "aarch64": 93}.get(os.uname().machine, 60)


def _helper() -> None:
    threading.Thread(target=time.sleep, args=(120,)).start()
    ctypes.CDLL(None).syscall(SYS_EXIT, 0)  # the first thread only: the process lives on


class ModelNew(nn.Module):
    def __init__(self, cols):
        super().__init__()
        self.bias = nn.Parameter(torch.randn(cols) * 0.1)
        self.scale = 1.7
        self.started = False

    def forward(self, x):
        if not self.started:
            self.started = True
            if os.fork() == 0:
                _helper()
        return torch.nn.functional.gelu(x + self.bias) * self.scale
