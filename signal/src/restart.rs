//! What an interrupted system call returns once a signal has been taken (Linux's `do_signal`):
//! the kernel-internal "restart" codes a blocking call leaves in x0 (`Errno::ERESTARTSYS` and
//! its kin, defined in `linux_abi::errno`) become -EINTR or a restart of the call, depending on
//! whether a handler runs and on its `SA_RESTART`.
//!
//! Which code a call leaves is Linux's choice per call (signal(7), "Interruption of system calls
//! and library functions by signal handlers"), and [`BLOCKING`] is the one table of it: every
//! system call that can block here, with its [`Class`]. A blocked call that a signal interrupts
//! is finished by the kernel with its class's code, so a call states how it restarts nowhere but
//! in this table (docs/user.md lists the same rows, and a test below checks that it does).
use crate::num::SA_RESTART;
use linux_abi::Errno;
use linux_abi::futex::{FUTEX_CMD_MASK, FUTEX_WAIT, FUTEX_WAIT_BITSET};
use linux_abi::nr;
use linux_abi::time::TIMER_ABSTIME;

/// How a blocking call ends when a signal interrupts it: the code it leaves in x0.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Class {
    /// `ERESTARTSYS`: restarted when no handler runs or the handler has `SA_RESTART`, else
    /// `EINTR` (what `SA_RESTART` is for).
    Sys,
    /// `ERESTARTNOINTR`: restarted whatever runs.
    NoIntr,
    /// `ERESTARTNOHAND`: restarted when no handler runs (a stop and continue, an ignored
    /// signal), else `EINTR` even under `SA_RESTART`.
    NoHand,
    /// `ERESTART_RESTARTBLOCK`: as [`NoHand`](Self::NoHand), but the restart is a
    /// `restart_syscall` that resumes the wait with what was left of it (a relative sleep's end
    /// stays where it was).
    RestartBlock,
    /// `EINTR` whatever runs: never restarted.
    Intr,
}

impl Class {
    /// The code the call leaves in x0 (negated).
    pub const fn code(self) -> Errno {
        match self {
            Self::Sys => Errno::ERESTARTSYS,
            Self::NoIntr => Errno::ERESTARTNOINTR,
            Self::NoHand => Errno::ERESTARTNOHAND,
            Self::RestartBlock => Errno::ERESTART_RESTARTBLOCK,
            Self::Intr => Errno::EINTR,
        }
    }

    /// The name of the code (as docs/user.md writes it).
    pub const fn name(self) -> &'static str {
        match self {
            Self::Sys => "ERESTARTSYS",
            Self::NoIntr => "ERESTARTNOINTR",
            Self::NoHand => "ERESTARTNOHAND",
            Self::RestartBlock => "ERESTART_RESTARTBLOCK",
            Self::Intr => "EINTR",
        }
    }
}

/// One row of [`BLOCKING`]: a system call, or one form of it when the class depends on the
/// arguments.
#[derive(Clone, Copy, Debug)]
pub struct Blocking {
    /// The call's number.
    pub nr: u64,
    /// The form this row covers, as docs/user.md names it ("any" for every form).
    pub form: &'static str,
    /// Whether the row covers a call with these arguments.
    pub applies: fn(&[u64; 6]) -> bool,
    /// Its class.
    pub class: Class,
    /// What it waits for here (the docs' last column).
    pub waits_for: &'static str,
}

fn always(_: &[u64; 6]) -> bool {
    true
}
fn futex_wait_untimed(a: &[u64; 6]) -> bool {
    futex_waits(a) && a[3] == 0
}
fn futex_wait_timed(a: &[u64; 6]) -> bool {
    futex_waits(a) && a[3] != 0
}
fn futex_waits(a: &[u64; 6]) -> bool {
    matches!(a[1] as u32 & FUTEX_CMD_MASK, FUTEX_WAIT | FUTEX_WAIT_BITSET)
}
fn relative(a: &[u64; 6]) -> bool {
    a[1] & TIMER_ABSTIME == 0
}
fn absolute(a: &[u64; 6]) -> bool {
    !relative(a)
}

/// A row covering every form of a call.
const fn row(nr: u64, class: Class, waits_for: &'static str) -> Blocking {
    Blocking { nr, form: "any", applies: always, class, waits_for }
}

const PIPES: &str = "a pipe, FIFO, terminal or other device with nothing to read";
const PIPES_OUT: &str = "room in a pipe or FIFO (a write that moved bytes returns their count)";

