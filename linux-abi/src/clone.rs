//! `clone` flags (`linux/sched.h`), and `clone3`'s argument size.

/// The exit signal to send the parent (low byte of the flags).
pub const CSIGNAL: u64 = 0x0000_00ff;
/// Share the address space.
pub const CLONE_VM: u64 = 0x0000_0100;
/// Share the file-system information (root, cwd, umask).
pub const CLONE_FS: u64 = 0x0000_0200;
/// Share the descriptor table.
pub const CLONE_FILES: u64 = 0x0000_0400;
/// Share the signal handlers.
pub const CLONE_SIGHAND: u64 = 0x0000_0800;
/// Return a pidfd in the parent (`parent_tid` receives it).
pub const CLONE_PIDFD: u64 = 0x0000_1000;
/// Let the tracer trace the child too.
pub const CLONE_PTRACE: u64 = 0x0000_2000;
/// The parent sleeps until the child execs or exits.
pub const CLONE_VFORK: u64 = 0x0000_4000;
/// The child's parent is the caller's parent.
pub const CLONE_PARENT: u64 = 0x0000_8000;
/// Same thread group (a thread).
pub const CLONE_THREAD: u64 = 0x0001_0000;
/// New mount namespace.
pub const CLONE_NEWNS: u64 = 0x0002_0000;
/// Share System V semaphore undo values.
pub const CLONE_SYSVSEM: u64 = 0x0004_0000;
/// Set the thread pointer (TPIDR_EL0) to `tls`.
pub const CLONE_SETTLS: u64 = 0x0008_0000;
/// Write the child's tid at `parent_tid` in the parent.
pub const CLONE_PARENT_SETTID: u64 = 0x0010_0000;
/// Zero the child's tid at `child_tid` and wake its futex when the child exits.
pub const CLONE_CHILD_CLEARTID: u64 = 0x0020_0000;
/// Ignored (was: detached thread).
pub const CLONE_DETACHED: u64 = 0x0040_0000;
/// The tracer may not force tracing on the child.
pub const CLONE_UNTRACED: u64 = 0x0080_0000;
/// Write the child's tid at `child_tid` in the child.
pub const CLONE_CHILD_SETTID: u64 = 0x0100_0000;
/// New cgroup namespace.
pub const CLONE_NEWCGROUP: u64 = 0x0200_0000;
/// New UTS namespace.
pub const CLONE_NEWUTS: u64 = 0x0400_0000;
/// New IPC namespace.
pub const CLONE_NEWIPC: u64 = 0x0800_0000;
/// New user namespace.
pub const CLONE_NEWUSER: u64 = 0x1000_0000;
/// New pid namespace.
pub const CLONE_NEWPID: u64 = 0x2000_0000;
/// New network namespace.
pub const CLONE_NEWNET: u64 = 0x4000_0000;
/// Share the I/O context.
pub const CLONE_IO: u64 = 0x8000_0000;
