//! Files: what a descriptor refers to, the objects behind it, and the file-system tree.
//! - [`cred`]: credentials (user and group ids, capabilities) and the permission checks made
//!   with them;
//! - [`file`](mod@file): the [`File`](file::File) interface, open file descriptions,
//!   descriptors and a process's descriptor table;
//! - [`namespace`]: the tree every process sees: the root file system (unpacked from the
//!   initramfs), the mounts on it, path lookup from a process's root and working directory,
//!   and opening what a path names;
//! - [`node_file`]: a file of a file system opened (a regular file, a directory, an `O_PATH`
//!   handle), and the page cache behind RAM files ([`pagecache`]);
//! - [`locks`]: advisory record and `flock` locks;
//! - [`dev`]: `/dev` and the character devices (null, zero, full, random, the console, kmsg);
//! - [`tty`]: the console as the programs' terminal (the line discipline between the UART and
//!   `read`);
//! - [`pipe`](mod@pipe): pipes and FIFOs;
//! - [`socket`]: `AF_UNIX` sockets;
//! - [`splice`]: bytes moved between two open files in the kernel (`sendfile`, `splice`,
//!   `tee`, `copy_file_range`);
//! - [`memfd`]: memfds, shared memory objects with a descriptor;
//! - [`epoll`]: epoll instances and the readiness of every file they watch;
//! - [`eventfd`] and [`timerfd`]: a counter and a timer behind a descriptor, and [`anon`], what
//!   such files without a node share (their `fstat`, their `/proc/PID/fd` name);
//! - [`text`]: files whose text is generated when first read (`/proc`, `/sys`).
//!
//! Below `process`: nothing here knows a process. A call that needs one (to install a
//! descriptor, to send `SIGPIPE`) is given what it needs by the system-call layer; the file
//! systems made of processes (`/proc`) live above, in `procfs`, and are mounted from there.
use alloc::vec::Vec;

use linux_abi::Errno;

pub mod anon;
pub mod cred;
pub mod dev;
pub mod epoll;
pub mod eventfd;
pub mod file;
pub mod locks;
pub mod memfd;
pub mod namespace;
pub mod node_file;
pub mod pagecache;
pub mod pipe;
pub mod socket;
pub mod splice;
pub mod text;
pub mod timerfd;
pub mod tty;

/// What the file layer does on every tick of every CPU (the one tick handler `irq` keeps,
/// registered with the console's input): console input polling, the wake-ups of `/dev/kmsg`
/// readers, and the notices of abandoned FIFO opens. Each wakes sleepers only from here, where
/// no lock is held, since the code that sees the change may hold the scheduler's.
pub fn tick() {
    tty::poll_input();
    dev::tick();
    pipe::tick();
}

/// Thread `tid` of process `pid` left a call it was blocked in without finishing it (a signal
/// interrupted it, or it exits): what the file layer kept for the call's restart goes (a FIFO
/// open's end, a lock wait). May run under the scheduler's lock: it takes only the file
/// layer's own and sends no event.
pub fn call_abandoned(pid: u32, tid: u32) {
    pipe::open_abandoned(tid);
    locks::wait_abandoned(pid, tid);
}

/// `bytes` in a new vector (`ENOMEM` when the heap cannot hold it).
///
/// # Errors
/// `ENOMEM`.
pub fn copy_bytes(bytes: &[u8]) -> Result<Vec<u8>, Errno> {
    let mut v = Vec::new();
    v.try_reserve_exact(bytes.len()).map_err(|_| Errno::ENOMEM)?;
    v.extend_from_slice(bytes);
    Ok(v)
}
