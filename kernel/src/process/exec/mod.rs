//! `execve` of a program from the initramfs, as Linux's fs/exec.c (`do_execveat_common`,
//! `bprm_stack_limits`, `copy_strings`, `begin_new_exec`) does it, in its order: the path
//! (`EFAULT`, `ENAMETOOLONG`, `ENOENT` for an empty one), the file (`ENOENT`, `EACCES` for one
//! that is not a regular file, `ELOOP`), then the argument and environment strings (`EFAULT`;
//! `E2BIG` for one string above 32 pages or all of them, with their pointers, above a quarter
//! of `RLIMIT_STACK`), then the format (`ENOEXEC`).
//!
//! The new memory is built completely (segments, stack, strings) before the old one is touched,
//! so every failure up to there, `ENOMEM` included, returns to the old program unchanged. Then
//! the process switches TTBR0 to the new address space (with an ASID of its own) and drops its
//! reference to the old one, which is torn down (its ASID invalidated everywhere first) unless a
//! vfork parent still runs on it; handled signals return to their defaults, close-on-exec
//! descriptors close, and a vfork parent runs on.
pub mod elf;
pub mod load;
pub mod stack;
pub mod tiny_elf;

use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use initramfs::cpio::{Archive, LookupError, is_cpio};
use mm::addr::PAGE_SIZE;
use mm::paging::{PageTable, VaRange};
use mm::tlb::TlbIssuer;
use mm::tlb::issue::Aarch64Tlb;
use mm::vm::Layout;
use spin::Mutex;

use super::{Action, Mm, Thread};
use crate::arch::aarch64::exception::{FpState, TrapFrame};
use crate::arch::aarch64::user::PSTATE_EL0;
use crate::memory::asids::AsidTargets;
use crate::memory::kernel_map::FrameTranslation;
use crate::memory::uaccess::copy_in;
use crate::memory::{fallible, frames, tlb};
use linux_abi::Errno;

/// The initramfs (a cpio archive), if the boot had one.
static INITRAMFS: Mutex<Option<&'static [u8]>> = Mutex::new(None);

/// Too many levels of symbolic links.
/// Linux's `MAX_ARG_STRLEN`: one argument or environment string, its NUL included.
const MAX_ARG_STRLEN: usize = 32 * PAGE_SIZE as usize;

/// Makes `archive` the files `execve` finds (called at boot with a cpio initrd).
pub fn set_initramfs(archive: &'static [u8]) {
    if is_cpio(archive) {
        *INITRAMFS.lock() = Some(archive);
    }
}

fn done(frame: &mut TrapFrame, result: Result<u64, Errno>) -> Action {
    Action::reply(frame, result)
}

/// The strings of a `char *const []` vector: all bytes (each string with its NUL) and where each
/// starts.
struct Strings {
    bytes: Vec<u8>,
    starts: Vec<usize>,
}

impl Strings {
    fn get(&self, i: usize) -> &[u8] {
        let end = self.starts.get(i + 1).copied().unwrap_or(self.bytes.len());
        &self.bytes[self.starts[i]..end - 1]
    }

    /// Each string, without its NUL (`ENOMEM` when the heap cannot hold the list).
    fn slices(&self) -> Result<Vec<&[u8]>, mm::vm::Errno> {
        let mut out = Vec::new();
        fallible::reserve(&mut out, self.starts.len())?;
        out.extend((0..self.starts.len()).map(|i| self.get(i)));
        Ok(out)
    }
}

/// Copies the vector at `vector` (0: empty) into `out`, with `budget` bytes left for strings
/// and pointers (each pointer costs 8, as in Linux's accounting).
fn copy_vector(vector: u64, out: &mut Strings, budget: &mut usize) -> Result<(), Errno> {
    if vector == 0 {
        return Ok(());
    }
    let mut i = 0u64;
    loop {
        let mut word = [0u8; 8];
        copy_in(&mut word, vector.wrapping_add(i * 8)).map_err(|_| Errno::EFAULT)?;
        let s = u64::from_le_bytes(word);
        if s == 0 {
            return Ok(());
        }
        *budget = budget.checked_sub(8).ok_or(Errno::E2BIG)?;
        out.starts.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        out.starts.push(out.bytes.len());
        copy_string(s, out, budget)?;
        i += 1;
    }
}

