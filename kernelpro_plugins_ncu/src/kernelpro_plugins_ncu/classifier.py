"""``RooflineClassifier``: names a candidate's bottleneck from stage-1 kernel counters.

Method. Over every profiled kernel (the forward's own kernels), totals are summed
(duration T, DRAM bytes, FLOPs per pipe) and percentages are averaged weighted by kernel
duration. Against the GPU's ceilings (DRAM bandwidth B, peak rate P_p of each pipe):

* time at the memory roof  t_mem = bytes / B
* time at each compute roof t_p = flops_p / P_p  (tensor ops by input type, FP32, FP64, FP16)
* roofline lower bound      t_min = max(t_mem, sum_p t_p)
* ``roofline_fraction``    = t_min / T  (1.0: running at the roofline)
* arithmetic intensity     = FLOPs / DRAM byte, ridge point = P / B of the dominant pipe

Classes, checked in order:

1. ``too_little_work``: most of the time is spent in kernels whose grid has fewer blocks
   than the GPU has SMs, or the kernels are so short (mean below ``launch_bound_us``)
   that launch overhead dominates.
2. ``memory``: memory throughput (the busiest of DRAM, L2, L1 in Nsight Compute's Speed Of
   Light) is at least ``busy_pct`` and at least the SM throughput.
3. ``compute``: SM throughput is at least ``busy_pct``; the pipe named is the busiest of
   tensor / fp32 / fp64 / int by pipe utilisation (FLOP-time share when missing).
4. Otherwise, when the forward still reaches ``roofline_bound_fraction`` of its roofline,
   the roof that binds (memory when t_mem >= sum t_p, else compute).
5. ``latency``: neither is busy: the kernels wait (dependencies, too few warps in flight).
6. ``unknown``: the report lacks the memory or SM throughput (a stage-2-only export) and the
   roofline does not decide: the summary names the missing metrics instead of reading
   "not measured" as "not busy".

Ceilings come from ``context.gpu``; when absent, the device name in the report is matched
against the registered specs (calibrated ceilings first, see :mod:`.calibrate`).
"""

from __future__ import annotations

from typing import Mapping

import attrs

from kernelpro.api import (
    Bottleneck,
    BottleneckClassifier,
    GpuSpec,
    KernelProfile,
    ProfileContext,
    ProfileData,
)

from kernelpro_plugins_ncu import metrics as M


@attrs.frozen
class RooflineSettings:
    # Nsight Compute's Speed Of Light guidance treats >60% of peak as high utilisation and
    # suggests looking for latency problems when both compute and memory are below it
    busy_pct: float = 60.0
    # a kernel with fewer blocks than SMs leaves SMs idle; it counts as "too little work"
    # when such kernels take at least this share of the time
    small_grid_time_share: float = 0.5
    # mean kernel duration under which launch overhead (~2-5 us per launch) dominates
    launch_bound_us: float = 5.0
    # a forward achieving at least this fraction of its roofline is bound by that roof even
    # when no unit reaches busy_pct of the hardware peak (streaming kernels under ncu reach
    # 55-70% of the datasheet DRAM peak: docs/validation/ncu_tools.md)
    roofline_bound_fraction: float = 0.5


def find_spec(device_name: str | None, arch: str = "") -> GpuSpec | None:
    """Calibrated spec for this device name if cached, else the registered table's."""
    if not device_name:
        return None
    from kernelpro_plugins_ncu.calibrate import resolve_gpu_spec, table_spec

    return resolve_gpu_spec(device_name, arch) or table_spec(device_name)


def _weighted(kernels: list[KernelProfile], weights: list[float], name: str) -> float | None:
    pairs = [(k.metrics[name], w) for k, w in zip(kernels, weights) if name in k.metrics]
    total = sum(w for _, w in pairs)
    if not pairs or total <= 0:
        return None
    return sum(v * w for v, w in pairs) / total


def kernel_weights(kernels: list[KernelProfile]) -> list[float]:
    """Durations in ns, or equal weights when a kernel has none."""
    if kernels and all(k.duration_ns for k in kernels):
        return [float(k.duration_ns) for k in kernels]  # type: ignore[arg-type]
    return [1.0] * len(kernels)


