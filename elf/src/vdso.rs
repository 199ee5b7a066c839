//! The vDSO's ELF image, written around code the kernel assembled: the one ELF file this crate
//! writes rather than reads.
//!
//! A vDSO is a position-independent shared object the kernel maps into every process, whose
//! functions C libraries and the Go runtime look up by name and version and call instead of
//! making a system call. What those loaders read of it (glibc's `setup_vdso` and `dl_vdso_vsym`,
//! musl's `__vdsosym`, Go's `vdsoInitFromSysinfoEhdr`): the ELF header; the program headers
//! (the first `PT_LOAD` gives the load bias, `PT_DYNAMIC` the dynamic section); in the dynamic
//! section `DT_HASH` (every one of them takes the SysV hash table; Linux's arm64 vDSO is linked
//! with `--hash-style=sysv` and has no `DT_GNU_HASH`), `DT_SYMTAB`, `DT_STRTAB`, `DT_VERSYM`,
//! `DT_VERDEF` and `DT_SONAME`; the symbols must be global functions with a section index, and
//! each symbol's version must be `LINUX_2.6.39`, named and hashed (Go compares `vd_hash` with
//! the ELF hash it carries) in a version definition that is not the base one. This module writes
//! exactly that, laid out as Linux's `arch/arm64/kernel/vdso/vdso.lds.S` lays it out: one
//! read-and-execute `PT_LOAD` from address 0 holding the headers, the tables and the text, a
//! `PT_DYNAMIC` and a `PT_NOTE` (the `Linux` note with the kernel's version code), section
//! headers so that `readelf` and debuggers can name the parts. There are no relocations: the
//! code reaches its data page PC-relatively, at a fixed distance below the image.
//!
//! There is no `PT_GNU_EH_FRAME`. Unwinding through a signal frame (glibc's `backtrace`, a C++
//! exception thrown from a handler) uses libgcc's unwinder, which finds no FDE for the return
//! address `__kernel_rt_sigreturn` and then recognises the frame by its two instructions
//! (`mov x8, #139; svc #0`, `aarch64_fallback_frame_state` in libgcc's `linux-unwind.h`), the
//! same instructions Linux's `sigreturn.S` has; the return address points at them exactly.
//!
//! Why written here, at boot, and not linked by a toolchain: the kernel's build has no C compiler
//! or linker for a shared object of its own, and the integrated assembler (`global_asm!`)
//! assembles the code but cannot emit a separate ELF file. So the kernel assembles the code into
//! its image, and this writer, a pure function of the code's bytes and its symbols' offsets,
//! puts the ELF structure around it; being a plain function, it is host-tested (a parser reads
//! back every table it writes) where the assembly is not.

/// The version every symbol has (Linux's `vdso.lds.S`: `VERSION { LINUX_2.6.39 { ... } }`).
pub const VERSION: &str = "LINUX_2.6.39";

/// The shared object's name (`DT_SONAME`, and the base version definition's).
pub const SONAME: &str = "linux-vdso.so.1";

/// Where the text begins in the image, after the headers and tables: fixed, because the code
/// finds its data page at a fixed distance from itself (the page below the image).
pub const TEXT_OFFSET: usize = 0x400;

/// One function of the image: its name and its bytes' range in the text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Symbol<'a> {
    /// The symbol's name.
    pub name: &'a str,
    /// Offset of its first instruction in the text.
    pub offset: usize,
    /// Its size in bytes.
    pub size: usize,
}

/// Where the parts of an image went.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Layout {
    /// Offset (and address) of the text in the image: [`TEXT_OFFSET`].
    pub text: usize,
    /// Bytes used; the rest of the buffer stays zero.
    pub len: usize,
}

/// Why no image was written.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum WriteError {
    /// The buffer is smaller than the image.
    TooSmall,
    /// A symbol lies outside the text.
    SymbolOutsideText,
    /// The headers and tables do not fit below [`TEXT_OFFSET`] (too many symbols).
    TablesTooLarge,
}

/// The SysV ELF hash (the System V ABI's `elf_hash`): `DT_HASH` buckets and `vd_hash`.
pub const fn elf_hash(name: &[u8]) -> u32 {
    let mut h: u32 = 0;
    let mut i = 0;
    while i < name.len() {
        h = (h << 4).wrapping_add(name[i] as u32);
        let g = h & 0xf000_0000;
        if g != 0 {
            h ^= g >> 24;
        }
        h &= !g;
        i += 1;
    }
    h
}

