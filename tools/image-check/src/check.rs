//! `kimage check`: every field of the arm64 Linux Image header, and the Image's layout, checked
//! against the ELF it was made from (the artifact, not the intent: nothing here trusts the
//! linker script or the assembler source that meant to produce these values).
//!
//! The Image is `llvm-objcopy -O binary` of the ELF, so it starts at the lowest loadable
//! address and holds every `PT_LOAD`'s file bytes at `vaddr - lowest`. The header (the first 64
//! bytes, little-endian, per Linux `Documentation/arch/arm64/booting.rst`):
//!
//! | offset | field | required value |
//! |---|---|---|
//! | 0 | code0 (u32) | `0xfa405a4d`: "MZ", the PE/COFF signature, as a harmless `ccmp` (`--no-efi`: `B` to the ELF entry point) |
//! | 4 | code1 (u32) | `B` to the ELF entry point (`--no-efi`: anything) |
//! | 8 | text_offset (u64) | 0 |
//! | 16 | image_size (u64) | memory extent (including .bss), rounded up; ≥ the file length |
//! | 24 | flags (u64) | `0xA`: little-endian, 4 KiB pages, any physical placement (`0xC` with 16 KiB, `0xE` with 64 KiB pages: `--page-size`) |
//! | 32, 40, 48 | res2, res3, res4 (u64) | 0 |
//! | 56 | magic (u32) | `0x644d5241` (`"ARM\x64"`) |
//! | 60 | res5 (u32) | offset of the PE/COFF header (checked by [`crate::pe`]; `--no-efi`: 0) |
//!
//! The PE/COFF header that makes the same file an EFI application is checked by [`crate::pe`].

use std::fmt;

use crate::elf::{self, ElfInfo};

/// Length of the arm64 Image header.
pub const HEADER_LEN: usize = 64;
/// `"ARM\x64"` read as a little-endian u32.
pub const IMAGE_MAGIC: u32 = 0x644d_5241;
/// Little-endian (bit 0 clear), 4 KiB pages (bits 1-2 = 1), any physical placement (bit 3).
pub const EXPECTED_FLAGS: u64 = expected_flags(4096);

/// The flags an Image for `page_size`-byte pages must have: little-endian, bits 1-2 the page
/// size (1 = 4 KiB, 2 = 16 KiB, 3 = 64 KiB, as booting.rst defines them; 0 "unspecified" for
/// any other size), any physical placement.
pub const fn expected_flags(page_size: u64) -> u64 {
    let page_bits = match page_size {
        4096 => 1,
        16384 => 2,
        65536 => 3,
        _ => 0,
    };
    (page_bits << 1) | (1 << 3)
}
/// The Image is loaded at a 2 MiB-aligned base (plus a `text_offset` of 0).
pub const BASE_ALIGN: u64 = 2 << 20;
/// Default rounding of `image_size`: the linker script rounds the end of the image to a 4 KiB
/// page. `--size-align` changes it.
pub const DEFAULT_SIZE_ALIGN: u64 = 4096;

/// Settings for [`check`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Options {
    /// `image_size` must equal the memory extent rounded up to this (a power of two).
    pub size_align: u64,
    /// The kernel's page size: the flags must name it ([`expected_flags`]).
    pub page_size: u64,
    /// The Image is also an EFI application (the default): code0 is the "MZ" no-op, code1 the
    /// branch, res5 the PE header's offset, and the `pe-*` checks run. `false` checks a plain
    /// Image: code0 the branch, res5 0.
    pub efi: bool,
}

impl Default for Options {
    fn default() -> Self {
        Options { size_align: DEFAULT_SIZE_ALIGN, page_size: 4096, efi: true }
    }
}

/// The result of one check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Outcome {
    /// Short, stable name of the check.
    pub name: &'static str,
    /// Whether it passed.
    pub ok: bool,
    /// What was found (and, on failure, what was expected).
    pub detail: String,
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let tag = if self.ok { "ok  " } else { "FAIL" };
        write!(f, "{tag} {}: {}", self.name, self.detail)
    }
}

fn outcome(name: &'static str, ok: bool, detail: String) -> Outcome {
    Outcome { name, ok, detail }
}

