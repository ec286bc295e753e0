"""The expert generator is registered by its own distribution, not by core; without it,
naming the generator is a one-line error that says what to install."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from kernelpro.plugins import Plugins

ROOT = Path(__file__).resolve().parents[2]
PROBLEM = str(ROOT / "examples" / "fused_bias_gelu.py")


def test_expert_comes_from_the_expert_distribution():
    reg = Plugins().registrations("generator")["expert"]
    assert reg.plugin == "expert" and reg.distribution == "kernelpro-plugins-expert"
    assert reg.obj.__module__ == "kernelpro_plugins_expert.generator"


def test_expert_declares_this_plugin_api():
    import kernelpro.api as api
    import kernelpro_plugins_expert.plugin as plugin

    assert plugin.KERNELPRO_API_VERSION == api.API_VERSION


def test_core_registers_no_expert_generator():
    # only core's own entry points: the expert generator is not among them
    from importlib import metadata

    core = [ep for ep in metadata.entry_points(group="kernelpro")
            if ep.dist is not None and ep.dist.metadata["Name"] == "kernelpro-core"]
    assert core and not any("expert" in ep.value for ep in core)


def test_without_the_distribution_naming_expert_is_one_line_with_the_install_hint(tmp_path):
    # blocking the entry point leaves the registry as if the distribution were not installed
    env = {**os.environ, "KERNELPRO_BLOCK_PLUGINS": "expert"}
    res = subprocess.run([sys.executable, "-m", "kernelpro.cli", "optimize", PROBLEM, "--generator", "expert",
                          "--device", "cpu", "-o", str(tmp_path / "run")],
                         capture_output=True, text=True, env=env, timeout=300)
    assert res.returncode == 2, (res.stdout, res.stderr)
    assert "Traceback" not in res.stderr
    lines = [line for line in res.stderr.splitlines() if "unknown code generator 'expert'" in line]
    assert len(lines) == 1 and "(install kernelpro-plugins-expert)" in lines[0]
    assert "available: " in lines[0] and "torch_compile" in lines[0] and "expert," not in lines[0]
