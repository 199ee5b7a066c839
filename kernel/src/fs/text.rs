//! Files whose contents are a text generated when they are first read, as Linux's `seq_file`s
//! (`/proc/self/maps`): the text is built once, at the first read (or the first read after a
//! rewind to 0), and reads then take from it at the description's position. What the text is
//! comes from the [`TextSource`] the opener gave (`procfs`), so this module needs to know nothing
//! of processes.
use alloc::boxed::Box;
use alloc::vec::Vec;
use core::fmt;
use core::sync::atomic::Ordering;

use linux_abi::Errno;
use linux_abi::fcntl::O_ACCMODE;
use linux_abi::layout::Stat;
use spin::Mutex;

use super::file::OpenFile;
use crate::memory::uaccess::copy_out;

/// What a generated file shows.
pub trait TextSource: Send + Sync {
    /// The whole text, now.
    ///
    /// # Errors
    /// `ENOMEM` when the heap cannot hold it.
    fn generate(&self) -> Result<Vec<u8>, Errno>;
    /// Its `struct stat`.
    fn stat(&self) -> Stat;
}

/// An open generated file: its source, the text once generated, and how far it was read.
pub struct Snapshot {
    source: Box<dyn TextSource>,
    /// The text, and the offset of the next read.
    state: Mutex<(Vec<u8>, usize)>,
}

impl fmt::Debug for Snapshot {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Snapshot")
    }
}

impl Snapshot {
    /// A file showing `source`.
    pub fn new(source: Box<dyn TextSource>) -> Self {
        Self { source, state: Mutex::new((Vec::new(), 0)) }
    }

    /// `read`/`readv`: the next bytes into the user buffers, 0 at the end.
    ///
    /// # Errors
    /// `ENOMEM` if the heap cannot hold the text; `EFAULT` when nothing could be copied.
    pub fn read(&self, buffers: &[(u64, u64)]) -> Result<u64, Errno> {
        let mut state = self.state.lock();
        if state.1 == 0 {
            state.0 = self.source.generate()?;
        }
        let (text, pos) = &mut *state;
        let mut done = 0usize;
        for &(base, len) in buffers {
            let take = (len as usize).min(text.len() - *pos);
            if take == 0 {
                break;
            }
            if copy_out(base, &text[*pos..*pos + take]).is_err() {
                return if done == 0 { Err(Errno::EFAULT) } else { Ok(done as u64) };
            }
            *pos += take;
            done += take;
        }
        Ok(done as u64)
    }

    /// Its `struct stat`.
    pub fn stat(&self) -> Stat {
        self.source.stat()
    }
}

/// The errno of a write to a generated file: EBADF when opened read-only, else EINVAL (Linux's
/// `vfs_write` for a file without a write method).
pub fn write_error(file: &OpenFile) -> Errno {
    let mode = file.flags.load(Ordering::Relaxed) & O_ACCMODE;
    if mode == 0 { Errno::EBADF } else { Errno::EINVAL }
}