def pipe_peaks(spec: GpuSpec) -> dict[str, float]:
    """Peak rates per pipe, FLOP/s."""
    t = 1e12
    peaks = {
        "fp32": spec.fp32_tflops * t, "fp64": spec.fp64_tflops * t,
        "fp16": spec.fp16_tflops * t, "bf16": spec.bf16_tflops * t, "tf32": spec.tf32_tflops * t,
        "fp16_scalar": 2 * spec.fp32_tflops * t,  # packed HFMA2: twice the FP32 rate
    }
    if spec.fp8_tflops:
        peaks["fp8"] = spec.fp8_tflops * t
    if spec.int8_tops:
        peaks["int8"] = spec.int8_tops * t
    return peaks


def roofline_numbers(profile: ProfileData, spec: GpuSpec | None) -> dict[str, float]:
    """Totals, duration-weighted averages and roofline terms over the profile's kernels."""
    kernels = list(profile.kernels)
    weights = kernel_weights(kernels)
    ev: dict[str, float] = {"kernels": float(len(kernels))}
    total_ns = sum(float(k.duration_ns or 0.0) for k in kernels)
    ev["duration_us"] = total_ns / 1e3
    dram = sum(M.dram_bytes(k.metrics) for k in kernels)
    ev["dram_bytes"] = dram
    flops = {"fp32": sum(M.fp32_flops(k.metrics) for k in kernels),
             "fp64": sum(M.fp64_flops(k.metrics) for k in kernels),
             "fp16_scalar": sum(M.fp16_scalar_flops(k.metrics) for k in kernels)}
    for k in kernels:
        for kind, ops in M.tensor_ops_by_type(k.metrics).items():
            key = {"fp64": "fp64_tensor"}.get(kind, kind)
            flops[key] = flops.get(key, 0.0) + ops
    for kind, value in flops.items():
        if value:
            ev[f"{kind}_flops"] = value
    total_flops = sum(flops.values())
    ev["flops"] = total_flops
    ev["arithmetic_intensity_flop_per_byte"] = total_flops / dram if dram > 0 else float("inf") if total_flops else 0.0
    for key, name in (("dram_pct", M.DRAM_THROUGHPUT_PCT), ("memory_pct", M.MEM_THROUGHPUT_PCT),
                      ("sm_pct", M.SM_THROUGHPUT_PCT), ("l1_pct", M.L1_THROUGHPUT_PCT),
                      ("l2_pct", M.L2_THROUGHPUT_PCT), ("fma_pipe_pct", M.PIPE_FMA_PCT),
                      ("fp64_pipe_pct", M.PIPE_FP64_PCT), ("alu_pipe_pct", M.PIPE_ALU_PCT),
                      ("achieved_occupancy_pct", M.ACHIEVED_OCCUPANCY_PCT),
                      ("issue_active_pct", M.ISSUE_ACTIVE_PCT)):
        avg = _weighted(kernels, weights, name)
        if avg is not None:
            ev[key] = avg
    tensor = [(M.tensor_pipe_pct(k.metrics), w) for k, w in zip(kernels, weights)
              if any(n in k.metrics for n in (M.PIPE_TENSOR_HMMA_PCT, M.PIPE_TENSOR_PCT))]
    if tensor and sum(w for _, w in tensor) > 0:
        ev["tensor_pipe_pct"] = sum(v * w for v, w in tensor) / sum(w for _, w in tensor)
    grids = [k.metrics.get(M.GRID_SIZE) for k in kernels]
    if any(g is not None for g in grids):
        ev["grid_blocks_min"] = min(g for g in grids if g is not None)
    waves = _weighted(kernels, weights, M.WAVES_PER_SM)
    if waves is not None:
        ev["waves_per_sm"] = waves
    sm_count = next((k.metrics[M.SM_COUNT] for k in kernels if M.SM_COUNT in k.metrics), None)
    if sm_count is None and spec is not None:
        sm_count = float(spec.sm_count)
    if sm_count:
        ev["sm_count"] = float(sm_count)
    if spec is None or total_ns <= 0:
        return ev
    seconds = total_ns * 1e-9
    bandwidth = spec.dram_bandwidth_gbs * 1e9
    t_mem = dram / bandwidth
    peaks = pipe_peaks(spec)
    times = {}
    for kind, value in flops.items():
        peak = peaks.get("fp64" if kind == "fp64_tensor" else kind)
        if value and peak:
            times[kind] = value / peak
            ev[f"{kind}_time_fraction"] = times[kind] / seconds
    t_compute = sum(times.values())
    ev["memory_time_fraction"] = t_mem / seconds
    ev["compute_time_fraction"] = t_compute / seconds
    ev["dram_bandwidth_achieved_gbs"] = dram / seconds / 1e9
    ev["dram_bandwidth_peak_gbs"] = spec.dram_bandwidth_gbs
    ev["roofline_fraction"] = max(t_mem, t_compute) / seconds
    dominant = max(times, key=lambda k: times[k]) if times else "fp32"
    peak = peaks.get("fp64" if dominant == "fp64_tensor" else dominant, peaks["fp32"])
    ev["ridge_flop_per_byte"] = peak / bandwidth
    ev["achieved_tflops"] = total_flops / seconds / 1e12
    return ev


