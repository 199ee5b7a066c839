//! The `early-code` check: the code that runs with the MMU off, at the Image's physical address
//! (`early_map` and everything it calls), must not use a link-time address.
//!
//! Why: until the MMU is on, the CPU runs the Image wherever the loader put it, and the link
//! addresses (`0xffff_8000_…`) mean nothing. PC-relative code (`ADR`, `ADRP`, branches with an
//! immediate) works anywhere; what breaks is any address the linker wrote into the Image: a
//! vtable or a function pointer (reached by an indirect branch), a jump table, a panic
//! `Location` or a formatted message (reached through pointers stored in `.rodata`), a literal
//! pool entry. The source says "no trait objects, no formatting, no panics"; this checks the
//! machine code that was actually generated (the compiler decides what gets inlined, what
//! becomes a jump table, what is left with a panic path).
//!
//! What it reads: the instructions of `early_map` and, transitively, of every function it
//! branches to (`BL`, or `B`/`B.cond`/`CBZ`/`TBZ` out of the function), in a linear scan. Each is
//! refused if it is
//! - an indirect branch (`BR`, `BLR` and their authenticated forms): the target is a run-time
//!   value; `RET` is the only register branch allowed;
//! - a direct branch to an address that is not the start of a code symbol;
//! - a load of a 64-bit value that is an address inside the Image (its link address), whether
//!   from a literal pool (`LDR (literal)`) or from data whose address was formed PC-relatively
//!   (`ADR`, or `ADRP` and an `ADD` of the low bits, followed in straight-line code). A load at
//!   a known offset checks that word; a load at an offset computed at run time (an index added
//!   to the address, a register offset) checks every word of the object holding the address
//!   (its `.symtab` `OBJECT` symbol), since any of them may be the one loaded. Values in `.bss`
//!   are zero at load time and are not link addresses.
//!
//! It is a linear scan, not a data-flow analysis: an `ADRP` base is forgotten when its register
//! is written, and branches inside a function are not followed for register state. It cannot
//! prove the code position-independent, but each thing it refuses is a real dependence on the
//! link address, and the usual ways to get one (a trait object, a `match` compiled to a jump
//! table, a panic with a message) all produce one of them.

use std::collections::BTreeSet;

use xmas_elf::symbol_table::{Entry, Type as SymType};

use crate::check::Outcome;
use crate::elf::{self, ElfInfo};
use crate::symbols::{self, RawSymbol};

/// The function the entry code calls with the MMU off.
pub const EARLY_ENTRY: &str = "early_map";

/// The EFI stub's entry point: it runs at the address the firmware chose, before the kernel's
/// map exists, so the same rule holds, except that it calls the firmware through the function
/// pointers of the firmware's tables (`BLR`; those are run-time values the firmware gave, not
/// link addresses). `BR` stays refused.
pub const EFI_ENTRY: &str = "efi_pe_entry";

/// Where the EFI stub leaves for the kernel: hand-written assembly whose one `BR` goes to
/// `primary_entry` at an address formed with `ADR` (kernel/src/firmware/efi_stub.rs); the scan
/// stops there.
pub const EFI_EXIT: &str = "efi_enter_kernel";

/// Whether `name` is where a failed bounds check, `unwrap` or overflow check goes. The EFI scan
/// does not follow them: the stub's code is written not to reach them (and a panic there ends
/// in an exception the firmware reports, at a link address), while the generic code it shares
/// with the kernel (`RegionSet`, slices) keeps its checks. `early-code` follows them, because
/// `early_map` has no such paths at all.
fn is_panic_path(name: &str) -> bool {
    name.starts_with("core::panicking::")
        || (name.starts_with("core::slice::index::") && name.ends_with("_fail"))
        || name.starts_with("core::option::unwrap_failed")
        || name.starts_with("core::option::expect_failed")
        || name.starts_with("core::result::unwrap_failed")
        || name.starts_with("core::cell::panic_already")
}

/// At most this many functions are followed (a guard against a runaway call graph).
const MAX_FUNCTIONS: usize = 128;

/// Runs the check on the ELF file `elf_bytes` (already known to be an AArch64 ELF64).
pub fn check_early_code(elf_bytes: &[u8], info: &ElfInfo) -> Outcome {
    check_from(elf_bytes, info, "early-code", EARLY_ENTRY, false)
}

