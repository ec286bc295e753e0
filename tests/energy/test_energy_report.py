"""The Pareto front and the report section, from records as in candidates.jsonl."""

from __future__ import annotations

from energy_helpers import record
from kernelpro_plugins_energy import plugin
from kernelpro_plugins_energy.pareto import Point, dominates, pareto_front, points_from_records
from kernelpro_plugins_energy.report import ascii_plot, energy_section


def test_dominance():
    a = Point("a", 1.0, 1.0)
    assert dominates(a, Point("b", 1.0, 2.0))
    assert dominates(a, Point("c", 2.0, 1.0))
    assert not dominates(a, Point("d", 1.0, 1.0))  # equal: neither dominates
    assert not dominates(a, Point("e", 0.5, 2.0))


def test_pareto_front():
    points = [
        Point("fast_hungry", 1.0, 5.0),
        Point("balanced", 2.0, 3.0),
        Point("slow_frugal", 4.0, 1.0),
        Point("dominated", 3.0, 4.0),  # balanced is faster and more frugal
        Point("tie_time", 2.0, 3.5),  # same time as balanced, more energy
        Point("twin", 2.0, 3.0),  # identical to balanced: both stay
    ]
    front = pareto_front(points)
    assert [p.id for p in front] == ["fast_hungry", "balanced", "twin", "slow_frugal"]


def test_points_from_records_keep_correct_measured_ones():
    records = [
        record("c1", 1.0, 0.005),
        record("c2", 1.0, None),
        record("c3", 0.5, 0.004, correct=False),
        record("c4", None, 0.004),
    ]
    assert points_from_records(records) == [Point("c1", 1.0, 0.005)]


def test_no_section_without_energy_at_all():
    assert energy_section([record("c1", 1.0, None)]) is None
    assert plugin.kernelpro_report_sections(run=None, records=[record("c1", 1.0, None)]) == []


def test_section_says_why_energy_is_missing():
    flag = "measurement_unavailable: energy: energy unavailable: the NVML library (libnvidia-ml.so.1) was not found"
    text = energy_section([record("c1", 1.0, None, flags=(flag,)), record("c2", 2.0, None, flags=(flag,))])
    assert text.startswith("## Energy\n")
    assert "ranked on speed alone" in text
    assert text.count(flag) == 1


def test_section_table_and_front():
    records = [
        record("c1", 1.0, 0.0050, reward=0.7),
        record("c2", 1.5, 0.0040, reward=0.9),
        record("c3", 2.0, 0.0045, reward=0.1),  # dominated by c2
        record("c4", 0.8, None, flags=("measurement_failed: energy: window too short",)),
        record("c5", 0.5, 0.0010, correct=False, reward=-10.0),
    ]
    sections = plugin.kernelpro_report_sections(run=None, records=records)
    assert len(sections) == 1
    text = sections[0]
    assert text.startswith("## Energy\n")
    assert "median 10 mJ per call over 4 measurements" in text
    assert "| c1 | correct | 1 | 1.01 | 2 | 5 | 0.500 | 0.40 | 512.5 | 509.0 | 0.700 | * |" in text
    assert "| c3 | correct | 2 | 2.02 | 1 | 4.5 | 0.450 | 0.40 | 512.5 | 509.0 | 0.100 |  |" in text
    assert "| c4 | correct | 0.8 | - | 2.5 | - | - | - | - | - | 0.000 |  |" in text
    assert "- `measurement_failed: energy: window too short`" in text
    front_table = text.split("### Time-energy Pareto front")[1]
    assert "| c1 | 1 | 5 |\n| c2 | 1.5 | 4 |" in front_table
    assert "c3" not in front_table.split("```")[0]
    assert "```text" in front_table and "runtime ms" in front_table


def test_section_says_how_many_reference_measurements_pooled_earlier_windows():
    records = [record("c1", 1.0, 0.0050), record("c2", 1.5, 0.0040), record("c3", 2.0, 0.0045)]
    for rec, age in ((records[1], 14.2), (records[2], 31.7)):
        rec["measurements"]["energy"].update(reference_pooled_windows=2.0, reference_trials=1.0,
                                             reference_pooled_age_s=age)
    text = plugin.kernelpro_report_sections(run=None, records=records)[0]
    assert "2 of them took 1 fresh window(s) pooled" in text
    assert "(oldest pooled window 32 s old;" in text
    full = plugin.kernelpro_report_sections(run=None, records=records[:1])[0]
    assert "pooled" not in full


def test_ascii_plot_places_points():
    points = [Point("a", 1.0, 0.004), Point("b", 2.0, 0.002), Point("c", 2.0, 0.004)]
    front = pareto_front(points)
    plot = ascii_plot(points, front).splitlines()
    assert plot[0] == "energy mJ/call"
    rows = plot[1:-2]
    assert rows[0].startswith("4 |*") and rows[0].endswith("o")  # a (front) left, c (dominated) right
    assert rows[-1].startswith("2 |") and rows[-1].endswith("*")  # b bottom right
    assert plot[-1].strip().startswith("1") and plot[-1].strip().endswith("2")


def test_single_point_plot():
    points = [Point("a", 1.0, 0.004)]
    plot = ascii_plot(points, points)
    assert plot.count("*") == 1


def test_registration_hooks():
    measurements, rewards = [], []
    plugin.kernelpro_register_measurements(measurements.append)
    plugin.kernelpro_register_rewards(rewards.append)
    assert [m.name for m in measurements] == ["energy"]
    assert sorted(r.name for r in rewards) == ["energy", "energy_at_matched_speed"]


def test_core_finds_the_plugin_through_its_entry_point():
    from kernelpro.plugins import Plugins

    plugins = Plugins()
    assert "energy" in plugins.measurements()
    assert plugins.reward("energy").name == "energy"
    assert plugins.reward("energy_at_matched_speed").name == "energy_at_matched_speed"
