"""ncu passes started ahead (``NcuCollector.start_ahead``): when a profile ends, the next
pass's ncu and interpreter start and wait for their job (torch imported, no CUDA context);
the next profile with the same command only sends its job. Against the stand-in ncu in its
``run`` mode, which runs the profiled forward on the CPU."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

import pytest

from kernelpro.api import CollectorError, ProfileTarget
from kernelpro_plugins_ncu import collector as C
from kernelpro_plugins_ncu.collector import NcuCollector, NcuSettings

from test_ncu_collector import FAKE, fake, profiled_calls  # noqa: F401  (fixture)

DATA = Path(__file__).resolve().parents[1] / "core" / "data"


@pytest.fixture
def running(fake, monkeypatch):  # noqa: F811
    monkeypatch.setenv("FAKE_NCU_MODE", "run")
    C.discard_ahead()
    yield fake
    C.discard_ahead()


def _target(tmp_path, name: str, env: dict[str, str] | None = None) -> ProfileTarget:
    return ProfileTarget(problem_path=DATA / "tiny_problem.py", candidate_path=DATA / "good.py", device="cuda",
                         workdir=tmp_path / name, python=sys.executable, env=env or {"MY_VAR": name})


def _logged(calls, n: int = 1) -> list[list[str]]:
    """The stand-in's profiled calls once ``n`` have started (it logs its argv at start)."""
    end = time.monotonic() + 60
    while len(profiled_calls(calls)) < n and time.monotonic() < end:
        time.sleep(0.1)
    return profiled_calls(calls)


def _waiting() -> list[C._Ahead]:
    with C._AHEAD_GUARD:
        return list(C._AHEAD.values())


def test_the_next_profile_takes_the_pass_started_ahead(tmp_path, running):
    col = NcuCollector(NcuSettings(ncu_path=str(FAKE)))
    col.start_ahead(_target(tmp_path, "first"), 1, ["sm__warps_active.avg.pct_of_peak_sustained_active"])
    (ahead,) = _waiting()
    assert ahead.alive()
    time.sleep(1.0)  # what it does before its job: start, import torch
    data = col.collect(_target(tmp_path, "second"), 1, ["sm__warps_active.avg.pct_of_peak_sustained_active"])
    calls = profiled_calls(running)
    assert len(calls) == 1 and calls[0][-1] == "--job-on-stdin"  # no second ncu was started
    work = tmp_path / "second"
    assert (work / "ncu_stage1.ncu-rep").exists() and not ahead.dir.exists()
    assert not _waiting() and not ahead.alive()
    # the job's options, variables and directory reached the forward
    sidecar = json.loads((work / "ncu_stage1.json").read_text())
    assert "--problem" in sidecar["command"] and str(work / "forward_io.json") in sidecar["command"]
    assert sidecar["io"]["input_bytes"] == 64 * 128 * 4
    assert set(data.seconds) >= {"start", "import", "prepare", "warmup", "replay", "finish"}


def test_a_job_gets_its_own_variables_and_directory(tmp_path, running):
    probe = tmp_path / "probe.py"
    probe.write_text((DATA / "good.py").read_text() + "\nimport os, pathlib\n"
                     "pathlib.Path(os.environ['OUT_FILE']).write_text(os.getcwd() + ' ' + os.environ.get('MY_VAR', '-'))\n")
    col = NcuCollector(NcuSettings(ncu_path=str(FAKE)))
    first = _target(tmp_path, "first", {"MY_VAR": "first", "OUT_FILE": str(tmp_path / "seen_first")})
    col.start_ahead(first, 1)
    second = ProfileTarget(problem_path=DATA / "tiny_problem.py", candidate_path=probe, device="cuda",
                           workdir=tmp_path / "second", python=sys.executable,
                           env={"MY_VAR": "second", "OUT_FILE": str(tmp_path / "seen")})
    col.collect(second, 1)
    assert (tmp_path / "seen").read_text() == f"{tmp_path / 'second'} second"


def test_a_pass_with_another_command_is_not_used(tmp_path, running):
    col = NcuCollector(NcuSettings(ncu_path=str(FAKE)))
    col.start_ahead(_target(tmp_path, "first"), 1, ["sm__warps_active.avg.pct_of_peak_sustained_active"])
    (ahead,) = _waiting()
    _logged(running)
    col.collect(_target(tmp_path, "second"), 1)  # stage 1 without metrics: another command
    calls = profiled_calls(running)
    assert len(calls) == 2 and calls[0][-1] == "--job-on-stdin" and calls[1][-1] != "--job-on-stdin"
    assert not _waiting() and not ahead.alive() and not ahead.dir.exists()


