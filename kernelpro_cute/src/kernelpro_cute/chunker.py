"""Split C++/CUDA sources into searchable chunks: classes, structs, unions, enums,
functions (free and member), ``using`` aliases and ``#define`` macros.

Method (a scanner, not a parser):
1. ``mask_code`` blanks comments, string/character literals (raw strings included) and
   preprocessor lines with spaces, keeping every newline, so offsets and line numbers of
   the masked text equal the original's and no brace inside an ``asm("{ ... }")`` string
   or a comment is seen.
2. Braces are matched once with a stack over the masked text.
3. ``_scan`` walks a region statement by statement. At each ``{`` the text since the
   previous ``;``, ``{`` or ``}`` is the declaration header; ``classify_header`` strips
   ``template <...>`` prefixes (angle brackets matched with nesting, parentheses
   respected), access specifiers and attributes, then decides: namespace / extern block
   (scanned inside), class-like (a chunk, members scanned inside), enum, function (a chunk;
   its body is skipped), a brace initializer inside a constructor's member-initializer
   list (skipped, header continues), or anything else (skipped). Braces inside open
   parentheses (default arguments such as ``Init = {}``) are skipped too.
4. A chunk's first line moves up over the comment lines directly above it.
Files that yield no chunk (markdown, CMake) are cut into fixed windows instead.
"""

from __future__ import annotations

import re
from typing import Iterator

import attrs

#: lines per window for files without C++ structure
WINDOW_LINES = 60
#: the scanner recurses into classes/namespaces at most this deep
MAX_DEPTH = 12

CPP_SUFFIXES = (".h", ".hpp", ".cuh", ".cu", ".cpp", ".cc", ".cxx", ".inl", ".hxx")
TEXT_SUFFIXES = (".md",)


@attrs.frozen
class Chunk:
    """A span of one file: 1-based inclusive ``start_line``..``end_line``."""

    kind: str  # class | struct | union | enum | function | alias | macro | text
    symbol: str  # unqualified name ("" for text windows)
    qualified: str  # scope-qualified name, e.g. "cute::TiledMMA::get_slice"
    start_line: int
    end_line: int
    signature: str  # the declaration header on one line, trimmed


# --- 1. masking --------------------------------------------------------------------------

_RAW_STRING = re.compile(r'R"([^()\\ ]{0,16})\(')


def mask_code(text: str) -> str:
    """Return ``text`` with comments, literals and preprocessor lines replaced by spaces
    (newlines kept). String delimiters stay so ``extern "C"`` remains recognisable."""
    out = list(text)
    n = len(text)
    i = 0
    line_start = True  # only whitespace seen since the last newline

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    while i < n:
        c = text[i]
        if c == "\n":
            line_start = True
            i += 1
            continue
        if line_start and c == "#":
            # preprocessor directive, with backslash continuations
            j = i
            while j < n:
                nl = text.find("\n", j)
                if nl == -1:
                    j = n
                    break
                if text[nl - 1] == "\\" or (nl >= 2 and text[nl - 2 : nl] == "\\\r"):
                    j = nl + 1
                    continue
                j = nl
                break
            # a comment starting on the directive line may run further
            blank(i, j)
            i = j
            continue
        if not c.isspace():
            line_start = False
        if c == "/" and i + 1 < n:
            nxt = text[i + 1]
            if nxt == "/":
                j = text.find("\n", i)
                j = n if j == -1 else j
                blank(i, j)
                i = j
                continue
            if nxt == "*":
                j = text.find("*/", i + 2)
                j = n if j == -1 else j + 2
                blank(i, j)
                i = j
                continue
        if c == "R" and i + 1 < n and text[i + 1] == '"':
            m = _RAW_STRING.match(text, i)
            if m and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
                end_tok = ")" + m.group(1) + '"'
                j = text.find(end_tok, m.end())
                j = n if j == -1 else j + len(end_tok)
                blank(i + 2, j - 1)
                i = j
                continue
        if c == '"' or (c == "'" and not _is_digit_separator(text, i)):
            j = i + 1
            while j < n and text[j] != c:
                if text[j] == "\\":
                    j += 1
                elif text[j] == "\n":  # unterminated literal: stop at end of line
                    break
                j += 1
            blank(i + 1, j)
            i = j + 1
            continue
        i += 1
    return "".join(out)


def _is_digit_separator(text: str, i: int) -> bool:
    """C++14 digit separators: 1'000'000."""
    return 0 < i < len(text) - 1 and text[i - 1].isalnum() and text[i + 1].isalnum() and (
        text[i - 1].isdigit() or text[i + 1].isdigit()
    ) and _in_number(text, i)


