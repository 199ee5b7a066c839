//! The memory system calls: decoding and copies only. What each call does to the areas, the page
//! table and the TLB is `mm::user`'s (host-tested, and proven on the strict model); this module
//! takes the process's memory lock, calls it, and turns the result into Linux's return value.
use linux_abi::Errno;
use linux_abi::mman::MAP_ANONYMOUS;
use linux_abi::prctl::{PR_GET_MDWE, PR_GET_THP_DISABLE, PR_SET_MDWE, PR_SET_THP_DISABLE};
use mm::addr::PAGE_SIZE;
use mm::user::LargeFaults;
use mm::vm::abi::{CodeWindowInfo, MmStats, WINDOW_GET};

use crate::memory::uaccess::copy_out;
use crate::memory::vmspace::{Mm, PAGE_FAULTS};
use crate::process::Process;

/// The start of a range an address-space call manages, as Linux's `untagged_addr` reads it: a
/// user address loses its tag byte (bits `[63:56]`), whether or not the thread enabled the
/// tagged-address ABI. That is the ABI's first stage (Linux's `tagged-address-abi.rst`): a call
/// that only manages mappings and never touches the memory takes a tagged pointer as the same
/// address untagged. `munmap`, `mprotect`, `madvise` (and so `process_madvise`), `mremap`'s old
/// address, `msync`, `mlock`/`mlock2`/`munlock`, `mincore` and `mseal` untag here, as Linux's
/// `mm/*.c`; the calls that could create an alias of an existing mapping keep the address as
/// given, so a tagged one lies above the user half and is refused or ignored as Linux refuses
/// it: `mmap`'s address, `brk`, `mremap`'s new address, `shmat` and `shmdt`. Pointers the kernel
/// reads or writes through (`mincore`'s vector, `read`'s buffer) follow the second stage, the
/// user copies' check (`mte::user_pointer_for_check`).
fn range_start(addr: u64) -> u64 {
    crate::arch::aarch64::mte::untagged(addr)
}

fn ret(result: Result<(), Errno>) -> Result<u64, Errno> {
    result.map(|()| 0)
}

/// Runs `f` on the process's memory under its lock (ENOMEM if it is being torn down). User
/// memory must not be copied inside `f`: a copy may demand-page, which takes the same lock.
fn with_mm<R>(p: &Process, f: impl FnOnce(&mut Mm) -> Result<R, Errno>) -> Result<R, Errno> {
    match p.space() {
        Some(space) => f(&mut space.lock()),
        None => Err(Errno::ENOMEM),
    }
}

/// `prot` as this CPU can give it: `PROT_BTI` dropped on a CPU without FEAT_BTI and `PROT_MTE`
/// on one without FEAT_MTE2, as Linux's `arm64_calc_vm_prot_bits` ignores them there (the GP
/// bit is RES0 then, and there is no tag storage).
fn cpu_prot(prot: u64) -> u64 {
    let prot = if crate::arch::aarch64::cpu::has_bti() { prot } else { prot & !linux_abi::mman::PROT_BTI };
    if crate::arch::aarch64::mte::supported() { prot } else { prot & !linux_abi::mman::PROT_MTE }
}

/// `mmap(addr, len, prot, flags, fd, offset)`.
pub fn mmap(
    p: &Process,
    addr: u64,
    len: u64,
    prot: u64,
    map_flags: u64,
    fd: u64,
    offset: u64,
) -> Result<u64, Errno> {
    let prot = cpu_prot(prot);
    if map_flags & MAP_ANONYMOUS == 0 {
        return mmap_file(p, addr, len, prot, map_flags, fd, offset);
    }
    with_mm(p, |mm| mm.mmap(addr, len, prot, map_flags, fd as i32, offset))
}

