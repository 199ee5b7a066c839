//! Process lifetime: `wait4`/`waitid` options and id types (`linux/wait.h`).

/// Return at once if no child has changed state.
pub const WNOHANG: u64 = 0x0000_0001;
/// Report stopped children (`wait4`).
pub const WUNTRACED: u64 = 0x0000_0002;
/// Report stopped children (`waitid`).
pub const WSTOPPED: u64 = WUNTRACED;
/// Report exited children (`waitid`).
pub const WEXITED: u64 = 0x0000_0004;
/// Report continued children.
pub const WCONTINUED: u64 = 0x0000_0008;
/// Leave the child waitable (`waitid`).
pub const WNOWAIT: u64 = 0x0100_0000;
/// Do not wait for children of other threads.
pub const __WNOTHREAD: u64 = 0x2000_0000;
/// Wait for every child, clone or not.
pub const __WALL: u64 = 0x4000_0000;
/// Wait for clone children only.
pub const __WCLONE: u64 = 0x8000_0000;
/// `waitid`: any child.
pub const P_ALL: u64 = 0;
/// `waitid`: the child with this pid.
pub const P_PID: u64 = 1;
/// `waitid`: the children in this process group.
pub const P_PGID: u64 = 2;
/// `waitid`: the child this pidfd names.
pub const P_PIDFD: u64 = 3;
