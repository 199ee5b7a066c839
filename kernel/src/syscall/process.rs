//! The process and thread calls: `clone` (threads; fork and vfork are `process::family`'s),
//! `exit`, identity and sessions, `prctl`, `personality`, `uname`, `getrandom`, `getcpu`, limits
//! (`prlimit64`) and CPU affinity, the scheduling-policy queries.
//!
//! Who a process is: user and group ids (every process starts as root; `setuid` and its kin
//! change them with Linux's rules, `process::posix::Creds`), parent, process group and session,
//! `sysinfo`, the thread name (`prctl(PR_SET_NAME/PR_GET_NAME)`), `personality`, and the
//! scheduling-policy queries (every thread is SCHED_OTHER, priority 0). Processes are started by
//! the kernel, so, as for Linux's init, the parent is 0 and the process group and session are 0
//! until the program calls `setsid` (or `setpgid`). Only the caller's own ids are visible:
//! another pid is ESRCH.
use core::sync::atomic::Ordering;

use linux_abi::Errno;
use linux_abi::clone::*;
use linux_abi::layout::Sysinfo;
use linux_abi::prctl::{PR_GET_NAME, PR_SET_NAME, PR_SET_VMA, PR_SET_VMA_ANON_NAME};

use crate::arch::aarch64::exception::TrapFrame;
use crate::cpu::current_cpu;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::Thread;
use crate::sched::Action;

/// `uname(buf)`.
pub fn uname(buf: u64) -> Result<u64, Errno> {
    // struct utsname: six fields of 65 bytes. sysname and release look like Linux because C
    // libraries parse them (glibc refuses to start on a "kernel too old"); version says what
    // this kernel is.
    let fields: [&str; 6] = [
        "Linux",
        "mmkernel",
        crate::process::posix::RELEASE,
        concat!("#1 mmkernel ", env!("CARGO_PKG_VERSION")),
        "aarch64",
        "(none)",
    ];
    let mut out = [0u8; 65 * 6];
    for (i, field) in fields.iter().enumerate() {
        out[i * 65..i * 65 + field.len()].copy_from_slice(field.as_bytes());
    }
    if copy_out(buf, &out).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}

/// `getcpu(cpu, node, cache)`.
pub fn getcpu(cpu: u64, node: u64) -> Result<u64, Errno> {
    let here = (current_cpu() as u32).to_le_bytes();
    if cpu != 0 && copy_out(cpu, &here).is_err() {
        return Err(Errno::EFAULT);
    }
    if node != 0 && copy_out(node, &0u32.to_le_bytes()).is_err() {
        return Err(Errno::EFAULT);
    }
    Ok(0)
}

/// `getrandom(buf, len, flags)`.
pub fn getrandom(buf: u64, len: u64, flags: u64) -> Result<u64, Errno> {
    use linux_abi::sched::{GRND_INSECURE, GRND_NONBLOCK, GRND_RANDOM};
    if flags & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0
        || flags & (GRND_RANDOM | GRND_INSECURE) == (GRND_RANDOM | GRND_INSECURE)
    {
        return Err(Errno::EINVAL);
    }
    let len = len.min(33_554_431); // Linux caps one call at 32 MiB - 1
    let mut chunk = [0u8; 256];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(chunk.len() as u64) as usize;
        crate::random::fill(&mut chunk[..n]);
        if copy_out(buf.wrapping_add(done), &chunk[..n]).is_err() {
            return if done == 0 { Err(Errno::EFAULT) } else { Ok(done) };
        }
        done += n as u64;
    }
    Ok(done)
}

