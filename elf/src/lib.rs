//! The program loader's ELF parser and validator: which segments of a static arm64 executable to
//! map where, with which permissions, and where to start; or one sentence saying why not.
//!
//! The bytes come from an initrd anyone could have built, so nothing here may panic, whatever
//! they are: every read is bounds-checked (`header`), every sum that could wrap is checked or
//! done with the wrapping arithmetic Linux itself uses, and the crate is host-tested against
//! more than 10^5 mutations of real executables (`tests/corpus.rs`).
//!
//! Why its own parser rather than a crate: the checks to make are exactly those of Linux's
//! `load_elf_binary` (fs/binfmt_elf.c), in its order, and they are few: the ELF header, the
//! program header table, three program header types. A general ELF crate brings its own rules
//! on top (xmas-elf, used before, casts the headers in place, so an unaligned or truncated
//! table or an odd `e_phentsize` panicked inside it; the `elf` crate is panic-free but refuses
//! by rules of its own, such as an `EI_VERSION` other than 1, which Linux never reads, and its
//! errors would still need translating into Linux's order). Reading 16 fields by offset is
//! shorter than either, and each check below names the Linux check it mirrors.
//!
//! What is checked, in Linux's order (an `ENOEXEC`/`EINVAL` there is a [`Refusal`] here):
//! 1. the magic; ELFCLASS64 and ELFDATA2LSB (Linux checks only `e_machine`, read at the 64-bit
//!    offsets: no file that passes it is anything but a 64-bit little-endian arm64 file, and
//!    saying so is clearer); `e_type` ET_EXEC or ET_DYN; `e_machine` EM_AARCH64;
//! 2. `load_elf_phdrs`: `e_phentsize == 56`, `0 < e_phnum`, at most 64 KiB of program headers,
//!    all of them inside the file (any offset: Linux reads them into a buffer);
//! 3. PT_INTERP (the first one counts): the interpreter's path, NUL-terminated, 2 to `PATH_MAX`
//!    bytes, inside the file; the kernel loads the interpreter (parsed with [`parse_at`] at an
//!    address the kernel chooses) and starts it;
//! 4. PT_GNU_STACK (the last one counts): PF_X asks for an executable stack;
//! 5. PT_GNU_PROPERTY (the last one counts): the note as `parse_elf_properties` reads it;
//! 6. each PT_LOAD as `elf_load` and the loop after it: with file bytes, `p_offset` and
//!    `p_vaddr` congruent modulo the page size (`vm_mmap` refuses a misaligned offset; `p_align`
//!    is not checked, as in Linux, except to name the cause when it is below the page size:
//!    a program linked for 4 KiB pages on a 16 KiB or 64 KiB kernel); `p_filesz <= p_memsz`; `p_vaddr + p_memsz` inside the user
//!    range before and after the load bias, no wrap-around, nothing below `mmap_min_addr`. A
//!    PT_LOAD with `p_filesz == 0` maps no file bytes, so its `p_offset` is not looked at (what
//!    a linker writes for a bss-only segment may lie past the end of the file);
//! 7. ET_DYN without PT_INTERP (a static PIE) is loaded at [`Limits::pie_base`] aligned down to
//!    the largest power-of-two `p_align` of its PT_LOADs, minus the page of its first PT_LOAD
//!    (`load_bias`, as Linux computes it for ET_DYN); `total_mapping_size == 0` is refused;
//! 8. the entry point (biased) must be below `TASK_SIZE`: that is all Linux checks. An entry
//!    outside every executable segment is loaded, as in Linux, and faults at once (SIGSEGV).
//!
//! Refused here although Linux loads them, each for a reason of this kernel, each in
//! docs/user.md: file bytes past the end of the file (Linux maps them and a
//! touch gives SIGBUS; this loader copies the bytes at exec time, so the file is truncated);
//! W+X segments and an executable stack when [`Limits::w_xor_x`] (the kernel's W^X); a PT_LOAD
//! without any permission, and two PT_LOADs sharing a page (the loader maps whole pages once);
//! no PT_LOAD with memory (Linux starts such a file and it faults at once).
#![no_std]