/// The decoded 64-byte Image header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// Executable code, normally a branch to the kernel entry.
    pub code0: u32,
    /// Executable code.
    pub code1: u32,
    /// Offset of the image from a 2 MiB-aligned base.
    pub text_offset: u64,
    /// Bytes of memory the image needs from its start, zero-initialised data included.
    pub image_size: u64,
    /// Endianness, page size and placement flags.
    pub flags: u64,
    /// Reserved words at offsets 32, 40 and 48.
    pub res2_4: [u64; 3],
    /// `"ARM\x64"`.
    pub magic: u32,
    /// Offset of the PE/COFF header (EFI images; Linux calls it res5 too).
    pub res5: u32,
}

impl Header {
    /// Decodes the header at the start of `image`; `None` when it is shorter than 64 bytes.
    pub fn parse(image: &[u8]) -> Option<Header> {
        let u32_at =
            |at: usize| -> Option<u32> { Some(u32::from_le_bytes(image.get(at..at + 4)?.try_into().ok()?)) };
        let u64_at =
            |at: usize| -> Option<u64> { Some(u64::from_le_bytes(image.get(at..at + 8)?.try_into().ok()?)) };
        Some(Header {
            code0: u32_at(0)?,
            code1: u32_at(4)?,
            text_offset: u64_at(8)?,
            image_size: u64_at(16)?,
            flags: u64_at(24)?,
            res2_4: [u64_at(32)?, u64_at(40)?, u64_at(48)?],
            magic: u32_at(56)?,
            res5: u32_at(60)?,
        })
    }

    /// Encodes the header (used by the tests to build fixtures).
    pub fn to_bytes(&self) -> [u8; HEADER_LEN] {
        let mut out = [0; HEADER_LEN];
        out[0..4].copy_from_slice(&self.code0.to_le_bytes());
        out[4..8].copy_from_slice(&self.code1.to_le_bytes());
        out[8..16].copy_from_slice(&self.text_offset.to_le_bytes());
        out[16..24].copy_from_slice(&self.image_size.to_le_bytes());
        out[24..32].copy_from_slice(&self.flags.to_le_bytes());
        for (i, word) in self.res2_4.iter().enumerate() {
            out[32 + 8 * i..40 + 8 * i].copy_from_slice(&word.to_le_bytes());
        }
        out[56..60].copy_from_slice(&self.magic.to_le_bytes());
        out[60..64].copy_from_slice(&self.res5.to_le_bytes());
        out
    }
}

/// The byte offset an AArch64 unconditional `B` (opcode `0b000101`, imm26) branches by, or
/// `None` when `insn` is not one.
pub fn branch_offset(insn: u32) -> Option<i64> {
    if insn & 0xfc00_0000 != 0x1400_0000 {
        return None;
    }
    // Sign-extend imm26 (shift it to the top of an i32, then back), then scale by 4.
    let imm26 = ((insn << 6) as i32) >> 6;
    Some(i64::from(imm26) * 4)
}

/// Encodes `B` by `offset` bytes, or `None` when it is unaligned or out of the ±128 MiB range.
pub fn encode_branch(offset: i64) -> Option<u32> {
    if offset % 4 != 0 || !(-(1 << 27)..(1 << 27)).contains(&offset) {
        return None;
    }
    Some(0x1400_0000 | ((offset / 4) as u32 & 0x03ff_ffff))
}

/// Human reading of the flags word.
fn describe_flags(flags: u64) -> String {
    let endian = if flags & 1 == 0 { "LE" } else { "BE" };
    let page = match (flags >> 1) & 3 {
        0 => "page size unspecified",
        1 => "4K pages",
        2 => "16K pages",
        _ => "64K pages",
    };
    let placement = if flags & 8 != 0 { "any physical placement" } else { "2 MiB base near DRAM start" };
    let reserved = if flags >> 4 != 0 { ", reserved bits set" } else { "" };
    format!("{flags:#x} ({endian}, {page}, {placement}{reserved})")
}

