//! A thread as the scheduler sees it: `process::Thread` implements `sched::Task`, which is how the
//! scheduler (below this layer) switches a thread's address space in, delivers its signals on the
//! way back to EL0, and ends it, without knowing what a process is.
use alloc::boxed::Box;
use core::any::Any;
use core::sync::atomic::Ordering;

use linux_abi::Errno;

use super::{Thread, family, signals};
use crate::arch::aarch64::exception::FpState;
use crate::arch::aarch64::user::UserRegs;
use crate::sched::{Resumed, Task, VectorWord};

impl Task for Thread {
    fn tid(&self) -> u32 {
        self.tid
    }

    fn group(&self) -> usize {
        super::group_of(&self.process)
    }

    fn futex_vector(&self) -> &[VectorWord] {
        &self.call.futexv
    }

    fn affinity(&self) -> u64 {
        self.affinity
    }

    fn regs(&mut self) -> &mut UserRegs {
        &mut self.regs
    }

    fn fp(&mut self) -> &mut FpState {
        &mut self.fp
    }

    fn tpidr(&mut self) -> &mut u64 {
        &mut self.tpidr
    }

    fn charge(&mut self, ticks: u64) {
        self.posix.cpu_ticks += ticks;
        self.process.posix.charge(ticks);
    }

    fn exiting(&self) -> bool {
        self.process.exiting.load(Ordering::Acquire)
    }

    fn switch_in(&mut self, cpu: usize) -> bool {
        // A thread that is not exiting belongs to a process that holds its space (the last
        // thread's exit drops it), so the space outlives this run of the thread.
        let Some(space) = self.process.space() else { return false };
        self.process.cpus.fetch_or(1 << cpu, Ordering::AcqRel);
        crate::memory::vmspace::switch_to(space, cpu);
        self.pac.install();
        self.mte.install();
        true
    }

    fn resume(&mut self) -> Resumed {
        // The rseq area first: a signal frame built next saves the abort handler's address.
        super::rseq::on_resume(self);
        signals::on_resume(self)
    }

    fn may_block(&self) -> bool {
        signals::may_park(self)
    }

    fn stop_pending(&self) -> bool {
        signals::stopped(&self.process)
    }

    fn interrupted(&mut self) -> u64 {
        // A blocking pipe write returns the bytes it had written rather than restart (Linux's
        // `pipe_write`); a poll's kept deadline is dropped: the call is over (a restart reads
        // the time left, which the restart class has it write back). The call is finished as
        // its class says when the thread resumes (`signals::restart`).
        self.call.interrupted = true;
        self.poll_deadline = None;
        crate::fs::call_abandoned(self.process.pid, self.tid);
        match core::mem::take(&mut self.pipe_written) {
            0 => Errno::EINTR.as_ret() as u64,
            n => n,
        }
    }

    fn exit(self: Box<Self>) {
        let process = self.process.clone();
        process.signals.thread_gone(self.tid);
        crate::fs::call_abandoned(process.pid, self.tid);
        drop(self);
        let torn_down = super::thread_exited(&process);
        // This CPU's reference goes before the process stops counting as live: once none is
        // live, the CPU in `run_cpu(Some(..))` returns, and its caller may at once find the
        // process table empty (the test image checks it after every program).
        drop(process);
        if torn_down {
            family::ended();
        }
    }

    fn as_any_mut(&mut self) -> &mut dyn Any {
        self
    }
}
