//! System calls, with Linux arm64 numbers and negative-errno returns.
//!
//! Arguments arrive in x0..x5 and the number in x8; the result goes back in x0. Every user pointer
//! goes through `copy_from_user`/`copy_to_user` (EFAULT, never a kernel fault), and no argument
//! value can make the kernel panic: anything not understood is EINVAL or ENOSYS, as Linux answers.
use crate::arch::aarch64::exception::TrapFrame;
use crate::arch::aarch64::user::{copy_from_user, copy_to_user};

use super::Process;

/// Linux errno values (`include/uapi/asm-generic/errno-base.h`, `errno.h`).
pub mod errno {
    /// Operation not permitted.
    pub const EPERM: i64 = 1;
    /// Bad file descriptor.
    pub const EBADF: i64 = 9;
    /// Out of memory.
    pub const ENOMEM: i64 = 12;
    /// Permission denied.
    pub const EACCES: i64 = 13;
    /// Bad address.
    pub const EFAULT: i64 = 14;
    /// Device or resource busy.
    pub const EBUSY: i64 = 16;
    /// File exists.
    pub const EEXIST: i64 = 17;
    /// Invalid argument.
    pub const EINVAL: i64 = 22;
    /// Function not implemented.
    pub const ENOSYS: i64 = 38;
}
use errno::*;

/// Linux arm64 system call numbers (`include/uapi/asm-generic/unistd.h`).
pub mod nr {
    /// write(fd, buf, count)
    pub const WRITE: u64 = 64;
    /// exit(status)
    pub const EXIT: u64 = 93;
    /// exit_group(status)
    pub const EXIT_GROUP: u64 = 94;
    /// set_tid_address(tidptr)
    pub const SET_TID_ADDRESS: u64 = 96;
    /// clock_gettime(clockid, tp)
    pub const CLOCK_GETTIME: u64 = 113;
    /// uname(buf)
    pub const UNAME: u64 = 160;
    /// getpid()
    pub const GETPID: u64 = 172;
    /// gettid()
    pub const GETTID: u64 = 178;
    /// brk(addr)
    pub const BRK: u64 = 214;
    /// munmap(addr, len)
    pub const MUNMAP: u64 = 215;
    /// mmap(addr, len, prot, flags, fd, off)
    pub const MMAP: u64 = 222;
    /// mprotect(addr, len, prot)
    pub const MPROTECT: u64 = 226;
    /// madvise(addr, len, advice)
    pub const MADVISE: u64 = 233;
    /// getrandom(buf, len, flags)
    pub const GETRANDOM: u64 = 278;
}

/// Handles the system call in `frame`; `Some(status)` when the process exits.
pub fn dispatch(p: &mut Process, frame: &mut TrapFrame) -> Option<u64> {
    let a = [frame.x[0], frame.x[1], frame.x[2], frame.x[3], frame.x[4], frame.x[5]];
    let result: i64 = match frame.x[8] {
        nr::WRITE => write(a[0], a[1], a[2]),
        nr::EXIT | nr::EXIT_GROUP => return Some(a[0] & 0xff),
        nr::SET_TID_ADDRESS | nr::GETPID | nr::GETTID => i64::from(p.pid),
        nr::CLOCK_GETTIME => clock_gettime(a[0], a[1]),
        nr::UNAME => uname(a[0]),
        nr::GETRANDOM => getrandom(a[0], a[1], a[2]),
        _ => -ENOSYS,
    };
    frame.x[0] = result as u64;
    None
}

fn write(fd: u64, buf: u64, count: u64) -> i64 {
    if fd != 1 && fd != 2 {
        return -EBADF;
    }
    let mut chunk = [0u8; 256];
    let mut done = 0u64;
    while done < count {
        let n = (count - done).min(chunk.len() as u64) as usize;
        if copy_from_user(&mut chunk[..n], buf.wrapping_add(done)).is_err() {
            // Linux returns what was written before the fault, EFAULT if nothing was.
            return if done == 0 { -EFAULT } else { done as i64 };
        }
        crate::kprint!("{}", Utf8Lossy(&chunk[..n]));
        done += n as u64;
    }
    done as i64
}

/// Prints bytes as text, replacing invalid UTF-8 (a console, not a byte pipe).
struct Utf8Lossy<'a>(&'a [u8]);

impl core::fmt::Display for Utf8Lossy<'_> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        for chunk in self.0.utf8_chunks() {
            f.write_str(chunk.valid())?;
            if !chunk.invalid().is_empty() {
                f.write_str("\u{fffd}")?;
            }
        }
        Ok(())
    }
}

fn clock_gettime(clock: u64, tp: u64) -> i64 {
    // REALTIME, MONOTONIC, MONOTONIC_RAW, REALTIME_COARSE, MONOTONIC_COARSE, BOOTTIME. There is no
    // wall clock yet: REALTIME counts from boot like MONOTONIC (documented in the README).
    if !matches!(clock, 0 | 1 | 4 | 5 | 6 | 7) {
        return -EINVAL;
    }
    let ticks = crate::arch::time::counter();
    let freq = crate::arch::time::frequency().max(1);
    let secs = ticks / freq;
    let nanos = ((ticks % freq) as u128 * 1_000_000_000 / freq as u128) as u64;
    let mut out = [0u8; 16];
    out[..8].copy_from_slice(&secs.to_le_bytes());
    out[8..].copy_from_slice(&nanos.to_le_bytes());
    if copy_to_user(tp, &out).is_err() { -EFAULT } else { 0 }
}

fn uname(buf: u64) -> i64 {
    // struct utsname: six fields of 65 bytes. sysname and release look like Linux because C
    // libraries parse them (glibc refuses to start on a "kernel too old"); version says what
    // this kernel is.
    let fields: [&str; 6] = [
        "Linux",
        "mmkernel",
        "6.1.0-mmkernel",
        concat!("#1 mmkernel ", env!("CARGO_PKG_VERSION")),
        "aarch64",
        "(none)",
    ];
    let mut out = [0u8; 65 * 6];
    for (i, field) in fields.iter().enumerate() {
        out[i * 65..i * 65 + field.len()].copy_from_slice(field.as_bytes());
    }
    if copy_to_user(buf, &out).is_err() { -EFAULT } else { 0 }
}

fn getrandom(buf: u64, len: u64, flags: u64) -> i64 {
    const GRND_NONBLOCK: u64 = 1;
    const GRND_RANDOM: u64 = 2;
    const GRND_INSECURE: u64 = 4;
    if flags & !(GRND_NONBLOCK | GRND_RANDOM | GRND_INSECURE) != 0
        || flags & (GRND_RANDOM | GRND_INSECURE) == (GRND_RANDOM | GRND_INSECURE)
    {
        return -EINVAL;
    }
    let len = len.min(33_554_431); // Linux caps one call at 32 MiB - 1
    let mut chunk = [0u8; 256];
    let mut done = 0u64;
    while done < len {
        let n = (len - done).min(chunk.len() as u64) as usize;
        crate::random::fill(&mut chunk[..n]);
        if copy_to_user(buf.wrapping_add(done), &chunk[..n]).is_err() {
            return if done == 0 { -EFAULT } else { done as i64 };
        }
        done += n as u64;
    }
    done as i64
}
