"""Every ``kernelpro`` command, listed from the CLI parser itself (so a new command cannot
escape), answers a bad invocation with exit 2 and one ``error:`` line, never a traceback;
the rest of README.md's exit-status table through the real command line; and
``kernelpro --help`` imports neither torch nor the anthropic SDK."""

from __future__ import annotations

import json
import subprocess
import sys

import click
import pytest

from helpers import DATA, FAST, kernelpro

PROBLEM = str(DATA / "tiny_problem.py")


def all_commands() -> list[tuple[str, ...]]:
    from kernelpro.cli import cli, load_plugins

    load_plugins(check=False, collect=False).register_commands(cli)

    def walk(group: click.Group, path: tuple[str, ...]):
        for name, cmd in sorted(group.commands.items()):
            yield path + (name,), cmd
            if isinstance(cmd, click.Group):
                yield from walk(cmd, path + (name,))

    return [(path, cmd) for path, cmd in walk(cli, ())]


COMMANDS = all_commands()


def one_error_line(res: subprocess.CompletedProcess) -> str:
    assert "Traceback" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.stderr
    return lines[0]


def test_the_listing_covers_the_known_commands():
    names = {" ".join(path) for path, _ in COMMANDS}
    assert {"optimize", "eval", "profile", "analyze", "plugins", "config show", "config validate", "bench",
            "calibrate"} <= names


@pytest.mark.parametrize("path", [p for p, _ in COMMANDS], ids=[" ".join(p) for p, _ in COMMANDS])
def test_unknown_option_exits_2_with_one_error_line(path):
    res = kernelpro(*path, "--no-such-option")
    assert res.returncode == 2, (path, res.stdout, res.stderr)
    line = one_error_line(res)
    assert "--no-such-option" in line and f"kernelpro {' '.join(path)} --help" in line
    assert res.stdout == ""


@pytest.mark.parametrize("path", [p for p, c in COMMANDS
                                  if any(isinstance(a, click.Argument) and a.required for a in c.params)],
                         ids=lambda p: " ".join(p))
def test_missing_argument_exits_2_with_one_error_line(path):
    res = kernelpro(*path)
    assert res.returncode == 2, (path, res.stdout, res.stderr)
    assert "Missing argument" in one_error_line(res)


@pytest.mark.parametrize("path", [p for p, c in COMMANDS
                                  if any(isinstance(a, click.Argument) and a.required and isinstance(a.type, click.Path)
                                         for a in c.params)],
                         ids=lambda p: " ".join(p))
def test_unreadable_input_file_exits_2_with_one_error_line(path, tmp_path):
    _, cmd = next(x for x in COMMANDS if x[0] == path)
    args = [str(tmp_path / f"missing_{a.name}.py") if isinstance(a.type, click.Path) else "x"
            for a in cmd.params if isinstance(a, click.Argument) and a.required]
    res = kernelpro(*path, *args, "--device", "cpu") if any(o.name == "device" for o in cmd.params) \
        else kernelpro(*path, *args)
    assert res.returncode == 2, (path, res.stdout, res.stderr)
    one_error_line(res)


def test_bare_groups_print_their_help_and_exit_0():
    for path in [()] + [p for p, c in COMMANDS if isinstance(c, click.Group)]:
        res = kernelpro(*path)
        assert res.returncode == 0 and "Usage:" in res.stdout, (path, res.stderr)


