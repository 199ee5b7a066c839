//! The socket calls (`socket`, `socketpair`, `bind`, `listen`, `accept`, `accept4`, `connect`,
//! `getsockname`, `getpeername`, `sendto`, `recvfrom`, `sendmsg`, `recvmsg`, `shutdown`,
//! `getsockopt`, `setsockopt`) over the `AF_UNIX` sockets of `fs::socket`, in Linux's order of
//! checks (net/socket.c, then net/unix/af_unix.c): the descriptor (`EBADF`, `ENOTSOCK`), the
//! flags, the address, then the socket's state. Other families are `EAFNOSUPPORT`, as on a
//! Linux built without them.
//!
//! This layer is where a socket meets a process: it installs accepted sockets and received
//! descriptors in the caller's table, sends `SIGPIPE` for a broken stream, and makes the socket
//! node a path `bind` names. A call that may wait reads the kernel-event count first and blocks
//! on the key the socket names, unless the description has `O_NONBLOCK` or the call
//! `MSG_DONTWAIT` (`EAGAIN`).
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::fcntl::{O_NONBLOCK, O_RDWR};
use linux_abi::socket::*;
use vfs::node::FileType;

use crate::arch::aarch64::exception::TrapFrame;
use crate::fs::file::{FdEntry, FileError, Io, Offset, OpenFile};
use crate::fs::socket::{Kind, Name, Socket, Ucred};
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::process::Process;
use crate::sched::{Action, Wait, WaitFor};

/// The socket behind descriptor `fd`, with its description: `EBADF`, `ENOTSOCK`.
fn socket_of(p: &Process, fd: u64) -> Result<(Arc<OpenFile>, Arc<Socket>), Errno> {
    let f = p.posix.files.lock().file(fd)?;
    let any: Arc<dyn core::any::Any + Send + Sync> = f.file.clone();
    let s = any.downcast::<Socket>().map_err(|_| Errno::ENOTSOCK)?;
    Ok((f, s))
}

/// The credentials a socket of `p` carries (`SO_PEERCRED`: pid, effective ids).
fn ucred(p: &Process) -> Ucred {
    let c = p.posix.cred();
    Ucred { pid: p.pid, uid: c.euid, gid: c.egid }
}

/// The kind and flags of `type`, after the family and protocol, in Linux's order
/// (`__sys_socket`, `__sock_create`, `unix_create`).
fn kind_of(domain: u64, ty: u64, protocol: u64) -> Result<(Kind, u64), Errno> {
    let flags = ty & !SOCK_TYPE_MASK;
    if flags & !(SOCK_CLOEXEC | SOCK_NONBLOCK) != 0 {
        return Err(Errno::EINVAL);
    }
    let domain = domain as u32 as u64;
    if domain >= AF_MAX {
        return Err(Errno::EAFNOSUPPORT);
    }
    let ty = ty & SOCK_TYPE_MASK;
    // Past SOCK_PACKET (`SOCK_MAX`); 0 is a type no family has (`ESOCKTNOSUPPORT` below).
    if ty > 10 {
        return Err(Errno::EINVAL);
    }
    if domain != AF_UNIX {
        return Err(Errno::EAFNOSUPPORT);
    }
    if protocol as u32 != 0 && protocol as u32 as u64 != AF_UNIX {
        return Err(Errno::EPROTONOSUPPORT);
    }
    let kind = match ty {
        SOCK_STREAM => Kind::Stream,
        SOCK_DGRAM | SOCK_RAW => Kind::Dgram,
        SOCK_SEQPACKET => Kind::SeqPacket,
        _ => return Err(Errno::ESOCKTNOSUPPORT),
    };
    Ok((kind, flags))
}

/// A descriptor entry for socket `s` with `flags` (`SOCK_NONBLOCK`, `SOCK_CLOEXEC`).
fn entry(s: Arc<Socket>, flags: u64) -> Result<FdEntry, Errno> {
    let status = if flags & SOCK_NONBLOCK != 0 { O_NONBLOCK } else { 0 };
    let file: Arc<dyn crate::fs::file::File> = s;
    let open = fallible::arc(OpenFile::new(file, O_RDWR | status)).map_err(|_| Errno::ENOMEM)?;
    Ok(FdEntry { file: open, cloexec: flags & SOCK_CLOEXEC != 0 })
}

