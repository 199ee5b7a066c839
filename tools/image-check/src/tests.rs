//! Unit tests on synthetic ELF files and Images built byte by byte here: a minimal ELF64 writer
//! ([`TestElf`]) and an `objcopy -O binary` stand-in ([`TestElf::image`]). Each check is shown
//! to pass on a good pair and to fail on a pair broken in exactly one way; the symbol blob is
//! round-tripped through the decoder the kernel uses.

use crate::check::{self, EXPECTED_FLAGS, Header, IMAGE_MAGIC, Options, Outcome, encode_branch};
use crate::elf::{PF_R, PF_W, PF_X, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE};
use crate::ksyms_format::{self, Table};
use crate::symbols::{self, RawSymbol, TRUNCATED_NAME_LEN};

mod early;
mod pe;

const BASE: u64 = 0xffff_8000_0000_0000;
const PHYS: u64 = 0x4000_0000;
const STT_NOTYPE: u8 = 0;
const STT_OBJECT: u8 = 1;
const STT_FUNC: u8 = 2;
const SHT_PROGBITS: u32 = 1;
const SHT_NOBITS: u32 = 8;

struct Seg {
    vaddr: u64,
    paddr: u64,
    flags: u32,
    data: Vec<u8>,
    memsz: u64,
}

struct Sec {
    name: &'static str,
    /// Index of the segment holding it; the section starts `at` bytes into the segment.
    seg: usize,
    at: u64,
    size: u64,
    flags: u64,
    nobits: bool,
}

struct Sym {
    name: String,
    value: u64,
    size: u64,
    kind: u8,
    /// Index into `sections` (0-based, not counting the null section), or `None` for SHN_UNDEF.
    section: Option<usize>,
}

/// Section-header fields: name, type, flags, addr, offset, size, link, entsize.
type Shdr = (u32, u32, u64, u64, u64, u64, u32, u64);

/// A minimal ELF64 little-endian executable.
struct TestElf {
    machine: u16,
    entry: u64,
    segs: Vec<Seg>,
    secs: Vec<Sec>,
    syms: Vec<Sym>,
}

fn put16(v: &mut Vec<u8>, x: u16) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put32(v: &mut Vec<u8>, x: u32) {
    v.extend_from_slice(&x.to_le_bytes());
}
fn put64(v: &mut Vec<u8>, x: u64) {
    v.extend_from_slice(&x.to_le_bytes());
}
/// Appends `name` and its NUL to a string table; returns its offset.
fn name_off(table: &mut Vec<u8>, name: &str) -> u32 {
    let at = table.len() as u32;
    table.extend_from_slice(name.as_bytes());
    table.push(0);
    at
}
fn pad_to(v: &mut Vec<u8>, align: usize) {
    while !v.len().is_multiple_of(align) {
        v.push(0);
    }
}

