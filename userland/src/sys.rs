//! Raw Linux arm64 system calls (`svc #0`, number in x8, arguments in x0..x5, result in x0 with
//! `-errno` for failure) and the few wrappers the demo needs. Nothing here is specific to this
//! kernel except the three extension calls, whose numbers and layouts come from `crate::abi` (a checked copy of `mm::vm::abi`);
//! Linux answers them with `-ENOSYS`.

use core::arch::asm;

pub use crate::abi::{
    CodeWindowInfo, MAP_CODE, MmStats, SYS_CODE_WINDOW, SYS_MM_STATS, SYS_MMAP_NEAR, WINDOW_GET,
};

/// Linux arm64 (asm-generic) system call numbers.
pub mod nr {
    pub const WRITE: u64 = 64;
    pub const EXIT_GROUP: u64 = 94;
    pub const CLOCK_GETTIME: u64 = 113;
    pub const MUNMAP: u64 = 215;
    pub const MMAP: u64 = 222;
    pub const MPROTECT: u64 = 226;
    pub const MADVISE: u64 = 233;
    pub const GETRANDOM: u64 = 278;
}

pub const PROT_NONE: u64 = 0;
pub const PROT_READ: u64 = 1;
pub const PROT_WRITE: u64 = 2;
pub const PROT_EXEC: u64 = 4;
pub const MAP_PRIVATE: u64 = 0x02;
pub const MAP_FIXED: u64 = 0x10;
pub const MAP_ANONYMOUS: u64 = 0x20;
pub const MAP_NORESERVE: u64 = 0x4000;
pub const MAP_FIXED_NOREPLACE: u64 = 0x10_0000;
pub const MADV_DONTNEED: u64 = 4;
pub const CLOCK_MONOTONIC: u64 = 1;

pub const EPERM: i64 = 1;
pub const ENOMEM: i64 = 12;
pub const EACCES: i64 = 13;
pub const EEXIST: i64 = 17;
pub const EINVAL: i64 = 22;
pub const ENOSYS: i64 = 38;

/// A system call's error: the positive errno.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Errno(pub i64);

