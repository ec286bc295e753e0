"""GPU specs from vendor plugins: the matching rule, priority, duplicates, old records."""

from __future__ import annotations

import types

import attrs
import pytest

from kernelpro.gpus import SPECS
from kernelpro.hookspecs import hookimpl
from kernelpro.plugins import Plugins
from kernelpro.records import GpuSpec, from_json, to_json

H200 = next(s for s in SPECS if s.name == "H200 SXM")


def spec(name: str, *match: str, **kw) -> GpuSpec:
    return attrs.evolve(H200, name=name, match=tuple(match), **kw)


def vendor(*specs: GpuSpec):
    return types.SimpleNamespace(kernelpro_register_gpu_specs=hookimpl(lambda register: [register(s) for s in specs]))


def plugins(*named: tuple[str, object], builtins: bool = True) -> Plugins:
    extra = list(named)
    if builtins:
        from kernelpro import gpus

        extra.insert(0, ("core_gpus", gpus))
    p = Plugins(entry_points=False, extra=extra)
    p.on_warning = lambda message: None  # collected in p.warnings
    return p


def test_mixed_case_match_string_matches():
    p = plugins(("vendor", vendor(spec("Vendor NVL", "H200 NVL"))))
    assert p.resolve_gpu("NVIDIA H200 NVL", "sm_90").name == "Vendor NVL"


def test_more_specific_match_wins_over_the_builtin():
    p = plugins(("vendor", vendor(spec("H200 NVL", "h200 nvl"))))
    assert p.resolve_gpu("NVIDIA H200 NVL", "sm_90").name == "H200 NVL"
    assert p.resolve_gpu("NVIDIA H200", "sm_90").name == "H200 SXM"
    assert p.warnings == []


def test_tokens_not_substrings():
    # "h200" is not a token of GH200, nor "l40" of L40S
    from kernelpro.gpus import match_strength

    p = plugins()
    assert p.resolve_gpu("NVIDIA GH200 480GB", "sm_90") is None
    assert match_strength(spec("L40", "l40", arch="sm_89"), "NVIDIA L40S", "sm_89") is None
    assert p.resolve_gpu("NVIDIA L40S", "sm_89").name == "L40S"
    assert p.resolve_gpu("NVIDIA A100-SXM4-80GB", "sm_80").name == "A100 SXM 80GB"
    # the 40 GB forms, SXM or PCIe, have 1555 GB/s, not the 80 GB SXM's 2039
    assert p.resolve_gpu("NVIDIA A100-SXM4-40GB", "sm_80").name == "A100 40GB"


def test_exact_spec_matches_only_the_whole_name():
    exact = spec("Only NVL", "NVIDIA H200 NVL", exact=True, priority=5)
    p = plugins(("vendor", vendor(exact)))
    assert p.resolve_gpu("nvidia h200-nvl", "sm_90").name == "Only NVL"
    assert p.resolve_gpu("NVIDIA H200 NVL 2", "sm_90").name == "H200 SXM"


def test_compute_capability_must_agree_and_can_match_alone():
    blackwell = spec("Any sm_120", arch="sm_120")  # no match strings: by architecture alone
    p = plugins(("vendor", vendor(blackwell, spec("RTX 6000 Ada", "rtx 6000", arch="sm_89"))))
    assert p.resolve_gpu("NVIDIA RTX PRO 6000 Blackwell", "sm_120").name == "Any sm_120"
    # the name matches, the architecture (Turing's Quadro RTX 6000) does not
    assert p.resolve_gpu("Quadro RTX 6000", "sm_75") is None
    assert p.resolve_gpu("NVIDIA RTX 6000 Ada Generation", "sm_89").name == "RTX 6000 Ada"
    # unknown architecture: names still match, architecture-only specs do not
    assert p.resolve_gpu("NVIDIA RTX 6000 Ada Generation", "").name == "RTX 6000 Ada"
    assert p.resolve_gpu("Some GPU", "") is None
    # an H200 reporting another architecture is not the built-in H200
    assert p.resolve_gpu("NVIDIA H200", "sm_100") is None


