//! Scheduling policies (`linux/sched.h`) and `getrandom` flags (`linux/random.h`), `membarrier`
//! commands (`linux/membarrier.h`) and `rseq` flags (`linux/rseq.h`).

/// The default time-sharing policy.
pub const SCHED_OTHER: u64 = 0;
/// First-in first-out real-time policy.
pub const SCHED_FIFO: u64 = 1;
/// Round-robin real-time policy.
pub const SCHED_RR: u64 = 2;
/// Batch policy.
pub const SCHED_BATCH: u64 = 3;
/// Very low priority policy.
pub const SCHED_IDLE: u64 = 5;
/// Deadline policy.
pub const SCHED_DEADLINE: u64 = 6;
/// Flag: children start with the default policy.
pub const SCHED_RESET_ON_FORK: u64 = 0x4000_0000;

/// `getrandom`: do not block.
pub const GRND_NONBLOCK: u64 = 0x1;
/// `getrandom`: from the blocking pool (the same pool since Linux 5.6).
pub const GRND_RANDOM: u64 = 0x2;
/// `getrandom`: may return bytes before the pool is initialised.
pub const GRND_INSECURE: u64 = 0x4;

/// `membarrier`: which commands the kernel supports.
pub const MEMBARRIER_CMD_QUERY: u64 = 0;
/// `membarrier`: a barrier on every CPU running any thread.
pub const MEMBARRIER_CMD_GLOBAL: u64 = 1 << 0;
/// `membarrier`: a barrier on every CPU running a registered process's thread.
pub const MEMBARRIER_CMD_GLOBAL_EXPEDITED: u64 = 1 << 1;
/// `membarrier`: register for `MEMBARRIER_CMD_GLOBAL_EXPEDITED`.
pub const MEMBARRIER_CMD_REGISTER_GLOBAL_EXPEDITED: u64 = 1 << 2;
/// `membarrier`: a barrier on every CPU running a thread of this process.
pub const MEMBARRIER_CMD_PRIVATE_EXPEDITED: u64 = 1 << 3;
/// `membarrier`: register for `MEMBARRIER_CMD_PRIVATE_EXPEDITED`.
pub const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED: u64 = 1 << 4;
/// `membarrier`: the private barrier plus a context synchronisation (JITs, after new code).
pub const MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE: u64 = 1 << 5;
/// `membarrier`: register for `MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE`.
pub const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE: u64 = 1 << 6;
/// `membarrier`: restart the rseq critical sections of this process's threads.
pub const MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ: u64 = 1 << 7;
/// `membarrier`: register for `MEMBARRIER_CMD_PRIVATE_EXPEDITED_RSEQ`.
pub const MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_RSEQ: u64 = 1 << 8;

/// `rseq`: unregister.
pub const RSEQ_FLAG_UNREGISTER: u64 = 1;
/// `rseq`: the signature every abort handler must carry on arm64 (`RSEQ_SIG`, `udf #0xbc28`'s
/// encoding as glibc defines it).
pub const RSEQ_SIG: u32 = 0xd428_bc00;
