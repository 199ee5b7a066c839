//! Generating and publishing machine code at EL0: instruction encodings, templates assembled into
//! this binary's text and copied into code chunks, the RW → RX switch and the cache maintenance a
//! JIT needs on arm64 (DC CVAU, DSB ISH, IC IVAU, DSB ISH, ISB, with line sizes from CTR_EL0).

use core::arch::{asm, global_asm};

use crate::sys::{self, Errno};

/// `movz x<rd>, #imm16, lsl #(16 * hw)`.
pub const fn movz(rd: u32, imm16: u16, hw: u32) -> u32 {
    0xd280_0000 | (hw << 21) | ((imm16 as u32) << 5) | rd
}
/// `movk x<rd>, #imm16, lsl #(16 * hw)`.
pub const fn movk(rd: u32, imm16: u16, hw: u32) -> u32 {
    0xf280_0000 | (hw << 21) | ((imm16 as u32) << 5) | rd
}
/// `ret`.
pub const RET: u32 = 0xd65f_03c0;
/// `add x0, x0, x1`.
pub const ADD_X0_X0_X1: u32 = 0x8b01_0000;
/// `brk #imm16` (fills unused space so a stray jump traps).
pub const fn brk(imm16: u16) -> u32 {
    0xd420_0000 | ((imm16 as u32) << 5)
}

/// Loads a 64-bit constant into `x<rd>` (four instructions).
pub fn mov_imm64(rd: u32, v: u64) -> [u32; 4] {
    [
        movz(rd, v as u16, 0),
        movk(rd, (v >> 16) as u16, 1),
        movk(rd, (v >> 32) as u16, 2),
        movk(rd, (v >> 48) as u16, 3),
    ]
}

// Templates. Each is position independent and copied into a code chunk as bytes; the assembler does
// the encoding. `tmpl_call` is a call-through stub that calls the 64-bit address stored in its
// last 8 bytes (patched after copying) and returns: the hot indirect call and return between
// two generated chunks in the benchmark. The vector ops take pointers to three f64.
global_asm!(
    ".section .text.jit_templates, \"ax\"",
    ".balign 8",
    ".globl tmpl_call_start",
    "tmpl_call_start:",
    "    stp x29, x30, [sp, #-16]!",
    "    mov x29, sp",
    "    ldr x16, 1f",
    "    blr x16",
    "    ldp x29, x30, [sp], #16",
    "    ret",
    "    .balign 8",
    "1:  .quad 0",
    ".globl tmpl_call_end",
    "tmpl_call_end:",
    // vadd(dst x0, a x1, b x2)
    ".globl tmpl_vadd_start",
    "tmpl_vadd_start:",
    "    ldp d0, d1, [x1]",
    "    ldr d2, [x1, #16]",
    "    ldp d3, d4, [x2]",
    "    ldr d5, [x2, #16]",
    "    fadd d0, d0, d3",
    "    fadd d1, d1, d4",
    "    fadd d2, d2, d5",
    "    stp d0, d1, [x0]",
    "    str d2, [x0, #16]",
    "    ret",
    ".globl tmpl_vadd_end",
    "tmpl_vadd_end:",
    // vsub(dst x0, a x1, b x2)
    ".globl tmpl_vsub_start",
    "tmpl_vsub_start:",
    "    ldp d0, d1, [x1]",
    "    ldr d2, [x1, #16]",
    "    ldp d3, d4, [x2]",
    "    ldr d5, [x2, #16]",
    "    fsub d0, d0, d3",
    "    fsub d1, d1, d4",
    "    fsub d2, d2, d5",
    "    stp d0, d1, [x0]",
    "    str d2, [x0, #16]",
    "    ret",
    ".globl tmpl_vsub_end",
    "tmpl_vsub_end:",
    // vscale(dst x0, a x1, k d0)
    ".globl tmpl_vscale_start",
    "tmpl_vscale_start:",
    "    ldp d1, d2, [x1]",
    "    ldr d3, [x1, #16]",
    "    fmul d1, d1, d0",
    "    fmul d2, d2, d0",
    "    fmul d3, d3, d0",
    "    stp d1, d2, [x0]",
    "    str d3, [x0, #16]",
    "    ret",
    ".globl tmpl_vscale_end",
    "tmpl_vscale_end:",
    // vlen(a x0) -> d0
    ".globl tmpl_vlen_start",
    "tmpl_vlen_start:",
    "    ldp d1, d2, [x0]",
    "    ldr d3, [x0, #16]",
    "    fmul d0, d1, d1",
    "    fmadd d0, d2, d2, d0",
    "    fmadd d0, d3, d3, d0",
    "    fsqrt d0, d0",
    "    ret",
    ".globl tmpl_vlen_end",
    "tmpl_vlen_end:",
    ".text",
);