def _in_number(text: str, i: int) -> bool:
    j = i - 1
    while j >= 0 and (text[j].isalnum() or text[j] in "'."):
        j -= 1
    return text[j + 1].isdigit()


# --- 2. braces ---------------------------------------------------------------------------


def match_braces(masked: str) -> dict[int, int]:
    """Offset of each ``{`` -> offset of its ``}``; an unclosed ``{`` maps to the end."""
    pairs: dict[int, int] = {}
    stack: list[int] = []
    for i, c in enumerate(masked):
        if c == "{":
            stack.append(i)
        elif c == "}" and stack:
            pairs[stack.pop()] = i
    for i in stack:
        pairs[i] = len(masked) - 1
    return pairs


# --- 3. headers --------------------------------------------------------------------------

_IDENT = re.compile(r"[A-Za-z_]\w*")
_ACCESS = re.compile(r"^\s*(?:public|private|protected)\s*:(?!:)")
_ATTRIBUTE = re.compile(r"\[\[.*?\]\]", re.S)
# identifiers whose parenthesised argument is not a parameter list
_NOT_A_NAME = frozenset({
    "decltype", "__launch_bounds__", "alignas", "__align__", "__attribute__", "__declspec",
    "sizeof", "alignof", "noexcept", "requires", "static_assert", "CUTE_REQUIRES",
    "__cluster_dims__", "__maxnreg__", "CUTLASS_GRID_CONSTANT", "explicit",
})
_CONTROL = frozenset({"if", "for", "while", "switch", "catch", "do", "else", "try", "return"})
_CLASS_KEYS = ("class", "struct", "union")


def strip_template_prefix(header: str) -> str:
    """Remove leading ``template <...>`` groups (nested angles, parentheses respected)."""
    s = header.lstrip()
    while s.startswith("template"):
        rest = s[len("template"):].lstrip()
        if not rest.startswith("<"):
            break
        depth = 0
        paren = 0
        end = None
        for k, ch in enumerate(rest):
            if ch == "(":
                paren += 1
            elif ch == ")":
                paren = max(0, paren - 1)
            elif paren == 0 and ch == "<":
                depth += 1
            elif paren == 0 and ch == ">":
                depth -= 1
                if depth == 0:
                    end = k
                    break
        if end is None:
            return s
        s = rest[end + 1:].lstrip()
    return s


def _top_level_positions(s: str, targets: str) -> Iterator[tuple[int, str]]:
    """Yield (offset, char) of ``targets`` chars at parenthesis depth 0 and angle depth 0.

    Angle brackets are counted only outside parentheses; ``->``, ``<<``, ``>>`` after
    ``operator`` and comparison-looking ``<`` preceded by a space and followed by a space
    are not treated as brackets.
    """
    paren = 0
    angle = 0
    n = len(s)
    k = 0
    while k < n:
        ch = s[k]
        if s.startswith("operator", k) and (k == 0 or not (s[k - 1].isalnum() or s[k - 1] == "_")):
            # skip the operator token itself (e.g. operator<, operator(), operator->)
            j = k + len("operator")
            while j < n and s[j].isspace():
                j += 1
            if s.startswith("()", j):
                j += 2
            else:
                while j < n and s[j] in "<>=!+-*/%&|^~[],":
                    j += 1
            if paren == 0 and angle == 0 and "(" in targets:
                yield (k, "operator")
            k = j
            continue
        if ch == "(":
            if paren == 0 and angle == 0 and ch in targets:
                yield (k, ch)
            paren += 1
        elif ch == ")":
            paren = max(0, paren - 1)
            if paren == 0 and angle == 0 and ch in targets:
                yield (k, ch)
        elif paren == 0 and ch == "<" and not (k + 1 < n and s[k + 1] == "<"):
            angle += 1
        elif paren == 0 and ch == ">" and not (k > 0 and s[k - 1] == "-"):
            angle = max(0, angle - 1)
        elif paren == 0 and angle == 0 and ch in targets:
            yield (k, ch)
        k += 1


def _ident_before(s: str, pos: int) -> str:
    """The (possibly ``::``-qualified, ``~``-prefixed) identifier ending right before pos."""
    j = pos
    while j > 0 and s[j - 1].isspace():
        j -= 1
    end = j
    while j > 0 and (s[j - 1].isalnum() or s[j - 1] in "_:~"):
        j -= 1
    return s[j:end].strip(":")


