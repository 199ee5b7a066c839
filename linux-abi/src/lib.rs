//! The Linux arm64 system-call ABI as this project uses it, defined once: errno values, system-call
//! numbers and names, and the constants and structure layouts of each family of calls. The kernel,
//! `mm`, the `signal` crate and the user programs all take them from here, so a number cannot be
//! written two ways.
//!
//! Only definitions: constants, the [`errno::Errno`] type, and the byte layouts of the structures
//! the kernel copies to and from programs (each built in one place, so a layout mistake shows in a
//! host test). No dependencies, no allocation. The values are Linux's: Linux 6.1's uapi headers as
//! arm64 configures them (asm-generic, plus arm64's own `O_DIRECTORY`/`O_NOFOLLOW`/`O_DIRECT`/
//! `O_LARGEFILE`, `PROT_BTI`/`PROT_MTE` and `MINSIGSTKSZ`), and the calls added since, marked
//! with their version. `scripts/check-abi.py` checks every constant against the headers of the
//! installed cross compiler. This kernel's own extensions (`MAP_CODE`, near placement, the code
//! window) are not Linux's and live beside this crate, in `ext-abi`.
//!
//! ```
//! use linux_abi::mman::{MAP_ANONYMOUS, MAP_PRIVATE};
//! use linux_abi::{Errno, nr};
//!
//! assert_eq!(nr::MMAP, 222);
//! assert_eq!(MAP_PRIVATE | MAP_ANONYMOUS, 0x22);
//! assert_eq!(Errno::ENOMEM.as_ret(), -12);
//! assert_eq!(Errno::from_ret(-2), Some(Errno::ENOENT));
//! assert_eq!(linux_abi::syscalls::name(nr::OPENAT), Some("openat"));
//! ```
//!
//! | module | what |
//! | --- | --- |
//! | [`errno`] | [`Errno`]: every errno value, and the kernel-internal restart codes |
//! | [`syscalls`] | [`nr`]: every system-call number; [`name`](syscalls::name) |
//! | [`mman`] | `PROT_*`, `MAP_*`, `MREMAP_*`, `MADV_*`, `MS_*`, `MCL_*`, `MFD_*` |
//! | [`fcntl`] | `O_*`, `F_*`, `AT_*`, `SEEK_*`, `S_IF*`, `RENAME_*`, `STATX_*`, limits |
//! | [`clone`] | `CLONE_*` |
//! | [`signal`] | signal numbers, `SA_*`, `SIG_*`, `si_code` values, `SS_*`, `SIGEV_*` |
//! | [`futex`] | `FUTEX_*` |
//! | [`ipc`] | `IPC_*`, `SHM_*`, `struct shmid64_ds` |
//! | [`wait`] | `W*` options, `P_*` id types |
//! | [`resource`] | `RLIMIT_*`, `RUSAGE_*` |
//! | [`prctl`] | `PR_*`, `personality` values |
//! | [`auxv`] | `AT_*` auxiliary-vector keys, `HWCAP*` bits |
//! | [`sched`] | `SCHED_*`, `GRND_*`, `MEMBARRIER_*`, `RSEQ_*` |
//! | [`poll`] | `POLL*`, `EPOLL*`, `EFD_*`, `TFD_*`, `SFD_*`, `PIDFD_*` |
//! | [`time`] | clock ids, `TIMER_ABSTIME`, `ITIMER_*`, [`Timespec`](time::Timespec) and tick conversions |
//! | [`socket`] | `AF_*`, `SOCK_*`, `MSG_*`, `SOL_SOCKET` and `SO_*`, `SCM_*`, `SHUT_*` |
//! | [`termios`] | `struct termios`, its flags, the terminal `ioctl`s |
//! | [`layout`] | `struct stat`, `struct sysinfo`, `struct winsize`, `struct pollfd` |
#![no_std]
#![deny(missing_docs)]

#[cfg(test)]
extern crate std;

pub mod auxv;
pub mod clone;
pub mod errno;
pub mod fcntl;
pub mod futex;
pub mod ipc;
pub mod layout;
pub mod mman;
pub mod poll;
pub mod prctl;
pub mod resource;
pub mod sched;
pub mod signal;
pub mod socket;
pub mod syscalls;
pub mod termios;
pub mod time;
pub mod wait;

pub use errno::Errno;
pub use syscalls::nr;
