//! Signal numbers and what they are: which are valid, which no program can catch, which the
//! hardware raises synchronously, and their names. The numbers themselves are defined once, in
//! `linux_abi::signal`, and re-exported here for the crate's users.
pub use linux_abi::signal::*;

/// Whether `sig` names a signal (1..=64).
pub const fn valid(sig: u64) -> bool {
    sig >= 1 && sig <= _NSIG as u64
}

/// SIGKILL and SIGSTOP: never caught, blocked or ignored (`sig_kernel_only`).
pub const fn kernel_only(sig: u32) -> bool {
    sig == SIGKILL || sig == SIGSTOP
}

/// Signals the hardware raises for the instruction that faulted (`SYNCHRONOUS_MASK`): dequeued
/// before any other pending signal.
pub const fn synchronous(sig: u32) -> bool {
    matches!(sig, SIGSEGV | SIGBUS | SIGILL | SIGTRAP | SIGFPE | SIGSYS)
}

/// The conventional name of `sig` ("SIGSEGV"), or "SIGRT" for a real-time signal.
pub fn name(sig: u32) -> &'static str {
    const NAMES: [&str; 32] = [
        "",
        "SIGHUP",
        "SIGINT",
        "SIGQUIT",
        "SIGILL",
        "SIGTRAP",
        "SIGABRT",
        "SIGBUS",
        "SIGFPE",
        "SIGKILL",
        "SIGUSR1",
        "SIGSEGV",
        "SIGUSR2",
        "SIGPIPE",
        "SIGALRM",
        "SIGTERM",
        "SIGSTKFLT",
        "SIGCHLD",
        "SIGCONT",
        "SIGSTOP",
        "SIGTSTP",
        "SIGTTIN",
        "SIGTTOU",
        "SIGURG",
        "SIGXCPU",
        "SIGXFSZ",
        "SIGVTALRM",
        "SIGPROF",
        "SIGWINCH",
        "SIGIO",
        "SIGPWR",
        "SIGSYS",
    ];
    match sig {
        1..32 => NAMES[sig as usize],
        SIGRTMIN..=_NSIG => "SIGRT",
        _ => "?",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_classes() {
        assert_eq!(name(SIGSEGV), "SIGSEGV");
        assert_eq!(name(SIGSYS), "SIGSYS");
        assert_eq!(name(40), "SIGRT");
        assert_eq!(name(0), "?");
        assert!(valid(1) && valid(64) && !valid(0) && !valid(65));
        assert!(kernel_only(SIGKILL) && kernel_only(SIGSTOP) && !kernel_only(SIGTERM));
        assert!(synchronous(SIGSEGV) && !synchronous(SIGABRT));
    }
}
