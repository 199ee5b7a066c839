//! `kimage symbols`: collects the code symbols of the linked kernel ELF, encodes them in the
//! [`ksyms_format`](crate::ksyms_format) layout, and computes the patch that writes the blob
//! into the `.ksyms` section's file bytes (the kernel reads them at run time through
//! `kernel/src/symbols.rs`). The file itself is written by `main`; everything here is pure so
//! the tests can run it on in-memory ELF images.

use std::collections::HashMap;

use xmas_elf::ElfFile;
use xmas_elf::sections::{SectionData, ShType};
use xmas_elf::symbol_table::{Entry, Entry64, Type as SymType};

use crate::elf::{self, SHF_ALLOC, SHF_EXECINSTR, SHF_WRITE};
use crate::ksyms_format::{ENTRY_LEN, HEADER_LEN, MAGIC};

/// Name of the section the blob is written into.
pub const SECTION: &str = ".ksyms";
/// When the table does not fit, the longest names are cut to this many bytes (ending in "...").
pub const TRUNCATED_NAME_LEN: usize = 64;

/// A symbol to be encoded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawSymbol {
    /// Start address.
    pub address: u64,
    /// Bytes covered.
    pub size: u32,
    /// Demangled name.
    pub name: String,
}

/// An encoded blob and what went into it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Encoded {
    /// The blob, exactly as long as its content (not padded to the area).
    pub blob: Vec<u8>,
    /// Number of entries.
    pub count: usize,
    /// Number of names that were truncated to fit.
    pub truncated: usize,
}

/// Size of the encoded blob for these names: header, entries, and the de-duplicated strings.
fn blob_len(count: usize, strings: usize) -> usize {
    HEADER_LEN + count * ENTRY_LEN + strings
}

/// `name` cut to at most [`TRUNCATED_NAME_LEN`] bytes on a character boundary, ending in "...".
pub fn truncate_name(name: &str) -> String {
    if name.len() <= TRUNCATED_NAME_LEN {
        return name.to_string();
    }
    let mut cut = TRUNCATED_NAME_LEN - 3;
    while !name.is_char_boundary(cut) {
        cut -= 1;
    }
    format!("{}...", &name[..cut])
}

/// Encodes `symbols` (sorted by address) into at most `available` bytes. Identical names share
/// one string. When the blob would not fit, names are truncated to [`TRUNCATED_NAME_LEN`] bytes,
/// longest first, until it does; if it still does not, the error gives both sizes.
pub fn encode(symbols: &[RawSymbol], available: usize) -> Result<Encoded, String> {
    debug_assert!(symbols.windows(2).all(|w| w[0].address <= w[1].address));
    let mut names: Vec<String> = symbols.iter().map(|s| s.name.clone()).collect();

    // Reference counts of distinct strings, and the string-table size they need.
    let mut uses: HashMap<String, usize> = HashMap::new();
    let mut strings = 0usize;
    for name in &names {
        let count = uses.entry(name.clone()).or_insert(0);
        if *count == 0 {
            strings += name.len() + 1;
        }
        *count += 1;
    }
    let original = blob_len(names.len(), strings);

    let mut by_length: Vec<usize> =
        (0..names.len()).filter(|&i| names[i].len() > TRUNCATED_NAME_LEN).collect();
    by_length.sort_by(|&a, &b| names[b].len().cmp(&names[a].len()).then(a.cmp(&b)));
    let mut truncated = 0;
    for i in by_length {
        if blob_len(names.len(), strings) <= available {
            break;
        }
        let short = truncate_name(&names[i]);
        let old = std::mem::replace(&mut names[i], short.clone());
        if let Some(count) = uses.get_mut(&old) {
            *count -= 1;
            if *count == 0 {
                strings -= old.len() + 1;
                uses.remove(&old);
            }
        }
        let count = uses.entry(short.clone()).or_insert(0);
        if *count == 0 {
            strings += short.len() + 1;
        }
        *count += 1;
        truncated += 1;
    }
    let needed = blob_len(names.len(), strings);
    if needed > available {
        return Err(format!(
            "the symbol table does not fit in {SECTION}: {needed} bytes needed ({original} before \
             truncating {truncated} names to {TRUNCATED_NAME_LEN} bytes) for {} symbols, {available} \
             bytes available; enlarge KSYMS_SIZE in kernel/src/symbols.rs",
            names.len()
        ));
    }

    let count = u32::try_from(names.len()).map_err(|_| "too many symbols".to_string())?;
    let strtab = HEADER_LEN + names.len() * ENTRY_LEN;
    let mut blob = Vec::with_capacity(needed);
    blob.extend_from_slice(&MAGIC);
    blob.extend_from_slice(&count.to_le_bytes());
    blob.extend_from_slice(&(strtab as u32).to_le_bytes());
    blob.extend_from_slice(&0u32.to_le_bytes());
    let mut table: Vec<u8> = Vec::new();
    let mut offsets: HashMap<&str, u32> = HashMap::new();
    for (symbol, name) in symbols.iter().zip(&names) {
        let offset = *offsets.entry(name.as_str()).or_insert_with(|| {
            let at = table.len() as u32;
            table.extend_from_slice(name.as_bytes());
            table.push(0);
            at
        });
        blob.extend_from_slice(&symbol.address.to_le_bytes());
        blob.extend_from_slice(&symbol.size.to_le_bytes());
        blob.extend_from_slice(&offset.to_le_bytes());
    }
    blob.extend_from_slice(&table);
    debug_assert_eq!(blob.len(), needed);
    Ok(Encoded { blob, count: names.len(), truncated })
}