/// `prlimit64(pid, resource, new, old)` (a null pointer: that half is not wanted), and
/// `getrlimit`/`setrlimit` as its two halves, whose pointer is always used (Linux's
/// `sys_getrlimit` and `sys_setrlimit` call the same `do_prlimit`). In Linux's order: `EFAULT`
/// reading `new`; `ESRCH` a pid that is neither 0 nor this process or thread; the rules of
/// `mm::vm::limits::Rlimits::prlimit` (`EINVAL`, `EPERM`: raising a hard limit needs the
/// capabilities root has); `EFAULT` writing `old` (after the change, as Linux). A new
/// `RLIMIT_AS`, `RLIMIT_DATA` or `RLIMIT_STACK` reaches the process's map at once.
pub fn prlimit(
    thread: &Thread,
    pid: u64,
    resource: u64,
    new: Option<u64>,
    old: Option<u64>,
) -> Result<u64, Errno> {
    use mm::vm::limits::{Rlimit, resource::*};
    let p = thread.process.clone();
    let new = match new {
        None => None,
        Some(ptr) => {
            let mut bytes = [0u8; 16];
            if copy_in(&mut bytes, ptr).is_err() {
                return Err(Errno::EFAULT);
            }
            Some(Rlimit::from_bytes(bytes))
        }
    };
    let pid = pid as i32; // pid_t
    if pid != 0 && pid as u32 != p.pid && pid as u32 != thread.tid {
        return Err(Errno::ESRCH);
    }
    // `unsigned int resource`: the upper half of the register is not looked at.
    let resource = resource as u32;
    let privileged = p.posix.cred().capable(crate::fs::cred::cap::SYS_RESOURCE);
    let result = p.rlimits.lock().prlimit(resource, new, privileged);
    let previous = result?;
    if new.is_some() && resource == linux_abi::resource::RLIMIT_NOFILE {
        let soft = p.rlimits.lock().get(resource).cur;
        p.posix.files.lock().set_limit(soft);
    }
    if new.is_some() && matches!(resource, RLIMIT_AS | RLIMIT_DATA | RLIMIT_STACK) {
        let limits = *p.rlimits.lock();
        if let Some(space) = p.space() {
            let mut mm = space.lock();
            mm.vm_mut().set_rlimits(limits.get(RLIMIT_AS), limits.get(RLIMIT_DATA));
            mm.vm_mut().set_stack_limit(limits.get(RLIMIT_STACK));
        }
    }
    match old {
        Some(ptr) if copy_out(ptr, &previous.to_bytes()).is_err() => Err(Errno::EFAULT),
        _ => Ok(0),
    }
}

/// `exit`: this thread ends (its robust futexes are released, its `clear_child_tid` word is
/// zeroed and woken, as pthread_join expects); the process ends with it if it was the last.
pub fn exit_thread(thread: &mut Thread, status: u64) -> Action {
    let p = thread.process.clone();
    if !p.exiting.load(Ordering::Acquire) {
        p.status.store(status & 0xff, Ordering::Release);
    }
    crate::process::robust::release_robust_list(thread);
    if thread.clear_child_tid != 0 {
        let _ = copy_out(thread.clear_child_tid, &0u32.to_le_bytes());
        let key = crate::process::futex_word_key(&p, thread.clear_child_tid, true);
        crate::sched::futex_wake(key, linux_abi::futex::FUTEX_BITSET_MATCH_ANY, 1);
    }
    Action::ExitThread
}

/// `clone(flags, stack, ptid, tls, ctid)`: a thread (`CLONE_THREAD`, in this address space) or a
/// process (`family::fork`), with Linux's flag checks in its order (`copy_process`): `EINVAL`
/// for `CLONE_THREAD` without `CLONE_SIGHAND`, `CLONE_SIGHAND` without `CLONE_VM`, an exit
/// signal that is not a signal; `ENOSYS` (reported) for what a process cannot share here
/// (`CLONE_VM` without `CLONE_VFORK`, `CLONE_FILES`, `CLONE_SIGHAND`).
pub fn clone(thread: &mut Thread, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    let flags = a[0];
    let result = if flags & CLONE_THREAD != 0 && flags & CLONE_SIGHAND == 0
        || flags & CLONE_SIGHAND != 0 && flags & CLONE_VM == 0
    {
        Err(Errno::EINVAL)
    } else if flags & CLONE_THREAD != 0 {
        clone_thread(thread, frame, flags, a[1], a[2], a[3], a[4])
    } else if flags & 0xff != 0 && !::signal::num::valid(flags & 0xff) {
        Err(Errno::EINVAL)
    } else if flags & CLONE_VM != 0 && flags & CLONE_VFORK == 0 || flags & (CLONE_FILES | CLONE_SIGHAND) != 0
    {
        super::table::unknown(thread, linux_abi::nr::CLONE)
    } else {
        let vfork = flags & CLONE_VFORK != 0;
        return crate::process::family::fork(thread, frame, flags, a[1], a[2], a[3], a[4], vfork);
    };
    Action::reply(frame, result)
}

