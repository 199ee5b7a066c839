//! The byte layouts of the structures the kernel writes for programs, Linux arm64 (LP64,
//! asm-generic): `struct stat`, `struct sysinfo`, `struct winsize`, `struct pollfd`. Each is built
//! into a byte array in one place, so a layout mistake shows in a host test rather than as a
//! program that misreads a field.
use crate::poll;
use crate::time::Timespec;

/// The fields of `struct stat` (asm-generic `stat.h`) this kernel fills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Stat {
    /// Device of the containing file system.
    pub dev: u64,
    /// Inode number.
    pub ino: u64,
    /// Type and permissions.
    pub mode: u32,
    /// Links.
    pub nlink: u32,
    /// Owner.
    pub uid: u32,
    /// Group.
    pub gid: u32,
    /// The device this file is (character and block devices).
    pub rdev: u64,
    /// Size in bytes.
    pub size: i64,
    /// Preferred I/O size.
    pub blksize: i32,
    /// 512-byte blocks.
    pub blocks: i64,
    /// Last access, modification, status change.
    pub times: [Timespec; 3],
}

/// `sizeof(struct stat)` on arm64.
pub const STAT_SIZE: usize = 128;

impl Stat {
    /// The 128 bytes: dev 0, ino 8, mode 16, nlink 20, uid 24, gid 28, rdev 32, size 48,
    /// blksize 56, blocks 64, atime 72, mtime 88, ctime 104.
    pub fn to_bytes(&self) -> [u8; STAT_SIZE] {
        let mut b = [0u8; STAT_SIZE];
        b[0..8].copy_from_slice(&self.dev.to_le_bytes());
        b[8..16].copy_from_slice(&self.ino.to_le_bytes());
        b[16..20].copy_from_slice(&self.mode.to_le_bytes());
        b[20..24].copy_from_slice(&self.nlink.to_le_bytes());
        b[24..28].copy_from_slice(&self.uid.to_le_bytes());
        b[28..32].copy_from_slice(&self.gid.to_le_bytes());
        b[32..40].copy_from_slice(&self.rdev.to_le_bytes());
        b[48..56].copy_from_slice(&self.size.to_le_bytes());
        b[56..60].copy_from_slice(&self.blksize.to_le_bytes());
        b[64..72].copy_from_slice(&self.blocks.to_le_bytes());
        for (i, t) in self.times.iter().enumerate() {
            b[72 + i * 16..88 + i * 16].copy_from_slice(&t.to_bytes());
        }
        b
    }
}

/// Linux's `new_encode_dev` for `st_rdev` (major 8 bits at 8..19, minor split around it).
pub const fn encode_dev(major: u32, minor: u32) -> u64 {
    ((minor & 0xff) | (major << 8) | ((minor & !0xff) << 12)) as u64
}

/// Linux's `new_decode_dev` (userspace's `major`/`minor`): the major and minor of an `st_dev`
/// or `st_rdev` made by [`encode_dev`].
pub const fn decode_dev(dev: u64) -> (u32, u32) {
    let major = ((dev >> 8) & 0xfff) | ((dev >> 32) & !0xfff);
    let minor = (dev & 0xff) | ((dev >> 12) & !0xff);
    (major as u32, minor as u32)
}

/// The fields of `struct sysinfo` this kernel fills.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sysinfo {
    /// Seconds since boot.
    pub uptime: i64,
    /// Total usable RAM in `mem_unit`s.
    pub totalram: u64,
    /// Free RAM.
    pub freeram: u64,
    /// Number of current threads (`procs` counts tasks).
    pub procs: u16,
}

/// `sizeof(struct sysinfo)` on a 64-bit kernel.
pub const SYSINFO_SIZE: usize = 112;

impl Sysinfo {
    /// The 112 bytes: uptime 0, loads 8..32, totalram 32, freeram 40, sharedram 48, bufferram 56,
    /// totalswap 64, freeswap 72, procs 80, totalhigh 88, freehigh 96, mem_unit 104 (1 here).
    pub fn to_bytes(&self) -> [u8; SYSINFO_SIZE] {
        let mut b = [0u8; SYSINFO_SIZE];
        b[0..8].copy_from_slice(&self.uptime.to_le_bytes());
        b[32..40].copy_from_slice(&self.totalram.to_le_bytes());
        b[40..48].copy_from_slice(&self.freeram.to_le_bytes());
        b[80..82].copy_from_slice(&self.procs.to_le_bytes());
        b[104..108].copy_from_slice(&1u32.to_le_bytes());
        b
    }
}

/// `struct winsize`: rows, columns, and pixel sizes (four `u16`s).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Winsize {
    /// Rows.
    pub rows: u16,
    /// Columns.
    pub cols: u16,
    /// Width in pixels.
    pub xpixel: u16,
    /// Height in pixels.
    pub ypixel: u16,
}

impl Winsize {
    /// The 8 bytes.
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        for (i, v) in [self.rows, self.cols, self.xpixel, self.ypixel].into_iter().enumerate() {
            b[i * 2..i * 2 + 2].copy_from_slice(&v.to_le_bytes());
        }
        b
    }

    /// From the user's 8 bytes.
    pub fn from_bytes(b: [u8; 8]) -> Self {
        let f = |i: usize| u16::from_le_bytes([b[i * 2], b[i * 2 + 1]]);
        Self { rows: f(0), cols: f(1), xpixel: f(2), ypixel: f(3) }
    }
}

