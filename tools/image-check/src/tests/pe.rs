//! The EFI-application checks on a fixture laid out as linker.ld lays out the kernel: the
//! header page (Image header and PE/COFF header), then .text, .rodata and .data each from a page
//! boundary, .data padded to a page, .bss after it.

use super::*;
use crate::pe::{MZ_NOP, PeHeader};

/// Section characteristics: code RX, read-only data, read-write data.
const TEXT: u32 = 0x6000_0020;
const RODATA: u32 = 0x4000_0040;
const DATA: u32 = 0xc000_0040;

/// (name, VirtualSize, RVA, SizeOfRawData, PointerToRawData, characteristics)
type Section = (&'static [u8; 8], u32, u32, u32, u32, u32);

/// The PE header at `at` in `out`: arm64 PE32+ EFI application, 4 KiB alignments, the sections.
fn put_pe(out: &mut [u8], at: usize, entry: u32, size_of_image: u32, sections: &[Section]) {
    let mut v = Vec::new();
    v.extend_from_slice(b"PE\0\0");
    put16(&mut v, 0xaa64);
    put16(&mut v, sections.len() as u16);
    put32(&mut v, 0);
    put32(&mut v, 0);
    put32(&mut v, 0);
    put16(&mut v, 112 + 6 * 8); // SizeOfOptionalHeader
    put16(&mut v, 0x206);
    put16(&mut v, 0x20b);
    v.extend_from_slice(&[0, 0]);
    put32(&mut v, 0x1000); // SizeOfCode
    put32(&mut v, 0x2000);
    put32(&mut v, 0x2000);
    put32(&mut v, entry);
    put32(&mut v, 0x1000); // BaseOfCode
    put64(&mut v, 0); // ImageBase
    put32(&mut v, 0x1000);
    put32(&mut v, 0x1000);
    for _ in 0..6 {
        put16(&mut v, 0);
    }
    put32(&mut v, 0);
    put32(&mut v, size_of_image);
    put32(&mut v, 0x1000); // SizeOfHeaders
    put32(&mut v, 0);
    put16(&mut v, 10);
    put16(&mut v, 0);
    for _ in 0..4 {
        put64(&mut v, 0);
    }
    put32(&mut v, 0);
    put32(&mut v, 6);
    for _ in 0..6 {
        put64(&mut v, 0);
    }
    for &(name, vsize, rva, raw, ptr, flags) in sections {
        v.extend_from_slice(name);
        for x in [vsize, rva, raw, ptr, 0, 0] {
            put32(&mut v, x);
        }
        put32(&mut v, 0);
        put32(&mut v, flags);
    }
    out[at..at + v.len()].copy_from_slice(&v);
}

const GOOD_SECTIONS: [Section; 3] = [
    (b".text\0\0\0", 0x1000, 0x1000, 0x1000, 0x1000, TEXT),
    (b".rodata\0", 0x1000, 0x2000, 0x1000, 0x2000, RODATA),
    (b".data\0\0\0", 0x3000, 0x3000, 0x1000, 0x3000, DATA),
];

/// The plain fixture moved up a page behind a header page, with an `efi_pe_entry` at +0x10c0.
fn efi_kernel(sections: &[Section], entry: u32, size_of_image: u32) -> TestElf {
    let mut t = TestElf::kernel();
    let old_text = t.segs[0].data.clone();
    let mut text = vec![0u8; 0x1000];
    text.extend_from_slice(&old_text);
    text.resize(0x1200, 0xd5);
    t.segs[0].data = text;
    t.segs[0].memsz = 0x1200;
    for seg in &mut t.segs[1..] {
        seg.vaddr += 0x1000;
        seg.paddr += 0x1000;
    }
    t.segs[2].data.resize(0x1000, 0); // .data padded to a page, as linker.ld does
    t.secs[0].size = 0x1200;
    t.secs[3].size = 0x1000;
    for sym in t.syms.iter_mut().filter(|s| s.value != 0 && s.name != "_start") {
        sym.value += 0x1000;
    }
    t.syms.push(sym("efi_pe_entry", BASE + 0x10c0, 0x40, STT_FUNC, Some(0)));
    t.entry = BASE + 0x1040;
    let header = Header {
        code0: MZ_NOP,
        code1: encode_branch(0x1040 - 4).unwrap(),
        text_offset: 0,
        image_size: 0x6000,
        flags: EXPECTED_FLAGS,
        res2_4: [0; 3],
        magic: IMAGE_MAGIC,
        res5: 0x40,
    };
    t.segs[0].data[..64].copy_from_slice(&header.to_bytes());
    put_pe(&mut t.segs[0].data, 0x40, entry, size_of_image, sections);
    t
}

fn good() -> TestElf {
    efi_kernel(&GOOD_SECTIONS, 0x10c0, 0x6000)
}

fn efi_failures(t: &TestElf) -> Vec<&'static str> {
    failures(&check::check(&t.image(), &t.build(), &Options::default()))
}

