//! The numbers of the Linux arm64 signal ABI (asm-generic `signal.h`, `signal-defs.h`,
//! `siginfo.h`; arm64 adds `SA_RESTORER` and its own `MINSIGSTKSZ`): signal numbers, dispositions,
//! `sigaction` flags, `sigprocmask` operations, `si_code` values, `sigaltstack` flags and
//! `sigevent` notifications. What the signals do is the `signal` crate's and the kernel's.

/// Highest signal number (`_NSIG`): signals are 1..=64.
pub const _NSIG: u32 = 64;
/// First real-time signal (the kernel's `SIGRTMIN`; glibc reserves 32 and 33 for itself).
pub const SIGRTMIN: u32 = 32;

/// Hangup.
pub const SIGHUP: u32 = 1;
/// Interrupt from the terminal.
pub const SIGINT: u32 = 2;
/// Quit from the terminal (core).
pub const SIGQUIT: u32 = 3;
/// Illegal instruction (core).
pub const SIGILL: u32 = 4;
/// Trace or breakpoint trap (core).
pub const SIGTRAP: u32 = 5;
/// Abort (core); what `abort()` raises.
pub const SIGABRT: u32 = 6;
/// Bus error: misaligned access (core).
pub const SIGBUS: u32 = 7;
/// Arithmetic exception (core).
pub const SIGFPE: u32 = 8;
/// Kill: cannot be caught, blocked or ignored.
pub const SIGKILL: u32 = 9;
/// User signal 1.
pub const SIGUSR1: u32 = 10;
/// Invalid memory reference (core).
pub const SIGSEGV: u32 = 11;
/// User signal 2.
pub const SIGUSR2: u32 = 12;
/// Broken pipe.
pub const SIGPIPE: u32 = 13;
/// Timer.
pub const SIGALRM: u32 = 14;
/// Termination request.
pub const SIGTERM: u32 = 15;
/// Coprocessor stack fault (unused on arm64).
pub const SIGSTKFLT: u32 = 16;
/// A child stopped or exited (ignored by default).
pub const SIGCHLD: u32 = 17;
/// Continue if stopped.
pub const SIGCONT: u32 = 18;
/// Stop: cannot be caught, blocked or ignored.
pub const SIGSTOP: u32 = 19;
/// Stop from the terminal.
pub const SIGTSTP: u32 = 20;
/// Background read from the terminal.
pub const SIGTTIN: u32 = 21;
/// Background write to the terminal.
pub const SIGTTOU: u32 = 22;
/// Urgent socket data (ignored by default).
pub const SIGURG: u32 = 23;
/// CPU time limit (core).
pub const SIGXCPU: u32 = 24;
/// File size limit (core).
pub const SIGXFSZ: u32 = 25;
/// Virtual timer.
pub const SIGVTALRM: u32 = 26;
/// Profiling timer.
pub const SIGPROF: u32 = 27;
/// Window size change (ignored by default).
pub const SIGWINCH: u32 = 28;
/// I/O possible.
pub const SIGIO: u32 = 29;
/// Power failure.
pub const SIGPWR: u32 = 30;
/// Bad system call (core).
pub const SIGSYS: u32 = 31;

/// `sa_handler` value: the default action.
pub const SIG_DFL: u64 = 0;
/// `sa_handler` value: ignore.
pub const SIG_IGN: u64 = 1;

/// Do not report stopped children (accepted, no job control here).
pub const SA_NOCLDSTOP: u64 = 0x0000_0001;
/// Do not make zombies (accepted, no child processes here).
pub const SA_NOCLDWAIT: u64 = 0x0000_0002;
/// The handler takes (signo, siginfo *, ucontext *).
pub const SA_SIGINFO: u64 = 0x0000_0004;
/// A fault's `si_addr` keeps its tag byte (bits `[63:56]`) for this handler (Linux 5.11).
pub const SA_EXPOSE_TAGBITS: u64 = 0x0000_0800;
/// `sa_restorer` is where the handler returns (glibc and musl always set it).
pub const SA_RESTORER: u64 = 0x0400_0000;
/// Run the handler on the alternate signal stack.
pub const SA_ONSTACK: u64 = 0x0800_0000;
/// Restart system calls the handler interrupted, where Linux restarts them.
pub const SA_RESTART: u64 = 0x1000_0000;
/// Do not block the signal while its handler runs.
pub const SA_NODEFER: u64 = 0x4000_0000;
/// Reset the disposition to the default once the handler is entered.
pub const SA_RESETHAND: u64 = 0x8000_0000;
/// The flags `rt_sigaction` keeps (`UAPI_SA_FLAGS`); others are cleared, so a program can see
/// which flags the kernel knows.
pub const SA_KNOWN: u64 = SA_NOCLDSTOP
    | SA_NOCLDWAIT
    | SA_SIGINFO
    | SA_ONSTACK
    | SA_RESTART
    | SA_NODEFER
    | SA_RESETHAND
    | SA_EXPOSE_TAGBITS
    | SA_RESTORER;

