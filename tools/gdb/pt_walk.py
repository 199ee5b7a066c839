# tools/gdb/pt_walk.py: a gdb command that walks the translation tables for an address, as the
# MMU would, and prints every step. Load it into gdb-multiarch attached to QEMU's gdb stub:
#
#   scripts/run --gdb                      (QEMU waits; it prints the gdb command, which sources this)
#   (gdb) break kernel_main
#   (gdb) continue
#   (gdb) pt-walk kernel_main              a kernel address: TTBR1_EL1
#   (gdb) pt-walk 0x400000                 a user address: TTBR0_EL1, the current process's table
#   (gdb) pt-walk 0x400000 0x4000f000      ... or the table whose root is at this physical address
#
# It prints the TTBR (root and ASID), the TCR fields that shape the walk (TxSZ, granule, DS), then
# one line per level: the index, the descriptor's physical address and value, and its decoded
# fields (Arm ARM D8.3, "Translation table descriptor formats"): for a table, its next-level
# address, the hierarchical APTable/UXNTable/PXNTable bits and this kernel's occupancy count (the
# software bits the walker ignores: [11:2], and from bit 52 up with 16 KiB and 64 KiB pages;
# docs/mm.md sections 1 and 11); for a block or page, the output address, AttrIndx, AP, SH, AF, nG,
# Contiguous, PXN, UXN. Then the final physical address.
#
# Every granule and address width the kernel builds is read from TCR_EL1 itself, as the MMU reads
# it: the granule of the half (TG1 for TTBR1, TG0 for TTBR0: 4, 16 or 64 KiB, which set the
# level count and the index widths), TxSZ, and DS (FEAT_LPA2: 52-bit addresses, OA[51:50] in
# descriptor bits [9:8], the table address bits [51:48] in TTBR bits [5:2], SH from TCR_EL1); a
# 64 KiB granule with IPS 0b110 reads OA[51:48] from bits [15:12] (FEAT_LPA).
#
# Tables are read from physical memory through QEMU's gdb stub (the `Qqemu.PhyMemMode` packet, so
# the walk works before and after the MMU is on, and whatever TTBR0 holds); if the stub refuses
# it, through the kernel's linear map (physical P at 0xffff_0000_0000_0000 + P), which needs the
# kernel map to be live. Python's standard library and gdb's API only.
import re
import struct

import gdb

LINEAR_BASE = 0xFFFF_0000_0000_0000


def reg(name):
    """A system register through QEMU's gdb stub (its aarch64 system-register feature)."""
    for n in (name, name.lower()):
        try:
            return int(gdb.parse_and_eval("$" + n)) & (1 << 64) - 1
        except gdb.error:
            continue
    raise gdb.GdbError(f"pt-walk: QEMU's gdb stub shows no register {name} (QEMU 7.1 or later has them)")


class PhysicalReader:
    """Reads 8-byte words of physical memory."""

    def __init__(self):
        self.mode = None

    def _set_phys(self, on):
        gdb.execute(f"maintenance packet Qqemu.PhyMemMode:{1 if on else 0}", to_string=True)

    def read_u64(self, pa):
        inferior = gdb.selected_inferior()
        if self.mode in (None, "phys"):
            try:
                self._set_phys(True)
                try:
                    data = bytes(inferior.read_memory(pa, 8))
                finally:
                    self._set_phys(False)
                self.mode = "phys"
                return struct.unpack("<Q", data)[0]
            except gdb.error:
                if self.mode == "phys":
                    raise
                self.mode = "linear"
        try:
            return struct.unpack("<Q", bytes(inferior.read_memory(LINEAR_BASE + pa, 8)))[0]
        except gdb.MemoryError as e:
            raise gdb.GdbError(f"pt-walk: cannot read physical {pa:#x} (no PhyMemMode, no linear map yet): {e}")


def bits(v, hi, lo):
    return (v >> lo) & ((1 << (hi - lo + 1)) - 1)


AP = {0: "EL1 RW, EL0 none", 1: "EL1 RW, EL0 RW", 2: "EL1 RO, EL0 none", 3: "EL1 RO, EL0 RO"}
SH = {0: "non-shareable", 1: "reserved", 2: "outer", 3: "inner"}
APTABLE = {0: "none", 1: "no EL0", 2: "no write", 3: "no write, no EL0"}