impl TestElf {
    /// A kernel-shaped ELF: RX text starting with a good Image header at `BASE` (entry at +0x40),
    /// R rodata at +0x1000 holding a 0x400-byte `.ksyms`, RW data at +0x2000 with 0x10 file
    /// bytes and 0x2ff0 of .bss (memory extent 0x5000), a few symbols, and an `early_map` at +0x180
    /// that loads from .rodata and calls `kernel::main` (position-independent).
    fn kernel() -> TestElf {
        let mut text = Header {
            code0: encode_branch(0x40).unwrap(),
            code1: 0,
            text_offset: 0,
            image_size: 0x5000,
            flags: EXPECTED_FLAGS,
            res2_4: [0; 3],
            magic: IMAGE_MAGIC,
            res5: 0,
        }
        .to_bytes()
        .to_vec();
        text.resize(0x200, 0xd5); // "code"
        early::put_code(&mut text, 0x180, &early::good_early_map());
        let mut rodata = vec![0x11; 0x100];
        rodata.resize(0x500, 0); // .ksyms at +0x100, 0x400 bytes
        TestElf {
            machine: 183,
            entry: BASE + 0x40,
            segs: vec![
                Seg { vaddr: BASE, paddr: PHYS, flags: PF_R | PF_X, data: text, memsz: 0x200 },
                Seg { vaddr: BASE + 0x1000, paddr: PHYS + 0x1000, flags: PF_R, data: rodata, memsz: 0x500 },
                Seg {
                    vaddr: BASE + 0x2000,
                    paddr: PHYS + 0x2000,
                    flags: PF_R | PF_W,
                    data: vec![0x22; 0x10],
                    memsz: 0x3000,
                },
            ],
            secs: vec![
                Sec {
                    name: ".text",
                    seg: 0,
                    at: 0,
                    size: 0x200,
                    flags: SHF_ALLOC | SHF_EXECINSTR,
                    nobits: false,
                },
                Sec { name: ".rodata", seg: 1, at: 0, size: 0x100, flags: SHF_ALLOC, nobits: false },
                Sec { name: ".ksyms", seg: 1, at: 0x100, size: 0x400, flags: SHF_ALLOC, nobits: false },
                Sec { name: ".data", seg: 2, at: 0, size: 0x10, flags: SHF_ALLOC | SHF_WRITE, nobits: false },
            ],
            syms: vec![
                sym("_start", BASE, 0, STT_NOTYPE, Some(0)),
                sym("$x", BASE + 0x40, 0, STT_NOTYPE, Some(0)),
                sym("primary_entry", BASE + 0x40, 0, STT_NOTYPE, Some(0)),
                sym("_ZN6kernel4main17h0123456789abcdefE", BASE + 0x80, 0x40, STT_FUNC, Some(0)),
                sym("_ZN6kernel4boot10el2_to_el117hfedcba9876543210E", BASE + 0x100, 0x80, STT_FUNC, Some(0)),
                sym("early_map", BASE + 0x180, 0x40, STT_FUNC, Some(0)),
                sym("rodata_label", BASE + 0x1000, 0, STT_NOTYPE, Some(1)),
                sym("SOME_TABLE", BASE + 0x1010, 8, STT_OBJECT, Some(1)),
                sym("undefined_func", 0, 0, STT_FUNC, None),
            ],
        }
    }

    /// The ELF file bytes.
    fn build(&self) -> Vec<u8> {
        let phnum = self.segs.len();
        let mut out = vec![0u8; 64 + 56 * phnum];
        pad_to(&mut out, 16);
        let mut seg_offsets = Vec::new();
        for seg in &self.segs {
            pad_to(&mut out, 16);
            seg_offsets.push(out.len() as u64);
            out.extend_from_slice(&seg.data);
        }
        // String tables and the symbol table.
        let mut shstrtab = vec![0u8];
        let mut strtab = vec![0u8];
        let mut symtab = vec![0u8; 24]; // null symbol
        for s in &self.syms {
            put32(&mut symtab, name_off(&mut strtab, &s.name));
            symtab.push(s.kind); // STB_LOCAL
            symtab.push(0);
            put16(&mut symtab, s.section.map_or(0, |i| i as u16 + 1));
            put64(&mut symtab, s.value);
            put64(&mut symtab, s.size);
        }
        pad_to(&mut out, 8);
        let symtab_off = out.len() as u64;
        out.extend_from_slice(&symtab);
        let strtab_off = out.len() as u64;
        out.extend_from_slice(&strtab);
        // Section headers: null, user sections, .symtab, .strtab, .shstrtab.
        let mut headers: Vec<Shdr> = Vec::new();
        for sec in &self.secs {
            let seg = &self.segs[sec.seg];
            headers.push((
                name_off(&mut shstrtab, sec.name),
                if sec.nobits { SHT_NOBITS } else { SHT_PROGBITS },
                sec.flags,
                seg.vaddr + sec.at,
                seg_offsets[sec.seg] + sec.at,
                sec.size,
                0,
                0,
            ));
        }
        let strtab_index = self.secs.len() as u32 + 2;
        headers.push((
            name_off(&mut shstrtab, ".symtab"),
            2,
            0,
            0,
            symtab_off,
            symtab.len() as u64,
            strtab_index,
            24,
        ));
        headers.push((name_off(&mut shstrtab, ".strtab"), 3, 0, 0, strtab_off, strtab.len() as u64, 0, 0));
        let shstr_name = name_off(&mut shstrtab, ".shstrtab");
        let shstrtab_off = out.len() as u64;
        out.extend_from_slice(&shstrtab);
        headers.push((shstr_name, 3, 0, 0, shstrtab_off, shstrtab.len() as u64, 0, 0));
        pad_to(&mut out, 8);
        let shoff = out.len() as u64;
        out.extend_from_slice(&[0; 64]); // null section
        for (name, kind, flags, addr, offset, size, link, entsize) in &headers {
            put32(&mut out, *name);
            put32(&mut out, *kind);
            put64(&mut out, *flags);
            put64(&mut out, *addr);
            put64(&mut out, *offset);
            put64(&mut out, *size);
            put32(&mut out, *link);
            put32(&mut out, 0);
            put64(&mut out, 8);
            put64(&mut out, *entsize);
        }
        let shnum = headers.len() as u16 + 1;

        // ELF header.
        let mut eh = Vec::new();
        eh.extend_from_slice(b"\x7fELF");
        eh.extend_from_slice(&[2, 1, 1, 0]);
        eh.extend_from_slice(&[0; 8]);
        put16(&mut eh, 2); // ET_EXEC
        put16(&mut eh, self.machine);
        put32(&mut eh, 1);
        put64(&mut eh, self.entry);
        put64(&mut eh, 64); // e_phoff
        put64(&mut eh, shoff);
        put32(&mut eh, 0);
        put16(&mut eh, 64);
        put16(&mut eh, 56);
        put16(&mut eh, phnum as u16);
        put16(&mut eh, 64);
        put16(&mut eh, shnum);
        put16(&mut eh, shnum - 1); // .shstrtab is last
        for (i, seg) in self.segs.iter().enumerate() {
            put32(&mut eh, 1); // PT_LOAD
            put32(&mut eh, seg.flags);
            put64(&mut eh, seg_offsets[i]);
            put64(&mut eh, seg.vaddr);
            put64(&mut eh, seg.paddr);
            put64(&mut eh, seg.data.len() as u64);
            put64(&mut eh, seg.memsz);
            put64(&mut eh, 0x1000);
        }
        out[..eh.len()].copy_from_slice(&eh);
        out
    }

