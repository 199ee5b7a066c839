//! The GNU property note (`PT_GNU_PROPERTY`, `.note.gnu.property`), read as Linux's
//! `parse_elf_properties` and `parse_elf_property` (fs/binfmt_elf.c) read it, in the same order,
//! with the same limits: at most 1 KiB of note, a `Elf64_Nhdr` with type
//! `NT_GNU_PROPERTY_TYPE_0` and name "GNU", then properties of 8-byte-aligned size, sorted by
//! strictly increasing type. arm64 (`arch_parse_elf_property`) reads one property,
//! `GNU_PROPERTY_AARCH64_FEATURE_1_AND` (BTI, GCS), which must be exactly 4 bytes.
//!
//! Linux reads the note with `kernel_read` at `p_offset`: bytes past the end of the file are
//! simply not there (a short read), and fewer than the note header and name is an error. The
//! same here: the note is the part of `[p_offset, p_offset + p_filesz)` inside the file.

use crate::header::u32_at;

/// Linux's buffer for the note (`NOTE_DATA_SZ`, 1 KiB).
pub const NOTE_MAX: u64 = 1024;
/// `Elf64_Nhdr`: `n_namesz`, `n_descsz`, `n_type`.
const NHDR_SIZE: usize = 12;
/// The name "GNU" and its NUL (`NOTE_NAME_SZ`).
const NAME: &[u8; 4] = b"GNU\0";
/// `NT_GNU_PROPERTY_TYPE_0`.
const NT_GNU_PROPERTY_TYPE_0: u32 = 5;
/// Property alignment for 64-bit files (`ELF_GNU_PROPERTY_ALIGN`).
const ALIGN: usize = 8;
/// `GNU_PROPERTY_AARCH64_FEATURE_1_AND`.
pub const AARCH64_FEATURE_1_AND: u32 = 0xc000_0000;
/// In [`AARCH64_FEATURE_1_AND`]: the program's code is marked for BTI.
pub const FEATURE_1_BTI: u32 = 1;

/// Why a property note is refused (Linux: `ENOEXEC` or `EIO`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NoteProblem {
    /// `p_filesz` is more than [`NOTE_MAX`].
    TooLarge(u64),
    /// Fewer bytes than a note header and the name could be read.
    Short(usize),
    /// Not an `NT_GNU_PROPERTY_TYPE_0` note named "GNU".
    NotGnuProperty,
    /// `n_descsz` reaches past the bytes read.
    DescriptorTooLong(u32),
    /// A property header or its data reaches past the descriptor.
    PropertyTooLong,
    /// A property's type is not greater than the one before.
    Unsorted(u32),
    /// `GNU_PROPERTY_AARCH64_FEATURE_1_AND` is not 4 bytes.
    BadFeatureSize(u32),
}

/// The arm64 feature bits (`GNU_PROPERTY_AARCH64_FEATURE_1_AND`; 0 when absent) of the note at
/// `[offset, offset + filesz)` of `file`.
///
/// # Errors
/// What makes Linux refuse the note.
pub fn aarch64_features(file: &[u8], offset: u64, filesz: u64) -> Result<u32, NoteProblem> {
    if filesz > NOTE_MAX {
        return Err(NoteProblem::TooLarge(filesz));
    }
    // A short read: only what the file has from `offset` on (nothing if it starts past the end).
    let start = usize::try_from(offset).unwrap_or(usize::MAX).min(file.len());
    let len = (filesz as usize).min(file.len() - start);
    let note = &file[start..start + len];
    if note.len() < NHDR_SIZE + NAME.len() {
        return Err(NoteProblem::Short(note.len()));
    }
    let (namesz, descsz, kind) = match (u32_at(note, 0), u32_at(note, 4), u32_at(note, 8)) {
        (Some(n), Some(d), Some(t)) => (n, d, t),
        _ => return Err(NoteProblem::Short(note.len())),
    };
    if kind != NT_GNU_PROPERTY_TYPE_0
        || namesz as usize != NAME.len()
        || note.get(NHDR_SIZE..NHDR_SIZE + NAME.len()) != Some(&NAME[..])
    {
        return Err(NoteProblem::NotGnuProperty);
    }
    let mut off = (NHDR_SIZE + NAME.len()).next_multiple_of(ALIGN);
    if descsz as usize > note.len() - off {
        return Err(NoteProblem::DescriptorTooLong(descsz));
    }
    let end = off + descsz as usize;
    let mut features = 0;
    let mut previous: Option<u32> = None;
    while off != end {
        let left = end - off;
        if left < 8 {
            return Err(NoteProblem::PropertyTooLong);
        }
        let (Some(pr_type), Some(pr_datasz)) = (u32_at(note, off), u32_at(note, off + 4)) else {
            return Err(NoteProblem::PropertyTooLong);
        };
        if pr_datasz as usize > left - 8 {
            return Err(NoteProblem::PropertyTooLong);
        }
        let data = off + 8;
        let step = (pr_datasz as usize).next_multiple_of(ALIGN);
        if step > left - 8 {
            return Err(NoteProblem::PropertyTooLong);
        }
        if previous.is_some_and(|p| pr_type <= p) {
            return Err(NoteProblem::Unsorted(pr_type));
        }
        previous = Some(pr_type);
        if pr_type == AARCH64_FEATURE_1_AND {
            if pr_datasz != 4 {
                return Err(NoteProblem::BadFeatureSize(pr_datasz));
            }
            features |= u32_at(note, data).ok_or(NoteProblem::PropertyTooLong)?;
        }
        off = data + step;
    }
    Ok(features)
}