def test_output_directory_that_cannot_be_created_exits_2(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    for out in (blocker / "run", blocker):
        res = kernelpro("optimize", PROBLEM, "-c", str(FAST), "--device", "cpu", "--budget", "1",
                        "--generator", "testplugin_echo", "-o", str(out), "--quiet")
        assert res.returncode == 2, (out, res.stderr)
        one_error_line(res)


def test_device_cuda_without_a_gpu_exits_3():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    res = kernelpro("eval", PROBLEM, str(DATA / "good.py"), "--device", "cuda", "-c", str(FAST))
    assert res.returncode == 3, res.stderr
    assert "no CUDA GPU" in one_error_line(res)


def test_profile_on_a_cpu_says_what_it_could_not_do_and_exits_3(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    # without cpu_overhead, the one system finding a CPU trace can give: whether it fires
    # depends on how busy the host is (Python time between operators grows under load)
    cfg = tmp_path / "no_cpu_overhead.yaml"
    cfg.write_text(FAST.read_text().replace("profiling:\n", "profiling:\n  block_micro_profilers: [cpu_overhead]\n"))
    assert "block_micro_profilers" in cfg.read_text()
    res = kernelpro("profile", PROBLEM, str(DATA / "good.py"), "-c", str(cfg), "--device", "cpu", "--json")
    assert res.returncode == 3, (res.stdout, res.stderr)
    out = json.loads(res.stdout)  # what did run is still printed
    assert out["bottleneck"] is None and any("ncu" in n and "CUDA" in n for n in out["notes"])
    assert {c["collector"] for c in out["collected"]} >= {"timeline"}
    assert "no kernel-level profile" in one_error_line(res)


def test_profile_on_a_cpu_with_a_system_finding_prints_it_warns_and_exits_0(tmp_path):
    """The other branch: no kernel-level profile, but the timeline found something (here a
    forward that spends its time in Python between operators), so the findings are printed
    and a warning says where they come from."""
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    # 400k iterations: tens of ms of Python per call, more than a small operator takes even
    # when a loaded host stalls its thread pool (seen: erf at 27 ms)
    cand = tmp_path / "python_heavy.py"
    cand.write_text((DATA / "good.py").read_text().replace(
        "    def forward(self, x):\n",
        "    def forward(self, x):\n        acc = 0\n        for i in range(400000):\n            acc += i % 7\n"))
    assert "range(400000)" in cand.read_text()
    res = kernelpro("profile", PROBLEM, str(cand), "-c", str(FAST), "--device", "cpu", "--json")
    assert res.returncode == 0, (res.stdout, res.stderr)
    out = json.loads(res.stdout)
    assert out["bottleneck"] is None
    assert any(f["tool"] == "cpu_overhead" for f in out["findings"]), out["findings"]
    warn = [ln for ln in res.stderr.splitlines() if ln.startswith("warning:")]
    assert any("no kernel-level profile" in ln and "findings above" in ln for ln in warn), res.stderr
    assert "Traceback" not in res.stderr and not any(ln.startswith("error:") for ln in res.stderr.splitlines())


def test_calibrate_without_a_gpu_exits_3_with_error_prefix():
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    res = kernelpro("calibrate")
    assert res.returncode == 3
    assert "CUDA GPU" in one_error_line(res)


def test_help_imports_neither_torch_nor_anthropic():
    probe = ("import sys\n"
             "from kernelpro.cli import main\n"
             "try:\n"
             "    main(sys.argv[1:])\n"
             "except SystemExit as exc:\n"
             "    assert exc.code == 0, exc.code\n"
             "heavy = [m for m in ('torch', 'anthropic') if m in sys.modules]\n"
             "print('IMPORTED', heavy, file=sys.stderr)\n")
    for args in (["--help"], ["optimize", "--help"], ["bench", "--help"]):
        res = subprocess.run([sys.executable, "-c", probe, *args], capture_output=True, text=True, timeout=120)
        assert res.returncode == 0, res.stderr
        assert "IMPORTED []" in res.stderr, (args, res.stderr[-500:])


def test_an_unexpected_exception_in_a_command_is_one_error_line_and_exit_1(monkeypatch, capsys):
    """A bug in a command (kernelpro's or a plugin's, as `calibrate` had on the H200: a
    TypeError from torch) ends with exit 1 and one line naming the exception; with
    KERNELPRO_DEBUG=1 the traceback is raised for whoever debugs it."""
    from kernelpro import cli as cli_mod

    @click.command("explode")
    def explode() -> None:
        raise TypeError("sum() received an invalid combination of arguments\n * (Tensor input)")

    monkeypatch.setitem(cli_mod.cli.commands, "explode", explode)
    monkeypatch.delenv("KERNELPRO_DEBUG", raising=False)
    with pytest.raises(SystemExit) as exit_:
        cli_mod.main(["explode"])
    assert exit_.value.code == 1
    err = capsys.readouterr().err
    lines = [ln for ln in err.splitlines() if ln.strip() and not ln.startswith("warning:")]
    assert lines == ["error: internal error: TypeError: sum() received an invalid combination of arguments "
                     "(a bug in kernelpro or a plugin; KERNELPRO_DEBUG=1 shows the traceback)"]
    monkeypatch.setenv("KERNELPRO_DEBUG", "1")
    with pytest.raises(TypeError):
        cli_mod.main(["explode"])


@pytest.mark.parametrize("command", ["eval", "profile"])
def test_a_workdir_that_cannot_be_made_or_holds_the_user_s_files_exits_2(tmp_path, command):
    blocker = tmp_path / "file"
    blocker.write_text("")
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("mine")
    for workdir, said in ((blocker / "sub", "cannot be created"), ("/proc/kernelpro-no-such-dir", "cannot be created"),
                          (mine, "is not empty")):
        res = kernelpro(command, PROBLEM, str(DATA / "good.py"), "-c", str(FAST), "--device", "cpu",
                        "--workdir", str(workdir))
        assert res.returncode == 2, (workdir, res.stderr)
        assert said in one_error_line(res)
    assert [p.name for p in mine.iterdir()] == ["notes.txt"]


def test_a_run_directory_holding_the_user_s_files_is_refused(tmp_path):
    mine = tmp_path / "mine"
    mine.mkdir()
    for name in ("report.md", "config.yaml", "best.py", "problem.py"):
        (mine / name).write_text(f"the user's {name}\n")
    res = kernelpro("optimize", PROBLEM, "-c", str(FAST), "--device", "cpu", "--budget", "1",
                    "--generator", "testplugin_echo", "-o", str(mine), "--quiet")
    assert res.returncode == 2, res.stderr
    assert "is not empty and is not a KernelPro run directory" in one_error_line(res)
    assert sorted(p.name for p in mine.iterdir()) == ["best.py", "config.yaml", "problem.py", "report.md"]
    assert all((mine / n).read_text() == f"the user's {n}\n" for n in ("report.md", "config.yaml", "best.py", "problem.py"))


def test_the_optimizer_refuses_a_directory_of_the_user_s_files(tmp_path):
    # the same rule where the CLI's check does not run (the API, a bench's problem)
    from kernelpro import config as cfg
    from kernelpro.loop import InvocationError, Optimizer
    from kernelpro.plugins import Plugins
    from kernelpro.problem import load_problem

    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "report.md").write_text("mine")
    config = cfg.load_config(FAST, {"generator": {"name": "testplugin_echo", "params": {}}, "budget": 1})
    opt = Optimizer(load_problem(PROBLEM), config, Plugins(), mine, "cpu")
    try:
        with pytest.raises(InvocationError, match="is not empty and is not a KernelPro run directory"):
            opt.start(resume=False)
    finally:
        opt.abandon()
    assert (mine / "report.md").read_text() == "mine" and not (mine / "candidates").exists()
