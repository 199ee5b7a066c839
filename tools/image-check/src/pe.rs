//! The `pe-*` checks: the PE/COFF header that lets UEFI firmware start the Image as an EFI
//! application, read from the raw Image and checked against the ELF.
//!
//! The Image's first bytes are at once the arm64 Image header and an MS-DOS stub header (Linux
//! arch/arm64/kernel/head.S and efi-header.S; the Microsoft PE/COFF specification for the
//! layout): "MZ" at offset 0 (code0 is `ccmp x18, #0, #0xd, pl`, 0xfa405a4d), the offset of the
//! PE header at 0x3c (the Image header's res5), and there "PE\0\0", the COFF file header and a
//! PE32+ optional header. What a PE loader needs for this file to mean the same as the raw
//! Image:
//! - machine arm64 (0xaa64), PE32+, subsystem EFI application (10);
//! - every section at a file offset equal to its RVA, page-aligned, inside the file, in order and
//!   without overlap, the first right after the headers; none both writable and executable;
//! - `SizeOfImage` = the Image header's `image_size`, and the last section reaching it (so the
//!   loader zero-fills .bss and the stacks);
//! - the entry point the ELF's `efi_pe_entry`, inside an executable section;
//! - no base relocations (the stub is position-independent; `early-code` checks the MMU-off
//!   part, the stub's own constraints are documented in the kernel).

use crate::check::{HEADER_LEN, Header, Outcome};
use crate::elf::ElfInfo;
use crate::symbols;

/// code0 of an EFI-bootable Image: `ccmp x18, #0, #0xd, pl`, whose bytes start with "MZ".
pub const MZ_NOP: u32 = 0xfa40_5a4d;
/// The ELF symbol the PE entry point must name.
pub const PE_ENTRY: &str = "efi_pe_entry";
/// `IMAGE_FILE_MACHINE_ARM64`.
pub const MACHINE_ARM64: u16 = 0xaa64;
/// `IMAGE_SUBSYSTEM_EFI_APPLICATION`.
pub const SUBSYSTEM_EFI_APPLICATION: u16 = 10;
const SCN_MEM_EXECUTE: u32 = 0x2000_0000;
const SCN_MEM_WRITE: u32 = 0x8000_0000;
const PAGE: u32 = 4096;

/// A section table entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeSection {
    /// Name (up to 8 bytes, NUL-padded).
    pub name: String,
    /// VirtualSize.
    pub virtual_size: u32,
    /// VirtualAddress (RVA).
    pub rva: u32,
    /// SizeOfRawData.
    pub raw_size: u32,
    /// PointerToRawData.
    pub raw_offset: u32,
    /// Characteristics.
    pub flags: u32,
}

/// The fields of the PE header the checks read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PeHeader {
    /// Offset of "PE\0\0" in the file.
    pub offset: u32,
    /// COFF Machine.
    pub machine: u16,
    /// Optional header magic (0x20b for PE32+).
    pub magic: u16,
    /// AddressOfEntryPoint.
    pub entry: u32,
    /// SectionAlignment, FileAlignment.
    pub alignment: (u32, u32),
    /// SizeOfImage.
    pub size_of_image: u32,
    /// SizeOfHeaders.
    pub size_of_headers: u32,
    /// Subsystem.
    pub subsystem: u16,
    /// The base relocation directory's size (0 when there are fewer than 6 directories).
    pub relocations: u32,
    /// The section table.
    pub sections: Vec<PeSection>,
}

