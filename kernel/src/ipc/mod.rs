//! System V IPC (Linux's `ipc/`): the namespace of keys and ids that `*get` looks objects up in,
//! the permission rule of `struct ipc_perm` (`ipcperms`, and who may change or remove an
//! object), and the one kind of object this kernel has, shared memory segments ([`shm`]).
//! Message queues and semaphores are not implemented (`ENOSYS`).
//!
//! Why a module of its own: the objects belong to no process (a segment outlives its creator
//! until it is removed and its last attachment gone), so their table is machine-wide, like
//! Linux's IPC namespace; the system calls (`syscall::ipc`) pass in who calls, so this module
//! needs nothing of the process layer above it. The memory side of a segment (its pages, its
//! attachments counted as mappings) is `mm::user::object`'s, as a memfd's is.
//!
//! Ids are Linux's: a slot index below [`SLOTS`] plus a sequence number times 32768
//! (`ipc_buildid`), the sequence advancing with every object made, so an id of a removed object
//! is not taken by the next one in its slot.
pub mod shm;

use linux_abi::Errno;

/// Slots of the table (`IPCMNI`): an id's low 15 bits.
pub const SLOTS: usize = 32768;

/// Who makes an IPC call: what the permission rules look at.
#[derive(Clone, Copy, Debug)]
pub struct Caller {
    /// The process (a segment's creator and last user are pids).
    pub pid: u32,
    /// Effective user id.
    pub euid: u32,
    /// Effective group id (the group Linux's `in_group_p` checks; no supplementary groups here).
    pub egid: u32,
    /// Whether the caller has root's capabilities (`CAP_IPC_OWNER`, `CAP_SYS_ADMIN`).
    pub privileged: bool,
}

/// The owner, creator and mode of an object (`struct kern_ipc_perm`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Perm {
    /// Owner's user and group ids.
    pub uid: u32,
    /// See `uid`.
    pub gid: u32,
    /// Creator's user and group ids.
    pub cuid: u32,
    /// See `cuid`.
    pub cgid: u32,
    /// The permission bits (and the object's own mode bits above them).
    pub mode: u32,
}

impl Perm {
    /// The permissions of an object `who` makes with `mode`'s permission bits.
    pub fn made_by(who: &Caller, mode: u32) -> Self {
        Self { uid: who.euid, gid: who.egid, cuid: who.euid, cgid: who.egid, mode: mode & 0o777 }
    }

    /// Linux's `ipcperms`: whether `who` has every right `flag` asks for (its `rwx` bits in any of
    /// the three places, as `shmget`'s flags and `shmat`'s `S_IRUGO | S_IWUGO` carry them),
    /// judged by the owner's bits if `who` owns or made the object, else the group's if it is
    /// in its owner's or creator's group, else the others'; root's capabilities grant all.
    pub fn permits(&self, who: &Caller, flag: u32) -> bool {
        let requested = (flag >> 6) | (flag >> 3) | flag;
        let granted = if who.euid == self.cuid || who.euid == self.uid {
            self.mode >> 6
        } else if who.egid == self.cgid || who.egid == self.gid {
            self.mode >> 3
        } else {
            self.mode
        };
        requested & !granted & 0o7 == 0 || who.privileged
    }

    /// Whether `who` may change or remove the object (`IPC_SET`, `IPC_RMID`: Linux's
    /// `ipcctl_obtain_check`): its owner, its creator, or a caller with root's capabilities.
    ///
    /// # Errors
    /// `EPERM` otherwise.
    pub fn may_change(&self, who: &Caller) -> Result<(), Errno> {
        if who.euid == self.cuid || who.euid == self.uid || who.privileged {
            Ok(())
        } else {
            Err(Errno::EPERM)
        }
    }
}

/// The slot index of id `id` (`ipcid_to_idx`), if it is a valid one.
pub fn slot_of(id: i32) -> Option<usize> {
    (id >= 0).then_some(id as usize % SLOTS)
}

/// The id of slot `slot` at sequence `seq` (`ipc_buildid`).
pub fn build_id(slot: usize, seq: u32) -> i32 {
    ((seq as usize % 65536) * SLOTS + slot) as i32
}

/// The sequence number id `id` carries.
pub fn seq_of(id: i32) -> u32 {
    (id as u32) / SLOTS as u32
}
