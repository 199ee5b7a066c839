//! User processes and their threads: load a static arm64 ELF, run its threads at EL0 on any CPU,
//! serve their system calls and page faults, and tear the process down without leaking a frame.
//!
//! A [`Process`] is the address space and what is shared by its threads: the page table (live in
//! TTBR0 with the process's ASID on every CPU running one of its threads), the areas, the program
//! break, and the set of CPUs whose TLBs may hold its translations. A [`Thread`] is a saved user
//! context (registers, FP/SIMD state, TPIDR_EL0). The kernel has no per-thread kernel stack: a
//! thread's system call or fault is handled to completion on the CPU's exception stack, and a
//! thread that must wait (futex) or yield has its user context saved and the CPU returns to its
//! scheduler loop (`sched`). User memory is demand-paged and freed on munmap, MADV_DONTNEED and
//! exit, always after the TLB flush that covers it.
pub mod elf;
mod exec;
pub mod family;
mod files;
mod futex;
mod identity;
mod memfd;
mod pipe;
mod poll;
pub mod posix;
pub mod procfs;
pub mod sched;
pub mod signals;
pub mod stack;
pub mod syscall;
mod time;
pub mod tiny_elf;
mod vm_syscalls;

use alloc::format;
use alloc::string::String;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use ::signal::action::killed_status;
use ::signal::info::SigInfo;
use ::signal::num;
use mm::addr::{PAGE_SIZE, VirtAddr};
use mm::asid::AsidContext;
use mm::paging::{PageTable, VaRange};
use mm::tlb::TlbIssuer;
use mm::tlb::issue::Aarch64Tlb;
pub use mm::user::Access;
use mm::user::{Fault, UserMemory};
use mm::vm::limits::Rlimits;
use mm::vm::{Layout, Prot, VmaFlags};
use spin::Mutex;

use crate::arch::aarch64::exception::{FpState, TrapFrame, exception_class_name, fault_status_name};
use crate::arch::aarch64::user::{PSTATE_EL0, UserRegs};
use crate::kprintln;
use crate::memory::asids::AsidTargets;
use crate::memory::kernel_map::FrameTranslation;
use crate::memory::{asids, frames, tlb};
pub use exec::set_initramfs;
pub use sched::handle as handle_user_exception;

/// Top of the user stack (exclusive); the stack area ends here, one page below the end of the
/// 48-bit user range (Linux's mmap_base lies 128 MiB lower).
pub const STACK_TOP: u64 = 0x0000_ffff_ffff_f000;
/// Size of the stack mapping (demand-paged: untouched pages cost nothing).
pub const STACK_SIZE: u64 = 8 << 20;

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

/// The memory of a process: `mm::user`'s layer over its live page table (break-before-make, one
/// planned flush per call, each aimed by the ASID allocator at the moment it is issued) and its
/// map of areas, with the kernel's frame allocator, behind the process's lock.
pub type Mm = UserMemory<FrameTranslation, Aarch64Tlb, AsidTargets, frames::UserFrames>;

/// Page faults resolved by demand paging, all processes (for `SYS_MM_STATS`).
pub static PAGE_FAULTS: AtomicU64 = AtomicU64::new(0);

/// A user process: an address space shared by its threads.
pub struct Process {
    /// Process id.
    pub pid: u32,
    /// Its ASID and the CPUs that may cache it (`mm::asid`, through `memory::asids`); shared
    /// with the flush-target provider of its address space.
    pub asid: Arc<Mutex<AsidContext>>,
    /// Physical address of its page table's root (for TTBR0; `execve` replaces the table).
    pub root: AtomicU64,
    /// Its memory (`None` once torn down).
    pub mm: Mutex<Option<Mm>>,
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
    next_tid: AtomicU32,
    /// Ids, descriptors, CPU time (everything of the ABI that is not memory).
    pub posix: posix::ProcessPosix,
    /// Parent, children, zombies, the exit signal, vfork (`family`).
    pub family: family::Family,
}

