"""Hook implementations of the energy plugin (entry point ``energy`` in group ``kernelpro``)."""

from __future__ import annotations

import json
from typing import Any

from kernelpro.api import hookimpl

from kernelpro_plugins_energy.bench_report import bench_section
from kernelpro_plugins_energy.levers import LEVERS
from kernelpro_plugins_energy.measure import EnergyMeasurement
from kernelpro_plugins_energy.report import energy_section, matched_speed_section
from kernelpro_plugins_energy.rewards import EnergyAtMatchedSpeedReward, EnergyReward
from kernelpro_plugins_energy.twophase import NAME as TWO_PHASE, EnergyTwoPhase

#: the KernelPro plugin API this plugin is written for (checked when it loads):
#: 1.2 for ``build_search_policy`` (the two-phase search runs another policy in phase 1),
#: 1.5 for ``Measurement.measure_reference`` (the reference pooled with earlier windows)
KERNELPRO_API_VERSION = "1.9"


@hookimpl
def kernelpro_register_measurements(register):
    register(EnergyMeasurement)


@hookimpl
def kernelpro_register_rewards(register):
    register(EnergyReward)
    register(EnergyAtMatchedSpeedReward)


@hookimpl
def kernelpro_register_micro_profilers(register):
    for cls in LEVERS:
        register(cls)


@hookimpl
def kernelpro_register_search_policies(register):
    register(EnergyTwoPhase)


def _params(choice: Any) -> dict[str, Any]:
    return dict(getattr(choice, "params", None) or {})


def matched_view(config: Any) -> dict[str, Any]:
    """The window the run's config asks for: the two-phase search's, else the
    ``energy_at_matched_speed`` reward's, else 2 % on the evaluator's timing; with a note
    when the search and the reward disagree (best.py is the reward's choice)."""
    search, reward = getattr(config, "search", None), getattr(config, "reward", None)
    search_name, reward_name = getattr(search, "name", None), getattr(reward, "name", None)
    sp, rp = _params(search), _params(reward)
    view: dict[str, Any] = {"max_slowdown": 0.02, "speed_source": "timing", "two_phase": False, "notes": []}
    if search_name == TWO_PHASE:
        view.update(max_slowdown=float(sp.get("max_slowdown", 0.02)), speed_source=sp.get("speed_source", "timing"),
                    two_phase=True)
        if reward_name != EnergyAtMatchedSpeedReward.name:
            view["notes"].append(f"The run's reward is `{reward_name}`, not `energy_at_matched_speed`: best.py is "
                                 "ranked by it, not by energy in the window.")
        elif (float(rp.get("slowdown", 0.02)), rp.get("speed_source", "timing")) != \
                (view["max_slowdown"], view["speed_source"]):
            view["notes"].append("The reward's `slowdown` / `speed_source` differ from the search's `max_slowdown` / "
                                 "`speed_source`: best.py follows the reward's window, this section the search's.")
    elif reward_name == EnergyAtMatchedSpeedReward.name:
        view.update(max_slowdown=float(rp.get("slowdown", 0.02)), speed_source=rp.get("speed_source", "timing"))
    return view


def _phase2_ids(run: Any) -> list[str]:
    try:
        state = json.loads((run.run_dir / "tree.json").read_text()).get("policy_state") or {}
    except (OSError, ValueError, AttributeError):
        return []
    return [str(i) for i in state.get("phase2_ids") or []]


@hookimpl
def kernelpro_report_sections(run, records):
    section = energy_section(records)
    if not section:
        return []
    view = matched_view(getattr(run, "config", None))
    extra = matched_speed_section(records, view["max_slowdown"], view["speed_source"],
                                  _phase2_ids(run) if view["two_phase"] else (), view["two_phase"],
                                  svg_dir=getattr(run, "run_dir", None))
    if extra:
        notes = "".join(f"\n{n}\n" for n in view["notes"])
        section = section + "\n" + extra + notes
    return [section]


@hookimpl
def kernelpro_bench_sections(config, problems):
    view = matched_view(config)
    section = bench_section(problems, view["max_slowdown"], view["speed_source"])
    return [section + "".join(f"\n{n}\n" for n in view["notes"])] if section else []