/// `socket(domain, type, protocol)`.
pub fn socket(p: &Process, domain: u64, ty: u64, protocol: u64) -> Result<u64, Errno> {
    let (kind, flags) = kind_of(domain, ty, protocol)?;
    let e = entry(Socket::new(kind, ucred(p))?, flags)?;
    let r = p.posix.files.lock().install_lowest(0, e.clone());
    drop(e);
    r.map(|fd| fd as u64)
}

/// `socketpair(domain, type, protocol, sv)`: `EFAULT` leaves no descriptor (Linux copies the
/// numbers out before it installs them).
pub fn socketpair(p: &Process, domain: u64, ty: u64, protocol: u64, sv: u64) -> Result<u64, Errno> {
    let (kind, flags) = kind_of(domain, ty, protocol)?;
    let (a, b) = Socket::pair(kind, ucred(p))?;
    let (ea, eb) = (entry(a, flags)?, entry(b, flags)?);
    let mut table = p.posix.files.lock();
    let fa = table.install_lowest(0, ea.clone())?;
    let fb = match table.install_lowest(0, eb.clone()) {
        Ok(fb) => fb,
        Err(e) => {
            let closed = table.close(fa as u64);
            drop(table);
            drop(closed);
            return Err(e);
        }
    };
    drop(table);
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&(fa as u32).to_le_bytes());
    out[4..].copy_from_slice(&(fb as u32).to_le_bytes());
    if copy_out(sv, &out).is_err() {
        let mut table = p.posix.files.lock();
        let closed = (table.close(fa as u64), table.close(fb as u64));
        drop(table);
        drop(closed);
        return Err(Errno::EFAULT);
    }
    drop((ea, eb));
    Ok(0)
}

/// An address as the caller gave it: nothing (family only), an abstract name, or a path.
enum Addr {
    Unnamed,
    Abstract(Vec<u8>),
    Path(Vec<u8>),
}

/// Reads a `sockaddr_un` of `len` bytes (Linux's `move_addr_to_kernel` and
/// `unix_validate_addr`): `EINVAL` for a length past `sizeof(struct sockaddr_storage)` or
/// negative, `EFAULT`, then `EINVAL` for another family or a length of at most the family's.
/// `family_only` allows the family alone (`bind`'s autobind).
fn read_addr(addr: u64, len: u64, family_only: bool) -> Result<Addr, Errno> {
    let len = len as u32 as i32;
    if !(0..=128).contains(&len) {
        return Err(Errno::EINVAL);
    }
    let len = len as usize;
    let mut buf = [0u8; 128];
    copy_in(&mut buf[..len], addr).map_err(|_| Errno::EFAULT)?;
    let family = u16::from_le_bytes([buf[0], buf[1]]);
    if family_only && len == SUN_PATH_OFFSET && u64::from(family) == AF_UNIX {
        return Ok(Addr::Unnamed);
    }
    if len <= SUN_PATH_OFFSET || len > SOCKADDR_UN_SIZE || u64::from(family) != AF_UNIX {
        return Err(Errno::EINVAL);
    }
    let path = &buf[SUN_PATH_OFFSET..len];
    if path[0] == 0 {
        return Ok(Addr::Abstract(crate::fs::copy_bytes(&path[1..])?));
    }
    let end = path.iter().position(|&b| b == 0).unwrap_or(path.len());
    Ok(Addr::Path(crate::fs::copy_bytes(&path[..end])?))
}

/// The name an address refers to (`connect`, `sendto`): a path is looked up (its errors, then
/// `ECONNREFUSED` for a node that is not a socket).
fn name_of(p: &Process, addr: Addr) -> Result<Name, Errno> {
    match addr {
        Addr::Unnamed => Err(Errno::EINVAL),
        Addr::Abstract(n) => Ok(Name::Abstract(n)),
        Addr::Path(path) => {
            let node = super::paths::node_at(p, linux_abi::fcntl::AT_FDCWD as u64, &path, true)?;
            if node.metadata().kind != FileType::Socket {
                return Err(Errno::ECONNREFUSED);
            }
            Ok(Name::Path(path, node))
        }
    }
}