def busiest_pipe(ev: Mapping[str, float]) -> str:
    """tensor | fp32 | fp64 | int, by pipe utilisation; by FLOP-time share when missing."""
    pipes = {"tensor": ev.get("tensor_pipe_pct"), "fp32": ev.get("fma_pipe_pct"),
             "fp64": ev.get("fp64_pipe_pct"), "int": ev.get("alu_pipe_pct")}
    known = {k: v for k, v in pipes.items() if v is not None}
    if known and max(known.values()) > 0:
        return max(known, key=lambda k: known[k])
    shares = {"tensor": sum(ev.get(f"{k}_time_fraction", 0.0) for k in ("fp16", "bf16", "tf32", "fp8", "int8", "fp64_tensor")),
              "fp32": ev.get("fp32_time_fraction", 0.0), "fp64": ev.get("fp64_time_fraction", 0.0)}
    return max(shares, key=lambda k: shares[k])


def missing_metrics(kernels: list[KernelProfile]) -> dict[str, str]:
    """The Speed Of Light throughputs no profiled kernel has, by role ("memory", "sm"):
    what a classification by utilisation needs (a stage-2-only report lacks them)."""
    def has(*names: str) -> bool:
        return any(n in k.metrics for k in kernels for n in names)

    out = {}
    if not has(M.MEM_THROUGHPUT_PCT, M.DRAM_THROUGHPUT_PCT):
        out["memory"] = f"memory throughput ({M.MEM_THROUGHPUT_PCT} or {M.DRAM_THROUGHPUT_PCT})"
    if not has(M.SM_THROUGHPUT_PCT):
        out["sm"] = f"SM throughput ({M.SM_THROUGHPUT_PCT})"
    return out


def _fmt_bytes(n: float) -> str:
    for unit, div in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{n:.0f} B"


