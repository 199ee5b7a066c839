//! The System V shared memory calls: `shmget`, `shmat`, `shmdt`, `shmctl`, with Linux's argument
//! checks in Linux's order. The segments and their rules are `ipc::shm`'s; this file says who
//! calls (pid, ids, capabilities) and does the memory side: an attachment is a shared mapping of
//! the segment (`mm::user::UserMemory::map_object`), read-only for good with `SHM_RDONLY`, and a
//! detach unmaps the attachment's ranges.
use linux_abi::Errno;
use linux_abi::ipc::*;
use linux_abi::mman::{MAP_FIXED, MAP_SHARED, PROT_EXEC, PROT_READ, PROT_WRITE};
use mm::addr::PAGE_SIZE;

use crate::fs::cred::cap;
use crate::ipc::Caller;
use crate::ipc::shm;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::Thread;

/// Who calls, as the IPC rules see them.
fn caller(thread: &Thread) -> Caller {
    let c = thread.process.posix.cred();
    Caller { pid: thread.process.pid, euid: c.euid, egid: c.egid, privileged: c.capable(cap::IPC_OWNER) }
}

/// `shmget(key, size, shmflg)`.
pub fn shmget(thread: &Thread, key: u64, size: u64, flags: u64) -> Result<u64, Errno> {
    shm::get(&caller(thread), key as i32, size, flags as u32).map(|id| id as u64)
}

/// `shmat(shmid, shmaddr, shmflg)`: the address the segment is attached at. In Linux's order:
/// EINVAL for a negative id and the address rules (`ipc::shm::attach_address`); EINVAL no such
/// segment; EACCES; EINVAL when the range is taken and `SHM_REMAP` not given; then what the
/// mapping says (ENOMEM).
pub fn shmat(thread: &Thread, id: u64, addr: u64, flags: u64) -> Result<u64, Errno> {
    let id = id as i32;
    let flags = flags as u32;
    if id < 0 {
        return Err(Errno::EINVAL);
    }
    let at = shm::attach_address(addr, flags)?;
    let read_only = flags & SHM_RDONLY != 0;
    let exec = flags & SHM_EXEC != 0;
    let who = caller(thread);
    let (object, seg) = shm::for_attach(&who, id, read_only, exec)?;
    let len = seg.size().next_multiple_of(PAGE_SIZE);
    let mut prot = if read_only { PROT_READ } else { PROT_READ | PROT_WRITE };
    if exec {
        prot |= PROT_EXEC;
    }
    let space = thread.process.space().ok_or(Errno::ENOMEM)?;
    let mut mm = space.lock();
    let fixed = match at {
        Some(a) => {
            let end = a.checked_add(len).ok_or(Errno::EINVAL)?;
            if flags & SHM_REMAP == 0 && mm.vm().mappings_in(a, end).next().is_some() {
                return Err(Errno::EINVAL);
            }
            MAP_FIXED
        }
        None => 0,
    };
    let mapped = mm.map_object(at.unwrap_or(0), len, prot, MAP_SHARED | fixed, object, 0, !read_only)?;
    drop(mm);
    seg.used_by(who.pid);
    Ok(mapped)
}

/// `shmdt(shmaddr)`: the attachment starting at `shmaddr` (the first range of a segment from
/// there whose offset in it is its distance from `shmaddr`, as Linux's `ksys_shmdt` finds it) is
/// unmapped, with every other range of the same segment within the segment's size of
/// `shmaddr` at its place. EINVAL when the address is not page-aligned or starts no attachment.
pub fn shmdt(thread: &Thread, addr: u64) -> Result<u64, Errno> {
    if addr & (PAGE_SIZE - 1) != 0 {
        return Err(Errno::EINVAL);
    }
    let space = thread.process.space().ok_or(Errno::EINVAL)?;
    let mut mm = space.lock();
    let at_its_place = |b: &mm::user::object::Backing| b.start >= addr && b.offset == b.start - addr;
    // The first attachment's range: its segment and where the search ends.
    let first = mm
        .backings()
        .iter()
        .filter(|b| at_its_place(b))
        .find_map(|b| shm::segment_of(&b.object).map(|seg| (b.start, b.end, seg)));
    let Some((start, end, seg)) = first else { return Err(Errno::EINVAL) };
    mm.munmap(start, end - start)?;
    let limit = addr.saturating_add(seg.size().next_multiple_of(PAGE_SIZE));
    // The other ranges of the same segment (an attachment split by munmap or mprotect): one at a
    // time, each unmapping changing the list.
    let object: mm::user::object::ObjectRef = seg.clone();
    loop {
        let next = mm
            .backings()
            .iter()
            .filter(|b| b.end <= limit && at_its_place(b))
            .find(|b| mm::user::object::same_object(&b.object, &object))
            .map(|b| (b.start, b.end));
        let Some((s, e)) = next else { break };
        mm.munmap(s, e - s)?;
    }
    drop(mm);
    seg.used_by(thread.process.pid);
    Ok(0)
}

/// `shmctl(shmid, cmd, buf)`: `IPC_SET` reads `buf` first (EFAULT), the reading commands write
/// it after (EFAULT); the rest is `ipc::shm::ctl`'s.
pub fn shmctl(thread: &Thread, id: u64, cmd: u64, buf: u64) -> Result<u64, Errno> {
    let (id, cmd) = (id as i32, cmd as i32);
    let set = if cmd == IPC_SET {
        let mut b = [0u8; SHMID_DS_SIZE];
        copy_in(&mut b, buf).map_err(|_| Errno::EFAULT)?;
        Some(ShmidDs::from_bytes(&b))
    } else {
        None
    };
    match shm::ctl(&caller(thread), id, cmd, set)? {
        shm::Ctl::Done => Ok(0),
        shm::Ctl::Stat(ds, ret) => {
            copy_out(buf, &ds.to_bytes()).map_err(|_| Errno::EFAULT)?;
            Ok(ret as u64)
        }
        shm::Ctl::Info((bytes, len, highest)) => {
            copy_out(buf, &bytes[..len]).map_err(|_| Errno::EFAULT)?;
            Ok(highest as u64)
        }
    }
}
