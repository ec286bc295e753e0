"""Built-in generator ``torch_compile``: ``torch.compile`` variants of the reference.

Needs no network. Its search space is torch.compile's mode and a few Inductor options.
Each candidate embeds the problem's source and defines ``ModelNew`` as a module that
builds ``Model`` and calls ``torch.compile`` on that module (compiling the module, not a
bound method, keeps per-call guard overhead low), so parameters are created exactly as
the reference creates them. From the root it proposes the most promising configurations
first; refining a node, it proposes configurations that extend the node's own by one
option, ordered by the node's bottleneck (launch-bound forwards try CUDA graphs first).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import attrs

from kernelpro.api import GenerationRequest, Generator
from kernelpro.hookspecs import hookimpl
from kernelpro.records import CandidateDraft

GPU_MODES = ("default", "max-autotune-no-cudagraphs", "reduce-overhead", "max-autotune")
CPU_MODES = ("default", "max-autotune-no-cudagraphs")

# Inductor options worth toggling, each a documented torch._inductor.config key.
GPU_OPTIONS: tuple[dict[str, Any], ...] = (
    {"coordinate_descent_tuning": True},
    {"epilogue_fusion": True, "aggressive_fusion": True},
    {"triton.cudagraphs": True},
    {"max_autotune_pointwise": True},
)
CPU_OPTIONS: tuple[dict[str, Any], ...] = (
    {"aggressive_fusion": True},
    {"cpp.simdlen": 16},
)


@attrs.frozen
class TorchCompileSettings:
    fullgraph: bool = False
    dynamic: bool = False


class TorchCompileGenerator(Generator):
    name = "torch_compile"
    description = "torch.compile variants of the reference (modes and Inductor options)"
    Settings = TorchCompileSettings

    def space(self, device: str) -> list[dict[str, Any]]:
        modes = GPU_MODES if device.startswith("cuda") else CPU_MODES
        options = GPU_OPTIONS if device.startswith("cuda") else CPU_OPTIONS
        configs: list[dict[str, Any]] = [{"mode": m, "options": {}} for m in modes]
        for opt in options:
            configs.append({"mode": None, "options": dict(opt)})
        return configs

    def refinements(self, parent: dict[str, Any], device: str, bottleneck: str | None) -> list[dict[str, Any]]:
        options: Sequence[dict[str, Any]] = GPU_OPTIONS if device.startswith("cuda") else CPU_OPTIONS
        if bottleneck in ("too_little_work", "latency") and device.startswith("cuda"):
            options = sorted(options, key=lambda o: "triton.cudagraphs" not in o)
        out = []
        for opt in options:
            merged = {**parent.get("options", {}), **opt}
            if merged == parent.get("options", {}):
                continue
            mode = parent.get("mode")
            if mode not in (None, "default"):
                # Inductor refuses options together with a mode other than default
                continue
            out.append({"mode": None, "options": merged})
        return out

    def generate(self, request: GenerationRequest) -> list[CandidateDraft]:
        tried = {json.dumps(_key(p), sort_keys=True) for p in request.tried}
        if request.parent is not None and request.parent.params:
            bottleneck = None
            if request.parent.analysis is not None and request.parent.analysis.bottleneck is not None:
                bottleneck = request.parent.analysis.bottleneck.kind
            pool = self.refinements(request.parent.params, request.device, bottleneck)
            pool += self.space(request.device)
        else:
            pool = self.space(request.device)
        drafts = []
        for params in pool:
            key = json.dumps(_key(params), sort_keys=True)
            if key in tried:
                continue
            tried.add(key)
            drafts.append(CandidateDraft(
                source=render(request.problem.source, params, self.settings),
                generator=self.name,
                language="pytorch",
                description=describe(params),
                params=_key(params),
            ))
            if len(drafts) >= request.n:
                break
        return drafts


def _key(params: dict[str, Any]) -> dict[str, Any]:
    return {"mode": params.get("mode"), "options": dict(sorted(params.get("options", {}).items()))}


def describe(params: dict[str, Any]) -> str:
    parts = []
    if params.get("mode"):
        parts.append(f"mode={params['mode']}")
    for k, v in sorted(params.get("options", {}).items()):
        parts.append(f"{k}={v}")
    return "torch.compile(" + ", ".join(parts) + ")"


def render(problem_source: str, params: dict[str, Any], settings: TorchCompileSettings) -> str:
    kwargs = [f"fullgraph={settings.fullgraph!r}", f"dynamic={settings.dynamic!r}"]
    if params.get("mode"):
        kwargs.append(f"mode={params['mode']!r}")
    if params.get("options"):
        kwargs.append(f"options={params['options']!r}")
    return (
        f"# KernelPro candidate: {describe(params)}\n"
        "# The problem's source follows unchanged; ModelNew wraps Model and compiles it.\n"
        f"{problem_source.rstrip()}\n\n\n"
        "import torch as _kp_torch\n\n\n"
        "class ModelNew(_kp_torch.nn.Module):\n"
        "    def __init__(self, *args, **kwargs):\n"
        "        super().__init__()\n"
        "        # built like the reference, so the same seed gives the same parameters\n"
        "        self.inner = Model(*args, **kwargs)\n"
        f"        self.compiled = _kp_torch.compile(self.inner, {', '.join(kwargs)})\n\n"
        "    def forward(self, *args):\n"
        "        return self.compiled(*args)\n"
    )


@hookimpl
def kernelpro_register_generators(register):
    register(TorchCompileGenerator)