    /// What `llvm-objcopy -O binary` makes of it: file bytes laid out from the lowest address.
    fn image(&self) -> Vec<u8> {
        let low = self.segs.iter().map(|s| s.vaddr).min().unwrap();
        let end = self.segs.iter().map(|s| s.vaddr + s.data.len() as u64).max().unwrap();
        let mut image = vec![0u8; (end - low) as usize];
        for seg in &self.segs {
            let at = (seg.vaddr - low) as usize;
            image[at..at + seg.data.len()].copy_from_slice(&seg.data);
        }
        image
    }

    /// Replaces the Image header in the text segment.
    fn set_header(&mut self, edit: impl FnOnce(&mut Header)) {
        let mut header = Header::parse(&self.segs[0].data).unwrap();
        edit(&mut header);
        self.segs[0].data[..64].copy_from_slice(&header.to_bytes());
    }
}

fn sym(name: &str, value: u64, size: u64, kind: u8, section: Option<usize>) -> Sym {
    Sym { name: name.to_string(), value, size, kind, section }
}

/// The plain-Image checks (`--no-efi`): the fixtures below have no PE/COFF header; `tests::pe`
/// has those that do.
fn run(image: &[u8], elf: &[u8]) -> Vec<Outcome> {
    check::check(image, elf, &RAW)
}

const RAW: Options = Options { size_align: check::DEFAULT_SIZE_ALIGN, page_size: 4096, efi: false };

/// Names of the failed checks.
fn failures(outcomes: &[Outcome]) -> Vec<&'static str> {
    outcomes.iter().filter(|o| !o.ok).map(|o| o.name).collect()
}

/// Builds the pair, runs the checks, and returns the names of those that failed.
fn failures_of(t: &TestElf) -> Vec<&'static str> {
    failures(&run(&t.image(), &t.build())).to_vec()
}

fn detail<'a>(outcomes: &'a [Outcome], name: &str) -> &'a str {
    &outcomes.iter().find(|o| o.name == name).unwrap().detail
}

// ---- kimage check ------------------------------------------------------------------------

#[test]
fn good_pair_passes_every_check() {
    let t = TestElf::kernel();
    let outcomes = run(&t.image(), &t.build());
    for o in &outcomes {
        assert!(o.ok, "{o}");
    }
    let names: Vec<_> = outcomes.iter().map(|o| o.name).collect();
    assert_eq!(
        names,
        [
            "elf-format",
            "header",
            "code0",
            "text_offset",
            "image_size",
            "flags",
            "reserved",
            "magic",
            "image-length",
            "segment-bytes",
            "lma-layout",
            "entry-segment",
            "w^x",
            "base-alignment",
            "early-code"
        ]
    );
    assert!(outcomes[0].to_string().starts_with("ok   elf-format: "));
}