impl Process {
    /// A process with one thread to come, neither run nor exiting: what the first program and
    /// every fork start as, entered in the process table (`family`). The root comes from `mm`'s
    /// table. `ENOMEM` (with `mm` and the rest handed back to be freed) when the heap cannot hold
    /// it.
    #[allow(clippy::result_large_err, reason = "the failure hands the memory back to be freed")]
    fn new(
        pid: u32,
        asid: Arc<Mutex<AsidContext>>,
        mm: Mm,
        signals: signals::Signals,
        rlimits: Rlimits,
        posix: posix::ProcessPosix,
        family: family::Family,
    ) -> Result<Arc<Process>, Option<Mm>> {
        let root = mm.space().table().root_pa().0;
        let process = family::enter(Process {
            pid,
            asid,
            root: AtomicU64::new(root),
            mm: Mutex::new(Some(mm)),
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
        process.map_err(|p| p.mm.into_inner())
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
    /// Name, robust list, CPU time.
    pub posix: posix::ThreadPosix,
}

static NEXT_PID: AtomicU32 = AtomicU32::new(1);

/// Makes EL0 able to do what Linux lets it do: read the virtual counter (CNTKCTL_EL1.EL0VCTEN),
/// clean and invalidate caches by VA and read CTR_EL0 (SCTLR_EL1.UCI, UCT; a JIT publishes its
/// code this way), use DC ZVA (DZE), and WFI/WFE without trapping (nTWI, nTWE). Per CPU.
pub fn init_el0_controls() {
    use aarch64_cpu::registers::{CNTKCTL_EL1, ReadWriteable, SCTLR_EL1};
    CNTKCTL_EL1.modify(CNTKCTL_EL1::EL0VCTEN::SET);
    SCTLR_EL1.modify(
        SCTLR_EL1::UCI::DontTrap
            + SCTLR_EL1::UCT::DontTrap
            + SCTLR_EL1::DZE::DontTrap
            + SCTLR_EL1::NTWI::DontTrap
            + SCTLR_EL1::NTWE::DontTrap,
    );
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}

/// Loads `bytes` as a static arm64 executable, runs it with `argv` until every thread has exited
/// (threads may run on every CPU), and returns its exit status.
///
/// # Errors
/// Why the program could not be started (bad ELF, out of memory).
pub fn run(bytes: &[u8], argv: &[&str]) -> Result<u64, String> {
    run_with_env(bytes, argv, linux_abi::cmdline::DEFAULT_ENV)
}

/// [`run`] with the environment `envp` (`NAME=VALUE` strings).
///
/// # Errors
/// Why the program could not be started (bad ELF, out of memory).
pub fn run_with_env(bytes: &[u8], argv: &[&str], envp: &[&str]) -> Result<u64, String> {
    let process = spawn(bytes, argv, envp)?;
    family::set_root(&process);
    sched::run_cpu(Some(&process));
    Ok(process.status.load(Ordering::Acquire))
}

/// Loads `bytes` and queues its first thread; returns the process.
///
/// # Errors
/// Why the program could not be started.
pub fn spawn(bytes: &[u8], argv: &[&str], envp: &[&str]) -> Result<Arc<Process>, String> {
    let exe = elf::parse(bytes).map_err(|refusal| format!("{refusal}"))?;
    let pid = NEXT_PID.fetch_add(1, Ordering::Relaxed);
    let table =
        PageTable::new(FrameTranslation, VaRange::Lower).map_err(|e| format!("no page table: {e:?}"))?;
    let features = tlb::features();
    // The real ASID is assigned when a thread first runs (memory::asids); until then the table
    // is reachable by no TTBR and the context has run nowhere, so its flushes (ASID 0, local)
    // cannot matter. From then on each flush asks the allocator where it must go.
    let asid = Arc::new(Mutex::new(AsidContext::new()));
    let targets = AsidTargets::new(asid.clone());
    let brk_start =
        exe.segments.iter().map(|s| (s.vaddr + s.memsz).next_multiple_of(PAGE_SIZE)).max().unwrap_or(0);
    let issuer = TlbIssuer::new(Aarch64Tlb, features.errata);
    // The heuristic overcommit measures requests against the machine's RAM (no swap).
    let layout = Layout { ram_pages: frames::usage().1 as u64, ..Layout::linux(brk_start) };
    let mut mm = Mm::new(table, issuer, features, targets, frames::UserFrames, layout);
    let regs = match load(&mut mm, &exe, bytes, argv, envp) {
        Ok(regs) => regs,
        Err(e) => {
            free_mm(mm, None);
            return Err(format!("{e}"));
        }
    };
    let process = Process::new(
        pid,
        asid,
        mm,
        signals::Signals::new(pid),
        Rlimits::init(frames::usage().1 as u64),
        posix::ProcessPosix::first(),
        family::Family::first(pid),
    )
    .map_err(|mm| {
        if let Some(mm) = mm {
            free_mm(mm, None);
        }
        String::from("no memory for the process")
    })?;
    process.posix.set_exe(argv.first().map_or(&b""[..], |a| a.as_bytes()));
    family::started();
    let thread = Thread {
        tid: pid,
        process: process.clone(),
        regs,
        fp: FpState::ZERO,
        tpidr: 0,
        clear_child_tid: 0,
        affinity: u64::MAX,
        pipe_written: 0,
        poll_deadline: None,
        posix: posix::ThreadPosix::named(argv.first().copied().unwrap_or("")),
    };
    if let Err(e) = sched::admit(thread) {
        if let Some(mm) = process.mm.lock().take() {
            free_mm(mm, None);
        }
        family::ended();
        return Err(format!("cannot start its first thread: {e}"));
    }
    Ok(process)
}

/// The step of [`load`] that failed, and why (printed by `spawn`; `execve` returns the errno).
/// No heap: `execve` must be able to fail when there is none.
#[derive(Clone, Copy, Debug)]
struct LoadError {
    step: LoadStep,
    errno: mm::vm::Errno,
}

#[derive(Clone, Copy, Debug)]
enum LoadStep {
    ProtNone,
    Segment(u64),
    Stack,
    CodeWindow,
    InitialStack,
}

impl core::fmt::Display for LoadError {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let e = self.errno;
        match self.step {
            LoadStep::ProtNone => write!(f, "a PROT_NONE segment"),
            LoadStep::Segment(at) => write!(f, "mapping the segment at {at:#x} failed: {e:?}"),
            LoadStep::Stack => write!(f, "stack: {e:?}"),
            LoadStep::CodeWindow => write!(f, "code window: {e:?}"),
            LoadStep::InitialStack => write!(f, "writing the initial stack failed: {e:?}"),
        }
    }
}

/// Maps the segments, the stack and the initial stack contents; returns the entry registers.
fn load<S: AsRef<[u8]>>(
    mm: &mut Mm,
    exe: &elf::Executable,
    bytes: &[u8],
    argv: &[S],
    envp: &[S],
) -> Result<UserRegs, LoadError> {
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
        if mm::user::user_attrs(prot).is_none() {
            return Err(LoadError { step: LoadStep::ProtNone, errno: mm::vm::Errno::EINVAL });
        }
        // The file bytes of each page: [vaddr, vaddr + filesz) comes from the file at offset.
        let fill = |page: u64| {
            let file_start = seg.vaddr.max(page);
            let file_end = (seg.vaddr + seg.filesz).min(page + PAGE_SIZE);
            if file_start >= file_end {
                return None;
            }
            // `exec` guarantees the segment's file bytes are inside `bytes`: `get` cannot miss.
            let from = (seg.offset + (file_start - seg.vaddr)) as usize;
            let len = (file_end - file_start) as usize;
            Some(((file_start - page) as usize, bytes.get(from..from + len)?))
        };
        mm.map_image(start, end, prot, VmaFlags::IMAGE, fill)
            .map_err(failed(LoadStep::Segment(seg.vaddr)))?;
    }
    mm.vm_mut()
        .map_kernel(STACK_TOP - STACK_SIZE, STACK_SIZE, Prot::RW, VmaFlags::STACK)
        .map_err(failed(LoadStep::Stack))?;
    // The code window contains the program's own text where it fits (docs/mm.md §8).
    mm.vm_mut().init_code_window(exe.exec_range).map_err(failed(LoadStep::CodeWindow))?;

    let mut random = [0u8; 16];
    crate::random::fill(&mut random);
    let auxv = [
        (stack::at::PHDR, exe.phdr),
        (stack::at::PHENT, 56),
        (stack::at::PHNUM, u64::from(exe.phnum)),
        (stack::at::PAGESZ, PAGE_SIZE),
        (stack::at::BASE, 0),
        (stack::at::FLAGS, 0),
        (stack::at::ENTRY, exe.entry),
        (stack::at::UID, 0),
        (stack::at::EUID, 0),
        (stack::at::GID, 0),
        (stack::at::EGID, 0),
        (stack::at::HWCAP, crate::arch::aarch64::cpu::hwcaps()),
        (stack::at::HWCAP2, 0),
        (stack::at::CLKTCK, 100),
        (stack::at::SECURE, 0),
        (stack::at::MINSIGSTKSZ, stack::MINSIGSTKSZ),
    ];
    let (sp, image) =
        stack::build(STACK_TOP, argv, envp, &auxv, random).map_err(failed(LoadStep::InitialStack))?;
    mm.write(sp, &image).map_err(failed(LoadStep::InitialStack))?;
    Ok(UserRegs { x: [0; 31], sp, pc: exe.entry, pstate: PSTATE_EL0 })
}

/// Makes instructions just written at user address `va` visible to instruction fetch (the
/// frame allocator's clean and invalidate, on the page's frame), with the process's memory
/// locked so the page cannot go away meanwhile. False if the page is not present.
fn sync_user_icache(p: &Process, va: u64) -> bool {
    use mm::user::UserFrames as _;
    let guard = p.mm.lock();
    let Some(pa) = guard.as_ref().and_then(|mm| mm.space().translate(VirtAddr(va & !(PAGE_SIZE - 1)))) else {
        return false;
    };
    frames::UserFrames.sync_icache(pa);
    true
}

/// Frees everything an address space owns: the TLB entries of its ASID first (broadcast: any
/// CPU may hold them, walk-cache entries of its tables included), then its frames and tables. No
/// TTBR points at it any more.
fn free_mm(mm: Mm, asid: Option<&Mutex<AsidContext>>) {
    if let Some(asid) = asid {
        asids::flush_everywhere(asid);
    }
    let _ = mm.destroy();
}

/// Called when a thread of `process` has exited; the last one tears the process down.
pub fn thread_exited(process: &Arc<Process>) {
    if process.threads.fetch_sub(1, Ordering::AcqRel) == 1 {
        if let Some(mm) = process.mm.lock().take() {
            // The test image checks the area map's invariants after every program (threads
            // included: the concurrent map/unmap/protect stress ends here); a violation panics,
            // which fails the run with the invariant named.
            #[cfg(feature = "test-image")]
            mm.vm().check();
            if let Some(mm) = family::give_back_lent(process, mm) {
                free_mm(mm, Some(&process.asid));
            }
        }
        // Descriptors close at exit, not when the zombie is reaped (Linux's exit_files): a
        // pipe's reader sees end of file as soon as its last writer has exited.
        let files = core::mem::take(&mut *process.posix.files.lock());
        drop(files);
        process.cpus.store(0, Ordering::Release);
        process.done.store(true, Ordering::Release);
        family::exited(process);
    }
}

/// What the scheduler should do after an exception from a thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Action {
    /// Return to the thread.
    Continue,
    /// Put the thread back in the run queue and run another (preemption, sched_yield, migration).
    Yield,
    /// Block the thread until what `sched::Wait` names happens (futex wake, deadline, input,
    /// a signal), or a signal interrupts it.
    Block(sched::Wait),
    /// The thread exits.
    ExitThread,
}

