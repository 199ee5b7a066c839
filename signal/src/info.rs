//! `siginfo_t`: 128 bytes; `si_signo`, `si_errno`, `si_code` (three `int`s), then a union at
//! offset 16 whose members this kernel fills: the sender (`si_pid`, `si_uid`, and `si_value` for
//! sigqueue) or the fault address (`si_addr`).
use crate::num::{SIGBUS, SIGFPE, SIGILL, SIGSEGV, SIGTRAP};
use crate::{get_u32, put_u32, put_u64};

/// Bytes of `siginfo_t`.
pub const SIGINFO_SIZE: usize = 128;
/// Offset of `si_addr` (and of `si_pid`).
pub const SI_ADDR: usize = 16;
/// Offset of `si_uid`.
pub const SI_UID: usize = 20;
/// Offset of `si_value` (sigqueue's payload, and a POSIX timer's `sigev_value`).
pub const SI_VALUE: usize = 24;
/// Offset of a POSIX timer's `si_overrun` (after its id, `si_timerid`, at 16).
pub const SI_OVERRUN: usize = 20;
/// Offset of `si_status` (SIGCHLD's exit code or signal).
pub const SI_STATUS: usize = 24;

/// One signal's information, as the handler (or `rt_sigtimedwait`) receives it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SigInfo(pub [u8; SIGINFO_SIZE]);

impl SigInfo {
    fn header(signo: u32, code: i32) -> Self {
        let mut b = [0u8; SIGINFO_SIZE];
        put_u32(&mut b, 0, signo);
        put_u32(&mut b, 8, code as u32);
        Self(b)
    }

    /// Sent by a process (kill, tkill, tgkill: `SI_USER` / `SI_TKILL`).
    pub fn sent(signo: u32, code: i32, pid: u32, uid: u32) -> Self {
        let mut i = Self::header(signo, code);
        put_u32(&mut i.0, SI_ADDR, pid);
        put_u32(&mut i.0, SI_UID, uid);
        i
    }

    /// Raised by a fault at `addr`.
    pub fn fault(signo: u32, code: i32, addr: u64) -> Self {
        let mut i = Self::header(signo, code);
        put_u64(&mut i.0, SI_ADDR, addr);
        i
    }

    /// The expiry of POSIX timer `id` (`SI_TIMER`): `si_timerid`, `si_overrun` (the expiries
    /// missed while the signal was pending, set as it is taken) and the timer's `sigev_value`.
    pub fn timer(signo: u32, id: i32, overrun: u32, value: u64) -> Self {
        let mut i = Self::header(signo, crate::num::SI_TIMER);
        put_u32(&mut i.0, SI_ADDR, id as u32);
        put_u32(&mut i.0, SI_OVERRUN, overrun);
        put_u64(&mut i.0, SI_VALUE, value);
        i
    }

    /// A POSIX timer's expiry: its id, if this is one (`SI_TIMER`).
    pub fn timer_id(&self) -> Option<i32> {
        (self.code() == crate::num::SI_TIMER).then(|| get_u32(&self.0, SI_ADDR) as i32)
    }

    /// Sets `si_overrun` (a POSIX timer's, as its signal is taken).
    pub fn set_overrun(&mut self, overrun: u32) {
        put_u32(&mut self.0, SI_OVERRUN, overrun);
    }

    /// A program's own siginfo (rt_sigqueueinfo), kept as given except for the number.
    pub fn from_user(signo: u32, bytes: [u8; SIGINFO_SIZE]) -> Self {
        let mut i = Self(bytes);
        put_u32(&mut i.0, 0, signo);
        i
    }

    /// `si_signo`.
    pub fn signo(&self) -> u32 {
        get_u32(&self.0, 0)
    }

    /// `si_code`.
    pub fn code(&self) -> i32 {
        get_u32(&self.0, 8) as i32
    }

