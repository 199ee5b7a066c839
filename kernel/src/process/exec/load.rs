//! Loading an executable into a fresh address space: its `PT_LOAD` segments, the code window,
//! its interpreter when it names one (`PT_INTERP`: the dynamic loader, placed as code in the
//! window beside the program's text, as Linux's `load_elf_interp` places it where `mmap` finds
//! room), the stack area and the initial stack (argv, envp, auxv), for the first process
//! (`process::spawn`) and `execve` alike. Apart from the process's lifetime in `process`: it is
//! the ELF-to-memory step, which never allocates on the heap so `execve` can fail cleanly when
//! there is none.
//!
//! **Segments come from the page cache.** A program (or interpreter) whose file has a page cache
//! (a file of the RAM file systems: every program of the tree) has each `PT_LOAD` segment mapped
//! from that cache, privately, as Linux's `elf_map` does (`UserMemory::map_file_segment`): its
//! text is the cache's frames, shared with every process running it and with `read`, and only
//! a page written (the data segment's, the last file page of a segment with a bss, which is
//! zeroed past the file's bytes at once as Linux's `padzero`) becomes the process's own. Bytes
//! with no page cache behind them — the test image's built-in programs, a first program whose
//! bytes are not its file's — are copied into anonymous memory instead (`map_image`), which
//! gives the same contents; a page cache is not made for them, because nothing else could
//! share it.
use mm::addr::PAGE_SIZE;
use mm::user::object::{FileSegment, ObjectRef};
use mm::vm::{Prot, VmaFlags};

use super::image::ProgramImage;
use super::{elf, stack};
use crate::arch::aarch64::cpu;

/// Programs whose code lies below this get the vDSO at the top of the mmap area.
const LOW_4GIB: u64 = 1 << 32;

/// `GNU_PROPERTY_AARCH64_FEATURE_1_BTI`: the program's code is built with landing pads.
const GNU_PROPERTY_AARCH64_FEATURE_1_BTI: u32 = 1 << 0;
use crate::arch::aarch64::user::{PSTATE_EL0, UserRegs};
use crate::process::aslr::Draws;
use crate::process::{Mm, STACK_EXPAND};

/// The step of [`load`] that failed, and why (printed by `spawn`; `execve` returns the errno).
/// No heap: `execve` must be able to fail when there is none.
#[derive(Clone, Copy, Debug)]
pub(crate) struct LoadError {
    step: LoadStep,
    errno: mm::vm::Errno,
}

#[derive(Clone, Copy, Debug)]
enum LoadStep {
    ProtNone,
    Segment(u64),
    Interpreter,
    Stack,
    CodeWindow,
    Vdso,
    InitialStack,
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let e = self.errno;
        match self.step {
            LoadStep::ProtNone => write!(f, "a PROT_NONE segment"),
            LoadStep::Segment(at) => write!(f, "mapping the segment at {at:#x} failed: {e:?}"),
            LoadStep::Interpreter => write!(f, "the interpreter: {e:?}"),
            LoadStep::Stack => write!(f, "stack: {e:?}"),
            LoadStep::Vdso => write!(f, "the vDSO: {e:?}"),
            LoadStep::CodeWindow => write!(f, "code window: {e:?}"),
            LoadStep::InitialStack => write!(f, "writing the initial stack failed: {e:?}"),
        }
    }
}

/// A program loaded: the registers it starts with, and the record `/proc` shows of it (its
/// file still to be set by the caller, which knows it).
pub(crate) struct Loaded {
    /// The entry registers.
    pub regs: UserRegs,
    /// What `/proc/PID/{maps,cmdline,environ,auxv}` show of the program.
    pub image: ProgramImage,
}

/// The ids a program starts with, for its auxiliary vector (`AT_UID`, `AT_EUID`, `AT_GID`,
/// `AT_EGID`): the caller's credentials.
#[derive(Clone, Copy, Default)]
pub(crate) struct Ids {
    pub uid: u32,
    pub euid: u32,
    pub gid: u32,
    pub egid: u32,
}

/// A program file to load: its bytes, and its page cache when it has one (the segments are then
/// mapped from the cache; module documentation).
#[derive(Clone)]
pub(crate) struct ProgramFile<'a> {
    /// The file's bytes (its headers are parsed from them): all of them, or, when `cache` maps
    /// it, the first ones, as many as its headers need.
    pub bytes: &'a [u8],
    /// The file's size.
    pub size: u64,
    /// The file's page cache, holding the same bytes.
    pub cache: Option<ObjectRef>,
}

