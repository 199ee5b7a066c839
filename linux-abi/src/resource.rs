//! Resource limits (asm-generic `resource.h`): the `RLIMIT_*` resources of `prlimit64`, and
//! `getrusage`'s targets.

/// CPU time in seconds (SIGXCPU at the soft limit, SIGKILL at the hard one).
pub const RLIMIT_CPU: u32 = 0;
/// Largest file that may be created.
pub const RLIMIT_FSIZE: u32 = 1;
/// Data segment (private writable memory and the heap).
pub const RLIMIT_DATA: u32 = 2;
/// Stack.
pub const RLIMIT_STACK: u32 = 3;
/// Core file size.
pub const RLIMIT_CORE: u32 = 4;
/// Resident set (no effect on Linux).
pub const RLIMIT_RSS: u32 = 5;
/// Processes of the real user.
pub const RLIMIT_NPROC: u32 = 6;
/// One more than the highest descriptor number.
pub const RLIMIT_NOFILE: u32 = 7;
/// Locked memory.
pub const RLIMIT_MEMLOCK: u32 = 8;
/// Address space.
pub const RLIMIT_AS: u32 = 9;
/// File locks (no effect on Linux).
pub const RLIMIT_LOCKS: u32 = 10;
/// Queued signals.
pub const RLIMIT_SIGPENDING: u32 = 11;
/// POSIX message queue bytes.
pub const RLIMIT_MSGQUEUE: u32 = 12;
/// Nice ceiling.
pub const RLIMIT_NICE: u32 = 13;
/// Real-time priority ceiling.
pub const RLIMIT_RTPRIO: u32 = 14;
/// Real-time CPU time in microseconds.
pub const RLIMIT_RTTIME: u32 = 15;
/// The number of resources.
pub const RLIM_NLIMITS: u32 = 16;
/// No limit.
pub const RLIM_INFINITY: u64 = u64::MAX;

/// `getrusage`: the calling process.
pub const RUSAGE_SELF: i32 = 0;
/// `getrusage`: its waited-for children.
pub const RUSAGE_CHILDREN: i32 = -1;
/// `getrusage`: the calling thread.
pub const RUSAGE_THREAD: i32 = 1;
