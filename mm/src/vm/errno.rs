//! Linux's errno values (one definition for the whole kernel), so that the system-call layer returns `-(errno as i64)` unchanged and a
//! program sees what it would see on Linux.

/// An error of a memory-management system call, with Linux's (asm-generic) numeric value.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(i32)]
pub enum Errno {
    /// Operation not permitted (a fixed mapping below `mmap_min_addr`).
    EPERM = 1,
    /// No such process (or thread).
    ESRCH = 3,
    /// Bad file descriptor.
    EBADF = 9,
    /// Try again (a futex word that no longer holds the expected value).
    EAGAIN = 11,
    /// Out of memory / address space, or a hole in the range.
    ENOMEM = 12,
    /// Permission denied (W^X, or an executable mapping outside the code window in strict mode).
    EACCES = 13,
    /// Bad address (`MADV_POPULATE_*` on pages without the needed access).
    EFAULT = 14,
    /// Device or resource busy (resizing a code window that holds mappings).
    EBUSY = 16,
    /// The range is occupied (`MAP_FIXED_NOREPLACE`).
    EEXIST = 17,
    /// The file cannot be mapped.
    ENODEV = 19,
    /// Invalid argument.
    EINVAL = 22,
    /// Function not implemented.
    ENOSYS = 38,
    /// Offset plus length overflows.
    EOVERFLOW = 75,
    /// Operation not supported (`MAP_SHARED_VALIDATE` with an unknown flag).
    EOPNOTSUPP = 95,
    /// A wait timed out (futex).
    ETIMEDOUT = 110,
}

impl Errno {
    /// The positive errno number.
    pub const fn code(self) -> i32 {
        self as i32
    }

    /// The system-call return value: `-errno`.
    pub const fn as_ret(self) -> i64 {
        -(self as i32 as i64)
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{self:?} ({})", *self as i32)
    }
}
