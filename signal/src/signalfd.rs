//! `struct signalfd_siginfo` (128 bytes, `include/uapi/linux/signalfd.h`): what a read of a
//! signalfd returns for each signal it takes, made from the signal's `siginfo_t` as Linux's
//! `signalfd_copyinfo` makes it: the number, errno and code always, then the fields of the
//! siginfo's layout (`kernel/signal.c`'s `siginfo_layout`, which the code and the signal
//! decide), each at its own offset in the signalfd structure.
use crate::info::SigInfo;
use crate::num::{
    SI_KERNEL, SI_SIGIO, SI_TIMER, SI_USER, SIGBUS, SIGCHLD, SIGFPE, SIGILL, SIGIO, SIGSEGV, SIGSYS, SIGTRAP,
};
use crate::{get_u32, get_u64, put_u32, put_u64};

/// Bytes of `struct signalfd_siginfo`.
pub const SIGNALFD_SIGINFO_SIZE: usize = 128;

/// Which fields of `siginfo_t` a signal carries (Linux's `enum siginfo_layout`, the cases
/// signalfd tells apart).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// `kill`: the sender's pid and uid.
    Kill,
    /// A POSIX timer's: the timer id, the overrun count, the value.
    Timer,
    /// `SIGIO`/`SIGPOLL`: band and descriptor.
    Poll,
    /// A fault: the address.
    Fault,
    /// `SIGCHLD`: pid, uid, status, CPU times.
    Child,
    /// Queued by a program (`sigqueue`, `tgkill`...): pid, uid, value.
    Rt,
    /// `SIGSYS` from seccomp: the call's address, number and architecture.
    Sys,
}

/// The layout of a siginfo with signal `sig` and code `code` (Linux's `siginfo_layout`): a code
/// the kernel gives (between `SI_USER` and `SI_KERNEL`) is read per signal, up to the number of
/// codes that signal has; `SI_TIMER`, `SI_SIGIO` and the other negative codes are a sender's.
pub fn layout(sig: u32, code: i32) -> Layout {
    if code > SI_USER && code < SI_KERNEL {
        // (signal, its number of codes in Linux 6.1, the layout)
        let per_signal = [
            (SIGILL, 11, Layout::Fault),
            (SIGFPE, 15, Layout::Fault),
            (SIGSEGV, 9, Layout::Fault),
            (SIGBUS, 5, Layout::Fault),
            (SIGTRAP, 6, Layout::Fault),
            (SIGCHLD, 6, Layout::Child),
            (SIGIO, 6, Layout::Poll),
            (SIGSYS, 2, Layout::Sys),
        ];
        return match per_signal.iter().find(|(s, _, _)| *s == sig) {
            Some(&(_, limit, layout)) if code <= limit => layout,
            Some(_) => Layout::Kill,
            None if code <= 6 => Layout::Poll,
            None => Layout::Kill,
        };
    }
    match code {
        SI_TIMER => Layout::Timer,
        SI_SIGIO => Layout::Poll,
        c if c < 0 => Layout::Rt,
        _ => Layout::Kill,
    }
}

