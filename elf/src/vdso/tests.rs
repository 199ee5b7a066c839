//! The image read back as the loaders read it: musl's and Go's symbol lookup (hash chain, type,
//! binding, section, version by index, name and hash), glibc's load bias from the first
//! `PT_LOAD`, and the crate's own loader parsing it as a position-independent object.
use super::*;
use crate::header::{FileHeader, ProgramHeader, u16_at, u32_at, u64_at};

const CLOCK_GETTIME: &str = "__kernel_clock_gettime";
const SIGRETURN: &str = "__kernel_rt_sigreturn";

fn image() -> (alloc::vec::Vec<u8>, Layout, alloc::vec::Vec<u8>) {
    let text: alloc::vec::Vec<u8> = (0..96u8).collect();
    let symbols = [
        Symbol { name: CLOCK_GETTIME, offset: 0, size: 32 },
        Symbol { name: "__kernel_gettimeofday", offset: 32, size: 16 },
        Symbol { name: "__kernel_clock_getres", offset: 48, size: 32 },
        Symbol { name: SIGRETURN, offset: 88, size: 8 },
    ];
    let mut buf = alloc::vec![0u8; 4096];
    let layout = write(&mut buf, &text, &symbols, 0x06_01_00).unwrap();
    (buf, layout, text)
}

/// The dynamic entry `tag`'s value.
fn dynamic(img: &[u8], tag: u64) -> Option<u64> {
    let eh = FileHeader::read(img)?;
    let dynamic = (0..eh.phnum as usize)
        .filter_map(|i| ProgramHeader::read(&img[eh.phoff as usize + i * 56..]))
        .find(|p| p.kind == PT_DYNAMIC)?;
    let mut at = dynamic.offset as usize;
    loop {
        let t = u64_at(img, at)?;
        if t == DT_NULL {
            return None;
        }
        if t == tag {
            return u64_at(img, at + 8);
        }
        at += 16;
    }
}

fn cstr(img: &[u8], at: usize) -> &[u8] {
    let end = img[at..].iter().position(|&b| b == 0).unwrap();
    &img[at..at + end]
}

/// Looks `name` up as Go's `vdsoParseSymbols` and musl's `__vdsosym` do: through the hash
/// chain of its bucket, a global function with a section, whose version (by its `versym`
/// index, in a non-base definition) is `version` with the matching hash. The symbol's value.
fn lookup(img: &[u8], name: &str, version: &str) -> Option<u64> {
    let hash = dynamic(img, DT_HASH)? as usize;
    let symtab = dynamic(img, DT_SYMTAB)? as usize;
    let strtab = dynamic(img, DT_STRTAB)? as usize;
    let versym = dynamic(img, DT_VERSYM)? as usize;
    let verdef = dynamic(img, DT_VERDEF)? as usize;
    let nbucket = u32_at(img, hash)?;
    let mut i = u32_at(img, hash + 8 + 4 * (elf_hash(name.as_bytes()) % nbucket) as usize)?;
    while i != 0 {
        let s = symtab + i as usize * SYM_SIZE;
        let info = img[s + 4];
        let shndx = u16_at(img, s + 6)?;
        if cstr(img, strtab + u32_at(img, s)? as usize) == name.as_bytes() && info == 0x12 && shndx != 0 {
            let ver = u16_at(img, versym + 2 * i as usize)? & 0x7fff;
            let mut d = verdef;
            loop {
                let flags = u16_at(img, d + 2)?;
                if flags & VER_FLG_BASE == 0 && u16_at(img, d + 4)? & 0x7fff == ver {
                    let aux = d + u32_at(img, d + 12)? as usize;
                    let vname = cstr(img, strtab + u32_at(img, aux)? as usize);
                    let ok =
                        vname == version.as_bytes() && u32_at(img, d + 8)? == elf_hash(version.as_bytes());
                    return ok.then(|| u64_at(img, s + 8)).flatten();
                }
                let next = u32_at(img, d + 16)?;
                if next == 0 {
                    return None;
                }
                d += next as usize;
            }
        }
        i = u32_at(img, hash + 8 + 4 * nbucket as usize + 4 * i as usize)?;
    }
    None
}

#[test]
fn the_version_hash_is_the_one_go_carries() {
    // Go's runtime/vdso_linux_arm64.go: vdsoVersionKey{"LINUX_2.6.39", 0x75fcb89}.
    assert_eq!(elf_hash(VERSION.as_bytes()), 0x75f_cb89);
}

