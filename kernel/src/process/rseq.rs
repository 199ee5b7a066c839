//! Restartable sequences, after Linux's kernel/rseq.c (6.1): a thread registers a
//! `struct rseq` (32 bytes, 32-aligned) in its own memory, and the kernel keeps it true on
//! every return to user space after the thread was switched out (preempted, migrated, woken):
//! `cpu_id_start` and `cpu_id` say the CPU it runs on, and a thread that was inside the
//! critical section its `rseq_cs` describes resumes at that section's abort handler instead,
//! whose preceding word must be the signature the thread registered (`RSEQ_SIG`), as Linux's
//! `rseq_ip_fixup` checks. glibc registers one for every thread at its start (`__rseq_offset`
//! from the thread pointer) and reads `cpu_id` for `sched_getcpu`.
//!
//! The update is made in `Task::resume` (`process/task.rs`), with the thread's address space
//! live, before its signals are delivered, so a signal frame saves the abort handler's address.
//! A fork's child keeps the registration (its copy of the memory holds the same area); a new
//! thread starts without one (glibc registers it); `execve` drops it. A `struct rseq` that
//! cannot be written or a bad `rseq_cs` gets the thread SIGSEGV, as on Linux.
//!
//! Not done: the abort of a critical section interrupted by a signal delivered without a
//! switch (Linux's `rseq_signal_deliver`), and `MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ`'s
//! restart of the other threads' sections (the barrier itself is done).
use ::signal::info::SigInfo;
use ::signal::num;
use linux_abi::Errno;
use linux_abi::sched::RSEQ_FLAG_UNREGISTER;

use super::Thread;
use super::signals::{Target, send};
use crate::memory::uaccess::{copy_in, copy_out};

/// `sizeof(struct rseq)` and its alignment in Linux 6.1.
pub const RSEQ_SIZE: u32 = 32;
/// `cpu_id` of an area that is not registered (`RSEQ_CPU_ID_UNINITIALIZED`).
const CPU_ID_UNINITIALIZED: u32 = u32::MAX;
/// Offset of `rseq_cs` in `struct rseq`.
const RSEQ_CS: u64 = 8;
/// The end of the user half (Linux's `TASK_SIZE`): no user address is at or above it.
const TASK_SIZE: u64 = 1 << mm::addr::USER_VA_BITS;

/// A thread's registration.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rseq {
    /// The area.
    addr: u64,
    /// Its length as registered.
    len: u32,
    /// The abort handlers' signature.
    sig: u32,
    /// The CPU the area last said (`u32::MAX`: none yet).
    cpu: u32,
}

/// Writes `cpu` into the area's `cpu_id_start` and `cpu_id`.
fn write_cpu(addr: u64, cpu: u32) -> Result<(), Errno> {
    let mut b = [0u8; 8];
    b[..4].copy_from_slice(&cpu.to_le_bytes());
    b[4..].copy_from_slice(&cpu.to_le_bytes());
    copy_out(addr, &b).map_err(|_| Errno::EFAULT)
}