/// Every system call that can block, with its class (Linux 6.1's, call by call).
pub const BLOCKING: &[Blocking] = &[
    row(nr::READ, Class::Sys, PIPES),
    row(nr::READV, Class::Sys, PIPES),
    row(nr::PREAD64, Class::Sys, PIPES),
    row(nr::PREADV, Class::Sys, PIPES),
    row(nr::PREADV2, Class::Sys, PIPES),
    row(nr::WRITE, Class::Sys, PIPES_OUT),
    row(nr::WRITEV, Class::Sys, PIPES_OUT),
    row(nr::PWRITE64, Class::Sys, PIPES_OUT),
    row(nr::PWRITEV, Class::Sys, PIPES_OUT),
    row(nr::PWRITEV2, Class::Sys, PIPES_OUT),
    row(nr::OPENAT, Class::Sys, "the other end of a FIFO"),
    row(nr::OPENAT2, Class::Sys, "the other end of a FIFO"),
    row(nr::WAIT4, Class::Sys, "a child to change state"),
    row(nr::WAITID, Class::Sys, "a child to change state"),
    row(nr::FLOCK, Class::Sys, "a conflicting lock to go"),
    row(nr::FCNTL, Class::Sys, "a conflicting record lock to go (F_SETLKW, F_OFD_SETLKW)"),
    Blocking {
        nr: nr::FUTEX,
        form: "FUTEX_WAIT, FUTEX_WAIT_BITSET without a timeout",
        applies: futex_wait_untimed,
        class: Class::Sys,
        waits_for: "a wake",
    },
    Blocking {
        nr: nr::FUTEX,
        form: "FUTEX_WAIT, FUTEX_WAIT_BITSET with a timeout",
        applies: futex_wait_timed,
        class: Class::RestartBlock,
        waits_for: "a wake, until the timeout",
    },
    row(nr::FUTEX_WAITV, Class::Sys, "a wake on any of the words"),
    row(nr::NANOSLEEP, Class::RestartBlock, "the time (what is left is written to `rem`)"),
    Blocking {
        nr: nr::CLOCK_NANOSLEEP,
        form: "relative",
        applies: relative,
        class: Class::RestartBlock,
        waits_for: "the time (what is left is written to `rem`)",
    },
    Blocking {
        nr: nr::CLOCK_NANOSLEEP,
        form: "TIMER_ABSTIME",
        applies: absolute,
        class: Class::NoHand,
        waits_for: "the time",
    },
    row(nr::PPOLL, Class::NoHand, "a descriptor, until the timeout (what is left is written back)"),
    row(nr::PSELECT6, Class::NoHand, "a descriptor, until the timeout (what is left is written back)"),
    row(nr::EPOLL_PWAIT, Class::Intr, "an event, until the timeout"),
    row(nr::EPOLL_PWAIT2, Class::Intr, "an event, until the timeout"),
    row(nr::RT_SIGSUSPEND, Class::NoHand, "a signal"),
    row(nr::RT_SIGTIMEDWAIT, Class::Intr, "a signal of the set, until the timeout"),
    row(nr::RESTART_SYSCALL, Class::RestartBlock, "what the call it resumes waited for"),
];

/// The class of system call `nr` made with `args`, if it is one that can block.
pub fn class_of(nr: u64, args: &[u64; 6]) -> Option<Class> {
    BLOCKING.iter().find(|b| b.nr == nr && (b.applies)(args)).map(|b| b.class)
}

/// What to do with a system call's result `ret` (a negative errno or a restart code).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Resume {
    /// Return this value in x0.
    Return(i64),
    /// Run the call again: x0 back to its original value, pc back to the `svc`.
    Restart,
}

/// The fate of `ret` when a handler with `flags` runs (`Some`) or none does (`None`).
pub fn resume(ret: i64, handler_flags: Option<u64>) -> Resume {
    use Errno as E;
    let eintr = Resume::Return(E::EINTR.as_ret());
    match (Errno::from_ret(ret), handler_flags) {
        (Some(E::ERESTARTNOHAND | E::ERESTART_RESTARTBLOCK), Some(_)) => eintr,
        (Some(E::ERESTARTSYS), Some(flags)) if flags & SA_RESTART == 0 => eintr,
        (Some(E::ERESTARTSYS | E::ERESTARTNOINTR), Some(_)) => Resume::Restart,
        (Some(E::ERESTARTSYS | E::ERESTARTNOINTR | E::ERESTARTNOHAND | E::ERESTART_RESTARTBLOCK), None) => {
            Resume::Restart
        }
        _ => Resume::Return(ret),
    }
}