/// The same check from [`EFI_ENTRY`], with calls through registers allowed (`efi-stub-code`).
pub fn check_efi_stub_code(elf_bytes: &[u8], info: &ElfInfo) -> Outcome {
    check_from(elf_bytes, info, "efi-stub-code", EFI_ENTRY, true)
}

fn check_from(elf_bytes: &[u8], info: &ElfInfo, name: &'static str, entry: &str, calls: bool) -> Outcome {
    let (ok, detail) = match scan(elf_bytes, info, entry, calls) {
        Ok(functions) => (
            true,
            format!(
                "{entry} and the {} function(s) it reaches load no link address and branch \
                 only PC-relatively{}",
                functions.len() - 1,
                if calls { " (or call the firmware through BLR)" } else { "" }
            ),
        ),
        Err(why) => (false, why),
    };
    Outcome { name, ok, detail }
}

/// The ELF's bytes at a virtual address, through its sections.
struct Memory<'a> {
    bytes: &'a [u8],
    sections: Vec<elf::Section>,
    /// The Image's link range: `[lowest vaddr, memory end)`.
    image: (u64, u64),
    /// `[start, end)` of every `OBJECT` symbol with a size.
    objects: Vec<(u64, u64)>,
}

/// An address a register holds, formed PC-relatively.
#[derive(Clone, Copy, Debug)]
struct Known {
    addr: u64,
    /// `false` once a run-time value was added (an index): the register points somewhere in the
    /// object holding `addr`.
    exact: bool,
}

impl Memory<'_> {
    /// The section holding `addr` (allocated sections only).
    fn section_of(&self, addr: u64) -> Option<&elf::Section> {
        self.sections
            .iter()
            .find(|s| s.flags & elf::SHF_ALLOC != 0 && s.size > 0 && addr >= s.addr && addr - s.addr < s.size)
    }

    /// `len` file bytes at `addr`, or `None` outside every section with file bytes.
    fn read(&self, addr: u64, len: u64) -> Option<&[u8]> {
        let s = self.section_of(addr)?;
        if s.nobits || addr - s.addr + len > s.size {
            return None;
        }
        elf::file_range(self.bytes, s.offset + (addr - s.addr), len)
    }

    /// The 64-bit value at `addr` at load time (zero in `.bss`), or `None` outside the Image.
    fn value_at(&self, addr: u64) -> Option<u64> {
        let s = self.section_of(addr)?;
        if s.nobits {
            return Some(0);
        }
        self.read(addr, 8).map(|b| u64::from_le_bytes(b.try_into().unwrap_or([0; 8])))
    }

    fn is_link_address(&self, value: u64) -> bool {
        (self.image.0..self.image.1).contains(&value)
    }

    /// A load through `base` plus `offset`: the one word there, or every word of the object
    /// holding `base` when the register's offset is a run-time value.
    fn check_load_via(&self, pc: u64, base: Known, offset: i64, how: &str) -> Result<(), String> {
        let addr = base.addr.wrapping_add_signed(offset);
        if base.exact {
            return self.check_load(pc, addr, how);
        }
        let Some(&(start, end)) = self.objects.iter().find(|&&(s, e)| (s..e).contains(&base.addr)) else {
            return self.check_load(pc, addr, how);
        };
        let mut word = start.next_multiple_of(8);
        while word + 8 <= end {
            self.check_load(pc, word, how)?;
            word += 8;
        }
        Ok(())
    }

    /// A load of the 64-bit value at `addr` by the instruction at `pc`: an error if it is a link
    /// address.
    fn check_load(&self, pc: u64, addr: u64, how: &str) -> Result<(), String> {
        match self.value_at(addr) {
            Some(v) if self.is_link_address(v) => Err(format!(
                "{how} at {pc:#x} loads {v:#x}, a link address, from {addr:#x} ({})",
                self.section_of(addr).map_or("?", |s| s.name.as_str())
            )),
            _ => Ok(()),
        }
    }
}

/// Sign-extends the low `bits` bits of `value`.
fn sext(value: u64, bits: u32) -> i64 {
    let shift = 64 - bits;
    ((value << shift) as i64) >> shift
}

