//! `struct sigaction` as arm64 Linux lays it out for `rt_sigaction` (asm-generic: handler,
//! flags, restorer, mask; 32 bytes), what a signal does when it is taken (its disposition and
//! the default actions of `signal(7)`), and the mask a handler runs with.
use crate::num::*;
use crate::set::SigSet;
use crate::{get_u64, put_u64};

/// Bytes of the kernel's `struct sigaction` on arm64.
pub const SIGACTION_SIZE: usize = 32;

/// One signal's action.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SigAction {
    /// `SIG_DFL`, `SIG_IGN` or the handler's address.
    pub handler: u64,
    /// `SA_*` flags.
    pub flags: u64,
    /// Where the handler returns (`SA_RESTORER`): the C library's `rt_sigreturn` stub.
    pub restorer: u64,
    /// Signals blocked while the handler runs (besides the signal itself).
    pub mask: SigSet,
}

impl SigAction {
    /// The default action, as every signal starts.
    pub const DEFAULT: Self = Self { handler: SIG_DFL, flags: 0, restorer: 0, mask: SigSet::EMPTY };

    /// Decodes the user's `struct sigaction`.
    pub fn from_bytes(b: &[u8; SIGACTION_SIZE]) -> Self {
        Self {
            handler: get_u64(b, 0),
            flags: get_u64(b, 8),
            restorer: get_u64(b, 16),
            mask: SigSet(get_u64(b, 24)),
        }
    }

    /// Encodes it for the user.
    pub fn to_bytes(&self) -> [u8; SIGACTION_SIZE] {
        let mut b = [0u8; SIGACTION_SIZE];
        put_u64(&mut b, 0, self.handler);
        put_u64(&mut b, 8, self.flags);
        put_u64(&mut b, 16, self.restorer);
        put_u64(&mut b, 24, self.mask.0);
        b
    }

    /// What `rt_sigaction` stores for a new action: unknown flags cleared (so a program can tell
    /// which flags the kernel knows by reading the action back) and SIGKILL/SIGSTOP removed from
    /// the mask.
    #[must_use]
    pub fn sanitized(self) -> Self {
        Self { flags: self.flags & SA_KNOWN, mask: self.mask.blockable(), ..self }
    }

    /// Whether a handler function is installed.
    pub fn has_handler(&self) -> bool {
        self.handler != SIG_DFL && self.handler != SIG_IGN
    }
}

/// Checks `rt_sigaction`'s signal argument: `None` (EINVAL) for a number out of range, and for
/// SIGKILL or SIGSTOP when a new action is given (their old action may still be read).
pub fn check_sigaction(sig: u64, setting: bool) -> Option<u32> {
    if !valid(sig) || (setting && kernel_only(sig as u32)) {
        return None;
    }
    Some(sig as u32)
}

/// The default action of a signal (`signal(7)`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Default {
    /// End the process.
    Terminate,
    /// End the process with a core dump (no core file here: the status is the same).
    Core,
    /// Nothing.
    Ignore,
    /// Stop the process (a group stop, until `SIGCONT`).
    Stop,
    /// Continue a stopped process (the continuing happens when the signal is sent; taking it
    /// does nothing more).
    Continue,
}

/// The default action of `sig`.
pub fn default_action(sig: u32) -> Default {
    match sig {
        SIGCHLD | SIGURG | SIGWINCH => Default::Ignore,
        SIGCONT => Default::Continue,
        SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU => Default::Stop,
        SIGQUIT | SIGILL | SIGTRAP | SIGABRT | SIGBUS | SIGFPE | SIGSEGV | SIGXCPU | SIGXFSZ | SIGSYS => {
            Default::Core
        }
        _ => Default::Terminate,
    }
}

/// Whether `sig` is one of the stop signals (`sig_kernel_stop`: SIGSTOP, SIGTSTP, SIGTTIN,
/// SIGTTOU): sending one discards a pending SIGCONT, and sending SIGCONT discards them.
pub const fn is_stop(sig: u32) -> bool {
    matches!(sig, SIGSTOP | SIGTSTP | SIGTTIN | SIGTTOU)
}

/// The exit status a shell reports for a process ended by `sig` (128 + the number).
pub const fn killed_status(sig: u32) -> u64 {
    128 + sig as u64
}

/// What taking a signal does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Run the handler.
    Handle(SigAction),
    /// Nothing (SIG_IGN, or a default action that does nothing).
    Ignore,
    /// Stop the whole process (SIGSTOP, and SIGTSTP, SIGTTIN, SIGTTOU with their default action)
    /// until a `SIGCONT`.
    Stop,
    /// End the process with this status.
    Terminate(u64),
}

