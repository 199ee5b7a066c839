//! Credentials, after Linux's `struct cred` and `kernel/cred.c`, `kernel/sys.c` and
//! `security/commoncap.c`: the user and group ids a process acts with, its supplementary
//! groups and its capabilities, and the permission checks the file calls make with them
//! (`generic_permission`, `inode_owner_or_capable`, the sticky-directory rule).
//!
//! A process holds an `Arc<Credentials>` that nothing changes in place: a `set*id` call builds
//! new credentials and swaps them in (Linux's `prepare_creds`/`commit_creds`), so a call that
//! took the credentials to check permissions sees one consistent set throughout.
//!
//! The first process is root with every capability, as Linux's init. Capabilities follow the
//! ids as Linux's `cap_emulate_setxuid` makes them (no file capabilities, no `SECURE_KEEP_CAPS`
//! here): dropping every uid from 0 clears the permitted and effective sets, an effective uid
//! leaving 0 clears the effective set and one coming back restores it from the permitted set,
//! and the file-system uid leaving 0 drops the file-system capabilities from the effective set.
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::fcntl::{S_IFDIR, S_IFMT};
use vfs::node::{FileType, Metadata};

/// Capability numbers (Linux's `include/uapi/linux/capability.h`).
pub mod cap {
    /// Change a file's owner and group.
    pub const CHOWN: u32 = 0;
    /// Bypass read, write and execute permission checks.
    pub const DAC_OVERRIDE: u32 = 1;
    /// Bypass read permission on files and read and search permission on directories.
    pub const DAC_READ_SEARCH: u32 = 2;
    /// Act as the owner of any file (`chmod`, `utimensat`, the sticky bit).
    pub const FOWNER: u32 = 3;
    /// Keep the set-user-id and set-group-id bits.
    pub const FSETID: u32 = 4;
    /// Send signals to any process.
    pub const KILL: u32 = 5;
    /// Change group ids.
    pub const SETGID: u32 = 6;
    /// Change user ids.
    pub const SETUID: u32 = 7;
    /// Give away and take capabilities (`capset`'s inheritable set beyond the permitted one).
    pub const SETPCAP: u32 = 8;
    /// Immutable and append-only attributes.
    pub const LINUX_IMMUTABLE: u32 = 9;
    /// Bypass System V IPC permission checks.
    pub const IPC_OWNER: u32 = 15;
    /// System administration (`/proc/PID/pagemap`'s frame numbers among much else).
    pub const SYS_ADMIN: u32 = 21;
    /// Raise priorities, act on other processes' scheduling (`process_madvise`).
    pub const SYS_NICE: u32 = 23;
    /// Override resource limits (raise a hard limit).
    pub const SYS_RESOURCE: u32 = 24;
    /// Make device nodes.
    pub const MKNOD: u32 = 27;
    /// Override a mandatory access control.
    pub const MAC_OVERRIDE: u32 = 32;
    /// Timers that wake the system (`CLOCK_REALTIME_ALARM`, `CLOCK_BOOTTIME_ALARM`).
    pub const WAKE_ALARM: u32 = 35;
    /// The highest capability Linux 6.1 knows (`CAP_CHECKPOINT_RESTORE`).
    pub const LAST: u32 = 40;
    /// Every capability Linux 6.1 knows (`CAP_FULL_SET`: 41 bits).
    pub const FULL: u64 = (1 << (LAST + 1)) - 1;
    /// The capabilities the file-system uid carries (Linux's `CAP_FS_MASK`).
    pub const FS_MASK: u64 = 1 << CHOWN
        | 1 << DAC_OVERRIDE
        | 1 << DAC_READ_SEARCH
        | 1 << FOWNER
        | 1 << FSETID
        | 1 << LINUX_IMMUTABLE
        | 1 << MAC_OVERRIDE
        | 1 << MKNOD;
}

/// The versions of `capget`/`capset`'s header (`_LINUX_CAPABILITY_VERSION_*`).
pub mod cap_version {
    /// One 32-bit word per set.
    pub const V1: u32 = 0x1998_0330;
    /// Deprecated, the same as 3.
    pub const V2: u32 = 0x2007_1026;
    /// Two 32-bit words per set; what the kernel says it speaks.
    pub const V3: u32 = 0x2008_0522;

