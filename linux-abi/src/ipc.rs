//! System V IPC and shared memory (`linux/ipc.h`, `linux/shm.h`, `asm-generic/shmbuf.h`): the key
//! and flag values of `shmget`, the commands of `shmctl`, the flags of `shmat`, and the byte layout
//! of `struct shmid64_ds` (112 bytes on a 64-bit architecture).

/// The key that names no segment: a new one every time.
pub const IPC_PRIVATE: i32 = 0;
/// `*get`: create the object if the key has none.
pub const IPC_CREAT: u32 = 0o1000;
/// `*get` with `IPC_CREAT`: fail if the key has one.
pub const IPC_EXCL: u32 = 0o2000;
/// `*ctl`: remove the object.
pub const IPC_RMID: i32 = 0;
/// `*ctl`: set the owner and mode.
pub const IPC_SET: i32 = 1;
/// `*ctl`: read the object's state.
pub const IPC_STAT: i32 = 2;
/// `*ctl`: the system's limits.
pub const IPC_INFO: i32 = 3;
/// `shmctl`: lock the segment in memory.
pub const SHM_LOCK: i32 = 11;
/// `shmctl`: unlock it.
pub const SHM_UNLOCK: i32 = 12;
/// `shmctl`: `IPC_STAT` by index.
pub const SHM_STAT: i32 = 13;
/// `shmctl`: the system's use of shared memory.
pub const SHM_INFO: i32 = 14;
/// `shmctl`: `SHM_STAT` without the read-permission check.
pub const SHM_STAT_ANY: i32 = 15;
/// `shmat`: attach read-only.
pub const SHM_RDONLY: u32 = 0o10000;
/// `shmat`: round the address down to `SHMLBA`.
pub const SHM_RND: u32 = 0o20000;
/// `shmat`: take the place of what is mapped at the address.
pub const SHM_REMAP: u32 = 0o40000;
/// `shmat`: attach executable.
pub const SHM_EXEC: u32 = 0o100000;
/// The mode bit of a segment removed while attached: it goes with its last detach.
pub const SHM_DEST: u32 = 0o1000;
/// The mode bit of a locked segment.
pub const SHM_LOCKED: u32 = 0o2000;
/// Most segments at once (`SHMMNI`).
pub const SHMMNI: u64 = 4096;
/// Smallest segment (`SHMMIN`).
pub const SHMMIN: u64 = 1;
/// Largest segment and total pages (`SHMMAX`, `SHMALL`: `ULONG_MAX - (1 << 24)`).
pub const SHMMAX: u64 = u64::MAX - (1 << 24);

/// Bytes of `struct shmid64_ds`.
pub const SHMID_DS_SIZE: usize = 112;

/// `struct shmid64_ds` (`struct ipc64_perm` then the segment's fields).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShmidDs {
    /// `shm_perm.key`.
    pub key: i32,
    /// Owner's user id.
    pub uid: u32,
    /// Owner's group id.
    pub gid: u32,
    /// Creator's user id.
    pub cuid: u32,
    /// Creator's group id.
    pub cgid: u32,
    /// Permission bits, with `SHM_DEST` and `SHM_LOCKED`.
    pub mode: u32,
    /// Slot usage sequence number.
    pub seq: u16,
    /// Size in bytes.
    pub segsz: u64,
    /// Last attach, detach and change times (seconds).
    pub atime: i64,
    /// See `atime`.
    pub dtime: i64,
    /// See `atime`.
    pub ctime: i64,
    /// Creator's pid.
    pub cpid: u32,
    /// Pid of the last `shmat`/`shmdt`.
    pub lpid: u32,
    /// Attachments.
    pub nattch: u64,
}

impl ShmidDs {
    /// The bytes a program reads.
    pub fn to_bytes(&self) -> [u8; SHMID_DS_SIZE] {
        let mut b = [0u8; SHMID_DS_SIZE];
        b[0..4].copy_from_slice(&self.key.to_le_bytes());
        b[4..8].copy_from_slice(&self.uid.to_le_bytes());
        b[8..12].copy_from_slice(&self.gid.to_le_bytes());
        b[12..16].copy_from_slice(&self.cuid.to_le_bytes());
        b[16..20].copy_from_slice(&self.cgid.to_le_bytes());
        b[20..24].copy_from_slice(&self.mode.to_le_bytes());
        b[24..26].copy_from_slice(&self.seq.to_le_bytes());
        b[48..56].copy_from_slice(&self.segsz.to_le_bytes());
        b[56..64].copy_from_slice(&self.atime.to_le_bytes());
        b[64..72].copy_from_slice(&self.dtime.to_le_bytes());
        b[72..80].copy_from_slice(&self.ctime.to_le_bytes());
        b[80..84].copy_from_slice(&self.cpid.to_le_bytes());
        b[84..88].copy_from_slice(&self.lpid.to_le_bytes());
        b[88..96].copy_from_slice(&self.nattch.to_le_bytes());
        b
    }

    /// Reads what `IPC_SET` takes from a program's bytes: the owner and the mode.
    pub fn from_bytes(b: &[u8; SHMID_DS_SIZE]) -> Self {
        let u32_at = |at: usize| u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]]);
        Self { uid: u32_at(4), gid: u32_at(8), mode: u32_at(20), ..Self::default() }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shmid64_ds_layout() {
        let ds = ShmidDs {
            key: 0x5eed,
            uid: 1,
            mode: 0o640 | SHM_DEST,
            segsz: 10000,
            cpid: 7,
            nattch: 2,
            ..ShmidDs::default()
        };
        let b = ds.to_bytes();
        assert_eq!(&b[0..4], &0x5eed_i32.to_le_bytes());
        assert_eq!(&b[20..24], &(0o1640u32).to_le_bytes());
        assert_eq!(&b[48..56], &10000u64.to_le_bytes());
        assert_eq!(&b[80..84], &7u32.to_le_bytes());
        assert_eq!(&b[88..96], &2u64.to_le_bytes());
        assert_eq!((ShmidDs::from_bytes(&b).uid, ShmidDs::from_bytes(&b).mode), (1, 0o1640));
    }
}
