"""benchmarks/kernel_sass.py's fall-through path count, on a hand-written listing."""

from __future__ import annotations

import importlib.util
from pathlib import Path

from kernelpro_plugins_sass.disasm import parse_sass

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "kernel_sass.py"

# a tile test (conditional branch to the checked path, 4 instructions), the unchecked path (3),
# a jump over the checked path to the common end (predicated exit, store, exit)
LISTING = """
\t\tFunction : _kp_r0_kernel
        /*0000*/                   S2R R0, SR_CTAID.X ;
        /*0010*/               @P0 BRA `(.L_x_0) ;
        /*0020*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0030*/                   FADD R3, R2, R2 ;
        /*0040*/                   BRA `(.L_x_1) ;
.L_x_0:
        /*0050*/                   ISETP.GE.AND P1, PT, R0, 0x10, PT ;
        /*0060*/               @P1 LDG.E R2, desc[UR4][R4.64] ;
        /*0070*/                   FADD R3, R2, R2 ;
        /*0080*/                   FMUL R3, R3, 0.5 ;
.L_x_1:
        /*0090*/              @!P2 EXIT ;
        /*00a0*/                   STG.E desc[UR4][R6.64], R3 ;
        /*00b0*/                   EXIT ;
.L_x_2:
        /*00c0*/                   BRA `(.L_x_2);
"""


def test_fallthrough_follows_unconditional_branches_and_stops_at_exit():
    spec = importlib.util.spec_from_file_location("kernel_sass", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (k,) = parse_sass(LISTING)
    # S2R, @P0 BRA, LDG, FADD, BRA, @!P2 EXIT, STG, EXIT: the checked path's 4 are skipped
    # (taking the conditional branch would count 9; not following the jump, 12)
    assert mod.fallthrough_count(list(k.instructions)) == 8