/// `mmap` of descriptor `fd`, in Linux's order: the offset's alignment (`EINVAL`, arm64's
/// `sys_mmap` checks it first), the descriptor (`EBADF`), a file that cannot be mapped
/// (`ENODEV`: a pipe, the console, a directory), the access the mapping needs (`EACCES`: a
/// file not open for reading; a shared writable mapping of a file not open for writing);
/// `/dev/zero` maps anonymous memory, as Linux's `mmap_zero` does. The file's page cache is
/// mapped: every mapping and every `read`/`write` share its frames.
fn mmap_file(
    p: &Process,
    addr: u64,
    len: u64,
    prot: u64,
    flags: u64,
    fd: u64,
    offset: u64,
) -> Result<u64, Errno> {
    use linux_abi::mman::{MAP_SHARED, MAP_SHARED_VALIDATE, MAP_TYPE, PROT_WRITE};
    if offset & (PAGE_SIZE - 1) != 0 {
        return Err(Errno::EINVAL);
    }
    let f = p.posix.files.lock().file(fd)?;
    if f.file.path_only() {
        return Err(Errno::EBADF);
    }
    let shared = matches!(flags & MAP_TYPE, MAP_SHARED | MAP_SHARED_VALIDATE);
    let Some(cache) = f.file.pages() else {
        let st = f.file.stat()?;
        let zero = st.mode & linux_abi::fcntl::S_IFMT == linux_abi::fcntl::S_IFCHR
            && st.rdev == linux_abi::layout::encode_dev(1, 5);
        if zero {
            let anon = (flags & !MAP_TYPE) | if shared { MAP_SHARED } else { linux_abi::mman::MAP_PRIVATE };
            return with_mm(p, |mm| mm.mmap(addr, len, prot, anon | MAP_ANONYMOUS, -1, 0));
        }
        return Err(Errno::ENODEV);
    };
    if !f.readable() || (shared && prot & PROT_WRITE != 0 && !f.writable()) {
        return Err(Errno::EACCES);
    }
    let space = p.space().ok_or(Errno::ENOMEM)?;
    let mut mm = space.lock();
    mm.mmap_object(addr, len, prot, flags, cache.object(), offset)
}

/// `munmap(addr, len)`: one flush for the whole range, however many areas it covered.
pub fn munmap(p: &Process, addr: u64, len: u64) -> Result<u64, Errno> {
    let addr = range_start(addr);
    with_mm(p, |mm| ret(mm.munmap(addr, len)))
}

/// `mprotect(addr, len, prot)`: every area's change in place, then one flush.
pub fn mprotect(p: &Process, addr: u64, len: u64, prot: u64) -> Result<u64, Errno> {
    let addr = range_start(addr);
    // Linux's `arch_validate_prot`: mprotect refuses PROT_MTE where there is no tag storage
    // (mmap ignores it), after its checks of the range (`do_mprotect_pkey`'s order).
    if prot & linux_abi::mman::PROT_MTE != 0 && !crate::arch::aarch64::mte::supported() {
        return match len.checked_next_multiple_of(PAGE_SIZE).and_then(|l| addr.checked_add(l)) {
            _ if addr & (PAGE_SIZE - 1) != 0 => Err(Errno::EINVAL),
            _ if len == 0 => Ok(0),
            Some(end) if end > addr => Err(Errno::EINVAL),
            _ => Err(Errno::ENOMEM),
        };
    }
    let prot = cpu_prot(prot);
    with_mm(p, |mm| ret(mm.mprotect(addr, len, prot)))
}

/// `madvise(addr, len, advice)`.
pub fn madvise(p: &Process, addr: u64, len: u64, advice: u64) -> Result<u64, Errno> {
    let addr = range_start(addr);
    with_mm(p, |mm| ret(mm.madvise(addr, len, advice)))
}

/// `brk(addr)`: returns the new (or unchanged) break, as Linux does.
pub fn brk(p: &Process, addr: u64) -> Result<u64, Errno> {
    with_mm(p, |mm| Ok(mm.brk(addr)))
}

/// `mremap(addr, old_len, new_len, flags, new_addr)`: a move takes the page-table entries (one
/// flush, no copy, no frame).
pub fn mremap(
    p: &Process,
    addr: u64,
    old_len: u64,
    new_len: u64,
    flags: u64,
    new_addr: u64,
) -> Result<u64, Errno> {
    let addr = range_start(addr);
    with_mm(p, |mm| mm.mremap(addr, old_len, new_len, flags, new_addr))
}