    /// How many 32-bit words per set a header's `version` asks for; `None`: not a version
    /// Linux knows (`EINVAL`, with the kernel's version written back into the header).
    pub fn words(version: u32) -> Option<usize> {
        match version {
            V1 => Some(1),
            V2 | V3 => Some(2),
            _ => None,
        }
    }
}

/// Permission a check asks for (Linux's `MAY_*`).
pub mod may {
    /// Execute a file, search a directory.
    pub const EXEC: u32 = 1;
    /// Write.
    pub const WRITE: u32 = 2;
    /// Read.
    pub const READ: u32 = 4;
}

/// The most supplementary groups (Linux's `NGROUPS_MAX`).
pub const NGROUPS_MAX: usize = 65536;

/// An id argument meaning "leave it as it is" (`(uid_t)-1`).
pub const UNCHANGED: u32 = u32::MAX;

/// What a process acts as (module documentation). Not `Clone`: a copy of the groups must be
/// fallible ([`Credentials::try_clone`]).
#[derive(Debug, PartialEq, Eq)]
pub struct Credentials {
    /// Real user id.
    pub uid: u32,
    /// Effective user id.
    pub euid: u32,
    /// Saved set-user-id.
    pub suid: u32,
    /// File-system user id (follows the effective one unless `setfsuid` moved it).
    pub fsuid: u32,
    /// Real group id.
    pub gid: u32,
    /// Effective group id.
    pub egid: u32,
    /// Saved set-group-id.
    pub sgid: u32,
    /// File-system group id.
    pub fsgid: u32,
    /// Supplementary groups, ascending (as Linux sorts them).
    pub groups: Vec<u32>,
    /// Inheritable capabilities.
    pub cap_inheritable: u64,
    /// Permitted capabilities.
    pub cap_permitted: u64,
    /// Effective capabilities.
    pub cap_effective: u64,
    /// The bounding set.
    pub cap_bounding: u64,
}

impl Credentials {
    /// Root with every capability (the first process).
    pub const fn root() -> Self {
        Self {
            uid: 0,
            euid: 0,
            suid: 0,
            fsuid: 0,
            gid: 0,
            egid: 0,
            sgid: 0,
            fsgid: 0,
            groups: Vec::new(),
            cap_inheritable: 0,
            cap_permitted: cap::FULL,
            cap_effective: cap::FULL,
            cap_bounding: cap::FULL,
        }
    }

    /// Whether the effective set holds capability `c` (Linux's `capable`).
    pub fn capable(&self, c: u32) -> bool {
        self.cap_effective & (1 << c) != 0
    }

    /// Whether `gid` is the file-system group or a supplementary one (Linux's `in_group_p`).
    pub fn in_group(&self, gid: u32) -> bool {
        self.fsgid == gid || self.groups.binary_search(&gid).is_ok()
    }

    /// Linux's `generic_permission`: may these credentials access a node with metadata `m` as
    /// `mask` ([`may`]) asks? The owner's, the group's or the others' bits, then the
    /// capabilities that override them (`CAP_DAC_READ_SEARCH` for reading and searching,
    /// `CAP_DAC_OVERRIDE` for the rest, executing a file only if some execute bit is set).
    ///
    /// # Errors
    /// `EACCES`.
    pub fn permission(&self, m: &Metadata, mask: u32) -> Result<(), Errno> {
        self.permission_of(m.mode(), m.uid, m.gid, mask)
    }

    /// [`Self::permission`] for a node of `st_mode` `mode` owned by `uid`:`gid` (what `stat`
    /// says of a file without a node of its own).
    ///
    /// # Errors
    /// `EACCES`.
    pub fn permission_of(&self, mode: u32, uid: u32, gid: u32, mask: u32) -> Result<(), Errno> {
        let mask = mask & (may::READ | may::WRITE | may::EXEC);
        let perm = mode & 0o7777;
        let bits = if self.fsuid == uid {
            perm >> 6
        } else if self.in_group(gid) {
            perm >> 3
        } else {
            perm
        };
        if bits & mask == mask {
            return Ok(());
        }
        if mode & S_IFMT == S_IFDIR {
            if mask & may::WRITE == 0 && self.capable(cap::DAC_READ_SEARCH) {
                return Ok(());
            }
            return if self.capable(cap::DAC_OVERRIDE) { Ok(()) } else { Err(Errno::EACCES) };
        }
        if mask == may::READ && self.capable(cap::DAC_READ_SEARCH) {
            return Ok(());
        }
        if (mask & may::EXEC == 0 || perm & 0o111 != 0) && self.capable(cap::DAC_OVERRIDE) {
            return Ok(());
        }
        Err(Errno::EACCES)
    }

