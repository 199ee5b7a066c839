//! User processes and their threads: load a static arm64 ELF, run its threads at EL0 on any CPU,
//! and tear the process down without leaking a frame. Their system calls are `syscall`'s, their
//! exceptions (faults, and the signals they become) `trap::user`'s.
//!
//! A [`Process`] is what its threads share: its address space (a [`Vmspace`]: the page table,
//! live in TTBR0 with the space's ASID on every CPU running one of its threads, the areas, the
//! program break, and the set of CPUs whose TLBs may hold its translations; a vfork child shares
//! its parent's), descriptors, signal actions and limits. A [`Thread`] is a saved user
//! context (registers, FP/SIMD state, TPIDR_EL0). The kernel has no per-thread kernel stack: a
//! thread's system call or fault is handled to completion on the CPU's exception stack, and a
//! thread that must wait (futex) or yield has its user context saved and the CPU returns to its
//! scheduler loop (`sched`). User memory is demand-paged and freed on munmap, MADV_DONTNEED and
//! exit, always after the TLB flush that covers it.
//!
//! This module holds the process and thread types and their lifetime (start, teardown, kill);
//! the rest is split by concern: [`exec`] (`execve`, an executable loaded into an address space,
//! the initial stack), [`family`] (fork, vfork, wait, the process table), [`clone`] (how a new
//! thread starts), [`signals`] (their state and delivery), [`posix`] (ids, the descriptor table,
//! names, CPU time), [`robust`] (robust futexes at thread exit) and `task` (a thread as the
//! scheduler's `Task`); the event objects made of processes are [`signalfd`] and [`pidfd`],
//! and [`rseq`] is a thread's restartable sequences (credentials and capabilities are the file
//! layer's `fs::cred`).
pub mod aslr;
pub mod clone;
pub mod exec;
pub mod family;
pub mod pidfd;
pub mod posix;
pub mod robust;
pub mod rseq;
pub mod signalfd;
pub mod signals;
mod task;
pub mod usage;

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ::signal::action::killed_status;
use ::signal::num;
use mm::addr::{PAGE_SIZE, VirtAddr};
use mm::asid::AsidContext;
use mm::paging::{PageTable, VaRange};
use mm::tlb::TlbIssuer;
use mm::tlb::issue::Aarch64Tlb;
pub use mm::user::Access;
use mm::vm::Layout;
use mm::vm::limits::Rlimits;
use spin::Mutex;

use crate::arch::aarch64::exception::FpState;
use crate::arch::aarch64::user::UserRegs;
use crate::memory::asids::AsidTargets;
use crate::memory::kernel_map::FrameTranslation;
pub use crate::memory::vmspace::Vmspace;
use crate::memory::{fallible, frames, tlb};
use exec::load::load;

/// Top of the user stack (exclusive); the stack area ends here, one page below the end of the
/// 48-bit user range (Linux's mmap_base lies 128 MiB lower): 0xffff_ffff_f000 with 4 KiB
/// pages, 0xffff_ffff_c000 with 16 KiB, 0xffff_ffff_0000 with 64 KiB.
/// The task size, not the tree's VA size: the 16 KiB LPA2 tree is 52-bit, the user range 48-bit.
pub const STACK_TOP: u64 = (1 << mm::addr::USER_VA_BITS) - PAGE_SIZE;

/// `vm.mmap_min_addr`: Debian's arm64 Linux 6.1 says 4096 (its `CONFIG_DEFAULT_MMAP_MIN_ADDR`),
/// so page 0 alone is refused, as there (with 16 and 64 KiB pages, the first page: a mapping
/// starts on a page). `mm`'s `Layout::linux` keeps 64 KiB for its host tests.
pub const MMAP_MIN_ADDR: u64 = 4096;

/// The lowest address a mapping may start at: [`MMAP_MIN_ADDR`] rounded up to a page.
pub const LOWEST_MAPPING: u64 = MMAP_MIN_ADDR.next_multiple_of(PAGE_SIZE);

