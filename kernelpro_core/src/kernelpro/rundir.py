"""The run directory: everything a run produces, written so that a kill at any moment
loses nothing that was evaluated.

    config.yaml          the resolved configuration
    problem.py           a copy of the problem
    baseline.json        the reference's timing
    candidates/<id>.py   every candidate's source, written before it is evaluated
    pending.json         drafts written but not yet evaluated (for resume)
    candidates.jsonl     one line per evaluated candidate (append + fsync)
    analyses/<id>.json   bottleneck and findings of profiled candidates
    profiles.jsonl       profiles taken after a candidate's record (profiling.when: expand)
    profiles/<id>/       raw profile data per level
    evals/<id>/          the evaluation's job, logs, and the candidate's own directory (sandbox/)
    retimes.jsonl        candidates timed again because their timing was noisy (the newer result)
    reference_history.json  the reference's measurements so far, per worker (read by judges)
    .lock                held by the process running in this directory
    builds/<id>/         the candidate's compiled binaries (torch_extensions, triton)
    tree.json            the search tree and the policy's state
    best.py              the best correct candidate
    report.md            what was tried and what won
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any


class RunDirError(ValueError):
    """A file of the run directory that cannot be read as what it should hold (one line,
    naming the file)."""


#: a record's id as its line starts (``json.dumps`` writes it first): found in a line cut short
_RECORD_ID = re.compile(r'^\{"id": "([^"\\]*)"')


class RunDir:
    def __init__(self, path: Path) -> None:
        self.path = Path(path)

    def is_run(self) -> bool:
        """Whether the directory holds (part of) a KernelPro run: a run makes candidates/ first."""
        return (self.path / "candidates").is_dir()

    def foreign_entries(self) -> list[str]:
        """What the directory holds besides the lock file (empty for a new or absent one)."""
        try:
            return sorted(p.name for p in self.path.iterdir() if p.name != ".lock")
        except FileNotFoundError:
            return []

    def used_ids(self) -> set[str]:
        """The candidate ids whose source file exists (a new candidate must not take one)."""
        return {p.stem for p in (self.path / "candidates").glob("*.py")}

    def create(self) -> None:
        for sub in ("candidates", "analyses", "profiles", "evals", "builds"):
            (self.path / sub).mkdir(parents=True, exist_ok=True)

    # paths
    @property
    def records_path(self) -> Path:
        return self.path / "candidates.jsonl"

    @property
    def tree_path(self) -> Path:
        return self.path / "tree.json"

    def source_path(self, cid: str) -> Path:
        return self.path / "candidates" / f"{cid}.py"

    def eval_dir(self, cid: str) -> Path:
        return self.path / "evals" / cid

    def build_dir(self, cid: str) -> Path:
        return self.path / "builds" / cid

    def profile_dir(self, cid: str) -> Path:
        return self.path / "profiles" / cid

    def analysis_path(self, cid: str) -> Path:
        return self.path / "analyses" / f"{cid}.json"

    @property
    def reference_history_path(self) -> Path:
        return self.path / "reference_history.json"

    # records
    def append_record(self, record: dict[str, Any]) -> None:
        self.append_jsonl(self.records_path.name, record)

    def append_jsonl(self, name: str, record: dict[str, Any]) -> None:
        """One JSON line appended to ``name`` in the run directory, fsynced. The line goes out
        in one write: a buffered file splits a line past its buffer (4 KiB) into several, and
        a reader between them (``kernelpro report``, the MCP server, a watching script) saw
        half a record. A line a kill cut short stays where it is, unreadable and skipped by
        the readers; the next line starts on a line of its own instead of joining it, where
        it would have been unreadable too."""
        data = (json.dumps(record, default=str) + "\n").encode()
        fd = os.open(self.path / name, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            end = os.lseek(fd, 0, os.SEEK_END)
            if end > 0 and os.pread(fd, 1, end - 1) != b"\n":
                data = b"\n" + data
            view = memoryview(data)
            while view:  # a regular file takes it in one write; a short one is finished
                view = view[os.write(fd, view):]
            os.fsync(fd)
        finally:
            os.close(fd)

    def lock(self) -> Any:
        """An exclusive lock on the directory (an open file; held until it is closed or the
        process ends), or None when another process holds it."""
        import fcntl

        fh = open(self.path / ".lock", "a+")
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.close()
            return None
        fh.seek(0)
        fh.truncate()
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        return fh

    def lock_holder(self) -> int | None:
        try:
            return int((self.path / ".lock").read_text().split()[0])
        except (OSError, ValueError, IndexError):
            return None

    def read_jsonl(self, name: str) -> list[dict[str, Any]]:
        """The JSON objects of a JSON-lines file of the run (a torn last line is skipped)."""
        out: list[dict[str, Any]] = []
        try:
            text = (self.path / name).read_text(errors="replace")
        except OSError:
            return out
        for line in text.splitlines():
            try:
                obj = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(obj, dict):
                out.append(obj)
        return out

    def records(self) -> list[dict[str, Any]]:
        """The evaluated candidates' records; a line cut short by a kill mid-write is skipped
        (that candidate is evaluated again)."""
        return self.read_jsonl(self.records_path.name)

    def checked_records(self, pending: set[str]) -> tuple[list[dict[str, Any]], list[str]]:
        """The records for a resume, and a warning for each line dropped. A line a kill cut
        short mid-write is dropped when its candidate is still pending (it is evaluated again
        under its id), or when it is the file's last line and too short to name its
        candidate; any other unreadable line raises RunDirError: dropping it would lose a
        candidate that was evaluated, and a new one would take its id."""
        path = self.records_path
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            return [], []
        except OSError as exc:
            raise RunDirError(f"{path}: cannot read: {exc.strerror or exc}") from None
        lines = data.split(b"\n")
        last = max((i for i, ln in enumerate(lines) if ln.strip()), default=-1)
        out: list[dict[str, Any]] = []
        dropped: list[str] = []
        for i, raw in enumerate(lines):
            if not raw.strip():
                continue
            why = ""
            try:
                obj = json.loads(raw.decode())
            except UnicodeDecodeError:
                why = "not UTF-8 text"
            except json.JSONDecodeError as exc:
                why = f"not valid JSON at column {exc.colno}: {exc.msg}"
            else:
                if isinstance(obj, dict) and isinstance(obj.get("id"), str) and isinstance(obj.get("result"), dict):
                    out.append(obj)
                    continue
                why = "not a candidate record (a JSON object with id and result)"
            m = _RECORD_ID.match(raw.decode(errors="replace"))
            cid = m.group(1) if m else None
            if why.startswith("not valid JSON") and (cid in pending if cid else i == last):
                dropped.append(f"{path}: line {i + 1} was cut short mid-write; dropped"
                               + (f" ({cid} is evaluated again)" if cid else ""))
                continue
            raise RunDirError(f"{path}: line {i + 1} is unreadable ({why})"
                              + (f"; it holds candidate {cid}" if cid else "")
                              + "; resuming would lose it: repair or remove the line, or start a new run")
        return out, dropped

    def write_json(self, name: str, data: Any) -> None:
        write_atomic(self.path / name, json.dumps(data, indent=1, default=str))

    def read_json(self, name: str, default: Any = None) -> Any:
        """The JSON in ``name``, or ``default`` when it is absent; RunDirError (one line naming
        the file) when it is not JSON."""
        p = self.path / name
        if not p.exists():
            return default
        try:
            return json.loads(p.read_bytes().decode())
        except UnicodeDecodeError as exc:
            raise RunDirError(f"{p}: not valid JSON (byte {exc.start} is not UTF-8 text); repair or remove it "
                              "(nothing was changed)") from None
        except json.JSONDecodeError as exc:
            raise RunDirError(f"{p}: not valid JSON (line {exc.lineno} column {exc.colno}: {exc.msg}); repair "
                              "or remove it (nothing was changed)") from None
        except OSError as exc:
            raise RunDirError(f"{p}: cannot read: {exc.strerror or exc}") from None


def write_atomic(path: Path, text: str) -> None:
    tmp = path.with_name(path.name + ".tmp")
    with open(tmp, "w") as fh:
        fh.write(text)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
