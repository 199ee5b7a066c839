//! `/dev` and the character devices, after Linux's devtmpfs and `drivers/char/mem.c`: a RAM file
//! system whose nodes are made at boot (`null`, `zero`, `full`, `random`, `urandom`, `kmsg`,
//! `tty`, `console`, the `fd`, `stdin`, `stdout`, `stderr` links, and the `shm` and `pts`
//! directories), and the files those nodes open. A device is found by its number (`st_rdev`),
//! never by its name, as on Linux: `mknod` of `c 1 3` anywhere is another `/dev/null`.
//!
//! | device | number | read | write |
//! | --- | --- | --- | --- |
//! | null | 1:3 | end of file | swallowed |
//! | zero | 1:5 | zeros | swallowed |
//! | full | 1:7 | zeros | `ENOSPC` |
//! | random, urandom | 1:8, 1:9 | random bytes (`crate::random`) | swallowed |
//! | kmsg | 1:11 | one log record per read (`crate::klog`) | a record of the log |
//! | tty | 5:0 | the console (the only terminal) | the console |
//! | console | 5:1 | the console | the console |
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;
use core::sync::atomic::{AtomicU64, Ordering};

use linux_abi::Errno;
use linux_abi::layout::{Stat, encode_dev};
use linux_abi::poll;
use vfs::node::{Creator, Inode, NewNode};

use super::file::{File, FileError, Io, IoResult, OpenFile};
use super::node_file::{Named, stat_of};
use super::tty::Console;

/// Which device a character device number names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Device {
    Null,
    Zero,
    Full,
    Random,
    Kmsg,
    Console(Console),
}

fn device(rdev: u64) -> Option<Device> {
    Some(match rdev {
        r if r == encode_dev(1, 3) => Device::Null,
        r if r == encode_dev(1, 5) => Device::Zero,
        r if r == encode_dev(1, 7) => Device::Full,
        r if r == encode_dev(1, 8) || r == encode_dev(1, 9) => Device::Random,
        r if r == encode_dev(1, 11) => Device::Kmsg,
        r if r == encode_dev(5, 0) => Device::Console(Console::TTY),
        r if r == encode_dev(5, 1) => Device::Console(Console::CONSOLE),
        _ => return None,
    })
}

/// The log's record count when the tick last looked.
static KMSG_SEEN: AtomicU64 = AtomicU64::new(0);

/// The event key `/dev/kmsg` readers wait on.
fn kmsg_key() -> usize {
    core::ptr::from_ref(&KMSG_SEEN) as usize | 2
}

/// On every tick (`fs::tick`): wakes `/dev/kmsg` readers when records were added (the log
/// itself wakes no one: a message may be logged under the scheduler's locks).
pub fn tick() {
    let now = crate::klog::written();
    if KMSG_SEEN.swap(now, Ordering::Relaxed) != now {
        crate::sched::notify(kmsg_key());
    }
}

/// The nodes `/dev` starts with: name, major, minor, permissions.
const NODES: &[(&str, u32, u32, u32)] = &[
    ("console", 5, 1, 0o600),
    ("full", 1, 7, 0o666),
    ("kmsg", 1, 11, 0o644),
    ("null", 1, 3, 0o666),
    ("random", 1, 8, 0o666),
    ("tty", 5, 0, 0o666),
    ("urandom", 1, 9, 0o666),
    ("zero", 1, 5, 0o666),
];

/// The links `/dev` starts with (made by udev on a Linux system).
const LINKS: &[(&str, &str)] = &[
    ("fd", "/proc/self/fd"),
    ("stdin", "/proc/self/fd/0"),
    ("stdout", "/proc/self/fd/1"),
    ("stderr", "/proc/self/fd/2"),
];

/// Fills the root directory `dir` of a new `/dev` (module documentation).
///
/// # Errors
/// `ENOMEM`, `ENOSPC`.
pub fn populate(dir: &Arc<dyn Inode>, who: Creator) -> Result<(), Errno> {
    for &(name, major, minor, perm) in NODES {
        dir.create(name.as_bytes(), NewNode::CharDevice(encode_dev(major, minor)), perm, who)?;
    }
    for &(name, target) in LINKS {
        dir.create(name.as_bytes(), NewNode::Symlink(target.as_bytes()), 0o777, who)?;
    }
    dir.create(b"shm", NewNode::Directory, 0o1777, who)?;
    dir.create(b"pts", NewNode::Directory, 0o755, who)?;
    Ok(())
}

