"""The lock of a GPU shared by several jobs (kernelpro.gpulock): shared holders run
together, an exclusive holder runs alone, moving between modes cannot deadlock, and
without the variable nothing is locked. flock(2) locks of separate open files conflict
within one process too, so threads stand in for the processes here."""

from __future__ import annotations

import os
import threading
import time

import pytest

from kernelpro import gpulock
from kernelpro.gpulock import EXCLUSIVE, SHARED, GpuLock


def _acquire_in_thread(path, mode, log, name, hold_s=0.0):
    def go():
        lock = GpuLock(path)
        lock.hold(mode)
        log.append((name, "got", time.monotonic()))
        time.sleep(hold_s)
        lock.close()
        log.append((name, "left", time.monotonic()))

    t = threading.Thread(target=go)
    t.start()
    return t


def test_without_the_variable_nothing_is_locked(monkeypatch):
    monkeypatch.delenv(gpulock.ENV, raising=False)
    lock = gpulock.from_env()
    assert not lock.active
    lock.hold(EXCLUSIVE)
    assert lock.mode is None and lock.waited_s == 0.0
    assert not gpulock.from_env({gpulock.ENV: ""}).active
    assert gpulock.from_env({gpulock.ENV: "/tmp/x.lock"}).active


def test_exclusive_keeps_every_other_holder_out_until_it_leaves(tmp_path):
    path = str(tmp_path / "gpu.lock")
    holder = GpuLock(path)
    holder.hold(EXCLUSIVE)
    log: list = []
    threads = [_acquire_in_thread(path, SHARED, log, "s1"), _acquire_in_thread(path, EXCLUSIVE, log, "x1")]
    time.sleep(0.5)
    assert log == []  # both wait
    released = time.monotonic()
    holder.close()
    for t in threads:
        t.join(10)
    assert {e[0] for e in log if e[1] == "got"} == {"s1", "x1"}
    assert all(e[2] >= released for e in log)


def test_shared_holders_run_together_and_an_exclusive_one_waits_for_both(tmp_path):
    path = str(tmp_path / "gpu.lock")
    a, b = GpuLock(path), GpuLock(path)
    a.hold(SHARED)
    t0 = time.monotonic()
    b.hold(SHARED)  # at once
    assert time.monotonic() - t0 < 0.5
    log: list = []
    t = _acquire_in_thread(path, EXCLUSIVE, log, "x")
    time.sleep(0.3)
    a.close()
    time.sleep(0.3)
    assert log == []  # b still shares it
    b.close()
    t.join(10)
    assert log and log[0][:2] == ("x", "got")


def test_two_shared_holders_that_both_want_it_exclusive_take_turns(tmp_path):
    """Each gives its share up before it waits, so neither waits for the other forever."""
    path = str(tmp_path / "gpu.lock")
    both_shared = threading.Barrier(2)
    spans: list = []

    def worker():
        lock = GpuLock(path)
        lock.hold(SHARED)
        both_shared.wait(10)
        lock.hold(EXCLUSIVE)
        t0 = time.monotonic()
        time.sleep(0.2)
        spans.append((t0, time.monotonic()))
        lock.hold(SHARED)
        lock.close()

    threads = [threading.Thread(target=worker) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert not any(t.is_alive() for t in threads)
    (a0, a1), (b0, b1) = sorted(spans)
    assert a1 <= b0  # never exclusive at the same time


def test_waits_are_summed_and_held_restores_the_mode(tmp_path):
    path = str(tmp_path / "gpu.lock")
    other = GpuLock(path)
    other.hold(EXCLUSIVE)
    timer = threading.Timer(0.4, other.close)
    timer.start()
    lock = GpuLock(path)
    lock.hold(SHARED)
    assert lock.waited_s >= 0.3
    with lock.held(EXCLUSIVE):
        assert lock.mode == EXCLUSIVE
    assert lock.mode == SHARED
    lock.close()
    assert lock.mode is None
    with pytest.raises(ValueError, match="lock mode"):
        lock.hold("both")


def test_held_counts_exclusive_spells_only(tmp_path):
    lock = GpuLock(str(tmp_path / "gpu.lock"))
    lock.hold(SHARED)
    time.sleep(0.2)
    assert lock.held_s() == 0.0  # shared: others may hold it too
    lock.hold(EXCLUSIVE)
    time.sleep(0.2)
    running = lock.held_s()  # the spell under way counts
    assert 0.15 <= running < 1.0
    lock.release()
    time.sleep(0.2)
    closed = lock.held_s()
    assert closed >= running and closed < running + 0.1  # not counted once let go
    lock.hold(EXCLUSIVE)
    time.sleep(0.2)
    lock.close()
    assert 0.3 <= lock.held_s() < 1.5
    assert GpuLock(None).held_s() == 0.0


def test_one_lock_file_per_gpu_name(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", None)
    a, b, c = gpulock.lock_path("0"), gpulock.lock_path("1"), gpulock.lock_path("")
    assert len({a, b, c}) == 3 and a == gpulock.lock_path("0")
    assert all(p.startswith(str(tmp_path)) for p in (a, b, c))
    assert os.path.dirname(gpulock.lock_path("GPU-1/../x")) == os.path.dirname(a)  # no path in the name
