"""The ``expert`` generator: recognized regions -> Triton kernels, refined from findings.

Uses no network. From the root it proposes, in order: the algebraic rewrites where one
applies (``gemm_reduce``: a GEMM summed over N as a matrix-vector product); where a
convolution's bias can be added by the kernel after it without a kernel more, the regions
of the graph with the biases split off (``fold``: :mod:`.foldbias`), first with the
library's convolutions channels-last where their readers take that layout (below); every
recognized region lowered with its default tile (GEMMs in the library, their epilogues as Triton kernels);
where convolutions stay in the library (2-D and 3-D, groups 1) and every kernel that reads
their output reads it channels-last in place (a pointwise kernel, a reduction over the
channels, a max or avg pool: :func:`channels_last_reads`), the same candidate with them
channels-last (``layout``: :func:`.render.channels_last_paths`), unless the run's baseline
shows the reference gaining nothing from TF32 (:func:`reference_gains_from_tf32`: cuDNN's
channels-last kernels would then be less precise than the reference as run); for fp16/bf16 GEMMs the
Triton-GEMM alternative (each GEMM with its epilogue as one Triton kernel); CUDA-graph
capture of the first and of the unchanged reference forward (CUDA
only, and only for forwards that move at most ``graph_root_max_bytes`` or hold an fp32
GEMM: the capture copies inputs and clones the output, a loss for large memory-bound
forwards; the same limit holds for the ``graph`` move when refining); for fp32 GEMMs and
dense convolutions the Triton alternative (GEMMs, implicit-GEMM convolutions) last, tf32x3
products before ieee (the library's fp32 GEMM is hard to beat on FMA pipes). Refining a node whose GEMMs are
in the library, the ``precision`` move (compute bound) proposes the Triton GEMM with
tf32x3 products. Refining a node, it plans moves from the node's
analysis (:mod:`.moves`) and proposes the children of the node's parameters that were
never tried in this run; where the node's timed call left the GPU idle for most of it (its
time less its profiled kernels' durations: :func:`gpu_idle_ms`), the CUDA-graph child comes
first, whatever the forward's size. When the node sits at the roofline it proposes nothing, so the
search closes that node, unless the run's reward ranks energy (a ``goal`` in the request):
then only the energy levers are proposed there (:func:`.moves.energy_plan`), the moves that
keep the algorithm and change the traffic, the accesses' width or the warps at work. When
the reference cannot be recognized (no trace), it proposes nothing at all: there is no
torch.compile fallback (the ``torch_compile`` generator is that). On a CPU device the candidates' Triton kernels run under Triton's
interpreter, which the evaluator chooses for them (``kernelpro.evaluate.interpret``).
"""

from __future__ import annotations

import json
import math
from typing import Any

import attrs

from kernelpro.api import CandidateDraft, GenerationRequest, Generator
from kernelpro_plugins_expert import moves
from kernelpro_plugins_expert.recognize import Recognition, Region, recognize, recognize_folded
from kernelpro_plugins_expert.render import (default_params, describe, fold_layout_params, gemm_params, is_triton,
                                             layout_params, pool_reads_channels_last, region_ids, render_candidate,
                                             rewrite_params, vec_eligible, vec_tile)


@attrs.frozen
class ExpertSettings:
    candidates_per_expansion: int = 2
    #: stop refining a node whose bottleneck reaches this fraction of its roofline
    #: (the issue's target for memory-bound winners is 80 % of measured bandwidth; 0.85
    #: leaves room to pass it before giving up)
    stop_at_roofline_fraction: float = 0.85
    #: offer CUDA-graph capture at all (CUDA devices only)
    cuda_graphs: bool = True
    #: offer graph capture among the first candidates only for forwards that read and
    #: write at most this many bytes (launch overhead matters) or that hold an fp32 GEMM;
    #: later, launch-bound findings propose it for any forward
    graph_root_max_bytes: int = 16 * 2**20

    def __attrs_post_init__(self) -> None:
        if self.candidates_per_expansion < 1:
            raise ValueError("candidates_per_expansion: expected a positive integer")
        if self.graph_root_max_bytes < 0:
            raise ValueError("graph_root_max_bytes: expected a non-negative integer")
        if not 0.0 < self.stop_at_roofline_fraction <= 1.0:
            raise ValueError("stop_at_roofline_fraction: expected a number in (0, 1]")


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


