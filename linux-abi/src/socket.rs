//! Sockets (`sys/socket.h`, `asm-generic/socket.h`, `linux/un.h`): address families, socket
//! types and their creation flags, message flags, `SOL_SOCKET` options, control-message types,
//! `shutdown` modes, and `struct sockaddr_un`'s sizes.

/// `AF_UNSPEC`.
pub const AF_UNSPEC: u64 = 0;
/// `AF_UNIX` (also `AF_LOCAL`): sockets on this machine.
pub const AF_UNIX: u64 = 1;
/// The first family number Linux does not know (`AF_MAX`): `EAFNOSUPPORT` for it and above.
pub const AF_MAX: u64 = 46;

/// A byte stream.
pub const SOCK_STREAM: u64 = 1;
/// Datagrams.
pub const SOCK_DGRAM: u64 = 2;
/// Raw datagrams (an `AF_UNIX` socket of this type is a datagram socket).
pub const SOCK_RAW: u64 = 3;
/// A sequenced, connection-based stream of records.
pub const SOCK_SEQPACKET: u64 = 5;
/// The bits of `type` that are the type (`SOCK_TYPE_MASK`); the rest are flags.
pub const SOCK_TYPE_MASK: u64 = 0xf;
/// `socket`/`socketpair`/`accept4` flag: close on exec (`O_CLOEXEC`).
pub const SOCK_CLOEXEC: u64 = 0o2000000;
/// `socket`/`socketpair`/`accept4` flag: non-blocking (`O_NONBLOCK`).
pub const SOCK_NONBLOCK: u64 = 0o4000;

/// `recv`: look without taking.
pub const MSG_PEEK: u64 = 2;
/// `recvmsg` result: a control message did not fit.
pub const MSG_CTRUNC: u64 = 8;
/// `recv`: return the datagram's real length; `recvmsg` result: the datagram was cut.
pub const MSG_TRUNC: u64 = 0x20;
/// Do not block.
pub const MSG_DONTWAIT: u64 = 0x40;
/// `recv`: the end of a record (`SOCK_SEQPACKET`).
pub const MSG_EOR: u64 = 0x80;
/// `recv`: wait for the whole length.
pub const MSG_WAITALL: u64 = 0x100;
/// `send`: no `SIGPIPE` on a broken connection.
pub const MSG_NOSIGNAL: u64 = 0x4000;
/// `recvmsg`: descriptors received with `SCM_RIGHTS` are close-on-exec.
pub const MSG_CMSG_CLOEXEC: u64 = 0x4000_0000;

/// The level of the socket options every socket has.
pub const SOL_SOCKET: u64 = 1;
/// `SO_DEBUG`.
pub const SO_DEBUG: u64 = 1;
/// `SO_REUSEADDR`.
pub const SO_REUSEADDR: u64 = 2;
/// The socket's type.
pub const SO_TYPE: u64 = 3;
/// The pending error, cleared when read.
pub const SO_ERROR: u64 = 4;
/// `SO_KEEPALIVE`.
pub const SO_KEEPALIVE: u64 = 9;
/// The send buffer's size.
pub const SO_SNDBUF: u64 = 7;
/// The receive buffer's size.
pub const SO_RCVBUF: u64 = 8;
/// `SO_LINGER`.
pub const SO_LINGER: u64 = 13;
/// Receive `SCM_CREDENTIALS` with each message.
pub const SO_PASSCRED: u64 = 16;
/// The peer's credentials at connection (`struct ucred`).
pub const SO_PEERCRED: u64 = 17;
/// `SO_RCVLOWAT`.
pub const SO_RCVLOWAT: u64 = 18;
/// `SO_SNDLOWAT`.
pub const SO_SNDLOWAT: u64 = 19;
/// Whether the socket listens.
pub const SO_ACCEPTCONN: u64 = 30;
/// `SO_PASSSEC`.
pub const SO_PASSSEC: u64 = 34;
/// `SO_SNDBUFFORCE`.
pub const SO_SNDBUFFORCE: u64 = 32;
/// `SO_RCVBUFFORCE`.
pub const SO_RCVBUFFORCE: u64 = 33;
/// The socket's protocol.
pub const SO_PROTOCOL: u64 = 38;
/// The socket's family.
pub const SO_DOMAIN: u64 = 39;

/// Control message: descriptors.
pub const SCM_RIGHTS: u32 = 1;
/// Control message: credentials (`struct ucred`).
pub const SCM_CREDENTIALS: u32 = 2;

/// `shutdown`: no more receptions.
pub const SHUT_RD: u64 = 0;
/// `shutdown`: no more transmissions.
pub const SHUT_WR: u64 = 1;
/// `shutdown`: neither.
pub const SHUT_RDWR: u64 = 2;

/// `listen`'s largest backlog (`net.core.somaxconn`'s default).
pub const SOMAXCONN: u64 = 4096;
/// `SCM_RIGHTS`: the most descriptors one message carries (`SCM_MAX_FD`).
pub const SCM_MAX_FD: usize = 253;
/// `sizeof(struct sockaddr_un)`: the family and 108 bytes of path.
pub const SOCKADDR_UN_SIZE: usize = 110;
/// `offsetof(struct sockaddr_un, sun_path)`.
pub const SUN_PATH_OFFSET: usize = 2;
