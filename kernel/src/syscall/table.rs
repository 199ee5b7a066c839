//! The system-call table: every number this kernel answers, and its handler, in one place.
//!
//! Arguments arrive in x0..x5 and the number in x8 (Linux arm64); they are read from the frame
//! once, here, and each handler takes the ones it needs, named. A handler returns the call's
//! result as `Result<u64, Errno>` (x0 is the value, or `-errno`), or, when the call may block,
//! yield or end the thread, the [`Action`] for the scheduler (having set x0 itself). Argument
//! checks belong to the layer that owns the rule (`mm` for the memory calls, the `signal`
//! crate for frames and sets), never to this table.
//!
//! A number not in the table is `ENOSYS` ([`unknown`]), named once per process in the kernel's
//! log.
use ext_abi as abi;
use linux_abi::Errno;
use linux_abi::nr;

use super::{cred, events, files, futex, ipc, memory, net, paths, poll, process, signals, time};
use crate::arch::aarch64::exception::TrapFrame;
use crate::process::Thread;
use crate::process::signals::restart::Blocked;
use crate::sched::Action;

/// Handles the system call in `frame` for `thread`; tells the scheduler what to do next. A call
/// that blocks is recorded in the thread with its arguments, for a signal that interrupts it
/// (its restart class, `signal::restart::BLOCKING`).
pub fn dispatch(thread: &mut Thread, frame: &mut TrapFrame) -> Action {
    let nr = frame.x[8];
    let a = [frame.x[0], frame.x[1], frame.x[2], frame.x[3], frame.x[4], frame.x[5]];
    let action = call(thread, frame, nr, a);
    if let Action::Block(wait) = &action {
        thread.call.blocked = Some(Blocked { nr, args: a, deadline: wait.deadline });
    }
    action
}

