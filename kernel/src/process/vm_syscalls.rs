//! The memory system calls: the placement decision is `mm::vm::VmMap`'s (host-tested Linux
//! semantics, the code window, near placement); this module applies its page-table effects, each
//! operation gathered into one TLB flush before any frame goes back.
use mm::addr::PAGE_SIZE;
use mm::vm::abi::{CodeWindowInfo, MmStats, WINDOW_GET};
use mm::vm::map::MadviseAction;
use mm::vm::{Errno, flags};

use super::syscall::{copy_out, errno::*};
use super::{Access, Mm, PAGE_FAULTS, Process};

fn errno(e: Errno) -> i64 {
    -i64::from(e.code())
}

/// Runs `f` on the process's memory under its lock (ENOMEM if it is being torn down). User
/// memory must not be copied inside `f`: a copy may demand-page, which takes the same lock.
fn with_mm<R: From<i64>>(p: &Process, f: impl FnOnce(&mut Mm) -> R) -> R {
    let mut guard = p.mm.lock();
    match guard.as_mut() {
        Some(mm) => f(mm),
        None => R::from(-ENOMEM),
    }
}

/// Faults in `[start, end)` now (MAP_POPULATE, MADV_WILLNEED, MADV_POPULATE_*).
fn populate(mm: &mut Mm, start: u64, end: u64, write: bool) {
    let mut page = start & !(PAGE_SIZE - 1);
    while page < end {
        let access = if write { Access::Write } else { Access::Read };
        if mm.resolve_fault(page, access).is_err() {
            break;
        }
        page += PAGE_SIZE;
    }
}

/// `mmap(addr, len, prot, flags, fd, offset)`.
pub fn mmap(p: &Process, addr: u64, len: u64, prot: u64, map_flags: u64, fd: u64, offset: u64) -> i64 {
    // No file is ever open here: a file mapping with a descriptor that is not negative names a
    // file this process does not have.
    if map_flags & flags::MAP_ANONYMOUS == 0 && (fd as i32) >= 0 {
        return -EBADF;
    }
    with_mm(p, |mm| match mm.vm.mmap(addr, len, prot, map_flags, fd as i32, offset) {
        Err(e) => errno(e),
        Ok(mapped) => {
            if let (Some(first), Some(last)) = (mapped.replaced.first(), mapped.replaced.last()) {
                mm.unmap(p, first.start, last.end);
            }
            if mapped.populate {
                populate(mm, mapped.addr, mapped.addr + mapped.len, mapped.prot.write());
            }
            mapped.addr as i64
        }
    })
}

/// `munmap(addr, len)`: one flush for the whole range, however many areas it covered.
pub fn munmap(p: &Process, addr: u64, len: u64) -> i64 {
    with_mm(p, |mm| match mm.vm.munmap(addr, len) {
        Err(e) => errno(e),
        Ok(removed) => {
            // One call over the whole span (holes cost nothing): one flush.
            if let (Some(first), Some(last)) = (removed.first(), removed.last()) {
                mm.unmap(p, first.start, last.end);
            }
            0
        }
    })
}

/// `mprotect(addr, len, prot)`: every area's change in place, then one flush.
pub fn mprotect(p: &Process, addr: u64, len: u64, prot: u64) -> i64 {
    with_mm(p, |mm| match mm.vm.mprotect(addr, len, prot) {
        Err(e) => errno(e),
        Ok(protected) => {
            // Linux gives the whole range one protection: one call, one flush. (Should the
            // changes ever differ, each gets its own call.)
            let uniform =
                protected.changes.windows(2).all(|w| w[0].new == w[1].new && w[0].end == w[1].start);
            match (protected.changes.first(), protected.changes.last()) {
                (Some(first), Some(last)) if uniform => mm.protect(p, first.start, last.end, first.new),
                _ => {
                    for change in &protected.changes {
                        mm.protect(p, change.start, change.end, change.new);
                    }
                }
            }
            protected.error.map_or(0, errno)
        }
    })
}