extern crate alloc;

pub mod header;
pub mod property;
mod refusal;
pub mod vdso;

#[cfg(test)]
mod tests;

use alloc::vec::Vec;

/// What of an ELF file a parse reads: its first bytes (`head`: the whole file, or a prefix) and
/// the file's size. Linux's `load_elf_binary` reads the header, then the program headers, then
/// what they point at (the interpreter's path, the property note), never the whole file; a
/// caller that read only a prefix gets [`Refusal::BeyondHead`] when something it needs lies past
/// it, and parses again with more. Every "inside the file" check is against `size`.
#[derive(Clone, Copy, Debug)]
pub struct FileBytes<'a> {
    head: &'a [u8],
    size: u64,
}

impl<'a> FileBytes<'a> {
    /// The whole file.
    pub fn whole(bytes: &'a [u8]) -> Self {
        Self { head: bytes, size: bytes.len() as u64 }
    }

    /// The first bytes `head` of a file of `size` bytes (a `size` below `head`'s length is
    /// taken as that length).
    pub fn head(head: &'a [u8], size: u64) -> Self {
        Self { head, size: size.max(head.len() as u64) }
    }

    /// The bytes read.
    pub fn bytes(&self) -> &'a [u8] {
        self.head
    }

    /// The file's size.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// The file's length for a refusal's sentence.
    fn len(&self) -> usize {
        usize::try_from(self.size).unwrap_or(usize::MAX)
    }

    /// `[start, start + len)`: the bytes, `Ok(None)` if the range is not wholly inside the
    /// file, or [`Refusal::BeyondHead`] if it is but reaches past the head.
    fn range(&self, start: u64, len: u64) -> Result<Option<&'a [u8]>, Refusal> {
        let Some(end) = start.checked_add(len).filter(|&e| e <= self.size) else { return Ok(None) };
        let (Ok(s), Ok(e)) = (usize::try_from(start), usize::try_from(end)) else { return Ok(None) };
        match self.head.get(s..e) {
            Some(b) => Ok(Some(b)),
            None => Err(Refusal::BeyondHead { end }),
        }
    }
}

impl<'a> From<&'a [u8]> for FileBytes<'a> {
    fn from(bytes: &'a [u8]) -> Self {
        Self::whole(bytes)
    }
}

impl<'a> From<&'a Vec<u8>> for FileBytes<'a> {
    fn from(bytes: &'a Vec<u8>) -> Self {
        Self::whole(bytes)
    }
}

use header::{EM_AARCH64, ET_DYN, ET_EXEC, FileHeader, PHDR_SIZE, ProgramHeader, pf, pt};
pub use refusal::Refusal;

/// The most program headers Linux reads: 64 KiB of them (`load_elf_phdrs`).
pub const MAX_PHNUM: usize = 65536 / PHDR_SIZE;

/// The address space a program is loaded into, and the loader's policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// The page size the segments are mapped with (a power of two).
    pub page_size: u64,
    /// The lowest address a segment may occupy (Linux's `vm.mmap_min_addr`).
    pub min_addr: u64,
    /// One past the highest user address (`TASK_SIZE`).
    pub task_size: u64,
    /// Where a static PIE goes (Linux's `ELF_ET_DYN_BASE`, before alignment).
    pub pie_base: u64,
    /// Refuse W+X segments and an executable stack.
    pub w_xor_x: bool,
}

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

impl Prot {
    fn from_flags(flags: u32) -> Self {
        Self { read: flags & pf::R != 0, write: flags & pf::W != 0, exec: flags & pf::X != 0 }
    }
}

/// One PT_LOAD segment with memory, already moved by the load bias. Its file bytes,
/// `[offset, offset + filesz)`, are inside the file; the rest of its memory is zero.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// Virtual address of the first byte.
    pub vaddr: u64,
    /// Bytes in memory.
    pub memsz: u64,
    /// Bytes from the file (the rest is zero).
    pub filesz: u64,
    /// Offset of those bytes in the file (0 when `filesz` is 0).
    pub offset: u64,
    /// Permissions.
    pub prot: Prot,
}

