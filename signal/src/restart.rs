//! What an interrupted system call returns once a signal has been taken (Linux's `do_signal`):
//! the kernel-internal "restart" codes a blocking call leaves in x0 become -EINTR or a restart
//! of the call, depending on whether a handler runs and on its `SA_RESTART`.
use crate::num::SA_RESTART;

/// Interrupted; restart if the handler has SA_RESTART or no handler runs (futex wait, no timeout).
pub const ERESTARTSYS: i64 = 512;
/// Interrupted; always restart.
pub const ERESTARTNOINTR: i64 = 513;
/// Interrupted; restart only if no handler runs (rt_sigsuspend).
pub const ERESTARTNOHAND: i64 = 514;
/// Interrupted; restart (with the time left) only if no handler runs (futex wait with a timeout).
pub const ERESTART_RESTARTBLOCK: i64 = 516;
/// Interrupted system call.
pub const EINTR: i64 = 4;

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
    let code = -ret;
    match (code, handler_flags) {
        (ERESTARTNOHAND | ERESTART_RESTARTBLOCK, Some(_)) => Resume::Return(-EINTR),
        (ERESTARTSYS, Some(flags)) if flags & SA_RESTART == 0 => Resume::Return(-EINTR),
        (ERESTARTSYS | ERESTARTNOINTR, Some(_)) => Resume::Restart,
        (ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND | ERESTART_RESTARTBLOCK, None) => Resume::Restart,
        _ => Resume::Return(ret),
    }
}

/// Whether `ret` is one of the kernel-internal restart codes (never seen by a program).
pub fn is_restart_code(ret: i64) -> bool {
    matches!(-ret, ERESTARTSYS | ERESTARTNOINTR | ERESTARTNOHAND | ERESTART_RESTARTBLOCK)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn linux_restart_rules() {
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
}