/// Writes `name` as a `sockaddr_un` to `addr`, its length to `lenp` (Linux's
/// `move_addr_to_user`: `EINVAL` for a negative length; the name cut to the room given, the
/// full length reported). `addr == 0`: nothing.
fn write_addr(name: Option<&Name>, addr: u64, lenp: u64) -> Result<(), Errno> {
    if addr == 0 {
        return Ok(());
    }
    let mut b = [0u8; 4];
    copy_in(&mut b, lenp).map_err(|_| Errno::EFAULT)?;
    let room = i32::from_le_bytes(b);
    if room < 0 {
        return Err(Errno::EINVAL);
    }
    let mut out = Vec::new();
    if let Some(name) = name {
        let path = name.sun_path()?;
        out.try_reserve(SUN_PATH_OFFSET + path.len()).map_err(|_| Errno::ENOMEM)?;
        out.extend_from_slice(&(AF_UNIX as u16).to_le_bytes());
        out.extend_from_slice(&path);
    }
    let n = out.len().min(room as usize);
    copy_out(addr, &out[..n]).map_err(|_| Errno::EFAULT)?;
    copy_out(lenp, &(out.len() as u32).to_le_bytes()).map_err(|_| Errno::EFAULT)
}

/// Numbers for names `bind` of the family alone gives (Linux's `unix_autobind`: five hex
/// digits in the abstract namespace).
static AUTOBIND: core::sync::atomic::AtomicU32 = core::sync::atomic::AtomicU32::new(1);

/// `bind(fd, addr, len)`.
pub fn bind(p: &Process, fd: u64, addr: u64, len: u64) -> Result<u64, Errno> {
    let (_, arc) = socket_of(p, fd)?;
    let s = &arc;
    match read_addr(addr, len, true)? {
        Addr::Unnamed => {
            if s.is_bound() {
                return Err(Errno::EINVAL);
            }
            loop {
                let n = AUTOBIND.fetch_add(1, core::sync::atomic::Ordering::Relaxed) & 0xfffff;
                let mut name = Vec::new();
                crate::fs::file::push_fmt(&mut name, format_args!("{n:05x}"))?;
                match arc.bind(Name::Abstract(name)) {
                    Err(Errno::EADDRINUSE) => continue,
                    r => return r.map(|()| 0),
                }
            }
        }
        Addr::Abstract(n) => arc.bind(Name::Abstract(n)).map(|()| 0),
        Addr::Path(path) => {
            let node = super::paths::make_socket_node(p, &path).map_err(|e| match e {
                Errno::EEXIST => Errno::EADDRINUSE,
                e => e,
            })?;
            arc.bind(Name::Path(path, node)).map(|()| 0)
        }
    }
}

/// `listen(fd, backlog)`: the backlog clamped to `SOMAXCONN`.
pub fn listen(p: &Process, fd: u64, backlog: u64) -> Result<u64, Errno> {
    let (_, s) = socket_of(p, fd)?;
    let backlog = (backlog as u32 as i32).max(0) as u64;
    s.listen(backlog.min(SOMAXCONN) as usize).map(|()| 0)
}

/// What a call that may wait decided.
fn finish(frame: &mut TrapFrame, nonblock: bool, generation: u32, r: Result<u64, FileError>) -> Action {
    match r {
        Ok(n) => Action::reply(frame, Ok(n)),
        Err(FileError::Errno(e)) => Action::reply(frame, Err(e)),
        Err(FileError::WouldBlock(_)) if nonblock => Action::reply(frame, Err(Errno::EAGAIN)),
        Err(FileError::WouldBlock(key)) => {
            Action::Block(Wait { what: WaitFor::Event { key, generation }, deadline: None })
        }
    }
}

