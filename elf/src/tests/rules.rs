//! One test per rule of [`crate::parse`], on synthetic images.

use alloc::string::ToString;
use alloc::vec::Vec;

use crate::header::{ET_DYN, ET_EXEC, ProgramHeader, pf, pt};
use crate::property::NoteProblem;
use crate::tests::{BASE, LIMITS, check_sentence, exec, image, load, other, parse, simple};
use crate::{Limits, MAX_PHNUM, Refusal, load_span, parse_at};

fn set(bytes: &mut [u8], at: usize, value: &[u8]) {
    bytes[at..at + value.len()].copy_from_slice(value);
}

#[test]
fn the_simple_program_is_accepted() {
    let exe = parse(&exec(&simple())).unwrap();
    assert_eq!(exe.entry, BASE + 0x100);
    assert_eq!(exe.segments.len(), 2);
    assert_eq!(exe.phdr, BASE + 64, "the headers are in the first segment");
    assert_eq!(exe.exec_range, Some((BASE, BASE + 0x800)));
}

#[test]
fn every_length_shorter_than_the_elf_header_is_refused() {
    let good = exec(&simple());
    for len in 0..64 {
        assert_eq!(parse(&good[..len]), Err(Refusal::TooShort { len }));
    }
}

#[test]
fn the_identification_bytes_are_checked() {
    let good = exec(&simple());
    let mut bad = good.clone();
    bad[1] = b'e';
    assert_eq!(parse(&bad), Err(Refusal::NotElf));
    let mut bad = good.clone();
    bad[4] = 1;
    assert_eq!(parse(&bad), Err(Refusal::NotElf64 { class: 1 }));
    let mut bad = good.clone();
    bad[5] = 2;
    assert_eq!(parse(&bad), Err(Refusal::NotLittleEndian { data: 2 }));
    // Linux does not look at EI_VERSION, EI_OSABI or e_version: neither does the loader.
    let mut odd = good;
    odd[6] = 0;
    odd[7] = 3;
    set(&mut odd, 20, &0u32.to_le_bytes());
    assert!(parse(&odd).is_ok());
}

#[test]
fn only_et_exec_and_et_dyn_for_aarch64_are_executables() {
    for kind in [0u16, 1, 4, 0xfe00, 0xffff] {
        assert_eq!(parse(&image(kind, BASE, &simple(), 0x2000)), Err(Refusal::NotExecutable { kind }));
    }
    let mut x86 = exec(&simple());
    set(&mut x86, 18, &62u16.to_le_bytes());
    assert_eq!(parse(&x86), Err(Refusal::WrongMachine { machine: 62 }));
    assert!(Refusal::WrongMachine { machine: 62 }.to_string().contains("x86-64"));
}

#[test]
fn e_phentsize_must_be_the_size_of_a_program_header() {
    for size in [0u16, 1, 55, 57, 64, 0xffff] {
        let mut bad = exec(&simple());
        set(&mut bad, 54, &size.to_le_bytes());
        assert_eq!(parse(&bad), Err(Refusal::BadPhentsize { size }));
    }
}

#[test]
fn e_phnum_is_at_least_one_and_at_most_64_kib_of_headers() {
    assert_eq!(MAX_PHNUM, 1170);
    let mut none = exec(&simple());
    set(&mut none, 56, &0u16.to_le_bytes());
    assert_eq!(parse(&none), Err(Refusal::NoProgramHeaders));
    // 1170 headers (the two loads, then PT_NULLs) are read; 1171 are refused before reading.
    let mut phdrs = simple();
    phdrs.resize(MAX_PHNUM, other(0, 0, 0, 0));
    let mut most = image(ET_EXEC, BASE + 0x100, &phdrs, 0);
    // The first segment must not cover the (now long) table: it still holds the entry point.
    assert!(parse(&most).is_ok());
    most.resize(most.len() + 56, 0);
    set(&mut most, 56, &1171u16.to_le_bytes());
    assert_eq!(parse(&most), Err(Refusal::TooManyProgramHeaders { phnum: 1171 }));
    set(&mut most, 56, &0xffffu16.to_le_bytes());
    assert_eq!(parse(&most), Err(Refusal::TooManyProgramHeaders { phnum: 0xffff }));
}