#[test]
fn wrong_magic_fails() {
    let mut t = TestElf::kernel();
    t.set_header(|h| h.magic = 0x644d_5242);
    assert_eq!(failures_of(&t), ["magic"]);
    let outcomes = run(&t.image(), &t.build());
    assert_eq!(
        outcomes.iter().find(|o| !o.ok).unwrap().to_string(),
        "FAIL magic: expected 0x644d5241 (\"ARM\\x64\"), found 0x644d5242"
    );
}

#[test]
fn wrong_flags_fail() {
    for flags in [0x0, 0x2, 0xB, 0xC, 0xE, 0x1A] {
        let mut t = TestElf::kernel();
        t.set_header(|h| h.flags = flags);
        assert_eq!(failures_of(&t), ["flags"], "flags {flags:#x}");
    }
}

/// With `--page-size`, the flags must name that page size (bits 1-2: 2 for 16 KiB, 3 for
/// 64 KiB) and nothing else; the 4 KiB flags then fail.
#[test]
fn flags_name_the_page_size() {
    assert_eq!(
        [4096, 16384, 65536, 8192].map(check::expected_flags),
        [0xA, 0xC, 0xE, 0x8],
        "booting.rst: bits 1-2 are 1, 2, 3 for 4K, 16K, 64K"
    );
    for (page_size, good) in [(16384, 0xC), (65536, 0xE)] {
        let options = Options { page_size, ..RAW };
        for flags in [0xA, 0xC, 0xE, 0x8] {
            let mut t = TestElf::kernel();
            t.set_header(|h| h.flags = flags);
            let outcomes = check::check(&t.image(), &t.build(), &options);
            let expected: &[&str] = if flags == good { &[] } else { &["flags"] };
            assert_eq!(failures(&outcomes), expected, "page size {page_size}, flags {flags:#x}");
        }
    }
}

#[test]
fn branch_to_the_wrong_place_fails() {
    let mut t = TestElf::kernel();
    t.set_header(|h| h.code0 = encode_branch(0x44).unwrap());
    assert_eq!(failures_of(&t), ["code0"]);
    let outcomes = run(&t.image(), &t.build());
    assert!(detail(&outcomes, "code0").contains("expected b to offset 0x40"));
    assert!(detail(&outcomes, "code0").contains("b to offset 0x44"));

    // Not a branch at all (a NOP, and BL, which is not an unconditional B).
    for insn in [0xd503_201f, 0x9400_0010] {
        let mut t = TestElf::kernel();
        t.set_header(|h| h.code0 = insn);
        assert_eq!(failures_of(&t), ["code0"], "{insn:#x}");
    }

    // The branch is right but the ELF entry is elsewhere (ENTRY() names the header).
    let mut t = TestElf::kernel();
    t.entry = BASE;
    let outcomes = run(&t.image(), &t.build());
    assert_eq!(failures(&outcomes), ["code0"]);
    assert!(detail(&outcomes, "code0").contains("ENTRY()"));
}

#[test]
fn branch_encoding_round_trips() {
    for offset in [0i64, 4, 0x40, 0x0234_5678, -4, -(1 << 27), (1 << 27) - 4] {
        let insn = encode_branch(offset).unwrap();
        assert_eq!(check::branch_offset(insn), Some(offset), "{offset:#x}");
    }
    assert_eq!(encode_branch(2), None);
    assert_eq!(encode_branch(1 << 27), None);
    assert_eq!(check::branch_offset(0x1400_0010), Some(0x40));
}

#[test]
fn image_size_too_small_fails() {
    // Smaller than the file itself.
    let mut t = TestElf::kernel();
    t.set_header(|h| h.image_size = 0x1000);
    assert_eq!(failures_of(&t), ["image_size"]);
    // Covers the file but not the .bss: both numbers are reported.
    let mut t = TestElf::kernel();
    t.set_header(|h| h.image_size = 0x2010);
    assert_eq!(failures_of(&t), ["image_size"]);
    let outcomes = run(&t.image(), &t.build());
    let d = detail(&outcomes, "image_size");
    assert!(d.contains("expected 0x5000") && d.contains("found 0x2010"), "{d}");
    // Not rounded.
    let mut t = TestElf::kernel();
    t.segs[2].memsz = 0x2f00;
    t.set_header(|h| h.image_size = 0x4f00);
    assert_eq!(failures_of(&t), ["image_size"]);
    t.set_header(|h| h.image_size = 0x5000);
    assert_eq!(failures_of(&t), Vec::<&str>::new());
    // A coarser rounding is an option.
    let outcomes = check::check(&t.image(), &t.build(), &Options { size_align: 0x10000, ..RAW });
    assert_eq!(failures(&outcomes), ["image_size"]);
}