/// Copies one NUL-terminated string (a page at a time: never past the page holding its end).
fn copy_string(at: u64, out: &mut Strings, budget: &mut usize) -> Result<(), Errno> {
    let mut len = 0usize;
    let mut chunk = [0u8; 256];
    loop {
        let addr = at.wrapping_add(len as u64);
        let room = (PAGE_SIZE - (addr & (PAGE_SIZE - 1))).min(chunk.len() as u64) as usize;
        copy_in(&mut chunk[..room], addr).map_err(|_| Errno::EFAULT)?;
        let nul = chunk[..room].iter().position(|&b| b == 0);
        let take = nul.map_or(room, |n| n + 1);
        if len + take > MAX_ARG_STRLEN {
            return Err(Errno::E2BIG);
        }
        *budget = budget.checked_sub(take).ok_or(Errno::E2BIG)?;
        out.bytes.try_reserve(take).map_err(|_| Errno::ENOMEM)?;
        out.bytes.extend_from_slice(&chunk[..take]);
        len += take;
        if nul.is_some() {
            return Ok(());
        }
    }
}

/// `execve(path, argv, envp)`.
pub fn execve(thread: &mut Thread, frame: &mut TrapFrame, path: u64, argv: u64, envp: u64) -> Action {
    let p = thread.process.clone();
    let path = match crate::memory::uaccess::read_path(path) {
        Ok(path) => path,
        Err(e) => return done(frame, Err(e)),
    };
    if path.is_empty() {
        return done(frame, Err(Errno::ENOENT));
    }
    let Some(archive) = *INITRAMFS.lock() else { return done(frame, Err(Errno::ENOENT)) };
    // `/proc/self/exe` (busybox runs its applets through it) names the program running now.
    let (exe, exe_len) = p.posix.exe();
    let path = if path == b"/proc/self/exe" { &exe[..exe_len] } else { &path[..] };
    let Ok(name) = core::str::from_utf8(path) else { return done(frame, Err(Errno::ENOENT)) };
    let entry = match Archive(archive).lookup(name) {
        Ok(entry) if entry.is_file() => entry,
        Ok(_) => return done(frame, Err(Errno::EACCES)),
        Err(LookupError::TooManyLinks) => return done(frame, Err(Errno::ELOOP)),
        Err(LookupError::Cpio(_)) => return done(frame, Err(Errno::ENOEXEC)),
        Err(LookupError::NotFound(_)) => return done(frame, Err(Errno::ENOENT)),
        Err(LookupError::OutOfMemory) => return done(frame, Err(Errno::ENOMEM)),
    };
    // Linux's bprm_stack_limits: a quarter of the stack limit (at most 3/4 of 8 MiB's quarter
    // times 3, at least ARG_MAX's 128 KiB) for the strings and their pointers.
    let stack = p.rlimits.lock().get(mm::vm::limits::resource::RLIMIT_STACK).cur;
    let mut budget = (stack / 4).clamp(128 << 10, 6 << 20) as usize;
    let mut args = Strings { bytes: Vec::new(), starts: Vec::new() };
    let mut env = Strings { bytes: Vec::new(), starts: Vec::new() };
    if let Err(e) =
        copy_vector(argv, &mut args, &mut budget).and_then(|()| copy_vector(envp, &mut env, &mut budget))
    {
        return done(frame, Err(e));
    }
    if args.starts.is_empty() {
        // Linux 5.18+: an empty argv gets "" as argv[0].
        if fallible::push(&mut args.starts, 0).and_then(|()| fallible::push(&mut args.bytes, 0)).is_err() {
            return done(frame, Err(Errno::ENOMEM));
        }
    }
    let mut image: Vec<u64> = Vec::new();
    if image.try_reserve_exact(entry.data.len().div_ceil(8)).is_err() {
        return done(frame, Err(Errno::ENOMEM));
    }
    image.extend(entry.data.chunks(8).map(|c| {
        let mut b = [0u8; 8];
        b[..c.len()].copy_from_slice(c);
        u64::from_le_bytes(b)
    }));
    // SAFETY: `image` holds `entry.data.len()` initialised bytes.
    let bytes = unsafe { core::slice::from_raw_parts(image.as_ptr().cast::<u8>(), entry.data.len()) };
    let exe = match crate::process::exec::elf::parse(bytes) {
        Ok(exe) => exe,
        Err(::elf::Refusal::OutOfMemory) => return done(frame, Err(Errno::ENOMEM)),
        Err(_) => return done(frame, Err(Errno::ENOEXEC)),
    };
    if p.threads.load(Ordering::Acquire) > 1 {
        // Linux ends the other threads first (de_thread); not done here.
        return done(frame, Err(Errno::EAGAIN));
    }
    let (Ok(argv), Ok(envp)) = (args.slices(), env.slices()) else { return done(frame, Err(Errno::ENOMEM)) };
    let Ok(asid) = fallible::arc(Mutex::new(mm::asid::AsidContext::new())) else {
        return done(frame, Err(Errno::ENOMEM));
    };
    let Ok(table) = PageTable::new(FrameTranslation, VaRange::Lower) else {
        return done(frame, Err(Errno::ENOMEM));
    };
    let features = tlb::features();
    let brk_start =
        exe.segments.iter().map(|s| (s.vaddr + s.memsz).next_multiple_of(PAGE_SIZE)).max().unwrap_or(0);
    let layout = Layout { ram_pages: frames::usage().1 as u64, ..Layout::linux(brk_start) };
    let targets = AsidTargets::new(asid.clone());
    let mm = Mm::new(
        table,
        TlbIssuer::new(Aarch64Tlb, features.errata),
        features,
        targets,
        frames::UserFrames,
        layout,
    );
    // An address space from here on: dropping it on a failure frees the memory.
    let Ok(space) = super::Vmspace::new(mm, asid) else { return done(frame, Err(Errno::ENOMEM)) };
    let regs = {
        let mut mm = space.lock();
        let Ok(regs) = super::load(&mut mm, &exe, bytes, &argv, &envp) else {
            return done(frame, Err(Errno::ENOMEM));
        };
        use mm::vm::limits::resource::{RLIMIT_AS, RLIMIT_DATA};
        let limits = *p.rlimits.lock();
        mm.vm_mut().set_rlimits(limits.get(RLIMIT_AS), limits.get(RLIMIT_DATA));
        regs
    };
    // The point of no return: the new table goes live here with its own ASID; then the old
    // space loses this process's reference (the last one tears it down after every CPU's
    // entries of its ASID are gone; a vfork parent may still run on it).
    crate::memory::vmspace::switch_to(space.clone(), crate::cpu::current_cpu());
    drop(p.replace_space(space));
    p.signals.exec_reset();
    p.posix.files.lock().close_on_exec();
    thread.posix.name = super::posix::name_from_path(name);
    p.posix.set_exe(name.as_bytes());
    thread.posix.robust_list = 0;
    thread.clear_child_tid = 0;
    {
        use aarch64_cpu::registers::{TPIDR_EL0, Writeable};
        TPIDR_EL0.set(0);
        thread.tpidr = 0;
    }
    super::family::release_vfork(&p);
    frame.x = [0; 31];
    frame.sp_el0 = regs.sp;
    frame.elr = regs.pc;
    frame.spsr = PSTATE_EL0;
    // SAFETY: `frame` comes from the EL0 exception entry being handled (FpState::below's rule); the
    // exit path reloads the registers from there.
    unsafe { *FpState::below(frame) = FpState::ZERO };
    Action::Continue
}
