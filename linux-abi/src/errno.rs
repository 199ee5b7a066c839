//! Linux's errno values (asm-generic `errno-base.h` and `errno.h`, which arm64 uses unchanged),
//! the one definition every crate of the project uses: a system call returns `-errno` in x0, and
//! [`Errno`] is what the kernel's system calls and `mm`'s memory calls return as their error.
//!
//! Every value has a name (`Errno::ENOENT`), a number, and `strerror`'s text, from one table
//! below; [`consts`] holds the same constants unqualified.
//!
//! Also the kernel-internal restart codes (`ERESTARTSYS` and its kin, `include/linux/errno.h`):
//! they never reach a program (the signal code turns them into a restart or into `EINTR`), but the
//! system calls use them to say how they may be restarted, exactly as Linux's do.

/// An errno value: a system call's error, `-`[`code`](Self::code) in x0.
///
/// A newtype over the number rather than an enum, so that every value Linux can return is
/// representable (a program may be told any of them) and each is still a named constant that
/// `match` can use as a pattern.
#[derive(Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
#[repr(transparent)]
pub struct Errno(u16);

macro_rules! errnos {
    ($($name:ident = $code:literal $text:literal,)*) => {
        impl Errno {
            $(
                #[doc = concat!($text, ".")]
                pub const $name: Errno = Errno($code);
            )*
        }

        /// Every errno as a free constant, for `use linux_abi::errno::consts::*` where a list of
        /// cases reads better unqualified (errno tables in tests).
        pub mod consts {
            use super::Errno;
            $(
                #[doc = concat!($text, ".")]
                pub const $name: Errno = Errno::$name;
            )*
            /// Operation would block (an alias of `EAGAIN`).
            pub const EWOULDBLOCK: Errno = Errno::EAGAIN;
            /// Resource deadlock would occur (an alias of `EDEADLK`).
            pub const EDEADLOCK: Errno = Errno::EDEADLK;
        }

        /// Number, name and `strerror` text of every errno value, in number order (aliases left
        /// out).
        const TABLE: &[(u16, &str, &str)] = &[$(($code, stringify!($name), $text)),*];
    };
}

