//! The `early-code` check on hand-assembled `early_map`s: position-independent code passes; an
//! indirect branch, a branch into no function, and a load of a link address (from `.rodata`
//! through `ADRP` or `ADR`, at a fixed or an indexed offset, or from a literal pool) each fail,
//! also when they are in a function `early_map` calls.

use super::*;

/// Where `early_map` starts in the text segment of [`TestElf::kernel`].
const EARLY: u64 = 0x180;
const NOP: u32 = 0xd503_201f;
pub(super) const RET: u32 = 0xd65f_03c0;

pub(super) fn adrp(rd: u32, pc: u64, target: u64) -> u32 {
    let pages = ((target >> 12) as i64 - (pc >> 12) as i64) as u32 & 0x1f_ffff;
    0x9000_0000 | ((pages & 3) << 29) | ((pages >> 2) << 5) | rd
}

fn add_imm(rd: u32, rn: u32, imm: u32) -> u32 {
    0x9100_0000 | (imm << 10) | (rn << 5) | rd
}

pub(super) fn ldr_imm(rt: u32, rn: u32, offset: u32) -> u32 {
    0xf940_0000 | ((offset / 8) << 10) | (rn << 5) | rt
}

fn ldr_literal(rt: u32, pc: u64, target: u64) -> u32 {
    let words = ((target as i64 - pc as i64) / 4) as u32 & 0x7ffff;
    0x5800_0000 | (words << 5) | rt
}

fn adr(rd: u32, pc: u64, target: u64) -> u32 {
    let imm = (target as i64 - pc as i64) as u32 & 0x1f_ffff;
    0x1000_0000 | ((imm & 3) << 29) | ((imm >> 2) << 5) | rd
}

/// `LDR Xt, [Xn, Xm, LSL #3]`.
fn ldr_indexed(rt: u32, rn: u32, rm: u32) -> u32 {
    0xf860_7800 | (rm << 16) | (rn << 5) | rt
}

/// `ADD Xd, Xn, Xm, LSL #4`.
fn add_shifted(rd: u32, rn: u32, rm: u32) -> u32 {
    0x8b00_1000 | (rm << 16) | (rn << 5) | rd
}

pub(super) fn bl(pc: u64, target: u64) -> u32 {
    0x9400_0000 | (((target as i64 - pc as i64) / 4) as u32 & 0x03ff_ffff)
}

pub(super) fn blr(rn: u32) -> u32 {
    0xd63f_0000 | (rn << 5)
}

fn movz(rd: u32, imm: u32) -> u32 {
    0xd280_0000 | (imm << 5) | rd
}

/// Writes `code` at `offset` of the text bytes, padded with NOPs to 16 instructions.
pub(super) fn put_code(text: &mut [u8], offset: usize, code: &[u32]) {
    for i in 0..16 {
        let word = code.get(i).copied().unwrap_or(NOP);
        text[offset + 4 * i..offset + 4 * i + 4].copy_from_slice(&word.to_le_bytes());
    }
}

/// `early_map` in `TestElf::kernel`: loads a plain value from .rodata, calls `kernel::main`.
pub(super) fn good_early_map() -> Vec<u32> {
    let pc = |i: u64| BASE + EARLY + 4 * i;
    vec![adrp(1, pc(0), BASE + 0x1000), ldr_imm(2, 1, 0), bl(pc(2), BASE + 0x80), RET]
}

/// The kernel test ELF with `early_map` replaced by `code` (instruction `i` at `pc(i)`).
fn with_early_map(code: impl FnOnce(&dyn Fn(u64) -> u64) -> Vec<u32>) -> TestElf {
    let mut t = TestElf::kernel();
    let words = code(&|i| BASE + EARLY + 4 * i);
    put_code(&mut t.segs[0].data, EARLY as usize, &words);
    t
}

/// Puts `value` at `SOME_TABLE` (.rodata + 0x10).
fn set_table(t: &mut TestElf, value: u64) {
    t.segs[1].data[0x10..0x18].copy_from_slice(&value.to_le_bytes());
}

fn early_outcome(t: &TestElf) -> Outcome {
    run(&t.image(), &t.build()).into_iter().find(|o| o.name == "early-code").unwrap()
}