/// Handles one exception from a thread of `thread.process`; a pending signal the thread can
/// take is delivered on the way back to EL0.
pub fn user_exception(thread: &mut Thread, frame: &mut TrapFrame, kind: u64) -> Action {
    let _scope = crate::memory::fallible::handling(thread.process.pid, thread.tid);
    match exception(thread, frame, kind) {
        Action::Continue => signals::on_return(thread, frame),
        other => other,
    }
}

fn exception(thread: &mut Thread, frame: &mut TrapFrame, kind: u64) -> Action {
    let process = thread.process.clone();
    if process.exiting.load(Ordering::Acquire) {
        return Action::ExitThread;
    }
    if kind & 3 == 1 {
        return if sched::should_preempt() { Action::Yield } else { Action::Continue };
    }
    if kind & 3 != 0 {
        kprintln!(
            "\n*** pid {}: unexpected {} from EL0 at {:#x}; ending it",
            process.pid,
            ["", "IRQ", "FIQ", "SError"][(kind & 3) as usize],
            frame.elr
        );
        return kill(&process, STATUS_SEGV);
    }
    let ec = (frame.esr >> 26) & 0x3f;
    match ec {
        0x15 if signals::nr::is_signal_call(frame.x[8]) => signals::syscall(thread, frame),
        0x15 => syscall::dispatch(thread, frame),
        0x20 | 0x24 => {
            let iss = frame.esr & 0x1ff_ffff;
            let access = if ec == 0x20 {
                Access::Execute
            } else if iss & (1 << 6) != 0 {
                Access::Write
            } else {
                Access::Read
            };
            let fsc = iss & 0x3f;
            let mut guard = process.mm.lock();
            let Some(mm) = guard.as_mut() else { return Action::ExitThread };
            // Translation faults (demand paging) and write permission faults (copy-on-write)
            // are memory's to resolve.
            let resolvable =
                (0x04..=0x07).contains(&fsc) || (0x0d..=0x0f).contains(&fsc) && access == Access::Write;
            let mut bus = false;
            let mut guard_page = false;
            let why = if resolvable {
                match mm.fault(frame.far, access) {
                    Ok(()) => {
                        PAGE_FAULTS.fetch_add(1, Ordering::Relaxed);
                        return Action::Continue;
                    }
                    Err(Fault::NoMapping) => Unresolved::NoMapping(frame.far),
                    Err(Fault::Guard) => {
                        guard_page = true;
                        Unresolved::Guard(frame.far)
                    }
                    Err(Fault::Bus) => {
                        bus = true;
                        Unresolved::PastTheEnd(frame.far)
                    }
                    Err(Fault::Protection { prot }) => Unresolved::Protection(access, prot),
                    Err(Fault::OutOfMemory) if crate::memory::fallible::injected_here() => {
                        // An injected failure (`SYS_FAIL_NTH`): retried, as Linux's
                        // `pagefault_out_of_memory` retries when no OOM kill happened.
                        return Action::Continue;
                    }
                    Err(Fault::OutOfMemory) => {
                        // Linux's out-of-memory path: the process is killed with SIGKILL (status
                        // 137), which no handler can catch; the kernel goes on and every frame of
                        // the process comes back at its teardown.
                        let s = mm.stats();
                        kprintln!(
                            "\n*** out of memory: killed pid {} (resident {} KiB, page tables {} KiB) at a {:?} \
                             fault at {:#x}; exit status {}",
                            process.pid,
                            s.data_frames * PAGE_SIZE / 1024,
                            s.table_frames * PAGE_SIZE / 1024,
                            access,
                            frame.far,
                            STATUS_OOM_KILL
                        );
                        drop(guard);
                        return kill(&process, STATUS_OOM_KILL);
                    }
                }
            } else {
                Unresolved::Forbidden
            };
            let mapped = mm.vm().find(frame.far).is_some();
            drop(guard);
            let fault = if bus {
                // Linux's VM_FAULT_SIGBUS: BUS_ADRERR at the address.
                let info = SigInfo::fault(num::SIGBUS, num::BUS_ADRERR, frame.far);
                signals::Fault { info, address: frame.far, esr: frame.esr }
            } else if guard_page {
                // Linux's VM_FAULT_SIGSEGV of a guard marker: SEGV_MAPERR on arm64.
                let info = SigInfo::fault(num::SIGSEGV, num::SEGV_MAPERR, frame.far);
                signals::Fault { info, address: frame.far, esr: frame.esr }
            } else {
                abort_signal(frame, fsc, mapped)
            };
            match signals::force_fault(thread, frame, &fault) {
                Ok(()) => Action::Continue,
                Err(status) => {
                    let guard = process.mm.lock();
                    if let Some(mm) = guard.as_ref() {
                        report_user_fault(&process, mm, frame, access, fsc, why, status);
                    }
                    drop(guard);
                    kill(&process, status)
                }
            }
        }
        _ => {
            let fault = exception_signal(frame, ec);
            match signals::force_fault(thread, frame, &fault) {
                Ok(()) => Action::Continue,
                Err(status) => {
                    kprintln!(
                        "\n*** pid {}: {} (EC {:#04x}, ESR {:#x}) at pc {:#x}: {}; ending it with status {}",
                        process.pid,
                        exception_class_name(ec),
                        ec,
                        frame.esr,
                        frame.elr,
                        num::name(fault.info.signo()),
                        status
                    );
                    kill(&process, status)
                }
            }
        }
    }
}

