"""kernelpro_cute: CUTLASS/CuTe code search for LLM generators, retrieval presets, and
the compiler flags CuTe candidates are built with.

Entry points: :func:`build_flags` (``load_inline`` keyword arguments),
:func:`kernelpro_cute.corpus.locate`, :func:`kernelpro_cute.index.open_index`,
:func:`kernelpro_cute.presets.presets_for`.
"""

from kernelpro_cute.corpus import Corpus, CorpusError, locate
from kernelpro_cute.flags import build_flags, nvcc_flags

__all__ = ["Corpus", "CorpusError", "build_flags", "locate", "nvcc_flags"]
__version__ = "0.1.0"
