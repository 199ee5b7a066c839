//! The identity calls: `getuid`, `geteuid`, `getgid`, `getegid`, `getresuid`, `getresgid`,
//! `setuid`, `setgid`, `setreuid`, `setregid`, `setresuid`, `setresgid`, `setfsuid`,
//! `setfsgid`, `getgroups`, `setgroups`. The rules (who may take which id, what happens to the
//! capabilities) are `fs::cred`'s; here are the arguments and the swap of the process's
//! credentials. Credentials belong to the process here (glibc makes every thread of a process
//! take the same ids anyway).
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;

use crate::fs::cred::{Credentials, NGROUPS_MAX};
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::Process;

/// Which id a `get*id` call returns.
#[derive(Clone, Copy)]
pub enum Id {
    /// `getuid`.
    Uid,
    /// `geteuid`.
    Euid,
    /// `getgid`.
    Gid,
    /// `getegid`.
    Egid,
}

/// `getuid`, `geteuid`, `getgid`, `getegid`.
pub fn get(p: &Process, id: Id) -> Result<u64, Errno> {
    let c = p.posix.cred();
    Ok(u64::from(match id {
        Id::Uid => c.uid,
        Id::Euid => c.euid,
        Id::Gid => c.gid,
        Id::Egid => c.egid,
    }))
}

/// `getresuid(ruid, euid, suid)` (`groups`: `getresgid`): three ids written out (`EFAULT`).
pub fn getres(p: &Process, groups: bool, r: u64, e: u64, s: u64) -> Result<u64, Errno> {
    let c = p.posix.cred();
    let ids = if groups { [c.gid, c.egid, c.sgid] } else { [c.uid, c.euid, c.suid] };
    for (at, id) in [r, e, s].into_iter().zip(ids) {
        copy_out(at, &id.to_le_bytes()).map_err(|_| Errno::EFAULT)?;
    }
    Ok(0)
}

/// Replaces the process's credentials with what `change` makes of them.
fn change(
    p: &Process,
    change: impl FnOnce(&Credentials) -> Result<Credentials, Errno>,
) -> Result<u64, Errno> {
    let mut slot = p.posix.cred.lock();
    let new = change(&slot)?;
    *slot = fallible::arc(new).map_err(|_| Errno::ENOMEM)?;
    Ok(0)
}

/// An id argument: 32 bits, `-1` (all ones) meaning "unchanged".
fn id(arg: u64) -> u32 {
    arg as u32
}

/// `setresuid(r, e, s)`.
pub fn setresuid(p: &Process, r: u64, e: u64, s: u64) -> Result<u64, Errno> {
    change(p, |c| c.set_res_uid(id(r), id(e), id(s)))
}

/// `setresgid(r, e, s)`.
pub fn setresgid(p: &Process, r: u64, e: u64, s: u64) -> Result<u64, Errno> {
    change(p, |c| c.set_res_gid(id(r), id(e), id(s)))
}

/// `setreuid(r, e)`.
pub fn setreuid(p: &Process, r: u64, e: u64) -> Result<u64, Errno> {
    change(p, |c| c.set_re_uid(id(r), id(e)))
}

/// `setregid(r, e)`.
pub fn setregid(p: &Process, r: u64, e: u64) -> Result<u64, Errno> {
    change(p, |c| c.set_re_gid(id(r), id(e)))
}

/// `setuid(uid)`: `EINVAL` for -1, as Linux (no such user).
pub fn setuid(p: &Process, uid: u64) -> Result<u64, Errno> {
    if id(uid) == u32::MAX {
        return Err(Errno::EINVAL);
    }
    change(p, |c| c.set_uid(id(uid)))
}

/// `setgid(gid)`.
pub fn setgid(p: &Process, gid: u64) -> Result<u64, Errno> {
    if id(gid) == u32::MAX {
        return Err(Errno::EINVAL);
    }
    change(p, |c| c.set_gid(id(gid)))
}

/// `setfsuid(uid)` (`groups`: `setfsgid`): the old id, whether or not it changed.
pub fn setfs(p: &Process, groups: bool, new: u64) -> Result<u64, Errno> {
    let mut slot = p.posix.cred.lock();
    let old = if groups { slot.fsgid } else { slot.fsuid };
    let made = if groups { slot.set_fs_gid(id(new)) } else { slot.set_fs_uid(id(new)) };
    if let Ok(arc) = made.and_then(|c| fallible::arc(c).map_err(|_| Errno::ENOMEM)) {
        *slot = arc;
    }
    Ok(u64::from(old))
}

/// `getgroups(size, list)`: the count with `size` 0; `EINVAL` when `size` is below it.
pub fn getgroups(p: &Process, size: u64, list: u64) -> Result<u64, Errno> {
    if (size as i32) < 0 {
        return Err(Errno::EINVAL);
    }
    let c: Arc<Credentials> = p.posix.cred();
    let n = c.groups.len() as u64;
    if size == 0 {
        return Ok(n);
    }
    if size < n {
        return Err(Errno::EINVAL);
    }
    for (i, g) in c.groups.iter().enumerate() {
        copy_out(list.wrapping_add(i as u64 * 4), &g.to_le_bytes()).map_err(|_| Errno::EFAULT)?;
    }
    Ok(n)
}

/// `setgroups(size, list)`: `EINVAL` past `NGROUPS_MAX`; `EPERM` without `CAP_SETGID` (checked
/// first, as Linux's `may_setgroups`); `EFAULT`.
pub fn setgroups(p: &Process, size: u64, list: u64) -> Result<u64, Errno> {
    if size > NGROUPS_MAX as u64 {
        return Err(Errno::EINVAL);
    }
    if !p.posix.cred().capable(crate::fs::cred::cap::SETGID) {
        return Err(Errno::EPERM);
    }
    let mut groups = Vec::new();
    groups.try_reserve_exact(size as usize).map_err(|_| Errno::ENOMEM)?;
    for i in 0..size {
        let mut b = [0u8; 4];
        copy_in(&mut b, list.wrapping_add(i * 4)).map_err(|_| Errno::EFAULT)?;
        groups.push(u32::from_le_bytes(b));
    }
    change(p, |c| c.set_groups(groups))
}