/// What taking `sig` with `action` installed does.
pub fn outcome(sig: u32, action: &SigAction) -> Outcome {
    if kernel_only(sig) {
        // SIGKILL ends the process; SIGSTOP stops it, whatever is installed.
        return if sig == SIGKILL { Outcome::Terminate(killed_status(sig)) } else { Outcome::Stop };
    }
    match action.handler {
        SIG_IGN => Outcome::Ignore,
        SIG_DFL => match default_action(sig) {
            Default::Terminate | Default::Core => Outcome::Terminate(killed_status(sig)),
            Default::Stop => Outcome::Stop,
            Default::Ignore | Default::Continue => Outcome::Ignore,
        },
        _ => Outcome::Handle(*action),
    }
}

/// Whether a signal sent now is dropped at once: its action ignores it and the target does not
/// block it (a blocked signal stays pending: the action may change before it is unblocked).
pub fn discarded_when_sent(sig: u32, action: &SigAction, blocked: SigSet) -> bool {
    !blocked.contains(sig) && outcome(sig, action) == Outcome::Ignore
}

/// The mask a handler for `sig` runs with: the thread's mask, the action's mask and, unless
/// `SA_NODEFER`, the signal itself.
pub fn handler_mask(blocked: SigSet, sig: u32, action: &SigAction) -> SigSet {
    let mut m = blocked.union(action.mask);
    if action.flags & SA_NODEFER == 0 {
        m = m.with(sig);
    }
    m.blockable()
}

/// The action after the handler of `sig` has been entered: `SA_RESETHAND` puts back the default.
pub fn after_entry(action: &SigAction) -> SigAction {
    if action.flags & SA_RESETHAND != 0 { SigAction { handler: SIG_DFL, ..*action } } else { *action }
}