/// Runs every check of `image` (the raw Image bytes) against `elf` (the ELF file bytes). The
/// result has one entry per check, in the order they are printed.
pub fn check(image: &[u8], elf_bytes: &[u8], options: &Options) -> Vec<Outcome> {
    let mut out = Vec::new();
    let info = match elf::read_info(elf_bytes) {
        Ok(info) if info.is_aarch64_le64() && !info.loads.is_empty() => {
            out.push(outcome(
                "elf-format",
                true,
                format!("AArch64 little-endian ELF64, {} PT_LOAD segment(s)", info.loads.len()),
            ));
            Some(info)
        }
        Ok(info) => {
            let detail = format!(
                "expected AArch64 little-endian ELF64 with PT_LOAD segments, found {}, {}, \
                 e_machine {}, {} PT_LOAD segment(s)",
                if info.class64 { "ELF64" } else { "ELF32" },
                if info.little_endian { "LE" } else { "BE" },
                info.machine,
                info.loads.len()
            );
            out.push(outcome("elf-format", false, detail));
            None
        }
        Err(e) => {
            out.push(outcome("elf-format", false, e));
            None
        }
    };

    let Some(header) = Header::parse(image) else {
        out.push(outcome(
            "header",
            false,
            format!("expected at least {HEADER_LEN} bytes, found a {}-byte Image", image.len()),
        ));
        return out;
    };
    out.push(outcome(
        "header",
        true,
        format!("{HEADER_LEN}-byte header present; Image is {:#x} bytes", image.len()),
    ));

    if let Some(info) = &info {
        if options.efi {
            out.push(check_mz(&header));
            out.push(check_branch("code1", 4, header.code1, info));
        } else {
            out.push(check_branch("code0", 0, header.code0, info));
        }
    }
    out.push(outcome(
        "text_offset",
        header.text_offset == 0,
        if header.text_offset == 0 {
            "0".to_string()
        } else {
            format!("expected 0, found {:#x}", header.text_offset)
        },
    ));
    if let Some(info) = &info {
        out.push(check_image_size(&header, info, image.len() as u64, options));
    }
    let expected = expected_flags(options.page_size);
    out.push(outcome(
        "flags",
        header.flags == expected,
        if header.flags == expected {
            describe_flags(header.flags)
        } else {
            format!("expected {}, found {}", describe_flags(expected), describe_flags(header.flags))
        },
    ));
    out.push(check_reserved(&header, options.efi));
    out.push(outcome(
        "magic",
        header.magic == IMAGE_MAGIC,
        if header.magic == IMAGE_MAGIC {
            format!("{IMAGE_MAGIC:#010x} (\"ARM\\x64\")")
        } else {
            format!("expected {IMAGE_MAGIC:#010x} (\"ARM\\x64\"), found {:#010x}", header.magic)
        },
    ));

    if let Some(info) = &info {
        out.push(check_image_length(image, info));
        out.push(check_segment_bytes(image, elf_bytes, info));
        out.push(check_lma_layout(info));
        out.push(check_entry_segment(info));
        out.push(check_wx(info));
        out.push(check_base_alignment(info));
        out.push(crate::early::check_early_code(elf_bytes, info));
        if options.efi {
            out.extend(crate::pe::check_pe(image, elf_bytes, info, &header));
            out.push(crate::early::check_efi_stub_code(elf_bytes, info));
        }
    }
    out
}

/// Lowest loadable address; [`check`] only calls the ELF checks when there is a `PT_LOAD`.
fn low(info: &ElfInfo) -> u64 {
    info.lowest_vaddr().unwrap_or(0)
}

fn check_mz(header: &Header) -> Outcome {
    let ok = header.code0 == crate::pe::MZ_NOP;
    let detail = if ok {
        format!("{:#010x}: \"MZ\" (PE/COFF signature) as ccmp x18, #0, #0xd, pl", header.code0)
    } else {
        let hint = if branch_offset(header.code0).is_some() {
            " (a B: an Image without the PE/COFF header; --no-efi checks one)"
        } else {
            ""
        };
        format!(
            "expected {:#010x} (\"MZ\" as a harmless ccmp), found {:#010x}{hint}",
            crate::pe::MZ_NOP,
            header.code0
        )
    };
    outcome("code0", ok, detail)
}