/// Runs system call `nr` with arguments `a`.
fn call(thread: &mut Thread, frame: &mut TrapFrame, nr: u64, a: [u64; 6]) -> Action {
    // A borrow, not a clone: the thread's own reference keeps the process alive through the
    // call, and a clone and its drop are two atomic read-modify-writes on every system call.
    let p = &thread.process;
    let tid = thread.tid;
    crate::process::set_current(p.pid, tid);
    let result: Result<u64, Errno> = match nr {
        // Descriptors and files.
        nr::READ => return files::read(p, frame, a[0], files::Buffers::One(a[1], a[2]), files::At::Position),
        nr::READV => {
            return files::read(p, frame, a[0], files::Buffers::Vector(a[1], a[2]), files::At::Position);
        }
        nr::PREAD64 => {
            return files::read(p, frame, a[0], files::Buffers::One(a[1], a[2]), files::At::Offset(a[3]));
        }
        nr::PREADV => {
            return files::read(p, frame, a[0], files::Buffers::Vector(a[1], a[2]), files::At::Offset(a[3]));
        }
        nr::PREADV2 => {
            if let Err(e) = files::check_rwf(a[5]) {
                return Action::reply(frame, Err(e));
            }
            return files::read(
                p,
                frame,
                a[0],
                files::Buffers::Vector(a[1], a[2]),
                files::offset_arg(a[3], true),
            );
        }
        nr::WRITE => {
            let b = files::Buffers::One(a[1], a[2]);
            return files::write(p, frame, &mut thread.pipe_written, a[0], b, files::At::Position);
        }
        nr::WRITEV => {
            let b = files::Buffers::Vector(a[1], a[2]);
            return files::write(p, frame, &mut thread.pipe_written, a[0], b, files::At::Position);
        }
        nr::PWRITE64 => {
            let b = files::Buffers::One(a[1], a[2]);
            return files::write(p, frame, &mut thread.pipe_written, a[0], b, files::At::Offset(a[3]));
        }
        nr::PWRITEV => {
            let b = files::Buffers::Vector(a[1], a[2]);
            return files::write(p, frame, &mut thread.pipe_written, a[0], b, files::At::Offset(a[3]));
        }
        nr::PWRITEV2 => {
            if let Err(e) = files::check_rwf(a[5]) {
                return Action::reply(frame, Err(e));
            }
            let b = files::Buffers::Vector(a[1], a[2]);
            return files::write(p, frame, &mut thread.pipe_written, a[0], b, files::offset_arg(a[3], true));
        }
        nr::PIPE2 => crate::fs::pipe::pipe2(&p.posix.files, a[0], a[1]),
        // Sockets.
        nr::SOCKET => net::socket(p, a[0], a[1], a[2]),
        nr::SOCKETPAIR => net::socketpair(p, a[0], a[1], a[2], a[3]),
        nr::BIND => net::bind(p, a[0], a[1], a[2]),
        nr::LISTEN => net::listen(p, a[0], a[1]),
        nr::ACCEPT => return net::accept4(p, frame, a[0], a[1], a[2], 0),
        nr::ACCEPT4 => return net::accept4(p, frame, a[0], a[1], a[2], a[3]),
        nr::CONNECT => return net::connect(p, frame, a[0], a[1], a[2]),
        nr::GETSOCKNAME => net::getname(p, a[0], a[1], a[2], false),
        nr::GETPEERNAME => net::getname(p, a[0], a[1], a[2], true),
        nr::SENDTO => return net::sendto(p, frame, &mut thread.pipe_written, a),
        nr::RECVFROM => return net::recvfrom(p, frame, a),
        nr::SENDMSG => return net::sendmsg(p, frame, &mut thread.pipe_written, a[0], a[1], a[2]),
        nr::RECVMSG => return net::recvmsg(p, frame, a[0], a[1], a[2]),
        nr::SHUTDOWN => net::shutdown(p, a[0], a[1]),
        nr::GETSOCKOPT => net::getsockopt(p, a[0], a[1], a[2], a[3], a[4]),
        nr::SETSOCKOPT => net::setsockopt(p, a[0], a[1], a[2], a[3], a[4]),
        nr::CLOSE => files::close(p, a[0]),
        nr::CLOSE_RANGE => files::close_range(p, a[0], a[1], a[2]),
        nr::DUP => files::dup(p, a[0]),
        nr::DUP3 => files::dup3(p, a[0], a[1], a[2]),
        nr::FCNTL => return files::fcntl(p, tid, frame, a[0], a[1], a[2]),
        nr::FLOCK => {
            return match p.posix.files.lock().file(a[0]) {
                Ok(f) => crate::fs::locks::flock(frame, &f, a[1]),
                Err(e) => Action::reply(frame, Err(e)),
            };
        }
        nr::IOCTL => files::ioctl(p, a[0], a[1], a[2]),
        nr::FSTAT => files::fstat(p, a[0], a[1]),
        nr::LSEEK => files::lseek(p, a[0], a[1], a[2]),
        nr::FTRUNCATE => files::ftruncate(p, a[0], a[1]),
        nr::FALLOCATE => files::fallocate(p, a[0], a[1], a[2], a[3]),
        nr::GETDENTS64 => files::getdents64(p, a[0], a[1], a[2]),
        nr::FSYNC | nr::FDATASYNC => files::fsync(p, a[0]),
        nr::SYNC => Ok(0),
        nr::SYNCFS => files::syncfs(p, a[0]),
        nr::SYNC_FILE_RANGE => files::sync_file_range(p, a[0], a[1], a[2], a[3]),
        nr::MEMFD_CREATE => crate::fs::memfd::memfd_create(&p.posix.files, a[0], a[1]),
        nr::SENDFILE => return files::sendfile(p, frame, a[0], a[1], a[2], a[3]),
        nr::COPY_FILE_RANGE => files::copy_file_range(p, a[0], a[1], a[2], a[3], a[4], a[5]),
        nr::SPLICE => return files::splice(p, frame, a),
        nr::TEE => return files::tee(p, frame, a[0], a[1], a[2], a[3]),
        // Paths.
        nr::OPENAT => return paths::openat(p, frame, tid, a[0], a[1], a[2], a[3]),
        nr::OPENAT2 => return paths::openat2(p, frame, tid, a[0], a[1], a[2], a[3]),
        nr::MKDIRAT => paths::mkdirat(p, a[0], a[1], a[2]),
        nr::MKNODAT => paths::mknodat(p, a[0], a[1], a[2], a[3]),
        nr::UNLINKAT => paths::unlinkat(p, a[0], a[1], a[2]),
        nr::RENAMEAT => paths::renameat2(p, a[0], a[1], a[2], a[3], 0),
        nr::RENAMEAT2 => paths::renameat2(p, a[0], a[1], a[2], a[3], a[4]),
        nr::LINKAT => paths::linkat(p, a[0], a[1], a[2], a[3], a[4]),
        nr::SYMLINKAT => paths::symlinkat(p, a[0], a[1], a[2]),
        nr::READLINKAT => paths::readlinkat(p, a[0], a[1], a[2], a[3]),
        nr::NEWFSTATAT => paths::newfstatat(p, a[0], a[1], a[2], a[3]),
        nr::STATX => paths::statx(p, a[0], a[1], a[2], a[3], a[4]),
        nr::FACCESSAT => paths::faccessat(p, a[0], a[1], a[2], 0),
        nr::FACCESSAT2 => paths::faccessat(p, a[0], a[1], a[2], a[3]),
        nr::CHDIR => paths::chdir(p, a[0]),
        nr::FCHDIR => paths::fchdir(p, a[0]),
        nr::CHROOT => paths::chroot(p, a[0]),
        nr::GETCWD => paths::getcwd(p, a[0], a[1]),
        nr::UMASK => paths::umask(p, a[0]),
        nr::FCHMOD => paths::fchmod(p, a[0], a[1]),
        nr::FCHMODAT => paths::fchmodat(p, a[0], a[1], a[2]),
        nr::FCHOWN => paths::fchown(p, a[0], a[1], a[2]),
        nr::FCHOWNAT => paths::fchownat(p, a[0], a[1], a[2], a[3], a[4]),
        nr::UTIMENSAT => paths::utimensat(p, a[0], a[1], a[2], a[3]),
        nr::TRUNCATE => paths::truncate(p, a[0], a[1]),
        nr::STATFS => paths::statfs(p, a[0], a[1]),
        nr::GETXATTR => paths::xattr(p, paths::XattrOf::Path, paths::XattrOp::Get, a),
        nr::LGETXATTR => paths::xattr(p, paths::XattrOf::Link, paths::XattrOp::Get, a),
        nr::FGETXATTR => paths::xattr(p, paths::XattrOf::Fd, paths::XattrOp::Get, a),
        nr::SETXATTR => paths::xattr(p, paths::XattrOf::Path, paths::XattrOp::Set, a),
        nr::LSETXATTR => paths::xattr(p, paths::XattrOf::Link, paths::XattrOp::Set, a),
        nr::FSETXATTR => paths::xattr(p, paths::XattrOf::Fd, paths::XattrOp::Set, a),
        nr::LISTXATTR => paths::xattr(p, paths::XattrOf::Path, paths::XattrOp::List, a),
        nr::LLISTXATTR => paths::xattr(p, paths::XattrOf::Link, paths::XattrOp::List, a),
        nr::FLISTXATTR => paths::xattr(p, paths::XattrOf::Fd, paths::XattrOp::List, a),
        nr::REMOVEXATTR => paths::xattr(p, paths::XattrOf::Path, paths::XattrOp::Remove, a),
        nr::LREMOVEXATTR => paths::xattr(p, paths::XattrOf::Link, paths::XattrOp::Remove, a),
        nr::FREMOVEXATTR => paths::xattr(p, paths::XattrOf::Fd, paths::XattrOp::Remove, a),
        nr::FSTATFS => paths::fstatfs(p, a[0], a[1]),
        nr::MOUNT => paths::mount(p, a[0], a[1], a[2], a[3]),
        nr::UMOUNT2 => paths::umount2(p, a[0], a[1]),
        nr::PPOLL => return poll::ppoll(thread, frame, a),
        nr::PSELECT6 => return poll::pselect6(thread, frame, a),
        // The event loop.
        nr::EPOLL_CREATE1 => events::epoll_create1(p, a[0]),
        nr::EPOLL_CTL => events::epoll_ctl(p, a[0], a[1], a[2], a[3]),
        nr::EPOLL_PWAIT => return events::epoll_pwait(thread, frame, a),
        nr::EPOLL_PWAIT2 => return events::epoll_pwait2(thread, frame, a),
        nr::EVENTFD2 => events::eventfd2(p, a[0], a[1]),
        nr::TIMERFD_CREATE => events::timerfd_create(p, a[0], a[1]),
        nr::TIMERFD_SETTIME => events::timerfd_settime(p, a[0], a[1], a[2], a[3]),
        nr::TIMERFD_GETTIME => events::timerfd_gettime(p, a[0], a[1]),
        nr::SIGNALFD4 => events::signalfd4(p, a[0], a[1], a[2], a[3]),
        nr::PIDFD_OPEN => events::pidfd_open(p, a[0], a[1]),
        nr::PIDFD_SEND_SIGNAL => events::pidfd_send_signal(p, a[0], a[1], a[2], a[3]),
        nr::PIDFD_GETFD => events::pidfd_getfd(p, a[0], a[1], a[2]),
        nr::PROCESS_MADVISE => events::process_madvise(p, a[0], a[1], a[2], a[3], a[4]),
        nr::PROCESS_MRELEASE => events::process_mrelease(p, a[0], a[1]),
        nr::MEMBARRIER => events::membarrier(p, a[0], a[1]),
        nr::RSEQ => events::rseq(thread, a),
        nr::CAPGET => events::capget(p, a[0], a[1]),
        nr::CAPSET => events::capset(p, a[0], a[1]),
        // Threads, processes and futexes.
        nr::EXIT => return process::exit_thread(thread, a[0]),
        nr::EXIT_GROUP => return crate::process::kill_with(p, a[0] & 0xff, true),
        nr::SET_TID_ADDRESS => {
            thread.clear_child_tid = a[0];
            Ok(u64::from(tid))
        }
        nr::CLONE => return process::clone(thread, frame, a),
        nr::WAIT4 => return crate::process::family::wait4(thread, frame, a[0], a[1], a[2], a[3]),
        nr::WAITID => return crate::process::family::waitid(thread, frame, a[0], a[1], a[2], a[3], a[4]),
        nr::EXECVE => return crate::process::exec::execve(thread, frame, a[0], a[1], a[2]),
        nr::EXECVEAT => return crate::process::exec::execveat(thread, frame, a[0], a[1], a[2], a[3], a[4]),
        nr::FUTEX => return futex::futex(thread, frame, a),
        nr::FUTEX_WAITV => return futex::futex_waitv(thread, frame, a),
        nr::SET_ROBUST_LIST => futex::set_robust_list(thread, a[0], a[1]),
        nr::GET_ROBUST_LIST => futex::get_robust_list(thread, a[0], a[1], a[2]),
        nr::SCHED_YIELD => {
            frame.x[0] = 0;
            return Action::Yield;
        }
        nr::SCHED_SETAFFINITY => return process::sched_setaffinity(thread, frame, a[0], a[1], a[2]),
        nr::SCHED_GETAFFINITY => process::sched_getaffinity(thread, a[0], a[1], a[2]),
        nr::SCHED_GETSCHEDULER => process::sched_getscheduler(thread, a[0]),
        nr::SCHED_GETPARAM => process::sched_getparam(thread, a[0], a[1]),
        nr::SCHED_GET_PRIORITY_MAX => process::sched_priority_bound(a[0], true),
        nr::SCHED_GET_PRIORITY_MIN => process::sched_priority_bound(a[0], false),
        // Signals.
        nr::RT_SIGRETURN => return signals::sigreturn(thread, frame),
        nr::RT_SIGACTION => signals::sigaction(p, a[0], a[1], a[2], a[3]),
        nr::RT_SIGPROCMASK => signals::sigprocmask(p, tid, a[0], a[1], a[2], a[3]),
        nr::RT_SIGPENDING => signals::sigpending(p, tid, a[0], a[1]),
        nr::SIGALTSTACK => signals::sigaltstack(p, tid, a[0], a[1], frame.sp_el0),
        nr::RT_SIGSUSPEND => return signals::sigsuspend(p, tid, frame, a[0], a[1]),
        nr::RT_SIGTIMEDWAIT => return signals::sigtimedwait(p, tid, frame, a[0], a[1], a[2], a[3]),
        nr::KILL => signals::kill(p, a[0] as i32, a[1]),
        nr::TKILL => signals::tgkill(p, None, a[0] as i32, a[1]),
        nr::TGKILL => signals::tgkill(p, Some(a[0] as i32), a[1] as i32, a[2]),
        nr::RT_SIGQUEUEINFO => signals::sigqueueinfo(p, tid, None, a[0] as i32, a[1], a[2]),
        nr::RT_TGSIGQUEUEINFO => signals::sigqueueinfo(p, tid, Some(a[0] as i32), a[1] as i32, a[2], a[3]),
        // Time.
        nr::CLOCK_GETTIME => time::clock_gettime(thread, a[0], a[1]),
        nr::CLOCK_GETRES => time::clock_getres(thread, a[0], a[1]),
        nr::GETTIMEOFDAY => time::gettimeofday(a[0], a[1]),
        nr::NANOSLEEP => return time::nanosleep(frame, a[0]),
        nr::RESTART_SYSCALL => return time::restart_syscall(thread, frame),
        nr::CLOCK_NANOSLEEP => return time::clock_nanosleep(frame, a[0], a[1], a[2]),
        nr::TIMES => time::times(thread, a[0]),
        nr::GETITIMER => time::getitimer(thread, a[0], a[1]),
        nr::SETITIMER => time::setitimer(thread, a[0], a[1], a[2]),
        nr::TIMER_CREATE => time::timer_create(thread, a[0], a[1], a[2]),
        nr::TIMER_SETTIME => time::timer_settime(thread, a[0], a[1], a[2], a[3]),
        nr::TIMER_GETTIME => time::timer_gettime(thread, a[0], a[1]),
        nr::TIMER_GETOVERRUN => time::timer_getoverrun(thread, a[0]),
        nr::TIMER_DELETE => time::timer_delete(thread, a[0]),
        nr::GETRUSAGE => time::getrusage(thread, a[0], a[1]),
        // Identity.
        nr::GETPID => Ok(u64::from(p.pid)),
        nr::GETTID => Ok(u64::from(tid)),
        nr::GETPPID => Ok(u64::from(p.family.ppid())),
        nr::GETUID => cred::get(p, cred::Id::Uid),
        nr::GETEUID => cred::get(p, cred::Id::Euid),
        nr::GETGID => cred::get(p, cred::Id::Gid),
        nr::GETEGID => cred::get(p, cred::Id::Egid),
        nr::GETRESUID | nr::GETRESGID => cred::getres(p, frame.x[8] == nr::GETRESGID, a[0], a[1], a[2]),
        nr::SETUID => cred::setuid(p, a[0]),
        nr::SETGID => cred::setgid(p, a[0]),
        nr::SETREUID => cred::setreuid(p, a[0], a[1]),
        nr::SETREGID => cred::setregid(p, a[0], a[1]),
        nr::SETRESUID => cred::setresuid(p, a[0], a[1], a[2]),
        nr::SETRESGID => cred::setresgid(p, a[0], a[1], a[2]),
        nr::SETFSUID | nr::SETFSGID => cred::setfs(p, frame.x[8] == nr::SETFSGID, a[0]),
        nr::GETGROUPS => cred::getgroups(p, a[0], a[1]),
        nr::SETGROUPS => cred::setgroups(p, a[0], a[1]),
        nr::GETPGID => process::getpgid(thread, a[0]),
        nr::GETSID => process::getsid(thread, a[0]),
        nr::SETSID => process::setsid(thread),
        nr::SETPGID => process::setpgid(thread, a[0], a[1]),
        nr::SYSINFO => process::sysinfo(thread, a[0]),
        nr::PRCTL => process::prctl(thread, a[0], a[1], a[2], a[3], a[4]),
        nr::PERSONALITY => process::personality(thread, a[0]),
        nr::UNAME => process::uname(a[0]),
        nr::GETRANDOM => process::getrandom(a[0], a[1], a[2]),
        nr::SYSLOG => process::syslog(a[0], a[1], a[2]),
        nr::GETCPU => process::getcpu(a[0], a[1]),
        // Limits.
        nr::GETRLIMIT => process::prlimit(thread, 0, a[0], None, Some(a[1])),
        nr::SETRLIMIT => process::prlimit(thread, 0, a[0], Some(a[1]), None),
        nr::PRLIMIT64 => {
            process::prlimit(thread, a[0], a[1], (a[2] != 0).then_some(a[2]), (a[3] != 0).then_some(a[3]))
        }
        // Memory.
        nr::MMAP => memory::mmap(p, a[0], a[1], a[2], a[3], a[4], a[5]),
        nr::MUNMAP => memory::munmap(p, a[0], a[1]),
        nr::MPROTECT => memory::mprotect(p, a[0], a[1], a[2]),
        nr::MADVISE => memory::madvise(p, a[0], a[1], a[2]),
        nr::BRK => memory::brk(p, a[0]),
        nr::MREMAP => memory::mremap(p, a[0], a[1], a[2], a[3], a[4]),
        nr::MSYNC => memory::msync(p, a[0], a[1], a[2]),
        nr::MLOCK => memory::mlock2(p, a[0], a[1], 0),
        nr::MUNLOCK => memory::munlock(p, a[0], a[1]),
        nr::MLOCKALL => memory::mlockall(p, a[0]),
        nr::MUNLOCKALL => memory::munlockall(p),
        nr::MINCORE => memory::mincore(p, a[0], a[1], a[2]),
        nr::MLOCK2 => memory::mlock2(p, a[0], a[1], a[2]),
        nr::MSEAL => memory::mseal(p, a[0], a[1], a[2]),
        // System V shared memory.
        nr::SHMGET => ipc::shmget(thread, a[0], a[1], a[2]),
        nr::SHMAT => ipc::shmat(thread, a[0], a[1], a[2]),
        nr::SHMDT => ipc::shmdt(thread, a[0]),
        nr::SHMCTL => ipc::shmctl(thread, a[0], a[1], a[2]),
        // This kernel's extensions (`ext-abi`).
        abi::SYS_MMAP_NEAR => memory::mmap_near(p, a[0], a[1], a[2], a[3], a[4]),
        abi::SYS_CODE_WINDOW => memory::code_window(p, a[0], a[1], a[2]),
        abi::SYS_MM_STATS => memory::mm_stats(p, a[0], a[1]),
        abi::SYS_FAIL_NTH => match crate::memory::fallible::fail_nth(p.pid, tid, a[0]) {
            Some(left) => Ok(left),
            None => unknown(thread, abi::SYS_FAIL_NTH),
        },
        other => unknown(thread, other),
    };
    Action::reply(frame, result)
}

/// A system call this kernel does not implement: ENOSYS, and one line in the kernel's log the
/// first time each process makes it (up to `posix::REPORTS` of them), so a program that fails on
/// it says why.
pub fn unknown(thread: &Thread, nr: u64) -> Result<u64, Errno> {
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
    Err(Errno::ENOSYS)
}
