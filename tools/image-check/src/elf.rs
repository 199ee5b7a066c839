//! The few facts the checks need from an ELF file, read once with `xmas-elf` and bounds-checked
//! here, so that the rest of the tool works on plain values and a malformed file gives an error
//! message rather than a panic inside the parser.

use xmas_elf::ElfFile;
use xmas_elf::header::{Class, Data, Machine};
use xmas_elf::program::Type as PhType;
use xmas_elf::sections::{SHN_LORESERVE, SectionHeader, ShType};

/// `PF_X`: the segment is executable.
pub const PF_X: u32 = 1;
/// `PF_W`: the segment is writable.
pub const PF_W: u32 = 2;
/// `PF_R`: the segment is readable.
pub const PF_R: u32 = 4;
/// `SHF_WRITE`: the section is writable at run time.
pub const SHF_WRITE: u64 = 1;
/// `SHF_ALLOC`: the section occupies memory at run time.
pub const SHF_ALLOC: u64 = 2;
/// `SHF_EXECINSTR`: the section holds instructions.
pub const SHF_EXECINSTR: u64 = 4;

/// One `PT_LOAD` program header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Virtual address of the first byte.
    pub vaddr: u64,
    /// Physical (load) address of the first byte; `objcopy -O binary` lays the file out by it.
    pub paddr: u64,
    /// File offset of the first byte.
    pub offset: u64,
    /// Bytes backed by the file.
    pub filesz: u64,
    /// Bytes in memory (file bytes followed by zero fill).
    pub memsz: u64,
    /// `PF_R | PF_W | PF_X` bits.
    pub flags: u32,
}

impl Segment {
    /// Whether `PF_X` is set.
    pub fn executable(&self) -> bool {
        self.flags & PF_X != 0
    }

    /// Whether `PF_W` is set.
    pub fn writable(&self) -> bool {
        self.flags & PF_W != 0
    }

    /// `RWX` rendering of the flags, `-` for a clear bit.
    pub fn flag_string(&self) -> String {
        let bit = |mask: u32, c: char| if self.flags & mask != 0 { c } else { '-' };
        [bit(PF_R, 'R'), bit(PF_W, 'W'), bit(PF_X, 'X')].iter().collect()
    }
}

/// The identity and the loadable layout of an ELF file.
#[derive(Clone, Debug)]
pub struct ElfInfo {
    /// `ELFCLASS64`.
    pub class64: bool,
    /// `ELFDATA2LSB`.
    pub little_endian: bool,
    /// `e_machine` (183 for AArch64).
    pub machine: u16,
    /// `e_entry`.
    pub entry: u64,
    /// The `PT_LOAD` segments with a nonzero memory size, in program-header order.
    pub loads: Vec<Segment>,
}

/// `EM_AARCH64`.
pub const EM_AARCH64: u16 = 183;

impl ElfInfo {
    /// Whether the file is an AArch64 little-endian ELF64, the only kind the tool accepts.
    pub fn is_aarch64_le64(&self) -> bool {
        self.class64 && self.little_endian && self.machine == EM_AARCH64
    }

    /// Lowest virtual address of any loadable segment: where the Image starts.
    pub fn lowest_vaddr(&self) -> Option<u64> {
        self.loads.iter().map(|s| s.vaddr).min()
    }

    /// End (exclusive) of the memory image: the highest `vaddr + memsz`.
    pub fn memory_end(&self) -> Option<u64> {
        self.loads.iter().map(|s| s.vaddr.saturating_add(s.memsz)).max()
    }

    /// End (exclusive) of the file-backed bytes: the highest `vaddr + filesz` over segments
    /// that have file bytes. `objcopy -O binary` stops there.
    pub fn file_end(&self) -> Option<u64> {
        self.loads.iter().filter(|s| s.filesz > 0).map(|s| s.vaddr.saturating_add(s.filesz)).max()
    }
}