fn clone_thread(
    thread: &mut Thread,
    frame: &mut TrapFrame,
    flags: u64,
    stack: u64,
    ptid: u64,
    tls: u64,
    ctid: u64,
) -> Result<u64, Errno> {
    let supported = CLONE_VM
        | CLONE_FS
        | CLONE_FILES
        | CLONE_SIGHAND
        | CLONE_THREAD
        | CLONE_SYSVSEM
        | CLONE_SETTLS
        | CLONE_PARENT_SETTID
        | CLONE_CHILD_CLEARTID
        | CLONE_DETACHED
        | CLONE_CHILD_SETTID;
    if flags & (CLONE_VM | CLONE_THREAD | CLONE_SIGHAND) != (CLONE_VM | CLONE_THREAD | CLONE_SIGHAND) {
        return Err(Errno::ENOSYS); // not a thread: `fork_or_thread` sends processes to `family::fork`
    }
    if flags & !(supported | 0xff) != 0 {
        return Err(Errno::EINVAL);
    }
    let p = thread.process.clone();
    if p.exiting.load(Ordering::Acquire) {
        return Err(Errno::EAGAIN);
    }
    // Linux's copy_process checks the thread limit before anything is written to the caller.
    if crate::sched::live_threads() >= crate::sched::max_threads() {
        return Err(Errno::EAGAIN);
    }
    let tid = p.next_tid.fetch_add(1, Ordering::Relaxed);
    if flags & CLONE_PARENT_SETTID != 0 && copy_out(ptid, &tid.to_le_bytes()).is_err() {
        return Err(Errno::EFAULT);
    }
    if flags & CLONE_CHILD_SETTID != 0 && copy_out(ctid, &tid.to_le_bytes()).is_err() {
        return Err(Errno::EFAULT);
    }
    let clone = crate::process::clone::CloneArgs { flags, stack, tls, ctid };
    // The name is inherited; the robust list is the new thread's to register (Linux clears it).
    let posix = crate::process::posix::ThreadPosix {
        robust_list: 0,
        cpu_ticks: 0,
        min_flt: 0,
        rseq: None,
        ..thread.posix.clone()
    };
    let child = clone.child(thread, frame, tid, p.clone(), posix);
    p.signals.thread_created(thread.tid, tid)?;
    // Counted before it can run (a child that exits at once must find itself counted).
    p.threads.fetch_add(1, Ordering::AcqRel);
    match crate::sched::admit(child) {
        Ok(()) => Ok(u64::from(tid)),
        Err(e) => {
            p.signals.thread_gone(tid);
            p.threads.fetch_sub(1, Ordering::AcqRel);
            Err(e)
        }
    }
}

fn online_mask() -> u64 {
    let mut mask = 0;
    for (i, cpu) in crate::cpu::CPUS.iter().enumerate() {
        if cpu.online_at.load(Ordering::Acquire) != 0 {
            mask |= 1 << i;
        }
    }
    mask
}

/// `sched_setaffinity(pid, len, mask)`: the calling thread's CPUs (those online); it moves at
/// once when it is on one it may no longer use.
pub fn sched_setaffinity(
    thread: &mut Thread,
    frame: &mut TrapFrame,
    pid: u64,
    len: u64,
    mask: u64,
) -> Action {
    let result = if pid != 0 && pid != u64::from(thread.tid) {
        Err(Errno::ESRCH) // only the calling thread, as far as this kernel goes
    } else if len < 8 {
        Err(Errno::EINVAL)
    } else {
        let mut bytes = [0u8; 8];
        if copy_in(&mut bytes, mask).is_err() {
            Err(Errno::EFAULT)
        } else {
            let wanted = u64::from_le_bytes(bytes) & online_mask();
            if wanted == 0 {
                Err(Errno::EINVAL)
            } else {
                thread.affinity = wanted;
                frame.x[0] = 0;
                // Off the CPUs it may use: move now.
                if wanted & (1 << current_cpu()) == 0 {
                    return Action::Yield;
                }
                Ok(0)
            }
        }
    };
    Action::reply(frame, result)
}