/// `msync(addr, len, flags)` (anonymous memory: the checks only).
pub fn msync(p: &Process, addr: u64, len: u64, flags: u64) -> Result<u64, Errno> {
    let addr = range_start(addr);
    with_mm(p, |mm| ret(mm.msync(addr, len, flags)))
}

/// `mlock2(addr, len, flags)`; `mlock` is `mlock2` with flags 0, as in Linux.
pub fn mlock2(p: &Process, addr: u64, len: u64, flags: u64) -> Result<u64, Errno> {
    let addr = range_start(addr);
    with_mm(p, |mm| ret(mm.mlock2(addr, len, flags)))
}

/// `mseal(addr, len, flags)` (Linux 6.10): seals the mappings of the range against change
/// (`mm::vm::VmMap::mseal`); only the area map changes, never a table.
pub fn mseal(p: &Process, addr: u64, len: u64, flags: u64) -> Result<u64, Errno> {
    let addr = range_start(addr);
    with_mm(p, |mm| ret(mm.vm_mut().mseal(addr, len, flags)))
}

/// `munlock(addr, len)`.
pub fn munlock(p: &Process, addr: u64, len: u64) -> Result<u64, Errno> {
    let addr = range_start(addr);
    with_mm(p, |mm| ret(mm.munlock(addr, len)))
}

/// `mlockall(flags)`.
pub fn mlockall(p: &Process, flags: u64) -> Result<u64, Errno> {
    with_mm(p, |mm| ret(mm.mlockall(flags)))
}

/// `munlockall()`.
pub fn munlockall(p: &Process) -> Result<u64, Errno> {
    with_mm(p, |mm| {
        mm.munlockall();
        Ok(0)
    })
}

/// `mincore(addr, len, vec)`, as Linux's loop: the residency of at most one page's worth of
/// pages at a time is read under the memory lock into a kernel buffer, then copied out with the
/// lock released (the copy may demand-page). `EFAULT` for a vector outside user space or a copy
/// that faults; the errors of `mm::user::UserMemory::mincore` otherwise (after the prefix).
pub fn mincore(p: &Process, addr: u64, len: u64, vec: u64) -> Result<u64, Errno> {
    let addr = range_start(addr);
    let (pages, task_size) =
        with_mm(p, |mm| Ok((mm.vm().mincore_pages(addr, len)?, mm.vm().layout().task_size)))?;
    // Linux's access_ok(vec, pages), which untags the vector under the tagged-address ABI.
    let vec_checked = crate::arch::aarch64::mte::user_pointer_for_check(vec);
    if vec_checked.checked_add(pages).is_none_or(|end| end > task_size) {
        return Err(Errno::EFAULT);
    }
    let mut buf = [0u8; 4096];
    let mut done = 0u64;
    while done < pages {
        let chunk = (pages - done).min(buf.len() as u64) as usize;
        let start = addr + done * mm::addr::PAGE_SIZE;
        let n = with_mm(p, |mm| mm.mincore(start, &mut buf[..chunk]))?;
        if copy_out(vec + done, &buf[..n]).is_err() {
            return Err(Errno::EFAULT);
        }
        done += n as u64;
    }
    Ok(0)
}

/// `SYS_MMAP_NEAR(target, len, radius, prot, flags)` (this kernel's extension, see the ABI).
pub fn mmap_near(
    p: &Process,
    target: u64,
    len: u64,
    radius: u64,
    prot: u64,
    map_flags: u64,
) -> Result<u64, Errno> {
    with_mm(p, |mm| mm.map_near(target, len, radius, prot, map_flags))
}