/// Opens the character device node `named` (`ENXIO`: no such device here).
///
/// # Errors
/// `ENXIO`, `ENOMEM`.
pub fn open(named: Named) -> Result<Arc<dyn File>, Errno> {
    let device = device(named.node.metadata().rdev).ok_or(Errno::ENXIO)?;
    let start = if device == Device::Kmsg { crate::klog::bounds().0 } else { 0 };
    let file = DeviceFile { device, named: Some(named), kmsg_seq: AtomicU64::new(start) };
    Ok(crate::memory::fallible::arc(file).map_err(|_| Errno::ENOMEM)?)
}

/// The console as a file not opened through a node (the first program's descriptors when the
/// tree has no `/dev/console`).
///
/// # Errors
/// `ENOMEM`.
pub fn console() -> Result<Arc<dyn File>, Errno> {
    let file =
        DeviceFile { device: Device::Console(Console::CONSOLE), named: None, kmsg_seq: AtomicU64::new(0) };
    Ok(crate::memory::fallible::arc(file).map_err(|_| Errno::ENOMEM)?)
}

/// An open device.
pub struct DeviceFile {
    device: Device,
    /// The node it was opened by.
    named: Option<Named>,
    /// `/dev/kmsg`: the next record this description reads.
    kmsg_seq: AtomicU64,
}

impl DeviceFile {
    /// Whether this is the console (`/dev/console` or `/dev/tty`): the system-call layer adds
    /// the job-control requests, which need the process.
    pub fn is_console(&self) -> bool {
        matches!(self.device, Device::Console(_))
    }

    /// Whether this is `/dev/tty`, the opener's controlling terminal (which the system-call
    /// layer checks it has: `ENXIO` otherwise).
    pub fn is_tty(&self) -> bool {
        self.device == Device::Console(Console::TTY)
    }

    fn read_kmsg(&self, io: &Io<'_>) -> IoResult {
        let seq = self.kmsg_seq.load(Ordering::Relaxed);
        let (first, _) = crate::klog::bounds();
        if seq < first {
            // Records were overwritten since the last read: Linux says so once with EPIPE.
            self.kmsg_seq.store(first, Ordering::Relaxed);
            return Err(Errno::EPIPE.into());
        }
        let Some(r) = crate::klog::read(seq) else {
            // Nothing new: `O_NONBLOCK` says EAGAIN; a blocking reader is woken by the tick
            // after the next record ([`kmsg_tick`]).
            return Err(FileError::WouldBlock(kmsg_key()));
        };
        let mut line = [0u8; 1100];
        let n = crate::klog::kmsg_line(&r, &mut line);
        if io.len() < n as u64 {
            return Err(Errno::EINVAL.into());
        }
        self.kmsg_seq.store(r.seq + 1, Ordering::Relaxed);
        io.scatter(&line[..n])
    }
}

/// A program's line into the log, as Linux's `devkmsg_write` reads it: an optional `<N>`
/// prefix gives the level (`N & 7`) and, when not 0, the facility (`N >> 3`); the facility is
/// otherwise `LOG_USER` (1) and the level the default message level (4); one trailing newline
/// goes. The record keeps the syslog priority (facility × 8 + level), which `syslog(2)` and
/// `/dev/kmsg` print as Linux does (`<13>` for a user's level-5 line).
fn kmsg_priority(text: &[u8]) -> (u8, &[u8]) {
    const LOG_USER: u32 = 1;
    const DEFAULT_LEVEL: u32 = 4;
    let (mut facility, mut level, mut line) = (LOG_USER, DEFAULT_LEVEL, text);
    if let Some(rest) = text.strip_prefix(b"<")
        && let Some(close) = rest.iter().position(|&b| b == b'>')
        && close > 0
        && rest[..close].iter().all(u8::is_ascii_digit)
        && let Some(n) = core::str::from_utf8(&rest[..close]).ok().and_then(|d| d.parse::<u32>().ok())
    {
        level = n & 7;
        if n >> 3 != 0 {
            facility = (n >> 3) & 0x1f;
        }
        line = &rest[close + 1..];
    }
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    ((facility * 8 + level) as u8, line)
}