    /// Linux's `inode_owner_or_capable`: the file-system uid owns the node, or `CAP_FOWNER`.
    pub fn owns(&self, m: &Metadata) -> bool {
        self.fsuid == m.uid || self.capable(cap::FOWNER)
    }

    /// Linux's `may_delete` for removing (or renaming away) `victim` from directory `dir`:
    /// write and search permission on the directory (`EACCES`), then the sticky bit (`EPERM`:
    /// only the file's or the directory's owner, or `CAP_FOWNER`).
    ///
    /// # Errors
    /// As above.
    pub fn may_delete(&self, dir: &Metadata, victim: &Metadata) -> Result<(), Errno> {
        self.permission(dir, may::WRITE | may::EXEC)?;
        if dir.perm & 0o1000 != 0
            && self.fsuid != victim.uid
            && self.fsuid != dir.uid
            && !self.capable(cap::FOWNER)
        {
            return Err(Errno::EPERM);
        }
        Ok(())
    }

    /// The owner, group and permission bits of a node of kind `kind` made in directory `dir`
    /// with the bits `perm` (Linux's `inode_init_owner` and `mode_strip_sgid`): owned by the
    /// file-system ids, except that a set-group-id directory gives its group, and its
    /// set-group-id bit to a new directory; a new file of such a directory keeps a
    /// set-group-id bit (with group execute) only for a member of the group or `CAP_FSETID`.
    pub fn new_owner(&self, dir: &Metadata, kind: FileType, perm: u32) -> (u32, u32, u32) {
        if dir.perm & 0o2000 == 0 {
            return (self.fsuid, self.fsgid, perm);
        }
        let perm = if kind == FileType::Directory {
            perm | 0o2000
        } else if perm & 0o2010 == 0o2010 && !self.in_group(dir.gid) && !self.capable(cap::FSETID) {
            perm & !0o2000
        } else {
            perm
        };
        (self.fsuid, dir.gid, perm)
    }

    /// `setresuid(ruid, euid, suid)` ([`UNCHANGED`] keeps one): without `CAP_SETUID` each new
    /// id must be one of the current three (`EPERM`).
    ///
    /// # Errors
    /// `EPERM`, `ENOMEM`.
    pub fn set_res_uid(&self, r: u32, e: u32, s: u32) -> Result<Self, Errno> {
        let known = |id: u32| id == UNCHANGED || id == self.uid || id == self.euid || id == self.suid;
        let all_known = known(r) && known(e) && known(s);
        if !all_known && !self.capable(cap::SETUID) {
            return Err(Errno::EPERM);
        }
        let mut new = self.try_clone()?;
        set(&mut new.uid, r);
        set(&mut new.euid, e);
        set(&mut new.suid, s);
        new.fsuid = new.euid;
        Ok(self.fix_setuid(new))
    }

    /// `setreuid(ruid, euid)`, as Linux's: the real uid may become the real or effective one,
    /// the effective uid any of the three, else `CAP_SETUID`; the saved uid follows the
    /// effective one when the real one is set or the effective one leaves the real one.
    ///
    /// # Errors
    /// `EPERM`, `ENOMEM`.
    pub fn set_re_uid(&self, r: u32, e: u32) -> Result<Self, Errno> {
        let may = self.capable(cap::SETUID);
        if r != UNCHANGED && r != self.uid && r != self.euid && !may {
            return Err(Errno::EPERM);
        }
        if e != UNCHANGED && e != self.uid && e != self.euid && e != self.suid && !may {
            return Err(Errno::EPERM);
        }
        let mut new = self.try_clone()?;
        set(&mut new.uid, r);
        set(&mut new.euid, e);
        if r != UNCHANGED || (e != UNCHANGED && e != self.uid) {
            new.suid = new.euid;
        }
        new.fsuid = new.euid;
        Ok(self.fix_setuid(new))
    }

