"""Every speedup a user reads can be checked by hand: a real short run on the CPU writes
report.md, and each speedup printed in it (and in ``optimize``'s last line, its --json
summary, tree.svg and the bench table) is recomputed from the two times printed beside it."""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from helpers import DATA, FAST, kernelpro

PROBLEM = str(DATA / "tiny_problem.py")
NOISY_CV = 0.3  # set in the run's config: the CPU's timings fall on both sides of it

SPEEDUP = re.compile(r"(?<![\w.])(\d+\.\d+)x(?!\w)")
INLINE = re.compile(r"(\d+\.\d+)x = reference (\d[\d.]*) ms(?: \([^)]*\))? / candidate (\d[\d.]*) ms")
TIMING = re.compile(r"(\d[\d.]*) ms \(IQR [\d.]+, CV (\d+\.\d+)( ⚠ noisy)?\)")


def half_unit(text: str) -> float:
    """Half a unit of the last digit printed: the rounding error a printed number may carry."""
    decimals = len(text.split(".")[1]) if "." in text else 0
    return 0.5 * 10 ** -decimals


def assert_ratio(speedup: str, reference: str, candidate: str, where: str) -> None:
    s, r, c = float(speedup), float(reference), float(candidate)
    ratio = r / c
    tol = half_unit(speedup) + ratio * (half_unit(reference) / r + half_unit(candidate) / c) * 1.01
    assert abs(s - ratio) <= tol, f"{where}: {speedup}x printed, but {reference} / {candidate} = {ratio:.4f}"


def table(lines: list[str], header_start: str) -> tuple[list[str], list[list[str]]]:
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header_start))
    header = [c.strip() for c in lines[start].strip("|").split("|")]
    rows = []
    for ln in lines[start + 2:]:
        if not ln.startswith("|"):
            break
        rows.append([c.strip() for c in re.split(r"(?<!\\)\|", ln.strip().strip("|"))])
    return header, rows


def lead_number(cell: str) -> str:
    m = re.match(r"(\d[\d.]*)", cell)
    assert m, cell
    return m.group(1)


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("report")
    config = tmp / "config.yaml"
    config.write_text(FAST.read_text().replace("evaluator:\n", f"evaluator:\n  noisy_cv: {NOISY_CV}\n", 1))
    run_dir = tmp / "run"
    res = kernelpro("optimize", PROBLEM, "-c", str(config), "--device", "cpu", "--budget", "3",
                    "--generator", "testplugin_echo", "-o", str(run_dir))
    assert res.returncode == 0, res.stderr[-2000:]
    # continuing the finished run evaluates nothing new and prints the machine-readable summary
    again = kernelpro("optimize", "--resume", str(run_dir), "--json")
    assert again.returncode == 0, again.stderr[-2000:]
    return run_dir, res, again


def test_every_speedup_in_report_md_is_the_ratio_of_the_times_beside_it(run):
    run_dir, _, _ = run
    lines = (run_dir / "report.md").read_text().splitlines()
    header, rows = table(lines, "| id |")
    col = {name: header.index(name) for name in ("id", "candidate ms", "reference ms", "speedup", "notes")}
    by_id = {}
    for row in rows:
        cid = row[col["id"]]
        if row[col["speedup"]] == "-":
            continue
        by_id[cid] = row[col["speedup"]]
        assert_ratio(row[col["speedup"]].rstrip("x"), lead_number(row[col["reference ms"]]),
                     lead_number(row[col["candidate ms"]]), f"table row {cid}")
    assert len(by_id) == 3
    checked = 0
    for n, line in enumerate(lines, 1):
        tokens = SPEEDUP.findall(line)
        if not tokens or line.startswith("| c"):
            continue
        inline = INLINE.findall(line)
        if inline:
            assert len(inline) == len(tokens), f"line {n} has a speedup without its times: {line}"
            for s, r, c in inline:
                assert_ratio(s, r, c, f"report.md line {n}")
            checked += len(inline)
            continue
        # the text tree and its summary name the candidate: its speedup is the table's
        ids = re.findall(r"\b(c\d{4})\b", line)
        assert len(ids) == 1 and len(tokens) == 1, f"line {n}: a speedup not traceable to two times: {line}"
        assert f"{tokens[0]}x" == by_id[ids[0]], f"line {n}: {tokens[0]}x, the table says {by_id[ids[0]]}"
        checked += 1
    assert checked >= 5  # what happened, best result, 3 tree lines (and the tree's summary)


def test_noisy_timings_are_flagged_where_printed(run):
    run_dir, res, _ = run
    text = (run_dir / "report.md").read_text()
    timings = TIMING.findall(text)
    assert len(timings) >= 8
    for ms, cv, mark in timings:
        if abs(float(cv) - NOISY_CV) < 0.006:
            continue  # printed at the threshold: either side is right
        assert bool(mark) == (float(cv) > NOISY_CV), f"{ms} ms with CV {cv} flagged={bool(mark)}"
    assert f"evaluator.noisy_cv {NOISY_CV:g}" in text