/// The area-map layout of a process whose heap starts at `start_brk` and whose top-down
/// placement starts below `mmap_base` (`mm`'s Linux shape with this kernel's `mmap_min_addr`,
/// RAM size and the exec's draw, `aslr`).
pub fn layout(start_brk: u64, mmap_base: u64) -> Layout {
    Layout {
        ram_pages: frames::usage().1 as u64,
        mmap_min_addr: LOWEST_MAPPING,
        mmap_base,
        ..Layout::linux(start_brk)
    }
}
/// Room the initial stack mapping has below the arguments' pages (Linux's `stack_expand` in
/// `setup_arg_pages`, 128 KiB); from there it grows down on demand, up to `RLIMIT_STACK`
/// (`mm::vm::map::stack`).
pub const STACK_EXPAND: u64 = 128 << 10;

/// Exit status of a process ended by an unhandled SIGSEGV (128 + the signal, as a shell reports it).
pub const STATUS_SEGV: u64 = killed_status(num::SIGSEGV);
/// Exit status of a process the out-of-memory path killed (128 + SIGKILL, as Linux's OOM killer).
pub const STATUS_OOM_KILL: u64 = killed_status(num::SIGKILL);
/// Exit status for an unhandled SIGILL (undefined instruction).
#[cfg(feature = "test-image")]
pub const STATUS_ILL: u64 = killed_status(num::SIGILL);
/// Exit status for an unhandled SIGTRAP (breakpoint).
#[cfg(feature = "test-image")]
pub const STATUS_TRAP: u64 = killed_status(num::SIGTRAP);

pub use crate::memory::vmspace::Mm;

/// A user process: threads sharing an address space, descriptors, signal actions and limits.
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// Its address space (`None` once the last thread has exited); read through
    /// [`space`](Self::space). `execve` replaces it; a vfork child holds its parent's.
    space: Mutex<Option<Arc<Vmspace>>>,
    /// CPUs a thread of the process has run on (bit per CPU), to interrupt when it exits.
    pub cpus: AtomicU64,
    /// Threads not yet exited.
    pub threads: AtomicUsize,
    /// `exit_group` (or a fatal fault) was called: every thread stops at its next kernel entry.
    pub exiting: AtomicBool,
    /// The exit status.
    pub status: AtomicU64,
    /// Torn down: every frame is back.
    pub done: AtomicBool,
    /// Signal actions, pending signals, and each thread's mask and alternate stack.
    pub signals: signals::Signals,
    /// Its resource limits (`prlimit64`); `RLIMIT_AS` and `RLIMIT_DATA` are also in its `VmMap`.
    pub rlimits: Mutex<Rlimits>,
    pub(crate) next_tid: AtomicU32,
    /// Ids, descriptors, CPU time (everything of the ABI that is not memory).
    pub posix: posix::ProcessPosix,
    /// Parent, children, zombies, the exit signal, vfork (`family`).
    pub family: family::Family,
}

impl Process {
    /// A process with one thread to come, neither run nor exiting, on `space`: what the first
    /// program and every fork start as, entered in the process table (`family`). `None` when the
    /// heap cannot hold it (its reference to `space` is dropped then).
    fn new(
        pid: u32,
        space: Arc<Vmspace>,
        signals: signals::Signals,
        rlimits: Rlimits,
        posix: posix::ProcessPosix,
        family: family::Family,
    ) -> Option<Arc<Process>> {
        let process = family::enter(Process {
            pid,
            space: Mutex::new(Some(space)),
            cpus: AtomicU64::new(0),
            threads: AtomicUsize::new(1),
            exiting: AtomicBool::new(false),
            status: AtomicU64::new(0),
            done: AtomicBool::new(false),
            signals,
            rlimits: Mutex::new(rlimits),
            next_tid: AtomicU32::new(pid + 1),
            posix,
            family,
        });
        process.ok()
    }

    /// Its address space; `None` once its last thread has exited. The handle keeps the space
    /// alive while it is used, even if the process execs or exits meanwhile.
    pub fn space(&self) -> Option<Arc<Vmspace>> {
        self.space.lock().clone()
    }

    /// Makes `space` the process's address space (`execve`); returns the old one, to be
    /// dropped once no TTBR0 of this CPU holds it.
    fn replace_space(&self, space: Arc<Vmspace>) -> Option<Arc<Vmspace>> {
        self.space.lock().replace(space)
    }

    /// Drops the process's reference to its address space (its last thread has exited, or it
    /// never ran). The last reference frees the memory, here, outside the handle's lock.
    fn release_space(&self) {
        let space = self.space.lock().take();
        drop(space);
    }
}