#[test]
fn position_independent_early_code_passes() {
    let o = early_outcome(&TestElf::kernel());
    assert!(o.ok, "{o}");
    assert!(o.detail.contains("1 function(s)"), "kernel::main is followed: {o}");
    // A plain value in .rodata, and a register reused after its ADRP, are fine.
    let mut t =
        with_early_map(|pc| vec![adrp(1, pc(0), BASE + 0x1000), movz(1, 0x40), ldr_imm(2, 1, 0x10), RET]);
    set_table(&mut t, BASE + 0x80);
    assert!(early_outcome(&t).ok, "x1 no longer holds the ADRP page");
}

#[test]
fn loading_a_link_address_fails() {
    // ADRP + LDR with the offset in the load.
    let mut t = with_early_map(|pc| vec![adrp(1, pc(0), BASE + 0x1000), ldr_imm(2, 1, 0x10), RET]);
    set_table(&mut t, BASE + 0x80);
    let o = early_outcome(&t);
    assert!(!o.ok);
    assert!(o.detail.contains("loads 0xffff800000000080, a link address"), "{o}");
    assert!(o.detail.contains(".rodata"), "{o}");
    // ADRP + ADD + LDR.
    let mut t =
        with_early_map(|pc| vec![adrp(3, pc(0), BASE + 0x1000), add_imm(3, 3, 0x10), ldr_imm(4, 3, 0), RET]);
    set_table(&mut t, BASE + 0x40);
    assert!(!early_outcome(&t).ok);
    // The same value there is fine if the code does not load it.
    let mut t = TestElf::kernel();
    set_table(&mut t, BASE + 0x80);
    assert!(early_outcome(&t).ok);
}

/// A table of pointers indexed at run time (`static MSG: [&[u8]; 2]`, `MSG[i]`): whichever
/// entry is loaded, the object holds a link address.
#[test]
fn an_indexed_load_from_an_object_holding_a_link_address_fails() {
    // ADR of SOME_TABLE, then a register-offset load.
    let mut t = with_early_map(|pc| vec![adr(1, pc(0), BASE + 0x1010), ldr_indexed(2, 1, 0), RET]);
    assert!(early_outcome(&t).ok, "SOME_TABLE holds no link address yet");
    set_table(&mut t, BASE + 0x1000);
    let o = early_outcome(&t);
    assert!(!o.ok && o.detail.contains("an indexed load"), "{o}");
    // ADR, ADD of an index, then a load at a fixed offset: the same object.
    let mut t =
        with_early_map(|pc| vec![adr(3, pc(0), BASE + 0x1010), add_shifted(3, 3, 5), ldr_imm(4, 3, 0), RET]);
    set_table(&mut t, BASE + 0x1000);
    assert!(!early_outcome(&t).ok);
}

#[test]
fn a_literal_that_is_a_link_address_fails_a_plain_one_passes() {
    let literal_at = BASE + EARLY + 0x20; // instruction 8, a NOP pair before the code uses it
    let mut t = with_early_map(|pc| vec![ldr_literal(0, pc(0), literal_at), RET]);
    let at = (EARLY + 0x20) as usize;
    t.segs[0].data[at..at + 8].copy_from_slice(&0x1234u64.to_le_bytes());
    assert!(early_outcome(&t).ok, "{}", early_outcome(&t));
    t.segs[0].data[at..at + 8].copy_from_slice(&(BASE + 0x40).to_le_bytes());
    let o = early_outcome(&t);
    assert!(!o.ok && o.detail.contains("a literal load"), "{o}");
}

#[test]
fn indirect_branches_fail_also_in_a_callee() {
    let t = with_early_map(|_| vec![blr(8), RET]);
    let o = early_outcome(&t);
    assert!(!o.ok && o.detail.contains("indirect branch"), "{o}");
    // early_map calls el2_to_el1, which jumps through a register.
    let mut t = with_early_map(|pc| vec![bl(pc(0), BASE + 0x100), RET]);
    put_code(&mut t.segs[0].data, 0x100, &[0xd61f_0000]); // br x0
    let o = early_outcome(&t);
    assert!(!o.ok && o.detail.contains("kernel::boot::el2_to_el1 has an indirect branch"), "{o}");
}

#[test]
fn a_branch_into_no_function_fails() {
    let t = with_early_map(|pc| vec![bl(pc(0), BASE + 0x84), RET]);
    let o = early_outcome(&t);
    assert!(!o.ok && o.detail.contains("starts no function"), "{o}");
}

#[test]
fn a_kernel_without_early_map_fails() {
    let mut t = TestElf::kernel();
    t.syms.retain(|s| s.name != "early_map");
    let o = early_outcome(&t);
    assert!(!o.ok && o.detail.contains("no code symbol early_map"), "{o}");
}
