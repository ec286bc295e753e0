"""SASS micro-profilers (level "instruction"), one class per diagnosis."""

from kernelpro_plugins_sass.profilers.arithmetic import Fp64InFp32, HeavyPredication, IntDivisionInLoop
from kernelpro_plugins_sass.profilers.memory import LocalMemory, NarrowGlobalAccess, NoAsyncCopy
from kernelpro_plugins_sass.profilers.summary import InstructionMix, PtxasAdvisories
from kernelpro_plugins_sass.profilers.tensor import HmmaOnHopper, NoTensorCores

ALL = (
    NoTensorCores,
    HmmaOnHopper,
    NarrowGlobalAccess,
    LocalMemory,
    Fp64InFp32,
    IntDivisionInLoop,
    NoAsyncCopy,
    HeavyPredication,
    InstructionMix,
    PtxasAdvisories,
)

__all__ = [cls.__name__ for cls in ALL] + ["ALL"]
