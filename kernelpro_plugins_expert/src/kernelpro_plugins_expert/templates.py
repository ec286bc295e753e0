"""The Jinja templates of the expert generator's kernels and of the candidate file around them.

The templates are source files in this package's ``kernels/`` folder (``*.py.j2``, one per
kind of kernel, each opening with a comment that says what its kernel does), read through
:mod:`importlib.resources` so they work from a wheel as well as from a checkout. One
Environment with StrictUndefined renders them (a missing variable is an error, never an
empty string). Every kernel computes in fp32 and stores in the output's dtype.

* ``POINTWISE``: one fused kernel for a pointwise region.
* ``ROWCOL``: reductions, the softmax family and the norms over ``(outer, R, inner)``.
* ``SPLIT``: the same ops over few long rows, in two stages.
* ``CHNORM``: batch, group and affine instance norm over (N, C, *spatial).
* ``XENT``: cross-entropy of (N, C) logits against class indices.
* ``ROWPAIR``: cosine similarity and the triplet margin loss, one program per row.
* ``ATTENTION``: scaled dot-product attention with an online softmax.
* ``SCAN``: cumulative sums and products along one dim (reversed, exclusive, with a prologue).
* ``REDUCE_ALL``: a pointwise program reduced over every element to one value.
* ``GEMM``: a tiled tensor-core GEMM with its epilogue applied in registers.
* ``GEMM_REDUCE``: a sum or mean over N of a GEMM's output as a matrix-vector product.
* ``CONV``: a dense 1-D/2-D convolution as an implicit GEMM on tensor cores.
* ``CONVG``: 3-D, grouped and transposed convolutions as an implicit GEMM per group.
* ``POOL``: max/avg pooling 1d/2d/3d with prologue and epilogue.
* ``POOL_CL``: the same 2d/3d pools of a channels-last input, written in the default layout.
* ``CANDIDATE``: the problem's source, the kernels, the fx rewrite that swaps each region
  for its kernel call, and optionally CUDA-graph capture of the whole forward.

``row_output.py.j2`` (the output tensor of a row/column or split-row wrapper) is included
by ``ROWCOL`` and ``SPLIT``.
"""

from __future__ import annotations

from importlib import resources

import jinja2

KERNELS = "kernels"  # the folder of this package that holds the templates


def _load(name: str) -> str:
    """The text of template ``name`` (a file name in ``kernels/``)."""
    return (resources.files(__package__) / KERNELS / name).read_text(encoding="utf-8")


# FunctionLoader: each template is read once and cached by the Environment; ``include``
# resolves names through the same loader.
ENV = jinja2.Environment(loader=jinja2.FunctionLoader(_load), undefined=jinja2.StrictUndefined,
                         trim_blocks=True, lstrip_blocks=True, keep_trailing_newline=True)

POINTWISE = "pointwise.py.j2"
ROWCOL = "rowcol.py.j2"
SPLIT = "split.py.j2"
REDUCE_ALL = "reduce_all.py.j2"
GEMM = "gemm.py.j2"
GEMM_REDUCE = "gemm_reduce.py.j2"
CONV = "conv.py.j2"
CONVG = "convg.py.j2"
POOL = "pool.py.j2"
POOL_CL = "pool_cl.py.j2"
SCAN = "scan.py.j2"
CHNORM = "chnorm.py.j2"
XENT = "xent.py.j2"
ROWPAIR = "rowpair.py.j2"
ATTENTION = "attention.py.j2"
CANDIDATE = "candidate.py.j2"


def render(template: str, **values: object) -> str:
    """Render the template file named ``template`` with ``values``."""
    return ENV.get_template(template).render(**values)
