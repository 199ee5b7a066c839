//! System calls, with Linux arm64 numbers and negative-errno returns.
//!
//! Arguments arrive in x0..x5 and the number in x8; the result goes back in x0. Every user pointer
//! goes through [`copy_in`]/[`copy_out`] (EFAULT, never a kernel fault; a page not yet touched is
//! demand-paged first), and no argument value can make the kernel panic: anything not understood
//! is EINVAL or ENOSYS, as Linux answers.
pub mod files;
pub mod futex;
pub mod identity;
pub mod memory;
pub mod signals;
pub mod time;

use alloc::sync::Arc;
use core::sync::atomic::Ordering;
use mm::vm::abi;

use crate::arch::aarch64::exception::{FpState, TrapFrame};
use crate::arch::aarch64::user::{Fault, copy_from_user, copy_to_user};
use crate::cpu::current_cpu;
use crate::process::{Access, Action, Process, Thread};

/// The errno values the system calls return, as positive `i64` codes (`-CODE` in x0), all from
/// `linux_abi::Errno`.
#[allow(missing_docs, reason = "each is the errno of the same name")]
pub mod errno {
    use linux_abi::Errno;
    pub const ESRCH: i64 = Errno::ESRCH.code() as i64;
    pub const EBADF: i64 = Errno::EBADF.code() as i64;
    pub const EAGAIN: i64 = Errno::EAGAIN.code() as i64;
    pub const ENOMEM: i64 = Errno::ENOMEM.code() as i64;
    pub const EFAULT: i64 = Errno::EFAULT.code() as i64;
    pub const EINVAL: i64 = Errno::EINVAL.code() as i64;
    pub const ENOSYS: i64 = Errno::ENOSYS.code() as i64;
    pub const ETIMEDOUT: i64 = Errno::ETIMEDOUT.code() as i64;
    pub const EPERM: i64 = Errno::EPERM.code() as i64;
    pub const EMFILE: i64 = Errno::EMFILE.code() as i64;
    pub const ENAMETOOLONG: i64 = Errno::ENAMETOOLONG.code() as i64;
    pub const ENOENT: i64 = Errno::ENOENT.code() as i64;
    pub const ENOTTY: i64 = Errno::ENOTTY.code() as i64;
    pub const ERANGE: i64 = Errno::ERANGE.code() as i64;
    pub const ESPIPE: i64 = Errno::ESPIPE.code() as i64;
    pub const E2BIG: i64 = Errno::E2BIG.code() as i64;
    pub const ENOEXEC: i64 = Errno::ENOEXEC.code() as i64;
    pub const ECHILD: i64 = Errno::ECHILD.code() as i64;
    pub const EACCES: i64 = Errno::EACCES.code() as i64;
    pub const EPIPE: i64 = Errno::EPIPE.code() as i64;
}
use errno::*;