/// `accept4(fd, addr, lenp, flags)` (`accept`: flags 0).
pub fn accept4(p: &Process, frame: &mut TrapFrame, fd: u64, addr: u64, lenp: u64, flags: u64) -> Action {
    let generation = crate::sched::event_generation();
    let r = (|| -> Result<u64, FileError> {
        if flags & !(SOCK_CLOEXEC | SOCK_NONBLOCK) != 0 {
            return Err(Errno::EINVAL.into());
        }
        let (_, s) = socket_of(p, fd)?;
        let new = s.accept()?;
        let peer = new.peer_name().unwrap_or(Name::Unnamed);
        let e = entry(new, flags)?;
        let r = p.posix.files.lock().install_lowest(0, e.clone());
        drop(e);
        let n = r?;
        if let Err(err) = write_addr(Some(&peer), addr, lenp) {
            let closed = p.posix.files.lock().close(n as u64);
            drop(closed);
            return Err(err.into());
        }
        Ok(n as u64)
    })();
    let nonblock = nonblock_of(p, fd, 0);
    finish(frame, nonblock, generation, r)
}

/// Whether a wait on `fd` is refused: `O_NONBLOCK` on it, or `MSG_DONTWAIT` in `flags`.
fn nonblock_of(p: &Process, fd: u64, flags: u64) -> bool {
    flags & MSG_DONTWAIT != 0 || p.posix.files.lock().file(fd).is_ok_and(|f| f.flags() & O_NONBLOCK != 0)
}

/// `connect(fd, addr, len)`.
pub fn connect(p: &Process, frame: &mut TrapFrame, fd: u64, addr: u64, len: u64) -> Action {
    let generation = crate::sched::event_generation();
    let r = (|| -> Result<u64, FileError> {
        let (_, s) = socket_of(p, fd)?;
        let name = name_of(p, read_addr(addr, len, false)?)?;
        s.connect(&name, ucred(p)).map(|()| 0)
    })();
    finish(frame, nonblock_of(p, fd, 0), generation, r)
}

/// `getsockname` (`peer` false) and `getpeername`.
pub fn getname(p: &Process, fd: u64, addr: u64, lenp: u64, peer: bool) -> Result<u64, Errno> {
    let (_, s) = socket_of(p, fd)?;
    let name = if peer { s.peer_name()? } else { s.name()? };
    // `addr == 0` is EFAULT for these two calls (Linux copies to it unconditionally).
    if addr == 0 {
        return Err(Errno::EFAULT);
    }
    write_addr(Some(&name), addr, lenp).map(|()| 0)
}

/// `shutdown(fd, how)`.
pub fn shutdown(p: &Process, fd: u64, how: u64) -> Result<u64, Errno> {
    let (_, s) = socket_of(p, fd)?;
    s.shutdown(how).map(|()| 0)
}

/// What a send sends: the buffers, the destination, the descriptions passed.
struct Outgoing {
    buffers: Vec<(u64, u64)>,
    to: Option<Addr>,
    fds: Vec<Arc<OpenFile>>,
}

/// A send of `out` on `fd` with `flags` (`MSG_DONTWAIT`; `MSG_NOSIGNAL`: no `SIGPIPE` for a
/// broken stream).
fn send(
    p: &Process,
    frame: &mut TrapFrame,
    progress: &mut u64,
    fd: u64,
    out: Outgoing,
    flags: u64,
) -> Action {
    let generation = crate::sched::event_generation();
    let nonblock = nonblock_of(p, fd, flags);
    let Outgoing { buffers, to, mut fds } = out;
    let r = (|| -> Result<u64, FileError> {
        let (_, s) = socket_of(p, fd)?;
        let to = match to {
            Some(a) => Some(name_of(p, a)?),
            None => None,
        };
        let io = Io::user(&buffers, Offset::At(0), false, nonblock);
        let r = crate::fs::socket::send_io(&s, &io, &mut fds, to.as_ref(), progress);
        if r == Err(FileError::Errno(Errno::EPIPE)) && s.kind() == Kind::Stream && flags & MSG_NOSIGNAL == 0 {
            let info =
                ::signal::info::SigInfo::sent(::signal::num::SIGPIPE, ::signal::num::SI_USER, p.pid, 0);
            crate::process::signals::send_to_process(p, info);
        }
        r
    })();
    drop(fds);
    finish(frame, nonblock, generation, r)
}