/// `sched_getaffinity(pid, len, mask)`: 8 bytes of the CPUs the thread may use.
pub fn sched_getaffinity(thread: &Thread, pid: u64, len: u64, mask: u64) -> Result<u64, Errno> {
    if pid != 0 && pid != u64::from(thread.tid) {
        return Err(Errno::ESRCH);
    }
    if len < 8 || !len.is_multiple_of(8) {
        return Err(Errno::EINVAL);
    }
    let bytes = (thread.affinity & online_mask()).to_le_bytes();
    if copy_out(mask, &bytes).is_err() { Err(Errno::EFAULT) } else { Ok(8) }
}

/// Whether `pid` (0: the caller) names the calling process.
fn is_self(thread: &Thread, pid: u64) -> bool {
    pid == 0 || pid == u64::from(thread.process.pid)
}

/// Whether `pid` (0: the caller) names the calling thread or its process.
fn is_self_or_thread(thread: &Thread, pid: u64) -> bool {
    is_self(thread, pid) || pid == u64::from(thread.tid)
}

/// `getpgid(pid)`.
pub fn getpgid(thread: &Thread, pid: u64) -> Result<u64, Errno> {
    if is_self(thread, pid) {
        Ok(u64::from(thread.process.posix.pgid.load(Ordering::Acquire)))
    } else {
        Err(Errno::ESRCH)
    }
}

/// `getsid(pid)`.
pub fn getsid(thread: &Thread, pid: u64) -> Result<u64, Errno> {
    if is_self(thread, pid) {
        Ok(u64::from(thread.process.posix.sid.load(Ordering::Acquire)))
    } else {
        Err(Errno::ESRCH)
    }
}

/// `setsid()`: a new session and group led by the caller; EPERM for a group leader.
pub fn setsid(thread: &Thread) -> Result<u64, Errno> {
    let p = &thread.process;
    if p.posix.pgid.load(Ordering::Acquire) == p.pid {
        return Err(Errno::EPERM);
    }
    p.posix.sid.store(p.pid, Ordering::Release);
    p.posix.pgid.store(p.pid, Ordering::Release);
    p.posix.ctty.store(false, Ordering::Release); // a new session has no controlling terminal
    Ok(u64::from(p.pid))
}