/// Linux arm64 system call numbers (`include/uapi/asm-generic/unistd.h`).
#[allow(missing_docs, reason = "each number is named after its Linux system call")]
pub mod nr {
    pub const GETCWD: u64 = 17;
    pub const DUP: u64 = 23;
    pub const DUP3: u64 = 24;
    pub const FCNTL: u64 = 25;
    pub const IOCTL: u64 = 29;
    pub const FACCESSAT: u64 = 48;
    pub const OPENAT: u64 = 56;
    pub const CLOSE: u64 = 57;
    pub const PIPE2: u64 = 59;
    pub const LSEEK: u64 = 62;
    pub const FTRUNCATE: u64 = 46;
    pub const PREAD64: u64 = 67;
    pub const PWRITE64: u64 = 68;
    pub const MEMFD_CREATE: u64 = 279;
    pub const READ: u64 = 63;
    pub const WRITE: u64 = 64;
    pub const READV: u64 = 65;
    pub const WRITEV: u64 = 66;
    pub const PSELECT6: u64 = 72;
    pub const PPOLL: u64 = 73;
    pub const READLINKAT: u64 = 78;
    pub const NEWFSTATAT: u64 = 79;
    pub const FSTAT: u64 = 80;
    pub const PERSONALITY: u64 = 92;
    pub const EXIT: u64 = 93;
    pub const EXIT_GROUP: u64 = 94;
    pub const SET_TID_ADDRESS: u64 = 96;
    pub const FUTEX: u64 = 98;
    pub const SET_ROBUST_LIST: u64 = 99;
    pub const GET_ROBUST_LIST: u64 = 100;
    pub const NANOSLEEP: u64 = 101;
    pub const CLOCK_GETTIME: u64 = 113;
    pub const CLOCK_GETRES: u64 = 114;
    pub const CLOCK_NANOSLEEP: u64 = 115;
    pub const SCHED_GETSCHEDULER: u64 = 120;
    pub const SCHED_GETPARAM: u64 = 121;
    pub const SCHED_SETAFFINITY: u64 = 122;
    pub const SCHED_GETAFFINITY: u64 = 123;
    pub const SCHED_YIELD: u64 = 124;
    pub const SCHED_GET_PRIORITY_MAX: u64 = 125;
    pub const SCHED_GET_PRIORITY_MIN: u64 = 126;
    pub const TIMES: u64 = 153;
    pub const SETPGID: u64 = 154;
    pub const GETPGID: u64 = 155;
    pub const GETSID: u64 = 156;
    pub const SETSID: u64 = 157;
    pub const GETGROUPS: u64 = 158;
    pub const UNAME: u64 = 160;
    pub const GETRLIMIT: u64 = 163;
    pub const SETRLIMIT: u64 = 164;
    pub const GETRUSAGE: u64 = 165;
    pub const PRCTL: u64 = 167;
    pub const GETCPU: u64 = 168;
    pub const GETTIMEOFDAY: u64 = 169;
    pub const GETPID: u64 = 172;
    pub const GETPPID: u64 = 173;
    pub const GETUID: u64 = 174;
    pub const GETEUID: u64 = 175;
    pub const GETGID: u64 = 176;
    pub const GETEGID: u64 = 177;
    pub const GETTID: u64 = 178;
    pub const SYSINFO: u64 = 179;
    pub const BRK: u64 = 214;
    pub const MUNMAP: u64 = 215;
    pub const CLONE: u64 = 220;
    pub const EXECVE: u64 = 221;
    pub const WAIT4: u64 = 260;
    pub const WAITID: u64 = 95;
    pub const MMAP: u64 = 222;
    pub const MPROTECT: u64 = 226;
    pub const MREMAP: u64 = 216;
    pub const MSYNC: u64 = 227;
    pub const MLOCK: u64 = 228;
    pub const MUNLOCK: u64 = 229;
    pub const MLOCKALL: u64 = 230;
    pub const MUNLOCKALL: u64 = 231;
    pub const MINCORE: u64 = 232;
    pub const MADVISE: u64 = 233;
    pub const PRLIMIT64: u64 = 261;
    pub const GETRANDOM: u64 = 278;
    pub const MLOCK2: u64 = 284;
    pub const STATX: u64 = 291;
    pub const FACCESSAT2: u64 = 439;
}

