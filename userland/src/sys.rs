//! Raw Linux arm64 system calls (`svc #0`, number in x8, arguments in x0..x5, result in x0 with
//! `-errno` for failure) and the few wrappers the demo needs. Nothing here is specific to this
//! kernel except the three extension calls, whose numbers and layouts come from the `ext-abi`
//! crate (their one definition, which the kernel uses too); Linux answers them with `-ENOSYS`.

use core::arch::asm;
use core::sync::atomic::{AtomicU32, AtomicU64, Ordering};

pub use crate::abi::{
    CodeWindowInfo, MAP_CODE, MmStats, SYS_CODE_WINDOW, SYS_MM_STATS, SYS_MMAP_NEAR, WINDOW_GET,
};

pub use linux_abi::Errno;
use linux_abi::futex::{FUTEX_PRIVATE_FLAG, FUTEX_WAIT, FUTEX_WAKE};
pub use linux_abi::mman::{
    MADV_DONTNEED, MADV_NOHUGEPAGE, MAP_ANONYMOUS, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_NORESERVE,
    MAP_PRIVATE, MAP_SHARED, PROT_EXEC, PROT_NONE, PROT_READ, PROT_WRITE,
};
pub use linux_abi::nr;

/// Counts every system call this program makes, from every thread.
static SYSCALLS: AtomicU64 = AtomicU64::new(0);

/// System calls made so far (all threads).
pub fn count() -> u64 {
    SYSCALLS.load(Ordering::Relaxed)
}

/// Counts `n` system calls made outside [`syscall6`] (in inline assembly).
pub fn add_count(n: u64) {
    SYSCALLS.fetch_add(n, Ordering::Relaxed);
}

fn bump_count() {
    SYSCALLS.fetch_add(1, Ordering::Relaxed);
}

