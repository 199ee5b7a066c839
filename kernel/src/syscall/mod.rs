//! System calls: Linux arm64's numbers, Linux's errno values in Linux's order, and this kernel's
//! extensions (`ext-abi`).
//!
//! [`table`] is the one table from number to handler; the handlers live in one file per family.
//! Every user pointer goes through `memory::uaccess` (EFAULT, never a kernel fault; a page not
//! yet touched is demand-paged first), and no argument value can make the kernel panic: anything
//! not understood is EINVAL or ENOSYS, as Linux answers.
//! - [`cred`]: user and group ids (the rules are `fs::cred`'s);
//! - [`files`]: descriptors: reads, writes, `fcntl`, `ioctl`, `fstat`, `lseek`, truncation;
//! - [`paths`]: the calls that name files by path (open, make, remove, rename, stat, chdir);
//! - [`poll`]: `ppoll` and `pselect6`;
//! - [`events`]: epoll, eventfd, timerfd, signalfd, the pidfd calls, `membarrier`, `rseq`,
//!   capabilities;
//! - [`memory`]: `mmap` and the other memory calls (the rules are `mm`'s);
//! - [`signals`]: actions, masks, sending, waiting, `rt_sigreturn`;
//! - [`time`]: clocks and sleeps;
//! - [`futex`]: futexes and robust lists;
//! - [`ipc`]: System V shared memory;
//! - [`net`]: the socket calls (`AF_UNIX`);
//! - [`process`]: threads, exit, identity, limits, affinity, `prctl`, `uname`, `getrandom`.
pub mod cred;
pub mod events;
pub mod files;
pub mod futex;
pub mod ipc;
pub mod memory;
pub mod net;
pub mod paths;
pub mod poll;
pub mod process;
pub mod signals;
pub mod table;
pub mod time;