/// `madvise(addr, len, advice)`: DONTNEED and FREE drop the pages (they read zero next time);
/// WILLNEED and POPULATE_* fault them in.
pub fn madvise(p: &Process, addr: u64, len: u64, advice: u64) -> i64 {
    with_mm(p, |mm| match mm.vm.madvise(addr, len, advice) {
        Err(e) => errno(e),
        Ok(advised) => {
            match advised.action {
                MadviseAction::Discard | MadviseAction::Free => {
                    if let (Some(first), Some(last)) = (advised.ranges.first(), advised.ranges.last()) {
                        mm.unmap(p, first.0, last.1);
                    }
                }
                MadviseAction::WillNeed => {
                    for &(start, end) in &advised.ranges {
                        populate(mm, start, end, false);
                    }
                }
                MadviseAction::Populate { write } => {
                    for &(start, end) in &advised.ranges {
                        populate(mm, start, end, write);
                    }
                }
                MadviseAction::None => {}
            }
            advised.error.map_or(0, errno)
        }
    })
}

/// `brk(addr)`: returns the new (or unchanged) break, as Linux does.
pub fn brk(p: &Process, addr: u64) -> i64 {
    with_mm(p, |mm| {
        let outcome = mm.vm.brk(addr);
        if let (Some(first), Some(last)) = (outcome.unmapped.first(), outcome.unmapped.last()) {
            mm.unmap(p, first.start, last.end);
        }
        outcome.brk as i64
    })
}

/// `SYS_MMAP_NEAR(target, len, radius, prot, flags)` (this kernel's extension, see the ABI).
pub fn mmap_near(p: &Process, target: u64, len: u64, radius: u64, prot: u64, map_flags: u64) -> i64 {
    with_mm(p, |mm| match mm.vm.map_near(target, len, radius, prot, map_flags) {
        Err(e) => errno(e),
        Ok(mapped) => mapped.addr as i64,
    })
}

/// `SYS_CODE_WINDOW(op, arg, info)`.
pub fn code_window(p: &Process, op: u64, arg: u64, info_ptr: u64) -> i64 {
    let outcome: Outcome<CodeWindowInfo> = with_mm(p, |mm| match mm.vm.code_window_op(op, arg) {
        Err(e) => Outcome::Return(errno(e)),
        Ok(Some(info)) => Outcome::CopyOut(info),
        Ok(None) => Outcome::Return(0),
    });
    match outcome {
        Outcome::Return(value) => value,
        // Copied out after the memory lock is released (the copy may demand-page).
        Outcome::CopyOut(info) if op == WINDOW_GET => {
            if copy_out(p, info_ptr, as_bytes(&info)).is_err() {
                -EFAULT
            } else {
                0
            }
        }
        Outcome::CopyOut(_) => 0,
    }
}

/// A result to return, or a value to copy out to the program first.
enum Outcome<T> {
    Return(i64),
    CopyOut(T),
}

impl<T> From<i64> for Outcome<T> {
    fn from(value: i64) -> Self {
        Outcome::Return(value)
    }
}

/// `SYS_MM_STATS(buf, size)`: the kernel's TLB and paging counters.
pub fn mm_stats(p: &Process, buf: u64, size: u64) -> i64 {
    let t = crate::memory::tlb::stats();
    let stats = MmStats {
        tlbi_range_broadcast: t.range_broadcast,
        tlbi_page_broadcast: t.page_broadcast,
        tlbi_asid_broadcast: t.asid_broadcast,
        tlbi_all_broadcast: t.all_broadcast,
        tlbi_range_local: t.range_local,
        tlbi_page_local: t.page_local,
        tlbi_asid_local: t.asid_local,
        tlbi_all_local: t.all_local,
        promotions: 0,
        demotions: 0,
        page_faults: PAGE_FAULTS.load(core::sync::atomic::Ordering::Relaxed),
    };
    let bytes = as_bytes(&stats);
    let n = (size as usize).min(bytes.len());
    if copy_out(p, buf, &bytes[..n]).is_err() { -EFAULT } else { n as i64 }
}

/// The bytes of a `repr(C)` struct made only of `u64` fields (no padding).
fn as_bytes<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: callers pass `CodeWindowInfo` or `MmStats`, `repr(C)` structs of `u64` fields with
    // no padding, so every byte is initialised; the slice borrows `value`.
    unsafe { core::slice::from_raw_parts((value as *const T).cast::<u8>(), core::mem::size_of::<T>()) }
}