/// `sendto(fd, buf, len, flags, addr, addrlen)`.
pub fn sendto(p: &Process, frame: &mut TrapFrame, progress: &mut u64, a: [u64; 6]) -> Action {
    let (fd, buf, len, flags, addr, alen) = (a[0], a[1], a[2], a[3], a[4], a[5]);
    if let Err(e) = socket_of(p, fd) {
        return Action::reply(frame, Err(e));
    }
    let to = if addr != 0 {
        match read_addr(addr, alen, false) {
            Ok(a) => Some(a),
            Err(e) => return Action::reply(frame, Err(e)),
        }
    } else {
        None
    };
    let mut buffers = Vec::new();
    if buffers.try_reserve(1).is_err() {
        return Action::reply(frame, Err(Errno::ENOMEM));
    }
    buffers.push((buf, len.min(0x7fff_f000)));
    send(p, frame, progress, fd, Outgoing { buffers, to, fds: Vec::new() }, flags)
}

/// `struct msghdr` on arm64.
struct MsgHdr {
    name: u64,
    namelen: u32,
    iov: u64,
    iovlen: u64,
    control: u64,
    controllen: u64,
}

fn read_msghdr(msg: u64) -> Result<MsgHdr, Errno> {
    let mut b = [0u8; 56];
    copy_in(&mut b, msg).map_err(|_| Errno::EFAULT)?;
    let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap_or_default());
    Ok(MsgHdr {
        name: u64_at(0),
        namelen: u32::from_le_bytes(b[8..12].try_into().unwrap_or_default()),
        iov: u64_at(16),
        iovlen: u64_at(24),
        control: u64_at(32),
        controllen: u64_at(40),
    })
}

/// The descriptions a `sendmsg`'s control messages pass (Linux's `__scm_send`: levels other
/// than `SOL_SOCKET` skipped; `EINVAL` for a bad header, an unknown type or more than
/// `SCM_MAX_FD`; `EBADF` for a descriptor not open).
fn read_control(p: &Process, control: u64, len: u64) -> Result<Vec<Arc<OpenFile>>, Errno> {
    let mut fds = Vec::new();
    if len > i32::MAX as u64 {
        return Err(Errno::ENOBUFS);
    }
    let mut at = 0u64;
    while len - at >= 16 {
        let mut h = [0u8; 16];
        copy_in(&mut h, control + at).map_err(|_| Errno::EFAULT)?;
        let clen = u64::from_le_bytes(h[..8].try_into().unwrap_or_default());
        let level = u32::from_le_bytes(h[8..12].try_into().unwrap_or_default());
        let ty = u32::from_le_bytes(h[12..16].try_into().unwrap_or_default());
        if clen < 16 || clen > len - at {
            return Err(Errno::EINVAL);
        }
        if u64::from(level) == SOL_SOCKET {
            match ty {
                SCM_RIGHTS => {
                    let n = ((clen - 16) / 4) as usize;
                    if n == 0 || n > SCM_MAX_FD || fds.len() + n > SCM_MAX_FD {
                        return Err(Errno::EINVAL);
                    }
                    fds.try_reserve(n).map_err(|_| Errno::ENOMEM)?;
                    for i in 0..n {
                        let mut b = [0u8; 4];
                        copy_in(&mut b, control + at + 16 + 4 * i as u64).map_err(|_| Errno::EFAULT)?;
                        let fd = i32::from_le_bytes(b);
                        if fd < 0 {
                            return Err(Errno::EBADF);
                        }
                        fds.push(p.posix.files.lock().file(fd as u64)?);
                    }
                }
                // Credentials the sender may claim: its own (checked by Linux's
                // `scm_check_creds`; passed on here as the socket's).
                SCM_CREDENTIALS => {
                    if clen != 16 + 12 {
                        return Err(Errno::EINVAL);
                    }
                }
                _ => return Err(Errno::EINVAL),
            }
        }
        at += (clen + 7) & !7;
        if at >= len {
            break;
        }
    }
    Ok(fds)
}

