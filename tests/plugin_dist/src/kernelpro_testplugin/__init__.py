"""A test-only plugin distribution. It contributes a generator that echoes the reference
(optionally broken on purpose), a reward, a measurement (host seconds per call, which says
what earlier reference measurements the judge handed it), and lifecycle observers that log events to the
file named by KERNELPRO_TESTPLUGIN_LOG. Setting KERNELPRO_TESTPLUGIN_FAIL makes the
import fail, to test how load failures are reported; KERNELPRO_TESTPLUGIN_MUTATE makes the
observer try to change the record it is handed (the loop hands it a read-only copy)."""

from __future__ import annotations

import json
import os
import time

import attrs

from kernelpro.api import CandidateDraft, Generator, Measurement, Reward, hookimpl

#: the KernelPro plugin API this plugin is written for (checked when it loads)
KERNELPRO_API_VERSION = "1.9"

if os.environ.get("KERNELPRO_TESTPLUGIN_FAIL"):
    raise ImportError("kernelpro_testplugin was asked to fail (KERNELPRO_TESTPLUGIN_FAIL)")


@attrs.frozen
class EchoSettings:
    broken: bool = False  # emit candidates that compute the wrong thing
    repeat: int = 1  # compute the forward this many times: a correct candidate, slower than the reference


class EchoGenerator(Generator):
    name = "testplugin_echo"
    description = "ModelNew = the reference itself (or a wrong variant)"
    Settings = EchoSettings

    def generate(self, request):
        body = "        return super().forward(*args) + 1.0\n" if self.settings.broken else \
            "        return super().forward(*args)\n"
        if self.settings.repeat > 1 and not self.settings.broken:
            body = (f"        for _ in range({self.settings.repeat - 1}):\n"
                    "            super().forward(*args)\n" + body)
        source = (request.problem.source.rstrip() + "\n\n\nclass ModelNew(Model):\n"
                  "    def forward(self, *args):\n" + body)
        n = len(request.tried)
        return [CandidateDraft(source=source, generator=self.name, description=f"echo #{n + i}",
                               params={"i": n + i}) for i in range(request.n)]


class NegatedReward(Reward):
    name = "testplugin_negated"

    def score(self, result, context):
        return self.floor if not result.correct else -(result.runtime_ms or 0.0)


class WallMeasurement(Measurement):
    """Host seconds per call over 5 synchronized calls; the reference's also says how many
    earlier measurements of it the judge passed and the youngest one's age."""

    name = "testplugin_wall"

    def measure(self, call, sync):
        sync()
        t0 = time.perf_counter()
        for _ in range(5):
            call()
        sync()
        return {"wall_s_per_call": (time.perf_counter() - t0) / 5}

    def measure_reference(self, call, sync, earlier):
        out = self.measure(call, sync)
        out["earlier"] = float(len(earlier))
        if earlier:
            out["earlier_age_s"] = earlier[0].age_s
            out["earlier_ages_sorted"] = float(all(a.age_s <= b.age_s for a, b in zip(earlier, earlier[1:])))
        return out


@hookimpl
def kernelpro_register_measurements(register):
    register(WallMeasurement)


def _log(event: str, **data) -> None:
    path = os.environ.get("KERNELPRO_TESTPLUGIN_LOG")
    if path:
        with open(path, "a") as fh:
            fh.write(json.dumps({"event": event, **data}) + "\n")


@hookimpl
def kernelpro_register_generators(register):
    register(EchoGenerator)


@hookimpl
def kernelpro_register_rewards(register):
    register(NegatedReward)


@hookimpl
def kernelpro_run_started(run):
    _log("run_started", problem=run.problem.name)


@hookimpl
def kernelpro_candidate_evaluated(run, record):
    _log("candidate_evaluated", id=record["id"], verdict=record["verdict"])
    if os.environ.get("KERNELPRO_TESTPLUGIN_MUTATE"):
        record["speedup"] = 999.0


@hookimpl
def kernelpro_run_finished(run, summary):
    _log("run_finished", evaluated=summary["evaluated"])
