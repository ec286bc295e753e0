"""Totals over several ``results.json`` files of ``run.py`` (e.g. two batches of seeds).

    .venv/bin/python benchmarks/llm_loop/summarize.py /tmp/llm_loop/results.json /tmp/llm_loop2/results.json
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from run import aggregate  # noqa: E402


def main() -> None:
    rows = [row for path in sys.argv[1:] for row in json.loads(Path(path).read_text())["rows"]]
    def added(key: str) -> dict[str, int]:
        out: dict[str, int] = {}
        for row in rows:
            for name, count in row[key].items():
                out[name] = out.get(name, 0) + count
        return dict(sorted(out.items()))

    out = {"total": aggregate(rows), "verdicts": added("verdicts"), "prompt_modes": added("prompt_modes"),
           "model_answers": added("model_answers"),
           "by_problem": {name: aggregate([r for r in rows if r["problem"] == name])
                          for name in sorted({r["problem"] for r in rows})}}
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
