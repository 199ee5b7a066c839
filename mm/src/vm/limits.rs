//! Resource limits (`getrlimit`, `setrlimit`, `prlimit64`) with Linux's values and rules, and the
//! thread limit Linux derives from the size of memory.
//!
//! Why here: the rules (`soft <= hard`, raising a hard limit needs `CAP_SYS_RESOURCE`, the
//! `RLIMIT_NOFILE` ceiling, the defaults of the first process) are pure logic, so they are
//! host-tested next to the mapping code that enforces `RLIMIT_AS` and `RLIMIT_DATA`
//! ([`super::VmMap::set_rlimits`]). The kernel keeps one [`Rlimits`] per process and copies the
//! two memory limits into its [`super::VmMap`] whenever they change.
//!
//! What is enforced: `RLIMIT_AS` and `RLIMIT_DATA` (by the map); the thread count (by the
//! kernel, with [`max_threads`], Linux's `threads-max`). Stored and reported only:
//! `RLIMIT_STACK` (the initial stack is one fixed 8 MiB mapping, which is the default limit, and
//! nothing grows), `RLIMIT_NPROC` (Linux exempts root, which every program here is) and the rest.
use super::Errno;

pub use linux_abi::resource::RLIM_INFINITY;

/// Linux's resource numbers (defined in `linux_abi::resource`).
pub mod resource {
    pub use linux_abi::resource::{
        RLIM_NLIMITS, RLIMIT_AS, RLIMIT_CORE, RLIMIT_CPU, RLIMIT_DATA, RLIMIT_FSIZE, RLIMIT_LOCKS,
        RLIMIT_MEMLOCK, RLIMIT_MSGQUEUE, RLIMIT_NICE, RLIMIT_NOFILE, RLIMIT_NPROC, RLIMIT_RSS, RLIMIT_RTPRIO,
        RLIMIT_RTTIME, RLIMIT_SIGPENDING, RLIMIT_STACK,
    };
}
use resource::*;

/// Linux's `sysctl_nr_open` default: the highest hard `RLIMIT_NOFILE`.
pub const NR_OPEN: u64 = 1 << 20;

/// One limit (`struct rlimit64`: soft, then hard).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(C)]
pub struct Rlimit {
    /// The soft limit, the one enforced.
    pub cur: u64,
    /// The hard limit, the ceiling for the soft one.
    pub max: u64,
}

impl Rlimit {
    /// No limit.
    pub const INFINITY: Rlimit = Rlimit { cur: RLIM_INFINITY, max: RLIM_INFINITY };

    /// The 16 bytes user space reads (`struct rlimit64`, little-endian).
    pub fn to_bytes(self) -> [u8; 16] {
        let mut out = [0; 16];
        out[..8].copy_from_slice(&self.cur.to_le_bytes());
        out[8..].copy_from_slice(&self.max.to_le_bytes());
        out
    }

    /// From the 16 bytes user space wrote.
    pub fn from_bytes(bytes: [u8; 16]) -> Rlimit {
        let (cur, max) = bytes.split_at(8);
        let word = |b: &[u8]| b.try_into().map_or(0, u64::from_le_bytes);
        Rlimit { cur: word(cur), max: word(max) }
    }
}

/// Linux's `threads-max` (`set_max_threads` in kernel/fork.c): the thread structures may use at
/// most an eighth of memory, counting `THREAD_SIZE` per thread, clamped to 20..=`FUTEX_TID_MASK`.
/// `ram_pages` is the machine's frame count. On arm64 `THREAD_SIZE` is 16 KiB, or one page when
/// pages are larger (`THREAD_SHIFT` is `PAGE_SHIFT` then, with `CONFIG_VMAP_STACK` as Debian
/// builds it: arch/arm64/include/asm/memory.h): 64 KiB with 64 KiB pages.
pub const fn max_threads(ram_pages: u64) -> u64 {
    const THREAD_SIZE: u64 = if super::PAGE > 16 << 10 { super::PAGE } else { 16 << 10 };
    const MIN_THREADS: u64 = 20;
    const MAX_THREADS: u64 = 0x3fff_ffff;
    let threads = ram_pages.saturating_mul(super::PAGE) / (THREAD_SIZE * 8);
    if threads < MIN_THREADS {
        MIN_THREADS
    } else if threads > MAX_THREADS {
        MAX_THREADS
    } else {
        threads
    }
}

/// Every limit of one process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rlimits([Rlimit; RLIM_NLIMITS as usize]);

impl Rlimits {
    /// The limits of Linux's first process (`INIT_RLIMITS`, with `RLIMIT_NPROC` and
    /// `RLIMIT_SIGPENDING` set from `threads-max` as `fork_init` does).
    pub const fn init(ram_pages: u64) -> Rlimits {
        const INF: Rlimit = Rlimit::INFINITY;
        let half = max_threads(ram_pages) / 2;
        let mut l = [INF; RLIM_NLIMITS as usize];
        l[RLIMIT_STACK as usize] = Rlimit { cur: 8 << 20, max: RLIM_INFINITY };
        l[RLIMIT_CORE as usize] = Rlimit { cur: 0, max: RLIM_INFINITY };
        l[RLIMIT_NPROC as usize] = Rlimit { cur: half, max: half };
        l[RLIMIT_NOFILE as usize] = Rlimit { cur: 1024, max: 4096 };
        l[RLIMIT_MEMLOCK as usize] = Rlimit { cur: 8 << 20, max: 8 << 20 };
        l[RLIMIT_SIGPENDING as usize] = Rlimit { cur: half, max: half };
        l[RLIMIT_MSGQUEUE as usize] = Rlimit { cur: 819_200, max: 819_200 };
        l[RLIMIT_NICE as usize] = Rlimit { cur: 0, max: 0 };
        l[RLIMIT_RTPRIO as usize] = Rlimit { cur: 0, max: 0 };
        Rlimits(l)
    }