#[test]
fn efi_image_passes_every_check() {
    let t = good();
    let outcomes = check::check(&t.image(), &t.build(), &Options::default());
    for o in &outcomes {
        assert!(o.ok, "{o}");
    }
    let names: Vec<_> = outcomes.iter().map(|o| o.name).collect();
    assert_eq!(&names[2..4], ["code0", "code1"]);
    assert_eq!(&names[names.len() - 4..], ["pe-header", "pe-sections", "pe-entry", "efi-stub-code"]);
    let pe = PeHeader::parse(&t.image(), 0x40).unwrap();
    assert_eq!(pe.sections.len(), 3);
    assert_eq!(pe.entry, 0x10c0);
}

#[test]
fn the_plain_checks_refuse_an_efi_image_and_the_efi_checks_a_plain_one() {
    let t = good();
    let raw = failures(&run(&t.image(), &t.build()));
    assert_eq!(raw, ["code0", "reserved"]);
    let plain = TestElf::kernel();
    let outcomes = check::check(&plain.image(), &plain.build(), &Options::default());
    assert_eq!(failures(&outcomes), ["code0", "code1", "pe-header", "efi-stub-code"]);
    assert!(detail(&outcomes, "code0").contains("--no-efi"));
    assert!(detail(&outcomes, "pe-header").contains("no \"PE\\0\\0\" signature"));
}

#[test]
fn code1_must_branch_to_the_entry() {
    let mut t = good();
    t.set_header(|h| h.code1 = encode_branch(0x1040).unwrap());
    assert_eq!(efi_failures(&t), ["code1"]);
    let mut t = good();
    t.set_header(|h| h.code0 = encode_branch(0x1040).unwrap());
    assert_eq!(efi_failures(&t), ["code0"]);
}

#[test]
fn a_wrong_entry_point_fails() {
    // efi_pe_entry is at 0x10c0: 0x1100 is another function, 0x2000 is rodata.
    assert_eq!(efi_failures(&efi_kernel(&GOOD_SECTIONS, 0x1100, 0x6000)), ["pe-entry"]);
    let t = efi_kernel(&GOOD_SECTIONS, 0x2000, 0x6000);
    assert_eq!(efi_failures(&t), ["pe-entry"]);
    // No efi_pe_entry symbol at all.
    let mut t = good();
    t.syms.retain(|s| s.name != "efi_pe_entry");
    assert_eq!(efi_failures(&t), ["pe-entry", "efi-stub-code"]);
}

#[test]
fn sections_that_do_not_lay_out_the_image_fail() {
    let mut cases: Vec<[Section; 3]> = Vec::new();
    let mut s = GOOD_SECTIONS;
    s[1].4 = 0x2200; // file offset != RVA
    cases.push(s);
    let mut s = GOOD_SECTIONS;
    s[2].1 = 0x2000; // .data stops short of SizeOfImage (no .bss)
    cases.push(s);
    let mut s = GOOD_SECTIONS;
    s[2].3 = 0x2000; // raw data past the end of the file
    cases.push(s);
    let mut s = GOOD_SECTIONS;
    s[0].5 |= 0x8000_0000; // writable code
    cases.push(s);
    let mut s = GOOD_SECTIONS;
    s.swap(0, 1); // out of order
    cases.push(s);
    for (i, sections) in cases.iter().enumerate() {
        assert_eq!(efi_failures(&efi_kernel(sections, 0x10c0, 0x6000)), ["pe-sections"], "case {i}");
    }
    // SizeOfImage other than image_size.
    let mut s = GOOD_SECTIONS;
    s[2].1 = 0x4000;
    assert_eq!(efi_failures(&efi_kernel(&s, 0x10c0, 0x7000)), ["pe-sections"]);
}