impl PeHeader {
    /// Decodes the PE header at `offset` of `image`, or says why it cannot.
    pub fn parse(image: &[u8], offset: u32) -> Result<PeHeader, String> {
        let at = offset as usize;
        let bytes = |from: usize, len: usize| -> Result<&[u8], String> {
            from.checked_add(len)
                .and_then(|end| image.get(from..end))
                .ok_or_else(|| format!("the PE header runs past the {}-byte Image at {from:#x}", image.len()))
        };
        let u16_at = |from: usize| -> Result<u16, String> {
            Ok(u16::from_le_bytes(bytes(from, 2)?.try_into().unwrap()))
        };
        let u32_at = |from: usize| -> Result<u32, String> {
            Ok(u32::from_le_bytes(bytes(from, 4)?.try_into().unwrap()))
        };
        if bytes(at, 4)? != b"PE\0\0" {
            return Err(format!("no \"PE\\0\\0\" signature at {at:#x} (the offset at 0x3c)"));
        }
        let coff = at + 4;
        let sections = usize::from(u16_at(coff + 2)?);
        let optional_size = usize::from(u16_at(coff + 16)?);
        let opt = coff + 20;
        let directories = u32_at(opt + 108)?;
        let relocations = if directories >= 6 { u32_at(opt + 112 + 5 * 8 + 4)? } else { 0 };
        let table = opt + optional_size;
        let mut out = Vec::new();
        for i in 0..sections {
            let s = table + 40 * i;
            let name = bytes(s, 8)?;
            out.push(PeSection {
                name: String::from_utf8_lossy(name).trim_end_matches('\0').to_string(),
                virtual_size: u32_at(s + 8)?,
                rva: u32_at(s + 12)?,
                raw_size: u32_at(s + 16)?,
                raw_offset: u32_at(s + 20)?,
                flags: u32_at(s + 36)?,
            });
        }
        Ok(PeHeader {
            offset,
            machine: u16_at(coff)?,
            magic: u16_at(opt)?,
            entry: u32_at(opt + 16)?,
            alignment: (u32_at(opt + 32)?, u32_at(opt + 36)?),
            size_of_image: u32_at(opt + 56)?,
            size_of_headers: u32_at(opt + 60)?,
            subsystem: u16_at(opt + 68)?,
            relocations,
            sections: out,
        })
    }
}

/// Runs the PE checks: `pe-header` (signature, machine, format, subsystem, alignment, no
/// relocations), `pe-sections` (layout against the file and `image_size`) and `pe-entry`
/// (against the ELF's `efi_pe_entry`).
pub fn check_pe(image: &[u8], elf_bytes: &[u8], info: &ElfInfo, header: &Header) -> Vec<Outcome> {
    let pe = match PeHeader::parse(image, header.res5) {
        Ok(pe) => pe,
        Err(why) => return vec![Outcome { name: "pe-header", ok: false, detail: why }],
    };
    let mut problems = Vec::new();
    if pe.offset < HEADER_LEN as u32 || pe.offset % 8 != 0 {
        problems.push(format!("PE header at {:#x}, inside the Image header or misaligned", pe.offset));
    }
    if pe.machine != MACHINE_ARM64 {
        problems.push(format!("machine {:#x}, expected {MACHINE_ARM64:#x} (arm64)", pe.machine));
    }
    if pe.magic != 0x20b {
        problems.push(format!("optional header magic {:#x}, expected 0x20b (PE32+)", pe.magic));
    }
    if pe.subsystem != SUBSYSTEM_EFI_APPLICATION {
        problems.push(format!("subsystem {}, expected 10 (EFI application)", pe.subsystem));
    }
    if pe.alignment != (PAGE, PAGE) {
        problems.push(format!(
            "section/file alignment {:#x}/{:#x}, expected 4 KiB",
            pe.alignment.0, pe.alignment.1
        ));
    }
    if pe.relocations != 0 {
        problems.push(format!("a {}-byte base relocation directory; the stub needs none", pe.relocations));
    }
    let header_outcome = Outcome {
        name: "pe-header",
        ok: problems.is_empty(),
        detail: if problems.is_empty() {
            format!(
                "PE32+ arm64 EFI application header at {:#x}, {} sections, no relocations",
                pe.offset,
                pe.sections.len()
            )
        } else {
            problems.join("; ")
        },
    };
    vec![header_outcome, check_sections(&pe, image.len() as u64, header), check_entry(&pe, elf_bytes, info)]
}

