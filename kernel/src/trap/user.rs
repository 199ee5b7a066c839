//! What the kernel does with an exception from EL0: a system call goes to its handler, a page
//! fault to demand paging (`mm::user`), and what neither resolves becomes the signal Linux
//! sends for it (its `fault_info` table and `arm64_notify_die`), or the end of the process with
//! a report on the console when the signal is fatal. Out of memory at fault time first takes
//! the pages any process freed with `MADV_FREE`, then ends the process as Linux's OOM killer
//! would (SIGKILL), unless the failure was injected (then the fault is retried). Apart from
//! `process` (the process and thread lifetimes) because it is the trap side of the ABI.
use alloc::sync::Arc;
use core::sync::atomic::Ordering;

use ::signal::info::SigInfo;
use ::signal::num;
use mm::addr::PAGE_SIZE;
use mm::user::Fault;
use mm::vm::Prot;

use crate::arch::aarch64::exception::{TrapFrame, exception_class_name, fault_status_name};
use crate::kprintln;
use crate::memory::vmspace::PAGE_FAULTS;
use crate::process::{Access, Action, Mm, Process, STATUS_OOM_KILL, STATUS_SEGV, Thread, kill, signals};
use crate::{sched, syscall};

/// Entry for every exception from EL0 (`kind` as `trap::handle` says): the thread this CPU runs
/// handles it, and the scheduler carries out what follows (return, yield, block, exit).
pub fn handle(frame: &mut TrapFrame, kind: u64) {
    let action = sched::with_current(|task| match task.as_any_mut().downcast_mut::<Thread>() {
        Some(thread) => user_exception(thread, frame, kind),
        None => Action::ExitThread, // every task is a process's thread
    });
    // No current task: its process was stopped while it ran.
    sched::act(frame, action.unwrap_or(Action::ExitThread));
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
    if thread.process.exiting.load(Ordering::Acquire) {
        return Action::ExitThread;
    }
    if crate::arch::aarch64::mte::take_async_fault() {
        // An asynchronous tag-check fault since the last entry: SIGSEGV/SEGV_MTEAERR with no
        // address, taken on the way back to EL0 (Linux's `check_mte_async_tcf` on entry and
        // `do_notify_resume`).
        let info = SigInfo::fault(num::SIGSEGV, num::SEGV_MTEAERR, 0);
        let _ = signals::send(&thread.process, signals::Target::Thread(thread.tid), info);
        if kind & 3 == 0 && (frame.esr >> 26) & 0x3f == 0x15 {
            // A system call is not made first: it starts again once the signal is handled
            // (Linux's el0_svc_common answers -ERESTARTNOINTR): the pc goes back to the SVC,
            // whose arguments are still in place.
            frame.elr -= 4;
            return Action::Continue;
        }
    }
    if kind & 3 == 1 {
        return if sched::should_preempt() { Action::Yield } else { Action::Continue };
    }
    let ec = (frame.esr >> 26) & 0x3f;
    if kind & 3 == 0 && ec == 0x15 {
        // A system call takes no reference of its own to the process: the thread's keeps it
        // alive, and a clone and its drop would be two atomic read-modify-writes per call.
        return syscall::table::dispatch(thread, frame);
    }
    let process = thread.process.clone();
    if kind & 3 != 0 {
        kprintln!(
            "\n*** pid {}: unexpected {} from EL0 at {:#x}; ending it",
            process.pid,
            ["", "IRQ", "FIQ", "SError"][(kind & 3) as usize],
            frame.elr
        );
        return kill(&process, STATUS_SEGV);
    }
    match ec {
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
            // FAR_EL1 keeps the pointer's top byte (TCR_EL1.TBI0); the areas are untagged.
            let far = crate::arch::aarch64::mte::untagged(frame.far);
            let Some(space) = process.space() else { return Action::ExitThread };
            let mut mm = space.lock();
            // Translation faults (demand paging) and write permission faults (copy-on-write)
            // are memory's to resolve.
            let resolvable =
                (0x04..=0x07).contains(&fsc) || (0x0d..=0x0f).contains(&fsc) && access == Access::Write;
            let mut bus = false;
            let mut guard_page = false;
            let why = if resolvable {
                match mm.fault(far, access) {
                    Ok(()) => {
                        PAGE_FAULTS.fetch_add(1, Ordering::Relaxed);
                        thread.posix.min_flt += 1;
                        process.posix.min_flt.fetch_add(1, Ordering::Relaxed);
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
                        // Memory pressure that this process's own lazily freed pages did not
                        // relieve (UserMemory::fault reclaims those): the pages other processes
                        // freed with MADV_FREE go next, as Linux's reclaim takes them from any
                        // process, and the fault is retried.
                        drop(mm);
                        if reclaim_lazily_freed_elsewhere(&space) {
                            return Action::Continue;
                        }
                        let mm = space.lock();
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
                        drop(mm);
                        return kill(&process, STATUS_OOM_KILL);
                    }
                }
            } else {
                Unresolved::Forbidden
            };
            let mapped = mm.vm().find(far).is_some();
            drop(mm);
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
                    report_user_fault(&process, &space.lock(), frame, access, fsc, why, status);
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

/// Reclaims the pages every address space but `mine` had freed with `MADV_FREE` (each flushed
/// where its own flush targets say, before its frames go back); whether any frame came back.
/// Called with no memory locked. A memory another CPU holds locked is passed over (`try_lock`):
/// waiting for it could deadlock with that CPU doing the same, and it is busy, not idle. A
/// space shared by a vfork parent and child is reached twice: the first visit empties its
/// list of lazily freed pages, so the second finds nothing to take.
fn reclaim_lazily_freed_elsewhere(mine: &Arc<crate::process::Vmspace>) -> bool {
    let mut any = false;
    crate::process::family::for_each_process(|p| {
        let Some(space) = p.space() else { return };
        if Arc::ptr_eq(&space, mine) {
            return;
        }
        if let Some(mut mm) = space.try_lock() {
            any |= mm.reclaim_lazily_freed();
        }
    });
    any
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
    let esr = if crate::arch::aarch64::mte::untagged(frame.far) >= crate::arch::aarch64::user::USER_END {
        let keep =
            (0x3f << 26) | (1 << 25) | if (frame.esr >> 26) & 0x3f == 0x24 { (1 << 8) | (1 << 6) } else { 0 };
        (frame.esr & keep) | 0x04
    } else {
        frame.esr
    };
    // si_addr keeps FAR_EL1's tag byte for the faults whose FAR holds it (translation, access,
    // permission, alignment and tag-check faults: Linux's do_page_fault, do_alignment_fault,
    // do_tag_check_fault); for a tag-check fault bits [63:60] are UNKNOWN, and Linux takes them
    // from the untagged address: 0 in the user half. For the other aborts FAR's top byte is
    // UNKNOWN and si_addr is untagged (Linux's do_sea and do_mem_abort). Delivery drops the tag
    // from si_addr unless the handler was installed with SA_EXPOSE_TAGBITS
    // (`process::signals`). The sigcontext's fault_address is always untagged (Linux's
    // do_bad_area: `set_thread_esr(untagged_addr(far), esr)`).
    let untagged = crate::arch::aarch64::mte::untagged(frame.far);
    let si_addr = match fsc {
        0x11 => frame.far & !(0xf << 60),
        0x04..=0x0f | 0x21 => frame.far,
        _ => untagged,
    };
    let address = untagged;
    signals::Fault { info: SigInfo::fault(sig, code, si_addr), address, esr }
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