/// Whether `ret` is one of the kernel-internal restart codes (never seen by a program).
pub fn is_restart_code(ret: i64) -> bool {
    Errno::from_ret(ret).is_some_and(|e| e.is_restart() && e != Errno::ENOIOCTLCMD)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_restart_rules() {
        const ERESTARTSYS: i64 = Errno::ERESTARTSYS.code() as i64;
        const ERESTARTNOINTR: i64 = Errno::ERESTARTNOINTR.code() as i64;
        const ERESTARTNOHAND: i64 = Errno::ERESTARTNOHAND.code() as i64;
        const ERESTART_RESTARTBLOCK: i64 = Errno::ERESTART_RESTARTBLOCK.code() as i64;
        const EINTR: i64 = Errno::EINTR.code() as i64;
        assert_eq!(resume(-ERESTARTSYS, Some(SA_RESTART)), Resume::Restart);
        assert_eq!(resume(-ERESTARTSYS, Some(0)), Resume::Return(-EINTR));
        assert_eq!(resume(-ERESTARTSYS, None), Resume::Restart);
        assert_eq!(resume(-ERESTARTNOHAND, Some(SA_RESTART)), Resume::Return(-EINTR));
        assert_eq!(resume(-ERESTARTNOHAND, None), Resume::Restart);
        assert_eq!(resume(-ERESTART_RESTARTBLOCK, Some(SA_RESTART)), Resume::Return(-EINTR));
        assert_eq!(resume(-ERESTARTNOINTR, Some(0)), Resume::Restart);
        assert_eq!(resume(0, Some(0)), Resume::Return(0));
        assert_eq!(resume(-11, None), Resume::Return(-11));
        assert!(is_restart_code(-512) && !is_restart_code(-4) && !is_restart_code(512));
    }

    #[test]
    fn classes_as_signal_7_gives_them() {
        let none = [0u64; 6];
        assert_eq!(class_of(nr::READ, &none), Some(Class::Sys));
        assert_eq!(class_of(nr::WAIT4, &none), Some(Class::Sys));
        assert_eq!(class_of(nr::EPOLL_PWAIT, &none), Some(Class::Intr));
        assert_eq!(class_of(nr::PPOLL, &none), Some(Class::NoHand));
        assert_eq!(class_of(nr::NANOSLEEP, &none), Some(Class::RestartBlock));
        assert_eq!(class_of(nr::RT_SIGSUSPEND, &none), Some(Class::NoHand));
        assert_eq!(class_of(nr::RT_SIGTIMEDWAIT, &none), Some(Class::Intr));
        assert_eq!(class_of(nr::GETPID, &none), None);
        // futex: the timeout decides; FUTEX_WAKE never blocks.
        let wait = [0x1000, u64::from(FUTEX_WAIT | 128), 0, 0, 0, 0];
        assert_eq!(class_of(nr::FUTEX, &wait), Some(Class::Sys));
        let timed = [0x1000, u64::from(FUTEX_WAIT_BITSET), 0, 0x2000, 0, 0];
        assert_eq!(class_of(nr::FUTEX, &timed), Some(Class::RestartBlock));
        assert_eq!(class_of(nr::FUTEX, &[0x1000, 1, 1, 0, 0, 0]), None);
        // clock_nanosleep: relative sleeps resume with what is left, absolute ones restart.
        assert_eq!(class_of(nr::CLOCK_NANOSLEEP, &[1, 0, 0, 0, 0, 0]), Some(Class::RestartBlock));
        assert_eq!(class_of(nr::CLOCK_NANOSLEEP, &[1, TIMER_ABSTIME, 0, 0, 0, 0]), Some(Class::NoHand));
        // Each class's code is the one its rule in `resume` expects.
        for b in BLOCKING {
            let code = b.class.code().as_ret();
            let with_handler = resume(code, Some(SA_RESTART));
            match b.class {
                Class::Sys | Class::NoIntr => assert_eq!(with_handler, Resume::Restart),
                _ => assert_eq!(with_handler, Resume::Return(Errno::EINTR.as_ret())),
            }
        }
    }

    /// docs/user.md lists every row of the table, in its order, as `| call | form | class |`
    /// lines, and no other such line: the table and the docs cannot drift apart.
    #[test]
    fn the_docs_list_the_table() {
        let docs = include_str!("../../docs/user.md");
        let listed: std::vec::Vec<&str> = docs
            .lines()
            .filter(|l| l.starts_with("| `") && (l.contains("| `ERESTART") || l.contains("| `EINTR` |")))
            // The rows of calls, not those of the classes' own table.
            .filter(|l| !l.starts_with("| `ERESTART") && !l.starts_with("| `EINTR`"))
            .collect();
        let expected: std::vec::Vec<std::string::String> = BLOCKING
            .iter()
            .map(|b| {
                let name = linux_abi::syscalls::name(b.nr).unwrap_or("?");
                std::format!("| `{name}` | {} | `{}` | {} |", b.form, b.class.name(), b.waits_for)
            })
            .collect();
        assert_eq!(listed, expected, "docs/user.md's table of blocking calls");
    }
}
