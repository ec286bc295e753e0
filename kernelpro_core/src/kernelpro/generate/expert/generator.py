"""The ``expert`` generator: recognized regions -> Triton kernels, refined from findings.

Uses no network. From the root it proposes, in order: every recognized region lowered
with its default tile; the same with CUDA-graph capture (CUDA only); capture of the
unchanged reference forward (CUDA only). Refining a node, it plans moves from the node's
analysis (:mod:`.moves`) and proposes the children of the node's parameters that were
never tried in this run. When the node sits at the roofline it proposes nothing, so the
search closes that node. When the reference cannot be recognized (no trace), it
proposes nothing at all: there is no torch.compile fallback (the ``torch_compile``
generator is that). On a CPU device the candidates' Triton kernels run only with
``TRITON_INTERPRET=1`` set in the environment (Triton's interpreter; for tests).
"""

from __future__ import annotations

import json
from typing import Any

import attrs

from kernelpro.api import GenerationRequest, Generator
from kernelpro.generate.expert import moves
from kernelpro.generate.expert.recognize import Recognition, recognize
from kernelpro.generate.expert.render import default_params, describe, region_ids, render_candidate
from kernelpro.records import CandidateDraft


@attrs.frozen
class ExpertSettings:
    candidates_per_expansion: int = 2
    #: stop refining a node whose bottleneck reaches this fraction of its roofline
    #: (the issue's target for memory-bound winners is 80 % of measured bandwidth; 0.85
    #: leaves room to pass it before giving up)
    stop_at_roofline_fraction: float = 0.85
    #: offer CUDA-graph capture at all (CUDA devices only)
    cuda_graphs: bool = True

    def __attrs_post_init__(self) -> None:
        if self.candidates_per_expansion < 1:
            raise ValueError("candidates_per_expansion: expected a positive integer")
        if not 0.0 < self.stop_at_roofline_fraction <= 1.0:
            raise ValueError("stop_at_roofline_fraction: expected a number in (0, 1]")


def _key(params: dict[str, Any]) -> str:
    return json.dumps(params, sort_keys=True)


class ExpertGenerator(Generator):
    name = "expert"
    description = "offline: recognizes fusible regions and writes Triton kernels from templates, moved by findings"
    Settings = ExpertSettings

    def __init__(self, settings: Any = None) -> None:
        super().__init__(settings)
        self._recognized: dict[str, Recognition] = {}

    def recognition(self, source: str, digest: str) -> Recognition:
        if digest not in self._recognized:
            self._recognized[digest] = recognize(source)
        return self._recognized[digest]

    def proposals(self, request: GenerationRequest, rec: Recognition) -> list[dict[str, Any]]:
        cuda = request.device.startswith("cuda") and self.settings.cuda_graphs
        has_regions = bool(rec.regions)
        parent = request.parent
        if parent is None or not parent.params or "tiles" not in parent.params:
            base = default_params(rec)
            pool = [base] if has_regions else []
            if cuda:
                if has_regions:
                    pool.append({**base, "graph": True})
                pool.append({"lower": [], "graph": True, "tiles": base["tiles"]})
            pool += [child for move, rid in moves.plan(None, region_ids(rec)) if move != "graph"
                     for child in moves.apply(move, rid, base)] if has_regions else []
            return pool
        if moves.at_roofline(parent.analysis, self.settings.stop_at_roofline_fraction):
            return []
        pool = []
        for move, rid in moves.plan(parent.analysis, list(parent.params["lower"])):
            if move == "graph" and not cuda:
                continue
            pool.extend(moves.apply(move, rid, parent.params))
        return pool

    def generate(self, request: GenerationRequest) -> list[CandidateDraft]:
        rec = self.recognition(request.problem.source, request.problem.digest)
        if not rec.ok:
            return []
        tried = {_key(p) for p in request.tried}
        drafts = []
        for params in self.proposals(request, rec):
            key = _key(params)
            if key in tried:
                continue
            tried.add(key)
            if not params["lower"] and not params.get("graph"):
                continue
            drafts.append(CandidateDraft(
                source=render_candidate(request.problem.source, rec, params),
                generator=self.name,
                language="triton" if params["lower"] else "pytorch",
                description=describe(rec, params),
                params=json.loads(key),
            ))
            if len(drafts) >= request.n:
                break
        return drafts
