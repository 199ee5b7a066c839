//! Files without a node: what Linux makes with `anon_inode_getfd` (epoll, eventfd, timerfd,
//! signalfd, pidfd). They share one inode of the internal `anon_inodefs`, so `fstat` says the
//! same of each (mode 0600 with no file type, owned by root), `/proc/PID/fd/N` names them
//! `anon_inode:[KIND]`, and they have no position (`ESPIPE`).
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::fcntl::{O_CLOEXEC, O_RDWR};
use linux_abi::layout::Stat;
use linux_abi::time::Timespec;
use spin::Mutex;

use super::file::{FdEntry, FdTable, File, OpenFile, push_fmt};
use crate::memory::fallible;

/// `st_dev` of `anon_inodefs` (an unnamed device, as `stat` shows it on Linux 6.1 under QEMU).
const ANON_DEV: u64 = 0xe;
/// `st_ino` of the one anonymous inode.
const ANON_INO: u64 = 1;

/// The `struct stat` of every anonymous file.
pub fn stat() -> Stat {
    let boot = Timespec::from_ns(crate::wallclock::realtime_offset_ns());
    Stat {
        dev: ANON_DEV,
        ino: ANON_INO,
        mode: 0o600,
        nlink: 1,
        blksize: 4096,
        times: [boot; 3],
        ..Stat::default()
    }
}

/// `anon_inode:[kind]`, what `readlink` of its `/proc/PID/fd` link says.
///
/// # Errors
/// `ENOMEM`.
pub fn describe(kind: &str) -> Result<Vec<u8>, Errno> {
    let mut out = Vec::new();
    push_fmt(&mut out, format_args!("anon_inode:[{kind}]"))?;
    Ok(out)
}

/// Opens `file` read-write with the status flags `status` (`O_NONBLOCK`) at the lowest free
/// descriptor of `files`, close-on-exec if `flags` has `O_CLOEXEC`; returns the descriptor.
///
/// # Errors
/// `ENOMEM`, `EMFILE`.
pub fn install(files: &Mutex<FdTable>, file: Arc<dyn File>, status: u32, flags: u64) -> Result<u64, Errno> {
    let open = fallible::arc(OpenFile::new(file, O_RDWR | status)).map_err(|_| Errno::ENOMEM)?;
    let cloexec = flags & u64::from(O_CLOEXEC) != 0;
    let entry = FdEntry { file: open, cloexec };
    // A failure drops the entry after the table's lock (its last close may take other locks).
    let installed = files.lock().install_lowest(0, entry.clone());
    drop(entry);
    installed.map(|fd| fd as u64)
}