/// `sendmsg(fd, msg, flags)`.
pub fn sendmsg(
    p: &Process,
    frame: &mut TrapFrame,
    progress: &mut u64,
    fd: u64,
    msg: u64,
    flags: u64,
) -> Action {
    let prepared = (|| -> Result<Outgoing, Errno> {
        socket_of(p, fd)?;
        let h = read_msghdr(msg)?;
        let to = if h.name != 0 && h.namelen != 0 {
            Some(read_addr(h.name, u64::from(h.namelen), false)?)
        } else {
            None
        };
        let buffers = super::files::read_iovec(h.iov, h.iovlen, Errno::EMSGSIZE)?;
        let fds = if h.controllen > 0 { read_control(p, h.control, h.controllen)? } else { Vec::new() };
        Ok(Outgoing { buffers, to, fds })
    })();
    match prepared {
        Ok(out) => send(p, frame, progress, fd, out, flags),
        Err(e) => Action::reply(frame, Err(e)),
    }
}

/// A receive into `buffers`: the count (the full length with `MSG_TRUNC`), and what came.
fn recv(
    p: &Process,
    fd: u64,
    buffers: &[(u64, u64)],
    flags: u64,
) -> Result<(u64, crate::fs::socket::Received, Kind), FileError> {
    let (_, s) = socket_of(p, fd)?;
    let io = Io::user(buffers, Offset::At(0), false, false);
    let got = s.recv(&io, flags & MSG_PEEK != 0)?;
    let n = if flags & MSG_TRUNC != 0 && s.kind() != Kind::Stream { got.full } else { got.copied };
    Ok((n as u64, got, s.kind()))
}

/// `recvfrom(fd, buf, len, flags, addr, lenp)`.
pub fn recvfrom(p: &Process, frame: &mut TrapFrame, a: [u64; 6]) -> Action {
    let (fd, buf, len, flags, addr, lenp) = (a[0], a[1], a[2], a[3], a[4], a[5]);
    let generation = crate::sched::event_generation();
    let buffers = [(buf, len.min(0x7fff_f000))];
    let r = recv(p, fd, &buffers, flags).and_then(|(n, got, _)| {
        // Descriptions sent with it and not asked for are closed (dropped), as Linux's.
        write_addr(got.from.as_ref().filter(|n| !matches!(n, Name::Unnamed)), addr, lenp)
            .or_else(|e| if got.from.is_none() { Ok(()) } else { Err(e) })?;
        if addr != 0 && got.from.as_ref().is_none_or(|n| matches!(n, Name::Unnamed)) {
            copy_out(lenp, &0u32.to_le_bytes()).map_err(|_| Errno::EFAULT)?;
        }
        Ok(n)
    });
    finish(frame, nonblock_of(p, fd, flags), generation, r)
}

