"""Hook implementations of the energy plugin (entry point ``energy`` in group ``kernelpro``)."""

from __future__ import annotations

from kernelpro.api import hookimpl

from kernelpro_plugins_energy.measure import EnergyMeasurement
from kernelpro_plugins_energy.report import energy_section
from kernelpro_plugins_energy.rewards import EnergyAtMatchedSpeedReward, EnergyReward

#: the KernelPro plugin API this plugin is written for (checked when it loads)
KERNELPRO_API_VERSION = "1.2"


@hookimpl
def kernelpro_register_measurements(register):
    register(EnergyMeasurement)


@hookimpl
def kernelpro_register_rewards(register):
    register(EnergyReward)
    register(EnergyAtMatchedSpeedReward)


@hookimpl
def kernelpro_report_sections(run, records):
    section = energy_section(records)
    return [section] if section else []