def fold_pays(folded: Recognition, rec: Recognition) -> bool:
    """Whether the kernels after the convolutions take their bias adds without a kernel
    more than ``rec`` (the regions as written) has: an add left a kernel of its own (before
    a norm, whose prologue takes no second tensor) would cost the pass the fold saves. GEMM
    and convolution regions are alternatives to others and are not counted."""
    def kernels(r: Recognition) -> int:
        return sum(1 for region in r.regions if region.kind not in ("gemm", "gemm_reduce", "conv"))
    return bool(folded.regions) and kernels(folded) <= kernels(rec)


def fold_recognition(source: str, rec: Recognition) -> Recognition | None:
    """The folded recognition of ``source`` (:func:`.recognize.recognize_folded`) where the
    generator offers fold candidates (:func:`fold_pays` against ``rec``, the regions as
    written); None elsewhere."""
    folded = recognize_folded(source)
    return folded if folded is not None and fold_pays(folded, rec) else None


#: reductions the strided form computes for any order of the reduced elements (argmax and
#: argmin reduce one dim)
CHANNEL_REDUCTIONS = ("sum", "mean", "max", "min", "logsumexp", "argmax", "argmin")


#: outputs of a reduction whose reduced dims are not innermost in a channels-last tensor
#: below which its strided kernel (one program per output block, each the whole reduced
#: extent) has too few programs for the GPU: L2 #44's mean over 256 x 256 positions of 16 x 128
#: outputs ran 1.55x slower channels-last in session 21
MIN_STRIDED_OUTPUTS = 1 << 17


def channel_rows(region: Region) -> bool:
    """Whether ``region`` (a reduction) reads a channels-last tensor in place with enough
    parallelism (``rowcol.py.j2``'s strided form): its reduced dims are one block of the
    memory order (N, spatial..., C), and either the innermost (a reduction over the
    channels: one contiguous row per output) or with at least MIN_STRIDED_OUTPUTS outputs
    (a reduction over the depth of NDHWC: columns along H, W and C)."""
    if region.kind != "reduce" or region.op not in CHANNEL_REDUCTIONS:
        return False
    shape, d, k = region.shape, region.attrs.get("dim"), region.attrs.get("ndims", 1)
    if not isinstance(d, int) or len(shape) < 3:
        return False
    order = [0] + list(range(2, len(shape))) + [1]
    pos = sorted(order.index(x) for x in range(d, d + k))
    if pos != list(range(pos[0], pos[0] + k)):
        return False
    outer = math.prod(shape[order[p]] for p in range(pos[0]))
    inner = math.prod(shape[order[p]] for p in range(pos[-1] + 1, len(shape)))
    return inner == 1 or outer * inner >= MIN_STRIDED_OUTPUTS


def channels_last_reads(rec: Recognition, params: dict[str, Any]) -> bool:
    """Whether every kernel of ``params`` that reads a library convolution's output reads it
    channels-last without a copy: a pointwise kernel right after it (its tiled kernel writes
    the default layout back), a reduction over the channels or over enough outputs
    (:func:`channel_rows`, no split-row tile) or a 2-D or 3-D max or avg pool
    (``pool_cl.py.j2``, not the vector form). The channels-last candidate paid in the tuning sample's A/B where a pointwise kernel
    followed (call BW: L2 #2 6.61 -> 5.30 ms) and lost after a pool or a reduction that
    copied the tensor back to the default layout first (1.10-1.55x slower;
    `docs/validation/expert_generalisation.md`); since session 22 neither copies."""
    ids = region_ids(rec)
    for rid, conv in zip(ids, rec.regions):
        if conv.kind != "conv" or rid in params["lower"]:
            continue
        for other_id, other in zip(ids, rec.regions):
            if other is conv or conv.output not in other.inputs:
                continue
            if other_id not in params["lower"]:
                return False
            if other.kind == "pointwise" and other.epilogue_of == conv.output:
                continue
            if channel_rows(other) and "CHUNK" not in params["tiles"][other_id]:
                continue
            if pool_reads_channels_last(other) and not params["tiles"][other_id].get("VEC"):
                continue
            return False
    return True


#: the eager reference under PyTorch's default flags at least this share of its strict-fp32
#: time: TF32 gains it nothing, so its convolutions run on FMA pipes as run
TF32_IDLE_RATIO = 0.95