/// Handles the system call in `frame` for `thread`; tells the scheduler what to do next.
pub fn dispatch(thread: &mut Thread, frame: &mut TrapFrame) -> Action {
    use crate::syscall::{files, futex, identity, time};
    let a = [frame.x[0], frame.x[1], frame.x[2], frame.x[3], frame.x[4], frame.x[5]];
    // A borrow, not a clone: the thread's own reference keeps the process alive through the
    // call, and a clone and its drop are two atomic read-modify-writes on every system call.
    let p = &thread.process;
    let result: i64 = match frame.x[8] {
        // Descriptors and the console.
        nr::READ => return files::read(p, frame, a[0], files::Buffers::One(a[1], a[2])),
        nr::READV => return files::read(p, frame, a[0], files::Buffers::Vector(a[1], a[2])),
        nr::WRITE => {
            return files::write(p, frame, &mut thread.pipe_written, a[0], files::Buffers::One(a[1], a[2]));
        }
        nr::WRITEV => {
            return files::write(
                p,
                frame,
                &mut thread.pipe_written,
                a[0],
                files::Buffers::Vector(a[1], a[2]),
            );
        }
        nr::PIPE2 => crate::fs::pipe::pipe2(p, a[0], a[1]),
        nr::CLOSE => files::close(p, a[0]),
        nr::DUP => files::dup(p, a[0]),
        nr::DUP3 => files::dup3(p, a[0], a[1], a[2]),
        nr::FCNTL => files::fcntl(p, a[0], a[1], a[2]),
        nr::IOCTL => files::ioctl(p, a[0], a[1], a[2]),
        nr::FSTAT => files::fstat(p, a[0], a[1]),
        nr::NEWFSTATAT => files::newfstatat(p, a[0], a[1], a[2], a[3]),
        nr::STATX => files::statx(p, a[0], a[1], a[2], a[4]),
        nr::LSEEK => files::lseek(p, a[0], a[1], a[2]),
        nr::PREAD64 => crate::fs::memfd::pread_pwrite(p, a[0], a[1], a[2], a[3], false),
        nr::PWRITE64 => crate::fs::memfd::pread_pwrite(p, a[0], a[1], a[2], a[3], true),
        nr::FTRUNCATE => crate::fs::memfd::ftruncate(p, a[0], a[1]),
        nr::MEMFD_CREATE => crate::fs::memfd::memfd_create(p, a[0], a[1]),
        nr::OPENAT => crate::procfs::openat(p, a[1], a[2]),
        nr::FACCESSAT | nr::FACCESSAT2 => files::no_such_path(p, a[1]),
        nr::READLINKAT => files::readlinkat(p, a[1], a[3]),
        nr::GETCWD => files::getcwd(p, a[0], a[1]),
        nr::PPOLL => return crate::fs::poll::ppoll(p, frame, &mut thread.poll_deadline, a),
        nr::PSELECT6 => return crate::fs::poll::pselect6(p, frame, &mut thread.poll_deadline, a),
        // Threads and futexes.
        nr::EXIT => return exit_thread(thread, a[0]),
        nr::EXIT_GROUP => return crate::process::kill_with(p, a[0] & 0xff, true),
        nr::SET_TID_ADDRESS => {
            thread.clear_child_tid = a[0];
            i64::from(thread.tid)
        }
        nr::CLONE => return fork_or_thread(thread, frame, a),
        nr::WAIT4 => return crate::process::family::wait4(thread, frame, a[0], a[1], a[2], a[3]),
        nr::WAITID => return crate::process::family::waitid(thread, frame, a[0], a[1], a[2], a[3], a[4]),
        nr::EXECVE => return crate::process::exec::execve(thread, frame, a[0], a[1], a[2]),
        nr::FUTEX => return futex::futex(thread, frame, a),
        nr::SET_ROBUST_LIST => futex::set_robust_list(thread, a[0], a[1]),
        nr::GET_ROBUST_LIST => futex::get_robust_list(thread, a[0], a[1], a[2]),
        nr::SCHED_YIELD => {
            frame.x[0] = 0;
            return Action::Yield;
        }
        nr::SCHED_SETAFFINITY => return sched_setaffinity(thread, frame, a[0], a[1], a[2]),
        nr::SCHED_GETAFFINITY => sched_getaffinity(thread, a[0], a[1], a[2]),
        nr::SCHED_GETSCHEDULER => identity::sched_getscheduler(thread, a[0]),
        nr::SCHED_GETPARAM => identity::sched_getparam(thread, a[0], a[1]),
        nr::SCHED_GET_PRIORITY_MAX => identity::sched_priority_bound(a[0], true),
        nr::SCHED_GET_PRIORITY_MIN => identity::sched_priority_bound(a[0], false),
        // Time.
        nr::CLOCK_GETTIME => time::clock_gettime(thread, a[0], a[1]),
        nr::CLOCK_GETRES => time::clock_getres(thread, a[0], a[1]),
        nr::GETTIMEOFDAY => time::gettimeofday(p, a[0], a[1]),
        nr::NANOSLEEP => return time::nanosleep(thread, frame, a[0]),
        nr::CLOCK_NANOSLEEP => return time::clock_nanosleep(thread, frame, a[0], a[1], a[2]),
        nr::TIMES => time::times(thread, a[0]),
        nr::GETRUSAGE => time::getrusage(thread, a[0], a[1]),
        // Identity.
        nr::GETPID => i64::from(p.pid),
        nr::GETTID => i64::from(thread.tid),
        nr::GETPPID => i64::from(p.family.ppid()),
        nr::GETUID | nr::GETEUID | nr::GETGID | nr::GETEGID => 0,
        nr::GETGROUPS => identity::getgroups(a[0]),
        nr::GETPGID => identity::getpgid(thread, a[0]),
        nr::GETSID => identity::getsid(thread, a[0]),
        nr::SETSID => identity::setsid(thread),
        nr::SETPGID => identity::setpgid(thread, a[0], a[1]),
        nr::SYSINFO => identity::sysinfo(thread, a[0]),
        nr::PRCTL => match a[0] {
            identity::PR_SET_NAME | identity::PR_GET_NAME => identity::prctl(thread, a[0], a[1]),
            _ => crate::syscall::memory::prctl(p, a[0], a[1], a[2], a[3], a[4]),
        },
        nr::PERSONALITY => identity::personality(thread, a[0]),
        nr::UNAME => uname(p, a[0]),
        nr::GETRANDOM => getrandom(p, a[0], a[1], a[2]),
        nr::GETCPU => getcpu(p, a[0], a[1]),
        // Limits.
        nr::GETRLIMIT => prlimit(thread, 0, a[0], None, Some(a[1])),
        nr::SETRLIMIT => prlimit(thread, 0, a[0], Some(a[1]), None),
        nr::PRLIMIT64 => {
            prlimit(thread, a[0], a[1], (a[2] != 0).then_some(a[2]), (a[3] != 0).then_some(a[3]))
        }
        // Memory.
        nr::MMAP => crate::syscall::memory::mmap(p, a[0], a[1], a[2], a[3], a[4], a[5]),
        nr::MUNMAP => crate::syscall::memory::munmap(p, a[0], a[1]),
        nr::MPROTECT => crate::syscall::memory::mprotect(p, a[0], a[1], a[2]),
        nr::MADVISE => crate::syscall::memory::madvise(p, a[0], a[1], a[2]),
        nr::BRK => crate::syscall::memory::brk(p, a[0]),
        nr::MREMAP => crate::syscall::memory::mremap(p, a[0], a[1], a[2], a[3], a[4]),
        nr::MSYNC => crate::syscall::memory::msync(p, a[0], a[1], a[2]),
        nr::MLOCK => crate::syscall::memory::mlock2(p, a[0], a[1], 0),
        nr::MUNLOCK => crate::syscall::memory::munlock(p, a[0], a[1]),
        nr::MLOCKALL => crate::syscall::memory::mlockall(p, a[0]),
        nr::MUNLOCKALL => crate::syscall::memory::munlockall(p),
        nr::MINCORE => crate::syscall::memory::mincore(p, a[0], a[1], a[2]),
        nr::MLOCK2 => crate::syscall::memory::mlock2(p, a[0], a[1], a[2]),
        abi::SYS_MMAP_NEAR => crate::syscall::memory::mmap_near(p, a[0], a[1], a[2], a[3], a[4]),
        abi::SYS_CODE_WINDOW => crate::syscall::memory::code_window(p, a[0], a[1], a[2]),
        abi::SYS_MM_STATS => crate::syscall::memory::mm_stats(p, a[0], a[1]),
        abi::SYS_FAIL_NTH => match crate::memory::fallible::fail_nth(p.pid, thread.tid, a[0]) {
            Some(left) => left as i64,
            None => unknown(thread, abi::SYS_FAIL_NTH),
        },
        other => unknown(thread, other),
    };
    frame.x[0] = result as u64;
    Action::Continue
}