/// Demangles a Rust symbol (legacy or v0) without its `::h<hash>` suffix; other names are
/// returned unchanged.
pub fn demangle(name: &str) -> String {
    format!("{:#}", rustc_demangle::demangle(name))
}

/// The entries of `.symtab` and its string table, bounds-checked.
pub(crate) fn symbol_table<'a>(
    file: &ElfFile<'a>,
    sections: &[elf::Section],
) -> Result<(&'a [Entry64], &'a [u8]), String> {
    let bytes = file.input;
    let symtab = file
        .section_iter()
        .find(|sh| matches!(sh.get_type(), Ok(ShType::SymTab)))
        .ok_or("the ELF has no .symtab (was it stripped?)")?;
    if elf::file_range(bytes, symtab.offset(), symtab.size()).is_none()
        || !symtab.offset().is_multiple_of(8)
        || (symtab.entry_size() != 24 && symtab.size() > 0)
    {
        return Err(".symtab lies outside the file or is malformed".into());
    }
    let strtab = sections
        .get(symtab.link() as usize)
        .and_then(|s| elf::file_range(bytes, s.offset, s.size))
        .ok_or(".symtab's string table lies outside the file")?;
    match symtab.get_data(file) {
        Ok(SectionData::SymbolTable64(entries)) => Ok((entries, strtab)),
        _ => Err("cannot read .symtab as an ELF64 symbol table".into()),
    }
}

/// A candidate symbol read from `.symtab`, before de-duplication.
struct Candidate {
    address: u64,
    size: u64,
    /// `FUNC` symbols win over labels at the same address.
    is_func: bool,
    /// End of the symbol's section, to bound the size given to a zero-sized label.
    section_end: u64,
    name: String,
}

/// Reads the code symbols of `elf_bytes`: `FUNC` symbols, and `NOTYPE` symbols defined in
/// executable sections (assembly labels), with a nonzero address. Mapping symbols (`$x`, `$d`)
/// and local labels (`.L…`) are skipped; one symbol is kept per address (a `FUNC` first, then
/// the larger, then the lexically smaller name); a symbol of size 0 is given the distance to the
/// next symbol, bounded by the end of its section. The result is sorted by address.
pub fn collect(elf_bytes: &[u8]) -> Result<Vec<RawSymbol>, String> {
    let file = elf::open(elf_bytes)?;
    let sections = elf::sections(&file);
    let (entries, strtab) = symbol_table(&file, &sections)?;

    let mut candidates = Vec::new();
    for entry in entries {
        let is_func = matches!(entry.get_type(), Ok(SymType::Func));
        let is_notype = matches!(entry.get_type(), Ok(SymType::NoType));
        let Some(section) = sections.get(usize::from(entry.shndx())) else {
            continue; // SHN_UNDEF is index 0 and has no flags; reserved indices are out of range
        };
        if entry.shndx() == 0 || entry.value() == 0 {
            continue;
        }
        let in_code = section.flags & SHF_EXECINSTR != 0;
        if !(is_func || (is_notype && in_code)) {
            continue;
        }
        let raw = elf::string_at(strtab, entry.name());
        if raw.is_empty() || raw.starts_with('$') || raw.starts_with(".L") {
            continue;
        }
        candidates.push(Candidate {
            address: entry.value(),
            size: entry.size(),
            is_func,
            section_end: section.addr.saturating_add(section.size),
            name: demangle(raw),
        });
    }

    candidates.sort_by(|a, b| {
        a.address
            .cmp(&b.address)
            .then(b.is_func.cmp(&a.is_func))
            .then(b.size.cmp(&a.size))
            .then(a.name.cmp(&b.name))
    });
    candidates.dedup_by(|later, first| later.address == first.address);

    let mut symbols = Vec::with_capacity(candidates.len());
    for (i, c) in candidates.iter().enumerate() {
        let size = if c.size != 0 {
            c.size
        } else {
            let next = candidates.get(i + 1).map_or(u64::MAX, |n| n.address);
            next.min(c.section_end).saturating_sub(c.address)
        };
        symbols.push(RawSymbol {
            address: c.address,
            size: u32::try_from(size).unwrap_or(u32::MAX),
            name: c.name.clone(),
        });
    }
    Ok(symbols)
}

