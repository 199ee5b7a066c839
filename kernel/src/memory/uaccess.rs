//! Copies between the kernel and user memory for system calls: every user pointer goes through
//! [`copy_in`] and [`copy_out`] (EFAULT, never a kernel fault), which demand-page what the
//! program has not touched yet. They work on the current task's address space (the one in
//! TTBR0: `vmspace::current`), as Linux's `copy_from_user` does, so a caller names no process.
use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use mm::user::Access;

use super::fallible;
use super::vmspace::{self, PAGE_FAULTS};
use crate::arch::aarch64::user::{Fault, copy_from_user, copy_to_user};
use linux_abi::Errno;
use linux_abi::fcntl::PATH_MAX;

/// Copies `dst.len()` bytes from user memory at `src`, demand-paging untouched pages first.
///
/// # Errors
/// [`Fault`] if the memory is not readable by the program.
pub fn copy_in(dst: &mut [u8], src: u64) -> Result<(), Fault> {
    with_faults(Access::Read, || copy_from_user(dst, src))
}

/// Copies `src` to user memory at `dst`, demand-paging untouched pages first.
///
/// # Errors
/// [`Fault`] if the memory is not writable by the program.
pub fn copy_out(dst: u64, src: &[u8]) -> Result<(), Fault> {
    with_faults(Access::Write, || copy_to_user(dst, src))
}

/// Reads a little-endian `u32` at `addr`.
///
/// # Errors
/// `EFAULT`.
pub fn read_u32(addr: u64) -> Result<u32, Errno> {
    let mut b = [0u8; 4];
    copy_in(&mut b, addr).map_err(|_| Errno::EFAULT)?;
    Ok(u32::from_le_bytes(b))
}

/// How many times in a row the copy may fault at one address that the fault handler resolved
/// each time. Another thread may take the page away again between the resolution and the retry
/// (a fork on another CPU write-protects it for copy-on-write, a `madvise` drops it), so one
/// repeat is no proof that demand paging cannot help; a handler that keeps answering Ok while
/// the copy keeps faulting would be a bug, and this bound turns it into `EFAULT`, not a hang.
const SAME_ADDRESS_RETRIES: u32 = 16;

fn with_faults(access: Access, mut copy: impl FnMut() -> Result<(), Fault>) -> Result<(), Fault> {
    let mut last = None;
    let mut repeats = 0;
    loop {
        match copy() {
            Ok(()) => return Ok(()),
            Err(fault) => {
                if last == Some(fault.at) {
                    repeats += 1;
                    if repeats > SAME_ADDRESS_RETRIES {
                        return Err(fault);
                    }
                } else {
                    repeats = 0;
                }
                // Not mapped, or not with this access: the handler says so.
                let space = vmspace::current().ok_or(fault)?;
                let at = crate::arch::aarch64::mte::untagged(fault.at);
                space.lock().fault(at, access).map_err(|_| fault)?;
                PAGE_FAULTS.fetch_add(1, Ordering::Relaxed);
                last = Some(fault.at);
            }
        }
    }
}

/// A NUL-terminated string at `addr` copied into `buf`, as Linux's `strncpy_from_user` with
/// `buf.len()` as the bound: the terminator's index (the string's length), or `None` when `buf`
/// filled up without one. Reads in chunks that never cross into the page after the one holding
/// the next byte, so a string that ends just before an unmapped page is read whole.
///
/// # Errors
/// `EFAULT` for a byte that cannot be read before the terminator or the bound.
pub fn read_c_string(addr: u64, buf: &mut [u8]) -> Result<Option<usize>, Errno> {
    let mut done = 0;
    while done < buf.len() {
        let at = addr.wrapping_add(done as u64);
        let to_page_end = (mm::addr::PAGE_SIZE - at % mm::addr::PAGE_SIZE) as usize;
        let n = (buf.len() - done).min(to_page_end);
        copy_in(&mut buf[done..done + n], at).map_err(|_| Errno::EFAULT)?;
        if let Some(end) = buf[done..done + n].iter().position(|&b| b == 0) {
            return Ok(Some(done + end));
        }
        done += n;
    }
    Ok(None)
}

/// A NUL-terminated path at `addr` (without its NUL), as Linux's `getname` reads it: `EFAULT`
/// for a bad pointer, `ENAMETOOLONG` past `PATH_MAX` bytes with its terminator, `ENOMEM` when the
/// heap cannot hold it. Reads a page-sized chunk at a time, never past the terminator's chunk.
///
/// # Errors
/// As above.
pub fn read_path(addr: u64) -> Result<Vec<u8>, Errno> {
    let mut path = Vec::new();
    let mut chunk = [0u8; 256];
    loop {
        let at = addr.wrapping_add(path.len() as u64);
        // Never past the page of the next byte: the string may end just before an unmapped page.
        let to_page_end = (mm::addr::PAGE_SIZE - at % mm::addr::PAGE_SIZE) as usize;
        let n = chunk.len().min(to_page_end).min(PATH_MAX - path.len());
        copy_in(&mut chunk[..n], at).map_err(|_| Errno::EFAULT)?;
        let end = chunk[..n].iter().position(|&b| b == 0);
        let take = end.unwrap_or(n);
        if path.len() + take >= PATH_MAX {
            return Err(Errno::ENAMETOOLONG);
        }
        fallible::reserve(&mut path, take).map_err(|_| Errno::ENOMEM)?;
        path.extend_from_slice(&chunk[..take]);
        if end.is_some() {
            return Ok(path);
        }
    }
}