#[test]
fn every_function_is_found_by_name_and_version_at_its_text_offset() {
    let (img, layout, text) = image();
    assert_eq!(lookup(&img, CLOCK_GETTIME, VERSION), Some(layout.text as u64));
    assert_eq!(lookup(&img, "__kernel_gettimeofday", VERSION), Some(layout.text as u64 + 32));
    assert_eq!(lookup(&img, "__kernel_clock_getres", VERSION), Some(layout.text as u64 + 48));
    assert_eq!(lookup(&img, SIGRETURN, VERSION), Some(layout.text as u64 + 88));
    assert_eq!(&img[layout.text..layout.text + text.len()], &text[..]);
    // Not under another version, and no other name.
    assert_eq!(lookup(&img, CLOCK_GETTIME, "LINUX_2.6"), None);
    assert_eq!(lookup(&img, "__kernel_time", VERSION), None);
}

#[test]
fn the_soname_and_the_linux_note_are_there() {
    let (img, _, _) = image();
    let strtab = dynamic(&img, DT_STRTAB).unwrap() as usize;
    let soname = dynamic(&img, DT_SONAME).unwrap() as usize;
    assert_eq!(cstr(&img, strtab + soname), SONAME.as_bytes());
    let eh = FileHeader::read(&img).unwrap();
    let note = (0..eh.phnum as usize)
        .filter_map(|i| ProgramHeader::read(&img[eh.phoff as usize + i * 56..]))
        .find(|p| p.kind == PT_NOTE)
        .unwrap();
    let n = note.offset as usize;
    assert_eq!((u32_at(&img, n), u32_at(&img, n + 4), u32_at(&img, n + 8)), (Some(6), Some(4), Some(0)));
    assert_eq!(cstr(&img, n + 12), b"Linux");
    assert_eq!(u32_at(&img, n + 20), Some(0x06_01_00));
}

#[test]
fn one_read_execute_segment_from_zero_holds_everything_loaded() {
    let (img, layout, text) = image();
    let eh = FileHeader::read(&img).unwrap();
    assert_eq!((eh.kind, eh.machine), (crate::header::ET_DYN, crate::header::EM_AARCH64));
    let phdrs: alloc::vec::Vec<_> = (0..eh.phnum as usize)
        .map(|i| ProgramHeader::read(&img[eh.phoff as usize + i * 56..]).unwrap())
        .collect();
    let loads: alloc::vec::Vec<_> = phdrs.iter().filter(|p| p.kind == PT_LOAD).collect();
    assert_eq!(loads.len(), 1);
    // glibc's setup_vdso: l_addr = the mapping's start - the first PT_LOAD's p_vaddr.
    assert_eq!((loads[0].offset, loads[0].vaddr, loads[0].flags), (0, 0, 5));
    assert!(loads[0].filesz as usize >= layout.text + text.len());
    for p in &phdrs {
        assert!(p.offset + p.filesz <= loads[0].filesz, "{p:?} outside the loaded part");
        assert_eq!(p.offset, p.vaddr, "linked at 0: addresses are offsets");
    }
    // The crate's loader takes it as a position-independent object with no interpreter.
    let limits = crate::Limits {
        page_size: 4096,
        min_addr: 0x1000,
        task_size: 1 << 48,
        pie_base: 0x5555_0000_0000,
        w_xor_x: true,
    };
    let exe = crate::parse(&img, &limits).unwrap();
    assert!(exe.pie);
    assert_eq!(exe.segments.len(), 1);
    assert!(exe.segments[0].prot.exec && !exe.segments[0].prot.write);
}

#[test]
fn too_small_a_buffer_or_a_symbol_past_the_text_is_refused() {
    let text = [0u8; 16];
    let sym = [Symbol { name: "f", offset: 8, size: 16 }];
    assert_eq!(write(&mut [0u8; 4096], &text, &sym, 0), Err(WriteError::SymbolOutsideText));
    let sym = [Symbol { name: "f", offset: 0, size: 16 }];
    assert_eq!(write(&mut [0u8; 256], &text, &sym, 0), Err(WriteError::TooSmall));
    let used = write(&mut [0u8; 4096], &text, &sym, 0).unwrap().len;
    assert!(used <= 4096);
    let many: alloc::vec::Vec<_> =
        (0..16).map(|_| Symbol { name: "__kernel_a_long_name_", offset: 0, size: 16 }).collect();
    assert_eq!(write(&mut [0u8; 4096], &text, &many, 0), Err(WriteError::TablesTooLarge));
}