/// A thread: a user context waiting to run, or running on one CPU.
pub struct Thread {
    /// Thread id (the first thread's is the pid).
    pub tid: u32,
    /// Its process.
    pub process: Arc<Process>,
    /// Registers.
    pub regs: UserRegs,
    /// FP/SIMD registers.
    pub fp: FpState,
    /// TPIDR_EL0 (the thread pointer).
    pub tpidr: u64,
    /// Its pointer-authentication keys and enabled keys (`arch::aarch64::pauth`).
    pub pac: crate::arch::aarch64::pauth::Keys,
    /// Its tagged-address control: tagged pointers in system calls, MTE's check mode and tag
    /// mask (`arch::aarch64::mte`).
    pub mte: crate::arch::aarch64::mte::TagControl,
    /// `set_tid_address` / `CLONE_CHILD_CLEARTID`: zeroed and futex-woken at exit.
    pub clear_child_tid: u64,
    /// CPUs the thread may run on (bit per CPU).
    pub affinity: u64,
    /// Bytes a blocking pipe write moved into the pipe before it blocked for the rest: its
    /// restart skips them, and a signal ending the wait returns them (`pipe::write`).
    pub pipe_written: u64,
    /// The deadline of a `ppoll`/`pselect6` that waits: its restarts (after a wake-up, or at
    /// the deadline) keep it instead of starting the timeout again (`poll::ppoll`).
    pub poll_deadline: Option<u64>,
    /// The blocking call it is in and what a signal's restart of it needs (`signals::restart`).
    pub call: signals::restart::CallState,
    /// Name, robust list, CPU time.
    pub posix: posix::ThreadPosix,
}

static NEXT_PID: AtomicU32 = AtomicU32::new(1);

/// The process and thread each CPU runs a system call for, as `pid << 32 | tid` (0: none):
/// what `/proc/self` and `/proc/thread-self` name.
static CURRENT: [AtomicU64; crate::cpu::MAX_CPUS] = [const { AtomicU64::new(0) }; crate::cpu::MAX_CPUS];

/// Records that this CPU handles a system call of thread `tid` of process `pid`.
pub fn set_current(pid: u32, tid: u32) {
    if let Some(c) = CURRENT.get(crate::cpu::current_cpu()) {
        c.store(u64::from(pid) << 32 | u64::from(tid), Ordering::Relaxed);
    }
}

/// The process and thread this CPU handles a system call for (`None` outside one).
pub fn current_ids() -> Option<(u32, u32)> {
    let v = CURRENT.get(crate::cpu::current_cpu())?.load(Ordering::Relaxed);
    (v != 0).then_some(((v >> 32) as u32, v as u32))
}

/// Loads `bytes` as a static arm64 executable, runs it with `argv` until every thread has exited
/// (threads may run on every CPU), and returns its exit status.
///
/// # Errors
/// Why the program could not be started (bad ELF, out of memory).
pub fn run(bytes: &[u8], argv: &[&str]) -> Result<u64, String> {
    run_with_env(bytes, argv, initramfs::cmdline::DEFAULT_ENV)
}

/// [`run`] with the environment `envp` (`NAME=VALUE` strings).
///
/// # Errors
/// Why the program could not be started (bad ELF, out of memory).
pub fn run_with_env(bytes: &[u8], argv: &[&str], envp: &[&str]) -> Result<u64, String> {
    let process = spawn(bytes, argv, envp)?;
    family::set_root(&process);
    crate::sched::run_cpu(Some(&|| process.done.load(Ordering::Acquire) && family::live() == 0));
    Ok(process.status.load(Ordering::Acquire))
}