/// `insn`, at byte `at` of the header (code0 or code1), must be a `B` to the ELF entry point.
fn check_branch(name: &'static str, at: u64, insn: u32, info: &ElfInfo) -> Outcome {
    let start = low(info);
    let Some(expected) = info.entry.checked_sub(start + at) else {
        return outcome(
            name,
            false,
            format!(
                "expected the entry point {:#x} at or above the Image start {start:#x} + {at}",
                info.entry
            ),
        );
    };
    let found = match branch_offset(insn) {
        Some(offset) => format!("{insn:#010x} (b to offset {offset:#x})"),
        None => format!("{insn:#010x}, not an unconditional B"),
    };
    let ok = branch_offset(insn).is_some_and(|o| i128::from(o) == i128::from(expected));
    let detail = if ok {
        format!("{found} = entry {:#x} - Image start {start:#x} - {at}", info.entry)
    } else {
        let hint = if expected == 0 && branch_offset(insn).is_some() {
            "; the ELF entry is the header itself: name the code that the header branches to in \
             ENTRY() of the linker script"
        } else {
            ""
        };
        format!(
            "expected b to offset {expected:#x} (entry {:#x} - Image start {start:#x} - {at}), found \
             {found}{hint}",
            info.entry
        )
    };
    outcome(name, ok, detail)
}

fn check_image_size(header: &Header, info: &ElfInfo, file_len: u64, options: &Options) -> Outcome {
    let start = low(info);
    let extent = info.memory_end().unwrap_or(start) - start;
    let align = options.size_align.max(1);
    let rounded = extent.checked_next_multiple_of(align);
    let ok = Some(header.image_size) == rounded && header.image_size >= file_len;
    let rounded_text = match rounded {
        Some(r) => format!("{r:#x}"),
        None => "overflow".to_string(),
    };
    let basis = format!(
        "memory extent {extent:#x} (highest PT_LOAD vaddr+memsz - lowest vaddr) rounded up to \
         {align:#x} = {rounded_text}; Image file length {file_len:#x}"
    );
    let detail = if ok {
        format!("{:#x}: {basis}", header.image_size)
    } else {
        format!(
            "expected {rounded_text} (and >= file length {file_len:#x}), found {:#x}; {basis}",
            header.image_size
        )
    };
    outcome("image_size", ok, detail)
}

fn check_reserved(header: &Header, efi: bool) -> Outcome {
    let mut nonzero = Vec::new();
    for (i, word) in header.res2_4.iter().enumerate() {
        if *word != 0 {
            nonzero.push(format!("res{} = {word:#x}", i + 2));
        }
    }
    if !efi && header.res5 != 0 {
        nonzero.push(format!("res5 = {:#x}", header.res5));
    }
    let fields = if efi { "res2..res4 (res5 is the PE header's offset)" } else { "res2..res5" };
    if nonzero.is_empty() {
        outcome("reserved", true, format!("{fields} are 0"))
    } else {
        outcome("reserved", false, format!("expected {fields} = 0, found {}", nonzero.join(", ")))
    }
}

fn check_image_length(image: &[u8], info: &ElfInfo) -> Outcome {
    let start = low(info);
    let Some(end) = info.file_end() else {
        return outcome("image-length", false, "expected file-backed PT_LOAD bytes, found none".to_string());
    };
    let expected = end - start;
    let found = image.len() as u64;
    let detail = if expected == found {
        format!("{found:#x} = highest PT_LOAD vaddr+filesz {end:#x} - lowest vaddr {start:#x}")
    } else {
        format!(
            "expected {expected:#x} (highest PT_LOAD vaddr+filesz {end:#x} - lowest vaddr \
             {start:#x}), found {found:#x}"
        )
    };
    outcome("image-length", expected == found, detail)
}