/// A system call this kernel does not implement: ENOSYS, and one line on the console the first
/// time each process makes it (up to `posix::REPORTS` of them), so a program that fails on it
/// says why.
fn unknown(thread: &Thread, nr: u64) -> i64 {
    use crate::process::posix::Report;
    let p = &thread.process;
    match p.posix.report_unknown(nr) {
        Report::Name => crate::kprintln!(
            "kernel: pid {} ({}): system call {} ({}) is not implemented: ENOSYS",
            p.pid,
            thread.posix.name_str(),
            nr,
            linux_abi::syscalls::name(nr).unwrap_or("unknown to Linux")
        ),
        Report::LastOne => crate::kprintln!(
            "kernel: pid {} ({}): more system calls that are not implemented; no longer reporting them",
            p.pid,
            thread.posix.name_str()
        ),
        Report::Silent => {}
    }
    -ENOSYS
}

/// Copies from user memory, demand-paging untouched pages first.
///
/// # Errors
/// [`Fault`] if the memory is not readable by the program.
pub fn copy_in(p: &Process, dst: &mut [u8], src: u64) -> Result<(), Fault> {
    with_faults(p, Access::Read, || copy_from_user(dst, src))
}

/// Copies to user memory, demand-paging untouched pages first.
///
/// # Errors
/// [`Fault`] if the memory is not writable by the program.
pub fn copy_out(p: &Process, dst: u64, src: &[u8]) -> Result<(), Fault> {
    with_faults(p, access_write(), || copy_to_user(dst, src))
}