fn result(ret: i64) -> Result<u64, Errno> {
    match Errno::from_ret(ret) {
        Some(e) => Err(e),
        None => Ok(ret as u64),
    }
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

/// Powers the machine off (`reboot(LINUX_REBOOT_CMD_POWER_OFF)`): what Linux's init does instead
/// of exiting, which would panic the kernel. Returns only if refused (not init, not root).
pub fn power_off() {
    // SAFETY: reboot(LINUX_REBOOT_MAGIC1, LINUX_REBOOT_MAGIC2, LINUX_REBOOT_CMD_POWER_OFF) either
    // stops the machine or fails; it touches no memory of ours.
    let _ = unsafe { syscall6(nr::REBOOT, [0xfee1_dead, 672_274_793, 0x4321_fedc, 0, 0, 0]) };
}

/// Anonymous private `mmap`. A hint (`addr` without `MAP_FIXED*`) may be ignored by the kernel.
pub fn mmap_anon(addr: u64, len: u64, prot: u64, flags: u64) -> Result<u64, Errno> {
    debug_assert!(flags & MAP_FIXED == 0, "MAP_FIXED could replace a mapping this program uses");
    // SAFETY: an anonymous mapping without MAP_FIXED never replaces an existing mapping (with
    // MAP_FIXED_NOREPLACE it fails with EEXIST instead), so no memory we use changes.
    unsafe { syscall6(nr::MMAP, [addr, len, prot, flags | MAP_PRIVATE | MAP_ANONYMOUS, u64::MAX, 0]) }
}

/// A memfd of `len` bytes (`memfd_create` + `ftruncate`), close-on-exec; its descriptor.
pub fn memfd(len: u64) -> Result<u64, Errno> {
    const MFD_CLOEXEC: u64 = 1;
    // SAFETY: memfd_create reads the NUL-terminated name; ftruncate and close touch no memory.
    unsafe {
        let fd = syscall6(nr::MEMFD_CREATE, [c"jit".as_ptr() as u64, MFD_CLOEXEC, 0, 0, 0, 0])?;
        if let Err(e) = syscall6(nr::FTRUNCATE, [fd, len, 0, 0, 0, 0]) {
            let _ = syscall6(nr::CLOSE, [fd, 0, 0, 0, 0, 0]);
            return Err(e);
        }
        Ok(fd)
    }
}

/// `MAP_SHARED` mapping of descriptor `fd` from offset 0 (no `MAP_FIXED`: nothing is replaced).
pub fn mmap_shared(len: u64, prot: u64, fd: u64) -> Result<u64, Errno> {
    // SAFETY: without MAP_FIXED the kernel never replaces an existing mapping.
    unsafe { syscall6(nr::MMAP, [0, len, prot, MAP_SHARED, fd, 0]) }
}

/// `close(fd)` of a descriptor this program opened and no longer uses.
pub fn close(fd: u64) {
    // SAFETY: close touches no memory.
    let _ = unsafe { syscall6(nr::CLOSE, [fd, 0, 0, 0, 0, 0]) };
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

/// `madvise` (here `MADV_DONTNEED`, which makes private anonymous pages read zero, and
/// `MADV_NOHUGEPAGE`).
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
    unsafe {
        syscall6(
            nr::CLOCK_GETTIME,
            [linux_abi::time::CLOCK_MONOTONIC as u64, ts.as_mut_ptr() as u64, 0, 0, 0, 0],
        )?
    };
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

/// `mmap(addr, len, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS)`: fresh zero pages at exactly
/// `addr`, replacing whatever was mapped there.
///
/// # Safety
/// Nothing may rely on the previous contents or mapping of `[addr, addr + len)`, and no other
/// thread may have mapped anything there that it still uses.
pub unsafe fn mmap_fixed(addr: u64, len: u64, prot: u64) -> Result<u64, Errno> {
    // SAFETY: the caller guarantees that the range may be replaced.
    unsafe { syscall6(nr::MMAP, [addr, len, prot, MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, u64::MAX, 0]) }
}

/// `futex(word, FUTEX_WAIT | FUTEX_PRIVATE_FLAG, expected, timeout)`: sleeps while `*word ==
/// expected`, at most `timeout_ns` (relative) when given. `Err(EAGAIN)` if the word differed,
/// `Err(ETIMEDOUT)` on timeout; spurious wake-ups are possible (callers re-check the word).
pub fn futex_wait(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) -> Result<u64, Errno> {
    futex_wait_op(word, expected, timeout_ns, u64::from(FUTEX_WAIT | FUTEX_PRIVATE_FLAG))
}

/// [`futex_wait`] without `FUTEX_PRIVATE_FLAG`: for the `CLONE_CHILD_CLEARTID` word, which Linux
/// wakes with a shared-futex `FUTEX_WAKE` at thread exit (a private wait has another key and would
/// miss it; glibc's `pthread_join` waits shared for the same reason).
pub fn futex_wait_shared(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>) -> Result<u64, Errno> {
    futex_wait_op(word, expected, timeout_ns, u64::from(FUTEX_WAIT))
}

fn futex_wait_op(word: &AtomicU32, expected: u32, timeout_ns: Option<u64>, op: u64) -> Result<u64, Errno> {
    let ts = timeout_ns.map(|ns| [ns / 1_000_000_000, ns % 1_000_000_000]);
    let tsp = ts.as_ref().map_or(0, |t| t.as_ptr() as u64);
    // SAFETY: the kernel reads the 32-bit word we borrow (atomically) and, if given, one
    // `struct timespec` (two 64-bit fields) that lives until the call returns.
    unsafe { syscall6(nr::FUTEX, [word.as_ptr() as u64, op, u64::from(expected), tsp, 0, 0]) }
}

/// `futex(word, FUTEX_WAKE | FUTEX_PRIVATE_FLAG, n)`: wakes up to `n` waiters; returns how many.
pub fn futex_wake(word: &AtomicU32, n: u32) -> Result<u64, Errno> {
    let op = u64::from(FUTEX_WAKE | FUTEX_PRIVATE_FLAG);
    // SAFETY: FUTEX_WAKE only uses the address as a key; it does not write memory.
    unsafe { syscall6(nr::FUTEX, [word.as_ptr() as u64, op, u64::from(n), 0, 0, 0]) }
}

/// `sched_yield()`.
pub fn sched_yield() {
    // SAFETY: no arguments, no memory touched.
    let _ = unsafe { syscall6(nr::SCHED_YIELD, [0; 6]) };
}

/// `gettid()`.
pub fn gettid() -> u32 {
    // SAFETY: no arguments, no memory touched.
    unsafe { syscall6(nr::GETTID, [0; 6]) }.map_or(0, |t| t as u32)
}

/// `getcpu(&cpu, NULL, NULL)`: the CPU the calling thread runs on (informative; may be stale by
/// the time it returns).
pub fn getcpu() -> Result<u32, Errno> {
    let mut cpu = 0u32;
    // SAFETY: the kernel writes one `unsigned int` to `cpu`; the other pointers are NULL.
    unsafe { syscall6(nr::GETCPU, [&mut cpu as *mut u32 as u64, 0, 0, 0, 0, 0])? };
    Ok(cpu)
}

/// `prctl(PR_SET_THP_DISABLE, disable, 0, 0, 0)`: faults map single pages only (Linux: no
/// transparent huge pages for this process).
pub fn set_thp_disable(disable: bool) -> Result<(), Errno> {
    // SAFETY: changes only how later faults map memory, not what any mapping contains.
    unsafe { syscall6(nr::PRCTL, [41, u64::from(disable), 0, 0, 0, 0])? };
    Ok(())
}

/// `sched_getaffinity(0, …)`: the calling thread's CPU mask (CPUs 0–63).
pub fn sched_getaffinity() -> Result<u64, Errno> {
    // 1024 CPUs' worth of mask: Linux refuses a buffer smaller than its CPU count.
    let mut mask = [0u64; 16];
    // SAFETY: the kernel writes at most `size_of_val(&mask)` bytes to `mask`.
    unsafe { syscall6(nr::SCHED_GETAFFINITY, [0, 128, mask.as_mut_ptr() as u64, 0, 0, 0])? };
    Ok(mask[0])
}

/// `sched_setaffinity(0, 8, &mask)`: the calling thread may run only on the CPUs in `mask`
/// (it moves now if it runs elsewhere).
pub fn sched_setaffinity(mask: u64) -> Result<(), Errno> {
    // SAFETY: the kernel reads 8 bytes from `mask`.
    unsafe { syscall6(nr::SCHED_SETAFFINITY, [0, 8, &mask as *const u64 as u64, 0, 0, 0])? };
    Ok(())
}