def test_the_best_follows_the_rule_the_report_states(run):
    run_dir, _, _ = run
    text = (run_dir / "report.md").read_text()
    assert "The best is the correct candidate with the highest reward (`log_speedup`" in text
    header, rows = table(text.splitlines(), "| id |")
    col = {name: header.index(name) for name in ("id", "speedup", "notes", "candidate ms", "reference ms")}
    # log_speedup ranks by speedup; a noisy timing must have been timed again to be chosen
    eligible = [r for r in rows if r[col["speedup"]] != "-" and (
        "timed again" in r[col["notes"]] or "noisy" not in r[col["candidate ms"]] + r[col["reference ms"]])]
    best = [r for r in rows if "★" in r[col["notes"]]]
    assert len(best) == 1 and best[0] in eligible
    assert float(best[0][col["speedup"]].rstrip("x")) == max(float(r[col["speedup"]].rstrip("x")) for r in eligible)
    assert (run_dir / "best.py").read_text() == (run_dir / "candidates" / f"{best[0][col['id']]}.py").read_text()


def test_what_happened_comes_first_and_links_the_tree_picture(run):
    run_dir, _, _ = run
    text = (run_dir / "report.md").read_text()
    assert text.index("## What happened") < text.index("## Baseline") < text.index("## Candidates")
    assert "[tree.svg](tree.svg)" in text and "![search tree](tree.svg)" in text
    assert "Profiling was off" in text  # the fast config turns it off: said, not left blank


def test_optimize_output_and_json_summary_carry_both_times(run):
    run_dir, res, again = run
    last = res.stdout.strip().splitlines()[-1]
    (s, r, c), = INLINE.findall(last)
    assert_ratio(s, r, c, "optimize's last line")
    summary = json.loads(again.stdout)  # stdout is the JSON object and nothing else
    best = summary["best"]
    assert summary["exit_code"] == 0 and summary["run_dir"] == str(run_dir)
    assert best["speedup"] == pytest.approx(best["reference_timing"]["median_ms"] / best["candidate_timing"]["median_ms"])
    assert best["reference_ms"] == best["reference_timing"]["median_ms"]
    for key in ("candidate_timing", "reference_timing"):
        assert best[key]["noisy"] == (best[key]["cv"] > NOISY_CV)
    assert f"best {best['id']}: {best['speedup']:.2f}x" in last


def test_tree_svg_shows_each_candidate_with_its_times(run):
    run_dir, _, _ = run
    svg = ET.parse(run_dir / "tree.svg").getroot()
    ns = "{http://www.w3.org/2000/svg}"
    boxes = [[t.text for t in g.iter(f"{ns}text")] for g in svg.iter(f"{ns}g")]
    tree = json.loads((run_dir / "tree.json").read_text())
    assert len(boxes) == len(tree["nodes"])  # the root and three candidates
    shown = [b for b in boxes if b[0].startswith("c")]
    assert len(shown) == 3
    for first, second in shown:
        speedup = re.search(r"(\d+\.\d+)x", first).group(1)
        ref, cand = re.match(r"(\d[\d.]*) / (\d[\d.]*) ms", second).groups()
        assert_ratio(speedup, ref, cand, f"tree.svg {first}")


def test_bench_table_prints_the_times_each_speedup_divides(run):
    from kernelpro import bench

    run_dir, _, _ = run
    row = bench.problem_row(bench.SuiteProblem(level=1, problem_id=1, name="tiny", source=""), run_dir)
    summary = json.loads(run_dir.joinpath("summary.json").read_text())
    assert row["best_id"] == summary["best_id"] and row["speedup_eager"] == pytest.approx(summary["best_speedup"])
    header, rows = table(bench.problem_table([row], NOISY_CV).splitlines(), "| level |")
    cells = dict(zip(header, rows[0]))
    assert_ratio(cells["vs eager"].rstrip("x"), lead_number(cells["eager ms"]), lead_number(cells["best ms"]),
                 "bench row")
    assert cells["vs torch.compile"] == "n/a"  # the compiled reference is not timed on a CPU


def test_tree_svg_collapses_failed_leaves_and_marks_the_best_path():
    from kernelpro.search.tree import ROOT, Tree
    from kernelpro.tree_svg import render_tree_svg

    tree = Tree.new()
    tree.add("c1", ROOT, correct=True, speedup=1.5, reward=0.4, verdict="correct", description="tile <64>")
    tree.add("c2", "c1", correct=True, speedup=2.0, reward=0.7, verdict="correct", description="vectorize & fuse")
    for i in range(3, 7):
        tree.add(f"c{i}", "c1", correct=False, verdict="compile_error", description="broken")
    svg = ET.fromstring(render_tree_svg(tree, "c2", {"c2": "4.000 / 2.000 ms"}))
    ns = "{http://www.w3.org/2000/svg}"
    texts = [" ".join(t.text for t in g.iter(f"{ns}text")) for g in svg.iter(f"{ns}g")]
    assert len(texts) == 4  # root, c1, c2, one box for the four failed leaves
    assert any("4 failed" in t and "compile_error ×4" in t for t in texts)
    assert any("c2  2.00x" in t and "4.000 / 2.000 ms" in t for t in texts)
    titles = [g.find(f"{ns}title").text for g in svg.iter(f"{ns}g")]
    assert "vectorize & fuse" in titles  # escaped in the file, read back whole
    thick = [ln for ln in svg.iter(f"{ns}line") if ln.get("stroke-width") == "3"]
    assert len(thick) == 2  # root -> c1 -> c2