/// Where the blob goes in the ELF file and what to write there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Patch {
    /// File offset of the `.ksyms` area.
    pub file_offset: u64,
    /// Virtual address of the area.
    pub address: u64,
    /// Bytes to write: the blob followed by zeros up to the area's size.
    pub bytes: Vec<u8>,
    /// Bytes of the blob proper.
    pub used: usize,
    /// Symbols written.
    pub count: usize,
    /// Names truncated to fit.
    pub truncated: usize,
}

impl Patch {
    /// The one-line summary `kimage symbols` prints.
    pub fn summary(&self) -> String {
        format!(
            "kimage symbols: {} symbols written ({} names truncated), {} of {} bytes used in \
             {SECTION} at {:#x} (file offset {:#x})",
            self.count,
            self.truncated,
            self.used,
            self.bytes.len(),
            self.address,
            self.file_offset
        )
    }

    /// Applies the patch to an in-memory copy of the ELF file.
    pub fn apply(&self, elf_bytes: &mut [u8]) -> Result<(), String> {
        let start = usize::try_from(self.file_offset).map_err(|e| e.to_string())?;
        let area = start
            .checked_add(self.bytes.len())
            .and_then(|end| elf_bytes.get_mut(start..end))
            .ok_or("the .ksyms area lies outside the file")?;
        area.copy_from_slice(&self.bytes);
        Ok(())
    }
}

/// Plans the patch of `elf_bytes`: finds `.ksyms`, checks that it has file bytes inside a
/// loadable read-only segment and holds zeros (or an earlier blob, so the command can run
/// again), collects and encodes the symbols.
///
/// The area is the section, or the `OBJECT` symbol that starts it when that is smaller (the
/// kernel's `KSYMS` static, whose size is what the kernel reads).
pub fn plan(elf_bytes: &[u8]) -> Result<Patch, String> {
    let file = elf::open(elf_bytes)?;
    let sections = elf::sections(&file);
    let ksyms = sections
        .iter()
        .find(|s| s.name == SECTION)
        .ok_or_else(|| format!("the ELF has no {SECTION} section (see linker.ld)"))?;
    if ksyms.nobits {
        return Err(format!("{SECTION} is SHT_NOBITS: it has no bytes in the file to patch"));
    }
    if ksyms.flags & SHF_ALLOC == 0 || ksyms.flags & SHF_WRITE != 0 {
        return Err(format!("{SECTION} must be allocated and read-only (sh_flags {:#x})", ksyms.flags));
    }
    let info = elf::read_info(elf_bytes)?;
    let in_segment = info.loads.iter().find(|s| {
        ksyms.offset >= s.offset
            && (ksyms.offset - s.offset).checked_add(ksyms.size).is_some_and(|end| end <= s.filesz)
            && ksyms.addr.wrapping_sub(ksyms.offset) == s.vaddr.wrapping_sub(s.offset)
    });
    match in_segment {
        None => {
            return Err(format!(
                "{SECTION} ({:#x} bytes at file offset {:#x}) is not inside a PT_LOAD's file bytes",
                ksyms.size, ksyms.offset
            ));
        }
        Some(s) if s.writable() => {
            return Err(format!(
                "{SECTION} lies in a writable segment ({}); it belongs with read-only data",
                s.flag_string()
            ));
        }
        Some(_) => {}
    }

    let symbols = collect(elf_bytes)?;
    let area_size = area_size(&file, &sections, ksyms);
    let area = elf::file_range(elf_bytes, ksyms.offset, area_size)
        .ok_or_else(|| format!("{SECTION} lies outside the file"))?;
    if area.iter().any(|&b| b != 0) && !area.starts_with(&MAGIC) {
        return Err(format!(
            "{SECTION} holds data that is neither zeros nor an earlier symbol table; refusing \
             to overwrite it"
        ));
    }
    let available = usize::try_from(area_size).map_err(|e| e.to_string())?;
    let encoded = encode(&symbols, available)?;
    let mut bytes = encoded.blob.clone();
    bytes.resize(available, 0);
    Ok(Patch {
        file_offset: ksyms.offset,
        address: ksyms.addr,
        used: encoded.blob.len(),
        bytes,
        count: encoded.count,
        truncated: encoded.truncated,
    })
}

/// Size of the area: the section size, or the size of an `OBJECT` symbol that starts at the
/// section's address when that is smaller.
fn area_size(file: &ElfFile<'_>, sections: &[elf::Section], ksyms: &elf::Section) -> u64 {
    let Ok((entries, _)) = symbol_table(file, sections) else {
        return ksyms.size;
    };
    entries
        .iter()
        .filter(|e| {
            usize::from(e.shndx()) == ksyms.index
                && e.value() == ksyms.addr
                && matches!(e.get_type(), Ok(SymType::Object))
                && e.size() > 0
        })
        .map(|e| e.size())
        .fold(ksyms.size, u64::min)
}