fn check_segment_bytes(image: &[u8], elf_bytes: &[u8], info: &ElfInfo) -> Outcome {
    let start = low(info);
    let mut problems = Vec::new();
    let mut checked = 0u64;
    for (i, seg) in info.loads.iter().enumerate() {
        if seg.filesz == 0 {
            continue;
        }
        let at = seg.vaddr - start;
        let Some(want) = elf::file_range(elf_bytes, seg.offset, seg.filesz) else {
            problems.push(format!("PT_LOAD #{i}: file bytes outside the ELF"));
            continue;
        };
        let Some(have) = elf::file_range(image, at, seg.filesz) else {
            problems.push(format!(
                "PT_LOAD #{i} (vaddr {:#x}): expected {:#x} bytes at Image offset {at:#x}, \
                 found the Image ends at {:#x}",
                seg.vaddr,
                seg.filesz,
                image.len()
            ));
            continue;
        };
        if let Some(d) = want.iter().zip(have).position(|(a, b)| a != b) {
            problems.push(format!(
                "PT_LOAD #{i} (vaddr {:#x}): expected ELF byte {:#04x} at Image offset {:#x}, \
                 found {:#04x}",
                seg.vaddr,
                want[d],
                at + d as u64,
                have[d]
            ));
        }
        checked += seg.filesz;
    }
    if problems.is_empty() {
        outcome(
            "segment-bytes",
            true,
            format!("all PT_LOAD file bytes ({checked:#x}) found at vaddr - {start:#x}"),
        )
    } else {
        outcome("segment-bytes", false, problems.join("; "))
    }
}

fn check_lma_layout(info: &ElfInfo) -> Outcome {
    // objcopy -O binary places bytes by physical (load) address; the Image matches the vaddr
    // layout only when every segment has the same paddr - vaddr.
    let delta = |s: &elf::Segment| s.paddr.wrapping_sub(s.vaddr);
    let first = delta(&info.loads[0]);
    let odd: Vec<String> = info
        .loads
        .iter()
        .enumerate()
        .filter(|(_, s)| delta(s) != first)
        .map(|(i, s)| format!("PT_LOAD #{i} has {:#x}", delta(s)))
        .collect();
    if odd.is_empty() {
        outcome(
            "lma-layout",
            true,
            format!("paddr - vaddr = {first:#x} for all {} PT_LOAD segment(s)", info.loads.len()),
        )
    } else {
        outcome(
            "lma-layout",
            false,
            format!(
                "expected one paddr - vaddr for every PT_LOAD (objcopy lays the Image out by \
                 paddr), found {first:#x} for PT_LOAD #0 but {}",
                odd.join(", ")
            ),
        )
    }
}

fn check_entry_segment(info: &ElfInfo) -> Outcome {
    let entry = info.entry;
    let containing =
        info.loads.iter().enumerate().find(|(_, s)| entry >= s.vaddr && entry - s.vaddr < s.filesz);
    match containing {
        Some((i, seg)) if seg.executable() => outcome(
            "entry-segment",
            true,
            format!("entry {entry:#x} in PT_LOAD #{i} ({}) at vaddr {:#x}", seg.flag_string(), seg.vaddr),
        ),
        Some((i, seg)) => outcome(
            "entry-segment",
            false,
            format!(
                "expected entry {entry:#x} in an executable segment, found PT_LOAD #{i} ({})",
                seg.flag_string()
            ),
        ),
        None => outcome(
            "entry-segment",
            false,
            format!("expected entry {entry:#x} in an executable segment's file bytes, found it in none"),
        ),
    }
}

fn check_wx(info: &ElfInfo) -> Outcome {
    let bad: Vec<String> = info
        .loads
        .iter()
        .enumerate()
        .filter(|(_, s)| s.writable() && s.executable())
        .map(|(i, s)| format!("PT_LOAD #{i} at {:#x} is {}", s.vaddr, s.flag_string()))
        .collect();
    if bad.is_empty() {
        let flags: Vec<String> = info.loads.iter().map(|s| s.flag_string()).collect();
        outcome("w^x", true, format!("no segment both writable and executable ({})", flags.join(" ")))
    } else {
        outcome("w^x", false, format!("expected no writable+executable segment, found {}", bad.join(", ")))
    }
}

fn check_base_alignment(info: &ElfInfo) -> Outcome {
    let start = low(info);
    let ok = start.is_multiple_of(BASE_ALIGN);
    let detail = if ok {
        format!("lowest vaddr {start:#x} is 2 MiB-aligned")
    } else {
        format!(
            "expected the lowest vaddr 2 MiB-aligned, found {start:#x} ({:#x} past a 2 MiB boundary)",
            start % BASE_ALIGN
        )
    };
    outcome("base-alignment", ok, detail)
}