// ELF constants this writer uses (the System V ABI's and the GNU versioning extension's).
const PT_LOAD: u32 = 1;
const PT_DYNAMIC: u32 = 2;
const PT_NOTE: u32 = 4;
const DT_NULL: u64 = 0;
const DT_HASH: u64 = 4;
const DT_STRTAB: u64 = 5;
const DT_SYMTAB: u64 = 6;
const DT_STRSZ: u64 = 10;
const DT_SYMENT: u64 = 11;
const DT_SONAME: u64 = 14;
const DT_VERSYM: u64 = 0x6fff_fff0;
const DT_VERDEF: u64 = 0x6fff_fffc;
const DT_VERDEFNUM: u64 = 0x6fff_fffd;
const SHT_PROGBITS: u32 = 1;
const SHT_STRTAB: u32 = 3;
const SHT_HASH: u32 = 5;
const SHT_DYNAMIC: u32 = 6;
const SHT_NOTE: u32 = 7;
const SHT_DYNSYM: u32 = 11;
const SHT_GNU_VERDEF: u32 = 0x6fff_fffd;
const SHT_GNU_VERSYM: u32 = 0x6fff_ffff;
const SHF_ALLOC: u64 = 2;
const SHF_EXECINSTR: u64 = 4;
const STB_GLOBAL_STT_FUNC: u8 = 0x12;
const VER_FLG_BASE: u16 = 1;
/// The version index of [`VERSION`] (1 is the base version, the object itself).
const VERSION_INDEX: u16 = 2;
const SYM_SIZE: usize = 24;
const DYN_SIZE: usize = 16;
const SHDR_SIZE: usize = 64;
const VERDEF_SIZE: usize = 20;
const VERDAUX_SIZE: usize = 8;

/// A little-endian writer into a buffer whose size was checked beforehand.
struct Out<'a> {
    buf: &'a mut [u8],
}

impl Out<'_> {
    fn put(&mut self, at: usize, bytes: &[u8]) {
        self.buf[at..at + bytes.len()].copy_from_slice(bytes);
    }
    fn u16(&mut self, at: usize, v: u16) {
        self.put(at, &v.to_le_bytes());
    }
    fn u32(&mut self, at: usize, v: u32) {
        self.put(at, &v.to_le_bytes());
    }
    fn u64(&mut self, at: usize, v: u64) {
        self.put(at, &v.to_le_bytes());
    }
}

/// A section header's fields: type, flags, offset, size, link, info, alignment, entry size.
type SectionHeader = (u32, u64, usize, usize, u32, u32, u64, u64);

/// The section names, each NUL-terminated, in `.shstrtab`.
const SECTION_NAMES: &[&str] = &[
    "",
    ".hash",
    ".dynsym",
    ".dynstr",
    ".gnu.version",
    ".gnu.version_d",
    ".note",
    ".dynamic",
    ".text",
    ".shstrtab",
];
/// The index of `.text` among them (the symbols' `st_shndx`).
const TEXT_SECTION: u16 = 8;