impl Segment {
    /// One past its last byte.
    pub fn end(&self) -> u64 {
        self.vaddr + self.memsz
    }
}

/// What the loader needs to map and start the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executable {
    /// ET_DYN (a static PIE) rather than ET_EXEC.
    pub pie: bool,
    /// What was added to every address (0 for ET_EXEC).
    pub bias: u64,
    /// Entry point (biased).
    pub entry: u64,
    /// The PT_LOAD segments with memory, in program header order.
    pub segments: Vec<Segment>,
    /// Where the program headers are in memory (`AT_PHDR`): computed as Linux does, from the
    /// PT_LOAD whose file bytes hold `e_phoff`; the bias alone when none does.
    pub phdr: u64,
    /// Number of program headers (`AT_PHNUM`).
    pub phnum: u16,
    /// Lowest and highest+1 address of the executable segments (for the code window).
    pub exec_range: Option<(u64, u64)>,
    /// PT_GNU_STACK asks for an executable stack.
    pub exec_stack: bool,
    /// `GNU_PROPERTY_AARCH64_FEATURE_1_AND` bits of the property note (BTI is bit 0).
    pub aarch64_features: u32,
    /// The interpreter's path (PT_INTERP), without its NUL: `(offset, length)` in the file.
    pub interp: Option<(usize, usize)>,
}

impl Executable {
    /// The interpreter's path, if the program names one.
    pub fn interp_path<'a>(&self, bytes: &'a [u8]) -> Option<&'a [u8]> {
        let (at, len) = self.interp?;
        bytes.get(at..at + len)
    }
}

/// Where an ET_DYN file goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Placement {
    /// The program: at [`Limits::pie_base`], aligned as Linux's `load_bias`.
    Program,
    /// An interpreter: its lowest page at this address (the kernel found the room).
    At(u64),
}

/// `PATH_MAX`: the longest interpreter path, its NUL included.
const PATH_MAX: u64 = 4096;

/// Parses and validates `bytes` as an arm64 executable to load into `limits`: a static
/// program, a static PIE (at [`Limits::pie_base`]) or a dynamically linked one (its interpreter
/// named in [`Executable::interp`]).
///
/// # Errors
/// The first rule (in Linux's order) the file breaks.
pub fn parse<'a>(file: impl Into<FileBytes<'a>>, limits: &Limits) -> Result<Executable, Refusal> {
    parse_placed(file.into(), limits, Placement::Program)
}

/// Parses `bytes` as a program interpreter (the dynamic loader, `ld-linux-aarch64.so.1`) whose
/// lowest page the kernel puts at `base` (an ET_EXEC interpreter stays where it is linked), as
/// Linux's `load_elf_interp`. Its own PT_INTERP, if any, is ignored, as Linux ignores it.
///
/// # Errors
/// The first rule the file breaks.
pub fn parse_at<'a>(
    file: impl Into<FileBytes<'a>>,
    limits: &Limits,
    base: u64,
) -> Result<Executable, Refusal> {
    let mut exe = parse_placed(file.into(), limits, Placement::At(base))?;
    exe.interp = None;
    Ok(exe)
}

/// The span an ET_DYN file's PT_LOADs cover, from the page of the lowest to the end of the
/// highest, and the alignment its segments ask (their largest power-of-two `p_align`, at least
/// a page): what the kernel needs to find room for an interpreter before [`parse_at`].
///
/// # Errors
/// The file's header or program headers are malformed, or it maps nothing.
pub fn load_span<'a>(file: impl Into<FileBytes<'a>>, limits: &Limits) -> Result<(u64, u64), Refusal> {
    let file = file.into();
    let header = check_header(file)?;
    let phdrs = read_program_headers(file, &header)?;
    let page_start = |a: u64| a & !(limits.page_size - 1);
    let loads = phdrs.iter().filter(|ph| ph.kind == pt::LOAD);
    let low = loads.clone().map(|ph| page_start(ph.vaddr)).min().ok_or(Refusal::NothingToLoad)?;
    let high = loads.clone().map(|ph| ph.vaddr.wrapping_add(ph.memsz)).max().unwrap_or(low);
    let align =
        loads.map(|ph| ph.align).filter(|a| a.is_power_of_two()).max().unwrap_or(0).max(limits.page_size);
    let len = high.wrapping_sub(low);
    if len == 0 || len > limits.task_size {
        return Err(Refusal::EmptySpan);
    }
    Ok((len.next_multiple_of(limits.page_size), align))
}

