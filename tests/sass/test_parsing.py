"""SASS listings, resource usage and ptxas logs parse into the right records."""

from __future__ import annotations

import subprocess

import pytest

from kernelpro_plugins_sass.disasm import parse_sass
from kernelpro_plugins_sass.resources import parse_ptxas_log, parse_res_usage
from kernelpro_plugins_sass.toolchain import find_tool

LISTING = """
\tcode for sm_90
\t.target\tsm_90

\t\tFunction : _Z4loopPfi
\t.headerflags\t@"EF_CUDA_SM90 EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"
        /*0000*/                   LDC R1, c[0x0][0x28] ;                      /* 0x00000a00ff017b82 */
                                                                               /* 0x000fe20000000800 */
        /*0010*/                   LDG.E.128 R4, desc[UR4][R2.64] ;            /* 0x0000000402047981 */
                                                                               /* 0x000ea4000c1e1d00 */
        /*0020*/               @!P0 FFMA R5, R4, R5, R6 ;                      /* 0x0000000504057223 */
                                                                               /* 0x000fe20000000006 */
        /*0030*/              @!PT LDS RZ, [RZ] ;                              /* 0x00000000fffff984 */
                                                                               /* 0x000fe20000000800 */
        /*0040*/              @!P1 BRA 0x10 ;                                  /* 0xfffffffc00fc7947 */
                                                                               /* 0x000fc0000383ffff */
        /*0050*/                   EXIT ;                                      /* 0x000000000000794d */
                                                                               /* 0x000fea0003800000 */
        /*0060*/                   BRA 0x60;                                   /* 0xfffffffc00fc7947 */
                                                                               /* 0x000fc0000383ffff */
        /*0070*/                   NOP;                                        /* 0x0000000000007918 */
                                                                               /* 0x000fc00000000000 */
\t\t..........
"""


def test_parse_cuobjdump_listing():
    (k,) = parse_sass(LISTING)
    assert k.mangled == "_Z4loopPfi" and k.arch == "sm_90"
    ops = [i.mnemonic for i in k.instructions]
    assert ops == ["LDC", "LDG.E.128", "FFMA", "LDS", "BRA", "EXIT", "BRA", "NOP"]
    ldg = k.instructions[1]
    assert ldg.opcode == "LDG" and ldg.modifiers == ("E", "128") and ldg.operands.startswith("R4,")
    ffma = k.instructions[2]
    assert ffma.predicate == "!P0" and ffma.guarded and ffma.in_loop
    assert k.instructions[3].never_executes
    assert len(k.loops) == 1 and (k.loops[0].start_address, k.loops[0].end_address) == (0x10, 0x40)
    assert [i.address for i in k.instructions if i.in_loop] == [0x10, 0x20, 0x30, 0x40]
    assert k.instructions[6].branch_target == 0x60  # padding self-branch: not a loop


def test_nested_loops_have_depth(compiled):
    from kernelpro_plugins_sass.binaries import disassemble

    kernels = disassemble(compiled["cpasync_tiled"].cubin).kernels
    assert kernels[0].loops and all(lp.depth >= 1 for lp in kernels[0].loops)


@pytest.mark.parametrize("stem", ["gemm_fp32_smem", "intdiv_loop", "cpasync_tiled"])
def test_nvdisasm_matches_cuobjdump(compiled, stem):
    nvdisasm, cuobjdump = find_tool("nvdisasm"), find_tool("cuobjdump")
    if nvdisasm is None:
        pytest.skip("no nvdisasm")
    cubin = str(compiled[stem].cubin)
    a = parse_sass(subprocess.run([str(cuobjdump), "-sass", cubin], capture_output=True, text=True).stdout)
    b = parse_sass(subprocess.run([str(nvdisasm), "-c", cubin], capture_output=True, text=True).stdout)
    assert [k.mangled for k in a] == [k.mangled for k in b]
    assert [k.arch for k in a] == [k.arch for k in b] and a[0].arch.startswith("sm_")
    for ka, kb in zip(a, b):
        assert [i.mnemonic for i in ka.instructions] == [i.mnemonic for i in kb.instructions]
        assert ka.loops == kb.loops
        assert [i.loop_depth for i in ka.instructions] == [i.loop_depth for i in kb.instructions]


def test_res_usage_from_real_tool(compiled):
    out = subprocess.run([str(find_tool("cuobjdump")), "-res-usage", str(compiled["local_array"].cubin)],
                         capture_output=True, text=True).stdout
    usage = parse_res_usage(out)
    spill = usage["_Z11spill_heavyPKfPfii"]
    assert spill.registers == 32 and spill.stack_bytes > 0  # __launch_bounds__(1024, 2): 32 regs
    assert usage["_Z15histogram_localPKiPii"].stack_bytes == 256  # int bins[64]


def test_ptxas_log_from_real_compile(compiled):
    usage, messages = parse_ptxas_log(compiled["local_array"].log)
    spill = usage["_Z11spill_heavyPKfPfii"]
    assert spill.spill_store_bytes > 0 and spill.spill_load_bytes > 0 and spill.registers == 32
    usage, messages = parse_ptxas_log(compiled["wgmma_sm90a"].log)
    serialized = [m for m in messages if "serialized" in m.text]
    assert serialized and all(m.kernel == "_Z16wgmma_serializedPK6__halfS1_Pfif" for m in serialized)
    assert serialized[0].code and serialized[0].code.startswith("C75")
    assert not [m for m in messages if m.kernel == "_Z10wgmma_tilePK6__halfS1_Pfi"]


def test_ptxas_log_variants():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'kern' for 'sm_90a'
ptxas info    : Function properties for kern
    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 168 registers, used 1 barriers, 33024 bytes smem, 400 bytes cmem[0]
ptxas info    : (C7510) Potential Performance Loss: wgmma.mma_async instructions are serialized due to the presence of Extern calls in the function 'kern'
ptxas /tmp/x.ptx, line 12; warning : Double is not supported. Demoting to float
"""
    usage, messages = parse_ptxas_log(log)
    u = usage["kern"]
    assert (u.registers, u.barriers, u.shared_bytes, u.constant_bytes) == (168, 1, 33024, 400)
    assert (u.stack_bytes, u.spill_store_bytes, u.spill_load_bytes) == (8, 4, 12)
    assert [m.code for m in messages] == ["C7510", None]
    assert messages[0].kernel == "kern" and messages[1].severity == "warning"


def test_nvdisasm_header_names_the_architecture():
    # nvdisasm -c prints no "code for" / ".target" line for a cubin: the ELF flags say it
    text = ('\t.headerflags\t@"EF_CUDA_TEXMODE_UNIFIED EF_CUDA_64BIT_ADDRESS EF_CUDA_ACCELERATORS EF_CUDA_SM90 '
            'EF_CUDA_VIRTUAL_SM(EF_CUDA_SM90)"\n\t.elftype\t@"ET_EXEC"\n\n'
            '\t.section\t.text.k,"ax",@progbits\nk:\n'
            '        /*0000*/                   LDC R1, c[0x0][0x28] ;\n'
            '        /*0010*/                   EXIT ;\n')
    (k,) = parse_sass(text)
    assert k.mangled == "k" and k.arch == "sm_90a" and [i.mnemonic for i in k.instructions] == ["LDC", "EXIT"]
    (k,) = parse_sass(text.replace("EF_CUDA_ACCELERATORS ", ""))
    assert k.arch == "sm_90"
