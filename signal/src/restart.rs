//! What an interrupted system call returns once a signal has been taken (Linux's `do_signal`):
//! the kernel-internal "restart" codes a blocking call leaves in x0 (`Errno::ERESTARTSYS` and
//! its kin, defined in `linux_abi::errno`) become -EINTR or a restart of the call, depending on
//! whether a handler runs and on its `SA_RESTART`.
use crate::num::SA_RESTART;
use linux_abi::Errno;

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
}
