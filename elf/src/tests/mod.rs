//! Tests of each rule of [`crate::parse`] (this file), the fixtures built by real linkers
//! (`fixtures.rs`), and more than 10^5 mutations of them that must never panic (`corpus.rs`).
//! Synthetic images come from [`image`]: an ELF header and program headers at offset 64.

mod corpus;
mod fixtures;
mod rules;

use alloc::vec::Vec;

use crate::header::{ET_EXEC, ProgramHeader, pf, pt};
use crate::{Limits, Refusal};

/// The kernel's limits: 4 KiB pages, 64 KiB `mmap_min_addr`, a 48-bit user half, W^X.
pub const LIMITS: Limits = Limits {
    page_size: 4096,
    min_addr: 0x1_0000,
    task_size: 1 << 48,
    pie_base: 0xaaaa_0000_0000,
    w_xor_x: true,
};

/// Where the synthetic programs are linked.
pub const BASE: u64 = 0x40_0000;

/// A PT_LOAD.
pub fn load(offset: u64, vaddr: u64, filesz: u64, memsz: u64, flags: u32) -> ProgramHeader {
    ProgramHeader { kind: pt::LOAD, flags, offset, vaddr, filesz, memsz, align: 0x1_0000 }
}

/// A program header of another type.
pub fn other(kind: u32, flags: u32, offset: u64, filesz: u64) -> ProgramHeader {
    ProgramHeader { kind, flags, offset, vaddr: 0, filesz, memsz: filesz, align: 8 }
}

/// The usual small program: the headers and code in one R+X page, a RW page of data and bss.
pub fn simple() -> Vec<ProgramHeader> {
    alloc::vec![
        load(0, BASE, 0x800, 0x800, pf::R | pf::X),
        load(0x1000, BASE + 0x1_1000, 0x100, 0x3000, pf::R | pf::W)
    ]
}

/// An ELF file of `len` bytes (at least the headers) with `phdrs` at offset 64.
pub fn image(kind: u16, entry: u64, phdrs: &[ProgramHeader], len: usize) -> Vec<u8> {
    let mut f = Vec::new();
    f.extend_from_slice(b"\x7fELF\x02\x01\x01\0\0\0\0\0\0\0\0\0");
    f.extend_from_slice(&kind.to_le_bytes());
    f.extend_from_slice(&183u16.to_le_bytes());
    f.extend_from_slice(&1u32.to_le_bytes());
    f.extend_from_slice(&entry.to_le_bytes());
    f.extend_from_slice(&64u64.to_le_bytes()); // e_phoff
    f.extend_from_slice(&0u64.to_le_bytes()); // e_shoff
    f.extend_from_slice(&0u32.to_le_bytes()); // e_flags
    for v in [64u16, 56, phdrs.len() as u16, 64, 0, 0] {
        f.extend_from_slice(&v.to_le_bytes());
    }
    for ph in phdrs {
        f.extend_from_slice(&ph.kind.to_le_bytes());
        f.extend_from_slice(&ph.flags.to_le_bytes());
        for v in [ph.offset, ph.vaddr, ph.vaddr, ph.filesz, ph.memsz, ph.align] {
            f.extend_from_slice(&v.to_le_bytes());
        }
    }
    f.resize(f.len().max(len), 0);
    f
}

/// [`image`] of an ET_EXEC entered at its first code byte, 0x2000 bytes long.
pub fn exec(phdrs: &[ProgramHeader]) -> Vec<u8> {
    image(ET_EXEC, BASE + 0x100, phdrs, 0x2000)
}

/// `parse` with the kernel's limits.
pub fn parse(bytes: &[u8]) -> Result<crate::Executable, Refusal> {
    crate::parse(bytes, &LIMITS)
}

/// What a refusal must look like: one sentence in lower case without a final full stop (the
/// kernel prints it after "cannot run NAME: "), with no debugging output in it.
pub fn check_sentence(why: &str) -> Result<(), alloc::string::String> {
    let first = why.chars().next().unwrap_or(' ');
    let ok = (first.is_ascii_lowercase() || first.is_ascii_digit() || first == '"')
        && why.split(' ').count() >= 5
        && !why.contains('\n')
        && !why.ends_with('.')
        && !why.ends_with(' ')
        && !why.contains("Some(")
        && !why.contains("{ ")
        && why.len() < 240;
    if ok { Ok(()) } else { Err(alloc::format!("not one clear sentence: {why:?}")) }
}