#[test]
fn the_program_headers_may_be_anywhere_in_the_file_but_not_past_its_end() {
    let good = exec(&simple());
    // Moved to an odd offset (Linux reads them into a buffer: no alignment needed).
    let mut moved = good.clone();
    let table = good[64..64 + 112].to_vec();
    set(&mut moved, 0x1001, &table);
    set(&mut moved, 32, &0x1001u64.to_le_bytes());
    let exe = parse(&moved).unwrap();
    assert_eq!(exe.phdr, BASE + 0x1_1001, "the second PT_LOAD holds offset 0x1001");
    set(&mut moved, 0x1801, &table);
    set(&mut moved, 32, &0x1801u64.to_le_bytes());
    assert_eq!(parse(&moved).unwrap().phdr, 0, "no PT_LOAD holds offset 0x1801");
    for phoff in [good.len() as u64 - 111, good.len() as u64, u64::MAX, u64::MAX - 50, 1 << 63] {
        let mut bad = good.clone();
        set(&mut bad, 32, &phoff.to_le_bytes());
        assert_eq!(parse(&bad), Err(Refusal::HeadersOutsideFile { phoff, size: 112, len: good.len() }));
    }
    // Truncated inside the table.
    for len in 64..64 + 112 {
        assert!(matches!(parse(&good[..len]), Err(Refusal::HeadersOutsideFile { .. })), "{len}");
    }
}

#[test]
fn the_interpreter_is_read_as_linux_reads_it() {
    const LD: &[u8] = b"/lib/ld-linux-aarch64.so.1\0";
    let with_interp = |offset: u64, filesz: u64, text: &[u8]| {
        let mut phdrs = simple();
        phdrs.insert(0, other(pt::INTERP, pf::R, offset, filesz));
        let mut f = image(ET_DYN, 0x100, &phdrs, 0x2000);
        if (offset as usize) < f.len() {
            let end = (offset as usize + text.len()).min(f.len());
            f[offset as usize..end].copy_from_slice(&text[..end - offset as usize]);
        }
        f
    };
    let f = with_interp(0x200, LD.len() as u64, LD);
    let exe = parse(&f).unwrap();
    assert_eq!(exe.interp_path(&f), Some(&LD[..LD.len() - 1]), "the path, without its NUL");
    assert_eq!(
        exe.bias,
        0xaaaa_0000_0000 - BASE,
        "a dynamic PIE goes to pie_base, as Linux's ELF_ET_DYN_BASE"
    );
    // Two PT_INTERPs: the first counts.
    let mut phdrs = simple();
    phdrs.insert(0, other(pt::INTERP, pf::R, 0x200, LD.len() as u64));
    phdrs.insert(1, other(pt::INTERP, pf::R, 0x300, 5));
    let mut f = image(ET_DYN, 0x100, &phdrs, 0x2000);
    f[0x200..0x200 + LD.len()].copy_from_slice(LD);
    assert_eq!(parse(&f).unwrap().interp, Some((0x200, LD.len() - 1)));
    // Not NUL-terminated, too short, too long, outside the file.
    assert_eq!(parse(&with_interp(0x200, 5, b"/lib/")), Err(Refusal::BadInterpreter { size: 5 }));
    assert_eq!(parse(&with_interp(0x200, 1, b"\0")), Err(Refusal::BadInterpreter { size: 1 }));
    assert_eq!(parse(&with_interp(0x200, 4097, b"")), Err(Refusal::BadInterpreter { size: 4097 }));
    assert_eq!(
        parse(&with_interp(0x1ff0, 0x20, b"")),
        Err(Refusal::InterpreterOutsideFile { offset: 0x1ff0, size: 0x20 })
    );
    assert_eq!(
        parse(&with_interp(u64::MAX - 4, 10, b"")),
        Err(Refusal::InterpreterOutsideFile { offset: u64::MAX - 4, size: 10 })
    );
}