    /// `setuid(uid)`: with `CAP_SETUID` all three ids, else the effective one if `uid` is the
    /// real or saved one.
    ///
    /// # Errors
    /// `EPERM`, `ENOMEM`.
    pub fn set_uid(&self, uid: u32) -> Result<Self, Errno> {
        let mut new = self.try_clone()?;
        if self.capable(cap::SETUID) {
            (new.uid, new.euid, new.suid) = (uid, uid, uid);
        } else if uid == self.uid || uid == self.suid {
            new.euid = uid;
        } else {
            return Err(Errno::EPERM);
        }
        new.fsuid = new.euid;
        Ok(self.fix_setuid(new))
    }

    /// `setfsuid(uid)`: the file-system uid becomes `uid` if it is one of the four ids or with
    /// `CAP_SETUID`; never an error (the caller returns the old one).
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn set_fs_uid(&self, uid: u32) -> Result<Self, Errno> {
        let mut new = self.try_clone()?;
        if uid == self.uid
            || uid == self.euid
            || uid == self.suid
            || uid == self.fsuid
            || self.capable(cap::SETUID)
        {
            new.fsuid = uid;
        }
        Ok(self.fix_fsuid(new))
    }

    /// `setresgid`, as [`Self::set_res_uid`] with `CAP_SETGID` (no capability follows a gid).
    ///
    /// # Errors
    /// `EPERM`, `ENOMEM`.
    pub fn set_res_gid(&self, r: u32, e: u32, s: u32) -> Result<Self, Errno> {
        let known = |id: u32| id == UNCHANGED || id == self.gid || id == self.egid || id == self.sgid;
        let all_known = known(r) && known(e) && known(s);
        if !all_known && !self.capable(cap::SETGID) {
            return Err(Errno::EPERM);
        }
        let mut new = self.try_clone()?;
        set(&mut new.gid, r);
        set(&mut new.egid, e);
        set(&mut new.sgid, s);
        new.fsgid = new.egid;
        Ok(new)
    }

    /// `setregid`, as [`Self::set_re_uid`].
    ///
    /// # Errors
    /// `EPERM`, `ENOMEM`.
    pub fn set_re_gid(&self, r: u32, e: u32) -> Result<Self, Errno> {
        let may = self.capable(cap::SETGID);
        if r != UNCHANGED && r != self.gid && r != self.egid && !may {
            return Err(Errno::EPERM);
        }
        if e != UNCHANGED && e != self.gid && e != self.egid && e != self.sgid && !may {
            return Err(Errno::EPERM);
        }
        let mut new = self.try_clone()?;
        set(&mut new.gid, r);
        set(&mut new.egid, e);
        if r != UNCHANGED || (e != UNCHANGED && e != self.gid) {
            new.sgid = new.egid;
        }
        new.fsgid = new.egid;
        Ok(new)
    }

    /// `setgid`, as [`Self::set_uid`].
    ///
    /// # Errors
    /// `EPERM`, `ENOMEM`.
    pub fn set_gid(&self, gid: u32) -> Result<Self, Errno> {
        let mut new = self.try_clone()?;
        if self.capable(cap::SETGID) {
            (new.gid, new.egid, new.sgid) = (gid, gid, gid);
        } else if gid == self.gid || gid == self.sgid {
            new.egid = gid;
        } else {
            return Err(Errno::EPERM);
        }
        new.fsgid = new.egid;
        Ok(new)
    }

    /// `setfsgid`, as [`Self::set_fs_uid`].
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn set_fs_gid(&self, gid: u32) -> Result<Self, Errno> {
        let mut new = self.try_clone()?;
        if gid == self.gid
            || gid == self.egid
            || gid == self.sgid
            || gid == self.fsgid
            || self.capable(cap::SETGID)
        {
            new.fsgid = gid;
        }
        Ok(new)
    }