def reference_gains_from_tf32(baseline: Any) -> bool | None:
    """Whether the eager reference runs faster under the default flags (cuDNN may use TF32)
    than in strict fp32, from the run's baseline job; None where either time is missing.
    A candidate is allowed the error of the reference as run (`docs/evaluation.md`): where
    the reference's convolutions stay on FMA pipes, cuDNN's channels-last kernels, which
    take TF32 under the same flags, are off by more than that (tuning sample, L2 #82: the
    reference as run at 1.00x its strict time, its channels-last candidates rejected in
    sessions 21 and 23 with errors of 9e-4; where they passed, L2 #2, #32, #50, 0.41-0.54x)."""
    if baseline is None:
        return None
    default, strict = getattr(baseline, "baseline", None), getattr(baseline, "baseline_strict", None)
    if default is None or strict is None or not strict.median_ms or not default.median_ms:
        return None
    return default.median_ms < TF32_IDLE_RATIO * strict.median_ms


#: a profile of this many kernels may have been cut short (``kernelpro_plugins_ncu``'s
#: collector launches at most ``max_kernels``, 256 by default): its durations are then a part
#: of the forward's, and the GPU's idle time cannot be told from them
PROFILE_KERNEL_CAP = 256
#: the GPU idle for more than this share of the parent's timed call: its launches, not its
#: kernels, set the time, and a captured graph replays them without the CPU
GRAPH_IDLE_SHARE = 0.5


def gpu_idle_ms(parent: Any, io_bytes: int, bandwidth_gbs: float | None) -> float | None:
    """Milliseconds of the parent's timed call in which the GPU runs none of its kernels
    (its median time less its profiled kernels' durations), where that idle time is more
    than ``GRAPH_IDLE_SHARE`` of the call and more than twice what a captured graph adds
    (copying the inputs in and cloning the outputs: ``io_bytes`` read and written, at
    ``bandwidth_gbs``, 2,000 GB/s when unknown); else None. Profiled durations run with
    cold caches, one kernel at a time, so they overstate the GPU's busy time: the estimate
    errs towards None."""
    result = getattr(parent, "result", None)
    analysis = getattr(parent, "analysis", None)
    timing = getattr(result, "timing", None)
    bottleneck = getattr(analysis, "bottleneck", None)
    if timing is None or bottleneck is None or not timing.median_ms:
        return None
    ev = bottleneck.evidence or {}
    busy_us, kernels = ev.get("duration_us"), ev.get("kernels")
    if not busy_us or not kernels or kernels >= PROFILE_KERNEL_CAP:
        return None
    idle = timing.median_ms - busy_us / 1e3
    copy_ms = 2 * io_bytes / ((bandwidth_gbs or 2000.0) * 1e9) * 1e3
    if idle <= GRAPH_IDLE_SHARE * timing.median_ms or idle <= 2 * copy_ms:
        return None
    return idle