fn check_sections(pe: &PeHeader, file_len: u64, header: &Header) -> Outcome {
    let mut problems = Vec::new();
    if u64::from(pe.size_of_image) != header.image_size {
        problems.push(format!("SizeOfImage {:#x} != image_size {:#x}", pe.size_of_image, header.image_size));
    }
    if pe.sections.is_empty() {
        problems.push("no sections".to_string());
    }
    let mut next = pe.size_of_headers;
    for s in &pe.sections {
        let n = &s.name;
        if s.rva != s.raw_offset {
            problems.push(format!("{n}: RVA {:#x} != file offset {:#x}", s.rva, s.raw_offset));
        }
        if s.rva % PAGE != 0 || s.raw_size % PAGE != 0 {
            problems.push(format!("{n}: RVA {:#x} or raw size {:#x} not page-aligned", s.rva, s.raw_size));
        }
        if s.rva != next {
            problems
                .push(format!("{n}: starts at {:#x}, expected {next:#x} (right after the previous)", s.rva));
        }
        if u64::from(s.raw_offset) + u64::from(s.raw_size) > file_len {
            problems.push(format!(
                "{n}: raw data [{:#x}, +{:#x}) past the {file_len:#x}-byte file",
                s.raw_offset, s.raw_size
            ));
        }
        if s.virtual_size < s.raw_size {
            problems.push(format!(
                "{n}: VirtualSize {:#x} below SizeOfRawData {:#x}",
                s.virtual_size, s.raw_size
            ));
        }
        if s.flags & SCN_MEM_EXECUTE != 0 && s.flags & SCN_MEM_WRITE != 0 {
            problems.push(format!("{n}: writable and executable"));
        }
        next = s.rva.saturating_add(s.virtual_size.next_multiple_of(PAGE));
    }
    if next != pe.size_of_image {
        problems.push(format!("the sections end at {next:#x}, not at SizeOfImage {:#x}", pe.size_of_image));
    }
    let names: Vec<&str> = pe.sections.iter().map(|s| s.name.as_str()).collect();
    Outcome {
        name: "pe-sections",
        ok: problems.is_empty(),
        detail: if problems.is_empty() {
            format!(
                "{} at file offsets = RVAs, contiguous from {:#x} to SizeOfImage {:#x} = image_size, W^X",
                names.join(" "),
                pe.size_of_headers,
                pe.size_of_image
            )
        } else {
            problems.join("; ")
        },
    }
}

fn check_entry(pe: &PeHeader, elf_bytes: &[u8], info: &ElfInfo) -> Outcome {
    let start = info.lowest_vaddr().unwrap_or(0);
    let symbol = symbols::collect(elf_bytes)
        .ok()
        .and_then(|all| all.into_iter().find(|s| s.name == PE_ENTRY))
        .map(|s| s.address);
    let in_code = pe.sections.iter().any(|s| {
        s.flags & SCN_MEM_EXECUTE != 0 && (s.rva..s.rva.saturating_add(s.virtual_size)).contains(&pe.entry)
    });
    let (ok, detail) = match symbol {
        None => (false, format!("no symbol {PE_ENTRY} in the ELF")),
        Some(addr) if addr.checked_sub(start) != Some(u64::from(pe.entry)) => (
            false,
            format!(
                "AddressOfEntryPoint {:#x}, expected {PE_ENTRY} {addr:#x} - Image start {start:#x}",
                pe.entry
            ),
        ),
        Some(_) if !in_code => {
            (false, format!("AddressOfEntryPoint {:#x} is not in an executable section", pe.entry))
        }
        Some(addr) => (
            true,
            format!("AddressOfEntryPoint {:#x} = {PE_ENTRY} {addr:#x} - Image start, in .text", pe.entry),
        ),
    };
    Outcome { name: "pe-entry", ok, detail }
}