/// The signal for a data or instruction abort from EL0 that demand paging did not resolve
/// (Linux's `fault_info` table): SIGSEGV with SEGV_MAPERR where nothing is mapped and
/// SEGV_ACCERR where the mapping forbids the access, SIGBUS for alignment faults and external
/// aborts, SIGKILL for what a program cannot cause or cure (address size, TLB conflict).
fn abort_signal(frame: &TrapFrame, fsc: u64, mapped: bool) -> signals::Fault {
    let (sig, code) = match fsc {
        0x04..=0x0f if !mapped => (num::SIGSEGV, num::SEGV_MAPERR),
        0x04..=0x0f => (num::SIGSEGV, num::SEGV_ACCERR),
        0x11 => (num::SIGSEGV, num::SEGV_MTESERR),
        0x21 => (num::SIGBUS, num::BUS_ADRALN),
        0x10 | 0x14..=0x17 => (num::SIGBUS, num::BUS_OBJERR),
        _ => (num::SIGKILL, num::SI_KERNEL),
    };
    // An address outside the user half is reported as a level-0 translation fault, with only
    // the ESR fields that say nothing about kernel mappings (Linux's set_thread_esr).
    let esr = if frame.far >= crate::arch::aarch64::user::USER_END {
        let keep =
            (0x3f << 26) | (1 << 25) | if (frame.esr >> 26) & 0x3f == 0x24 { (1 << 8) | (1 << 6) } else { 0 };
        (frame.esr & keep) | 0x04
    } else {
        frame.esr
    };
    signals::Fault { info: SigInfo::fault(sig, code, frame.far), address: frame.far, esr }
}