/// `recvmsg(fd, msg, flags)`: the data, the sender's name, and the control messages
/// (`SCM_CREDENTIALS` with `SO_PASSCRED`, then `SCM_RIGHTS`: the descriptions installed,
/// close-on-exec with `MSG_CMSG_CLOEXEC`; those that do not fit are closed, `MSG_CTRUNC`).
pub fn recvmsg(p: &Process, frame: &mut TrapFrame, fd: u64, msg: u64, flags: u64) -> Action {
    let generation = crate::sched::event_generation();
    let r = (|| -> Result<u64, FileError> {
        socket_of(p, fd)?;
        let h = read_msghdr(msg)?;
        let buffers = super::files::read_iovec(h.iov, h.iovlen, Errno::EMSGSIZE)?;
        let (n, got, kind) = recv(p, fd, &buffers, flags)?;
        // Linux's `____sys_recvmsg` starts `msg_flags` from the call's `MSG_CMSG_CLOEXEC`.
        let mut msg_flags = flags & MSG_CMSG_CLOEXEC;
        if kind != Kind::Stream && got.full > got.copied {
            msg_flags |= MSG_TRUNC;
        }
        // The name.
        let named = got.from.as_ref().filter(|n| !matches!(n, Name::Unnamed));
        let mut namelen = 0u32;
        if h.name != 0
            && let Some(name) = named
        {
            let path = name.sun_path()?;
            let mut out = Vec::new();
            out.try_reserve(SUN_PATH_OFFSET + path.len()).map_err(|_| Errno::ENOMEM)?;
            out.extend_from_slice(&(AF_UNIX as u16).to_le_bytes());
            out.extend_from_slice(&path);
            let k = out.len().min(h.namelen as usize);
            copy_out(h.name, &out[..k]).map_err(|_| Errno::EFAULT)?;
            namelen = out.len() as u32;
        }
        // The control messages.
        let mut used = 0u64;
        let (_, s) = socket_of(p, fd)?;
        if s.passcred(None) {
            if h.controllen - used >= 16 + 12 {
                let mut c = [0u8; 32];
                c[..8].copy_from_slice(&28u64.to_le_bytes());
                c[8..12].copy_from_slice(&(SOL_SOCKET as u32).to_le_bytes());
                c[12..16].copy_from_slice(&SCM_CREDENTIALS.to_le_bytes());
                c[16..20].copy_from_slice(&got.cred.pid.to_le_bytes());
                c[20..24].copy_from_slice(&got.cred.uid.to_le_bytes());
                c[24..28].copy_from_slice(&got.cred.gid.to_le_bytes());
                copy_out(h.control, &c[..28]).map_err(|_| Errno::EFAULT)?;
                used = 32.min(h.controllen);
            } else {
                msg_flags |= MSG_CTRUNC;
            }
        }
        if !got.fds.is_empty() {
            let room = h.controllen.saturating_sub(used);
            let fit = if room >= 16 { ((room - 16) / 4) as usize } else { 0 };
            let k = fit.min(got.fds.len());
            if k < got.fds.len() {
                msg_flags |= MSG_CTRUNC;
            }
            if k > 0 {
                let cloexec = flags & MSG_CMSG_CLOEXEC != 0;
                let mut numbers = Vec::new();
                numbers.try_reserve(k).map_err(|_| Errno::ENOMEM)?;
                let mut table = p.posix.files.lock();
                for file in &got.fds[..k] {
                    match table.install_lowest(0, FdEntry { file: file.clone(), cloexec }) {
                        Ok(n) => numbers.push(n as u32),
                        Err(_) => {
                            msg_flags |= MSG_CTRUNC;
                            break;
                        }
                    }
                }
                drop(table);
                let clen = 16 + 4 * numbers.len() as u64;
                let mut c = Vec::new();
                c.try_reserve(clen as usize).map_err(|_| Errno::ENOMEM)?;
                c.extend_from_slice(&clen.to_le_bytes());
                c.extend_from_slice(&(SOL_SOCKET as u32).to_le_bytes());
                c.extend_from_slice(&SCM_RIGHTS.to_le_bytes());
                for n in &numbers {
                    c.extend_from_slice(&n.to_le_bytes());
                }
                copy_out(h.control + used, &c).map_err(|_| Errno::EFAULT)?;
                used += ((clen + 7) & !7).min(room);
            }
        }
        drop(got.fds);
        // msg_namelen, msg_controllen, msg_flags.
        copy_out(msg + 8, &namelen.to_le_bytes()).map_err(|_| Errno::EFAULT)?;
        copy_out(msg + 40, &used.to_le_bytes()).map_err(|_| Errno::EFAULT)?;
        copy_out(msg + 48, &(msg_flags as u32).to_le_bytes()).map_err(|_| Errno::EFAULT)?;
        Ok(n)
    })();
    finish(frame, nonblock_of(p, fd, flags), generation, r)
}