def function_name(decl: str) -> str | None:
    """Name of the function declared by ``decl`` (template prefix already stripped), or
    None when ``decl`` declares no function."""
    for pos, what in _top_level_positions(decl, "("):
        if what == "operator":
            j = pos + len("operator")
            rest = decl[j:].lstrip()
            if rest.startswith("()"):
                sym = "()"
            else:
                m = re.match(r"[^\s(]+|\s*\w[\w\s:<>*&]*?(?=\()", rest)
                sym = m.group(0).strip() if m else ""
            qualified = decl[:pos].rstrip().endswith("::")
            prefix = _ident_before(decl, pos) if qualified else ""
            name = f"operator{sym}"
            return f"{prefix}::{name}" if prefix else name
        name = _ident_before(decl, pos)
        base = name.split("::")[-1].lstrip("~")
        if not name or base in _NOT_A_NAME:
            continue
        if base in _CONTROL:
            return None
        return name
    return None


@attrs.frozen
class Header:
    kind: str  # namespace | extern | class | struct | union | enum | function | init | other
    name: str = ""


def _has_top_level_assignment(s: str) -> bool:
    for pos, _ in _top_level_positions(s, "="):
        before = s[pos - 1] if pos > 0 else ""
        after = s[pos + 1] if pos + 1 < len(s) else ""
        if before in "=!<>+-*/%&|^" or after == "=":
            continue
        return True
    return False


def classify_header(header: str) -> Header:
    """Decide what the declaration text before a ``{`` opens."""
    s = header
    while True:
        t = _ACCESS.sub("", s)
        if t == s:
            break
        s = t
    s = _ATTRIBUTE.sub(" ", s).strip()
    if not s:
        return Header("other")
    m = re.match(r"(?:inline\s+)?namespace\b\s*([\w:]*)", s)
    if m:
        return Header("namespace", m.group(1))
    if re.match(r'extern\s*"', s):
        return Header("extern")
    decl = strip_template_prefix(s)
    # constructor member-initializer list: "X(...) : a_(1), b_{" -- the { is an initializer
    close_parens = [p for p, c in _top_level_positions(decl, ")")]
    if close_parens:
        tail = decl[close_parens[0] + 1:]
        if re.match(r"\s*(?:noexcept\s*)?:(?!:)", tail) and re.search(r"[\w>]\s*$", decl):
            return Header("init")
    m = re.match(r"(?:(?:typedef|static|constexpr|inline)\s+)*enum\b(?:\s+(?:class|struct)\b)?\s*([A-Za-z_]\w*)?", decl)
    if m:
        return Header("enum", m.group(1) or "")
    if _has_top_level_assignment(decl) and "operator" not in decl:
        return Header("other")
    first_paren = next((p for p, _ in _top_level_positions(decl, "(")), None)
    m = re.search(r"\b(class|struct|union)\b", decl)
    if m and (first_paren is None or m.start() < first_paren):
        return Header(m.group(1), _class_name(decl[m.end():]))
    name = function_name(decl)
    if name:
        return Header("function", name)
    return Header("other")


def _class_name(after_key: str) -> str:
    """Name in ``[attrs] Name<args> : bases`` (text after the class key)."""
    s = re.sub(r"\b(?:alignas|__align__|__declspec|__attribute__)\s*\(.*?\)", " ", after_key)
    s = re.sub(r"\b[A-Z][A-Z0-9_]*\s*\([^()]*\)", " ", s)  # ALIGN-style macros with arguments
    cut = len(s)
    for pos, ch in _top_level_positions(s, "<:"):
        if ch == ":" and (s[pos + 1: pos + 2] == ":" or s[pos - 1: pos] == ":"):
            continue
        cut = pos
        break
    angle = s.find("<")
    if 0 <= angle < cut:
        cut = angle
    idents = re.findall(r"[A-Za-z_][\w:]*", s[:cut])
    idents = [i for i in idents if i not in ("final", "alignas") and not re.fullmatch(r"[A-Z][A-Z0-9_]+", i)]
    if not idents:
        idents = re.findall(r"[A-Za-z_][\w:]*", s[:cut])
    return idents[-1].split("::")[-1] if idents else ""


# --- 4. the scan -------------------------------------------------------------------------


class _Lines:
    """Offset -> 1-based line number."""

    def __init__(self, text: str) -> None:
        self.starts = [0]
        for m in re.finditer("\n", text):
            self.starts.append(m.end())

    def line(self, offset: int) -> int:
        import bisect

        return bisect.bisect_right(self.starts, offset)


def _first_code_offset(masked: str, a: int, b: int) -> int:
    k = a
    while k < b and masked[k].isspace():
        k += 1
    return k


def _extend_over_comments(lines: list[str], start_line: int) -> int:
    """Move a 1-based start line up over the //, /* */ or * comment lines right above it."""
    k = start_line - 1  # index of the chunk's first line
    while k > 0:
        prev = lines[k - 1].strip()
        if prev.startswith(("//", "/*", "*")) and not prev.startswith("/////"):
            k -= 1
        else:
            break
    return k + 1