unsafe extern "C" {
    static tmpl_call_start: u8;
    static tmpl_call_end: u8;
    static tmpl_vadd_start: u8;
    static tmpl_vadd_end: u8;
    static tmpl_vsub_start: u8;
    static tmpl_vsub_end: u8;
    static tmpl_vscale_start: u8;
    static tmpl_vscale_end: u8;
    static tmpl_vlen_start: u8;
    static tmpl_vlen_end: u8;
}

/// The templates this module offers.
#[derive(Clone, Copy)]
pub enum Tmpl {
    Call,
    Vadd,
    Vsub,
    Vscale,
    Vlen,
}

/// The bytes of a template (read from this program's own text, which is readable).
pub fn template(t: Tmpl) -> &'static [u8] {
    // SAFETY: each pair of symbols brackets one template in the RX text segment, start before end.
    unsafe {
        let (s, e) = match t {
            Tmpl::Call => (&raw const tmpl_call_start, &raw const tmpl_call_end),
            Tmpl::Vadd => (&raw const tmpl_vadd_start, &raw const tmpl_vadd_end),
            Tmpl::Vsub => (&raw const tmpl_vsub_start, &raw const tmpl_vsub_end),
            Tmpl::Vscale => (&raw const tmpl_vscale_start, &raw const tmpl_vscale_end),
            Tmpl::Vlen => (&raw const tmpl_vlen_start, &raw const tmpl_vlen_end),
        };
        core::slice::from_raw_parts(s, e as usize - s as usize)
    }
}

/// CTR_EL0: (I-cache line, D-cache line) in bytes, and the IDC/DIC bits.
pub fn cache_lines() -> (u64, u64, bool, bool) {
    let ctr: u64;
    // SAFETY: CTR_EL0 is readable at EL0 (Linux sets SCTLR_EL1.UCT or emulates the read; this
    // kernel must set UCT).
    unsafe { asm!("mrs {c}, ctr_el0", c = out(reg) ctr, options(nomem, nostack)) };
    let iline = 4u64 << (ctr & 0xf);
    let dline = 4u64 << ((ctr >> 16) & 0xf);
    (iline, dline, ctr & (1 << 28) != 0, ctr & (1 << 29) != 0)
}

/// Cleans the data cache to the point of unification for `[addr, addr + len)` (after writing
/// instructions, before they may be fetched). Always issued, even when CTR_EL0.IDC says it could
/// be skipped, so the EL0 permission (SCTLR_EL1.UCI) is exercised.
pub fn clean_dcache(addr: u64, len: u64) {
    let (_, dline, _, _) = cache_lines();
    let mut p = addr & !(dline - 1);
    while p < addr + len {
        // SAFETY: DC CVAU on an address this program maps readable; it changes no memory contents.
        unsafe { asm!("dc cvau, {p}", p = in(reg) p, options(nostack, preserves_flags)) };
        p += dline;
    }
    // SAFETY: a barrier only.
    unsafe { asm!("dsb ish", options(nostack, preserves_flags)) };
}

/// Invalidates the instruction cache for `[addr, addr + len)` and synchronises this CPU's fetch.
pub fn invalidate_icache(addr: u64, len: u64) {
    let (iline, _, _, _) = cache_lines();
    let mut p = addr & !(iline - 1);
    while p < addr + len {
        // SAFETY: IC IVAU on an address this program maps; it changes no memory contents.
        unsafe { asm!("ic ivau, {p}", p = in(reg) p, options(nostack, preserves_flags)) };
        p += iline;
    }
    // SAFETY: barriers only.
    unsafe { asm!("dsb ish", "isb", options(nostack, preserves_flags)) };
}

