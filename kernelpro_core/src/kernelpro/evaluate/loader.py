"""Loading problem and candidate sources as modules and building their models.

Used inside evaluation workers and profiling subprocesses; never in the parent process,
since loading runs the user's code.
"""

from __future__ import annotations

import importlib.util
import random
import sys
import types
from pathlib import Path
from typing import Any

import torch


def load_module(path: str | Path, name: str) -> types.ModuleType:
    """Execute a source file as a fresh module named ``name`` (registered in sys.modules so
    that pickling, dataclasses and torch.compile can find it)."""
    path = Path(path)
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover - only for odd paths
        raise ImportError(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def seed_everything(seed: int) -> None:
    random.seed(seed)
    torch.manual_seed(seed)
    if torch.cuda.is_available():
        torch.cuda.manual_seed_all(seed)


def positional(value: Any, fn: str) -> Any:
    """``value`` as returned by the problem's ``fn``, which must be a list or tuple of
    positional arguments. A dict, a string or a tensor would be unpacked with ``*`` without
    an error (a dict's keys, a string's characters, a tensor's rows) and the model built or
    called with the wrong arguments, silently or with a puzzling error far from the cause."""
    if isinstance(value, (dict, str, bytes, torch.Tensor)) or not isinstance(value, (list, tuple)):
        raise TypeError(f"{fn} returned a {type(value).__name__}: it must return a list (or tuple) of "
                        f"positional arguments" + (" (keyword arguments are not supported)"
                                                   if isinstance(value, dict) else ""))
    return value


def make_inputs(problem: types.ModuleType, seed: int, device: str) -> list[Any]:
    """Fresh inputs from ``get_inputs()`` under ``seed``, on ``device``. On a GPU they are
    made there (``torch.device`` as the default device while ``get_inputs`` runs: a
    KernelBench input of billions of elements takes seconds to draw on the CPU and to copy);
    a ``get_inputs`` that fails that way (e.g. it calls ``.numpy()``) is run again on the
    CPU under the same seed. Out of device memory is raised as it is: the CPU's draw would
    need the same room on the device once copied, after seconds of drawing gigabytes."""
    if device.startswith("cuda"):
        seed_everything(seed)
        try:
            with torch.device(device):
                made = positional(problem.get_inputs(), "get_inputs()")
            return [to_device(x, device) for x in made]
        except torch.OutOfMemoryError:
            raise
        except Exception:
            pass
    seed_everything(seed)
    return [to_device(x, device) for x in positional(problem.get_inputs(), "get_inputs()")]


def to_device(x: Any, device: str) -> Any:
    if isinstance(x, torch.Tensor):
        return x.to(device)
    if isinstance(x, (list, tuple)):
        return type(x)(to_device(v, device) for v in x)
    return x


def build_model(cls: type, problem: types.ModuleType, seed: int, device: str) -> torch.nn.Module:
    """Construct ``cls(*get_init_inputs())`` after ``seed`` (both calls) so that reference and candidate
    create identical parameters when they create them in the same order."""
    # seeded before get_init_inputs() too: one that draws tensors (weights passed to the
    # constructor) drew them from whatever state its process's generator was in, different
    # for the reference, the candidate and the float64 rebuild of the second opinion
    seed_everything(seed)
    init = positional(problem.get_init_inputs(), "get_init_inputs()")
    model = cls(*init)
    if isinstance(model, torch.nn.Module):
        model = model.to(device)
        model.eval()
    return model
