//! Who a process is: user and group ids (everyone is root: 0), parent, process group and
//! session, `sysinfo`, the thread name (`prctl(PR_SET_NAME/PR_GET_NAME)`), `personality`, and the scheduling-policy
//! queries (every thread is SCHED_OTHER, priority 0).
//!
//! Processes are started by the kernel, so, as for Linux's init, the parent is 0 and the
//! process group and session are 0 until the program calls `setsid` (or `setpgid`). Only the
//! caller's own ids are visible: another pid is ESRCH.
use core::sync::atomic::Ordering;

use linux_abi::layout::Sysinfo;

use crate::process::Thread;
use crate::syscall::copy_in;
use crate::syscall::copy_out;
use crate::syscall::errno::{EFAULT, EINVAL, EPERM, ESRCH};

/// Whether `pid` (0: the caller) names the calling process.
fn is_self(thread: &Thread, pid: u64) -> bool {
    pid == 0 || pid == u64::from(thread.process.pid)
}

/// Whether `pid` (0: the caller) names the calling thread or its process.
fn is_self_or_thread(thread: &Thread, pid: u64) -> bool {
    is_self(thread, pid) || pid == u64::from(thread.tid)
}

/// `getgroups(size, list)`: root has no supplementary groups.
pub fn getgroups(size: u64) -> i64 {
    if (size as i32) < 0 { -EINVAL } else { 0 }
}

/// `getpgid(pid)`.
pub fn getpgid(thread: &Thread, pid: u64) -> i64 {
    if is_self(thread, pid) { i64::from(thread.process.posix.pgid.load(Ordering::Acquire)) } else { -ESRCH }
}

/// `getsid(pid)`.
pub fn getsid(thread: &Thread, pid: u64) -> i64 {
    if is_self(thread, pid) { i64::from(thread.process.posix.sid.load(Ordering::Acquire)) } else { -ESRCH }
}

/// `setsid()`: a new session and group led by the caller; EPERM for a group leader.
pub fn setsid(thread: &Thread) -> i64 {
    let p = &thread.process;
    if p.posix.pgid.load(Ordering::Acquire) == p.pid {
        return -EPERM;
    }
    p.posix.sid.store(p.pid, Ordering::Release);
    p.posix.pgid.store(p.pid, Ordering::Release);
    p.posix.ctty.store(false, Ordering::Release); // a new session has no controlling terminal
    i64::from(p.pid)
}

/// `setpgid(pid, pgid)`: the caller only (no children); a session leader cannot move, and the
/// only group it can join is its own (no other group exists in its session).
pub fn setpgid(thread: &Thread, pid: u64, pgid: u64) -> i64 {
    let p = &thread.process;
    if (pgid as i32) < 0 {
        return -EINVAL;
    }
    if !is_self(thread, pid) {
        return -ESRCH;
    }
    let pgid = if pgid == 0 { p.pid } else { pgid as u32 };
    if p.posix.sid.load(Ordering::Acquire) == p.pid {
        return -EPERM;
    }
    if pgid != p.pid && pgid != p.posix.pgid.load(Ordering::Acquire) {
        return -EPERM;
    }
    p.posix.pgid.store(pgid, Ordering::Release);
    0
}

/// `sysinfo(info)`: uptime, RAM in bytes (`mem_unit` 1) from the frame allocator, threads.
pub fn sysinfo(thread: &Thread, info: u64) -> i64 {
    let (used, total) = crate::memory::frames::usage();
    let page = mm::addr::PAGE_SIZE;
    let s = Sysinfo {
        uptime: (crate::wallclock::monotonic_ns() / 1_000_000_000) as i64,
        totalram: total as u64 * page,
        freeram: total.saturating_sub(used) as u64 * page,
        procs: thread.process.threads.load(Ordering::Acquire).min(u16::MAX as usize) as u16,
    };
    if copy_out(&thread.process, info, &s.to_bytes()).is_err() { -EFAULT } else { 0 }
}

/// `prctl(PR_SET_NAME, name)`.
pub const PR_SET_NAME: u64 = 15;
/// `prctl(PR_GET_NAME, buf)`.
pub const PR_GET_NAME: u64 = 16;

/// `prctl(option, arg2, ...)` for the thread-name options `PR_SET_NAME` and `PR_GET_NAME` (the
/// memory options are `vm_syscalls::prctl`'s); anything else EINVAL.
pub fn prctl(thread: &mut Thread, option: u64, arg2: u64) -> i64 {
    let p = thread.process.clone();
    match option {
        PR_SET_NAME => {
            // Up to 15 bytes, stopping at a NUL; bytes past a fault are not needed (Linux copies
            // 16 bytes with strncpy_from_user, which stops at the NUL too).
            let mut name = [0u8; 16];
            for (i, slot) in name.iter_mut().take(15).enumerate() {
                let mut b = [0u8; 1];
                if copy_in(&p, &mut b, arg2.wrapping_add(i as u64)).is_err() {
                    return -EFAULT;
                }
                if b[0] == 0 {
                    break;
                }
                *slot = b[0];
            }
            thread.posix.name = name;
            0
        }
        PR_GET_NAME => {
            if copy_out(&p, arg2, &thread.posix.name).is_err() {
                -EFAULT
            } else {
                0
            }
        }
        _ => -EINVAL,
    }
}

/// `personality(persona)`: 0xffffffff queries; anything else is stored and the old value returned.
pub fn personality(thread: &Thread, persona: u64) -> i64 {
    let cell = &thread.process.posix.personality;
    let old = cell.load(Ordering::Acquire);
    if persona as u32 != u32::MAX {
        cell.store(persona as u32, Ordering::Release);
    }
    i64::from(old)
}

/// `sched_getscheduler(pid)`: SCHED_OTHER (0).
pub fn sched_getscheduler(thread: &Thread, pid: u64) -> i64 {
    if (pid as i32) < 0 {
        -EINVAL
    } else if is_self_or_thread(thread, pid) {
        0
    } else {
        -ESRCH
    }
}

/// `sched_getparam(pid, param)`: priority 0.
pub fn sched_getparam(thread: &Thread, pid: u64, param: u64) -> i64 {
    if param == 0 || (pid as i32) < 0 {
        return -EINVAL;
    }
    if !is_self_or_thread(thread, pid) {
        return -ESRCH;
    }
    if copy_out(&thread.process, param, &0u32.to_le_bytes()).is_err() { -EFAULT } else { 0 }
}

/// `sched_get_priority_max(policy)` / `_min`: 0 for the time-sharing policies, 99 / 1 for the
/// real-time ones (which this kernel does not grant), EINVAL otherwise.
pub fn sched_priority_bound(policy: u64, max: bool) -> i64 {
    match policy {
        0 | 3 | 5 => 0, // SCHED_OTHER, SCHED_BATCH, SCHED_IDLE
        1 | 2 => {
            if max {
                99
            } else {
                1
            }
        }
        _ => -EINVAL,
    }
}