#[test]
fn an_interpreter_goes_where_the_kernel_found_room() {
    let phdrs = simple();
    let f = image(ET_DYN, 0x100, &phdrs, 0x2000);
    let (len, align) = load_span(&f, &LIMITS).unwrap();
    assert_eq!(len, 0x1_4000, "from the first page to the end of the bss, in pages");
    assert_eq!(align, 0x1_0000);
    let exe = parse_at(&f, &LIMITS, 0x7f00_0000).unwrap();
    assert_eq!(exe.segments[0].vaddr, 0x7f00_0000, "the lowest page at the base given");
    assert_eq!(exe.entry, 0x7f00_0000 - BASE + 0x100);
    assert_eq!(exe.interp, None);
    // An ET_EXEC interpreter stays where it is linked.
    let exe = parse_at(&exec(&phdrs), &LIMITS, 0x7f00_0000).unwrap();
    assert_eq!(exe.segments[0].vaddr, BASE);
}

#[test]
fn pt_gnu_stack_decides_the_stack_and_the_last_one_counts() {
    let mut phdrs = simple();
    phdrs.push(other(pt::GNU_STACK, pf::R | pf::W, 0, 0));
    assert!(!parse(&exec(&phdrs)).unwrap().exec_stack);
    phdrs.push(other(pt::GNU_STACK, pf::R | pf::W | pf::X, 0, 0));
    assert_eq!(parse(&exec(&phdrs)), Err(Refusal::ExecutableStack), "W^X");
    let relaxed = Limits { w_xor_x: false, ..LIMITS };
    assert!(crate::parse(&exec(&phdrs), &relaxed).unwrap().exec_stack);
    phdrs.push(other(pt::GNU_STACK, pf::R | pf::W, 0, 0));
    assert!(!crate::parse(&exec(&phdrs), &relaxed).unwrap().exec_stack);
    // No PT_GNU_STACK: not executable (arm64 has no READ_IMPLIES_EXEC for 64-bit programs).
    assert!(!crate::parse(&exec(&simple()), &relaxed).unwrap().exec_stack);
}

/// A program with a PT_GNU_PROPERTY over `note`, placed at offset 0x900.
fn with_note(note: &[u8], filesz: u64) -> Vec<u8> {
    let mut phdrs = simple();
    phdrs.push(other(pt::GNU_PROPERTY, pf::R, 0x900, filesz));
    let mut f = exec(&phdrs);
    set(&mut f, 0x900, note);
    f
}

fn note(descsz: u32, properties: &[(u32, &[u8])]) -> Vec<u8> {
    let mut n = Vec::new();
    n.extend_from_slice(&4u32.to_le_bytes());
    n.extend_from_slice(&descsz.to_le_bytes());
    n.extend_from_slice(&5u32.to_le_bytes());
    n.extend_from_slice(b"GNU\0");
    for (kind, data) in properties {
        n.extend_from_slice(&kind.to_le_bytes());
        n.extend_from_slice(&(data.len() as u32).to_le_bytes());
        n.extend_from_slice(data);
        n.resize(n.len().next_multiple_of(8), 0);
    }
    n
}

