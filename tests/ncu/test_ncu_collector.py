"""NcuCollector against a stand-in ncu (tests/ncu/fake_ncu.py): command, parsing, errors."""

import json
import sys
from pathlib import Path

import pytest

from kernelpro.api import CollectorError, ProfileTarget

from kernelpro_plugins_ncu import metrics as M
from kernelpro_plugins_ncu import report as R
from kernelpro_plugins_ncu.collector import NcuCollector, NcuSettings, diagnose

from ncu_helpers import memory_bound_metrics, raw_csv

FAKE = Path(__file__).with_name("fake_ncu.py")


@pytest.fixture
def fake(tmp_path, monkeypatch):
    monkeypatch.setattr(R, "import_ncu_report", lambda ncu_path=None: None)  # read via ncu --import
    monkeypatch.setattr(NcuCollector, "_known_unavailable", {})
    monkeypatch.setattr(NcuCollector, "_metric_catalogue", {})
    monkeypatch.setattr(NcuCollector, "_rejected", {})
    log = tmp_path / "argv.jsonl"
    csv_path = tmp_path / "raw.csv"
    csv_path.write_text(raw_csv([("kp_copy(float const*, float*)", {M.DURATION_NS: 1e6, **memory_bound_metrics()}),
                                 ("kp_other(float*)", {M.DURATION_NS: 2e5, M.GRID_SIZE: 4})]))
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    monkeypatch.setenv("FAKE_NCU_CSV", str(csv_path))
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    monkeypatch.delenv("FAKE_NCU_BAD", raising=False)
    monkeypatch.delenv("FAKE_NCU_QUERY", raising=False)

    def calls():
        return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []

    return calls


def target(tmp_path, device="cuda"):
    return ProfileTarget(problem_path=tmp_path / "p.py", candidate_path=tmp_path / "c.py", device=device,
                         workdir=tmp_path / "work", python=sys.executable, env={"MY_VAR": "1"})


def collector(**kw):
    return NcuCollector(NcuSettings(ncu_path=str(FAKE), **kw))


def profiled_calls(calls):
    return [c for c in calls() if "--export" in c]


def test_stage1_command_and_parse(tmp_path, fake):
    data = collector().collect(target(tmp_path), 1)
    argv = profiled_calls(fake)[0]
    joined = " ".join(argv)
    assert "--clock-control none" in joined and "--profile-from-start off" in joined
    assert "--target-processes all" in joined
    for section in M.STAGE1_SECTIONS:
        assert f"--section {section}" in joined
    assert M.DRAM_READ_BYTES in argv[argv.index("--metrics") + 1]
    # core's forward driver runs the candidate, not the reference, and records its I/O bytes
    assert "kernelpro.evaluate.forward" in argv and "--candidate" in argv and "--io-json" in argv
    assert data.level == "kernel" and data.collector == "ncu" and len(data.kernels) == 2
    assert data.kernels[0].duration_ns == 1e6
    assert data.kernels[0].metrics[M.DRAM_READ_BYTES] == 2.15e9
    sidecar = json.loads((tmp_path / "work" / "ncu_stage1.json").read_text())
    assert sidecar["stage"] == 1 and sidecar["wall_s"] >= 0


def test_stage2_asks_only_given_metrics_and_merges_stage1(tmp_path, fake):
    c = collector(source_lines=True)
    c.collect(target(tmp_path), 1)
    data = c.collect(target(tmp_path), 2, [M.SHARED_LD_CONFLICTS])
    argv = profiled_calls(fake)[-1]
    asked = argv[argv.index("--metrics") + 1].split(",")
    assert M.SHARED_LD_CONFLICTS in asked and M.DRAM_READ_BYTES not in asked
    assert "--section" in argv and argv[argv.index("--section") + 1] == "SourceCounters"
    assert "SpeedOfLight" not in argv
    assert data.kernels[0].metrics[M.DRAM_READ_BYTES] == 2.15e9  # merged from stage 1


def test_stage1_with_metrics_is_one_ncu_run_with_both(tmp_path, fake):
    """combines_stages: stage 1 asked with stage-2 metrics runs ncu once, with the stage-1
    sections and metrics, the stage-2 base metrics, the asked ones and the source counters."""
    assert NcuCollector.combines_stages
    data = collector(source_lines=True).collect(target(tmp_path), 1, [M.SHARED_LD_CONFLICTS])
    runs = profiled_calls(fake)
    assert len(runs) == 1
    argv = runs[0]
    joined = " ".join(argv)
    for section in M.STAGE1_SECTIONS:
        assert f"--section {section}" in joined
    assert "--section SourceCounters" in joined and "--import-source yes" in joined
    asked = argv[argv.index("--metrics") + 1].split(",")
    assert M.SHARED_LD_CONFLICTS in asked and M.DRAM_READ_BYTES in asked
    assert all(m in asked for m in M.STAGE2_BASE_METRICS if m not in M.SECTION_ONLY)
    assert len(asked) == len(set(asked))
    assert data.kernels[0].metrics[M.DRAM_READ_BYTES] == 2.15e9
    sidecar = json.loads((tmp_path / "work" / "ncu_stage1.json").read_text())
    assert sidecar["stage"] == 1 and sidecar["with_stage2_metrics"] is True