/// Maps the segments of `exe` (whose file is `program`), and of its interpreter (`interp`: the
/// file `PT_INTERP` names), the stack and the initial stack contents (`ids` in the auxiliary
/// vector), the stack and the heap where `draws` say (`process::aslr`).
#[allow(clippy::too_many_arguments, reason = "each is one input of the loaded program")]
pub(crate) fn load<S: AsRef<[u8]>>(
    mm: &mut Mm,
    draws: &Draws,
    exe: &elf::Executable,
    program: ProgramFile<'_>,
    interp: Option<ProgramFile<'_>>,
    ids: Ids,
    argv: &[S],
    envp: &[S],
) -> Result<Loaded, LoadError> {
    let failed = |step| move |errno| LoadError { step, errno };
    let mut image = ProgramImage::of(exe).map_err(failed(LoadStep::InitialStack))?;
    map_segments(mm, exe, &program)?;
    // The code window contains the program's own text where it fits (docs/mm.md §8).
    mm.vm_mut().init_code_window(exe.exec_range).map_err(failed(LoadStep::CodeWindow))?;
    // Code without a place of its own (the interpreter, the libraries) goes from a random floor.
    mm.vm_mut().set_code_floor(draws.code_floor);
    // Then the heap's random start: from the window's end when the bss ended inside it.
    mm.vm_mut().randomise_brk(draws.brk_offset);
    // The interpreter goes where the kernel finds room for its whole span, as code: into the
    // window beside the program's text (`VmMap::place_image`); it starts first, with the
    // program's entry in `AT_ENTRY` and its own base in `AT_BASE`.
    let segments_end = |e: &elf::Executable| {
        e.segments.iter().map(|s| (s.vaddr + s.memsz).next_multiple_of(PAGE_SIZE)).max()
    };
    let mut code_end = segments_end(exe).unwrap_or(0);
    let dynamic = interp.is_some();
    let (base, entry) = match interp {
        None => (0, exe.entry),
        Some(ifile) => {
            let refused = |_| LoadError { step: LoadStep::Interpreter, errno: mm::vm::Errno::ENOEXEC };
            let view = ::elf::FileBytes::head(ifile.bytes, ifile.size);
            let (len, align) = ::elf::load_span(view, &elf::LIMITS).map_err(refused)?;
            let base = mm.vm_mut().place_image(len, align).map_err(failed(LoadStep::Interpreter))?;
            let iexe = elf::parse_interpreter(view, base).map_err(refused)?;
            map_segments(mm, &iexe, &ifile)?;
            code_end = segments_end(&iexe).unwrap_or(code_end);
            image.interp = Some(super::image::Interpreter::of(&iexe).map_err(failed(LoadStep::Interpreter))?);
            (base, iexe.entry)
        }
    };
    // The vDSO and its data page (docs/address-space.md, "The vDSO"): as code just above the
    // interpreter (a random number of pages above when randomising), wherever it is: the
    // libraries go into the same window with it. A static program has no interpreter: just
    // above the program when that is above the low 4 GiB; else, for a program linked low, at
    // the top of the mmap area, where Linux puts it, so that no address a program expects to
    // fault or to be free (NULL plus an offset, 32-bit addresses) holds it.
    let vdso = if dynamic || code_end >= LOW_4GIB {
        crate::vdso::map(mm, code_end + draws.vdso_offset, true)
    } else {
        let len = crate::vdso::VVAR_SIZE + crate::vdso::IMAGE_SIZE;
        crate::vdso::map(mm, draws.mmap_base - len, false)
    }
    .map_err(failed(LoadStep::Vdso))?;
    let mut random = [0u8; 16];
    crate::random::fill(&mut random);
    // AT_SYSINFO_EHDR first, as arm64's ARCH_DLINFO puts it; left out when there is no vDSO.
    let auxv = [
        (stack::at::SYSINFO_EHDR, vdso),
        (stack::at::PHDR, exe.phdr),
        (stack::at::PHENT, 56),
        (stack::at::PHNUM, u64::from(exe.phnum)),
        (stack::at::PAGESZ, PAGE_SIZE),
        (stack::at::BASE, base),
        (stack::at::FLAGS, 0),
        (stack::at::ENTRY, exe.entry),
        (stack::at::UID, u64::from(ids.uid)),
        (stack::at::EUID, u64::from(ids.euid)),
        (stack::at::GID, u64::from(ids.gid)),
        (stack::at::EGID, u64::from(ids.egid)),
        (stack::at::HWCAP, cpu::hwcaps()),
        (stack::at::HWCAP2, cpu::hwcaps2()),
        (stack::at::CLKTCK, 100),
        (stack::at::SECURE, 0),
        (stack::at::MINSIGSTKSZ, stack::MINSIGSTKSZ),
    ];
    // The contents end `stack_pad` below the area's top (Linux's `arch_align_stack` offset).
    let top = draws.stack_top;
    let auxv = if vdso != 0 { &auxv[..] } else { &auxv[1..] };
    let built = stack::build(top - draws.stack_pad, argv, envp, auxv, random)
        .map_err(failed(LoadStep::InitialStack))?;
    // The stack grows down on demand (to RLIMIT_STACK); it starts as the arguments' pages and
    // STACK_EXPAND below them, as Linux's `setup_arg_pages` makes it.
    let size = (top - (built.sp & !(PAGE_SIZE - 1))) + STACK_EXPAND;
    let flags = VmaFlags::STACK.union(VmaFlags::GROWSDOWN);
    mm.vm_mut().map_kernel(top - size, size, Prot::RW, flags).map_err(failed(LoadStep::Stack))?;
    image.stack_top = top;
    mm.write(built.sp, &built.bytes).map_err(failed(LoadStep::InitialStack))?;
    (image.args, image.env, image.auxv) = (built.args, built.env, built.auxv);
    Ok(Loaded { regs: UserRegs { x: [0; 31], sp: built.sp, pc: entry, pstate: PSTATE_EL0 }, image })
}