#[test]
fn the_property_note_is_read_as_linux_reads_it() {
    let bti = 0xc000_0000u32;
    let good = note(16, &[(bti, &1u32.to_le_bytes())]);
    assert_eq!(parse(&with_note(&good, good.len() as u64)).unwrap().aarch64_features, 1);
    // Other properties are skipped; their order is still checked.
    let two = note(32, &[(1, &[0; 8]), (bti, &3u32.to_le_bytes())]);
    assert_eq!(parse(&with_note(&two, two.len() as u64)).unwrap().aarch64_features, 3);
    let unsorted = note(32, &[(bti, &1u32.to_le_bytes()), (1, &[0; 8])]);
    let refused = |n: &[u8], filesz: u64| match parse(&with_note(n, filesz)) {
        Err(Refusal::PropertyNote(p)) => p,
        other => panic!("{other:?}"),
    };
    assert_eq!(refused(&unsorted, 48), NoteProblem::Unsorted(1));
    assert_eq!(refused(&good, 1025), NoteProblem::TooLarge(1025));
    assert_eq!(refused(&good, 15), NoteProblem::Short(15));
    let mut named = good.clone();
    named[15] = b'X';
    assert_eq!(refused(&named, 32), NoteProblem::NotGnuProperty);
    let mut typed = good.clone();
    typed[8] = 1;
    assert_eq!(refused(&typed, 32), NoteProblem::NotGnuProperty);
    assert_eq!(refused(&note(17, &[(bti, &1u32.to_le_bytes())]), 32), NoteProblem::DescriptorTooLong(17));
    assert_eq!(refused(&note(12, &[(bti, &1u32.to_le_bytes())]), 32), NoteProblem::PropertyTooLong);
    assert_eq!(refused(&note(4, &[]), 32), NoteProblem::PropertyTooLong);
    assert_eq!(refused(&note(16, &[(bti, &[1, 0, 0, 0, 0, 0, 0, 0])]), 32), NoteProblem::BadFeatureSize(8));
    // An empty descriptor is a note without properties.
    assert_eq!(parse(&with_note(&note(0, &[]), 16)).unwrap().aarch64_features, 0);
    // A note past the end of the file is a short read.
    let mut phdrs = simple();
    phdrs.push(other(pt::GNU_PROPERTY, pf::R, 0x1ff8, 32));
    assert!(matches!(parse(&exec(&phdrs)), Err(Refusal::PropertyNote(NoteProblem::Short(8)))));
    phdrs.last_mut().unwrap().offset = u64::MAX;
    assert!(matches!(parse(&exec(&phdrs)), Err(Refusal::PropertyNote(NoteProblem::Short(0)))));
}

#[test]
fn file_bytes_must_be_congruent_to_their_address_modulo_the_page_size() {
    let mut phdrs = simple();
    phdrs[1].offset = 0x1008;
    assert_eq!(
        parse(&exec(&phdrs)),
        Err(Refusal::NotCongruent { index: 1, vaddr: BASE + 0x1_1000, offset: 0x1008 })
    );
    // p_align is not looked at: congruent modulo 4 KiB, not modulo the 64 KiB p_align, is fine.
    phdrs[1].offset = 0x1000;
    phdrs[1].vaddr = BASE + 0x1_2000;
    assert!(parse(&exec(&phdrs)).is_ok());
}

/// With pages larger than a PT_LOAD's `p_align` (a program linked with `-z max-page-size=4096`
/// on a 64 KiB kernel), a segment that cannot be mapped is refused as linked for smaller pages,
/// naming the alignment; one that happens to fit loads, whatever its `p_align`, as on Linux.
#[test]
fn a_program_linked_for_smaller_pages_is_named_as_such() {
    let k64 = Limits { page_size: 0x1_0000, ..LIMITS };
    let parse64 = |phdrs: &[crate::header::ProgramHeader]| crate::parse(&exec(phdrs), &k64);
    // GNU ld with -z max-page-size=4096: data at offset 0x1000 and address 0x2000 past a
    // 64 KiB line, congruent modulo 4 KiB only.
    let mut phdrs = simple();
    phdrs[1].vaddr = BASE + 0x1_2000;
    for ph in &mut phdrs {
        ph.align = 0x1000;
    }
    assert!(parse(&exec(&phdrs)).is_ok(), "loads with 4 KiB pages");
    let refusal = parse64(&phdrs).unwrap_err();
    assert_eq!(refusal, Refusal::LinkedForSmallerPages { index: 1, align: 0x1000, page: 0x1_0000 });
    assert_eq!(check_sentence(&refusal.to_string()), Ok(()));
    assert!(refusal.to_string().contains("less than this kernel's 64 KiB pages"), "{refusal}");
    assert!(refusal.to_string().contains("-z max-page-size=65536"), "{refusal}");
    // The same layout with p_align 64 KiB: the plain congruence refusal (the file lies).
    for ph in &mut phdrs {
        ph.align = 0x1_0000;
    }
    assert_eq!(
        parse64(&phdrs),
        Err(Refusal::NotCongruent { index: 1, vaddr: BASE + 0x1_2000, offset: 0x1000 })
    );
    // p_align 0 or 1 means "no constraint": not a claim about pages either.
    for ph in &mut phdrs {
        ph.align = 1;
    }
    assert!(matches!(parse64(&phdrs), Err(Refusal::NotCongruent { index: 1, .. })));
    // Congruent modulo 64 KiB, but both segments in one 64 KiB page: shared, and 4 KiB-aligned.
    let mut phdrs = simple();
    phdrs[1].offset = 0x1000;
    phdrs[1].vaddr = BASE + 0x1000;
    for ph in &mut phdrs {
        ph.align = 0x1000;
    }
    assert!(parse(&exec(&phdrs)).is_ok(), "loads with 4 KiB pages");
    assert_eq!(
        parse64(&phdrs),
        Err(Refusal::LinkedForSmallerPages { index: 0, align: 0x1000, page: 0x1_0000 })
    );
    // A 4 KiB p_align whose segments fit 64 KiB pages loads (Linux does not read p_align).
    let mut phdrs = simple();
    phdrs[1].offset = 0x1_1000;
    for ph in &mut phdrs {
        ph.align = 0x1000;
    }
    assert!(crate::parse(&image(ET_EXEC, BASE + 0x100, &phdrs, 0x1_2000), &k64).is_ok());
}

