"""profiling.when: every correct candidate profiled right away, or only the ones the search
expands and the winner (the real loop on CPU, a collector that counts its calls)."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

pytest.importorskip("triton", reason="triton is not installed")

from expert_problems import PROBLEMS  # noqa: E402
from kernelpro import config as cfg  # noqa: E402
from kernelpro.api import BottleneckClassifier, CandidateDraft, Collector, Generator  # noqa: E402
from kernelpro.hookspecs import hookimpl  # noqa: E402
from kernelpro.loop import optimize  # noqa: E402
from kernelpro.plugins import Plugins  # noqa: E402
from kernelpro.problem import parse_problem  # noqa: E402
from kernelpro.records import Bottleneck, KernelProfile, ProfileData  # noqa: E402

pytestmark = pytest.mark.slow  # long on a 2-core CPU: evaluations, optimize runs or interpreted kernels (tests/README.md)

FAST = Path(__file__).resolve().parents[1] / "core" / "data" / "fast_config.yaml"
PROFILED: list[str] = []


class CountingCollector(Collector):
    name = "counting"
    level = "kernel"

    def collect(self, target, stage, metrics=()):
        if stage == 1:  # stage 2 collects the gated micro-profilers' metrics of the same candidate
            PROFILED.append(Path(target.candidate_path).stem)
        return ProfileData(level="kernel", collector=self.name,
                           kernels=(KernelProfile(name="k", metrics={"dram_pct": 50.0}),),
                           seconds={"replay": 0.25 * stage})


class LabelClassifier(BottleneckClassifier):
    name = "label"

    def classify(self, profiles, context):
        return Bottleneck(kind="memory", summary="test label", classifier=self.name, roofline_fraction=0.5)


def _plugins() -> Plugins:
    plugin = types.SimpleNamespace(
        kernelpro_register_collectors=hookimpl(lambda register: register(CountingCollector)),
        kernelpro_register_classifiers=hookimpl(lambda register: register(LabelClassifier)),
    )
    return Plugins(extra=[("counting", plugin)])


def _run(tmp_path: Path, when: str) -> tuple[dict, list[dict]]:
    PROFILED.clear()
    config = cfg.load_config(str(FAST), {
        "device": "cpu", "budget": 4, "generator": {"name": "expert", "params": {}},
        "profiling": {"enabled": True, "classifier": "label", "collectors": ["counting"], "when": when}})
    run = tmp_path / when
    summary = optimize(parse_problem(PROBLEMS["layernorm"], name="layernorm"), config, _plugins(), run, "cpu")
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    return summary, records


def test_each_profiles_every_correct_candidate(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    summary, records = _run(tmp_path, "each")
    correct = [r["id"] for r in records if r["correct"]]
    assert summary["correct"] == len(correct) == 4
    assert PROFILED == correct
    assert all(r["bottleneck"] == "memory" for r in records)


def test_expand_profiles_the_expanded_parents_and_the_winner_only(tmp_path, monkeypatch):
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    summary, records = _run(tmp_path, "expand")
    parents = {r["parent"] for r in records} - {"root"}
    assert parents, "greedy refined no candidate: the test shows nothing"
    assert set(PROFILED) == parents | {summary["best_id"]}
    assert len(PROFILED) == len(set(PROFILED)) < len(records)  # each at most once, fewer than all
    run = tmp_path / "expand"
    assert sorted(p.stem for p in (run / "analyses").glob("*.json")) == sorted(PROFILED)
    late = [json.loads(line) for line in (run / "profiles.jsonl").read_text().splitlines()]
    assert [p["id"] for p in late] == PROFILED and late[-1]["why"] in ("winner", "expanded")
    # where each profile's time went: the collector's two passes (stage 2: the gated
    # micro-profilers' metrics), and the parts each pass accounted for itself
    assert all(set(p["collect_s"]) == {"counting:1", "counting:2", "counting:1:replay", "counting:2:replay"}
               for p in late), [p["collect_s"] for p in late]
    assert all(p["collect_s"]["counting:1:replay"] == 0.25 and p["collect_s"]["counting:2:replay"] == 0.5
               for p in late)
    assert all(r["seconds"]["profile"] is None for r in records)  # none was profiled when evaluated
    # a parent's profile was taken before its children were generated
    first_child = min(i for i, r in enumerate(records) if r["parent"] != "root")
    assert records[first_child]["parent"] in PROFILED
    report = (run / "report.md").read_text()
    assert "memory" in report


def test_unknown_when_is_a_config_error():
    with pytest.raises(Exception, match="profiling.when"):
        cfg.load_config(str(FAST), {"profiling": {"when": "sometimes"}})


def _stats(ms: float) -> "TimingStats":
    from kernelpro.records import TimingStats

    return TimingStats(median_ms=ms, iqr_ms=0.0, mean_ms=ms, min_ms=ms, max_ms=ms, cv=0.0, n=10,
                       method="cuda_event+l2_flush")


def test_compiled_reference_timed_once_in_the_baseline_job_is_used_for_every_candidate(tmp_path, monkeypatch):
    """evaluator.compiled_reference_per_candidate = false: the workers do not time
    torch.compile's reference; the records take the baseline job's time and say so."""
    from kernelpro.records import EvalResult, Verdict

    jobs = []

    def fake_evaluate(problem_path, candidate_path, **kw):
        jobs.append((candidate_path, kw["config"].compiled_reference_per_candidate))
        if candidate_path is None:
            assert kw.get("reference_flops") is None
            return EvalResult(verdict=Verdict.CORRECT, reason="reference", timing=_stats(2.0),
                              baseline=_stats(2.0), baseline_compiled=_stats(1.5), device="cuda",
                              measurements={"evaluator": {"flops": 777.0}})
        assert kw["reference_flops"] == 777.0  # counted once, by the baseline job
        return EvalResult(verdict=Verdict.CORRECT, timing=_stats(1.0), baseline=_stats(2.0), device="cuda")

    monkeypatch.setattr("kernelpro.evaluate.runner.evaluate", fake_evaluate)  # what the loop's calls run
    config = cfg.load_config(str(FAST), {"device": "cpu", "budget": 2, "generator": {"name": "expert", "params": {}},
                                         "evaluator": {"compiled_reference_per_candidate": False}})
    run = tmp_path / "run"
    optimize(parse_problem(PROBLEMS["layernorm"], name="layernorm"), config, Plugins(), run, "cpu")
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    assert len(records) == 2 and jobs[0][0] is None and all(flag is False for _, flag in jobs)
    assert all(r["compiled_baseline_ms"] == 1.5 and r["compiled_baseline_from"] == "baseline job" for r in records)
    from kernelpro.bench import problem_row
    from kernelpro.bench import SuiteProblem

    row = problem_row(SuiteProblem(level=1, problem_id=1, name="layernorm", source=""), run)
    assert row["speedup_compiled"] == pytest.approx(1.5)


PASSES: list[tuple[str, int, bool]] = []


class CombiningCollector(CountingCollector):
    """Stage 1 and stage-2 metrics in one pass (combines_stages); records every pass."""

    name = "counting"
    combines_stages = True

    def collect(self, target, stage, metrics=()):
        PASSES.append((Path(target.candidate_path).stem, stage, bool(metrics)))
        return ProfileData(level="kernel", collector=self.name,
                           kernels=(KernelProfile(name="k", metrics={"dram_pct": 50.0, **{m: 1.0 for m in metrics}}),))


def test_a_child_of_a_profiled_parent_is_profiled_in_one_pass(tmp_path, monkeypatch):
    """The loop hands a child's profile its parent's bottleneck: a collector that combines
    stages collects the metrics that bottleneck gates in with stage 1, and no stage 2 runs
    when the child's bottleneck is the same (here always: the classifier labels every
    candidate memory-bound)."""
    monkeypatch.setenv("TRITON_INTERPRET", "1")
    PASSES.clear()
    plugin = types.SimpleNamespace(
        kernelpro_register_collectors=hookimpl(lambda register: register(CombiningCollector)),
        kernelpro_register_classifiers=hookimpl(lambda register: register(LabelClassifier)),
    )
    config = cfg.load_config(str(FAST), {
        "device": "cpu", "budget": 4, "generator": {"name": "expert", "params": {}},
        "profiling": {"enabled": True, "classifier": "label", "collectors": ["counting"], "when": "each"}})
    run = tmp_path / "run"
    optimize(parse_problem(PROBLEMS["layernorm"], name="layernorm"), config,
             Plugins(extra=[("counting", plugin)]), run, "cpu")
    records = [json.loads(line) for line in (run / "candidates.jsonl").read_text().splitlines()]
    parent = {r["id"]: r["parent"] for r in records}
    children = [r["id"] for r in records if r["correct"] and r["parent"] != "root"]
    assert children, "greedy refined no candidate: the test shows nothing"
    for cid in parent:
        passes = [(stage, with_metrics) for stem, stage, with_metrics in PASSES if stem == cid]
        if cid in children:
            assert passes == [(1, True)], (cid, passes)  # one pass with the parent's metrics
        elif passes:
            assert passes == [(1, False), (2, True)], (cid, passes)  # first generation: two passes
    notes = json.loads((run / "analyses" / f"{children[0]}.json").read_text())["notes"]
    assert any("counting: one pass" in n for n in notes), notes


ASKED: list[tuple[str, bool]] = []
GENERATED_FROM: list[str] = []


class Variants(Generator):
    """The reference as a candidate, a comment apart; no child of c0001 can exist, it says."""
    name = "variants"

    def generate(self, request):
        parent = request.parent.id if request.parent else "root"
        GENERATED_FROM.append(parent)
        src = PROBLEMS["layernorm"] + f"\n# variant {len(GENERATED_FROM)} from {parent}\nclass ModelNew(Model):\n    pass\n"
        return [CandidateDraft(source=src, generator=self.name, description=f"from {parent}")]

    def expandable(self, request):
        ASKED.append((request.parent.id, request.parent.analysis is None))
        return request.parent.id != "c0001"


def test_expand_skips_the_profile_of_a_parent_the_generator_cannot_refine(tmp_path):
    """profiling.when = expand: before it profiles a parent to expand, the loop asks the
    generator whether any profile could give it a child (``Generator.expandable``); where
    not, the parent is closed unprofiled and never sent to ``generate``."""
    PROFILED.clear(), ASKED.clear(), GENERATED_FROM.clear()
    plugin = types.SimpleNamespace(
        kernelpro_register_collectors=hookimpl(lambda register: register(CountingCollector)),
        kernelpro_register_classifiers=hookimpl(lambda register: register(LabelClassifier)),
        kernelpro_register_generators=hookimpl(lambda register: register(Variants)),
    )
    config = cfg.load_config(str(FAST), {
        "device": "cpu", "budget": 4, "generator": {"name": "variants", "params": {}},
        "profiling": {"enabled": True, "classifier": "label", "collectors": ["counting"], "when": "expand"}})
    run = tmp_path / "run"
    summary = optimize(parse_problem(PROBLEMS["layernorm"], name="layernorm"), config,
                       Plugins(extra=[("variants", plugin)]), run, "cpu")
    assert summary["evaluated"] == 4 and ("c0001", True) in ASKED
    assert all(unprofiled for _id, unprofiled in ASKED)  # asked before any profile of it
    assert "c0001" not in GENERATED_FROM
    late = [json.loads(line) for line in (run / "profiles.jsonl").read_text().splitlines()]
    assert ("c0001", "expanded") not in [(p["id"], p["why"]) for p in late]
    expanded = {p["id"] for p in late if p["why"] == "expanded"}
    assert expanded == set(GENERATED_FROM) - {"root"}  # the others were profiled, then refined
    tree = {n["id"]: n for n in json.loads((run / "tree.json").read_text())["nodes"]}
    assert tree["c0001"]["closed"] == "generator had nothing more to propose"
    assert PROFILED.count("c0001") == (summary["best_id"] == "c0001")  # only as the winner, if it won


class Pairs(Generator):
    """Two drafts an expansion, the reference a comment apart."""
    name = "pairs"

    def generate(self, request):
        n = len(request.tried)
        return [CandidateDraft(source=PROBLEMS["layernorm"] + f"\n# draft {n + k}\nclass ModelNew(Model):\n    pass\n",
                               generator=self.name, description=f"draft {n + k}") for k in range(2)]


def test_in_a_bench_the_last_evaluation_starts_the_next_baseline_judge_also_in_a_batch_of_two(tmp_path, monkeypatch):
    """A bench's problem run (``next_problem``) tells its last evaluation that the next job is
    another problem's baseline job (its judge started ahead imports torch.compile's stack).
    The calls of a batch are made before any of them is recorded: counted from the records
    alone, the last batch of two said so of neither, and every baseline job imported that
    stack on its own path (session 35's bench: 6-8 s each)."""
    from kernelpro.records import EvalResult, Verdict

    flags = []

    def fake_evaluate(problem_path, candidate_path, **kw):
        if candidate_path is None:
            return EvalResult(verdict=Verdict.CORRECT, reason="reference", timing=_stats(2.0), baseline=_stats(2.0),
                              device="cpu")
        flags.append((kw["prestart"], kw["next_is_baseline"]))
        return EvalResult(verdict=Verdict.CORRECT, timing=_stats(1.0 + len(flags) / 10), baseline=_stats(2.0),
                          device="cpu")

    monkeypatch.setattr("kernelpro.evaluate.runner.evaluate", fake_evaluate)
    plugin = types.SimpleNamespace(kernelpro_register_generators=hookimpl(lambda register: register(Pairs)))
    config = cfg.load_config(str(FAST), {"device": "cpu", "budget": 4, "generator": {"name": "pairs", "params": {}},
                                         "profiling": {"enabled": False}})
    optimize(parse_problem(PROBLEMS["layernorm"], name="layernorm"), config, Plugins(extra=[("pairs", plugin)]),
             tmp_path / "run", "cpu", next_problem=True)
    assert flags == [(True, False), (True, False), (True, False), (True, True)]
