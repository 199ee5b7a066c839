//! Why a file is not loaded: one variant per rule, each displayed as one sentence (lower case,
//! no final full stop: the kernel prints it after "cannot run NAME: ").

use core::fmt;

use crate::header::{EHDR_SIZE, PHDR_SIZE};
use crate::property::{NOTE_MAX, NoteProblem};

/// A refused executable. `index` is the program header's position in the table (0-based).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not a refusal: what the parse needs reaches past the bytes the caller read
    /// ([`crate::FileBytes::head`]); read the file up to `end` and parse again.
    BeyondHead {
        /// One past the last byte needed (at most the file's size).
        end: u64,
    },
    /// Shorter than the ELF header.
    TooShort {
        /// The file's length.
        len: usize,
    },
    /// Does not start with `\x7fELF`.
    NotElf,
    /// `EI_CLASS` is not ELFCLASS64.
    NotElf64 {
        /// `e_ident[EI_CLASS]`.
        class: u8,
    },
    /// `EI_DATA` is not ELFDATA2LSB.
    NotLittleEndian {
        /// `e_ident[EI_DATA]`.
        data: u8,
    },
    /// `e_type` is neither ET_EXEC nor ET_DYN.
    NotExecutable {
        /// `e_type`.
        kind: u16,
    },
    /// `e_machine` is not EM_AARCH64.
    WrongMachine {
        /// `e_machine`.
        machine: u16,
    },
    /// `e_phentsize` is not 56.
    BadPhentsize {
        /// `e_phentsize`.
        size: u16,
    },
    /// `e_phnum` is 0.
    NoProgramHeaders,
    /// More than 64 KiB of program headers.
    TooManyProgramHeaders {
        /// `e_phnum`.
        phnum: u16,
    },
    /// The program header table is not wholly inside the file.
    HeadersOutsideFile {
        /// `e_phoff`.
        phoff: u64,
        /// Its size in bytes.
        size: u64,
        /// The file's length.
        len: usize,
    },
    /// The PT_INTERP is not a path: shorter than 2 or longer than `PATH_MAX` bytes, or not
    /// ended by its NUL (Linux: `ENOEXEC`).
    BadInterpreter {
        /// Its `p_filesz`.
        size: u64,
    },
    /// The PT_INTERP's bytes lie outside the file (Linux: `EIO`, a short read).
    InterpreterOutsideFile {
        /// Its `p_offset`.
        offset: u64,
        /// Its `p_filesz`.
        size: u64,
    },
    /// The PT_GNU_PROPERTY note is malformed.
    PropertyNote(NoteProblem),
    /// A PT_LOAD with file bytes whose offset and address differ modulo the page size.
    NotCongruent {
        /// Program header index.
        index: usize,
        /// `p_vaddr`.
        vaddr: u64,
        /// `p_offset`.
        offset: u64,
    },
    /// A PT_LOAD cannot be mapped with this kernel's pages ([`Refusal::NotCongruent`] or
    /// [`Refusal::SharedPage`]), and its `p_align` is smaller than the page size: the program
    /// was linked for smaller pages (`-z max-page-size=4096` on a 16 KiB or 64 KiB kernel).
    LinkedForSmallerPages {
        /// Program header index.
        index: usize,
        /// Its `p_align`.
        align: u64,
        /// The kernel's page size.
        page: u64,
    },
    /// A PT_LOAD's file bytes are not wholly inside the file.
    FileBytesOutsideFile {
        /// Program header index.
        index: usize,
        /// `p_offset`.
        offset: u64,
        /// `p_filesz`.
        filesz: u64,
        /// The file's length.
        len: usize,
    },
    /// `p_filesz > p_memsz`.
    FileLargerThanMemory {
        /// Program header index.
        index: usize,
        /// `p_filesz`.
        filesz: u64,
        /// `p_memsz`.
        memsz: u64,
    },
    /// A PT_LOAD (after the load bias) not inside `[min_addr, task_size)`.
    OutsideUserRange {
        /// Program header index.
        index: usize,
        /// `p_vaddr` (before the load bias).
        vaddr: u64,
        /// `p_memsz`.
        memsz: u64,
        /// The load bias.
        bias: u64,
        /// The lowest address a segment may use ([`crate::Limits::min_addr`]).
        min: u64,
        /// One past the highest ([`crate::Limits::task_size`]).
        end: u64,
    },
    /// ET_DYN whose PT_LOADs span nothing (Linux's `total_mapping_size` is 0).
    EmptySpan,
    /// No PT_LOAD with memory.
    NothingToLoad,
    /// The heap could not hold the parser's tables of program headers (the kernel's `ENOMEM`:
    /// no input causes it, an exhausted kernel heap does).
    OutOfMemory,
    /// A PT_LOAD both writable and executable, with W^X enforced.
    WritableAndExecutable {
        /// Program header index.
        index: usize,
        /// Its (biased) address.
        vaddr: u64,
    },
    /// PT_GNU_STACK asks for an executable stack, with W^X enforced.
    ExecutableStack,
    /// A PT_LOAD with memory but no permission at all.
    NoPermissions {
        /// Program header index.
        index: usize,
        /// Its (biased) address.
        vaddr: u64,
    },
    /// Two PT_LOADs map parts of one page.
    SharedPage {
        /// Program header index of the first.
        first: usize,
        /// Program header index of the second.
        second: usize,
        /// The page.
        page: u64,
    },
    /// The entry point (after the load bias) is not a user address.
    EntryOutside {
        /// The biased entry point.
        entry: u64,
    },
}