#[test]
fn a_wrong_machine_or_format_fails_the_header_check() {
    for (at, value) in [(0x44usize, 0x8664u16), (0x58, 0x10b), (0x9c, 11)] {
        let mut t = good();
        t.segs[0].data[at..at + 2].copy_from_slice(&value.to_le_bytes());
        assert_eq!(efi_failures(&t), ["pe-header"], "offset {at:#x}");
    }
}

#[test]
fn a_pe_offset_past_the_file_or_cut_headers_fail_without_panicking() {
    let mut t = good();
    t.set_header(|h| h.res5 = 0xffff_fff0);
    assert_eq!(efi_failures(&t), ["pe-header"]);
    let t = good();
    let image = t.image();
    // The section table ends at 0x170: any cut before it loses part of the header.
    for len in [64, 0x44, 0x60, 0xf0, 0x150, 0x16f] {
        let outcomes = check::check(&image[..len], &t.build(), &Options::default());
        assert!(failures(&outcomes).contains(&"pe-header"), "cut at {len:#x}");
    }
    // Cut after it: the header reads, the sections run past the file.
    let outcomes = check::check(&image[..0x1800], &t.build(), &Options::default());
    assert!(failures(&outcomes).contains(&"pe-sections"));
}

/// `efi_pe_entry` (at +0x10c0 of the EFI fixture) replaced by `code` (instruction `i` at `pc(i)`).
fn with_stub(code: impl FnOnce(&dyn Fn(u64) -> u64) -> Vec<u32>) -> TestElf {
    let mut t = good();
    let words = code(&|i| BASE + 0x10c0 + 4 * i);
    early::put_code(&mut t.segs[0].data, 0x10c0, &words);
    t
}

fn stub_outcome(t: &TestElf) -> Outcome {
    check::check(&t.image(), &t.build(), &Options::default())
        .into_iter()
        .find(|o| o.name == "efi-stub-code")
        .unwrap()
}

#[test]
fn the_stub_may_call_the_firmware_but_not_load_link_addresses() {
    use early::{RET, adrp, blr, ldr_imm};
    // Calls through a register (the firmware's tables) are allowed; the rest is the early rule.
    let t = with_stub(|_| vec![blr(8), RET]);
    assert!(stub_outcome(&t).ok, "{}", stub_outcome(&t));
    let t = with_stub(|_| vec![0xd61f_0100, RET]); // br x8
    assert!(!stub_outcome(&t).ok);
    // A table of slices in .rodata (SOME_TABLE, now at +0x2010) holding a link address.
    let mut t = with_stub(|pc| vec![adrp(1, pc(0), BASE + 0x2000), ldr_imm(2, 1, 0x10), RET]);
    assert!(stub_outcome(&t).ok, "no link address in the table yet");
    t.segs[1].data[0x10..0x18].copy_from_slice(&(BASE + 0x1080).to_le_bytes());
    let o = stub_outcome(&t);
    assert!(!o.ok && o.detail.contains("a link address"), "{o}");
}

#[test]
fn the_stub_scan_stops_at_its_exit_and_at_panics() {
    use early::{RET, bl};
    // The stub calls the function at +0x1100, which branches through a register.
    let stub = |t: &mut TestElf| {
        early::put_code(&mut t.segs[0].data, 0x1100, &[0xd61f_02a0]); // br x21
    };
    let mut t = with_stub(|pc| vec![bl(pc(0), BASE + 0x1100), RET]);
    stub(&mut t);
    assert!(!stub_outcome(&t).ok, "kernel::boot::el2_to_el1 is not an exit");
    for name in ["efi_enter_kernel", "_ZN4core9panicking5panic17h0123456789abcdefE"] {
        let mut t = with_stub(|pc| vec![bl(pc(0), BASE + 0x1100), RET]);
        stub(&mut t);
        t.syms.iter_mut().find(|s| s.value == BASE + 0x1100).unwrap().name = name.to_string();
        assert!(stub_outcome(&t).ok, "{name}: {}", stub_outcome(&t));
    }
}