/// `rt_sigprocmask`: add to the mask.
pub const SIG_BLOCK: u64 = 0;
/// `rt_sigprocmask`: remove from the mask.
pub const SIG_UNBLOCK: u64 = 1;
/// `rt_sigprocmask`: replace the mask.
pub const SIG_SETMASK: u64 = 2;

/// `si_code`: sent by kill().
pub const SI_USER: i32 = 0;
/// `si_code`: sent by the kernel.
pub const SI_KERNEL: i32 = 0x80;
/// `si_code`: sent by sigqueue().
pub const SI_QUEUE: i32 = -1;
/// `si_code`: sent by tkill() or tgkill().
pub const SI_TKILL: i32 = -6;
/// SIGSEGV: address not mapped.
pub const SEGV_MAPERR: i32 = 1;
/// SIGSEGV: the mapping's permissions forbid the access.
pub const SEGV_ACCERR: i32 = 2;
/// SIGSEGV: memory tag check failed.
pub const SEGV_MTESERR: i32 = 9;
/// SIGBUS: invalid address alignment.
pub const BUS_ADRALN: i32 = 1;
/// SIGBUS: nonexistent physical address (an access past the end of a mapped object).
pub const BUS_ADRERR: i32 = 2;
/// SIGBUS: hardware error (synchronous external abort).
pub const BUS_OBJERR: i32 = 3;
/// SIGILL: illegal opcode.
pub const ILL_ILLOPC: i32 = 1;
/// SIGILL: illegal operand (pointer authentication failure).
pub const ILL_ILLOPN: i32 = 2;
/// SIGTRAP: breakpoint.
pub const TRAP_BRKPT: i32 = 1;
/// SIGTRAP: single step.
pub const TRAP_TRACE: i32 = 2;
/// SIGTRAP: hardware breakpoint or watchpoint.
pub const TRAP_HWBKPT: i32 = 4;
/// SIGFPE: floating-point divide by zero.
pub const FPE_FLTDIV: i32 = 3;
/// SIGFPE: floating-point overflow.
pub const FPE_FLTOVF: i32 = 4;
/// SIGFPE: floating-point underflow.
pub const FPE_FLTUND: i32 = 5;
/// SIGFPE: floating-point inexact result.
pub const FPE_FLTRES: i32 = 6;
/// SIGFPE: invalid floating-point operation.
pub const FPE_FLTINV: i32 = 7;
/// SIGFPE: unknown floating-point exception.
pub const FPE_FLTUNK: i32 = 14;

/// `sigaltstack`: the thread is running on the alternate stack.
pub const SS_ONSTACK: u32 = 1;
/// `sigaltstack`: the alternate stack is disabled.
pub const SS_DISABLE: u32 = 2;
/// `sigaltstack`: disarm the stack while a handler runs on it.
pub const SS_AUTODISARM: u32 = 1 << 31;
/// The smallest alternate stack `sigaltstack` accepts (arm64's `MINSIGSTKSZ`).
pub const MINSIGSTKSZ: u64 = 5120;

/// `si_code` of a POSIX timer's expiry.
pub const SI_TIMER: i32 = -2;
/// `si_code` of a message-queue notification.
pub const SI_MESGQ: i32 = -3;
/// `si_code` of an AIO completion.
pub const SI_ASYNCIO: i32 = -4;
/// `si_code` of a queued SIGIO.
pub const SI_SIGIO: i32 = -5;
/// SIGSEGV: failed protection-key check.
pub const SEGV_PKUERR: i32 = 4;
/// SIGSEGV: asynchronous MTE tag-check fault.
pub const SEGV_MTEAERR: i32 = 8;
/// SIGILL: illegal trap.
pub const ILL_ILLTRP: i32 = 4;
/// SIGILL: privileged opcode.
pub const ILL_PRVOPC: i32 = 5;
/// SIGILL: coprocessor error.
pub const ILL_COPROC: i32 = 7;
/// SIGILL: internal stack error.
pub const ILL_BADSTK: i32 = 8;
/// SIGILL: illegal branch target (BTI).
pub const ILL_BTCFI: i32 = 9;
/// SIGCHLD: the child exited.
pub const CLD_EXITED: i32 = 1;
/// SIGCHLD: the child was killed.
pub const CLD_KILLED: i32 = 2;
/// SIGCHLD: the child was killed and dumped core.
pub const CLD_DUMPED: i32 = 3;
/// SIGCHLD: a traced child trapped.
pub const CLD_TRAPPED: i32 = 4;
/// SIGCHLD: the child stopped.
pub const CLD_STOPPED: i32 = 5;
/// SIGCHLD: a stopped child continued.
pub const CLD_CONTINUED: i32 = 6;
/// SIGPOLL/SIGIO: input available.
pub const POLL_IN: i32 = 1;

/// `sigev_notify`: deliver a signal.
pub const SIGEV_SIGNAL: i32 = 0;
/// `sigev_notify`: nothing.
pub const SIGEV_NONE: i32 = 1;
/// `sigev_notify`: a thread (the C library's job; the kernel sees `SIGEV_THREAD_ID`).
pub const SIGEV_THREAD: i32 = 2;
/// `sigev_notify`: a signal to one thread.
pub const SIGEV_THREAD_ID: i32 = 4;