impl Errno {
    /// The symbolic name, for reports.
    pub fn name(self) -> &'static str {
        match self.0 {
            EPERM => "EPERM",
            ENOMEM => "ENOMEM",
            EACCES => "EACCES",
            EEXIST => "EEXIST",
            EINVAL => "EINVAL",
            ENOSYS => "ENOSYS",
            16 => "EBUSY",
            14 => "EFAULT",
            _ => "errno",
        }
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

/// Counts every system call this program makes (single-threaded, so a plain static is enough).
static mut SYSCALLS: u64 = 0;

/// System calls made so far.
pub fn count() -> u64 {
    // SAFETY: the program is single-threaded; nothing else accesses the counter concurrently.
    unsafe { core::ptr::addr_of!(SYSCALLS).read() }
}

fn bump_count() {
    // SAFETY: as in `count`: single-threaded access only.
    unsafe { core::ptr::addr_of_mut!(SYSCALLS).write(core::ptr::addr_of!(SYSCALLS).read() + 1) }
}

fn result(ret: i64) -> Result<u64, Errno> {
    if (-4095..0).contains(&ret) { Err(Errno(-ret)) } else { Ok(ret as u64) }
}

/// Issues system call `n` with six arguments.
///
/// # Safety
/// The arguments must be valid for system call `n` (pointers to memory the call may read or
/// write, mappings the call may change without breaking anything this program relies on).
pub unsafe fn syscall6(n: u64, a: [u64; 6]) -> Result<u64, Errno> {
    bump_count();
    let ret: i64;
    // SAFETY: the caller guarantees the arguments suit the call. `svc #0` clobbers only x0 (the
    // result) on Linux arm64; the kernel preserves every other register.
    unsafe {
        asm!("svc #0", inlateout("x0") a[0] => ret, in("x1") a[1], in("x2") a[2], in("x3") a[3],
             in("x4") a[4], in("x5") a[5], in("x8") n, options(nostack));
    }
    result(ret)
}

/// `write(fd, buf, len)`; short writes are retried.
pub fn write_all(fd: u64, mut bytes: &[u8]) {
    while !bytes.is_empty() {
        // SAFETY: `write` only reads `len` bytes of a buffer we borrow.
        match unsafe { syscall6(nr::WRITE, [fd, bytes.as_ptr() as u64, bytes.len() as u64, 0, 0, 0]) } {
            Ok(0) | Err(_) => return,
            Ok(n) => bytes = &bytes[n as usize..],
        }
    }
}

/// `exit_group(code)`.
pub fn exit(code: u64) -> ! {
    // SAFETY: `exit_group` ends the process and does not return.
    unsafe { asm!("svc #0", in("x0") code, in("x8") nr::EXIT_GROUP, options(noreturn, nostack)) }
}

/// Anonymous private `mmap`. A hint (`addr` without `MAP_FIXED*`) may be ignored by the kernel.
pub fn mmap_anon(addr: u64, len: u64, prot: u64, flags: u64) -> Result<u64, Errno> {
    debug_assert!(flags & MAP_FIXED == 0, "MAP_FIXED could replace a mapping this program uses");
    // SAFETY: an anonymous mapping without MAP_FIXED never replaces an existing mapping (with
    // MAP_FIXED_NOREPLACE it fails with EEXIST instead), so no memory we use changes.
    unsafe { syscall6(nr::MMAP, [addr, len, prot, flags | MAP_PRIVATE | MAP_ANONYMOUS, u64::MAX, 0]) }
}

/// `munmap` of a range this program mapped itself and no longer references.
///
/// # Safety
/// Nothing may access `[addr, addr + len)` afterwards.
pub unsafe fn munmap(addr: u64, len: u64) -> Result<u64, Errno> {
    // SAFETY: the caller guarantees the range is no longer used.
    unsafe { syscall6(nr::MUNMAP, [addr, len, 0, 0, 0, 0]) }
}

/// `mprotect` of a range this program mapped itself.
///
/// # Safety
/// No live reference may rely on an access the new protection forbids.
pub unsafe fn mprotect(addr: u64, len: u64, prot: u64) -> Result<u64, Errno> {
    // SAFETY: the caller guarantees no access relies on the old protection.
    unsafe { syscall6(nr::MPROTECT, [addr, len, prot, 0, 0, 0]) }
}

/// `madvise` (here only `MADV_DONTNEED`, which makes private anonymous pages read zero).
///
/// # Safety
/// No live reference may rely on the contents of the range.
pub unsafe fn madvise(addr: u64, len: u64, advice: u64) -> Result<u64, Errno> {
    // SAFETY: the caller guarantees the contents may be discarded.
    unsafe { syscall6(nr::MADVISE, [addr, len, advice, 0, 0, 0]) }
}

/// `clock_gettime(CLOCK_MONOTONIC)` in nanoseconds.
pub fn monotonic_ns() -> Result<u64, Errno> {
    let mut ts = [0u64; 2];
    // SAFETY: the kernel writes one `struct timespec` (two 64-bit fields) to `ts`.
    unsafe { syscall6(nr::CLOCK_GETTIME, [CLOCK_MONOTONIC, ts.as_mut_ptr() as u64, 0, 0, 0, 0])? };
    Ok(ts[0] * 1_000_000_000 + ts[1])
}

/// `getrandom(buf, len, 0)`.
pub fn getrandom(buf: &mut [u8]) -> Result<u64, Errno> {
    // SAFETY: the kernel writes at most `buf.len()` bytes to `buf`.
    unsafe { syscall6(nr::GETRANDOM, [buf.as_mut_ptr() as u64, buf.len() as u64, 0, 0, 0, 0]) }
}

/// `SYS_MMAP_NEAR` (this kernel): anonymous private memory within `radius` of `target`.
pub fn mmap_near(target: u64, len: u64, radius: u64, prot: u64, flags: u64) -> Result<u64, Errno> {
    // SAFETY: the extension never replaces a mapping; Linux answers ENOSYS without doing anything.
    unsafe { syscall6(SYS_MMAP_NEAR, [target, len, radius, prot, flags | MAP_PRIVATE | MAP_ANONYMOUS, 0]) }
}

/// `SYS_CODE_WINDOW`/`WINDOW_GET` (this kernel).
pub fn code_window() -> Result<CodeWindowInfo, Errno> {
    let mut info = CodeWindowInfo::default();
    // SAFETY: the kernel writes one `CodeWindowInfo` to `info`; Linux answers ENOSYS.
    unsafe { syscall6(SYS_CODE_WINDOW, [WINDOW_GET, 0, &mut info as *mut _ as u64, 0, 0, 0])? };
    Ok(info)
}

/// `SYS_MM_STATS` (this kernel).
pub fn mm_stats() -> Result<MmStats, Errno> {
    let mut stats = MmStats::default();
    let size = core::mem::size_of::<MmStats>() as u64;
    // SAFETY: the kernel writes at most `size` bytes to `stats`; Linux answers ENOSYS.
    unsafe { syscall6(SYS_MM_STATS, [&mut stats as *mut _ as u64, size, 0, 0, 0, 0])? };
    Ok(stats)
}