class ExpertGenerator(Generator):
    name = "expert"
    description = "offline: recognizes fusible regions and writes Triton kernels from templates, moved by findings"
    Settings = ExpertSettings

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        self._recognized: dict[str, Recognition] = {}
        self._folded: dict[str, Recognition | None] = {}

    def recognition(self, source: str, digest: str) -> Recognition:
        if digest not in self._recognized:
            self._recognized[digest] = recognize(source)
        return self._recognized[digest]

    def folded(self, source: str, digest: str) -> Recognition | None:
        """The regions with the convolutions' biases split off (:mod:`.foldbias`), where a
        kernel after a convolution takes its bias add; None where none does."""
        if digest not in self._folded:
            self._folded[digest] = fold_recognition(source, self.recognition(source, digest))
        return self._folded[digest]

    def recognition_for(self, request: GenerationRequest, params: dict[str, Any] | None) -> Recognition | None:
        """The recognition ``params`` index: the folded one for ``fold`` candidates."""
        problem = request.problem
        if params and params.get("fold"):
            return self.folded(problem.source, problem.digest)
        return self.recognition(problem.source, problem.digest)

    def proposals(self, request: GenerationRequest, rec: Recognition, every: bool = False) -> list[dict[str, Any]]:
        """The children of ``request``'s parent (the root's first candidates), in order.
        ``every``: whatever the parent's analysis could say (a superset: every move on every
        lowered region, a captured graph wherever graphs run, no stop at the roofline a profile
        could show; the stop its time shows stays)."""
        cuda = request.device.startswith("cuda") and self.settings.cuda_graphs
        parent = request.parent
        if parent is None or not parent.params or "tiles" not in parent.params:
            return self.root_proposals(rec, cuda, self.folded(request.problem.source, request.problem.digest),
                                       channels_last_ok=reference_gains_from_tf32(request.baseline) is not False)
        if parent.params.get("fold"):
            folded = self.folded(request.problem.source, request.problem.digest)
            if folded is None:
                return []
            rec = folded  # the subtree of a fold candidate indexes the folded regions
        # the stop at the roofline: by the parent's time alone (whatever a profile says: its
        # bytes are at least the minimum, its kernels' time at most its call's), or by its profile
        threshold = self.settings.stop_at_roofline_fraction
        at_roof = moves.near_least_time(parent.result, threshold) or (not every and moves.at_roofline(parent.analysis,
                                                                                                      threshold))
        # a reward that ranks something beside speed (its goal: energy per call) is still
        # served at the roofline: the time cannot fall, the joules of the same time can
        energy = at_roof and bool(request.goal.strip())
        if at_roof and not energy:
            return []
        pool = []
        ids = region_ids(rec)
        gemm_lowered = any(rec.regions[ids.index(r)].kind in ("gemm", "conv")
                           for r in parent.params["lower"] if r in ids)
        fp32_gemm = any(r.kind == "gemm" and r.attrs["dtype"] == "float32" for r in rec.regions)
        big = rec.io_bytes > self.settings.graph_root_max_bytes and not fp32_gemm
        plan = moves.plan(parent.analysis, list(parent.params["lower"]))
        idle = gpu_idle_ms(parent, rec.io_bytes, getattr(request.gpu, "dram_bandwidth_gbs", None)) if cuda else None
        if energy:
            plan = moves.energy_plan(None if every else parent.analysis, list(parent.params["lower"]))
            if every:  # what an energy_precision finding would add
                plan.append(("precision", None))
        elif every:
            plan, big = [(m, None) for m in moves.ALL_MOVES], False
        elif idle is not None:
            # the GPU idle most of the call: a captured graph first, whatever the forward's size
            # (its copies cost less than half the idle time)
            plan = [("graph", None)] + [item for item in plan if item[0] != "graph"]
            big = False
        for move, rid in plan:
            if move == "graph" and (not cuda or big):
                # a capture copies the inputs and clones the output on every call: for a large
                # memory-bound forward that costs more than the launches it saves (pass 4:
                # L1 #44 3.40 -> 5.44 ms, #46 3.74 -> 8.26 ms under a graph)
                continue
            if move == "precision" and not gemm_lowered:
                # the library's fp32 GEMM runs on FMA pipes: move it onto tensor cores
                # (the Triton GEMM with tf32x3 products, its epilogue fused)
                # (its kernel without graph capture: a capture cannot mend a kernel that
                # fails the check, and the root may have tried this very kernel already)
                alt = gemm_params(rec, "tf32x3")
                if alt is not None and "tf32x3" in str(alt["tiles"]):
                    # (a fold parent's regions are the folded recognition's: its child keeps the fold)
                    pool.append({**alt, "graph": False, **({"fold": True} if parent.params.get("fold") else {})})
                # and then the lowered tiles' own precision move (fast logs), below
            pool.extend(moves.apply(move, rid, parent.params))
        return pool

    def root_proposals(self, rec: Recognition, cuda: bool, folded: Recognition | None = None,
                       channels_last_ok: bool = True) -> list[dict[str, Any]]:
        """First candidates, in order (see the module doc). ``channels_last_ok``: False where
        the reference gains nothing from TF32 (:func:`reference_gains_from_tf32`)."""
        base = default_params(rec)
        pool = []
        rewrite = rewrite_params(rec)
        if rewrite is not None:
            pool.append(rewrite)  # a GEMM whose output is only summed over N: a matrix-vector product
        channels_last = layout_params(rec, base) if channels_last_ok and channels_last_reads(rec, base) else None
        if folded is not None:
            # the convolutions without their biases, the kernels after them adding them;
            # first with the library's convolutions channels-last, where their readers take it
            fold = default_params(folded)
            if fold["lower"]:
                fold = {**fold, "fold": True}
                fold_cl = fold_layout_params(rec, fold) if channels_last is not None else None
                pool += ([fold_cl] if fold_cl is not None else []) + [fold]
        if base["lower"]:
            pool.append(base)
        if channels_last is not None:
            pool.append(channels_last)
        ids = region_ids(rec)
        vectored = [r for r in base["lower"] if r in ids and vec_eligible(rec.regions[ids.index(r)])]
        if vectored:
            # windows with stride 1 along W: 4 outputs per thread from 16-byte loads of the
            # inputs they share, instead of one load per tap and output
            pool.append({**base, "tiles": {**base["tiles"], **{r: vec_tile() for r in vectored}}})
        fp32_gemm = any(r.kind == "gemm" and r.attrs["dtype"] == "float32" for r in rec.regions)
        # fp32 products (GEMMs or convolutions as implicit GEMMs): the Triton kernels come last
        fp32_mm = any(r.kind in ("gemm", "conv") and r.attrs["dtype"] == "float32" for r in rec.regions)
        gemm = gemm_params(rec)
        if gemm is not None and not fp32_mm:
            pool.append(gemm)  # fp16/bf16: the Triton GEMM with its epilogue fused is a contender
        # a captured graph replays the forward without its launches, but copies the inputs
        # into the captured buffers and clones the output: worth it for small forwards, and
        # for fp32 GEMMs, where the copies are small next to the library's GEMM
        if cuda and (rec.io_bytes <= self.settings.graph_root_max_bytes or fp32_gemm):
            if base["lower"]:
                pool.append({**base, "graph": True})
            pool.append({"lower": [], "graph": True, "tiles": base["tiles"]})
        if gemm is not None and fp32_mm:
            # fp32 products: tf32x3 (three tf32 tensor-core products) first, then ieee
            # (FMA pipes), which rarely beat the library
            tf32x3 = gemm_params(rec, "tf32x3")
            assert tf32x3 is not None  # the same regions as gemm's, which exist
            pool += [tf32x3, gemm]
        for start in [base] + ([gemm] if gemm is not None else []):
            first = moves.root_first({r: start["tiles"][r] for r in start["lower"]})
            pool += [child for move, rid in moves.plan(None, list(start["lower"]), first) if move != "graph"
                     for child in moves.apply(move, rid, start)]
        return pool

    def why_nothing(self, request: GenerationRequest) -> str:
        rec = self.recognition(request.problem.source, request.problem.digest)
        if not rec.ok:
            return f"no kernel template fits the problem: {rec.reason}"
        return "every variant its templates offer for this problem was tried"

    def expandable(self, request: GenerationRequest) -> bool:
        """Whether some analysis of the parent could make :meth:`generate` propose a child
        not tried yet: the moves are the templates' parameters, so a parent with no neighbour
        left (the reference's own ops in a captured graph: no region to move, the graph on) is
        closed without a profile, and so is one whose time alone puts it at its roofline."""
        rec = self.recognition(request.problem.source, request.problem.digest)
        return rec.ok and next(self._untried(request, self.proposals(request, rec, every=True)), None) is not None

    def _untried(self, request: GenerationRequest, pool: list[dict[str, Any]]):
        """(params, key, recognition) of each proposal in ``pool`` not tried before, in order."""
        tried = {_key(p) for p in request.tried}
        for params in pool:
            key = _key(params)
            if key in tried:
                continue
            tried.add(key)
            if not params["lower"] and not params.get("graph") and not params.get("layout"):
                continue
            own = self.recognition_for(request, params)
            if own is None:
                continue
            yield params, key, own

    def generate(self, request: GenerationRequest) -> list[CandidateDraft]:
        rec = self.recognition(request.problem.source, request.problem.digest)
        if not rec.ok:
            return []
        drafts = []
        for params, key, own in self._untried(request, self.proposals(request, rec)):
            drafts.append(CandidateDraft(
                source=render_candidate(request.problem.source, own, params),
                generator=self.name,
                language="triton" if is_triton(own, params) else "pytorch",
                description=describe(own, params),
                params=json.loads(key),
            ))
            if len(drafts) >= request.n:
                break
        return drafts