#[test]
fn writable_executable_segment_fails() {
    let mut t = TestElf::kernel();
    t.segs[0].flags = PF_R | PF_W | PF_X;
    assert_eq!(failures_of(&t), ["w^x"]);
    let mut t = TestElf::kernel();
    t.segs[2].flags = PF_R | PF_W | PF_X;
    assert_eq!(failures_of(&t), ["w^x"]);
}

#[test]
fn entry_outside_executable_segment_fails() {
    let mut t = TestElf::kernel();
    t.segs[0].flags = PF_R;
    assert_eq!(failures_of(&t), ["entry-segment"]);
    let mut t = TestElf::kernel();
    t.entry = BASE + 0x1000 + 0x40;
    t.set_header(|h| h.code0 = encode_branch(0x1040).unwrap());
    assert_eq!(failures_of(&t), ["entry-segment"]);
}

#[test]
fn nonzero_text_offset_and_reserved_fields_fail() {
    let mut t = TestElf::kernel();
    t.set_header(|h| h.text_offset = 0x80000);
    assert_eq!(failures_of(&t), ["text_offset"]);
    for field in 0..4 {
        let mut t = TestElf::kernel();
        t.set_header(|h| match field {
            3 => h.res5 = 0x40,
            i => h.res2_4[i] = 1,
        });
        assert_eq!(failures_of(&t), ["reserved"], "field {field}");
    }
}

#[test]
fn image_that_does_not_match_the_elf_fails() {
    let t = TestElf::kernel();
    let elf = t.build();
    // One byte of rodata differs.
    let mut image = t.image();
    image[0x1005] ^= 0xff;
    let outcomes = run(&image, &elf);
    assert_eq!(failures(&outcomes), ["segment-bytes"]);
    assert!(detail(&outcomes, "segment-bytes").contains("Image offset 0x1005"));
    // Truncated: the data segment is missing.
    let image = &t.image()[..0x1500];
    assert_eq!(failures(&run(image, &elf)), ["image-length", "segment-bytes"]);
    // Padded: objcopy would not add the trailing .bss.
    let mut image = t.image();
    image.resize(0x3000, 0);
    assert_eq!(failures(&run(&image, &elf)), ["image-length"]);
    // Too short for a header.
    let outcomes = run(&t.image()[..10], &elf);
    assert_eq!(failures(&outcomes), ["header"]);
}

#[test]
fn misaligned_base_and_inconsistent_load_addresses_fail() {
    let mut t = TestElf::kernel();
    for seg in &mut t.segs {
        seg.vaddr += 0x1000;
    }
    for sym in t.syms.iter_mut().filter(|s| s.value != 0) {
        sym.value += 0x1000;
    }
    t.entry += 0x1000;
    assert_eq!(failures_of(&t), ["base-alignment"]);
    let mut t = TestElf::kernel();
    t.segs[1].paddr += 0x1000;
    assert_eq!(failures_of(&t), ["lma-layout"]);
}

#[test]
fn wrong_architecture_or_garbage_elf_fails() {
    let mut t = TestElf::kernel();
    t.machine = 62; // x86-64
    let outcomes = run(&t.image(), &t.build());
    assert_eq!(failures(&outcomes), ["elf-format"]);
    // The ELF-dependent checks are not run; the header-only ones still are.
    assert_eq!(outcomes.len(), 6);
    let outcomes = run(&t.image(), b"not an elf file at all, just some bytes that are long enough");
    assert_eq!(failures(&outcomes), ["elf-format"]);
}

#[test]
fn check_never_panics_on_truncated_elf() {
    let t = TestElf::kernel();
    let elf = t.build();
    let image = t.image();
    for len in (0..elf.len()).step_by(7) {
        let cut = elf[..len].to_vec();
        let _ = run(&image, &cut);
        let _ = symbols::plan(&cut);
    }
}

