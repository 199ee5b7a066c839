//! eventfd, after Linux's fs/eventfd.c: a 64-bit counter behind a descriptor. A write of 8
//! bytes adds its value (waiting while the sum would pass `0xffff_ffff_ffff_fffe`); a read of 8
//! bytes takes the whole count, or 1 in semaphore mode, waiting while it is 0. Readable while
//! the count is not 0, writable while it is below the largest. Each change notifies the
//! counter's key with the readiness it may have made (`POLLIN` after a write, `POLLOUT` after a
//! read), so blocked readers and writers, polls and epolls wake.
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::any::Any;

use linux_abi::Errno;
use linux_abi::layout::Stat;
use linux_abi::poll::{EFD_CLOEXEC, EFD_NONBLOCK, EFD_SEMAPHORE, POLLIN, POLLOUT, POLLRDNORM, POLLWRNORM};
use spin::Mutex;

use super::file::{FdTable, File, FileError, Io, IoResult};
use crate::memory::fallible;

/// The largest count (`ULLONG_MAX - 1`): a write that would pass it waits.
const MAX_COUNT: u64 = u64::MAX - 1;

/// An eventfd's counter.
pub struct EventFd {
    count: Mutex<u64>,
    semaphore: bool,
}

impl EventFd {
    /// The kernel-event key of the counter.
    fn key(&self) -> usize {
        core::ptr::from_ref(self) as usize | 1
    }
}

/// `eventfd2(initval, flags)` into `files`: the new descriptor.
///
/// # Errors
/// `EINVAL` (an unknown flag), `EMFILE`, `ENOMEM`.
pub fn eventfd2(files: &Mutex<FdTable>, initval: u64, flags: u64) -> Result<u64, Errno> {
    if flags & !(EFD_SEMAPHORE | EFD_CLOEXEC | EFD_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    // The initial value is an `unsigned int`.
    let counter =
        EventFd { count: Mutex::new(u64::from(initval as u32)), semaphore: flags & EFD_SEMAPHORE != 0 };
    let file: Arc<dyn File> = fallible::arc(counter).map_err(|_| Errno::ENOMEM)?;
    super::anon::install(files, file, (flags & EFD_NONBLOCK) as u32, flags)
}

impl File for EventFd {
    fn read(&self, io: Io<'_>) -> IoResult {
        if io.len() < 8 {
            return Err(Errno::EINVAL.into());
        }
        let value = {
            let mut count = self.count.lock();
            if *count == 0 {
                return Err(FileError::WouldBlock(self.key()));
            }
            let take = if self.semaphore { 1 } else { *count };
            *count -= take;
            take
        };
        crate::sched::notify_poll(self.key(), POLLOUT | POLLWRNORM);
        // A fault copying it out loses the count, as on Linux (the read had taken it).
        io.scatter(&value.to_le_bytes()).map(|_| 8)
    }

    fn write(&self, io: Io<'_>, progress: &mut u64, sigpipe: &dyn Fn()) -> IoResult {
        let _ = (progress, sigpipe);
        if io.len() < 8 {
            return Err(Errno::EINVAL.into());
        }
        let (mut chunk, mut bytes) = ([0u8; 8], [0u8; 8]);
        let mut at = 0;
        io.gather(&mut chunk, 0, &mut |chunk| {
            let take = chunk.len().min(8 - at);
            bytes[at..at + take].copy_from_slice(&chunk[..take]);
            at += take;
            Ok(take)
        })?;
        let value = u64::from_le_bytes(bytes);
        if value == u64::MAX {
            return Err(Errno::EINVAL.into());
        }
        {
            let mut count = self.count.lock();
            if MAX_COUNT - *count < value {
                return Err(FileError::WouldBlock(self.key()));
            }
            *count += value;
        }
        if value != 0 {
            crate::sched::notify_poll(self.key(), POLLIN | POLLRDNORM);
        }
        Ok(8)
    }

    fn poll(&self) -> (u16, usize) {
        let count = *self.count.lock();
        let mut ready = 0;
        if count > 0 {
            ready |= POLLIN | POLLRDNORM;
        }
        if count < MAX_COUNT {
            ready |= POLLOUT | POLLWRNORM;
        }
        (ready, self.key())
    }

    fn stat(&self) -> Result<Stat, Errno> {
        Ok(super::anon::stat())
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        super::anon::describe("eventfd")
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