    /// `si_addr`, if this is a fault's siginfo: Linux's `siginfo_layout` gives one of the
    /// `SIL_FAULT*` layouts for SIGILL, SIGFPE, SIGSEGV, SIGBUS and SIGTRAP with a kernel code
    /// from 1 to the signal's last (`NSIGILL` 11, `NSIGFPE` 15, `NSIGSEGV` 9, `NSIGBUS` 5,
    /// `NSIGTRAP` 6 in Linux 6.1), whoever sent it (a program may queue such a siginfo to
    /// itself). These are the siginfos whose address loses its tag bits on the way to a handler
    /// without `SA_EXPOSE_TAGBITS` (Linux's `hide_si_addr_tag_bits`).
    pub fn fault_address(&self) -> Option<u64> {
        let last = match self.signo() {
            SIGILL => 11,
            SIGFPE => 15,
            SIGSEGV => 9,
            SIGBUS => 5,
            SIGTRAP => 6,
            _ => return None,
        };
        (1..=last).contains(&self.code()).then(|| crate::get_u64(&self.0, SI_ADDR))
    }

    /// Sets a fault's `si_addr` (see [`SigInfo::fault_address`]).
    pub fn set_fault_address(&mut self, addr: u64) {
        put_u64(&mut self.0, SI_ADDR, addr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::get_u64;
    use crate::num::*;

    #[test]
    fn fault_info_layout() {
        let i = SigInfo::fault(SIGSEGV, SEGV_ACCERR, 0xdead_b000);
        assert_eq!(i.signo(), 11);
        assert_eq!(i.code(), 2);
        assert_eq!(get_u32(&i.0, 4), 0); // si_errno
        assert_eq!(get_u64(&i.0, 16), 0xdead_b000);
    }

    #[test]
    fn fault_address_only_for_fault_layouts() {
        let tagged = 0x0900_ffff_dead_b000;
        assert_eq!(SigInfo::fault(SIGSEGV, SEGV_MTESERR, tagged).fault_address(), Some(tagged));
        assert_eq!(SigInfo::fault(SIGTRAP, TRAP_BRKPT, 4).fault_address(), Some(4));
        assert_eq!(SigInfo::fault(SIGBUS, BUS_ADRALN, 8).fault_address(), Some(8));
        // A code past the signal's last, SI_KERNEL, a sender's code, another signal: not a fault.
        assert_eq!(SigInfo::fault(SIGSEGV, 10, tagged).fault_address(), None);
        assert_eq!(SigInfo::fault(SIGSEGV, SI_KERNEL, tagged).fault_address(), None);
        assert_eq!(SigInfo::sent(SIGSEGV, SI_USER, 1, 0).fault_address(), None);
        assert_eq!(SigInfo::fault(SIGUSR1, 1, tagged).fault_address(), None);
        let mut i = SigInfo::fault(SIGSEGV, SEGV_MAPERR, tagged);
        i.set_fault_address(0xffff_dead_b000);
        assert_eq!(i.fault_address(), Some(0xffff_dead_b000));
    }

    #[test]
    fn timer_info_layout() {
        // struct { int si_tid; int si_overrun; sigval_t si_sigval; } at 16 (asm-generic/siginfo.h).
        let mut i = SigInfo::timer(SIGRTMIN, 3, 0, 1234);
        assert_eq!((i.signo(), i.code()), (SIGRTMIN, -2));
        assert_eq!((get_u32(&i.0, 16), get_u32(&i.0, 20), get_u64(&i.0, 24)), (3, 0, 1234));
        i.set_overrun(9);
        assert_eq!((i.timer_id(), get_u32(&i.0, 20)), (Some(3), 9));
        assert_eq!(SigInfo::sent(SIGALRM, SI_KERNEL, 0, 0).timer_id(), None);
    }

    #[test]
    fn sender_info_layout() {
        let i = SigInfo::sent(SIGUSR1, SI_TKILL, 7, 0);
        assert_eq!(i.code(), -6);
        assert_eq!(get_u32(&i.0, 16), 7);
        let mut raw = [0u8; SIGINFO_SIZE];
        raw[0] = 99;
        raw[24] = 42;
        let q = SigInfo::from_user(SIGUSR2, raw);
        assert_eq!((q.signo(), q.0[24]), (SIGUSR2, 42));
    }
}