// ---- kimage symbols ----------------------------------------------------------------------

#[test]
fn demangles_without_hash() {
    assert_eq!(symbols::demangle("_ZN6kernel4main17h0123456789abcdefE"), "kernel::main");
    assert_eq!(symbols::demangle("primary_entry"), "primary_entry");
}

#[test]
fn collects_code_symbols_only() {
    let t = TestElf::kernel();
    let syms = symbols::collect(&t.build()).unwrap();
    let expected = [
        // A label of size 0 extends to the next symbol.
        (BASE, 0x40, "_start"),
        // `$x` (mapping symbol) is skipped.
        (BASE + 0x40, 0x40, "primary_entry"),
        (BASE + 0x80, 0x40, "kernel::main"),
        (BASE + 0x100, 0x80, "kernel::boot::el2_to_el1"),
        (BASE + 0x180, 0x40, "early_map"),
    ];
    let found: Vec<_> = syms.iter().map(|s| (s.address, s.size, s.name.as_str())).collect();
    // rodata_label (not in code), SOME_TABLE (OBJECT) and undefined_func (address 0) are out.
    assert_eq!(found, expected);
}

#[test]
fn func_wins_over_label_at_the_same_address() {
    let mut t = TestElf::kernel();
    t.syms.push(sym("alias_label", BASE + 0x80, 0, STT_NOTYPE, Some(0)));
    let syms = symbols::collect(&t.build()).unwrap();
    assert!(syms.iter().any(|s| s.name == "kernel::main"));
    assert!(!syms.iter().any(|s| s.name == "alias_label"));
}

fn sample() -> Vec<RawSymbol> {
    let raw = |address, size, name: &str| RawSymbol { address, size, name: name.to_string() };
    vec![
        raw(0x1000, 0x10, "a"),
        raw(0x1010, 0x20, "kernel::exceptions::sync_handler"),
        raw(0x1040, 0x8, "a"), // shares its string with the first
        raw(0x2000, 0x100, "κόσμε"),
        raw(0x2100, 0, "empty"),
        raw(0x2100, 4, "after_empty"),
    ]
}

#[test]
fn blob_round_trips_through_the_kernel_decoder() {
    let symbols = sample();
    let encoded = symbols::encode(&symbols, 4096).unwrap();
    let blob = &encoded.blob;
    assert_eq!(&blob[..4], b"KSYM");
    let table = Table::parse(blob).unwrap();
    assert_eq!(table.len(), symbols.len());
    for (i, s) in symbols.iter().enumerate() {
        let e = table.entry(i).unwrap();
        assert_eq!((e.address, e.size, e.name), (s.address, s.size, s.name.as_str()));
    }
    // Every byte of every symbol resolves to it, with the right offset.
    for s in symbols.iter().filter(|s| s.size > 0) {
        for off in [0, 1, u64::from(s.size) - 1] {
            assert_eq!(
                ksyms_format::lookup(blob, s.address + off),
                Some((s.name.as_str(), off)),
                "{}+{off}",
                s.name
            );
        }
    }
    // Below the first symbol, in gaps, and past the end: nothing.
    for addr in [0, 0xfff, 0x1030, 0x1048, 0x1fff, 0x2104, u64::MAX] {
        assert_eq!(ksyms_format::lookup(blob, addr), None, "{addr:#x}");
    }
    // The same decoder on a blob padded with zeros to the area, as the kernel sees it.
    let mut area = blob.clone();
    area.resize(4096, 0);
    assert_eq!(ksyms_format::lookup(&area, 0x1015), Some(("kernel::exceptions::sync_handler", 5)));
    // Identical names are stored once: "a" appears once in the string table.
    let strings = &blob[16 + 16 * symbols.len()..];
    assert_eq!(strings.split(|&b| b == 0).filter(|s| s == b"a").count(), 1);
}

#[test]
fn empty_table_and_unpatched_area_decode_safely() {
    let encoded = symbols::encode(&[], 64).unwrap();
    assert_eq!(encoded.blob.len(), 16);
    assert_eq!(ksyms_format::lookup(&encoded.blob, 0x1000), None);
    assert!(Table::parse(&encoded.blob).unwrap().is_empty());
    // The kernel's area before `kimage symbols` ran: all zeros.
    assert!(Table::parse(&[0u8; 256]).is_none());
    assert!(Table::parse(&[]).is_none());
}