/// The signal for any other synchronous exception from EL0 (SVC aside): SIGTRAP for BRK and
/// debug exceptions, SIGBUS for PC/SP alignment, SIGFPE for trapped floating-point exceptions,
/// SIGILL for undefined instructions and the rest. si_addr is the PC (SP for SP alignment).
fn exception_signal(frame: &TrapFrame, ec: u64) -> signals::Fault {
    let iss = frame.esr & 0x1ff_ffff;
    let (sig, code, addr, esr) = match ec {
        0x3c | 0x30 | 0x31 => (num::SIGTRAP, num::TRAP_BRKPT, frame.elr, frame.esr),
        0x32 | 0x33 => (num::SIGTRAP, num::TRAP_TRACE, frame.elr, frame.esr),
        0x34 | 0x35 => (num::SIGTRAP, num::TRAP_HWBKPT, frame.far, frame.esr),
        0x22 => (num::SIGBUS, num::BUS_ADRALN, frame.far, frame.esr),
        0x26 => (num::SIGBUS, num::BUS_ADRALN, frame.sp_el0, frame.esr),
        0x2c => {
            // ISS: IDF 7, IXF 4, UFF 3, OFF 2, DZF 1, IOF 0 (TFV, bit 23, says they are valid).
            let code = if iss & (1 << 23) == 0 {
                num::FPE_FLTUNK
            } else if iss & 1 != 0 {
                num::FPE_FLTINV
            } else if iss & 2 != 0 {
                num::FPE_FLTDIV
            } else if iss & 4 != 0 {
                num::FPE_FLTOVF
            } else if iss & 8 != 0 {
                num::FPE_FLTUND
            } else if iss & 16 != 0 {
                num::FPE_FLTRES
            } else {
                num::FPE_FLTUNK
            };
            (num::SIGFPE, code, frame.elr, frame.esr)
        }
        0x1c => (num::SIGILL, num::ILL_ILLOPN, frame.elr, frame.esr),
        // Undefined instructions carry no ESR record (Linux's fault code is 0 for them).
        _ => (num::SIGILL, num::ILL_ILLOPC, frame.elr, 0),
    };
    signals::Fault { info: SigInfo::fault(sig, code, addr), address: 0, esr }
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
    sched::stop_process(process);
    Action::ExitThread
}

