"""The answer contract: what a model's reply must contain to become a candidate.

A reply holds one line ``Change: <what this version changes>`` and one fenced Python code
block with a complete candidate file (imports, the kernel, ``class ModelNew``). When the
reply has several Python blocks, the last one that defines ``ModelNew`` at top level is
the candidate.
The candidate must pass :func:`kernelpro.problem.check_candidate` and, unless disabled,
use the configured kernel language.
"""

from __future__ import annotations

import re

import attrs

from kernelpro.problem import Problem, ProblemError, check_candidate

#: a fenced block: ```tag ...\n body ``` ; the tag may be empty
_FENCE = re.compile(r"^```[ \t]*([\w+.-]*)[^\n]*\n(.*?)^```[ \t]*$", re.S | re.M)
_DEFINES_MODEL_NEW = re.compile(r"^(class\s+ModelNew\b|ModelNew\s*=)", re.M)
_PYTHON_TAGS = frozenset({"", "python", "py", "python3"})
_CHANGE_LINE = re.compile(r"^\s*[*_#>\s-]*change\s*[*_]*\s*:\s*(.+?)\s*$", re.I | re.M)

#: what each configured language requires in the candidate's source
LANGUAGE_RULES: dict[str, tuple[re.Pattern[str], str]] = {
    "cuda": (
        re.compile(r"load_inline|cpp_extension\.load\b|__global__"),
        "write the computation as a custom CUDA kernel compiled with "
        "torch.utils.cpp_extension.load_inline",
    ),
    "triton": (
        re.compile(r"triton\.jit"),
        "write the computation as a Triton kernel (@triton.jit)",
    ),
    "cute": (
        re.compile(r"cute::|cutlass"),
        "write the computation with CuTe / CUTLASS (C++ cute:: through load_inline, or the "
        "CuTe DSL)",
    ),
}

#: longest description kept from a reply
MAX_DESCRIPTION_CHARS = 200


#: how a refusal starts (checked on a reply without code only)
_REFUSAL = re.compile(
    r"^\W*(i('m| am)?\s+(sorry|unable|not able)|i\s+(can(no|')t|won'?t|will not|must decline|"
    r"am unable)|sorry\b|i apologi[sz]e|unfortunately,?\s+i\s+can)",
    re.I,
)


def refusal(text: str, stop_reason: str | None) -> str | None:
    """One line saying the model declined, or None: the API's ``refusal`` stop reason, or a
    reply without any code block that opens like a refusal."""
    first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
    if stop_reason == "refusal":
        return f"the model refused (stop_reason: refusal){': ' + first[:160] if first else ''}"
    if "```" not in text and _REFUSAL.search(first):
        return f"the model declined: {first[:160]}"
    return None


class ContractError(Exception):
    """The reply breaks the answer contract; the message says how, in one line."""


@attrs.frozen
class Answer:
    source: str
    description: str


def code_blocks(text: str) -> list[tuple[str, str]]:
    """Closed fenced blocks of ``text`` as ``(tag, body)``, in order."""
    return [(m.group(1).lower(), m.group(2)) for m in _FENCE.finditer(text)]


def candidate_source(text: str) -> str:
    """The candidate's source in a reply; raises :class:`ContractError`."""
    blocks = [body for tag, body in code_blocks(text) if tag in _PYTHON_TAGS]
    if not blocks:
        if text.count("```") % 2 == 1:
            raise ContractError("the code block is not closed (the answer was cut off?)")
        raise ContractError("the answer has no ```python code block")
    defining = [b for b in blocks if _DEFINES_MODEL_NEW.search(b)]
    if not defining:
        raise ContractError("the code block does not define class ModelNew")
    return defining[-1].strip("\n") + "\n"


def description(text: str) -> str:
    """The ``Change:`` line of a reply, else its first line of prose; at most
    :data:`MAX_DESCRIPTION_CHARS` characters."""
    prose = _FENCE.sub("", text)
    m = _CHANGE_LINE.search(prose)
    if m:
        line = m.group(1)
    else:
        line = next((ln.strip(" #*>-\t") for ln in prose.splitlines() if ln.strip(" #*>-\t")), "")
    line = line.strip().strip("*_").strip()
    return line[: MAX_DESCRIPTION_CHARS - 3] + "..." if len(line) > MAX_DESCRIPTION_CHARS else line


def change_line(text: str) -> str:
    """The reply's explicit ``Change:`` line, else "" (no guess from other prose)."""
    m = _CHANGE_LINE.search(_FENCE.sub("", text))
    return m.group(1).strip().strip("*_").strip()[:MAX_DESCRIPTION_CHARS] if m else ""


def parse_answer(text: str, problem: Problem, language: str | None) -> Answer:
    """Check a reply against the contract and return the candidate.

    ``language`` is "cuda", "triton" or "cute" to require that kernel language, None to
    accept any source (plain PyTorch included).
    """
    source = candidate_source(text)
    try:
        check_candidate(source, problem, where="answer")
    except ProblemError as exc:
        raise ContractError(str(exc).removeprefix("answer: ")) from None
    if language is not None:
        pattern, how = LANGUAGE_RULES[language]
        if not pattern.search(source):
            raise ContractError(f"the candidate has no {language} kernel: {how}")
    return Answer(source=source, description=description(text))