fn parse_placed(file: FileBytes<'_>, limits: &Limits, placement: Placement) -> Result<Executable, Refusal> {
    let header = check_header(file)?;
    let phdrs = read_program_headers(file, &header)?;

    // Linux's first pass: the interpreter (the first PT_INTERP), and the last PT_GNU_PROPERTY.
    let mut property = None;
    let mut interp = None;
    for ph in &phdrs {
        match ph.kind {
            pt::INTERP if interp.is_none() => interp = Some(interpreter(file, ph)?),
            pt::GNU_PROPERTY => property = Some(*ph),
            _ => {}
        }
    }
    // The second: the last PT_GNU_STACK decides.
    let exec_stack =
        phdrs.iter().rev().find(|ph| ph.kind == pt::GNU_STACK).is_some_and(|ph| ph.flags & pf::X != 0);
    if exec_stack && limits.w_xor_x {
        return Err(Refusal::ExecutableStack);
    }
    let aarch64_features = match property {
        Some(ph) => {
            // Read as a short read of the file: up to its end, which the head must reach.
            let end = ph.offset.saturating_add(ph.filesz.min(property::NOTE_MAX + 1)).min(file.size);
            if ph.filesz <= property::NOTE_MAX && end > file.head.len() as u64 {
                return Err(Refusal::BeyondHead { end });
            }
            property::aarch64_features(file.head, ph.offset, ph.filesz).map_err(Refusal::PropertyNote)?
        }
        None => 0,
    };

    let mut loads: Vec<(usize, ProgramHeader)> = with_room(phdrs.len())?;
    loads.extend(phdrs.iter().copied().enumerate().filter(|(_, ph)| ph.kind == pt::LOAD));
    let bias = match (header.kind == ET_DYN, placement) {
        (false, _) => 0,
        (true, Placement::Program) => load_bias(&loads, limits)?,
        (true, Placement::At(base)) => {
            let first = loads.first().map_or(0, |(_, ph)| ph.vaddr & !(limits.page_size - 1));
            base.wrapping_sub(first)
        }
    };

    let page = limits.page_size;
    // Every vector has its room before it is filled: an exhausted heap is a refusal, not a panic.
    let mut segments = with_room(loads.len())?;
    let mut indices = with_room(loads.len())?;
    let mut phdr_addr = 0u64;
    for &(index, ph) in &loads {
        if ph.filesz != 0 && ph.offset % page != ph.vaddr % page {
            return Err(linked_for_smaller_pages(index, &ph, page).unwrap_or(Refusal::NotCongruent {
                index,
                vaddr: ph.vaddr,
                offset: ph.offset,
            }));
        }
        if ph.filesz > ph.memsz {
            return Err(Refusal::FileLargerThanMemory { index, filesz: ph.filesz, memsz: ph.memsz });
        }
        let vaddr = ph.vaddr.wrapping_add(bias);
        // Linux checks the unbiased range (BAD_ADDR(p_vaddr), TASK_SIZE - p_memsz < p_vaddr),
        // and the mapping at the biased address must fit too, above mmap_min_addr.
        let fits = |start: u64| {
            start.checked_add(ph.memsz).is_some_and(|end| end <= limits.task_size) && start < limits.task_size
        };
        let above_min = ph.memsz == 0 || vaddr - vaddr % page >= limits.min_addr;
        if !fits(ph.vaddr) || !fits(vaddr) || !above_min {
            return Err(Refusal::OutsideUserRange {
                index,
                vaddr: ph.vaddr,
                memsz: ph.memsz,
                bias,
                min: limits.min_addr,
                end: limits.task_size,
            });
        }
        if ph.filesz != 0 && ph.offset.checked_add(ph.filesz).is_none_or(|end| end > file.size) {
            return Err(Refusal::FileBytesOutsideFile {
                index,
                offset: ph.offset,
                filesz: ph.filesz,
                len: file.len(),
            });
        }
        // AT_PHDR, as Linux finds it (the sum cannot wrap: the file bytes are inside the file).
        if ph.offset <= header.phoff && header.phoff < ph.offset + ph.filesz {
            phdr_addr = header.phoff - ph.offset + ph.vaddr;
        }
        if ph.memsz == 0 {
            continue;
        }
        let prot = Prot::from_flags(ph.flags);
        if prot.write && prot.exec && limits.w_xor_x {
            return Err(Refusal::WritableAndExecutable { index, vaddr });
        }
        if !(prot.read || prot.write || prot.exec) {
            return Err(Refusal::NoPermissions { index, vaddr });
        }
        let offset = if ph.filesz == 0 { 0 } else { ph.offset };
        segments.push(Segment { vaddr, memsz: ph.memsz, filesz: ph.filesz, offset, prot });
        indices.push(index);
    }
    if segments.is_empty() {
        return Err(Refusal::NothingToLoad);
    }
    check_no_shared_page(&segments, &indices, page).map_err(|refusal| match refusal {
        Refusal::SharedPage { first, second, .. } => [first, second]
            .into_iter()
            .find_map(|i| phdrs.get(i).and_then(|ph| linked_for_smaller_pages(i, ph, page)))
            .unwrap_or(refusal),
        other => other,
    })?;

    let entry = header.entry.wrapping_add(bias);
    if entry >= limits.task_size {
        return Err(Refusal::EntryOutside { entry });
    }
    let exec_range = segments.iter().filter(|s| s.prot.exec).fold(None, |r: Option<(u64, u64)>, s| {
        Some(r.map_or((s.vaddr, s.end()), |(a, b)| (a.min(s.vaddr), b.max(s.end()))))
    });
    Ok(Executable {
        pie: header.kind == ET_DYN,
        bias,
        entry,
        segments,
        phdr: phdr_addr.wrapping_add(bias),
        phnum: header.phnum,
        exec_range,
        exec_stack,
        aarch64_features,
        interp,
    })
}