#[test]
fn a_segment_without_file_bytes_may_have_any_offset() {
    for offset in [0x2000, 0x1_0000, u64::MAX, 0x1234_5678_9abc_def1] {
        let mut phdrs = simple();
        phdrs[1].filesz = 0;
        phdrs[1].offset = offset;
        let exe = parse(&exec(&phdrs)).unwrap();
        assert_eq!((exe.segments[1].filesz, exe.segments[1].offset), (0, 0), "{offset:#x}");
    }
}

#[test]
fn file_bytes_must_be_inside_the_file() {
    let mut phdrs = simple();
    phdrs[1].filesz = 0x1001;
    let f = exec(&phdrs);
    assert_eq!(
        parse(&f),
        Err(Refusal::FileBytesOutsideFile { index: 1, offset: 0x1000, filesz: 0x1001, len: 0x2000 })
    );
    phdrs[1].filesz = 0x1000;
    assert!(parse(&exec(&phdrs)).is_ok(), "up to the last byte");
    phdrs[1].offset = u64::MAX - 0xfff;
    phdrs[1].vaddr = BASE + 0x1_1000;
    assert!(
        matches!(parse(&exec(&phdrs)), Err(Refusal::FileBytesOutsideFile { .. })),
        "offset + filesz wraps"
    );
}

#[test]
fn p_filesz_must_not_exceed_p_memsz() {
    let mut phdrs = simple();
    phdrs[1].memsz = 0x80;
    assert_eq!(
        parse(&exec(&phdrs)),
        Err(Refusal::FileLargerThanMemory { index: 1, filesz: 0x100, memsz: 0x80 })
    );
}

#[test]
fn segments_must_lie_in_the_user_range() {
    let top = LIMITS.task_size;
    let at = |vaddr: u64, memsz: u64| {
        let mut phdrs = simple();
        phdrs[1] = load(0x1000, vaddr, 0, memsz, pf::R | pf::W);
        parse(&exec(&phdrs))
    };
    assert!(at(top - 0x1000, 0x1000).is_ok(), "the last page");
    for (vaddr, memsz) in [
        (top - 0x1000, 0x1001),
        (top, 1),
        (top, 0), // Linux: BAD_ADDR(p_vaddr), even for an empty segment
        (u64::MAX - 0xfff, 0x1000),
        (0x1000, u64::MAX),
        (0x2_0000, u64::MAX - 0x1_0000),
        (0x8000, 0x1000), // below mmap_min_addr
        (0xffff, 2),
    ] {
        assert!(
            matches!(at(vaddr, memsz), Err(Refusal::OutsideUserRange { index: 1, .. })),
            "{vaddr:#x} {memsz:#x}"
        );
    }
    // An empty segment below mmap_min_addr maps nothing: Linux does not refuse it.
    let exe = at(0x1000, 0).unwrap();
    assert_eq!(exe.segments.len(), 1, "empty segments are not reported");
}