/// `prctl(option, arg2, arg3, arg4, arg5)`: the memory options; every other option is EINVAL, as
/// Linux answers an option it does not know. `PR_SET_THP_DISABLE` / `PR_GET_THP_DISABLE` are
/// Linux's per-process switch for faults that map more than one page (here: whole 64 KiB runs and
/// 2 MiB blocks, see `mm::user::LargeFaults`).
pub fn prctl(p: &Process, option: u64, arg2: u64, arg3: u64, arg4: u64, arg5: u64) -> Result<u64, Errno> {
    match option {
        // Linux: EINVAL unless arg3..arg5 are 0.
        PR_SET_THP_DISABLE if arg3 | arg4 | arg5 != 0 => Err(Errno::EINVAL),
        PR_SET_THP_DISABLE => with_mm(p, |mm| {
            mm.set_large_faults(if arg2 != 0 { LargeFaults::NONE } else { LargeFaults::DEFAULT });
            Ok(0)
        }),
        PR_GET_THP_DISABLE if arg2 | arg3 | arg4 | arg5 != 0 => Err(Errno::EINVAL),
        PR_GET_THP_DISABLE => with_mm(p, |mm| Ok(u64::from(mm.large_faults() == LargeFaults::NONE))),
        // Memory-deny-write-execute (Linux 6.3; the rules are mm's `set_mdwe`).
        PR_SET_MDWE if arg3 | arg4 | arg5 != 0 => Err(Errno::EINVAL),
        PR_SET_MDWE => with_mm(p, |mm| mm.vm_mut().set_mdwe(arg2).map(|()| 0)),
        PR_GET_MDWE if arg2 | arg3 | arg4 | arg5 != 0 => Err(Errno::EINVAL),
        PR_GET_MDWE => with_mm(p, |mm| Ok(mm.vm().mdwe())),
        _ => Err(Errno::EINVAL),
    }
}

/// `SYS_CODE_WINDOW(op, arg, info)`.
pub fn code_window(p: &Process, op: u64, arg: u64, info_ptr: u64) -> Result<u64, Errno> {
    let info: Option<CodeWindowInfo> = with_mm(p, |mm| mm.code_window_op(op, arg))?;
    match info {
        // Copied out after the memory lock is released (the copy may demand-page).
        Some(info) if op == WINDOW_GET => {
            copy_out(info_ptr, as_bytes(&info)).map(|()| 0).map_err(|_| Errno::EFAULT)
        }
        _ => Ok(0),
    }
}

/// `SYS_MM_STATS(buf, size)`: the kernel's TLB counters, this process's paging counters and
/// frames, and the machine's free frames.
pub fn mm_stats(p: &Process, buf: u64, size: u64) -> Result<u64, Errno> {
    let t = crate::memory::tlb::stats();
    let u = p.space().map(|space| space.lock().stats()).ok_or(Errno::ENOMEM)?;
    let (allocated, total) = crate::memory::frames::usage();
    let stats = MmStats {
        tlbi_range_broadcast: t.range_broadcast,
        tlbi_page_broadcast: t.page_broadcast,
        tlbi_asid_broadcast: t.asid_broadcast,
        tlbi_all_broadcast: t.all_broadcast,
        tlbi_range_local: t.range_local,
        tlbi_page_local: t.page_local,
        tlbi_asid_local: t.asid_local,
        tlbi_all_local: t.all_local,
        promotions: u.promotions,
        demotions: u.demotions,
        page_faults: PAGE_FAULTS.load(core::sync::atomic::Ordering::Relaxed),
        folds: u.folds,
        unfolds: u.unfolds,
        data_frames: u.data_frames,
        table_frames: u.table_frames,
        free_frames: (total - allocated) as u64,
    };
    let bytes = as_bytes(&stats);
    let n = (size as usize).min(bytes.len());
    copy_out(buf, &bytes[..n]).map(|()| n as u64).map_err(|_| Errno::EFAULT)
}

/// The bytes of a `repr(C)` struct made only of `u64` fields (no padding).
fn as_bytes<T: Copy>(value: &T) -> &[u8] {
    // SAFETY: callers pass `CodeWindowInfo` or `MmStats`, `repr(C)` structs of `u64` fields with
    // no padding, so every byte is initialised; the slice borrows `value`.
    unsafe { core::slice::from_raw_parts((value as *const T).cast::<u8>(), core::mem::size_of::<T>()) }
}
