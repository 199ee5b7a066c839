//! The ELF64 header and program header, decoded field by field from little-endian bytes.
//!
//! Every read is `bytes.get(range)`: a field that is not wholly inside the slice is `None`,
//! never an index panic, and nothing assumes alignment (Linux copies the headers into a buffer
//! with `kernel_read`, so `e_phoff` may be any offset; a zero-copy cast would need it aligned).

/// Size of `Elf64_Ehdr`.
pub const EHDR_SIZE: usize = 64;
/// Size of `Elf64_Phdr`, the only `e_phentsize` Linux accepts.
pub const PHDR_SIZE: usize = 56;

/// `p_type` values the loader looks at (System V gABI; `PT_GNU_*` from glibc's `elf.h`).
pub mod pt {
    /// A loadable segment.
    pub const LOAD: u32 = 1;
    /// The program interpreter (dynamic loader) path.
    pub const INTERP: u32 = 3;
    /// The stack's permissions (PF_X: executable stack).
    pub const GNU_STACK: u32 = 0x6474_e551;
    /// The `.note.gnu.property` note (arm64: BTI and GCS markings).
    pub const GNU_PROPERTY: u32 = 0x6474_e553;
}

/// `p_flags` bits.
pub mod pf {
    /// Executable.
    pub const X: u32 = 1;
    /// Writable.
    pub const W: u32 = 2;
    /// Readable.
    pub const R: u32 = 4;
}

/// `e_type` of an executable linked at fixed addresses.
pub const ET_EXEC: u16 = 2;
/// `e_type` of a position-independent file (a static PIE when it has no PT_INTERP).
pub const ET_DYN: u16 = 3;
/// `e_machine` of arm64.
pub const EM_AARCH64: u16 = 183;

/// `n` little-endian bytes at `at`, if all of them are inside `bytes`.
fn field<const N: usize>(bytes: &[u8], at: usize) -> Option<[u8; N]> {
    bytes.get(at..at.checked_add(N)?)?.try_into().ok()
}

/// The `u16` at `at`.
pub fn u16_at(bytes: &[u8], at: usize) -> Option<u16> {
    field(bytes, at).map(u16::from_le_bytes)
}

/// The `u32` at `at`.
pub fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    field(bytes, at).map(u32::from_le_bytes)
}

/// The `u64` at `at`.
pub fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    field(bytes, at).map(u64::from_le_bytes)
}

/// The fields of `Elf64_Ehdr` the loader uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FileHeader {
    /// `e_ident[0..4]`.
    pub magic: [u8; 4],
    /// `e_ident[EI_CLASS]` (2: ELFCLASS64).
    pub class: u8,
    /// `e_ident[EI_DATA]` (1: ELFDATA2LSB).
    pub data: u8,
    /// `e_type`.
    pub kind: u16,
    /// `e_machine`.
    pub machine: u16,
    /// `e_entry`.
    pub entry: u64,
    /// `e_phoff`.
    pub phoff: u64,
    /// `e_phentsize`.
    pub phentsize: u16,
    /// `e_phnum`.
    pub phnum: u16,
}

impl FileHeader {
    /// Decodes the header at the start of `bytes`; `None` when `bytes` is shorter than
    /// [`EHDR_SIZE`].
    pub fn read(bytes: &[u8]) -> Option<Self> {
        let ident: [u8; 16] = field(bytes, 0)?;
        field::<EHDR_SIZE>(bytes, 0)?;
        Some(Self {
            magic: [ident[0], ident[1], ident[2], ident[3]],
            class: ident[4],
            data: ident[5],
            kind: u16_at(bytes, 16)?,
            machine: u16_at(bytes, 18)?,
            entry: u64_at(bytes, 24)?,
            phoff: u64_at(bytes, 32)?,
            phentsize: u16_at(bytes, 54)?,
            phnum: u16_at(bytes, 56)?,
        })
    }
}

/// One `Elf64_Phdr`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ProgramHeader {
    /// `p_type`.
    pub kind: u32,
    /// `p_flags`.
    pub flags: u32,
    /// `p_offset`.
    pub offset: u64,
    /// `p_vaddr`.
    pub vaddr: u64,
    /// `p_filesz`.
    pub filesz: u64,
    /// `p_memsz`.
    pub memsz: u64,
    /// `p_align`.
    pub align: u64,
}

impl ProgramHeader {
    /// Decodes the program header at the start of `bytes`; `None` when `bytes` is shorter than
    /// [`PHDR_SIZE`].
    pub fn read(bytes: &[u8]) -> Option<Self> {
        field::<PHDR_SIZE>(bytes, 0)?;
        Some(Self {
            kind: u32_at(bytes, 0)?,
            flags: u32_at(bytes, 4)?,
            offset: u64_at(bytes, 8)?,
            vaddr: u64_at(bytes, 16)?,
            filesz: u64_at(bytes, 32)?,
            memsz: u64_at(bytes, 40)?,
            align: u64_at(bytes, 48)?,
        })
    }
}