class RooflineClassifier(BottleneckClassifier):
    """Memory / compute (which pipe) / latency / too little work, with roofline numbers."""

    name = "roofline"
    Settings = RooflineSettings
    description = "roofline and Speed Of Light bottleneck classes from Nsight Compute counters"

    def classify(self, profiles: Mapping[str, ProfileData], context: ProfileContext) -> Bottleneck | None:
        profile = profiles.get("kernel")
        if profile is None or not profile.kernels:
            return None
        payload = profile.payload if isinstance(profile.payload, dict) else {}
        spec = context.gpu or find_spec(payload.get("device_name"))
        ev = roofline_numbers(profile, spec)
        s = self.settings
        fraction = ev.get("roofline_fraction")
        kernels = list(profile.kernels)
        weights = kernel_weights(kernels)
        total_w = sum(weights) or 1.0
        sm_count = ev.get("sm_count")

        small_share = 0.0
        if sm_count:
            small_share = sum(w for k, w in zip(kernels, weights)
                              if k.metrics.get(M.GRID_SIZE, sm_count) < sm_count) / total_w
        ev["small_grid_time_share"] = small_share
        mean_us = ev["duration_us"] / len(kernels) if ev.get("duration_us") else None
        spec_note = f" (ceilings: {spec.name}, {spec.source})" if spec else " (no GPU spec: no roofline)"

        def make(kind: str, summary: str, pipe: str | None = None) -> Bottleneck:
            return Bottleneck(kind=kind, summary=summary + spec_note, pipe=pipe,
                              roofline_fraction=fraction, evidence=ev, classifier=self.name)

        if small_share >= s.small_grid_time_share:
            return make("too_little_work",
                        f"too little work: {small_share:.0%} of the time is in kernels launching fewer "
                        f"blocks (min {ev.get('grid_blocks_min', 0):.0f}) than the GPU's {sm_count:.0f} SMs")
        if mean_us is not None and mean_us < s.launch_bound_us and ev.get("sm_pct", 0) < s.busy_pct \
                and ev.get("memory_pct", 0) < s.busy_pct:
            return make("too_little_work",
                        f"launch-dominated: {len(kernels)} kernel(s) of {mean_us:.1f} us on average, "
                        f"below the ~{s.launch_bound_us:.0f} us where launch overhead dominates")
        mem = max(ev.get("memory_pct", 0.0), ev.get("dram_pct", 0.0))
        sm = ev.get("sm_pct", 0.0)
        frac_txt = f"; at {fraction:.0%} of the roofline" if fraction is not None else ""
        intensity = ev.get("arithmetic_intensity_flop_per_byte", 0.0)
        ridge = ev.get("ridge_flop_per_byte")
        ai_txt = (f", intensity {intensity:.2f} FLOP/B vs ridge {ridge:.1f}" if ridge is not None
                  and intensity != float("inf") else "")
        missing = missing_metrics(kernels)
        mem_known, sm_known = "memory" not in missing, "sm" not in missing
        memory_like = mem_known and mem >= s.busy_pct and mem >= sm
        compute_like = not memory_like and sm_known and sm >= s.busy_pct
        by_roof = ""
        if not memory_like and not compute_like and fraction is not None \
                and fraction >= s.roofline_bound_fraction:
            memory_like = ev.get("memory_time_fraction", 0.0) >= ev.get("compute_time_fraction", 0.0)
            compute_like = not memory_like
            by_roof = " by the roofline"
        if not memory_like and not compute_like and missing:
            # without the throughputs "neither unit is busy" cannot be told from "not measured"
            return make("unknown", "not classified: the report lacks " + "; ".join(missing.values())
                        + " (Nsight Compute's Speed Of Light section, which KernelPro's stage-1 pass collects)"
                        + ("" if fraction is not None and fraction > 0 else
                           "; the roofline cannot decide either without DRAM bytes or FLOP counts and a GPU spec"))
        frac_txt += "".join(f"; {missing[k]} is not in the report" for k in ("memory", "sm")
                            if k in missing and not by_roof)
        if memory_like:
            where = "DRAM" if ev.get("dram_pct", 0.0) >= ev.get("memory_pct", 0.0) - 1 else "L1/L2"
            bw = ev.get("dram_bandwidth_achieved_gbs")
            bw_txt = f", {bw:.0f} of {ev['dram_bandwidth_peak_gbs']:.0f} GB/s" if bw is not None else ""
            return make("memory", f"memory-bound ({where}){by_roof}: memory throughput {mem:.0f}% of peak, "
                        f"SM {sm:.0f}%{bw_txt}, {_fmt_bytes(ev['dram_bytes'])} DRAM traffic{ai_txt}{frac_txt}")
        if compute_like:
            pipe = busiest_pipe(ev)
            pct = {"tensor": ev.get("tensor_pipe_pct"), "fp32": ev.get("fma_pipe_pct"),
                   "fp64": ev.get("fp64_pipe_pct"), "int": ev.get("alu_pipe_pct")}.get(pipe)
            pipe_txt = f", {pipe} pipe {pct:.0f}% busy" if pct is not None else ""
            tf = ev.get("achieved_tflops")
            tf_txt = f", {tf:.1f} TFLOP/s" if tf is not None else ""
            return make("compute", f"compute-bound ({pipe}){by_roof}: SM throughput {sm:.0f}% of peak{pipe_txt}"
                        f"{tf_txt}{ai_txt}{frac_txt}", pipe=pipe)
        occ = ev.get("achieved_occupancy_pct")
        occ_txt = f", achieved occupancy {occ:.0f}%" if occ is not None else ""
        issue = ev.get("issue_active_pct")
        issue_txt = f", issue slots {issue:.0f}% busy" if issue is not None else ""
        return make("latency", f"latency-bound: neither memory ({mem:.0f}% of peak) nor compute "
                    f"({sm:.0f}%) is busy{occ_txt}{issue_txt}{frac_txt}")