const fn access_write() -> Access {
    Access::Write
}

fn with_faults(
    p: &Process,
    access: Access,
    mut copy: impl FnMut() -> Result<(), Fault>,
) -> Result<(), Fault> {
    let mut last = None;
    loop {
        match copy() {
            Ok(()) => return Ok(()),
            // The same address twice: demand paging did not help (protection, or not mapped).
            Err(fault) if last == Some(fault.at) => return Err(fault),
            Err(fault) => {
                let space = p.space().ok_or(fault)?;
                space.lock().fault(fault.at, access).map_err(|_| fault)?;
                crate::process::PAGE_FAULTS.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
                last = Some(fault.at);
            }
        }
    }
}

fn uname(p: &Process, buf: u64) -> i64 {
    // struct utsname: six fields of 65 bytes. sysname and release look like Linux because C
    // libraries parse them (glibc refuses to start on a "kernel too old"); version says what
    // this kernel is.
    let fields: [&str; 6] = [
        "Linux",
        "mmkernel",
        "6.1.0-mmkernel",
        concat!("#1 mmkernel ", env!("CARGO_PKG_VERSION")),
        "aarch64",
        "(none)",
    ];
    let mut out = [0u8; 65 * 6];
    for (i, field) in fields.iter().enumerate() {
        out[i * 65..i * 65 + field.len()].copy_from_slice(field.as_bytes());
    }
    if copy_out(p, buf, &out).is_err() { -EFAULT } else { 0 }
}

fn getcpu(p: &Process, cpu: u64, node: u64) -> i64 {
    let here = (current_cpu() as u32).to_le_bytes();
    if cpu != 0 && copy_out(p, cpu, &here).is_err() {
        return -EFAULT;
    }
    if node != 0 && copy_out(p, node, &0u32.to_le_bytes()).is_err() {
        return -EFAULT;
    }
    0
}

fn getrandom(p: &Process, buf: u64, len: u64, flags: u64) -> i64 {
    const GRND_NONBLOCK: u64 = 1;
    const GRND_RANDOM: u64 = 2;
    const GRND_INSECURE: u64 = 4;
    if flags & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0
        || flags & (GRND_RANDOM | GRND_INSECURE) == (GRND_RANDOM | GRND_INSECURE)
    {
        return -EINVAL;
    }
    let len = len.min(33_554_431); // Linux caps one call at 32 MiB - 1
    let mut chunk = [0u8; 256];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(chunk.len() as u64) as usize;
        crate::random::fill(&mut chunk[..n]);
        if copy_out(p, buf.wrapping_add(done), &chunk[..n]).is_err() {
            return if done == 0 { -EFAULT } else { done as i64 };
        }
        done += n as u64;
    }
    done as i64
}

/// `prlimit64(pid, resource, new, old)` (a null pointer: that half is not wanted), and
/// `getrlimit`/`setrlimit` as its two halves, whose pointer is always used (Linux's
/// `sys_getrlimit` and `sys_setrlimit` call the same `do_prlimit`). In Linux's order: `EFAULT`
/// reading `new`; `ESRCH` a pid that is neither 0 nor this process or thread; the rules of
/// `mm::vm::limits::Rlimits::prlimit` (`EINVAL`, `EPERM`; programs run as root, so raising a
/// hard limit is allowed); `EFAULT` writing `old` (after the change, as Linux). A new
/// `RLIMIT_AS` or `RLIMIT_DATA` reaches the process's map at once.
fn prlimit(thread: &Thread, pid: u64, resource: u64, new: Option<u64>, old: Option<u64>) -> i64 {
    use mm::vm::limits::{Rlimit, resource::*};
    let p = thread.process.clone();
    let new = match new {
        None => None,
        Some(ptr) => {
            let mut bytes = [0u8; 16];
            if copy_in(&p, &mut bytes, ptr).is_err() {
                return -EFAULT;
            }
            Some(Rlimit::from_bytes(bytes))
        }
    };
    let pid = pid as i32; // pid_t
    if pid != 0 && pid as u32 != p.pid && pid as u32 != thread.tid {
        return -ESRCH;
    }
    // `unsigned int resource`: the upper half of the register is not looked at.
    let resource = resource as u32;
    let result = p.rlimits.lock().prlimit(resource, new, true);
    let previous = match result {
        Ok(previous) => previous,
        Err(e) => return e.as_ret(),
    };
    if new.is_some() && (resource == RLIMIT_AS || resource == RLIMIT_DATA) {
        let limits = *p.rlimits.lock();
        if let Some(space) = p.space() {
            space.lock().vm_mut().set_rlimits(limits.get(RLIMIT_AS), limits.get(RLIMIT_DATA));
        }
    }
    match old {
        Some(ptr) if copy_out(&p, ptr, &previous.to_bytes()).is_err() => -EFAULT,
        _ => 0,
    }
}