/// Loads `bytes` and queues its first thread; returns the process.
///
/// # Errors
/// Why the program could not be started.
pub fn spawn(bytes: &[u8], argv: &[&str], envp: &[&str]) -> Result<Arc<Process>, String> {
    // The first process's layout: random unless turned off, under the default 8 MiB stack limit.
    let draws = aslr::draw(0, 8 << 20);
    let file = ::elf::FileBytes::whole(bytes);
    let exe = exec::elf::parse_placed(file, draws.pie_base(file)).map_err(|refusal| format!("{refusal}"))?;
    let pid = NEXT_PID.fetch_add(1, Ordering::Relaxed);
    // The real ASID is assigned when a thread first runs (memory::asids); until then the table
    // is reachable by no TTBR and the context has run nowhere, so its flushes (ASID 0, local)
    // cannot matter. From then on each flush asks the allocator where it must go.
    let asid =
        fallible::arc(Mutex::new(AsidContext::new())).map_err(|_| String::from("no memory for the ASID"))?;
    let table =
        PageTable::new(FrameTranslation, VaRange::Lower).map_err(|e| format!("no page table: {e:?}"))?;
    let features = tlb::features();
    let targets = AsidTargets::new(asid.clone());
    let brk_start =
        exe.segments.iter().map(|s| (s.vaddr + s.memsz).next_multiple_of(PAGE_SIZE)).max().unwrap_or(0);
    let issuer = TlbIssuer::new(Aarch64Tlb, features.errata);
    // The heuristic overcommit measures requests against the machine's RAM (no swap).
    let layout = layout(brk_start, draws.mmap_base);
    let mm = Mm::new(table, issuer, features, targets, frames::UserFrames, layout);
    // An address space from here on: dropping it on a failure frees the memory.
    let space = Vmspace::new(mm, asid).map_err(|_| String::from("no memory for the address space"))?;
    // A dynamically linked first program: its interpreter from the tree, as `execve` finds it.
    let interp = match exe.interp_path(bytes) {
        None => None,
        Some(path) => {
            let node = exec::image::file_at(path)
                .ok_or_else(|| String::from("its interpreter is not in the tree"))?;
            let image = crate::fs::node_file::read_image(&node, exec::max_program())
                .map_err(|e| format!("reading its interpreter: {e:?}"))?;
            Some((node, image, crate::fs::copy_bytes(path).map_err(|_| String::from("no memory"))?))
        }
    };
    let ids = exec::load::Ids::default(); // the first process is root
    let file = exec::image::file_named(argv.first().copied().unwrap_or(""));
    // Mapped from the file's page cache when the bytes are that file's (not a built-in program).
    let cache = file.as_ref().and_then(crate::fs::pagecache::of_node).filter(|c| c.holds(bytes));
    let program = exec::load::ProgramFile {
        bytes,
        size: bytes.len() as u64,
        cache: cache.as_ref().map(|c| c.object()),
    };
    let interp_file = interp.as_ref().map(|(node, i, _)| exec::load::ProgramFile {
        bytes: i.bytes(),
        size: i.size(),
        cache: crate::fs::pagecache::of_node(node).map(|c| c.object()),
    });
    let loaded = load(&mut space.lock(), &draws, &exe, program, interp_file, ids, argv, envp)
        .map_err(|e| format!("{e}"))?;
    let mut record = loaded.image;
    if let (Some(i), Some((node, _, path))) = (record.interp.as_mut(), interp) {
        i.file = Some((node, path));
    }
    // The first program's file is held against writers as every later program's is.
    let deny_write = cache.as_ref().and_then(|c| c.deny_write_access().ok());
    let image = fallible::arc(exec::image::ProgramImage { file, ..record })
        .map_err(|_| String::from("no memory for the program's record"))?;
    let process = Process::new(
        pid,
        space,
        signals::Signals::new(pid),
        Rlimits::init(frames::usage().1 as u64),
        posix::ProcessPosix::first()
            .ok_or_else(|| String::from("no memory for the descriptors, or no file tree"))?,
        family::Family::first(pid).ok_or_else(|| String::from("no memory for the process"))?,
    )
    .ok_or_else(|| String::from("no memory for the process"))?;
    process.posix.set_exe(argv.first().map_or(&b""[..], |a| a.as_bytes()));
    process.posix.set_image(image, deny_write);
    family::started();
    let thread = Thread {
        tid: pid,
        process: process.clone(),
        regs: loaded.regs,
        fp: FpState::ZERO,
        tpidr: 0,
        pac: fresh_pac_keys(),
        mte: Default::default(),
        clear_child_tid: 0,
        affinity: u64::MAX,
        pipe_written: 0,
        poll_deadline: None,
        call: Default::default(),
        posix: posix::ThreadPosix::named(argv.first().copied().unwrap_or("")),
    };
    if let Err(e) = crate::sched::admit(thread) {
        process.release_space();
        family::ended();
        return Err(format!("cannot start its first thread: {e}"));
    }
    Ok(process)
}

/// Ten random words: five pointer-authentication keys.
pub fn random_pac_words() -> [u64; 10] {
    let mut bytes = [0u8; 80];
    crate::random::fill(&mut bytes);
    core::array::from_fn(|i| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap_or_default()))
}