def _one_line(s: str, limit: int = 200) -> str:
    s = " ".join(s.split())
    return s if len(s) <= limit else s[: limit - 3] + "..."


def chunk_cpp(text: str) -> list[Chunk]:
    """Chunks of a C++/CUDA source, in file order (nested ones after their parent)."""
    masked = mask_code(text)
    pairs = match_braces(masked)
    index = _Lines(text)
    lines = text.splitlines()
    chunks: list[Chunk] = []

    def emit(kind: str, name: str, scope: list[str], header_start: int, end: int, header: str) -> None:
        start_line = index.line(_first_code_offset(masked, header_start, end))
        start_line = _extend_over_comments(lines, start_line)
        end_line = index.line(end)
        base = name.split("::")[-1]
        qualified = "::".join([*scope, name]) if name else "::".join(scope)
        chunks.append(Chunk(kind, base, qualified, start_line, end_line, _one_line(header)))

    def scan(a: int, b: int, scope: list[str], depth: int, in_class: bool) -> None:
        pos = a
        stmt = a
        paren = 0  # open parentheses since ``stmt``: braces inside them are initializers
        while pos < b:
            c = masked[pos]
            if c == "(":
                paren += 1
            elif c == ")":
                paren = max(0, paren - 1)
            elif c == "{" and paren > 0:  # e.g. a default argument "InitBarriers = {}"
                pos = pairs.get(pos, b) + 1
                continue
            if c == ";":
                paren = 0
                if not in_class:  # member aliases stay part of their class's chunk
                    _statement(stmt, pos, scope)
                stmt = pos + 1
            elif c == "}":
                stmt = pos + 1
                paren = 0
            elif c == ":" and masked[pos + 1: pos + 2] != ":" and masked[pos - 1: pos] != ":":
                if re.fullmatch(r"\s*(?:public|private|protected)\s*", masked[stmt:pos]):
                    stmt = pos + 1
            elif c == "{":
                close = pairs.get(pos, b)
                header = masked[stmt:pos]
                h = classify_header(header)
                if h.kind == "init":
                    pos = close + 1
                    continue
                if h.kind in ("namespace", "extern"):
                    if depth < MAX_DEPTH:
                        inner = [*scope, h.name] if h.name else scope
                        scan(pos + 1, close, inner, depth + 1, False)
                elif h.kind in _CLASS_KEYS:
                    end = close
                    emit(h.kind, h.name, scope, stmt, end, header)
                    if depth < MAX_DEPTH:
                        scan(pos + 1, close, [*scope, h.name or "<anon>"], depth + 1, True)
                elif h.kind in ("enum", "function"):
                    emit(h.kind, h.name, scope, stmt, close, header)
                pos = close + 1
                stmt = pos
                paren = 0
                continue
            pos += 1

    def _statement(a: int, b: int, scope: list[str]) -> None:
        stmt = masked[a:b]
        m = re.match(r"\s*(?:template\s*<.*>\s*)?using\s+([A-Za-z_]\w*)\s*=", stmt, re.S)
        if m:
            emit("alias", m.group(1), scope, a, b, stmt)

    scan(0, len(masked), [], 0, False)
    chunks.extend(_macros(text, lines))
    chunks.sort(key=lambda ch: (ch.start_line, -ch.end_line))
    return chunks


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)")


def _macros(text: str, lines: list[str]) -> list[Chunk]:
    out = []
    k = 0
    while k < len(lines):
        m = _DEFINE.match(lines[k])
        if m:
            end = k
            while end < len(lines) - 1 and lines[end].rstrip().endswith("\\"):
                end += 1
            name = m.group(1)
            if not name.endswith(("_HPP", "_H", "_H_", "_CUH")):  # include guards
                start = _extend_over_comments(lines, k + 1)
                out.append(Chunk("macro", name, name, start, end + 1, _one_line(lines[k])))
            k = end + 1
        else:
            k += 1
    return out


def chunk_windows(text: str, size: int = WINDOW_LINES) -> list[Chunk]:
    """Fixed windows of ``size`` lines (files with no C++ structure)."""
    n = len(text.splitlines())
    return [
        Chunk("text", "", "", s + 1, min(n, s + size), "")
        for s in range(0, max(n, 1), size)
    ]


def chunk_file(path: str, text: str) -> list[Chunk]:
    """Chunks for a file, chosen by suffix; C++ files with no chunk fall back to windows."""
    if path.endswith(CPP_SUFFIXES):
        chunks = chunk_cpp(text)
        if chunks:
            return chunks
    return chunk_windows(text)