#[test]
fn corrupt_blobs_decode_to_none() {
    let blob = symbols::encode(&sample(), 4096).unwrap().blob;
    let corrupt = |edit: &dyn Fn(&mut Vec<u8>)| {
        let mut b = blob.clone();
        edit(&mut b);
        b
    };
    let set32 = |b: &mut Vec<u8>, at: usize, v: u32| b[at..at + 4].copy_from_slice(&v.to_le_bytes());
    // Bad magic, reserved word, count past the end, string table before the entries or past
    // the end.
    assert!(Table::parse(&corrupt(&|b| b[0] = b'k')).is_none());
    assert!(Table::parse(&corrupt(&|b| set32(b, 12, 1))).is_none());
    assert!(Table::parse(&corrupt(&|b| set32(b, 4, u32::MAX))).is_none());
    assert!(Table::parse(&corrupt(&|b| set32(b, 4, 7))).is_none());
    assert!(Table::parse(&corrupt(&|b| set32(b, 8, 16))).is_none());
    assert!(Table::parse(&corrupt(&|b| set32(b, 8, u32::MAX))).is_none());
    // Unsorted addresses.
    assert!(Table::parse(&corrupt(&|b| b[16..24].copy_from_slice(&u64::MAX.to_le_bytes()))).is_none());
    // A name offset past the end, a name without its NUL, a name that is not UTF-8.
    let b = corrupt(&|b| set32(b, 16 + 12, u32::MAX));
    assert_eq!(ksyms_format::lookup(&b, 0x1000), None);
    let b = corrupt(&|b| {
        b.pop();
    });
    assert_eq!(ksyms_format::lookup(&b, 0x2100), None);
    assert_eq!(ksyms_format::lookup(&b, 0x1000), Some(("a", 0)));
    let b = corrupt(&|b| {
        let at = b.windows(2).position(|w| w == "κ".as_bytes()).unwrap();
        b[at] = 0xff;
    });
    assert_eq!(ksyms_format::lookup(&b, 0x2000), None);
}

#[test]
fn decoder_never_panics_on_mutated_or_cut_blobs() {
    let blob = symbols::encode(&sample(), 4096).unwrap().blob;
    let probes = [0, 0x1000, 0x1015, 0x2000, 0x2103, u64::MAX];
    for len in 0..=blob.len() {
        for &a in &probes {
            let _ = ksyms_format::lookup(&blob[..len], a);
        }
    }
    // Deterministic pseudo-random byte flips.
    let mut state = 0x9e37_79b9_7f4a_7c15u64;
    for _ in 0..20_000 {
        state ^= state << 13;
        state ^= state >> 7;
        state ^= state << 17;
        let mut b = blob.clone();
        let at = (state as usize) % b.len();
        b[at] = (state >> 32) as u8;
        if let Some(t) = Table::parse(&b) {
            for i in 0..t.len() {
                let _ = t.entry(i);
            }
        }
        for &a in &probes {
            let _ = ksyms_format::lookup(&b, a);
        }
    }
}

#[test]
fn longest_names_are_truncated_first_to_fit() {
    let long = |n: usize, c: char| c.to_string().repeat(n);
    let symbols: Vec<RawSymbol> = [(200, 'a'), (100, 'b'), (70, 'c'), (10, 'd')]
        .iter()
        .enumerate()
        .map(|(i, &(n, c))| RawSymbol { address: 0x1000 * (i as u64 + 1), size: 0x10, name: long(n, c) })
        .collect();
    let full = symbols::encode(&symbols, usize::MAX).unwrap();
    assert_eq!(full.truncated, 0);
    assert_eq!(full.blob.len(), 16 + 4 * 16 + 201 + 101 + 71 + 11);
    // Room for everything once the 200-byte name is cut to 64: only that one is cut.
    let encoded = symbols::encode(&symbols, full.blob.len() - 136).unwrap();
    assert_eq!(encoded.truncated, 1);
    let blob = &encoded.blob;
    let a = ksyms_format::lookup(blob, 0x1000).unwrap().0;
    assert_eq!(a.len(), TRUNCATED_NAME_LEN);
    assert!(a.ends_with("..."));
    assert_eq!(ksyms_format::lookup(blob, 0x2000).unwrap().0, long(100, 'b'));
    // Less room: the next longest is cut too; the short ones never are.
    let encoded = symbols::encode(&symbols, full.blob.len() - 137).unwrap();
    assert_eq!(encoded.truncated, 2);
    assert_eq!(ksyms_format::lookup(&encoded.blob, 0x4000).unwrap().0, long(10, 'd'));
    // Not even all cuts are enough: the error gives both sizes.
    let minimum = 16 + 4 * 16 + 3 * 65 + 11;
    assert!(symbols::encode(&symbols, minimum).is_ok());
    let err = symbols::encode(&symbols, minimum - 1).unwrap_err();
    assert!(
        err.contains(&format!("{minimum} bytes needed"))
            && err.contains(&format!("{} bytes available", minimum - 1)),
        "{err}"
    );
}