fn machine_name(machine: u16) -> &'static str {
    match machine {
        3 => " (i386)",
        8 => " (MIPS)",
        20 => " (PowerPC)",
        21 => " (PowerPC64)",
        40 => " (32-bit Arm)",
        62 => " (x86-64)",
        243 => " (RISC-V)",
        _ => "",
    }
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Self::BeyondHead { end } => {
                write!(f, "the headers need the file's first {end} bytes, more than were read")
            }
            Self::TooShort { len } => {
                write!(f, "the file is {len} bytes long, shorter than the {EHDR_SIZE}-byte ELF header")
            }
            Self::NotElf => write!(f, "not an ELF file: it does not start with the bytes 7f 'E' 'L' 'F'"),
            Self::NotElf64 { class } => write!(
                f,
                "not a 64-bit ELF file: EI_CLASS is {class} (1 is 32-bit, 2 is the 64-bit class arm64 programs use)"
            ),
            Self::NotLittleEndian { data } => write!(
                f,
                "not a little-endian ELF file: EI_DATA is {data} (2 is big-endian, 1 is the little-endian arm64 Linux uses)"
            ),
            Self::NotExecutable { kind } => {
                let name = match kind {
                    0 => " (ET_NONE)",
                    1 => " (ET_REL, an object file: link it first)",
                    4 => " (ET_CORE, a core dump)",
                    _ => "",
                };
                write!(
                    f,
                    "not an executable: e_type is {kind}{name}, and only ET_EXEC (2) and ET_DYN (3) run"
                )
            }
            Self::WrongMachine { machine } => write!(
                f,
                "built for machine {machine}{}, not for AArch64 (EM_AARCH64, 183)",
                machine_name(machine)
            ),
            Self::BadPhentsize { size } => {
                write!(f, "e_phentsize is {size}, not {PHDR_SIZE}, the size of an ELF64 program header")
            }
            Self::NoProgramHeaders => write!(f, "the file has no program headers (e_phnum is 0)"),
            Self::TooManyProgramHeaders { phnum } => write!(
                f,
                "{phnum} program headers are more than the {} that fit in Linux's 64 KiB limit",
                crate::MAX_PHNUM
            ),
            Self::HeadersOutsideFile { phoff, size, len } => write!(
                f,
                "the program headers ({size} bytes at offset {phoff:#x}) reach past the end of the {len}-byte file"
            ),
            Self::BadInterpreter { size } => write!(
                f,
                "its interpreter's path (PT_INTERP, {size} bytes) is not a NUL-terminated path of 2 to 4096 bytes"
            ),
            Self::InterpreterOutsideFile { offset, size } => {
                write!(f, "its interpreter's path ({size} bytes at offset {offset:#x}) lies outside the file")
            }
            Self::PropertyNote(problem) => {
                write!(f, "its GNU property note (PT_GNU_PROPERTY) is malformed: ")?;
                match problem {
                    NoteProblem::TooLarge(size) => {
                        write!(f, "it is {size} bytes, more than Linux's {NOTE_MAX}-byte limit")
                    }
                    NoteProblem::Short(got) => {
                        write!(f, "only {got} bytes of it are in the file, fewer than its 16-byte header")
                    }
                    NoteProblem::NotGnuProperty => {
                        write!(f, "it is not an NT_GNU_PROPERTY_TYPE_0 note named \"GNU\"")
                    }
                    NoteProblem::DescriptorTooLong(size) => {
                        write!(f, "its {size}-byte descriptor reaches past the note")
                    }
                    NoteProblem::PropertyTooLong => write!(f, "a property reaches past the end of the note"),
                    NoteProblem::Unsorted(kind) => {
                        write!(f, "property type {kind:#x} is not greater than the type before it")
                    }
                    NoteProblem::BadFeatureSize(size) => {
                        write!(f, "the AArch64 feature property is {size} bytes instead of 4")
                    }
                }
            }
            Self::NotCongruent { index, vaddr, offset } => write!(
                f,
                "program header {index} (PT_LOAD) has address {vaddr:#x} and file offset {offset:#x}, which differ modulo the page size, so the file cannot be mapped there"
            ),
            Self::LinkedForSmallerPages { index, align, page } => write!(
                f,
                "program header {index} (PT_LOAD) is aligned to {align:#x} bytes, less than this kernel's {} KiB pages: the program was linked for smaller pages and cannot be mapped here (link it with -z max-page-size={page}, which loads with every page size)",
                page >> 10
            ),
            Self::FileBytesOutsideFile { index, offset, filesz, len } => write!(
                f,
                "program header {index} (PT_LOAD) takes {filesz:#x} bytes from offset {offset:#x}, past the end of the {len}-byte file (is the file truncated?)"
            ),
            Self::FileLargerThanMemory { index, filesz, memsz } => write!(
                f,
                "program header {index} (PT_LOAD) has more bytes in the file ({filesz:#x}) than in memory ({memsz:#x})"
            ),
            Self::OutsideUserRange { index, vaddr, memsz, bias, min, end } => {
                write!(f, "program header {index} (PT_LOAD) at {vaddr:#x} with {memsz:#x} bytes")?;
                if bias != 0 {
                    write!(f, " loaded {bias:#x} higher")?;
                }
                write!(f, " is not inside the user address range [{min:#x}, {end:#x})")
            }
            Self::EmptySpan => {
                write!(f, "its PT_LOAD segments span no memory from the first one to the last")
            }
            Self::OutOfMemory => write!(f, "the kernel heap cannot hold its program headers"),
            Self::NothingToLoad => {
                write!(f, "the file has no PT_LOAD segment with any memory, so nothing would run")
            }
            Self::WritableAndExecutable { index, vaddr } => write!(
                f,
                "program header {index} (PT_LOAD at {vaddr:#x}) is writable and executable, which W^X forbids here"
            ),
            Self::ExecutableStack => write!(
                f,
                "it asks for an executable stack (PT_GNU_STACK with PF_X), which W^X forbids here (relink with -z noexecstack)"
            ),
            Self::NoPermissions { index, vaddr } => write!(
                f,
                "program header {index} (PT_LOAD at {vaddr:#x}) has no permission at all (p_flags without R, W or X), which this loader does not support"
            ),
            Self::SharedPage { first, second, page } => write!(
                f,
                "program headers {first} and {second} (PT_LOAD) both map part of the page at {page:#x}, which this loader does not support"
            ),
            Self::EntryOutside { entry } => {
                write!(f, "the entry point {entry:#x} is outside the user address space")
            }
        }
    }
}