/// The action a synchronous fault signal is taken with when the thread blocks or ignores it: the
/// default (Linux's `force_sig_info`: a fault the program cannot handle must not loop forever).
/// Returns the action and whether the signal must be unblocked.
pub fn forced(sig: u32, action: &SigAction, blocked: SigSet) -> (SigAction, bool) {
    let blocked = blocked.contains(sig);
    if blocked || action.handler == SIG_IGN {
        (SigAction { handler: SIG_DFL, ..*action }, blocked)
    } else {
        (*action, false)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_is_handler_flags_restorer_mask() {
        let a = SigAction {
            handler: 0x1111,
            flags: SA_SIGINFO | SA_RESTORER,
            restorer: 0x2222,
            mask: SigSet(0x400),
        };
        let b = a.to_bytes();
        assert_eq!(&b[0..8], &0x1111u64.to_le_bytes());
        assert_eq!(&b[8..16], &(SA_SIGINFO | SA_RESTORER).to_le_bytes());
        assert_eq!(&b[16..24], &0x2222u64.to_le_bytes());
        assert_eq!(&b[24..32], &0x400u64.to_le_bytes());
        assert_eq!(SigAction::from_bytes(&b), a);
    }

    #[test]
    fn flag_values_are_linuxs() {
        assert_eq!(SA_ONSTACK, 0x0800_0000);
        assert_eq!(SA_RESTART, 0x1000_0000);
        assert_eq!(SA_NODEFER, 0x4000_0000);
        assert_eq!(SA_RESETHAND, 0x8000_0000);
        assert_eq!(SA_RESTORER, 0x0400_0000);
        assert_eq!(SA_SIGINFO, 4);
    }

    #[test]
    fn sanitizing_drops_unknown_flags_and_unblockable_signals() {
        let a = SigAction {
            handler: 5,
            flags: SA_SIGINFO | 0x400 | 0x2000_0000,
            restorer: 0,
            mask: SigSet(u64::MAX),
        };
        let s = a.sanitized();
        assert_eq!(s.flags, SA_SIGINFO);
        assert!(!s.mask.contains(SIGKILL) && !s.mask.contains(SIGSTOP) && s.mask.contains(SIGINT));
    }

    #[test]
    fn which_signals_can_be_caught() {
        assert_eq!(check_sigaction(0, false), None);
        assert_eq!(check_sigaction(65, false), None);
        assert_eq!(check_sigaction(SIGKILL as u64, true), None);
        assert_eq!(check_sigaction(SIGSTOP as u64, true), None);
        assert_eq!(check_sigaction(SIGKILL as u64, false), Some(SIGKILL)); // reading is fine
        assert_eq!(check_sigaction(SIGSEGV as u64, true), Some(SIGSEGV));
        assert_eq!(check_sigaction(64, true), Some(64));
    }

    #[test]
    fn default_actions() {
        for sig in [SIGCHLD, SIGURG, SIGWINCH] {
            assert_eq!(outcome(sig, &SigAction::DEFAULT), Outcome::Ignore, "signal {sig}");
        }
        assert_eq!(outcome(SIGABRT, &SigAction::DEFAULT), Outcome::Terminate(134));
        assert_eq!(outcome(SIGSEGV, &SigAction::DEFAULT), Outcome::Terminate(139));
        assert_eq!(outcome(SIGTERM, &SigAction::DEFAULT), Outcome::Terminate(143));
        assert_eq!(outcome(SIGUSR1, &SigAction::DEFAULT), Outcome::Terminate(138));
        assert_eq!(outcome(40, &SigAction::DEFAULT), Outcome::Terminate(168));
        assert_eq!(default_action(SIGABRT), Default::Core);
        assert_eq!(default_action(SIGHUP), Default::Terminate);
        // SIGKILL terminates whatever is installed.
        let h = SigAction { handler: 0x400000, ..SigAction::DEFAULT };
        assert_eq!(outcome(SIGKILL, &h), Outcome::Terminate(137));
        assert_eq!(outcome(SIGUSR1, &h), Outcome::Handle(h));
        let ign = SigAction { handler: SIG_IGN, ..SigAction::DEFAULT };
        assert_eq!(outcome(SIGTERM, &ign), Outcome::Ignore);
        // Job control: the stop signals stop by default, SIGSTOP whatever is installed; SIGCONT
        // does nothing more when taken (it continued the process when it was sent).
        for sig in [SIGSTOP, SIGTSTP, SIGTTIN, SIGTTOU] {
            assert_eq!(outcome(sig, &SigAction::DEFAULT), Outcome::Stop, "signal {sig}");
        }
        assert_eq!(outcome(SIGSTOP, &ign), Outcome::Stop);
        assert_eq!(outcome(SIGTSTP, &ign), Outcome::Ignore);
        assert_eq!(outcome(SIGTSTP, &h), Outcome::Handle(h));
        assert_eq!(outcome(SIGCONT, &SigAction::DEFAULT), Outcome::Ignore);
        assert!(is_stop(SIGTTOU) && !is_stop(SIGCONT) && !is_stop(SIGKILL));
    }

    #[test]
    fn ignored_signals_are_dropped_unless_blocked() {
        let ign = SigAction { handler: SIG_IGN, ..SigAction::DEFAULT };
        assert!(discarded_when_sent(SIGUSR1, &ign, SigSet::EMPTY));
        assert!(!discarded_when_sent(SIGUSR1, &ign, SigSet::of(SIGUSR1)));
        assert!(discarded_when_sent(SIGCHLD, &SigAction::DEFAULT, SigSet::EMPTY));
        assert!(!discarded_when_sent(SIGTERM, &SigAction::DEFAULT, SigSet::EMPTY));
    }

    #[test]
    fn handler_masks() {
        let a = SigAction { handler: 9, flags: 0, restorer: 0, mask: SigSet::of(SIGUSR2) };
        assert_eq!(
            handler_mask(SigSet::of(SIGINT), SIGUSR1, &a),
            SigSet::of(SIGINT).with(SIGUSR2).with(SIGUSR1)
        );
        let nodefer = SigAction { flags: SA_NODEFER, ..a };
        assert_eq!(handler_mask(SigSet::EMPTY, SIGUSR1, &nodefer), SigSet::of(SIGUSR2));
        let reset = SigAction { flags: SA_RESETHAND | SA_SIGINFO, ..a };
        assert_eq!(after_entry(&reset).handler, SIG_DFL);
        assert_eq!(after_entry(&a), a);
    }

    #[test]
    fn blocked_or_ignored_faults_take_the_default() {
        let h = SigAction { handler: 0x1234, ..SigAction::DEFAULT };
        assert_eq!(forced(SIGSEGV, &h, SigSet::EMPTY), (h, false));
        let (a, unblock) = forced(SIGSEGV, &h, SigSet::of(SIGSEGV));
        assert_eq!((a.handler, unblock), (SIG_DFL, true));
        let ign = SigAction { handler: SIG_IGN, ..SigAction::DEFAULT };
        assert_eq!(forced(SIGBUS, &ign, SigSet::EMPTY).0.handler, SIG_DFL);
    }
}