/// `getsockopt(fd, level, name, value, lenp)`: the `SOL_SOCKET` options; others
/// `EOPNOTSUPP` (Linux's answer for a level an `AF_UNIX` socket has no handler for).
pub fn getsockopt(p: &Process, fd: u64, level: u64, name: u64, value: u64, lenp: u64) -> Result<u64, Errno> {
    let (_, s) = socket_of(p, fd)?;
    if level as u32 as u64 != SOL_SOCKET {
        return Err(Errno::EOPNOTSUPP);
    }
    let mut b = [0u8; 4];
    copy_in(&mut b, lenp).map_err(|_| Errno::EFAULT)?;
    let len = i32::from_le_bytes(b);
    if len < 0 {
        return Err(Errno::EINVAL);
    }
    let int = |v: u32| -> [u8; 12] {
        let mut o = [0u8; 12];
        o[..4].copy_from_slice(&v.to_le_bytes());
        o
    };
    let (bytes, size) = match name as u32 as u64 {
        SO_TYPE => (int(s.kind().number() as u32), 4),
        SO_ERROR => (int(s.take_error().map_or(0, |e| e.code() as u32)), 4),
        SO_SNDBUF => (int(s.buffer(true, None) as u32), 4),
        SO_RCVBUF => (int(s.buffer(false, None) as u32), 4),
        SO_PASSCRED => (int(u32::from(s.passcred(None))), 4),
        SO_ACCEPTCONN => (int(u32::from(s.listening())), 4),
        SO_DOMAIN => (int(AF_UNIX as u32), 4),
        SO_PROTOCOL | SO_DEBUG | SO_REUSEADDR | SO_KEEPALIVE | SO_PASSSEC => (int(0), 4),
        SO_RCVLOWAT | SO_SNDLOWAT => (int(1), 4),
        SO_PEERCRED => {
            // No peer: the "nobody" credentials (pid 0, overflow uid and gid), as Linux.
            let c = s.peer_cred().unwrap_or(Ucred { pid: 0, uid: 65534, gid: 65534 });
            let mut o = [0u8; 12];
            o[..4].copy_from_slice(&c.pid.to_le_bytes());
            o[4..8].copy_from_slice(&c.uid.to_le_bytes());
            o[8..].copy_from_slice(&c.gid.to_le_bytes());
            (o, 12)
        }
        _ => return Err(Errno::ENOPROTOOPT),
    };
    let n = (len as usize).min(size);
    copy_out(value, &bytes[..n]).map_err(|_| Errno::EFAULT)?;
    copy_out(lenp, &(n as u32).to_le_bytes()).map_err(|_| Errno::EFAULT)?;
    Ok(0)
}

/// `setsockopt(fd, level, name, value, len)`: the `SOL_SOCKET` options an `AF_UNIX` socket
/// keeps (buffer sizes, `SO_PASSCRED`) or accepts as Linux does without effect here.
pub fn setsockopt(p: &Process, fd: u64, level: u64, name: u64, value: u64, len: u64) -> Result<u64, Errno> {
    let (_, s) = socket_of(p, fd)?;
    if level as u32 as u64 != SOL_SOCKET {
        return Err(Errno::EOPNOTSUPP);
    }
    if (len as u32) < 4 {
        return Err(Errno::EINVAL);
    }
    let mut b = [0u8; 4];
    copy_in(&mut b, value).map_err(|_| Errno::EFAULT)?;
    let v = i32::from_le_bytes(b);
    match name as u32 as u64 {
        SO_SNDBUF | SO_SNDBUFFORCE => {
            s.buffer(true, Some(v.max(0) as usize));
        }
        SO_RCVBUF | SO_RCVBUFFORCE => {
            s.buffer(false, Some(v.max(0) as usize));
        }
        SO_PASSCRED => {
            s.passcred(Some(v != 0));
        }
        SO_DEBUG | SO_REUSEADDR | SO_KEEPALIVE | SO_PASSSEC | SO_RCVLOWAT | SO_SNDLOWAT | SO_LINGER => {}
        SO_TYPE | SO_ERROR | SO_PEERCRED | SO_ACCEPTCONN | SO_DOMAIN | SO_PROTOCOL => {
            return Err(Errno::ENOPROTOOPT);
        }
        _ => return Err(Errno::ENOPROTOOPT),
    }
    Ok(0)
}