/// `exit`: this thread ends (its robust futexes are released, its `clear_child_tid` word is
/// zeroed and woken, as pthread_join expects); the process ends with it if it was the last.
fn exit_thread(thread: &mut Thread, status: u64) -> Action {
    let p = thread.process.clone();
    if !p.exiting.load(Ordering::Acquire) {
        p.status.store(status & 0xff, Ordering::Release);
    }
    crate::syscall::futex::release_robust_list(thread);
    if thread.clear_child_tid != 0 {
        let _ = copy_out(&p, thread.clear_child_tid, &0u32.to_le_bytes());
        crate::sched::futex_wake(
            crate::syscall::futex::space_key(&p),
            thread.clear_child_tid,
            linux_abi::futex::FUTEX_BITSET_MATCH_ANY,
            1,
        );
    }
    Action::ExitThread
}

/// Linux `clone` flags this kernel implements: a thread in the same address space, or a new
/// process (fork, vfork).
pub(super) mod clone_flags {
    pub const CLONE_VFORK: u64 = 0x4000;
    pub const CLONE_PARENT: u64 = 0x8000;
    pub const CLONE_VM: u64 = 0x100;
    pub const CLONE_FS: u64 = 0x200;
    pub const CLONE_FILES: u64 = 0x400;
    pub const CLONE_SIGHAND: u64 = 0x800;
    pub const CLONE_THREAD: u64 = 0x1_0000;
    pub const CLONE_SYSVSEM: u64 = 0x4_0000;
    pub const CLONE_SETTLS: u64 = 0x8_0000;
    pub const CLONE_PARENT_SETTID: u64 = 0x10_0000;
    pub const CLONE_CHILD_CLEARTID: u64 = 0x20_0000;
    pub const CLONE_DETACHED: u64 = 0x40_0000;
    pub const CLONE_CHILD_SETTID: u64 = 0x100_0000;
}

/// `clone(flags, stack, ptid, tls, ctid)`: a thread (`CLONE_THREAD`, in this address space) or a
/// process (`family::fork`), with Linux's flag checks in its order (`copy_process`): `EINVAL`
/// for `CLONE_THREAD` without `CLONE_SIGHAND`, `CLONE_SIGHAND` without `CLONE_VM`, an exit
/// signal that is not a signal; `ENOSYS` (reported) for what a process cannot share here
/// (`CLONE_VM` without `CLONE_VFORK`, `CLONE_FILES`, `CLONE_SIGHAND`).
fn fork_or_thread(thread: &mut Thread, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    use clone_flags::*;
    let flags = a[0];
    let result = if flags & CLONE_THREAD != 0 && flags & CLONE_SIGHAND == 0
        || flags & CLONE_SIGHAND != 0 && flags & CLONE_VM == 0
    {
        -EINVAL
    } else if flags & CLONE_THREAD != 0 {
        clone(thread, frame, flags, a[1], a[2], a[3], a[4])
    } else if flags & 0xff != 0 && !::signal::num::valid(flags & 0xff) {
        -EINVAL
    } else if flags & CLONE_VM != 0 && flags & CLONE_VFORK == 0
        || flags & (CLONE_FILES | CLONE_SIGHAND | CLONE_PARENT) != 0
    {
        unknown(thread, nr::CLONE)
    } else {
        let vfork = flags & CLONE_VFORK != 0;
        return crate::process::family::fork(thread, frame, flags, a[1], a[2], a[3], a[4], vfork);
    };
    frame.x[0] = result as u64;
    Action::Continue
}