errnos! {
    EPERM = 1 "Operation not permitted",
    ENOENT = 2 "No such file or directory",
    ESRCH = 3 "No such process",
    EINTR = 4 "Interrupted system call",
    EIO = 5 "I/O error",
    ENXIO = 6 "No such device or address",
    E2BIG = 7 "Argument list too long",
    ENOEXEC = 8 "Exec format error",
    EBADF = 9 "Bad file number",
    ECHILD = 10 "No child processes",
    EAGAIN = 11 "Try again",
    ENOMEM = 12 "Out of memory",
    EACCES = 13 "Permission denied",
    EFAULT = 14 "Bad address",
    ENOTBLK = 15 "Block device required",
    EBUSY = 16 "Device or resource busy",
    EEXIST = 17 "File exists",
    EXDEV = 18 "Cross-device link",
    ENODEV = 19 "No such device",
    ENOTDIR = 20 "Not a directory",
    EISDIR = 21 "Is a directory",
    EINVAL = 22 "Invalid argument",
    ENFILE = 23 "File table overflow",
    EMFILE = 24 "Too many open files",
    ENOTTY = 25 "Not a typewriter",
    ETXTBSY = 26 "Text file busy",
    EFBIG = 27 "File too large",
    ENOSPC = 28 "No space left on device",
    ESPIPE = 29 "Illegal seek",
    EROFS = 30 "Read-only file system",
    EMLINK = 31 "Too many links",
    EPIPE = 32 "Broken pipe",
    EDOM = 33 "Math argument out of domain of func",
    ERANGE = 34 "Math result not representable",
    EDEADLK = 35 "Resource deadlock would occur",
    ENAMETOOLONG = 36 "File name too long",
    ENOLCK = 37 "No record locks available",
    ENOSYS = 38 "Invalid system call number",
    ENOTEMPTY = 39 "Directory not empty",
    ELOOP = 40 "Too many symbolic links encountered",
    ENOMSG = 42 "No message of desired type",
    EIDRM = 43 "Identifier removed",
    ECHRNG = 44 "Channel number out of range",
    EL2NSYNC = 45 "Level 2 not synchronized",
    EL3HLT = 46 "Level 3 halted",
    EL3RST = 47 "Level 3 reset",
    ELNRNG = 48 "Link number out of range",
    EUNATCH = 49 "Protocol driver not attached",
    ENOCSI = 50 "No CSI structure available",
    EL2HLT = 51 "Level 2 halted",
    EBADE = 52 "Invalid exchange",
    EBADR = 53 "Invalid request descriptor",
    EXFULL = 54 "Exchange full",
    ENOANO = 55 "No anode",
    EBADRQC = 56 "Invalid request code",
    EBADSLT = 57 "Invalid slot",
    EBFONT = 59 "Bad font file format",
    ENOSTR = 60 "Device not a stream",
    ENODATA = 61 "No data available",
    ETIME = 62 "Timer expired",
    ENOSR = 63 "Out of streams resources",
    ENONET = 64 "Machine is not on the network",
    ENOPKG = 65 "Package not installed",
    EREMOTE = 66 "Object is remote",
    ENOLINK = 67 "Link has been severed",
    EADV = 68 "Advertise error",
    ESRMNT = 69 "Srmount error",
    ECOMM = 70 "Communication error on send",
    EPROTO = 71 "Protocol error",
    EMULTIHOP = 72 "Multihop attempted",
    EDOTDOT = 73 "RFS specific error",
    EBADMSG = 74 "Not a data message",
    EOVERFLOW = 75 "Value too large for defined data type",
    ENOTUNIQ = 76 "Name not unique on network",
    EBADFD = 77 "File descriptor in bad state",
    EREMCHG = 78 "Remote address changed",
    ELIBACC = 79 "Can not access a needed shared library",
    ELIBBAD = 80 "Accessing a corrupted shared library",
    ELIBSCN = 81 ".lib section in a.out corrupted",
    ELIBMAX = 82 "Attempting to link in too many shared libraries",
    ELIBEXEC = 83 "Cannot exec a shared library directly",
    EILSEQ = 84 "Illegal byte sequence",
    ERESTART = 85 "Interrupted system call should be restarted",
    ESTRPIPE = 86 "Streams pipe error",
    EUSERS = 87 "Too many users",
    ENOTSOCK = 88 "Socket operation on non-socket",
    EDESTADDRREQ = 89 "Destination address required",
    EMSGSIZE = 90 "Message too long",
    EPROTOTYPE = 91 "Protocol wrong type for socket",
    ENOPROTOOPT = 92 "Protocol not available",
    EPROTONOSUPPORT = 93 "Protocol not supported",
    ESOCKTNOSUPPORT = 94 "Socket type not supported",
    EOPNOTSUPP = 95 "Operation not supported on transport endpoint",
    EPFNOSUPPORT = 96 "Protocol family not supported",
    EAFNOSUPPORT = 97 "Address family not supported by protocol",
    EADDRINUSE = 98 "Address already in use",
    EADDRNOTAVAIL = 99 "Cannot assign requested address",
    ENETDOWN = 100 "Network is down",
    ENETUNREACH = 101 "Network is unreachable",
    ENETRESET = 102 "Network dropped connection because of reset",
    ECONNABORTED = 103 "Software caused connection abort",
    ECONNRESET = 104 "Connection reset by peer",
    ENOBUFS = 105 "No buffer space available",
    EISCONN = 106 "Transport endpoint is already connected",
    ENOTCONN = 107 "Transport endpoint is not connected",
    ESHUTDOWN = 108 "Cannot send after transport endpoint shutdown",
    ETOOMANYREFS = 109 "Too many references: cannot splice",
    ETIMEDOUT = 110 "Connection timed out",
    ECONNREFUSED = 111 "Connection refused",
    EHOSTDOWN = 112 "Host is down",
    EHOSTUNREACH = 113 "No route to host",
    EALREADY = 114 "Operation already in progress",
    EINPROGRESS = 115 "Operation now in progress",
    ESTALE = 116 "Stale file handle",
    EUCLEAN = 117 "Structure needs cleaning",
    ENOTNAM = 118 "Not a XENIX named type file",
    ENAVAIL = 119 "No XENIX semaphores available",
    EISNAM = 120 "Is a named type file",
    EREMOTEIO = 121 "Remote I/O error",
    EDQUOT = 122 "Quota exceeded",
    ENOMEDIUM = 123 "No medium found",
    EMEDIUMTYPE = 124 "Wrong medium type",
    ECANCELED = 125 "Operation Canceled",
    ENOKEY = 126 "Required key not available",
    EKEYEXPIRED = 127 "Key has expired",
    EKEYREVOKED = 128 "Key has been revoked",
    EKEYREJECTED = 129 "Key was rejected by service",
    EOWNERDEAD = 130 "Owner died",
    ENOTRECOVERABLE = 131 "State not recoverable",
    ERFKILL = 132 "Operation not possible due to RF-kill",
    EHWPOISON = 133 "Memory page has hardware error",
    ERESTARTSYS = 512 "Restart the call if the handler asked for it (kernel-internal)",
    ERESTARTNOINTR = 513 "Restart the call always (kernel-internal)",
    ERESTARTNOHAND = 514 "Restart the call unless a handler ran (kernel-internal)",
    ENOIOCTLCMD = 515 "No such ioctl command (kernel-internal)",
    ERESTART_RESTARTBLOCK = 516 "Restart through restart_syscall (kernel-internal)",
}