class Regime:
    """What TCR_EL1 says about one half's walks (Arm ARM D19.2 TCR_EL1, D8.2, D8.3): the granule
    (TG1 or TG0, two different encodings), the VA size (T1SZ or T0SZ), DS (FEAT_LPA2: 52-bit
    addresses with 4 KiB and 16 KiB pages, OA[51:50] in descriptor bits [9:8], shareability from
    TCR's SH field) and whether the output address has 52 bits (DS, or 64 KiB pages with IPS
    0b110: FEAT_LPA, OA[51:48] in descriptor bits [15:12])."""

    def __init__(self, tcr, upper):
        if upper:
            self.txsz, self.tg = bits(tcr, 21, 16), {1: 14, 2: 12, 3: 16}.get(bits(tcr, 31, 30))
            self.tcr_sh = bits(tcr, 29, 28)
        else:
            self.txsz, self.tg = bits(tcr, 5, 0), {0: 12, 1: 16, 2: 14}.get(bits(tcr, 15, 14))
            self.tcr_sh = bits(tcr, 13, 12)
        if self.tg is None:
            raise gdb.GdbError(f"pt-walk: reserved granule in TCR_EL1 {tcr:#x}")
        self.ds = bits(tcr, 59, 59) == 1 and self.tg != 16
        self.oa52 = self.ds or (self.tg == 16 and bits(tcr, 34, 32) == 0b110)
        self.va_bits = 64 - self.txsz
        self.stride = self.tg - 3
        self.start = 4 - -(-(self.va_bits - self.tg) // self.stride)  # 4 - ceil(...)

    def describe(self):
        width = (", DS (52-bit descriptors)" if self.ds else ", 52-bit OA (FEAT_LPA)") if self.oa52 else ""
        return f"{1 << self.tg >> 10} KiB granule{width}, levels {self.start}..3"

    def ttbr_table(self, ttbr):
        """The table a TTBR names: BADDR [47:1], or with a 52-bit OA [47:6] and [51:48] from
        bits [5:2] (Linux phys_to_ttbr())."""
        if self.oa52:
            return ttbr & 0x0000_FFFF_FFFF_FFC0 | bits(ttbr, 5, 2) << 48
        return ttbr & 0x0000_FFFF_FFFF_FFFE

    def output_address(self, d, align):
        """The output (or next-table) address of descriptor d of an entry aligned to 2^align."""
        if self.ds:
            return d & ((1 << 50) - 1) & ~((1 << align) - 1) | bits(d, 9, 8) << 50
        oa = d & 0x0000_FFFF_FFFF_FFFF & ~((1 << align) - 1)
        return oa | bits(d, 15, 12) << 48 if self.oa52 else oa

    def block_allowed(self, level):
        """AArch64.BlockDescSupported(): 4 KiB L1, L2 (L0 with DS); 16 KiB L2 (L1 with DS);
        64 KiB L2 (L1 with a 52-bit OA)."""
        if level == 2:
            return True
        return {12: level == 1 or (level == 0 and self.ds), 14: level == 1 and self.ds,
                16: level == 1 and self.oa52}[self.tg]

    def occupancy(self, d):
        """This kernel's count of live entries in the table a table descriptor points at (software
        bits, ignored by the walker; mm/src/paging/occupancy.rs): the low ignored bits [11:2]
        (without [9:8] with DS), then from bit 52 up as many bits as a count of a full table
        needs, lowest field first."""
        low = [(2, 7), (10, 11)] if self.ds else [(2, 11)]
        have = sum(hi - lo + 1 for lo, hi in low)
        need = self.stride + 1
        fields = low + ([(52, 52 + need - have - 1)] if need > have else [])
        count, width = 0, 0
        for lo, hi in fields:
            count |= bits(d, hi, lo) << width
            width += hi - lo + 1
        where = ", ".join(f"[{hi}:{lo}]" for lo, hi in reversed(fields))
        return count, where


def walk(va, root=None):
    upper = va >> 63 == 1
    tcr = reg("TCR_EL1")
    r = Regime(tcr, upper)
    va_bits, tg, stride, start = r.va_bits, r.tg, r.stride, r.start
    ttbr_name = "TTBR1_EL1" if upper else "TTBR0_EL1"
    ttbr = reg(ttbr_name)
    table = root if root is not None else r.ttbr_table(ttbr)
    out = [f"{ttbr_name} = {ttbr:#018x}: root table {table:#x}, ASID {ttbr >> 48:#x}"
           + (f" (given root {root:#x})" if root is not None else ""),
           f"TCR_EL1 = {tcr:#x}: T{'1' if upper else '0'}SZ {r.txsz} ({va_bits}-bit VAs), {r.describe()}"]
    if upper and va >> va_bits != (1 << (64 - va_bits)) - 1 or not upper and va >> va_bits:
        out.append(f"{va:#x} is outside the {va_bits}-bit range of {ttbr_name}: translation fault at level {start}")
        return out
    mem = PhysicalReader()
    for level in range(start, 4):
        shift = tg + stride * (3 - level)
        width = va_bits - shift if level == start else stride
        index = (va >> shift) & ((1 << width) - 1)
        pa = table + 8 * index
        d = mem.read_u64(pa)
        head = f"L{level} index {index:3d} (VA bits [{shift + width - 1}:{shift}]): [{pa:#x}] = {d:#018x}"
        if d & 1 == 0:
            out.append(head + ": invalid (translation fault)")
            return out
        if d & 2 and level < 3:
            oa = r.output_address(d, tg)
            count, where = r.occupancy(d)
            out.append(head + f": table -> {oa:#x}, APTable {APTABLE[bits(d, 62, 61)]}, "
                       f"UXNTable {bits(d, 60, 60)}, PXNTable {bits(d, 59, 59)}, "
                       f"occupancy (software, bits {where}) {count}")
            table = oa
            continue
        if not d & 2 and (level == 3 or not r.block_allowed(level)):
            out.append(head + f": reserved encoding at level {level} (translation fault)")
            return out
        oa = r.output_address(d, shift)
        kind = "page" if level == 3 else "block"
        size = 1 << shift
        sh = f"SH {SH[r.tcr_sh]} (TCR_EL1, DS)" if r.ds else f"SH {SH[bits(d, 9, 8)]}"
        out.append(head + f": {kind} of {size >> 10} KiB -> {oa:#x}, AttrIndx {bits(d, 4, 2)}, "
                   f"AP {bits(d, 7, 6)} ({AP[bits(d, 7, 6)]}), {sh}, AF {bits(d, 10, 10)}, "
                   f"nG {bits(d, 11, 11)}, Contiguous {bits(d, 52, 52)}, PXN {bits(d, 53, 53)}, UXN {bits(d, 54, 54)}")
        out.append(f"=> {va:#x} translates to physical {oa + (va & (size - 1)):#x}")
        return out
    return out


def address(expr):
    """The value of `expr` as an address: an integer or pointer expression, or a function's name
    (in Rust mode gdb does not evaluate a function item, so its symbol is looked up)."""
    try:
        value = gdb.parse_and_eval(expr)
        if value.type.code == gdb.TYPE_CODE_FUNC:
            value = value.address
        return int(value) & (1 << 64) - 1
    except gdb.error:
        try:
            said = gdb.execute(f"info address {expr}", to_string=True)
        except gdb.error:
            said = ""
        found = re.search(r"\bat (?:address )?(0x[0-9a-f]+)", said)
        if not found:
            raise gdb.GdbError(f"pt-walk: {expr} is neither an expression nor a symbol")
        return int(found[1], 16)


class PtWalk(gdb.Command):
    """pt-walk ADDRESS [ROOT]: walk the translation tables for ADDRESS (an expression), from
    TTBR0_EL1 or TTBR1_EL1 as its top bits say, or from the root table at physical ROOT."""

    def __init__(self):
        super().__init__("pt-walk", gdb.COMMAND_DATA, gdb.COMPLETE_EXPRESSION)

    def invoke(self, arg, from_tty):
        argv = gdb.string_to_argv(arg)
        if not argv or len(argv) > 2:
            raise gdb.GdbError("usage: pt-walk ADDRESS [ROOT]")
        va = address(argv[0])
        root = address(argv[1]) if len(argv) == 2 else None
        for line in walk(va, root):
            gdb.write(line + "\n")


PtWalk()