/// Linux's PT_INTERP checks: 2 to `PATH_MAX` bytes (`ENOEXEC`), read from the file (a short read
/// is `EIO`), the last of them a NUL (`ENOEXEC`). The path, without its NUL.
fn interpreter(file: FileBytes<'_>, ph: &ProgramHeader) -> Result<(usize, usize), Refusal> {
    if ph.filesz > PATH_MAX || ph.filesz < 2 {
        return Err(Refusal::BadInterpreter { size: ph.filesz });
    }
    let outside = Refusal::InterpreterOutsideFile { offset: ph.offset, size: ph.filesz };
    let path = file.range(ph.offset, ph.filesz)?.ok_or(outside)?;
    if path.last() != Some(&0) {
        return Err(Refusal::BadInterpreter { size: ph.filesz });
    }
    // Inside the head, so the offset fits a usize.
    Ok((ph.offset as usize, path.len() - 1))
}

/// The ELF header checks of `load_elf_binary`, and ours (class, byte order) in between.
fn check_header(file: FileBytes<'_>) -> Result<FileHeader, Refusal> {
    let bytes = file.range(0, header::EHDR_SIZE as u64)?.ok_or(Refusal::TooShort { len: file.len() })?;
    let header = FileHeader::read(bytes).ok_or(Refusal::TooShort { len: file.len() })?;
    if header.magic != *b"\x7fELF" {
        return Err(Refusal::NotElf);
    }
    if header.class != 2 {
        return Err(Refusal::NotElf64 { class: header.class });
    }
    if header.data != 1 {
        return Err(Refusal::NotLittleEndian { data: header.data });
    }
    if header.kind != ET_EXEC && header.kind != ET_DYN {
        return Err(Refusal::NotExecutable { kind: header.kind });
    }
    if header.machine != EM_AARCH64 {
        return Err(Refusal::WrongMachine { machine: header.machine });
    }
    Ok(header)
}