def test_a_pass_started_ahead_that_hangs_times_out(tmp_path, running, monkeypatch):
    col = NcuCollector(NcuSettings(ncu_path=str(FAKE), timeout_s=3))
    col.start_ahead(_target(tmp_path, "first"), 1)
    (ahead,) = _waiting()
    hang = tmp_path / "hang.py"
    hang.write_text((DATA / "good.py").read_text() + "\nimport time\ntime.sleep(600)\n")
    target = ProfileTarget(problem_path=DATA / "tiny_problem.py", candidate_path=hang, device="cuda",
                           workdir=tmp_path / "hang", python=sys.executable)
    with pytest.raises(CollectorError, match="did not finish within 3 s"):
        col.collect(target, 1)
    assert not ahead.alive()


def test_nothing_is_left_when_no_profile_takes_it(tmp_path, running):
    col = NcuCollector(NcuSettings(ncu_path=str(FAKE)))
    col.start_ahead(_target(tmp_path, "first"), 1)
    col.start_ahead(_target(tmp_path, "again"), 1)  # the same command: the one waiting is kept
    (ahead,) = _waiting()
    C.discard_ahead()
    assert not ahead.alive() and not ahead.dir.exists() and not _waiting()
    # orphaned (its parent gone: its stdin ends): the interpreter and ncu leave
    col.start_ahead(_target(tmp_path, "orphan"), 1)
    (orphan,) = _waiting()
    with C._AHEAD_GUARD:
        C._AHEAD.clear()
    assert orphan.proc.stdin is not None
    orphan.proc.stdin.close()
    assert orphan.proc.wait(timeout=120) == 0
    orphan.discard()


def test_not_started_when_switched_off_or_unavailable(tmp_path, running):
    NcuCollector(NcuSettings(ncu_path=str(FAKE), start_ahead=False)).start_ahead(_target(tmp_path, "a"), 1)
    cpu = ProfileTarget(problem_path=DATA / "tiny_problem.py", candidate_path=DATA / "good.py", device="cpu",
                        workdir=tmp_path / "cpu", python=sys.executable)
    NcuCollector(NcuSettings(ncu_path=str(FAKE))).start_ahead(cpu, 1)
    assert not _waiting()


def test_an_ncu_that_passes_no_stdin_on_costs_one_pass(tmp_path, running, monkeypatch):
    """Should an ncu not hand its stdin to the profiled process, the pass started ahead
    ends without a job: the profile runs a pass for its job instead, and nothing is
    started ahead with that ncu again."""
    monkeypatch.setenv("FAKE_NCU_MODE", "run_nostdin")
    monkeypatch.setattr(NcuCollector, "_no_ahead", set())
    col = NcuCollector(NcuSettings(ncu_path=str(FAKE)))
    col.start_ahead(_target(tmp_path, "first"), 1)
    data = col.collect(_target(tmp_path, "second"), 1)
    assert (tmp_path / "second" / "forward_io.json").exists() and data.kernels
    assert any("did not get its job" in n for n in data.notes)
    col.start_ahead(_target(tmp_path, "third"), 1)
    assert not _waiting()


@pytest.mark.parametrize("name", ["raises", "segfault"])
def test_a_candidate_that_fails_under_a_pass_started_ahead_fails_alone(tmp_path, running, monkeypatch, name):
    """The job arrived (the forward says so before it loads anything): a candidate that
    fails or dies there is its own failure, and passes keep being started ahead."""
    monkeypatch.setattr(NcuCollector, "_no_ahead", set())
    col = NcuCollector(NcuSettings(ncu_path=str(FAKE)))
    col.start_ahead(_target(tmp_path, "first"), 1)
    bad = ProfileTarget(problem_path=DATA / "tiny_problem.py", candidate_path=DATA / f"{name}.py", device="cuda",
                        workdir=tmp_path / name, python=sys.executable)
    with pytest.raises(CollectorError):
        col.collect(bad, 1)
    assert not NcuCollector._no_ahead
    assert len(profiled_calls(running)) == 1  # no pass run again for it