def test_priority_decides_not_plugin_order():
    low, high = spec("Low", "h200", priority=1), spec("High", "h200", priority=2)
    for order in ((("a", vendor(low)), ("z", vendor(high))), (("a", vendor(high)), ("z", vendor(low)))):
        assert plugins(*order).resolve_gpu("NVIDIA H200", "sm_90").name == "High"
        assert plugins(*reversed(order)).resolve_gpu("NVIDIA H200", "sm_90").name == "High"


def test_equal_claim_is_reported_with_both_providers():
    one, two = spec("One", "h200", priority=1), spec("Two", "H200", priority=1)
    for order in ((("zeta", vendor(one)), ("alpha", vendor(two))), (("alpha", vendor(two)), ("zeta", vendor(one)))):
        p = plugins(*order)
        assert p.resolve_gpu("NVIDIA H200", "sm_90").name == "Two"  # settled by provider name, said aloud
        assert len(p.warnings) == 1
        assert "'Two' from 'alpha'" in p.warnings[0] and "'One' from 'zeta'" in p.warnings[0]
        assert "higher priority" in p.warnings[0] and "\n" not in p.warnings[0]


def test_same_name_twice_is_reported_and_higher_priority_kept():
    p = plugins(("vendor", vendor(spec("H200 SXM", "h200", priority=3, sm_count=1))))
    kept = [s for s, _ in p.gpu_specs() if s.name == "H200 SXM"]
    assert len(kept) == 1 and kept[0].sm_count == 1
    assert p.warnings == ["GPU spec 'H200 SXM' is registered twice: by 'core_gpus' and by 'vendor'; "
                          "using the one from 'vendor' (priority 3)"]


def test_failing_or_wrong_gpu_spec_hook_is_one_warning():
    def broken(register):
        raise RuntimeError("no table\nsecond line")

    bad = types.SimpleNamespace(kernelpro_register_gpu_specs=hookimpl(broken))
    wrong = types.SimpleNamespace(kernelpro_register_gpu_specs=hookimpl(lambda register: register({"name": "X"})))
    p = plugins(("bad", bad), ("wrong", wrong))
    assert p.resolve_gpu("NVIDIA H200", "sm_90").name == "H200 SXM"
    assert p.warnings == [
        "plugin 'bad' failed in kernelpro_register_gpu_specs: RuntimeError: no table; its GPU specs are not used",
        "plugin 'wrong' failed in kernelpro_register_gpu_specs: TypeError: expected a kernelpro.records.GpuSpec, "
        "got dict; its GPU specs are not used",
    ]


def test_gpu_named_by_spec_name_or_device_name():
    p = plugins(("vendor", vendor(spec("Lab H200", "h200", priority=1))))
    assert p.gpu_named("h200 sxm").name == "H200 SXM"
    assert p.gpu_named("H200").name == "Lab H200"
    assert p.gpu_named("nothing like it") is None


def test_old_records_still_load_and_new_fields_round_trip():
    old = to_json(H200)
    del old["priority"], old["exact"]
    assert from_json(old, GpuSpec) == H200
    new = spec("X", "x", priority=4, exact=True)
    assert from_json(to_json(new), GpuSpec) == new


def test_judge_bound_uses_the_same_rule():
    from kernelpro.evaluate.bounds import gpu_spec_for

    assert gpu_spec_for("NVIDIA H200").name == "H200 SXM"
    assert gpu_spec_for("NVIDIA GH200 480GB") is None


DRIVER_NAMES = {"H100 SXM": "NVIDIA H100 80GB HBM3", "H100 PCIe": "NVIDIA H100 PCIe", "H200 SXM": "NVIDIA H200",
                "A100 SXM 80GB": "NVIDIA A100-SXM4-80GB", "A100 80GB PCIe": "NVIDIA A100 80GB PCIe",
                "A100 40GB": "NVIDIA A100-PCIE-40GB", "L40S": "NVIDIA L40S", "B200": "NVIDIA B200"}


def test_every_builtin_spec_has_a_driver_name_here():
    assert sorted(DRIVER_NAMES) == sorted(s.name for s in SPECS)


@pytest.mark.parametrize("name", sorted(DRIVER_NAMES))
def test_every_builtin_spec_resolves_from_its_driver_name(name):
    driver = DRIVER_NAMES[name]
    arch = next(s.arch for s in SPECS if s.name == name)
    assert plugins().resolve_gpu(driver, arch).name == name