impl Errno {
    /// Operation would block (an alias of `EAGAIN`).
    pub const EWOULDBLOCK: Errno = Errno::EAGAIN;
    /// Resource deadlock would occur (an alias of `EDEADLK`).
    pub const EDEADLOCK: Errno = Errno::EDEADLK;

    /// The positive errno number.
    pub const fn code(self) -> i32 {
        self.0 as i32
    }

    /// The system-call return value: `-errno`.
    pub const fn as_ret(self) -> i64 {
        -(self.0 as i64)
    }

    /// The errno of number `code`, if Linux defines one (1..=133 but for the unassigned 41 and
    /// 58, or a kernel-internal restart code 512..=516).
    pub const fn from_code(code: i32) -> Option<Errno> {
        match code {
            41 | 58 => None,
            1..=133 | 512..=516 => Some(Errno(code as u16)),
            _ => None,
        }
    }

    /// The errno a system-call return value carries: `Some` for every `-4095..=-1`, as a C
    /// library reads x0 (a number Linux does not assign stays an error, named `E?`).
    pub const fn from_ret(ret: i64) -> Option<Errno> {
        if ret < 0 && ret >= -4095 { Some(Errno(-ret as u16)) } else { None }
    }

    /// Whether this is a kernel-internal restart code, which a program must never see.
    pub const fn is_restart(self) -> bool {
        self.0 >= 512
    }

    fn entry(self) -> Option<&'static (u16, &'static str, &'static str)> {
        TABLE.iter().find(|e| e.0 == self.0)
    }

    /// The symbolic name (`"ENOENT"`).
    pub fn name(self) -> &'static str {
        self.entry().map_or("E?", |e| e.1)
    }

    /// What `strerror` says (`"No such file or directory"`).
    pub fn description(self) -> &'static str {
        self.entry().map_or("Unknown error", |e| e.2)
    }
}

impl core::fmt::Debug for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str(self.name())
    }
}

impl core::fmt::Display for Errno {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "{} ({})", self.name(), self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_number_from_1_to_133_has_one_name_and_round_trips() {
        assert_eq!(Errno::from_code(41), None, "unassigned");
        assert_eq!(Errno::from_code(58), None, "unassigned (EDEADLOCK is EDEADLK on arm64)");
        for code in (1..=133).filter(|c| ![41, 58].contains(c)) {
            let e = Errno::from_code(code).unwrap();
            assert_eq!(e.code(), code);
            assert_ne!(e.name(), "E?", "{code}");
            assert_eq!(Errno::from_ret(e.as_ret()), Some(e));
        }
        assert_eq!(TABLE.windows(2).filter(|w| w[0].0 >= w[1].0).count(), 0, "sorted, no duplicates");
    }

    #[test]
    fn names_values_and_aliases_are_linuxs() {
        assert_eq!(Errno::ENOENT.code(), 2);
        assert_eq!(Errno::EAGAIN.code(), 11);
        assert_eq!(Errno::EWOULDBLOCK, Errno::EAGAIN);
        assert_eq!(Errno::ENOSYS.code(), 38);
        assert_eq!(Errno::ETIMEDOUT.code(), 110);
        assert_eq!(Errno::EHWPOISON.code(), 133);
        assert_eq!(Errno::ERESTARTSYS.code(), 512);
        assert_eq!(Errno::ENOENT.name(), "ENOENT");
        assert_eq!(Errno::ENOENT.description(), "No such file or directory");
        assert_eq!(alloc_free_format(Errno::EINVAL), "EINVAL (22)");
        assert!(Errno::ERESTART_RESTARTBLOCK.is_restart() && !Errno::EINTR.is_restart());
        assert_eq!(Errno::from_code(0), None);
        assert_eq!(Errno::from_code(134), None);
        assert_eq!(Errno::from_ret(0), None);
        assert_eq!(Errno::from_ret(-4096), None);
        assert_eq!(Errno::from_ret(-41).map(Errno::code), Some(41), "still an error, unnamed");
        assert_eq!(Errno::from_ret(-41).map(Errno::name), Some("E?"));
    }

    fn alloc_free_format(e: Errno) -> std::string::String {
        std::format!("{e}")
    }
}
