//! Reading a static arm64 executable with `xmas-elf`: which segments to map where, with which
//! permissions, and where to start.
//!
//! Accepted: ELF64, little-endian, EM_AARCH64, ET_EXEC, or ET_DYN without PT_INTERP (a static
//! PIE, loaded at [`PIE_BASE`]; it relocates itself, as musl's and glibc's static-pie start code
//! does). Anything else is refused with a message saying what is wrong, never a panic: the bytes
//! come from an initrd anyone could have built.
use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;

use xmas_elf::ElfFile;
use xmas_elf::header::{Class, Data, Machine, Type};
use xmas_elf::program::Type as PhType;

/// Where a static PIE is loaded (Linux arm64 uses 2/3 of the user range; any page-aligned
/// address below the mmap area works).
pub const PIE_BASE: u64 = 0x0000_aaaa_0000_0000;

/// Segment permissions.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Prot {
    /// PF_R.
    pub read: bool,
    /// PF_W.
    pub write: bool,
    /// PF_X.
    pub exec: bool,
}

/// One PT_LOAD segment, already relocated by the load bias.
#[derive(Clone, Debug)]
pub struct Segment {
    /// Virtual address of the first byte.
    pub vaddr: u64,
    /// Bytes in memory.
    pub memsz: u64,
    /// Bytes from the file (the rest is zero).
    pub filesz: u64,
    /// Offset of those bytes in the file.
    pub offset: u64,
    /// Permissions.
    pub prot: Prot,
}

/// What the loader needs to map and start the program.
#[derive(Clone, Debug)]
pub struct Executable {
    /// Entry point (relocated).
    pub entry: u64,
    /// PT_LOAD segments.
    pub segments: Vec<Segment>,
    /// Where the program headers are in memory (AT_PHDR), if a segment maps them.
    pub phdr: u64,
    /// Number of program headers (AT_PHNUM).
    pub phnum: u64,
    /// Lowest and highest+1 address of the executable segments (for the code window).
    pub exec_range: Option<(u64, u64)>,
}

/// Parses `bytes` as a static arm64 executable.
///
/// # Errors
/// A sentence saying why the file cannot run here.
pub fn parse(bytes: &[u8]) -> Result<Executable, String> {
    let elf = ElfFile::new(bytes).map_err(|e| format!("not an ELF file: {e}"))?;
    let header = &elf.header;
    if header.pt1.class() != Class::SixtyFour {
        return Err("not a 64-bit ELF file".into());
    }
    if header.pt1.data() != Data::LittleEndian {
        return Err("not a little-endian ELF file".into());
    }
    if header.pt2.machine().as_machine() != Machine::AArch64 {
        return Err(format!("built for {:?}, not AArch64", header.pt2.machine().as_machine()));
    }
    let bias = match header.pt2.type_().as_type() {
        Type::Executable => 0,
        Type::SharedObject => PIE_BASE,
        other => return Err(format!("ELF type {other:?} is not an executable")),
    };
    let mut segments = Vec::new();
    let mut phdr = 0;
    let mut exec_range: Option<(u64, u64)> = None;
    let phoff = header.pt2.ph_offset();
    for ph in elf.program_iter() {
        match ph.get_type() {
            Ok(PhType::Interp) => {
                return Err("dynamically linked (PT_INTERP): only static executables run here".into());
            }
            Ok(PhType::Load) => {}
            _ => continue,
        }
        let flags = ph.flags();
        let prot = Prot { read: flags.is_read(), write: flags.is_write(), exec: flags.is_execute() };
        let (vaddr, memsz, filesz, offset) = (ph.virtual_addr(), ph.mem_size(), ph.file_size(), ph.offset());
        if memsz == 0 {
            continue;
        }
        let vaddr = vaddr.checked_add(bias).ok_or("segment address overflows")?;
        let end = vaddr.checked_add(memsz).ok_or("segment size overflows")?;
        if filesz > memsz || offset.checked_add(filesz).is_none_or(|e| e > bytes.len() as u64) {
            return Err(format!("segment at {vaddr:#x} has file bytes outside the file"));
        }
        if end > crate::arch::aarch64::user::USER_END || vaddr < 0x1_0000 {
            return Err(format!("segment [{vaddr:#x}, {end:#x}) is outside the user range [0x10000, 2^48)"));
        }
        if vaddr % 4096 != offset % 4096 {
            return Err(format!(
                "segment at {vaddr:#x} is not congruent to its file offset modulo the page size"
            ));
        }
        if prot.write && prot.exec {
            return Err(format!("segment at {vaddr:#x} is writable and executable (W^X)"));
        }
        if offset <= phoff && phoff < offset + filesz {
            phdr = vaddr + (phoff - offset);
        }
        if prot.exec {
            exec_range = Some(exec_range.map_or((vaddr, end), |(s, e)| (s.min(vaddr), e.max(end))));
        }
        segments.push(Segment { vaddr, memsz, filesz, offset, prot });
    }
    if segments.is_empty() {
        return Err("no loadable segment".into());
    }
    for (i, a) in segments.iter().enumerate() {
        for b in &segments[i + 1..] {
            let (a_start, a_end) = (a.vaddr & !0xfff, (a.vaddr + a.memsz + 0xfff) & !0xfff);
            let (b_start, b_end) = (b.vaddr & !0xfff, (b.vaddr + b.memsz + 0xfff) & !0xfff);
            if a_start < b_end && b_start < a_end {
                return Err(format!("segments at {:#x} and {:#x} share a page", a.vaddr, b.vaddr));
            }
        }
    }
    let entry = header.pt2.entry_point().checked_add(bias).ok_or("entry point overflows")?;
    if !segments.iter().any(|s| s.prot.exec && (s.vaddr..s.vaddr + s.memsz).contains(&entry)) {
        return Err(format!("entry point {entry:#x} is not in an executable segment"));
    }
    Ok(Executable { entry, segments, phdr, phnum: u64::from(header.pt2.ph_count()), exec_range })
}
