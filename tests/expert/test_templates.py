"""The expert generator's templates are source files of its package (``kernels/*.py.j2``),
loaded through importlib.resources and shipped in its wheel."""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from importlib import resources
from pathlib import Path

import pytest

from expert_problems import PROBLEMS
from kernelpro_plugins_expert import templates
from kernelpro_plugins_expert.recognize import recognize
from kernelpro_plugins_expert.render import default_params, render_candidate

NAMES = ("POINTWISE", "ROWCOL", "SPLIT", "REDUCE_ALL", "GEMM", "GEMM_REDUCE", "CONV", "CONVG", "POOL", "POOL_CL", "SCAN", "CHNORM", "XENT", "ROWPAIR", "ATTENTION", "CANDIDATE")
INCLUDED = {"row_output.py.j2"}  # included by rowcol and split, never rendered on its own
DIST = Path(__file__).resolve().parents[2] / "kernelpro_plugins_expert"


def kernel_files() -> set[str]:
    folder = resources.files("kernelpro_plugins_expert") / templates.KERNELS
    return {p.name for p in folder.iterdir() if p.name.endswith(".py.j2")}


def test_every_template_is_a_file_of_the_package_and_every_file_is_used():
    named = {getattr(templates, n) for n in NAMES}
    assert named | INCLUDED == kernel_files()
    for name in sorted(kernel_files()):
        templates.ENV.get_template(name)  # parses: a syntax error names the file and line


def test_a_template_file_header_comment_does_not_reach_the_rendered_source():
    # each file opens with a Jinja comment; trim_blocks drops the newline after it, so the
    # candidate starts with its own first line and kernels with their decorator
    source = PROBLEMS["softmax"]
    rec = recognize(source)
    text = render_candidate(source, rec, default_params(rec))
    assert text.startswith("# KernelPro candidate (generator: expert): ")
    assert "{#" not in text and "#}" not in text
    assert "\n@triton.jit\ndef _kp_r0_kernel(" in text


@pytest.mark.slow
def test_the_wheel_contains_the_kernel_templates(tmp_path):
    # built from a copy, so that the build leaves nothing in the source tree
    src = tmp_path / "dist"
    shutil.copytree(DIST, src, ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    out = tmp_path / "wheel"
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "--no-build-isolation",
                           "--no-index", "-w", str(out), str(src)], capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = out.glob("kernelpro_plugins_expert-*.whl")
    with zipfile.ZipFile(wheel) as zf:
        shipped = {Path(n).name for n in zf.namelist() if n.startswith("kernelpro_plugins_expert/kernels/")}
        entry_points = zf.read(next(n for n in zf.namelist() if n.endswith("entry_points.txt"))).decode()
    assert shipped == kernel_files()
    assert "expert = kernelpro_plugins_expert.plugin" in entry_points


def test_the_candidates_broadcast_follows_pytorchs_rule():
    """Pointwise and whole-tensor reduction kernels work out their output shape with the
    candidate's own ``_kp_broadcast`` (``torch.broadcast_shapes`` imports sympy at its first
    call: 2 s of a reduction's first call on the H100 machine, throughput.md session 34);
    it must give PyTorch's shape, and refuse what PyTorch refuses."""
    import random

    import torch

    source = PROBLEMS["elementwise_chain"]
    rec = recognize(source)
    text = render_candidate(source, rec, default_params(rec))
    assert "broadcast_shapes" not in text.replace("``torch.broadcast_shapes``", "")
    start = text.index("def _kp_broadcast(")
    ns: dict = {"_kp_torch": torch}
    exec(text[start:text.index("\n\n\n", start)], ns)
    broadcast = ns["_kp_broadcast"]
    rng = random.Random(0)
    agreed = refused = 0
    for _ in range(400):
        rank = rng.randint(0, 4)
        base = [rng.choice([0, 1, 2, 3, 5]) for _ in range(rank)]
        shapes = []
        for _ in range(rng.randint(1, 4)):
            drop = rng.randint(0, rank)
            shapes.append(torch.Size([rng.choice([1, s, s, 4]) for s in base[drop:]]))
        try:
            want = torch.broadcast_shapes(*shapes)
        except RuntimeError:
            with pytest.raises(RuntimeError):
                broadcast(*shapes)
            refused += 1
            continue
        assert broadcast(*shapes) == want, shapes
        agreed += 1
    assert agreed > 100 and refused > 20  # both sides of the rule were exercised
    assert broadcast() == torch.Size([]) and broadcast(torch.Size([])) == torch.Size([])
