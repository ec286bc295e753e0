"""``NcuAnalyzer``: ``kernelpro analyze REPORT`` for Nsight Compute files.

Reads a ``.ncu-rep`` (with the ``ncu_report`` module, no GPU needed; else through
``ncu --import``) or a CSV export of the raw or details page. A JSON sidecar written by
:class:`~kernelpro_plugins_ncu.collector.NcuCollector` next to the report (``<name>.json``)
adds the forward's input/output bytes.
"""

from __future__ import annotations

from pathlib import Path

from kernelpro.api import Analyzer, CollectorError
from kernelpro.records import ProfileData

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
        sidecar = R.load_sidecar(path)
        if sidecar.get("io"):
            payload["io"] = sidecar["io"]
        payload["report"] = str(path)
        return R.profile_data(kernels, payload)