/// New random pointer-authentication keys, every address key enabled (a thread after `execve`);
/// no random draw where the CPU has no keys (or `arm64.nopauth` hides them).
pub fn fresh_pac_keys() -> crate::arch::aarch64::pauth::Keys {
    use crate::arch::aarch64::pauth;
    let words =
        if pauth::has_address_auth() || pauth::has_generic_auth() { random_pac_words() } else { [0; 10] };
    pauth::Keys::new(words)
}

/// Called when a thread of `process` has exited; the last one tears the process down and
/// returns true (the caller then drops its reference and calls [`family::ended`]).
#[must_use]
pub fn thread_exited(process: &Arc<Process>) -> bool {
    if process.threads.fetch_sub(1, Ordering::AcqRel) == 1 {
        // The process's reference to its address space; the last one (a vfork parent or child
        // may still run on it) frees the memory, after its ASID is flushed everywhere.
        process.release_space();
        // Its program's file is writable again before its parent can see it ended (Linux
        // drops the hold with the address space, in exit_mm, before exit_notify).
        process.posix.release_exe();
        // Descriptors close at exit, not when the zombie is reaped (Linux's exit_files): a
        // pipe's reader sees end of file as soon as its last writer has exited.
        let files = core::mem::take(&mut *process.posix.files.lock());
        drop(files);
        crate::fs::locks::process_exited(process.pid);
        process.cpus.store(0, Ordering::Release);
        process.done.store(true, Ordering::Release);
        family::exited(process);
        return true;
    }
    false
}

pub use crate::sched::Action;

/// The futex key of `process`'s address space (Linux keys private futexes by the `mm`: a vfork
/// child and its parent share it); 0 once it has none.
pub fn futex_key(process: &Process) -> usize {
    process.space().map_or(0, |space| Arc::as_ptr(&space) as usize)
}

/// The key of the futex word at `uaddr` of `process` for a futex call without
/// `FUTEX_PRIVATE_FLAG` (`shared`): a word in shared memory (`MAP_SHARED`, a memfd) is keyed by
/// its physical address, so every process mapping it meets the same waiters, as Linux keys it by
/// the page's object; any other word, and every `FUTEX_PRIVATE_FLAG` one, by the address space
/// and the address. The caller has touched the word (its page is present).
pub fn futex_word_key(process: &Process, uaddr: u64, shared: bool) -> (usize, u64) {
    let private = (futex_key(process), uaddr);
    if !shared {
        return private;
    }
    let Some(space) = process.space() else { return private };
    let mm = space.lock();
    let in_shared = mm.vm().find(uaddr).is_some_and(|v| v.flags.contains(mm::vm::VmaFlags::SHARED));
    match mm.space().translate(VirtAddr(uaddr & !(PAGE_SIZE - 1))) {
        Some(pa) if in_shared => (crate::sched::SHARED_FUTEX, pa.0 + (uaddr & (PAGE_SIZE - 1))),
        _ => private,
    }
}

/// The scheduler's identity of `process`'s thread group (`sched::Task::group`).
pub fn group_of(process: &Process) -> usize {
    core::ptr::from_ref(process) as usize
}

/// The CPU time (counter ticks) of `process`, with the caller's current slice.
pub fn cpu_ticks(process: &Process) -> u64 {
    process.posix.cpu_ticks.load(Ordering::Relaxed) + crate::sched::current_slice()
}

/// The CPU time (counter ticks) of `thread`, running on this CPU, including its current slice.
pub fn thread_cpu_ticks(thread: &Thread) -> u64 {
    thread.posix.cpu_ticks + crate::sched::current_slice()
}

/// Ends the whole process with `status` (128 + the signal: a fatal signal or fault).
pub fn kill(process: &Arc<Process>, status: u64) -> Action {
    kill_with(process, status, false)
}

/// Ends the whole process with `status`: an exit code (`exit_group`: `exited` true) or 128 + a
/// fatal signal, which decides the status its parent's `wait4` reads.
pub fn kill_with(process: &Arc<Process>, status: u64, exited: bool) -> Action {
    if !process.exiting.swap(true, Ordering::AcqRel) {
        process.status.store(status, Ordering::Release);
        process.family.set_killed(!exited);
    }
    crate::sched::stop_group(group_of(process), process.cpus.load(Ordering::Acquire));
    Action::ExitThread
}