/// `rseq(rseq, rseq_len, flags, sig)` for `thread`, as Linux 6.1 answers it.
///
/// # Errors
/// `EINVAL` (unknown flags, another area or length, a misaligned area or a length other than
/// 32), `EPERM` (another signature), `EBUSY` (already registered), `EFAULT`.
pub fn rseq(thread: &mut Thread, addr: u64, len: u64, flags: u64, sig: u64) -> Result<u64, Errno> {
    let (len, sig) = (len as u32, sig as u32);
    let flags = flags as u32;
    let current = thread.posix.rseq;
    if u64::from(flags) & RSEQ_FLAG_UNREGISTER != 0 {
        if u64::from(flags) & !RSEQ_FLAG_UNREGISTER != 0 {
            return Err(Errno::EINVAL);
        }
        let r = current.filter(|r| r.addr == addr).ok_or(Errno::EINVAL)?;
        if len != r.len {
            return Err(Errno::EINVAL);
        }
        if sig != r.sig {
            return Err(Errno::EPERM);
        }
        let mut b = [0u8; 8];
        b[4..].copy_from_slice(&CPU_ID_UNINITIALIZED.to_le_bytes());
        copy_out(addr, &b).map_err(|_| Errno::EFAULT)?;
        thread.posix.rseq = None;
        return Ok(0);
    }
    if flags != 0 {
        return Err(Errno::EINVAL);
    }
    if let Some(r) = current {
        if r.addr != addr || r.len != len {
            return Err(Errno::EINVAL);
        }
        return Err(if r.sig != sig { Errno::EPERM } else { Errno::EBUSY });
    }
    if !addr.is_multiple_of(u64::from(RSEQ_SIZE)) || len != RSEQ_SIZE {
        return Err(Errno::EINVAL);
    }
    if addr.checked_add(u64::from(len)).is_none_or(|end| end > TASK_SIZE) {
        return Err(Errno::EFAULT);
    }
    // Registered, and the area says the CPU before the call returns (Linux: on the way out).
    let cpu = crate::cpu::current_cpu() as u32;
    // An area that cannot be written now is tried again at the next switch (SIGSEGV then).
    let written = write_cpu(addr, cpu).is_ok();
    thread.posix.rseq = Some(Rseq { addr, len, sig, cpu: if written { cpu } else { u32::MAX } });
    Ok(0)
}

/// Before `thread` returns to user space after a switch (`Task::resume`): the abort of an
/// interrupted critical section and the CPU number (module documentation). A failure sends the
/// thread SIGSEGV.
pub fn on_resume(thread: &mut Thread) {
    let Some(mut r) = thread.posix.rseq else { return };
    let fixed = fixup(thread, &r).and_then(|()| {
        let cpu = crate::cpu::current_cpu() as u32;
        if cpu != r.cpu {
            write_cpu(r.addr, cpu)?;
            r.cpu = cpu;
            thread.posix.rseq = Some(r);
        }
        Ok(())
    });
    if fixed.is_err() {
        let info = SigInfo::sent(num::SIGSEGV, num::SI_KERNEL, 0, 0);
        let _ = send(&thread.process, Target::Thread(thread.tid), info);
    }
}

/// Moves the thread to its abort handler if it was inside the critical section `rseq_cs`
/// names, and clears `rseq_cs` (Linux's `rseq_ip_fixup`).
fn fixup(thread: &mut Thread, r: &Rseq) -> Result<(), Errno> {
    let mut word = [0u8; 8];
    copy_in(&mut word, r.addr + RSEQ_CS).map_err(|_| Errno::EFAULT)?;
    let cs = u64::from_le_bytes(word);
    if cs == 0 {
        return Ok(());
    }
    let top = TASK_SIZE;
    if cs >= top {
        return Err(Errno::EINVAL);
    }
    // struct rseq_cs: version, flags (u32 each), start_ip, post_commit_offset, abort_ip.
    let mut b = [0u8; 32];
    copy_in(&mut b, cs).map_err(|_| Errno::EFAULT)?;
    let field = |at: usize| u64::from_le_bytes(b[at..at + 8].try_into().unwrap_or_default());
    let version = u32::from_le_bytes(b[..4].try_into().unwrap_or_default());
    let (start, post_commit, abort) = (field(8), field(16), field(24));
    let end = start.checked_add(post_commit).ok_or(Errno::EINVAL)?;
    if start >= top || end >= top || abort >= top || version > 0 || abort.wrapping_sub(start) < post_commit {
        return Err(Errno::EINVAL);
    }
    let mut sig = [0u8; 4];
    copy_in(&mut sig, abort.wrapping_sub(4)).map_err(|_| Errno::EFAULT)?;
    if u32::from_le_bytes(sig) != r.sig {
        return Err(Errno::EINVAL);
    }
    if thread.regs.pc.wrapping_sub(start) >= post_commit {
        // Not inside it: the descriptor is stale, and cleared.
        return copy_out(r.addr + RSEQ_CS, &[0u8; 8]).map_err(|_| Errno::EFAULT);
    }
    copy_out(r.addr + RSEQ_CS, &[0u8; 8]).map_err(|_| Errno::EFAULT)?;
    thread.regs.pc = abort;
    Ok(())
}