/// Why demand paging did not resolve a fault (for the report of a fatal one; no heap, since a
/// program's fault must not need any).
#[derive(Clone, Copy)]
enum Unresolved {
    NoMapping(u64),
    Guard(u64),
    PastTheEnd(u64),
    Protection(Access, Prot),
    Forbidden,
}

impl core::fmt::Display for Unresolved {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NoMapping(at) => write!(f, "no mapping at {at:#x}"),
            Self::Guard(at) => write!(f, "{at:#x} is a guard page"),
            Self::PastTheEnd(at) => write!(f, "{at:#x} is past the end of the mapped object"),
            Self::Protection(access, prot) => write!(f, "{access:?} access to a {prot:?} mapping"),
            Self::Forbidden => f.write_str("the page's protection forbids it"),
        }
    }
}

/// The area holding a faulting address, as the fault report describes it.
struct MappingAt(Option<(u64, u64, Prot)>);

impl core::fmt::Display for MappingAt {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self.0 {
            Some((start, end, prot)) => write!(f, "mapping [{start:#x}, {end:#x}) is {prot:?}"),
            None => f.write_str("no mapping there"),
        }
    }
}

fn report_user_fault(
    p: &Process,
    mm: &Mm,
    frame: &TrapFrame,
    access: Access,
    fsc: u64,
    why: Unresolved,
    status: u64,
) {
    let mapping = MappingAt(mm.vm().find(frame.far).map(|vma| (vma.start, vma.end, vma.prot)));
    kprintln!(
        "\n*** pid {}: {}: {:?} at {:#x} (pc {:#x}, sp {:#x})",
        p.pid,
        num::name(status.saturating_sub(128) as u32),
        access,
        frame.far,
        frame.elr,
        frame.sp_el0
    );
    kprintln!("    {} (FSC {:#04x}); {}; {}", fault_status_name(fsc), fsc, why, mapping);
    kprintln!(
        "    x0 {:#x} x1 {:#x} x2 {:#x} x30 {:#x}; exit status {}",
        frame.x[0],
        frame.x[1],
        frame.x[2],
        frame.x[30],
        status
    );
}