/// `load_elf_phdrs`: the whole table, read from anywhere in the file.
fn read_program_headers(file: FileBytes<'_>, header: &FileHeader) -> Result<Vec<ProgramHeader>, Refusal> {
    if usize::from(header.phentsize) != PHDR_SIZE {
        return Err(Refusal::BadPhentsize { size: header.phentsize });
    }
    let count = usize::from(header.phnum);
    if count == 0 {
        return Err(Refusal::NoProgramHeaders);
    }
    if count > MAX_PHNUM {
        return Err(Refusal::TooManyProgramHeaders { phnum: header.phnum });
    }
    let size = (count * PHDR_SIZE) as u64;
    let outside = Refusal::HeadersOutsideFile { phoff: header.phoff, size, len: file.len() };
    let table = file.range(header.phoff, size)?.ok_or(outside)?;
    let mut phdrs = with_room(count)?;
    for chunk in table.chunks_exact(PHDR_SIZE) {
        phdrs.push(ProgramHeader::read(chunk).ok_or(outside)?);
    }
    Ok(phdrs)
}

/// An empty vector with room for `n` elements, or [`Refusal::OutOfMemory`].
fn with_room<T>(n: usize) -> Result<Vec<T>, Refusal> {
    let mut v = Vec::new();
    v.try_reserve_exact(n).map_err(|_| Refusal::OutOfMemory)?;
    Ok(v)
}

/// The clearer reason when a PT_LOAD that cannot be mapped with `page`-byte pages was linked
/// for smaller ones: its `p_align` (more than 1, which means "no constraint") is below the page
/// size. Linux refuses the same files (`vm_mmap` of an offset that is not page-aligned gives
/// `EINVAL`), without naming the cause; a file whose segments happen to fit the larger pages
/// loads whatever its `p_align`, as on Linux.
fn linked_for_smaller_pages(index: usize, ph: &ProgramHeader, page: u64) -> Option<Refusal> {
    (ph.kind == pt::LOAD && ph.align > 1 && ph.align < page).then_some(Refusal::LinkedForSmallerPages {
        index,
        align: ph.align,
        page,
    })
}

/// Linux's `load_bias` for ET_DYN without an interpreter, placed at `pie_base` aligned to the
/// largest power-of-two `p_align` (`maximum_alignment`), minus the first PT_LOAD's page.
fn load_bias(loads: &[(usize, ProgramHeader)], limits: &Limits) -> Result<u64, Refusal> {
    let Some((_, first)) = loads.first() else {
        return Ok(0); // nothing is mapped: refused below as NothingToLoad
    };
    let page_start = |a: u64| a & !(limits.page_size - 1);
    // total_mapping_size, in Linux's unsigned arithmetic.
    let low = loads.iter().map(|(_, ph)| page_start(ph.vaddr)).min().unwrap_or(0);
    let high = loads.iter().map(|(_, ph)| ph.vaddr.wrapping_add(ph.memsz)).max().unwrap_or(0);
    if high.wrapping_sub(low) == 0 {
        return Err(Refusal::EmptySpan);
    }
    let alignment = loads
        .iter()
        .map(|(_, ph)| ph.align)
        .filter(|a| a.is_power_of_two())
        .max()
        .unwrap_or(0)
        .max(limits.page_size);
    Ok(page_start((limits.pie_base & !(alignment - 1)).wrapping_sub(first.vaddr)))
}

/// This loader gives each page one owner: two segments may not both reach into one page.
fn check_no_shared_page(segments: &[Segment], indices: &[usize], page: u64) -> Result<(), Refusal> {
    let mut spans: Vec<(u64, u64, usize)> = with_room(segments.len())?;
    spans.extend(
        segments
            .iter()
            .zip(indices)
            .map(|(s, &i)| (s.vaddr - s.vaddr % page, s.end().next_multiple_of(page), i)),
    );
    spans.sort_unstable();
    for pair in spans.windows(2) {
        let ((_, a_end, a), (b_start, _, b)) = (pair[0], pair[1]);
        if b_start < a_end {
            return Err(Refusal::SharedPage { first: a.min(b), second: a.max(b), page: b_start });
        }
    }
    Ok(())
}
