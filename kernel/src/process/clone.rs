//! How a new thread starts, for `clone` of a thread and `fork` of a process alike: the caller's
//! registers as it entered the call, returning 0, on its own stack and thread pointer if given.
use alloc::sync::Arc;

use aarch64_cpu::registers::{Readable, TPIDR_EL0};
use linux_abi::clone::{CLONE_CHILD_CLEARTID, CLONE_SETTLS};

use super::{Process, Thread, posix::ThreadPosix};
use crate::arch::aarch64::exception::{FpState, TrapFrame};

/// What `clone` says about the new thread's start, for a thread and a forked process alike.
pub struct CloneArgs {
    /// The clone flags (`CLONE_SETTLS`, `CLONE_CHILD_CLEARTID` matter here).
    pub flags: u64,
    /// The new stack pointer (0: the caller's).
    pub stack: u64,
    /// The new thread pointer, with `CLONE_SETTLS`.
    pub tls: u64,
    /// The `clear_child_tid` address, with `CLONE_CHILD_CLEARTID`.
    pub ctid: u64,
}

impl CloneArgs {
    /// The new thread `tid` of `process`: the caller's registers as it entered the call (from
    /// `frame`), returning 0, on its own stack and thread pointer if given, with the caller's
    /// affinity and the `posix` state the caller decides.
    pub fn child(
        &self,
        caller: &Thread,
        frame: &mut TrapFrame,
        tid: u32,
        process: Arc<Process>,
        posix: ThreadPosix,
    ) -> Thread {
        let mut regs = caller.regs.clone();
        regs.x = frame.x;
        regs.x[0] = 0;
        regs.sp = if self.stack != 0 { self.stack } else { frame.sp_el0 };
        regs.pc = frame.elr;
        regs.pstate = frame.spsr;
        Thread {
            tid,
            process,
            regs,
            // SAFETY: `frame` comes from the EL0 exception entry being handled (FpState::below's rule).
            fp: unsafe { *FpState::below(frame) },
            tpidr: if self.flags & CLONE_SETTLS != 0 { self.tls } else { TPIDR_EL0.get() },
            // Linux copies the keys to every new thread and child (`copy_thread`).
            pac: caller.pac,
            mte: caller.mte,
            clear_child_tid: if self.flags & CLONE_CHILD_CLEARTID != 0 { self.ctid } else { 0 },
            affinity: caller.affinity,
            pipe_written: 0,
            poll_deadline: None,
            call: Default::default(),
            posix,
        }
    }
}