/// `setpgid(pid, pgid)`: the caller only (no children); a session leader cannot move, and the
/// only group it can join is its own (no other group exists in its session).
pub fn setpgid(thread: &Thread, pid: u64, pgid: u64) -> Result<u64, Errno> {
    let p = &thread.process;
    if (pgid as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    if !is_self(thread, pid) {
        return Err(Errno::ESRCH);
    }
    let pgid = if pgid == 0 { p.pid } else { pgid as u32 };
    if p.posix.sid.load(Ordering::Acquire) == p.pid {
        return Err(Errno::EPERM);
    }
    if pgid != p.pid && pgid != p.posix.pgid.load(Ordering::Acquire) {
        return Err(Errno::EPERM);
    }
    p.posix.pgid.store(pgid, Ordering::Release);
    Ok(0)
}

/// `sysinfo(info)`: uptime, RAM in bytes (`mem_unit` 1) from the frame allocator, threads.
pub fn sysinfo(thread: &Thread, info: u64) -> Result<u64, Errno> {
    let (used, total) = crate::memory::frames::usage();
    let page = mm::addr::PAGE_SIZE;
    let s = Sysinfo {
        uptime: (crate::wallclock::monotonic_ns() / 1_000_000_000) as i64,
        totalram: total as u64 * page,
        freeram: total.saturating_sub(used) as u64 * page,
        procs: thread.process.threads.load(Ordering::Acquire).min(u16::MAX as usize) as u16,
    };
    if copy_out(info, &s.to_bytes()).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}

/// `prctl(option, arg2, ...)` for the thread-name options `PR_SET_NAME` and `PR_GET_NAME` (the
/// memory options are [`memory::prctl`](super::memory::prctl)'s); anything else EINVAL.
fn prctl_name(thread: &mut Thread, option: u64, arg2: u64) -> Result<u64, Errno> {
    match option {
        PR_SET_NAME => {
            // Up to 15 bytes, stopping at a NUL; bytes past a fault are not needed (Linux copies
            // 16 bytes with strncpy_from_user, which stops at the NUL too).
            let mut name = [0u8; 16];
            for (i, slot) in name.iter_mut().take(15).enumerate() {
                let mut b = [0u8; 1];
                if copy_in(&mut b, arg2.wrapping_add(i as u64)).is_err() {
                    return Err(Errno::EFAULT);
                }
                if b[0] == 0 {
                    break;
                }
                *slot = b[0];
            }
            thread.posix.name = name;
            Ok(0)
        }
        PR_GET_NAME => copy_out(arg2, &thread.posix.name).map(|()| 0).map_err(|_| Errno::EFAULT),
        _ => Err(Errno::EINVAL),
    }
}

/// `prctl(PR_SET_VMA, PR_SET_VMA_ANON_NAME, addr, len, name)`: names anonymous memory
/// (`mm::vm::VmMap::set_anon_name`, which checks the name and the range as Linux). The name is
/// copied as Linux's `strndup_user` copies it: up to `ANON_NAME_MAX` bytes with its NUL (`EINVAL`
/// when none is there, `EFAULT` for a byte that cannot be read before it); NULL takes names away.
fn prctl_set_vma(thread: &Thread, opt: u64, addr: u64, len: u64, uname: u64) -> Result<u64, Errno> {
    use mm::vm::map::ANON_NAME_MAX;
    if opt != PR_SET_VMA_ANON_NAME {
        return Err(Errno::EINVAL);
    }
    let mut buf = [0u8; ANON_NAME_MAX];
    let mut len_of_name = None;
    for i in 0..if uname == 0 { 0 } else { ANON_NAME_MAX } {
        copy_in(&mut buf[i..=i], uname.wrapping_add(i as u64)).map_err(|_| Errno::EFAULT)?;
        if buf[i] == 0 {
            len_of_name = Some(i);
            break;
        }
    }
    let name = match len_of_name {
        Some(n) => Some(&buf[..n]),
        None if uname == 0 => None,
        None => return Err(Errno::EINVAL),
    };
    let space = thread.process.space().ok_or(Errno::ENOMEM)?;
    space.lock().vm_mut().set_anon_name(addr, len, name).map(|()| 0)
}

/// `personality(persona)`: 0xffffffff queries; anything else is stored and the old value returned.
/// The address space learns the new value at once (its `READ_IMPLIES_EXEC` lifts W^X, for the
/// mappings made from now on, as Linux's flag acts on each later `mmap`), and again at `execve`.
pub fn personality(thread: &Thread, persona: u64) -> Result<u64, Errno> {
    let cell = &thread.process.posix.personality;
    let old = cell.load(Ordering::Acquire);
    if persona as u32 != u32::MAX {
        // Under the address space's lock, so that a racing call of another thread leaves the
        // space with the value the cell ends with.
        let space = thread.process.space();
        let mut mm = space.as_ref().map(|s| s.lock());
        cell.store(persona as u32, Ordering::Release);
        if let Some(mm) = mm.as_mut() {
            mm.vm_mut().set_personality(u64::from(persona as u32));
        }
    }
    Ok(u64::from(old))
}

/// `sched_getscheduler(pid)`: SCHED_OTHER (0).
pub fn sched_getscheduler(thread: &Thread, pid: u64) -> Result<u64, Errno> {
    if (pid as i32) < 0 {
        Err(Errno::EINVAL)
    } else if is_self_or_thread(thread, pid) {
        Ok(0)
    } else {
        Err(Errno::ESRCH)
    }
}

/// `sched_getparam(pid, param)`: priority 0.
pub fn sched_getparam(thread: &Thread, pid: u64, param: u64) -> Result<u64, Errno> {
    if param == 0 || (pid as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    if !is_self_or_thread(thread, pid) {
        return Err(Errno::ESRCH);
    }
    if copy_out(param, &0u32.to_le_bytes()).is_err() { Err(Errno::EFAULT) } else { Ok(0) }
}

/// `sched_get_priority_max(policy)` / `_min`: 0 for the time-sharing policies, 99 / 1 for the
/// real-time ones (which this kernel does not grant), EINVAL otherwise.
pub fn sched_priority_bound(policy: u64, max: bool) -> Result<u64, Errno> {
    match policy {
        0 | 3 | 5 => Ok(0), // SCHED_OTHER, SCHED_BATCH, SCHED_IDLE
        1 | 2 => Ok(if max { 99 } else { 1 }),
        _ => Err(Errno::EINVAL),
    }
}

/// `prctl(option, arg2, arg3, arg4, arg5)`: the thread name and the names of anonymous memory
/// here, the memory options in [`memory::prctl`](super::memory::prctl).
pub fn prctl(
    thread: &mut Thread,
    option: u64,
    arg2: u64,
    arg3: u64,
    arg4: u64,
    arg5: u64,
) -> Result<u64, Errno> {
    use linux_abi::prctl::{
        PR_GET_TAGGED_ADDR_CTRL, PR_PAC_GET_ENABLED_KEYS, PR_PAC_RESET_KEYS, PR_PAC_SET_ENABLED_KEYS,
        PR_SET_TAGGED_ADDR_CTRL,
    };
    match option {
        PR_SET_NAME | PR_GET_NAME => prctl_name(thread, option, arg2),
        PR_PAC_RESET_KEYS | PR_PAC_SET_ENABLED_KEYS | PR_PAC_GET_ENABLED_KEYS => {
            prctl_pac(thread, option, [arg2, arg3, arg4, arg5])
        }
        PR_SET_VMA => prctl_set_vma(thread, arg2, arg3, arg4, arg5),
        PR_SET_TAGGED_ADDR_CTRL | PR_GET_TAGGED_ADDR_CTRL => {
            prctl_tagged_addr(thread, option, [arg2, arg3, arg4, arg5])
        }
        _ => super::memory::prctl(&thread.process, option, arg2, arg3, arg4, arg5),
    }
}

/// The tagged-address ABI and MTE's controls, as Linux's `set_tagged_addr_ctrl` and
/// `get_tagged_addr_ctrl` (the calling thread's): `EINVAL` for unused arguments that are not 0
/// and for bits the CPU cannot give (the MTE fields without FEAT_MTE2). The new control is
/// installed at once (the thread returns to EL0 from here).
fn prctl_tagged_addr(thread: &mut Thread, option: u64, a: [u64; 4]) -> Result<u64, Errno> {
    use crate::arch::aarch64::mte::TagControl;
    if option == linux_abi::prctl::PR_GET_TAGGED_ADDR_CTRL {
        if a != [0, 0, 0, 0] {
            return Err(Errno::EINVAL);
        }
        return Ok(thread.mte.bits());
    }
    if a[1..] != [0, 0, 0] {
        return Err(Errno::EINVAL);
    }
    thread.mte = TagControl::from_prctl(a[0])?;
    thread.mte.install();
    Ok(0)
}

/// The pointer-authentication options, as Linux's `ptrauth_prctl_reset_keys` and
/// `ptrauth_set_enabled_keys`: `EINVAL` on a CPU without address authentication, for unused
/// arguments that are not 0, and for keys outside the masks. The thread's keys change, and are
/// loaded into the registers at once (the thread returns to EL0 from here).
fn prctl_pac(thread: &mut Thread, option: u64, a: [u64; 4]) -> Result<u64, Errno> {
    use crate::arch::aarch64::pauth::{self, key};
    use linux_abi::prctl::{PR_PAC_GET_ENABLED_KEYS, PR_PAC_RESET_KEYS};
    if !pauth::has_address_auth() {
        return Err(Errno::EINVAL);
    }
    match option {
        PR_PAC_RESET_KEYS => {
            if a[1..] != [0, 0, 0] {
                return Err(Errno::EINVAL);
            }
            let all = u64::from(key::ADDRESS | key::GA);
            let which = if a[0] == 0 { all } else { a[0] };
            if which & !all != 0 || (which & u64::from(key::GA) != 0 && !pauth::has_generic_auth()) {
                return Err(Errno::EINVAL);
            }
            thread.pac.reset(which as u8, crate::process::random_pac_words());
        }
        PR_PAC_GET_ENABLED_KEYS => {
            if a != [0, 0, 0, 0] {
                return Err(Errno::EINVAL);
            }
            return Ok(u64::from(thread.pac.enabled()));
        }
        _ => {
            let (keys, enabled) = (a[0], a[1]);
            let address = u64::from(key::ADDRESS);
            if keys & !address != 0 || enabled & !keys != 0 || a[2..] != [0, 0] {
                return Err(Errno::EINVAL);
            }
            thread.pac.set_enabled(keys as u8, enabled as u8);
        }
    }
    thread.pac.install();
    Ok(0)
}

/// `syslog(type, buf, len)` (`klogctl`): the kernel's log (`crate::klog`) in Linux's format,
/// `<level>[seconds.micros] text` per line. Read-all returns the newest records that fit in
/// `len`; read-clear also forgets them; the console level can be set (1 to 8).
pub fn syslog(kind: u64, buf: u64, len: u64) -> Result<u64, Errno> {
    use crate::klog;
    const CLOSE: u64 = 0;
    const OPEN: u64 = 1;
    const READ: u64 = 2;
    const READ_ALL: u64 = 3;
    const READ_CLEAR: u64 = 4;
    const CLEAR: u64 = 5;
    const CONSOLE_OFF: u64 = 6;
    const CONSOLE_ON: u64 = 7;
    const CONSOLE_LEVEL: u64 = 8;
    const SIZE_UNREAD: u64 = 9;
    const SIZE_BUFFER: u64 = 10;
    match kind {
        CLOSE | OPEN => Ok(0),
        READ | READ_ALL | READ_CLEAR => {
            if buf == 0 || (len as i64) < 0 {
                return Err(Errno::EINVAL);
            }
            if len == 0 {
                return Ok(0);
            }
            let (first, next) = klog::bounds();
            // The newest records that fit, in order.
            let mut line = [0u8; 1100];
            let mut total = 0u64;
            let mut from = next;
            while from > first {
                let Some(r) = klog::read(from - 1) else { break };
                let n = klog::syslog_line(&r, &mut line) as u64;
                if total + n > len {
                    break;
                }
                total += n;
                from -= 1;
            }
            let mut at = 0u64;
            for seq in from..next {
                let Some(r) = klog::read(seq) else { break };
                let n = klog::syslog_line(&r, &mut line);
                copy_out(buf + at, &line[..n]).map_err(|_| Errno::EFAULT)?;
                at += n as u64;
            }
            if kind == READ_CLEAR || kind == READ {
                klog::clear();
            }
            Ok(at)
        }
        CLEAR => {
            klog::clear();
            Ok(0)
        }
        CONSOLE_OFF => {
            klog::set_console_level(1);
            Ok(0)
        }
        CONSOLE_ON => {
            klog::set_console_level(klog::DEFAULT_CONSOLE_LEVEL);
            Ok(0)
        }
        CONSOLE_LEVEL => {
            if !(1..=8).contains(&len) {
                return Err(Errno::EINVAL);
            }
            klog::set_console_level(len as u8);
            Ok(0)
        }
        SIZE_UNREAD => Ok(klog::syslog_len() as u64),
        SIZE_BUFFER => Ok(klog::LOG_SIZE as u64),
        _ => Err(Errno::EINVAL),
    }
}