/// The `struct signalfd_siginfo` of `info`.
pub fn from_siginfo(info: &SigInfo) -> [u8; SIGNALFD_SIGINFO_SIZE] {
    let s = &info.0;
    let mut out = [0u8; SIGNALFD_SIGINFO_SIZE];
    // ssi_signo, ssi_errno, ssi_code: the first three ints of both.
    out[..12].copy_from_slice(&s[..12]);
    // Offsets in signalfd_siginfo.
    const PID: usize = 12;
    const UID: usize = 16;
    const FD: usize = 20;
    const TID: usize = 24;
    const BAND: usize = 28;
    const OVERRUN: usize = 32;
    const STATUS: usize = 40;
    const INT: usize = 44;
    const PTR: usize = 48;
    const UTIME: usize = 56;
    const STIME: usize = 64;
    const ADDR: usize = 72;
    const SYSCALL: usize = 84;
    const CALL_ADDR: usize = 88;
    const ARCH: usize = 96;
    match layout(info.signo(), info.code()) {
        Layout::Kill => {
            put_u32(&mut out, PID, get_u32(s, 16));
            put_u32(&mut out, UID, get_u32(s, 20));
        }
        Layout::Timer => {
            put_u32(&mut out, TID, get_u32(s, 16));
            put_u32(&mut out, OVERRUN, get_u32(s, 20));
            put_u64(&mut out, PTR, get_u64(s, 24));
            put_u32(&mut out, INT, get_u32(s, 24));
        }
        Layout::Poll => {
            // si_band is a long (at 16), si_fd follows (at 24); ssi_band is 32 bits.
            put_u32(&mut out, BAND, get_u64(s, 16) as u32);
            put_u32(&mut out, FD, get_u32(s, 24));
        }
        Layout::Fault => put_u64(&mut out, ADDR, get_u64(s, 16)),
        Layout::Child => {
            put_u32(&mut out, PID, get_u32(s, 16));
            put_u32(&mut out, UID, get_u32(s, 20));
            put_u32(&mut out, STATUS, get_u32(s, 24));
            put_u64(&mut out, UTIME, get_u64(s, 32));
            put_u64(&mut out, STIME, get_u64(s, 40));
        }
        Layout::Rt => {
            put_u32(&mut out, PID, get_u32(s, 16));
            put_u32(&mut out, UID, get_u32(s, 20));
            put_u64(&mut out, PTR, get_u64(s, 24));
            put_u32(&mut out, INT, get_u32(s, 24));
        }
        Layout::Sys => {
            put_u64(&mut out, CALL_ADDR, get_u64(s, 16));
            put_u32(&mut out, SYSCALL, get_u32(s, 24));
            put_u32(&mut out, ARCH, get_u32(s, 28));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::info::SIGINFO_SIZE;
    use crate::num::{CLD_EXITED, SEGV_MAPERR, SI_QUEUE, SI_TKILL, SIGUSR1};

    #[test]
    fn raise_is_a_sender_with_pid_and_uid() {
        let out = from_siginfo(&SigInfo::sent(SIGUSR1, SI_TKILL, 42, 7));
        assert_eq!((get_u32(&out, 0), get_u32(&out, 8) as i32), (SIGUSR1, SI_TKILL));
        assert_eq!((get_u32(&out, 12), get_u32(&out, 16)), (42, 7));
        assert_eq!(get_u64(&out, 48), 0);
    }

    #[test]
    fn sigqueue_carries_its_value_as_int_and_pointer() {
        let mut raw = [0u8; SIGINFO_SIZE];
        raw[8..12].copy_from_slice(&SI_QUEUE.to_le_bytes());
        raw[16..20].copy_from_slice(&9u32.to_le_bytes());
        raw[24..32].copy_from_slice(&0x1_0000_004du64.to_le_bytes());
        let out = from_siginfo(&SigInfo::from_user(SIGUSR1, raw));
        assert_eq!(layout(SIGUSR1, SI_QUEUE), Layout::Rt);
        assert_eq!((get_u32(&out, 12), get_u32(&out, 44)), (9, 77));
        assert_eq!(get_u64(&out, 48), 0x1_0000_004d);
    }

    #[test]
    fn a_child_s_exit_says_its_status() {
        let mut info = SigInfo::sent(SIGCHLD, CLD_EXITED, 5, 0);
        info.0[24..28].copy_from_slice(&9u32.to_le_bytes());
        let out = from_siginfo(&info);
        assert_eq!(layout(SIGCHLD, CLD_EXITED), Layout::Child);
        assert_eq!((get_u32(&out, 8) as i32, get_u32(&out, 12), get_u32(&out, 40)), (CLD_EXITED, 5, 9));
    }

    #[test]
    fn a_fault_gives_its_address_and_a_user_kill_its_sender() {
        let out = from_siginfo(&SigInfo::fault(SIGSEGV, SEGV_MAPERR, 0xdead_0000));
        assert_eq!(get_u64(&out, 72), 0xdead_0000);
        assert_eq!(layout(SIGUSR1, SI_USER), Layout::Kill);
        // A code past the signal's own is a kill's layout; SI_KERNEL too.
        assert_eq!(layout(SIGCHLD, 7), Layout::Kill);
        assert_eq!(layout(SIGSEGV, SI_KERNEL), Layout::Kill);
        assert_eq!(layout(SIGUSR1, SI_TIMER), Layout::Timer);
    }
}