/// Writes the image into `buf` (zeroed by the caller): headers and tables, then `text` at
/// [`TEXT_OFFSET`], its `symbols` all with [`VERSION`], and a `Linux` note
/// holding `version_code` (`LINUX_VERSION_CODE`).
///
/// # Errors
///
/// [`WriteError::TooSmall`] when the image does not fit in `buf`;
/// [`WriteError::SymbolOutsideText`] for a symbol not inside `text`;
/// [`WriteError::TablesTooLarge`] when the symbols' tables reach [`TEXT_OFFSET`].
pub fn write(
    buf: &mut [u8],
    text: &[u8],
    symbols: &[Symbol<'_>],
    version_code: u32,
) -> Result<Layout, WriteError> {
    if symbols.iter().any(|s| s.offset.checked_add(s.size).is_none_or(|end| end > text.len())) {
        return Err(WriteError::SymbolOutsideText);
    }
    let nsyms = symbols.len() + 1;
    // The string table: "", the soname, the version, then the symbols' names.
    let strtab_len =
        1 + SONAME.len() + 1 + VERSION.len() + 1 + symbols.iter().map(|s| s.name.len() + 1).sum::<usize>();
    let shstrtab_len: usize = SECTION_NAMES.iter().map(|n| n.len() + 1).sum();
    const PHNUM: usize = 3;
    let hash = 64 + PHNUM * 56;
    let hash_len = 4 * (2 + 1 + nsyms);
    let dynsym = (hash + hash_len).next_multiple_of(8);
    let dynstr = dynsym + nsyms * SYM_SIZE;
    let versym = (dynstr + strtab_len).next_multiple_of(2);
    let verdef = (versym + 2 * nsyms).next_multiple_of(4);
    let verdef_len = 2 * (VERDEF_SIZE + VERDAUX_SIZE);
    let note = (verdef + verdef_len).next_multiple_of(4);
    let note_len = 12 + 8 + 4;
    let dynamic = (note + note_len).next_multiple_of(8);
    let dyn_entries = 10;
    if dynamic + dyn_entries * DYN_SIZE > TEXT_OFFSET {
        return Err(WriteError::TablesTooLarge);
    }
    let text_at = TEXT_OFFSET;
    let shstrtab = text_at + text.len();
    let shdrs = (shstrtab + shstrtab_len).next_multiple_of(8);
    let len = shdrs + SECTION_NAMES.len() * SHDR_SIZE;
    if len > buf.len() {
        return Err(WriteError::TooSmall);
    }
    // The loadable part ends with the text; the section names and headers follow it, as a
    // linker puts them, inside the same page.
    let load_end = (text_at + text.len()) as u64;
    let mut o = Out { buf };

    // The ELF header.
    o.put(0, &[0x7f, b'E', b'L', b'F', 2, 1, 1, 0]);
    o.u16(16, 3); // ET_DYN
    o.u16(18, 183); // EM_AARCH64
    o.u32(20, 1);
    o.u64(24, 0); // no entry point
    o.u64(32, 64);
    o.u64(40, shdrs as u64);
    o.u32(48, 0);
    o.u16(52, 64);
    o.u16(54, 56);
    o.u16(56, PHNUM as u16);
    o.u16(58, SHDR_SIZE as u16);
    o.u16(60, SECTION_NAMES.len() as u16);
    o.u16(62, (SECTION_NAMES.len() - 1) as u16);

    // The program headers: the whole image read + execute, the dynamic section, the note.
    let phdr = |o: &mut Out<'_>, i: usize, kind: u32, flags: u32, at: usize, size: u64, align: u64| {
        let p = 64 + i * 56;
        o.u32(p, kind);
        o.u32(p + 4, flags);
        for (k, v) in [at as u64, at as u64, at as u64, size, size, align].into_iter().enumerate() {
            o.u64(p + 8 + 8 * k, v);
        }
    };
    phdr(&mut o, 0, PT_LOAD, 5, 0, load_end, 16);
    phdr(&mut o, 1, PT_DYNAMIC, 4, dynamic, (dyn_entries * DYN_SIZE) as u64, 8);
    phdr(&mut o, 2, PT_NOTE, 4, note, note_len as u64, 4);

    // The string table.
    let mut s = dynstr + 1;
    let mut string = |o: &mut Out<'_>, text: &str| {
        let at = s - dynstr;
        o.put(s, text.as_bytes());
        s += text.len() + 1;
        at as u32
    };
    let soname_name = string(&mut o, SONAME);
    let version_name = string(&mut o, VERSION);
    // The symbols (entry 0 is the null symbol) and the hash table: one bucket, holding the
    // chain of every symbol (any bucket count is valid; lookups take `hash % nbucket`).
    o.u32(hash, 1);
    o.u32(hash + 4, nsyms as u32);
    o.u32(hash + 8, if nsyms > 1 { 1 } else { 0 });
    for (i, sym) in symbols.iter().enumerate() {
        let index = i + 1;
        let e = dynsym + index * SYM_SIZE;
        let name = string(&mut o, sym.name);
        o.u32(e, name);
        o.put(e + 4, &[STB_GLOBAL_STT_FUNC, 0]);
        o.u16(e + 6, TEXT_SECTION);
        o.u64(e + 8, (text_at + sym.offset) as u64);
        o.u64(e + 16, sym.size as u64);
        let next = if index + 1 < nsyms { index + 1 } else { 0 };
        o.u32(hash + 12 + 4 * index, next as u32);
        o.u16(versym + 2 * index, VERSION_INDEX);
    }

    // The version definitions: the base one (the object, index 1), then LINUX_2.6.39 (index 2).
    for (k, (flags, index, name, name_at)) in
        [(VER_FLG_BASE, 1u16, SONAME, soname_name), (0, VERSION_INDEX, VERSION, version_name)]
            .into_iter()
            .enumerate()
    {
        let d = verdef + k * (VERDEF_SIZE + VERDAUX_SIZE);
        o.u16(d, 1); // vd_version
        o.u16(d + 2, flags);
        o.u16(d + 4, index);
        o.u16(d + 6, 1); // vd_cnt
        o.u32(d + 8, elf_hash(name.as_bytes()));
        o.u32(d + 12, VERDEF_SIZE as u32); // vd_aux
        o.u32(d + 16, if k == 0 { (VERDEF_SIZE + VERDAUX_SIZE) as u32 } else { 0 });
        o.u32(d + VERDEF_SIZE, name_at);
        o.u32(d + VERDEF_SIZE + 4, 0);
    }

    // The note Linux's vDSO carries (`ELFNOTE_START(Linux, 0, "a")`: LINUX_VERSION_CODE).
    o.u32(note, 6);
    o.u32(note + 4, 4);
    o.u32(note + 8, 0);
    o.put(note + 12, b"Linux\0\0\0");
    o.u32(note + 20, version_code);

    // The dynamic section: addresses are offsets, the image being linked at 0.
    let entries = [
        (DT_HASH, hash as u64),
        (DT_STRTAB, dynstr as u64),
        (DT_SYMTAB, dynsym as u64),
        (DT_STRSZ, strtab_len as u64),
        (DT_SYMENT, SYM_SIZE as u64),
        (DT_SONAME, u64::from(soname_name)),
        (DT_VERSYM, versym as u64),
        (DT_VERDEF, verdef as u64),
        (DT_VERDEFNUM, 2),
        (DT_NULL, 0),
    ];
    for (i, (tag, value)) in entries.into_iter().enumerate() {
        o.u64(dynamic + i * DYN_SIZE, tag);
        o.u64(dynamic + i * DYN_SIZE + 8, value);
    }

    o.put(text_at, text);

    // Section names and headers.
    let mut at = shstrtab;
    let mut name_of = [0u32; 10];
    for (slot, name) in name_of.iter_mut().zip(SECTION_NAMES) {
        *slot = (at - shstrtab) as u32;
        o.put(at, name.as_bytes());
        at += name.len() + 1;
    }
    // (type, flags, offset, size, link, info, align, entsize) per section after the null one.
    let sections: [SectionHeader; 9] = [
        (SHT_HASH, SHF_ALLOC, hash, hash_len, 2, 0, 8, 4),
        (SHT_DYNSYM, SHF_ALLOC, dynsym, nsyms * SYM_SIZE, 3, 1, 8, SYM_SIZE as u64),
        (SHT_STRTAB, SHF_ALLOC, dynstr, strtab_len, 0, 0, 1, 0),
        (SHT_GNU_VERSYM, SHF_ALLOC, versym, 2 * nsyms, 2, 0, 2, 2),
        (SHT_GNU_VERDEF, SHF_ALLOC, verdef, verdef_len, 3, 2, 4, 0),
        (SHT_NOTE, SHF_ALLOC, note, note_len, 0, 0, 4, 0),
        (SHT_DYNAMIC, SHF_ALLOC, dynamic, dyn_entries * DYN_SIZE, 3, 0, 8, DYN_SIZE as u64),
        (SHT_PROGBITS, SHF_ALLOC | SHF_EXECINSTR, text_at, text.len(), 0, 0, 16, 0),
        (SHT_STRTAB, 0, shstrtab, shstrtab_len, 0, 0, 1, 0),
    ];
    for (i, (kind, flags, offset, size, link, info, align, entsize)) in sections.into_iter().enumerate() {
        let h = shdrs + (i + 1) * SHDR_SIZE;
        o.u32(h, name_of[i + 1]);
        o.u32(h + 4, kind);
        o.u64(h + 8, flags);
        o.u64(h + 16, if flags & SHF_ALLOC != 0 { offset as u64 } else { 0 });
        o.u64(h + 24, offset as u64);
        o.u64(h + 32, size as u64);
        o.u32(h + 40, link);
        o.u32(h + 44, info);
        o.u64(h + 48, align);
        o.u64(h + 56, entsize);
    }
    Ok(Layout { text: text_at, len })
}

#[cfg(test)]
mod tests;