/// Every function reached from `entry`, or why the code is refused; `calls`: BLR is allowed.
fn scan(elf_bytes: &[u8], info: &ElfInfo, entry_name: &str, calls: bool) -> Result<Vec<u64>, String> {
    let symbols = symbols::collect(elf_bytes)?;
    let file = elf::open(elf_bytes)?;
    let sections = elf::sections(&file);
    let (entries, _) = symbols::symbol_table(&file, &sections)?;
    let objects = entries
        .iter()
        .filter(|e| matches!(e.get_type(), Ok(SymType::Object)) && e.size() > 0)
        .map(|e| (e.value(), e.value().saturating_add(e.size())))
        .collect();
    let memory = Memory {
        bytes: elf_bytes,
        sections,
        image: (info.lowest_vaddr().unwrap_or(0), info.memory_end().unwrap_or(0)),
        objects,
    };
    let entry = symbols
        .iter()
        .find(|s| s.name == entry_name)
        .ok_or_else(|| format!("no code symbol {entry_name} in the ELF"))?;
    let mut seen = BTreeSet::from([entry.address]);
    let mut work = vec![entry.clone()];
    while let Some(function) = work.pop() {
        if calls && (function.name == EFI_EXIT || is_panic_path(&function.name)) {
            continue;
        }
        for callee in scan_function(&memory, &symbols, &function, calls)? {
            if seen.insert(callee.address) {
                if seen.len() > MAX_FUNCTIONS {
                    return Err(format!("{entry_name} reaches more than {MAX_FUNCTIONS} functions"));
                }
                work.push(callee);
            }
        }
    }
    Ok(seen.into_iter().collect())
}