/// Opens `bytes` with `xmas-elf`, refusing buffers the parser would panic on.
pub fn open(bytes: &[u8]) -> Result<ElfFile<'_>, String> {
    // xmas-elf reads headers in place and asserts their alignment; a heap buffer from
    // `fs::read` is always suitably aligned, a sub-slice might not be.
    if bytes.as_ptr().align_offset(8) != 0 {
        return Err("internal error: ELF buffer is not 8-byte aligned".into());
    }
    if bytes.len() < 64 || bytes[..4] != *b"\x7fELF" {
        return Err("not an ELF file (bad magic or shorter than an ELF header)".into());
    }
    if bytes[4] != 2 {
        return Err(format!("not an ELF64 file (EI_CLASS = {})", bytes[4]));
    }
    let elf = ElfFile::new(bytes).map_err(|e| format!("cannot parse ELF: {e}"))?;
    // Bound the header tables ourselves: xmas-elf indexes into them without checking.
    let pt2 = &elf.header.pt2;
    let table_fits = |offset: u64, count: u16, entry: u16, expected: u16| {
        count == 0
            || (entry == expected
                && (u64::from(count) * u64::from(entry))
                    .checked_add(offset)
                    .is_some_and(|end| end <= bytes.len() as u64))
    };
    if !table_fits(pt2.ph_offset(), pt2.ph_count(), pt2.ph_entry_size(), 56) {
        return Err("program-header table lies outside the file or has a bad entry size".into());
    }
    if !table_fits(pt2.sh_offset(), pt2.sh_count(), pt2.sh_entry_size(), 64)
        || pt2.sh_count() >= SHN_LORESERVE
        || (pt2.sh_count() > 0 && pt2.sh_str_index() >= pt2.sh_count())
    {
        return Err("section-header table lies outside the file or is malformed".into());
    }
    Ok(elf)
}

/// Reads identity and `PT_LOAD` segments; errors when a segment's file bytes lie outside the
/// file.
pub fn read_info(bytes: &[u8]) -> Result<ElfInfo, String> {
    let elf = open(bytes)?;
    let header = &elf.header;
    let mut loads = Vec::new();
    for (index, ph) in elf.program_iter().enumerate() {
        if !matches!(ph.get_type(), Ok(PhType::Load)) {
            continue;
        }
        let segment = Segment {
            vaddr: ph.virtual_addr(),
            paddr: ph.physical_addr(),
            offset: ph.offset(),
            filesz: ph.file_size(),
            memsz: ph.mem_size(),
            flags: ph.flags().0,
        };
        if segment.filesz > 0 && file_range(bytes, segment.offset, segment.filesz).is_none() {
            return Err(format!(
                "PT_LOAD #{index}: file bytes [{:#x}, +{:#x}) lie outside the {:#x}-byte file",
                segment.offset,
                segment.filesz,
                bytes.len()
            ));
        }
        if segment.memsz > 0 {
            loads.push(segment);
        }
    }
    Ok(ElfInfo {
        class64: header.pt1.class() == Class::SixtyFour,
        little_endian: header.pt1.data() == Data::LittleEndian,
        machine: match header.pt2.machine().as_machine() {
            Machine::AArch64 => EM_AARCH64,
            Machine::Other(m) => m,
            _ => u16::MAX, // some other named architecture: anything but AArch64
        },
        entry: header.pt2.entry_point(),
        loads,
    })
}

/// `bytes[offset .. offset + len]` when it is inside the file.
pub fn file_range(bytes: &[u8], offset: u64, len: u64) -> Option<&[u8]> {
    let start = usize::try_from(offset).ok()?;
    let end = start.checked_add(usize::try_from(len).ok()?)?;
    bytes.get(start..end)
}

/// A section header reduced to plain values.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Section {
    /// Index in the section-header table.
    pub index: usize,
    /// Name from `.shstrtab` (empty when unreadable).
    pub name: String,
    /// `sh_type` is `SHT_NOBITS` (no file bytes).
    pub nobits: bool,
    /// `sh_flags`.
    pub flags: u64,
    /// `sh_addr`.
    pub addr: u64,
    /// `sh_offset`.
    pub offset: u64,
    /// `sh_size`.
    pub size: u64,
}

/// All section headers, as plain values.
pub fn sections(elf: &ElfFile<'_>) -> Vec<Section> {
    let names = elf
        .section_header(elf.header.pt2.sh_str_index())
        .ok()
        .and_then(|sh| file_range(elf.input, sh.offset(), sh.size()))
        .unwrap_or(&[]);
    elf.section_iter().enumerate().map(|(index, sh)| section(names, index, &sh)).collect()
}

/// The NUL-terminated string at `offset` in a string table, or `""` when it is not there.
pub fn string_at(table: &[u8], offset: u32) -> &str {
    let Some(rest) = usize::try_from(offset).ok().and_then(|o| table.get(o..)) else {
        return "";
    };
    let end = rest.iter().position(|&b| b == 0).unwrap_or(0);
    std::str::from_utf8(&rest[..end]).unwrap_or("")
}

fn section(names: &[u8], index: usize, sh: &SectionHeader<'_>) -> Section {
    Section {
        index,
        name: string_at(names, sh.name()).to_string(),
        nobits: matches!(sh.get_type(), Ok(ShType::NoBits)),
        flags: sh.flags(),
        addr: sh.address(),
        offset: sh.offset(),
        size: sh.size(),
    }
}