#[test]
fn a_static_pie_goes_to_the_pie_base_aligned_to_its_largest_p_align() {
    let pie = |align: u64, first: u64| {
        let mut phdrs = simple();
        for ph in &mut phdrs {
            ph.vaddr = ph.vaddr - BASE + first;
            ph.align = align;
        }
        parse(&image(ET_DYN, first + 0x100, &phdrs, 0x2000))
    };
    let exe = pie(0x1_0000, 0).unwrap();
    assert_eq!(
        (exe.bias, exe.entry, exe.segments[0].vaddr),
        (LIMITS.pie_base, LIMITS.pie_base + 0x100, LIMITS.pie_base)
    );
    assert_eq!(exe.phdr, LIMITS.pie_base + 64);
    assert_eq!(pie(1 << 36, 0).unwrap().bias, LIMITS.pie_base & !((1 << 36) - 1));
    assert_eq!(
        pie(3 << 20, 0).unwrap().bias,
        LIMITS.pie_base,
        "a p_align that is not a power of two is ignored"
    );
    // Linked high: the bias is negative, in Linux's wrapping arithmetic.
    let exe = pie(0x1000, 0xc000_0000_0000).unwrap();
    assert_eq!(exe.segments[0].vaddr, LIMITS.pie_base);
    assert_eq!(exe.entry, LIMITS.pie_base + 0x100);
    // Linux also checks the unbiased address: a PIE linked above TASK_SIZE is refused.
    assert!(matches!(pie(0x1000, 0xffff_0000_0000_0000), Err(Refusal::OutsideUserRange { .. })));
    // An alignment of 2^63 puts the PIE at 0 - its first page, below mmap_min_addr.
    assert!(matches!(pie(1 << 63, 0), Err(Refusal::OutsideUserRange { bias: 0, .. })));
}

#[test]
fn a_static_pie_whose_loads_span_nothing_is_refused() {
    let phdrs = [load(0, 0x1_0000, 0, 0, pf::R | pf::X)];
    assert_eq!(parse(&image(ET_DYN, 0x1_0000, &phdrs, 0x1000)), Err(Refusal::EmptySpan));
}

#[test]
fn a_file_with_nothing_to_load_is_refused() {
    let phdrs = [other(pt::GNU_STACK, pf::R | pf::W, 0, 0)];
    assert_eq!(parse(&exec(&phdrs)), Err(Refusal::NothingToLoad));
    assert_eq!(parse(&image(ET_DYN, 0, &phdrs, 0x1000)), Err(Refusal::NothingToLoad));
    let empty = [load(0, BASE, 0, 0, pf::R | pf::X)];
    assert_eq!(parse(&exec(&empty)), Err(Refusal::NothingToLoad));
}

#[test]
fn w_xor_x_and_permissionless_segments() {
    let mut phdrs = simple();
    phdrs[1].flags = pf::R | pf::W | pf::X;
    assert_eq!(
        parse(&exec(&phdrs)),
        Err(Refusal::WritableAndExecutable { index: 1, vaddr: BASE + 0x1_1000 })
    );
    phdrs[1].flags = 0;
    assert_eq!(parse(&exec(&phdrs)), Err(Refusal::NoPermissions { index: 1, vaddr: BASE + 0x1_1000 }));
    phdrs[1].flags = pf::X; // execute-only is a permission
    assert!(parse(&exec(&phdrs)).is_ok());
}

#[test]
fn two_segments_may_not_share_a_page() {
    let mut phdrs = simple();
    phdrs[1].vaddr = BASE + 0x800;
    phdrs[1].offset = 0x800;
    assert_eq!(parse(&exec(&phdrs)), Err(Refusal::SharedPage { first: 0, second: 1, page: BASE }));
    // Adjacent pages are fine, in any order.
    let mut phdrs = simple();
    phdrs[1].vaddr = BASE + 0x1000;
    phdrs.swap(0, 1);
    assert!(parse(&exec(&phdrs)).is_ok());
    // A segment inside another.
    let mut phdrs = simple();
    phdrs.push(load(0, BASE + 0x1_2000, 0, 0x10, pf::R));
    assert_eq!(parse(&exec(&phdrs)), Err(Refusal::SharedPage { first: 1, second: 2, page: BASE + 0x1_2000 }));
}

