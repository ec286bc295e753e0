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
   than the GPU has SMs (while the forward stays below ``small_grid_max_fraction`` of its
   roofline), or the kernels are so short (mean below ``launch_bound_us``) that launch
   overhead dominates.
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
    # ... unless the forward reaches this fraction of its roofline anyway (the at-roofline
    # line of the micro-profilers): then the grid moves the bytes or FLOPs near the roof and
    # is not what binds (PyTorch's layer-norm gamma/beta backward, 66.7 us at 85 % of the
    # DRAM roofline on fewer blocks than SMs, was called "too little work")
    small_grid_max_fraction: float = 0.75
    # mean kernel duration under which launch overhead (~2-5 us per launch) dominates
    launch_bound_us: float = 5.0
    # a forward achieving at least this fraction of its roofline is bound by that roof even
    # when no unit reaches busy_pct of the hardware peak (streaming kernels under ncu reach
    # 55-70% of the datasheet DRAM peak: docs/validation/ncu_tools.md)
    roofline_bound_fraction: float = 0.5


#: a roofline fraction above this is not measurement error (the H200 fixtures reach 104 % of
#: the datasheet DRAM roof): the GPU spec does not describe the GPU the report was taken on
WRONG_CEILINGS_FRACTION = 1.25


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


def timed(kernels: list[KernelProfile]) -> bool:
    """Whether every kernel has a duration, so that shares are shares of the time."""
    return bool(kernels) and all(k.duration_ns for k in kernels)


def kernel_weights(kernels: list[KernelProfile]) -> list[float]:
    """Durations in ns, or equal weights when a kernel has none."""
    if timed(kernels):
        return [float(k.duration_ns) for k in kernels]  # type: ignore[arg-type]
    return [1.0] * len(kernels)


#: counters the roofline's two sides are summed from: without any of one side's, that side is
#: unknown (not zero)
DRAM_COUNTERS = (M.DRAM_READ_BYTES, M.DRAM_WRITE_BYTES)
FLOP_COUNTERS = (M.FADD, M.FMUL, M.FFMA, M.DADD, M.DMUL, M.DFMA, M.HADD, M.HMUL, M.HFMA,
                 *[n for names in M.TENSOR_OPS.values() for n in names])


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
    has_dram = any(n in k.metrics for k in kernels for n in DRAM_COUNTERS)
    has_flops = any(n in k.metrics for k in kernels for n in FLOP_COUNTERS)
    dram = sum(M.dram_bytes(k.metrics) for k in kernels)
    if has_dram:
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
    if has_flops:
        ev["flops"] = total_flops
    if has_flops and has_dram and dram > 0:  # no DRAM byte: no finite intensity to give
        ev["arithmetic_intensity_flop_per_byte"] = total_flops / dram
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
    if spec is None or total_ns <= 0 or not (has_dram or has_flops):
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
    # a side without counters stays out: the fraction is then a lower bound from the other
    if has_dram:
        ev["memory_time_fraction"] = t_mem / seconds
        ev["dram_bandwidth_achieved_gbs"] = dram / seconds / 1e9
    if has_flops:
        ev["compute_time_fraction"] = t_compute / seconds
        ev["achieved_tflops"] = total_flops / seconds / 1e12
    ev["dram_bandwidth_peak_gbs"] = spec.dram_bandwidth_gbs
    ev["roofline_fraction"] = max(t_mem, t_compute) / seconds
    dominant = max(times, key=lambda k: times[k]) if times else "fp32"
    peak = peaks.get("fp64" if dominant == "fp64_tensor" else dominant, peaks["fp32"])
    ev["ridge_flop_per_byte"] = peak / bandwidth
    return ev


