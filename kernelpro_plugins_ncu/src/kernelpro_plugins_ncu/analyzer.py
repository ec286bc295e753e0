"""``NcuAnalyzer``: ``kernelpro analyze REPORT`` for Nsight Compute files.

Reads a ``.ncu-rep`` (with the ``ncu_report`` module, no GPU needed; else through
``ncu --import``) or a CSV export of the raw or details page. A JSON sidecar written by
:class:`~kernelpro_plugins_ncu.collector.NcuCollector` next to the report (``<name>.json``)
adds the forward's input/output bytes.
"""

from __future__ import annotations

from pathlib import Path

from kernelpro.api import Analyzer, CollectorError, ProfileData

from kernelpro_plugins_ncu import report as R


class NcuAnalyzer(Analyzer):
    name = "ncu"
    level = "kernel"
    description = "Nsight Compute reports (.ncu-rep) and their CSV exports (raw or details page)"

    def accepts(self, path: Path) -> bool:
        path = Path(path)
        if path.suffix in (".ncu-rep", ".ncu-repz"):
            return True
        if path.suffix != ".csv" or not path.exists():
            return False
        try:
            with open(path, errors="replace") as fh:
                head = fh.read(4096)
        except OSError:
            return False
        return '"Kernel Name"' in head and ('"ID"' in head or '"Metric Name"' in head)

    def load(self, path: Path) -> ProfileData:
        path = Path(path)
        kernels, payload = R.read_report(path)
        if not kernels:
            raise CollectorError(f"{path.name} holds no profiled kernel")
        notes = []
        sibling = stage_sibling(path)
        if sibling is not None:
            other, other_payload = R.read_report(sibling)
            first, second = (other, kernels) if "stage2" in path.name else (kernels, other)
            merged = R.merge_kernels(first, second)
            if len(merged) == len(kernels):
                kernels = merged
                if "stage1" in path.name:  # source hot spots come with the stage-2 report
                    payload["source_hotspots"] = other_payload.get("source_hotspots", [])
                notes.append(f"merged with {sibling.name}")
        sidecar = R.load_sidecar(path)
        if sidecar.get("io"):
            payload["io"] = sidecar["io"]
        payload["report"] = str(path)
        return R.profile_data(kernels, payload, notes)


def stage_sibling(path: Path) -> Path | None:
    """The other stage's report the collector wrote beside this one (ncu_stage1 <-> ncu_stage2,
    same extension), so that ``kernelpro analyze`` sees stage-1 and stage-2 counters together."""
    name = path.name
    for a, b in (("stage1", "stage2"), ("stage2", "stage1")):
        if a in name:
            other = path.with_name(name.replace(a, b, 1))
            return other if other.exists() else None
    return None
