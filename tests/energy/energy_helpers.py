"""Hand-made EvalResults and records for the energy reward and report tests."""

from __future__ import annotations

from kernelpro.records import EvalResult, TimingStats, Verdict


def timing(ms: float) -> TimingStats:
    return TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, cv=0.0, n=10,
                       method="cuda_event")


def result(runtime_ms: float | None = 1.0, energy_j: float | None = None, reference_j: float | None = None,
           baseline_ms: float = 2.0, verdict: Verdict = Verdict.CORRECT) -> EvalResult:
    energy = {}
    if energy_j is not None:
        energy["energy_j_per_call"] = energy_j
    if reference_j is not None:
        energy["reference_energy_j_per_call"] = reference_j
    return EvalResult(
        verdict=verdict,
        timing=timing(runtime_ms) if runtime_ms is not None else None,
        baseline=timing(baseline_ms),
        measurements={"energy": energy} if energy else {},
        device="cuda",
    )


def record(cid: str, runtime_ms: float | None, energy_j: float | None, correct: bool = True,
           reference_j: float | None = 0.01, reward: float = 0.0, flags: tuple[str, ...] = ()) -> dict:
    energy = {}
    if energy_j is not None:
        energy = {"energy_j_per_call": energy_j, "energy_cv": 0.004, "power_w": 512.5,
                  "power_w_sampled": 509.0, "trials": 5.0, "window_s": 1.55,
                  "time_per_call_ms": runtime_ms * 1.01 if runtime_ms else None,
                  "reference_energy_j_per_call": reference_j}
    return {
        "id": cid,
        "verdict": "correct" if correct else "incorrect",
        "correct": correct,
        "runtime_ms": runtime_ms,
        "speedup": (2.0 / runtime_ms) if correct and runtime_ms else None,
        "reward": reward,
        "flags": list(flags),
        "measurements": {"energy": energy} if energy else {},
    }
