"""Problems and candidates in the KernelBench file format.

A problem is a Python source defining ``class Model(nn.Module)``, ``get_inputs()`` and
``get_init_inputs()``. A candidate defines ``class ModelNew`` with the same constructor
and forward signature. Both are checked statically here (no code runs in the calling
process); they are executed only inside evaluation processes.
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

import attrs


class ProblemError(Exception):
    """The file is not a usable problem or candidate; the message is one line."""


class CandidateError(ProblemError):
    """The candidate breaks the contract (syntax error, no ModelNew, a signature that does not
    match the problem's): the candidate's verdict (``invalid``), not a bad invocation."""


@attrs.frozen
class Problem:
    name: str
    source: str
    path: Path | None = None
    init_args: tuple[str, ...] = ()  # Model.__init__ parameters, for the signature check
    forward_args: tuple[str, ...] = ()

    @property
    def digest(self) -> str:
        return hashlib.sha256(self.source.encode()).hexdigest()[:16]


def _class_def(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def _has_function(tree: ast.Module, name: str) -> bool:
    return any(
        isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name
        for node in tree.body
    ) or any(
        isinstance(node, ast.Assign)
        and any(isinstance(t, ast.Name) and t.id == name for t in node.targets)
        for node in tree.body
    )


def _method_args(cls: ast.ClassDef, method: str) -> tuple[str, ...] | None:
    for node in cls.body:
        if isinstance(node, ast.FunctionDef) and node.name == method:
            a = node.args
            names = [x.arg for x in a.posonlyargs + a.args][1:]  # drop self
            if a.vararg:
                names.append("*" + a.vararg.arg)
            names += [x.arg for x in a.kwonlyargs]
            if a.kwarg:
                names.append("**" + a.kwarg.arg)
            return tuple(names)
    return None


def _parse(source: str, what: str, path: Path | str) -> ast.Module:
    try:
        return ast.parse(source, filename=str(path))
    except SyntaxError as exc:
        error = CandidateError if what == "candidate" else ProblemError
        raise error(f"{path}: {what} has a syntax error at line {exc.lineno}: {exc.msg}") from None


def parse_problem(source: str, name: str = "problem", path: Path | None = None) -> Problem:
    where = path or name
    tree = _parse(source, "problem", where)
    missing = []
    model = _class_def(tree, "Model")
    if model is None:
        missing.append("class Model")
    for fn in ("get_inputs", "get_init_inputs"):
        if not _has_function(tree, fn):
            missing.append(f"{fn}()")
    if missing:
        raise ProblemError(
            f"{where}: not a KernelBench problem: missing {', '.join(missing)}"
        )
    assert model is not None
    return Problem(
        name=name,
        source=source,
        path=path,
        init_args=_method_args(model, "__init__") or (),
        forward_args=_method_args(model, "forward") or (),
    )


def load_problem(path: str | Path) -> Problem:
    p = Path(path)
    try:
        source = p.read_text()
    except FileNotFoundError:
        raise ProblemError(f"{p}: no such problem file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{p}: cannot read problem file: {exc}") from None
    name = re.sub(r"\W+", "_", p.stem)
    return parse_problem(source, name=name, path=p.resolve())


def check_candidate(source: str, problem: Problem, where: str = "candidate") -> None:
    """Static contract check of a candidate against its problem; raises CandidateError."""
    tree = _parse(source, "candidate", where)
    cls = _class_def(tree, "ModelNew")
    if cls is None:
        # allow ModelNew bound by assignment (ModelNew = SomethingElse)
        if not _has_function(tree, "ModelNew"):
            raise CandidateError(f"{where}: candidate defines no class ModelNew")
        return
    fwd = _method_args(cls, "forward")
    if fwd is not None and problem.forward_args and not _compatible(fwd, problem.forward_args):
        raise CandidateError(
            f"{where}: ModelNew.forward({', '.join(fwd)}) does not match "
            f"Model.forward({', '.join(problem.forward_args)})"
        )
    init = _method_args(cls, "__init__")
    if init is not None and not _compatible(init, problem.init_args):
        raise CandidateError(
            f"{where}: ModelNew.__init__({', '.join(init)}) does not match "
            f"Model.__init__({', '.join(problem.init_args)})"
        )


def _compatible(cand: tuple[str, ...], ref: tuple[str, ...]) -> bool:
    if any(a.startswith("*") for a in cand):
        return True
    positional = [a for a in ref if not a.startswith("*")]
    return len(cand) == len(positional)


def load_candidate(path: str | Path, problem: Problem) -> str:
    p = Path(path)
    try:
        source = p.read_text()
    except FileNotFoundError:
        raise ProblemError(f"{p}: no such candidate file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ProblemError(f"{p}: cannot read candidate file: {exc}") from None
    check_candidate(source, problem, where=str(p))
    return source


LANGUAGE_MARKERS = (
    ("cute", re.compile(r"#include\s*[<\"]cute/|cute::")),
    ("cu", re.compile(r"\bnvcc\b.*\.cu\b|load\(\s*name=.*sources=\[.*\.cu", re.S)),
    ("cuda", re.compile(r"load_inline|__global__")),
    ("triton", re.compile(r"@triton\.jit|import triton")),
)


def detect_language(source: str) -> str:
    for lang, pattern in LANGUAGE_MARKERS:
        if pattern.search(source):
            return lang
    return "pytorch"