def test_unknown_metric_is_dropped_and_retried(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_BAD", M.PIPE_TENSOR_PCT)
    data = collector().collect(target(tmp_path), 1)
    assert len(profiled_calls(fake)) == 2
    assert any(M.PIPE_TENSOR_PCT in n for n in data.notes)
    # remembered: the next collection does not ask again
    collector().collect(target(tmp_path), 1)
    last = profiled_calls(fake)[-1]
    assert M.PIPE_TENSOR_PCT not in last[last.index("--metrics") + 1]


def test_metric_catalogue_filters_unlisted_names(tmp_path, fake, monkeypatch):
    listed = sorted({M.base_name(m) for m in M.STAGE1_METRICS} - {M.base_name(M.PIPE_FP64_PCT)})
    listed += [f"filler__metric_{i}" for i in range(300)]
    query = tmp_path / "query.txt"
    query.write_text("\n".join(f"{n}   Counter   #   description" for n in listed))
    monkeypatch.setenv("FAKE_NCU_QUERY", str(query))
    data = collector().collect(target(tmp_path), 1)
    argv = profiled_calls(fake)[0]
    assert M.PIPE_FP64_PCT not in argv[argv.index("--metrics") + 1]
    assert M.GRID_SIZE in argv[argv.index("--metrics") + 1]  # launch__ names are never filtered
    assert any("skipped" in n and M.PIPE_FP64_PCT in n for n in data.notes)


@pytest.mark.parametrize("mode,needle", [("perm", "ERR_NVGPUCTRPERM"), ("library", "LibraryNotLoaded")])
def test_unusable_profiler_gives_one_line_and_is_remembered(tmp_path, fake, monkeypatch, mode, needle):
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    c = collector()
    with pytest.raises(CollectorError) as err:
        c.collect(target(tmp_path), 1)
    msg = str(err.value)
    assert needle in msg and "\n" not in msg and "timing only" in msg
    assert c.unavailable_reason(target(tmp_path)) == msg


def test_no_kernels_is_an_empty_profile(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "nokernels")
    data = collector().collect(target(tmp_path), 1)
    assert data.kernels == () and "no kernel" in data.notes[-1]


def test_forward_failure_is_one_line(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "fail")
    with pytest.raises(CollectorError, match="the profiled forward failed: RuntimeError: CUDA error"):
        collector().collect(target(tmp_path), 1)


def test_timeout(tmp_path, fake, monkeypatch):
    monkeypatch.setenv("FAKE_NCU_MODE", "sleep")
    with pytest.raises(CollectorError, match="did not finish within 1 s"):
        collector(timeout_s=1.0).collect(target(tmp_path), 1)


def test_missing_ncu_and_cpu_device(tmp_path, monkeypatch):
    monkeypatch.setattr("kernelpro_plugins_ncu.collector.find_ncu", lambda configured=None: None)
    reason = NcuCollector().unavailable_reason(target(tmp_path))
    assert reason.startswith("ncu (Nsight Compute) not found") and "PATH" in reason
    with pytest.raises(CollectorError, match="not found"):
        NcuCollector().collect(target(tmp_path), 1)
    assert "CUDA devices only" in NcuCollector().unavailable_reason(target(tmp_path, device="cpu"))


def test_diagnose_lines():
    assert diagnose("==ERROR== Profiling is not supported on this device") .startswith("ncu does not support")
    assert diagnose("all fine") is None


def test_rejected_metrics_any_wording():
    from kernelpro_plugins_ncu.collector import rejected_metrics

    asked = ["dram__bytes_read.sum", "dram__bytes_read.sum.per_second", "launch__grid_size"]
    assert rejected_metrics("==ERROR== Failed to find metric dram__bytes_read.sum", asked) == ["dram__bytes_read.sum"]
    assert rejected_metrics('==ERROR== Option --metrics: "launch__grid_size" is not valid', asked) == ["launch__grid_size"]
    assert rejected_metrics("==PROF== profiling dram__bytes_read.sum", asked) == []


def test_section_only_metric_asks_for_its_section(tmp_path, fake):
    collector().collect(target(tmp_path), 2, [M.THEORETICAL_OCCUPANCY_PCT, M.L2_HIT_PCT])
    argv = profiled_calls(fake)[-1]
    assert "Occupancy" in argv and M.THEORETICAL_OCCUPANCY_PCT not in argv[argv.index("--metrics") + 1]
    assert M.L2_HIT_PCT in argv[argv.index("--metrics") + 1]


def test_stale_report_is_never_read(tmp_path, fake, monkeypatch):
    work = tmp_path / "work"
    work.mkdir()
    (work / "ncu_stage1.ncu-rep").write_text("an earlier candidate's report")
    monkeypatch.setenv("FAKE_NCU_MODE", "nokernels")
    data = collector().collect(target(tmp_path), 1)
    assert data.kernels == () and not (work / "ncu_stage1.ncu-rep").exists()


def test_phase_seconds_split_the_run():
    from kernelpro_plugins_ncu.collector import phase_seconds

    phases = {"main": 100.5, "torch": 104.0, "prepared": 105.0, "warmup": 108.0, "profiled": 111.0}
    got = phase_seconds(phases, launched=100.0, ended=112.0)
    assert got == {"start": 0.5, "import": 3.5, "prepare": 1.0, "warmup": 3.0, "replay": 3.0, "finish": 1.0}
    assert sum(got.values()) == 12.0
    # an older forward, or one that failed before saying: nothing rather than a wrong split
    assert phase_seconds(None, 100.0, 112.0) == {}
    assert phase_seconds({"main": 100.5, "torch": 104.0}, 100.0, 112.0) == {}
    # on a GPU shared with other jobs the forward waited for it alone before preparing
    shared = phase_seconds({**phases, "locked": 104.75}, launched=100.0, ended=112.0)
    assert shared["gpu_lock"] == 0.75 and shared["prepare"] == 0.25 and sum(shared.values()) == 12.0