#[test]
fn truncation_respects_utf8_boundaries() {
    let name = "é".repeat(100);
    let cut = symbols::truncate_name(&name);
    assert!(cut.len() <= TRUNCATED_NAME_LEN);
    assert!(cut.ends_with("..."));
}

#[test]
fn patches_ksyms_in_the_elf_and_the_image_still_checks() {
    let t = TestElf::kernel();
    let mut elf = t.build();
    let patch = symbols::plan(&elf).unwrap();
    assert_eq!(patch.bytes.len(), 0x400);
    assert_eq!(patch.count, 5);
    assert_eq!(patch.address, BASE + 0x1100);
    patch.apply(&mut elf).unwrap();
    assert!(patch.summary().contains("5 symbols written"));

    // The section's bytes now decode, exactly as the kernel will read them.
    let at = patch.file_offset as usize;
    let area = &elf[at..at + 0x400];
    assert_eq!(ksyms_format::lookup(area, BASE + 0x90), Some(("kernel::main", 0x10)));
    assert_eq!(ksyms_format::lookup(area, BASE + 0x44), Some(("primary_entry", 4)));
    assert_eq!(ksyms_format::lookup(area, BASE + 0x1000), None);

    // objcopy of the patched ELF passes the checks, and carries the table.
    let mut patched = t;
    patched.segs[1].data[0x100..0x500].copy_from_slice(area);
    assert_eq!(patched.build(), elf);
    assert_eq!(failures_of(&patched), Vec::<&str>::new());

    // Running again is allowed and gives the same bytes.
    let again = symbols::plan(&elf).unwrap();
    assert_eq!(again, patch);
}

#[test]
fn area_is_bounded_by_the_object_at_the_section_start() {
    let mut t = TestElf::kernel();
    t.syms.push(sym(
        "_ZN6kernel7symbols5KSYMS17h0000000000000000E",
        BASE + 0x1100,
        0x200,
        STT_OBJECT,
        Some(2),
    ));
    assert_eq!(symbols::plan(&t.build()).unwrap().bytes.len(), 0x200);
}

#[test]
fn refuses_unsuitable_ksyms_sections() {
    // Missing.
    let mut t = TestElf::kernel();
    t.secs.retain(|s| s.name != ".ksyms");
    for s in &mut t.syms {
        s.section = s.section.map(|i| if i == 3 { 2 } else { i });
    }
    assert!(symbols::plan(&t.build()).unwrap_err().contains("no .ksyms"));
    // NOBITS.
    let mut t = TestElf::kernel();
    t.secs[2].nobits = true;
    assert!(symbols::plan(&t.build()).unwrap_err().contains("NOBITS"));
    // Writable.
    let mut t = TestElf::kernel();
    t.secs[2].flags |= SHF_WRITE;
    assert!(symbols::plan(&t.build()).unwrap_err().contains("read-only"));
    let mut t = TestElf::kernel();
    t.segs[1].flags |= PF_W;
    assert!(symbols::plan(&t.build()).unwrap_err().contains("writable segment"));
    // Holding something else.
    let mut t = TestElf::kernel();
    t.segs[1].data[0x180] = 1;
    assert!(symbols::plan(&t.build()).unwrap_err().contains("refusing"));
    // Too small for the table.
    let mut t = TestElf::kernel();
    t.secs[2].size = 0x40;
    let err = symbols::plan(&t.build()).unwrap_err();
    assert!(err.contains("bytes needed") && err.contains("64 bytes available"), "{err}");
    // No symbols at all: an empty table.
    let mut t = TestElf::kernel();
    t.syms.clear();
    assert_eq!(symbols::plan(&t.build()).unwrap().count, 0);
}