/// Fills the user buffers with bytes from `fill` (zeros or random), a chunk at a time.
fn fill_buffers(io: &Io<'_>, fill: &dyn Fn(&mut [u8])) -> IoResult {
    let mut chunk = [0u8; 256];
    let mut done = 0u64;
    for &(base, len) in io.buffers {
        let mut at = 0u64;
        while at < len {
            let n = (len - at).min(chunk.len() as u64) as usize;
            fill(&mut chunk[..n]);
            if io.put(base.wrapping_add(at), &chunk[..n]).is_err() {
                return if done == 0 { Err(Errno::EFAULT.into()) } else { Ok(done) };
            }
            at += n as u64;
            done += n as u64;
        }
    }
    Ok(done)
}

impl File for DeviceFile {
    fn read(&self, io: Io<'_>) -> IoResult {
        match self.device {
            Device::Null => Ok(0),
            Device::Zero | Device::Full => fill_buffers(&io, &|b| b.fill(0)),
            Device::Random => fill_buffers(&io, &crate::random::fill),
            Device::Kmsg => self.read_kmsg(&io),
            Device::Console(c) => c.read(io),
        }
    }

    fn write(&self, io: Io<'_>, progress: &mut u64, sigpipe: &dyn Fn()) -> IoResult {
        match self.device {
            Device::Null | Device::Zero | Device::Random => Ok(io.len()),
            Device::Full => Err(Errno::ENOSPC.into()),
            Device::Kmsg => {
                let mut text = [0u8; 1024];
                let n = io.len().min(1024) as usize;
                let mut at = 0;
                io.gather(&mut text[..n], 0, &mut |b| {
                    at += b.len();
                    Ok(b.len())
                })?;
                let (prio, line) = kmsg_priority(&text[..at]);
                crate::klog::record(prio, line);
                Ok(io.len())
            }
            Device::Console(c) => c.write(io, progress, sigpipe),
        }
    }

    fn poll(&self) -> (u16, usize) {
        match self.device {
            Device::Console(c) => c.poll(),
            Device::Kmsg => {
                let (_, next) = crate::klog::bounds();
                let ready = if self.kmsg_seq.load(Ordering::Relaxed) < next {
                    poll::POLLIN | poll::POLLRDNORM
                } else {
                    0
                };
                (ready, kmsg_key())
            }
            _ => (poll::POLLIN | poll::POLLRDNORM | poll::POLLOUT | poll::POLLWRNORM, 0),
        }
    }

    fn stat(&self) -> Result<Stat, Errno> {
        match (&self.named, self.device) {
            (Some(n), _) => Ok(stat_of(&n.node)),
            (None, Device::Console(c)) => c.stat(),
            (None, _) => Err(Errno::EBADF),
        }
    }

    fn seek(&self, pos: &mut u64, offset: u64, whence: u64) -> Result<u64, Errno> {
        match self.device {
            // Linux's `null_lseek`: every seek succeeds and lands at 0.
            Device::Null | Device::Zero | Device::Full | Device::Random => {
                let _ = (offset, whence);
                *pos = 0;
                Ok(0)
            }
            Device::Kmsg => {
                use linux_abi::fcntl::{SEEK_DATA, SEEK_END, SEEK_SET};
                if offset != 0 {
                    return Err(Errno::ESPIPE);
                }
                let (first, next) = crate::klog::bounds();
                match whence {
                    SEEK_SET => self.kmsg_seq.store(first, Ordering::Relaxed),
                    SEEK_END | SEEK_DATA => self.kmsg_seq.store(next, Ordering::Relaxed),
                    _ => return Err(Errno::EINVAL),
                }
                Ok(0)
            }
            Device::Console(_) => Err(Errno::ESPIPE),
        }
    }

    fn ioctl(&self, open: &OpenFile, request: u64, arg: u64) -> Result<u64, Errno> {
        match self.device {
            Device::Console(c) => c.ioctl(open, request, arg),
            _ => Err(Errno::ENOTTY),
        }
    }

    fn seekable(&self) -> bool {
        !self.is_console()
    }

    fn inode(&self) -> Option<&Arc<dyn Inode>> {
        self.named.as_ref().map(|n| &n.node)
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        match (&self.named, self.device) {
            (Some(n), _) => n.describe(),
            (None, Device::Console(c)) => c.describe(),
            (None, _) => super::copy_bytes(b"/dev/null"),
        }
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