/// Maps the `PT_LOAD` segments of `exe` (whose file is `file`): each page gets its file bytes
/// (`[vaddr, vaddr + filesz)` from the file at `offset`), the rest zero — from the file's page
/// cache when it has one, else copied from its bytes.
fn map_segments(mm: &mut Mm, exe: &elf::Executable, file: &ProgramFile<'_>) -> Result<(), LoadError> {
    let bytes = file.bytes;
    let failed = |step| move |errno| LoadError { step, errno };
    for seg in &exe.segments {
        let start = seg.vaddr & !(PAGE_SIZE - 1);
        let end = (seg.vaddr + seg.memsz).next_multiple_of(PAGE_SIZE);
        let mut prot = Prot::NONE;
        for (on, bit) in
            [(seg.prot.read, Prot::READ), (seg.prot.write, Prot::WRITE), (seg.prot.exec, Prot::EXEC)]
        {
            if on {
                prot = prot.union(bit);
            }
        }
        // A program marked for BTI has its code in guarded pages (Linux's
        // `arch_elf_adjust_prot`), on a CPU that has the feature.
        if seg.prot.exec && exe.aarch64_features & GNU_PROPERTY_AARCH64_FEATURE_1_BTI != 0 && cpu::has_bti() {
            prot = prot.union(Prot::BTI);
        }
        if mm::user::user_attrs(prot).is_none() {
            return Err(LoadError { step: LoadStep::ProtNone, errno: mm::vm::Errno::EINVAL });
        }
        if let Some(cache) = &file.cache {
            let seg_file =
                FileSegment { vaddr: seg.vaddr, filesz: seg.filesz, memsz: seg.memsz, offset: seg.offset };
            mm.map_file_segment(seg_file, prot, cache.clone())
                .map_err(failed(LoadStep::Segment(seg.vaddr)))?;
            continue;
        }
        // The file bytes of each page: [vaddr, vaddr + filesz) comes from the file at offset.
        let fill = |page: u64| {
            let file_start = seg.vaddr.max(page);
            let file_end = (seg.vaddr + seg.filesz).min(page + PAGE_SIZE);
            if file_start >= file_end {
                return None;
            }
            // `elf` guarantees the segment's file bytes are inside `bytes`: `get` cannot miss.
            let from = (seg.offset + (file_start - seg.vaddr)) as usize;
            let len = (file_end - file_start) as usize;
            Some(((file_start - page) as usize, bytes.get(from..from + len)?))
        };
        mm.map_image(start, end, prot, VmaFlags::IMAGE, fill)
            .map_err(failed(LoadStep::Segment(seg.vaddr)))?;
    }
    Ok(())
}
