//! The programs of elf/fixtures/ (built by GNU ld and rust-lld, see make.sh): each is accepted
//! with the segments readelf shows.

use alloc::vec::Vec;

use crate::header::{FileHeader, ProgramHeader, pt};
use crate::tests::{LIMITS, parse};
use crate::{Limits, Prot, Refusal, Segment};

const R: Prot = Prot { read: true, write: false, exec: false };
const RX: Prot = Prot { read: true, write: false, exec: true };
const RW: Prot = Prot { read: true, write: true, exec: false };

/// The bss-only program: `gcc -static -nostdlib`, .text and .bss only.
pub const BSS_ONLY: &[u8] = include_bytes!("../../fixtures/bss-only.elf");
/// A BTI-marked program (PT_GNU_PROPERTY).
pub const BTI: &[u8] = include_bytes!("../../fixtures/bti.elf");
/// The bss-only program linked with `-n`: one RWX segment.
pub const RWX: &[u8] = include_bytes!("../../fixtures/rwx.elf");
const LENGTHS: &str = include_str!("../../fixtures/lengths.txt");

/// A program of which only the first 4 KiB are kept: padded back to its length with zeros.
fn padded(name: &str, head: &[u8]) -> Vec<u8> {
    let len = LENGTHS
        .lines()
        .find_map(|line| line.strip_prefix(name)?.strip_prefix(' ')?.parse::<usize>().ok())
        .unwrap_or_else(|| panic!("{name} is not in lengths.txt"));
    let mut bytes = head.to_vec();
    bytes.resize(len, 0);
    bytes
}

/// A static glibc program (`gcc -O2 -static`).
pub fn glibc_static() -> Vec<u8> {
    padded("glibc-static", include_bytes!("../../fixtures/glibc-static.head"))
}

/// The same, `-static-pie` (ET_DYN without PT_INTERP).
pub fn glibc_static_pie() -> Vec<u8> {
    padded("glibc-static-pie", include_bytes!("../../fixtures/glibc-static-pie.head"))
}

/// The userland demo (rust-lld).
pub fn userland() -> Vec<u8> {
    padded("userland", include_bytes!("../../fixtures/userland.head"))
}

/// Every fixture, by name.
pub fn all() -> Vec<(&'static str, Vec<u8>)> {
    alloc::vec![
        ("bss-only", BSS_ONLY.to_vec()),
        ("bti", BTI.to_vec()),
        ("rwx", RWX.to_vec()),
        ("glibc-static", glibc_static()),
        ("glibc-static-pie", glibc_static_pie()),
        ("userland", userland()),
    ]
}

fn raw_phdr(bytes: &[u8], index: usize) -> ProgramHeader {
    let header = FileHeader::read(bytes).unwrap();
    ProgramHeader::read(&bytes[header.phoff as usize + 56 * index..]).unwrap()
}

#[test]
fn the_bss_only_program_is_accepted_although_its_bss_offset_is_past_the_end_of_the_file() {
    // What GNU ld writes: the RW PT_LOAD has no file bytes and an offset beyond the file.
    let bss = raw_phdr(BSS_ONLY, 1);
    assert_eq!((bss.kind, bss.filesz, bss.memsz), (pt::LOAD, 0, 0x3000));
    assert!(bss.offset > BSS_ONLY.len() as u64, "offset {:#x}, file {} bytes", bss.offset, BSS_ONLY.len());
    let exe = parse(BSS_ONLY).unwrap();
    assert_eq!(exe.entry, 0x40_00b0);
    assert_eq!(
        exe.segments,
        [
            Segment { vaddr: 0x40_0000, memsz: 0x154, filesz: 0x154, offset: 0, prot: RX },
            Segment { vaddr: 0x41_1000, memsz: 0x3000, filesz: 0, offset: 0, prot: RW },
        ]
    );
    assert_eq!((exe.phdr, exe.phnum, exe.exec_range), (0x40_0040, 2, Some((0x40_0000, 0x40_0154))));
    assert!(!exe.pie && !exe.exec_stack);
}

#[test]
fn a_glibc_static_program_is_accepted() {
    let exe = parse(&glibc_static()).unwrap();
    assert!(!exe.pie);
    assert_eq!(exe.bias, 0);
    assert_eq!(exe.segments.len(), 2);
    let (text, data) = (exe.segments[0], exe.segments[1]);
    assert_eq!((text.vaddr, text.offset, text.prot), (0x40_0000, 0, RX));
    assert_eq!(data.prot, RW);
    assert!(data.filesz < data.memsz, "data and bss");
    assert!(text.vaddr <= exe.entry && exe.entry < text.end());
    assert_eq!((exe.phdr, exe.phnum), (0x40_0040, 6));
    assert!(!exe.exec_stack, "PT_GNU_STACK is RW");
}

#[test]
fn a_glibc_static_pie_is_loaded_at_the_pie_base() {
    let exe = parse(&glibc_static_pie()).unwrap();
    assert!(exe.pie);
    assert_eq!(exe.bias, LIMITS.pie_base);
    let text = exe.segments[0];
    assert_eq!((text.vaddr, text.prot), (LIMITS.pie_base, RX));
    assert!(text.vaddr <= exe.entry && exe.entry < text.end());
    assert_eq!(exe.phdr, LIMITS.pie_base + 0x40);
}

#[test]
fn the_userland_demo_is_accepted() {
    let exe = parse(&userland()).unwrap();
    assert_eq!(exe.segments.iter().map(|s| s.prot).collect::<Vec<_>>(), [R, RX, RW]);
    assert_eq!(exe.exec_range.map(|(s, _)| s), Some(exe.segments[1].vaddr));
}

#[test]
fn the_bti_marking_is_read_from_the_property_note() {
    let exe = parse(BTI).unwrap();
    assert_eq!(exe.aarch64_features, 3, "BTI | PAC");
}

#[test]
fn an_rwx_segment_is_refused_under_w_xor_x_and_loaded_without() {
    assert_eq!(parse(RWX), Err(Refusal::WritableAndExecutable { index: 0, vaddr: 0x40_0078 }));
    let exe = crate::parse(RWX, &Limits { w_xor_x: false, ..LIMITS }).unwrap();
    let all = Prot { read: true, write: true, exec: true };
    assert_eq!(exe.segments[0].prot, all);
    assert!(exe.segments[0].filesz < exe.segments[0].memsz);
}