    /// One limit (`RLIM_INFINITY` for a number out of range; callers check it first).
    pub fn get(&self, resource: u32) -> Rlimit {
        self.0.get(resource as usize).copied().unwrap_or(Rlimit::INFINITY)
    }

    /// Linux's `do_prlimit`: returns the old value of `resource` and, if `new` is given, sets
    /// it. `privileged` is `CAP_SYS_RESOURCE` (needed to raise a hard limit).
    ///
    /// # Errors
    /// In Linux's order: `EINVAL` an unknown resource, or a soft limit above the hard one;
    /// `EPERM` a hard `RLIMIT_NOFILE` above `nr_open`, or raising a hard limit unprivileged.
    /// Nothing changes on error.
    pub fn prlimit(&mut self, resource: u32, new: Option<Rlimit>, privileged: bool) -> Result<Rlimit, Errno> {
        if resource >= RLIM_NLIMITS {
            return Err(Errno::EINVAL);
        }
        let slot = &mut self.0[resource as usize];
        let old = *slot;
        if let Some(new) = new {
            if new.cur > new.max {
                return Err(Errno::EINVAL);
            }
            if resource == RLIMIT_NOFILE && new.max > NR_OPEN {
                return Err(Errno::EPERM);
            }
            if new.max > old.max && !privileged {
                return Err(Errno::EPERM);
            }
            *slot = new;
        }
        Ok(old)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 512 MiB of RAM in the build's pages.
    const RAM_512M: u64 = (512 << 20) / crate::vm::PAGE;

    #[test]
    fn the_first_process_has_linux_defaults() {
        let l = Rlimits::init(RAM_512M);
        assert_eq!(l.get(RLIMIT_STACK), Rlimit { cur: 8 << 20, max: RLIM_INFINITY });
        assert_eq!(l.get(RLIMIT_AS), Rlimit::INFINITY);
        assert_eq!(l.get(RLIMIT_DATA), Rlimit::INFINITY);
        assert_eq!(l.get(RLIMIT_NOFILE), Rlimit { cur: 1024, max: 4096 });
        // threads-max for 512 MiB is 4096 (1024 with 64 KiB pages): RLIMIT_NPROC is half of it.
        let threads = crate::test_support::per_granule(4096, 4096, 1024);
        assert_eq!(max_threads(RAM_512M), threads);
        assert_eq!(l.get(RLIMIT_NPROC), Rlimit { cur: threads / 2, max: threads / 2 });
    }

    #[test]
    fn threads_max_as_linux_sets_it() {
        // 128 MiB / (8 * THREAD_SIZE): 16 KiB stacks with 4 and 16 KiB pages, 64 KiB with 64 KiB.
        let per_128m = crate::test_support::per_granule(1024, 1024, 256);
        assert_eq!(max_threads((128 << 20) / crate::vm::PAGE), per_128m, "128 MiB");
        assert_eq!(max_threads(0), 20, "MIN_THREADS");
        assert_eq!(max_threads(u64::MAX), 0x3fff_ffff, "FUTEX_TID_MASK");
    }

    #[test]
    fn prlimit_rules_in_linux_order() {
        use linux_abi::errno::consts::*;
        let mut l = Rlimits::init(RAM_512M);
        let lim = |cur, max| Some(Rlimit { cur, max });
        assert_eq!(l.prlimit(RLIM_NLIMITS, None, true), Err(EINVAL), "unknown resource");
        assert_eq!(l.prlimit(u32::MAX, lim(1, 0), true), Err(EINVAL), "unknown before soft > hard");
        assert_eq!(l.prlimit(RLIMIT_AS, lim(2, 1), true), Err(EINVAL), "soft above hard");
        assert_eq!(l.prlimit(RLIMIT_NOFILE, lim(1, NR_OPEN + 1), true), Err(EPERM), "nr_open");
        assert_eq!(l.prlimit(RLIMIT_NOFILE, lim(10, 100), false), Ok(Rlimit { cur: 1024, max: 4096 }));
        assert_eq!(l.prlimit(RLIMIT_NOFILE, lim(10, 200), false), Err(EPERM), "raising hard needs privilege");
        assert_eq!(l.get(RLIMIT_NOFILE), Rlimit { cur: 10, max: 100 }, "nothing changed on error");
        assert_eq!(l.prlimit(RLIMIT_NOFILE, lim(10, 200), true), Ok(Rlimit { cur: 10, max: 100 }));
        assert_eq!(l.prlimit(RLIMIT_AS, lim(64 << 20, RLIM_INFINITY), false), Ok(Rlimit::INFINITY));
        assert_eq!(l.prlimit(RLIMIT_AS, None, false), Ok(Rlimit { cur: 64 << 20, max: RLIM_INFINITY }));
        // Lowering both is always allowed; raising the soft one up to the hard one too.
        assert_eq!(l.prlimit(RLIMIT_DATA, lim(0, 1 << 20), false), Ok(Rlimit::INFINITY));
        assert!(l.prlimit(RLIMIT_DATA, lim(1 << 20, 1 << 20), false).is_ok());
        assert_eq!(l.prlimit(RLIMIT_DATA, lim(2 << 20, 2 << 20), false), Err(EPERM));
    }

    #[test]
    fn rlimit64_bytes_round_trip() {
        let r = Rlimit { cur: 0x0102_0304_0506_0708, max: RLIM_INFINITY };
        let b = r.to_bytes();
        assert_eq!(b[0], 0x08);
        assert_eq!(&b[8..], &[0xff; 8]);
        assert_eq!(Rlimit::from_bytes(b), r);
    }
}