fn clone(
    thread: &mut Thread,
    frame: &mut TrapFrame,
    flags: u64,
    stack: u64,
    ptid: u64,
    tls: u64,
    ctid: u64,
) -> i64 {
    use clone_flags::*;
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
        return -ENOSYS; // not a thread: `fork_or_thread` sends processes to `family::fork`
    }
    if flags & !(supported | 0xff) != 0 {
        return -EINVAL;
    }
    let p = thread.process.clone();
    if p.exiting.load(Ordering::Acquire) {
        return -EAGAIN;
    }
    // Linux's copy_process checks the thread limit before anything is written to the caller.
    if crate::sched::live_threads() >= crate::sched::max_threads() {
        return -EAGAIN;
    }
    let tid = p.next_tid.fetch_add(1, Ordering::Relaxed);
    if flags & CLONE_PARENT_SETTID != 0 && copy_out(&p, ptid, &tid.to_le_bytes()).is_err() {
        return -EFAULT;
    }
    if flags & CLONE_CHILD_SETTID != 0 && copy_out(&p, ctid, &tid.to_le_bytes()).is_err() {
        return -EFAULT;
    }
    let clone = CloneArgs { flags, stack, tls, ctid };
    // The name is inherited; the robust list is the new thread's to register (Linux clears it).
    let posix = crate::process::posix::ThreadPosix { robust_list: 0, cpu_ticks: 0, ..thread.posix.clone() };
    let child = clone.child(thread, frame, tid, p.clone(), posix);
    if let Err(e) = p.signals.thread_created(thread.tid, tid) {
        return e.as_ret();
    }
    // Counted before it can run (a child that exits at once must find itself counted).
    p.threads.fetch_add(1, Ordering::AcqRel);
    match crate::sched::admit(child) {
        Ok(()) => i64::from(tid),
        Err(e) => {
            p.signals.thread_gone(tid);
            p.threads.fetch_sub(1, Ordering::AcqRel);
            e.as_ret()
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

fn sched_setaffinity(thread: &mut Thread, frame: &mut TrapFrame, pid: u64, len: u64, mask: u64) -> Action {
    let p: Arc<Process> = thread.process.clone();
    let result = if pid != 0 && pid != u64::from(thread.tid) {
        -ESRCH // only the calling thread, as far as this kernel goes
    } else if len < 8 {
        -EINVAL
    } else {
        let mut bytes = [0u8; 8];
        if copy_in(&p, &mut bytes, mask).is_err() {
            -EFAULT
        } else {
            let wanted = u64::from_le_bytes(bytes) & online_mask();
            if wanted == 0 {
                -EINVAL
            } else {
                thread.affinity = wanted;
                frame.x[0] = 0;
                // Off the CPUs it may use: move now.
                if wanted & (1 << current_cpu()) == 0 {
                    return Action::Yield;
                }
                0
            }
        }
    };
    frame.x[0] = result as u64;
    Action::Continue
}

fn sched_getaffinity(thread: &Thread, pid: u64, len: u64, mask: u64) -> i64 {
    if pid != 0 && pid != u64::from(thread.tid) {
        return -ESRCH;
    }
    if len < 8 || !len.is_multiple_of(8) {
        return -EINVAL;
    }
    let bytes = (thread.affinity & online_mask()).to_le_bytes();
    if copy_out(&thread.process, mask, &bytes).is_err() { -EFAULT } else { 8 }
}

/// What `clone` says about the new thread's start, for a thread and a forked process alike.
pub(super) struct CloneArgs {
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
    pub(super) fn child(
        &self,
        caller: &Thread,
        frame: &mut TrapFrame,
        tid: u32,
        process: Arc<crate::process::Process>,
        posix: crate::process::posix::ThreadPosix,
    ) -> Thread {
        use aarch64_cpu::registers::{Readable, TPIDR_EL0};
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
            tpidr: if self.flags & clone_flags::CLONE_SETTLS != 0 { self.tls } else { TPIDR_EL0.get() },
            clear_child_tid: if self.flags & clone_flags::CLONE_CHILD_CLEARTID != 0 { self.ctid } else { 0 },
            affinity: caller.affinity,
            pipe_written: 0,
            poll_deadline: None,
            posix,
        }
    }
}