    /// `setgroups(list)`: `CAP_SETGID` only (`EPERM`); kept sorted.
    ///
    /// # Errors
    /// `EPERM`, `ENOMEM`.
    pub fn set_groups(&self, mut groups: Vec<u32>) -> Result<Self, Errno> {
        if !self.capable(cap::SETGID) {
            return Err(Errno::EPERM);
        }
        groups.sort_unstable();
        let mut new = self.try_clone()?;
        new.groups = groups;
        Ok(new)
    }

    /// `capset`'s new sets, if Linux's `cap_capset` allows them: the inheritable set within
    /// the old inheritable and permitted ones (any, with `CAP_SETPCAP`) and within the
    /// bounding set, the permitted set only shrinking, the effective within the new permitted.
    ///
    /// # Errors
    /// `EPERM`, `ENOMEM`.
    pub fn set_caps(&self, effective: u64, permitted: u64, inheritable: u64) -> Result<Self, Errno> {
        let within = |a: u64, b: u64| a & !b == 0;
        let (effective, permitted, inheritable) =
            (effective & cap::FULL, permitted & cap::FULL, inheritable & cap::FULL);
        if (!within(inheritable, self.cap_inheritable | self.cap_permitted) && !self.capable(cap::SETPCAP))
            || !within(inheritable, self.cap_inheritable | self.cap_bounding)
            || !within(permitted, self.cap_permitted)
            || !within(effective, permitted)
        {
            return Err(Errno::EPERM);
        }
        let mut new = self.try_clone()?;
        new.cap_effective = effective;
        new.cap_permitted = permitted;
        new.cap_inheritable = inheritable;
        Ok(new)
    }

    /// The credentials a program starts with after `execve` (Linux's `cap_bprm_creds_from_file`
    /// without file capabilities): a real or effective uid 0 is given the bounding set (with
    /// the inheritable one) as permitted, effective when the effective uid is 0; anyone else
    /// has no permitted or effective capabilities. Ids are kept (no set-user-id programs here).
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn after_exec(&self) -> Result<Self, Errno> {
        let mut new = self.try_clone()?;
        if self.uid == 0 || self.euid == 0 {
            new.cap_permitted = self.cap_bounding | self.cap_inheritable;
            new.cap_effective = if self.euid == 0 { new.cap_permitted } else { 0 };
        } else {
            new.cap_permitted = 0;
            new.cap_effective = 0;
        }
        Ok(new)
    }

    /// A copy (`ENOMEM` when the heap cannot hold its groups).
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn try_clone(&self) -> Result<Self, Errno> {
        let mut groups = Vec::new();
        groups.try_reserve_exact(self.groups.len()).map_err(|_| Errno::ENOMEM)?;
        groups.extend_from_slice(&self.groups);
        Ok(Self { groups, ..*self })
    }

    /// The capabilities after a change of user ids from `self` to `new` (Linux's
    /// `cap_emulate_setxuid`, then [`Self::fix_fsuid`]).
    fn fix_setuid(&self, mut new: Self) -> Self {
        let root = |c: &Self| c.uid == 0 || c.euid == 0 || c.suid == 0;
        if root(self) && !root(&new) {
            new.cap_permitted = 0;
            new.cap_effective = 0;
        }
        if self.euid == 0 && new.euid != 0 {
            new.cap_effective = 0;
        }
        if self.euid != 0 && new.euid == 0 {
            new.cap_effective = new.cap_permitted;
        }
        self.fix_fsuid(new)
    }

    /// The file-system capabilities after the file-system uid moved (Linux's
    /// `cap_task_fix_setuid` for `LSM_SETID_FS`).
    fn fix_fsuid(&self, mut new: Self) -> Self {
        if self.fsuid == 0 && new.fsuid != 0 {
            new.cap_effective &= !cap::FS_MASK;
        }
        if self.fsuid != 0 && new.fsuid == 0 {
            new.cap_effective |= new.cap_permitted & cap::FS_MASK;
        }
        new
    }
}

fn set(slot: &mut u32, id: u32) {
    if id != UNCHANGED {
        *slot = id;
    }
}

/// The credentials of root, shared (the first process's).
///
/// # Errors
/// `ENOMEM`.
pub fn root() -> Result<Arc<Credentials>, Errno> {
    crate::memory::fallible::arc(Credentials::root()).map_err(|_| Errno::ENOMEM)
}