/// Scans one function; returns the functions it branches to.
fn scan_function(
    memory: &Memory<'_>,
    symbols: &[RawSymbol],
    f: &RawSymbol,
    calls: bool,
) -> Result<Vec<RawSymbol>, String> {
    let end = f.address + u64::from(f.size);
    let code = memory
        .read(f.address, u64::from(f.size))
        .ok_or_else(|| format!("{} at {:#x}: its code is not in the file", f.name, f.address))?;
    let mut callees = Vec::new();
    // The address each register holds from an ADR or ADRP (and ADDs), if known.
    let mut regs: [Option<Known>; 32] = [None; 32];
    let branch_to = |target: u64, pc: u64, callees: &mut Vec<RawSymbol>| -> Result<(), String> {
        if (f.address..end).contains(&target) {
            return Ok(());
        }
        match symbols.iter().find(|s| s.address == target) {
            Some(s) => {
                callees.push(s.clone());
                Ok(())
            }
            None => Err(format!("{} branches at {pc:#x} to {target:#x}, which starts no function", f.name)),
        }
    };
    for (i, word) in code.chunks_exact(4).enumerate() {
        let w = u32::from_le_bytes([word[0], word[1], word[2], word[3]]);
        let pc = f.address + 4 * i as u64;
        let rd = (w & 0x1f) as usize;
        let rn = ((w >> 5) & 0x1f) as usize;
        if w & 0x7c00_0000 == 0x1400_0000 {
            // B, BL: imm26.
            let target = pc.wrapping_add_signed(sext(u64::from(w & 0x03ff_ffff), 26) * 4);
            branch_to(target, pc, &mut callees)?;
            regs = [None; 32]; // a call clobbers the argument registers
        } else if w & 0xff00_0010 == 0x5400_0000 {
            // B.cond: imm19.
            let target = pc.wrapping_add_signed(sext(u64::from((w >> 5) & 0x7ffff), 19) * 4);
            branch_to(target, pc, &mut callees)?;
        } else if w & 0x7e00_0000 == 0x3400_0000 {
            // CBZ, CBNZ: imm19.
            let target = pc.wrapping_add_signed(sext(u64::from((w >> 5) & 0x7ffff), 19) * 4);
            branch_to(target, pc, &mut callees)?;
        } else if w & 0x7e00_0000 == 0x3600_0000 {
            // TBZ, TBNZ: imm14.
            let target = pc.wrapping_add_signed(sext(u64::from((w >> 5) & 0x3fff), 14) * 4);
            branch_to(target, pc, &mut callees)?;
        } else if w & 0xfe00_0000 == 0xd600_0000 {
            // Unconditional branch (register): only RET (opc 0b0010) is position-independent;
            // plain BLR (opc 0b0001, no pointer authentication) when calls are allowed.
            let opc = (w >> 21) & 0xf;
            if calls && opc == 0b0001 && w & 0xffff_fc1f == 0xd63f_0000 {
                regs = [None; 32];
            } else if opc != 0b0010 {
                return Err(format!(
                    "{} has an indirect branch at {pc:#x} ({w:#010x}): its target is a run-time \
                     value, a link address if it came from a table or a vtable",
                    f.name
                ));
            }
        } else if w & 0x3b00_0000 == 0x1800_0000 {
            // LDR (literal), LDRSW (literal), PRFM (literal): imm19 words from the PC.
            let addr = pc.wrapping_add_signed(sext(u64::from((w >> 5) & 0x7ffff), 19) * 4);
            memory.check_load(pc, addr, "a literal load")?;
            regs[rd] = None;
        } else if w & 0x1f00_0000 == 0x1000_0000 {
            // ADR (bit 31 clear): PC + immhi:immlo; ADRP (bit 31 set): the 4 KiB page at
            // PC + immhi:immlo << 12.
            let imm = sext(u64::from(((w >> 29) & 3) | (((w >> 5) & 0x7ffff) << 2)), 21);
            let addr = if w & (1 << 31) != 0 {
                (pc & !0xfff).wrapping_add_signed(imm << 12)
            } else {
                pc.wrapping_add_signed(imm)
            };
            regs[rd] = Some(Known { addr, exact: true });
        } else if w & 0xff80_0000 == 0x9100_0000 {
            // ADD (immediate), 64-bit.
            let imm = u64::from((w >> 10) & 0xfff) << if w & (1 << 22) != 0 { 12 } else { 0 };
            regs[rd] =
                if rn == 31 { None } else { regs[rn].map(|k| Known { addr: k.addr.wrapping_add(imm), ..k }) };
        } else if w & 0xff20_0000 == 0x8b00_0000 || w & 0xffe0_0000 == 0x8b20_0000 {
            // ADD (shifted or extended register), 64-bit: a run-time offset into what a known
            // register points at.
            let rm = ((w >> 16) & 0x1f) as usize;
            let known = if rn != 31 { regs[rn] } else { None }.or(regs[rm]);
            regs[rd] = known.map(|k| Known { exact: false, ..k });
        } else if w & 0xffc0_0000 == 0xf940_0000 {
            // LDR Xt, [Xn, #imm] (unsigned offset, scaled by 8).
            if let Some(base) = regs[rn].filter(|_| rn != 31) {
                memory.check_load_via(pc, base, i64::from((w >> 10) & 0xfff) * 8, "a load")?;
            }
            regs[rd] = None;
        } else if w & 0xffe0_0c00 == 0xf860_0800 {
            // LDR Xt, [Xn, Xm{, extend}]: a run-time offset.
            if let Some(base) = regs[rn].filter(|_| rn != 31) {
                memory.check_load_via(pc, Known { exact: false, ..base }, 0, "an indexed load")?;
            }
            regs[rd] = None;
        } else if w & 0xffc0_0000 == 0xa940_0000 {
            // LDP Xt1, Xt2, [Xn, #imm] (signed offset, scaled by 8).
            if let Some(base) = regs[rn].filter(|_| rn != 31) {
                let offset = sext(u64::from((w >> 15) & 0x7f), 7) * 8;
                memory.check_load_via(pc, base, offset, "a load pair")?;
                memory.check_load_via(pc, base, offset + 8, "a load pair")?;
            }
            regs[rd] = None;
            regs[((w >> 10) & 0x1f) as usize] = None;
        } else {
            // Anything else may write its Rd/Rt field; loads and stores with write-back (pre-
            // or post-index, single or pair) also change their base.
            regs[rd] = None;
            let writeback_single = w & 0x3b20_0400 == 0x3800_0400;
            let writeback_pair = w & 0x3a80_0000 == 0x2880_0000;
            if writeback_single || writeback_pair {
                regs[rn] = None;
            }
            if w & 0x3a00_0000 == 0x2800_0000 {
                regs[((w >> 10) & 0x1f) as usize] = None; // the pair's second register
            }
        }
    }
    Ok(callees)
}
