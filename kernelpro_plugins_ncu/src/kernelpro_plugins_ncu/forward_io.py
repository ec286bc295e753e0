"""The profiled forward of :mod:`kernelpro.evaluate.forward`, also recording how many bytes
the forward must at least move: its inputs, parameters and outputs.

    python -m kernelpro_plugins_ncu.forward_io --io-json OUT.json <forward.py arguments>

Nothing else changes: the same warm-up, the same profiled range. The micro-profiler for
DRAM traffic above the minimum compares measured DRAM bytes with these numbers.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any


def tensor_bytes(value: Any) -> int:
    """Bytes of every tensor in a (nested) value."""
    try:
        import torch
    except ImportError:  # pragma: no cover - the forward needs torch anyway
        return 0
    if isinstance(value, torch.Tensor):
        return value.numel() * value.element_size()
    if isinstance(value, (list, tuple)):
        return sum(tensor_bytes(v) for v in value)
    if isinstance(value, dict):
        return sum(tensor_bytes(v) for v in value.values())
    return 0


class _RecordingModel:
    """Calls the model and records the bytes of its first output."""

    def __init__(self, model: Any, record: dict[str, int]) -> None:
        self._model = model
        self._record = record

    def __call__(self, *args: Any) -> Any:
        out = self._model(*args)
        self._record.setdefault("output_bytes", tensor_bytes(out))
        return out


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    io_json: Path | None = None
    if "--io-json" in argv:
        i = argv.index("--io-json")
        io_json = Path(argv[i + 1])
        del argv[i : i + 2]
    from kernelpro.evaluate import forward

    record: dict[str, int] = {}
    original = forward.prepare

    def prepare(*args: Any, **kwargs: Any):
        model, inputs = original(*args, **kwargs)
        record["input_bytes"] = tensor_bytes(inputs)
        params = 0
        if hasattr(model, "parameters"):
            params += sum(tensor_bytes(p) for p in model.parameters())
        if hasattr(model, "buffers"):
            params += sum(tensor_bytes(b) for b in model.buffers())
        record["param_bytes"] = params
        return _RecordingModel(model, record), inputs

    forward.prepare = prepare
    rc = forward.main(argv)
    if io_json is not None and record:
        io_json.write_text(json.dumps(record))
    return rc


if __name__ == "__main__":
    sys.exit(main())