#[test]
fn the_entry_point_must_be_a_user_address_and_nothing_more() {
    let phdrs = simple();
    // Linux checks only BAD_ADDR(e_entry): outside every segment, it loads and faults at once.
    for entry in [0, 0x1_0000, BASE + 0x1_1000, LIMITS.task_size - 1] {
        assert_eq!(parse(&image(ET_EXEC, entry, &phdrs, 0x2000)).unwrap().entry, entry);
    }
    for entry in [LIMITS.task_size, u64::MAX] {
        assert_eq!(parse(&image(ET_EXEC, entry, &phdrs, 0x2000)), Err(Refusal::EntryOutside { entry }));
    }
}

#[test]
fn at_phdr_comes_from_the_load_holding_the_table() {
    let mut phdrs = simple();
    phdrs[0].offset = 0x1000; // the first segment no longer holds offset 64
    phdrs[0].filesz = 0x800;
    phdrs[1].offset = 0;
    phdrs[1].vaddr = BASE + 0x1_0000;
    let exe = parse(&exec(&phdrs)).unwrap();
    assert_eq!(exe.phdr, BASE + 0x1_0000 + 64);
}

#[test]
fn every_refusal_is_one_sentence() {
    let mut all: Vec<Refusal> = alloc::vec![
        Refusal::TooShort { len: 3 },
        Refusal::NotElf,
        Refusal::NotElf64 { class: 1 },
        Refusal::NotLittleEndian { data: 2 },
        Refusal::WrongMachine { machine: 62 },
        Refusal::WrongMachine { machine: 0xffff },
        Refusal::BadPhentsize { size: 0 },
        Refusal::NoProgramHeaders,
        Refusal::TooManyProgramHeaders { phnum: 0xffff },
        Refusal::HeadersOutsideFile { phoff: u64::MAX, size: 65520, len: usize::MAX },
        Refusal::BadInterpreter { size: u64::MAX },
        Refusal::InterpreterOutsideFile { offset: u64::MAX, size: u64::MAX },
        Refusal::NotCongruent { index: 1169, vaddr: u64::MAX, offset: u64::MAX },
        Refusal::FileBytesOutsideFile { index: 1169, offset: u64::MAX, filesz: u64::MAX, len: usize::MAX },
        Refusal::FileLargerThanMemory { index: 1169, filesz: u64::MAX, memsz: u64::MAX },
        Refusal::OutsideUserRange {
            index: 1169,
            vaddr: u64::MAX,
            memsz: u64::MAX,
            bias: u64::MAX,
            min: 1,
            end: 2
        },
        Refusal::OutsideUserRange { index: 0, vaddr: 0, memsz: 0, bias: 0, min: 1, end: 2 },
        Refusal::EmptySpan,
        Refusal::NothingToLoad,
        Refusal::OutOfMemory,
        Refusal::WritableAndExecutable { index: 1169, vaddr: u64::MAX },
        Refusal::ExecutableStack,
        Refusal::NoPermissions { index: 1169, vaddr: u64::MAX },
        Refusal::SharedPage { first: 1168, second: 1169, page: u64::MAX },
        Refusal::LinkedForSmallerPages { index: 1169, align: 0x1000, page: 0x1_0000 },
        Refusal::EntryOutside { entry: u64::MAX },
    ];
    for kind in [0, 1, 4, 0xffff] {
        all.push(Refusal::NotExecutable { kind });
    }
    for p in [
        NoteProblem::TooLarge(u64::MAX),
        NoteProblem::Short(0),
        NoteProblem::NotGnuProperty,
        NoteProblem::DescriptorTooLong(u32::MAX),
        NoteProblem::PropertyTooLong,
        NoteProblem::Unsorted(u32::MAX),
        NoteProblem::BadFeatureSize(u32::MAX),
    ] {
        all.push(Refusal::PropertyNote(p));
    }
    for r in all {
        check_sentence(&r.to_string()).unwrap();
    }
}

#[test]
fn a_header_program_table_entry_decodes_every_field() {
    let ph = ProgramHeader { kind: 1, flags: 5, offset: 2, vaddr: 3, filesz: 4, memsz: 5, align: 6 };
    let f = image(ET_EXEC, 0, &[ph], 0);
    assert_eq!(ProgramHeader::read(&f[64..]), Some(ph));
    assert_eq!(ProgramHeader::read(&f[65..]), None, "55 bytes");
}