/// `struct pollfd { int fd; short events; short revents; }`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PollFd {
    /// The descriptor (negative: ignored).
    pub fd: i32,
    /// What the caller waits for.
    pub events: u16,
    /// What happened.
    pub revents: u16,
}

impl PollFd {
    /// From the user's 8 bytes.
    pub fn from_bytes(b: [u8; 8]) -> Self {
        Self {
            fd: i32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            events: u16::from_le_bytes([b[4], b[5]]),
            revents: u16::from_le_bytes([b[6], b[7]]),
        }
    }

    /// The 8 bytes.
    pub fn to_bytes(self) -> [u8; 8] {
        let mut b = [0u8; 8];
        b[..4].copy_from_slice(&self.fd.to_le_bytes());
        b[4..6].copy_from_slice(&self.events.to_le_bytes());
        b[6..].copy_from_slice(&self.revents.to_le_bytes());
        b
    }

    /// `revents` for a descriptor that is `ready` (a subset of POLLIN | POLLOUT | ...): what was
    /// asked for, plus the conditions always reported (Linux `vfs_poll` masked by
    /// `events | POLLERR | POLLHUP`).
    pub fn answer(events: u16, ready: u16) -> u16 {
        ready & (events | poll::POLLERR | poll::POLLHUP | poll::POLLNVAL)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fcntl::S_IFCHR;

    fn u32_at(b: &[u8], at: usize) -> u32 {
        u32::from_le_bytes(b[at..at + 4].try_into().unwrap())
    }
    fn u64_at(b: &[u8], at: usize) -> u64 {
        u64::from_le_bytes(b[at..at + 8].try_into().unwrap())
    }

    #[test]
    fn stat_fields_sit_at_the_arm64_offsets() {
        let s = Stat {
            dev: 1,
            ino: 2,
            mode: S_IFCHR | 0o620,
            nlink: 3,
            uid: 4,
            gid: 5,
            rdev: encode_dev(5, 1),
            size: 6,
            blksize: 1024,
            blocks: 7,
            times: [
                Timespec { sec: 8, nsec: 9 },
                Timespec { sec: 10, nsec: 11 },
                Timespec { sec: 12, nsec: 13 },
            ],
        };
        let b = s.to_bytes();
        assert_eq!((u64_at(&b, 0), u64_at(&b, 8)), (1, 2));
        assert_eq!(u32_at(&b, 16), 0o020_620);
        assert_eq!((u32_at(&b, 20), u32_at(&b, 24), u32_at(&b, 28)), (3, 4, 5));
        assert_eq!(u64_at(&b, 32), 0x501);
        assert_eq!((u64_at(&b, 48), u32_at(&b, 56), u64_at(&b, 64)), (6, 1024, 7));
        assert_eq!((u64_at(&b, 72), u64_at(&b, 80), u64_at(&b, 88), u64_at(&b, 96)), (8, 9, 10, 11));
        assert_eq!((u64_at(&b, 104), u64_at(&b, 112)), (12, 13));
        assert_eq!(&b[120..], &[0; 8]);
    }

    #[test]
    fn device_numbers_encode_like_new_encode_dev() {
        assert_eq!(encode_dev(5, 1), 0x501); // /dev/console
        assert_eq!(encode_dev(4, 64), 0x440); // /dev/ttyS0
        assert_eq!(encode_dev(204, 64), 0xcc40); // /dev/ttyAMA0
        assert_eq!(encode_dev(1, 0x123), 0x10_0123);
    }

    #[test]
    fn sysinfo_fields_sit_at_the_lp64_offsets() {
        let b = Sysinfo { uptime: 9, totalram: 1 << 30, freeram: 1 << 29, procs: 3 }.to_bytes();
        assert_eq!(u64_at(&b, 0), 9);
        assert_eq!((u64_at(&b, 32), u64_at(&b, 40)), (1 << 30, 1 << 29));
        assert_eq!(u16::from_le_bytes([b[80], b[81]]), 3);
        assert_eq!(u32_at(&b, 104), 1);
    }

    #[test]
    fn winsize_and_pollfd_round_trip() {
        let w = Winsize { rows: 24, cols: 80, xpixel: 1, ypixel: 2 };
        assert_eq!(Winsize::from_bytes(w.to_bytes()), w);
        assert_eq!(w.to_bytes()[..4], [24, 0, 80, 0]);
        let p = PollFd { fd: -1, events: poll::POLLIN, revents: poll::POLLNVAL };
        assert_eq!(PollFd::from_bytes(p.to_bytes()), p);
    }

    #[test]
    fn poll_answers_what_was_asked_plus_the_conditions_always_reported() {
        use poll::*;
        assert_eq!(PollFd::answer(POLLIN, POLLIN | POLLOUT), POLLIN);
        assert_eq!(PollFd::answer(0, POLLIN | POLLOUT), 0);
        assert_eq!(PollFd::answer(0, POLLNVAL), POLLNVAL);
        assert_eq!(PollFd::answer(POLLOUT, POLLHUP | POLLOUT), POLLHUP | POLLOUT);
    }
}