/// Publishes code written into the RW mapping `[addr, addr + len)`: cleans the D-cache, switches
/// the pages to RX with `mprotect` and invalidates the I-cache.
///
/// # Safety
/// Nothing may write to the range afterwards (it becomes read-only).
pub unsafe fn publish(addr: u64, len: u64) -> Result<(), Errno> {
    clean_dcache(addr, len);
    // SAFETY: the caller guarantees nothing writes the range any more.
    unsafe { sys::mprotect(addr, len, sys::PROT_READ | sys::PROT_EXEC)? };
    invalidate_icache(addr, len);
    Ok(())
}

/// The W^X dual mapping of a JIT: one memfd mapped twice, read-write for the compiler and
/// read-execute for running, so no page is ever writable and executable at once and no
/// `mprotect` is needed between writing and running (the executable view is placed in the code
/// window like any executable mapping).
pub struct DualView {
    /// The read-write view.
    pub rw: u64,
    /// The read-execute view of the same pages.
    pub rx: u64,
    /// Bytes.
    pub len: u64,
}

impl DualView {
    /// Maps a fresh memfd of `len` bytes twice; the descriptor is closed (the mappings keep the
    /// memory).
    pub fn new(len: u64) -> Result<Self, Errno> {
        let fd = sys::memfd(len)?;
        let views = sys::mmap_shared(len, sys::PROT_READ | sys::PROT_WRITE, fd)
            .and_then(|rw| sys::mmap_shared(len, sys::PROT_READ | sys::PROT_EXEC, fd).map(|rx| (rw, rx)));
        sys::close(fd);
        let (rw, rx) = views?;
        Ok(Self { rw, rx, len })
    }

    /// Makes `[offset, offset + len)` written through the read-write view visible to instruction
    /// fetches through the read-execute view: DC CVAU by the written addresses, then IC IVAU by
    /// the executed ones (`clean_dcache` and `invalidate_icache` end with their barriers).
    pub fn publish(&self, offset: u64, len: u64) {
        clean_dcache(self.rw + offset, len);
        invalidate_icache(self.rx + offset, len);
    }
}

impl Drop for DualView {
    fn drop(&mut self) {
        // SAFETY: both views belong to this value; nothing runs or writes them after it.
        unsafe {
            let _ = sys::munmap(self.rw, self.len);
            let _ = sys::munmap(self.rx, self.len);
        }
    }
}

/// Writes 32-bit instructions at `at` (in a RW mapping this program owns).
///
/// # Safety
/// `[at, at + 4 * insns.len())` must be writable memory that nothing else references.
pub unsafe fn put(at: u64, insns: &[u32]) {
    for (i, &w) in insns.iter().enumerate() {
        // SAFETY: the caller guarantees the range is writable and ours; `at` is 4-aligned.
        unsafe { ((at as *mut u32).add(i)).write_volatile(w) };
    }
}

/// Copies template bytes to `at`.
///
/// # Safety
/// As for [`put`].
pub unsafe fn put_bytes(at: u64, bytes: &[u8]) {
    // SAFETY: the caller guarantees the destination is writable and disjoint from `bytes`.
    unsafe { core::ptr::copy_nonoverlapping(bytes.as_ptr(), at as *mut u8, bytes.len()) };
}

/// Calls generated code `fn() -> u64` at `addr`.
///
/// # Safety
/// `addr` must hold published code following the AAPCS64 for that signature.
pub unsafe fn call0(addr: u64) -> u64 {
    // SAFETY: the caller guarantees valid code with this signature at `addr`.
    let f: extern "C" fn() -> u64 = unsafe { core::mem::transmute(addr as usize) };
    f()
}

/// Calls generated code `fn(u64, u64) -> u64` at `addr`.
///
/// # Safety
/// As for [`call0`].
pub unsafe fn call2(addr: u64, a: u64, b: u64) -> u64 {
    // SAFETY: the caller guarantees valid code with this signature at `addr`.
    let f: extern "C" fn(u64, u64) -> u64 = unsafe { core::mem::transmute(addr as usize) };
    f(a, b)
}