def busiest_pipe(ev: Mapping[str, float]) -> str | None:
    """tensor | fp32 | fp64 | int, by pipe utilisation; by FLOP-time share when missing;
    None when neither names a busy pipe."""
    pipes = {"tensor": ev.get("tensor_pipe_pct"), "fp32": ev.get("fma_pipe_pct"),
             "fp64": ev.get("fp64_pipe_pct"), "int": ev.get("alu_pipe_pct")}
    known = {k: v for k, v in pipes.items() if v is not None}
    if known and max(known.values()) > 0:
        return max(known, key=lambda k: known[k])
    shares = {"tensor": sum(ev.get(f"{k}_time_fraction", 0.0) for k in ("fp16", "bf16", "tf32", "fp8", "int8", "fp64_tensor")),
              "fp32": ev.get("fp32_time_fraction", 0.0), "fp64": ev.get("fp64_time_fraction", 0.0)}
    busiest = max(shares, key=lambda k: shares[k])
    return busiest if shares[busiest] > 0 else None


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
        mismatch = gpu_mismatch(spec, payload.get("device_name"), kernels)
        if mismatch:
            spec_note += f"; {mismatch}"
            ev["gpu_mismatch"] = 1.0

        def make(kind: str, summary: str, pipe: str | None = None) -> Bottleneck:
            return Bottleneck(kind=kind, summary=summary + spec_note, pipe=pipe,
                              roofline_fraction=fraction, evidence=ev, classifier=self.name)

        if small_share >= s.small_grid_time_share and (fraction is None or fraction < s.small_grid_max_fraction):
            fewer = f"fewer blocks (min {ev.get('grid_blocks_min', 0):.0f}) than the GPU's {sm_count:.0f} SMs"
            if timed(kernels):
                return make("too_little_work", f"too little work: {small_share:.0%} of the time is in kernels "
                            f"launching {fewer}")
            # without durations every kernel weighs the same: a share of the kernels, not of the time
            return make("too_little_work", f"too little work: {small_share:.0%} of the kernels launch {fewer} "
                        "(the report has no durations to weigh them by)")
        if mean_us is not None and mean_us < s.launch_bound_us and ev.get("sm_pct", 0) < s.busy_pct \
                and ev.get("memory_pct", 0) < s.busy_pct:
            return make("too_little_work",
                        f"launch-dominated: {len(kernels)} kernel(s) of {mean_us:.1f} us on average, "
                        f"below the ~{s.launch_bound_us:.0f} us where launch overhead dominates")
        missing = missing_metrics(kernels)
        mem_known, sm_known = "memory" not in missing, "sm" not in missing
        mem = max(ev.get("memory_pct", 0.0), ev.get("dram_pct", 0.0))
        sm = ev.get("sm_pct", 0.0)
        frac_txt = ""
        if fraction is not None:
            frac_txt = f"; at {fraction:.0%} of the roofline"
            if fraction > WRONG_CEILINGS_FRACTION:  # the ceilings cannot be this GPU's
                frac_txt += " (far above the ceilings: a wrong GPU spec, e.g. --gpu, or wrong counters)"
            elif fraction > 1:
                frac_txt += " (above the datasheet ceilings)"
        roof_missing = [what for what, key in (("DRAM bytes", "dram_bytes"), ("FLOP counts", "flops"))
                        if key not in ev]
        if roof_missing and fraction is not None:
            frac_txt += f"; {roof_missing[0]} are not in the report, so the roofline counts the other side only"
        elif len(roof_missing) == 2 and spec is not None:
            frac_txt += "; no roofline: the report has no DRAM-byte or FLOP counters"
        intensity = ev.get("arithmetic_intensity_flop_per_byte")
        ridge = ev.get("ridge_flop_per_byte")
        ai_txt = (f", intensity {intensity:.2f} FLOP/B vs ridge {ridge:.1f}"
                  if ridge is not None and intensity is not None else "")
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
        frac_txt += "".join(f"; {missing[k]} is not in the report" for k in ("memory", "sm") if k in missing)
        # a throughput the report lacks is left out, never printed as 0 %
        sm_txt = f"SM {sm:.0f}%" if sm_known else ""
        if memory_like:
            where = "DRAM" if ev.get("dram_pct", 0.0) >= ev.get("memory_pct", 0.0) - 1 else "L1/L2"
            bw = ev.get("dram_bandwidth_achieved_gbs")
            parts = [f"memory throughput {mem:.0f}% of peak" if mem_known else "", sm_txt,
                     f"{bw:.0f} of {ev['dram_bandwidth_peak_gbs']:.0f} GB/s" if bw is not None else "",
                     f"{_fmt_bytes(ev['dram_bytes'])} DRAM traffic" if "dram_bytes" in ev else ""]
            return make("memory", f"memory-bound ({where}){by_roof}: {', '.join(p for p in parts if p)}"
                        f"{ai_txt}{frac_txt}")
        if compute_like:
            pipe = busiest_pipe(ev)
            pct = {"tensor": ev.get("tensor_pipe_pct"), "fp32": ev.get("fma_pipe_pct"),
                   "fp64": ev.get("fp64_pipe_pct"), "int": ev.get("alu_pipe_pct")}.get(pipe or "")
            tf = ev.get("achieved_tflops")
            parts = [f"SM throughput {sm:.0f}% of peak" if sm_known else "",
                     f"{pipe} pipe {pct:.0f}% busy" if pct is not None else "",
                     "no pipe utilisation or FLOP count names the busy pipe" if pipe is None else "",
                     f"{tf:.1f} TFLOP/s" if tf is not None else ""]
            return make("compute", f"compute-bound ({pipe or 'pipe unknown'}){by_roof}: "
                        f"{', '.join(p for p in parts if p)}{ai_txt}{frac_txt}", pipe=pipe)
        occ = ev.get("achieved_occupancy_pct")
        occ_txt = f", achieved occupancy {occ:.0f}%" if occ is not None else ""
        issue = ev.get("issue_active_pct")
        issue_txt = f", issue slots {issue:.0f}% busy" if issue is not None else ""
        return make("latency", f"latency-bound: neither memory ({mem:.0f}% of peak) nor compute "
                    f"({sm:.0f}%) is busy{occ_txt}{issue_txt}{frac_txt}")


def report_arch(kernels: list[KernelProfile]) -> str:
    """The compute capability the report names ("sm_90"), "" when it does not."""
    for k in kernels:
        major, minor = k.metrics.get(M.CC_MAJOR), k.metrics.get(M.CC_MINOR)
        if major and minor is not None:  # 0: not a compute capability
            return f"sm_{major:.0f}{minor:.0f}"
    return ""


def gpu_mismatch(spec: GpuSpec | None, device_name: str | None, kernels: list[KernelProfile]) -> str | None:
    """Why ``spec`` is not the GPU the report was taken on (another device name, another SM
    count), or None when nothing the report says contradicts it."""
    if spec is None:
        return None
    from kernelpro.api import gpu_spec_matches

    arch = report_arch(kernels)
    if device_name and spec.match and not gpu_spec_matches(spec, device_name):
        return f"but the report was taken on {device_name!r}, which the {spec.name} spec does not describe"
    if device_name and not gpu_spec_matches(spec, device_name, arch):
        return f"but the report's GPU is {arch}, the {spec.name} spec {spec.arch}"
    sms = next((k.metrics[M.SM_COUNT] for k in kernels if M.SM_COUNT in k.metrics), None)
    if sms and spec.sm_count and round(sms) != spec.sm_count:
        return f"but the report's GPU has {sms:.0f} SMs, the {spec.name} spec {spec.sm_count}"
    return None
