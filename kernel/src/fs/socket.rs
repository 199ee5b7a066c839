//! `AF_UNIX` sockets, after Linux's net/unix/af_unix.c: stream, datagram and sequenced-packet
//! sockets on this machine, each an open file (`read`, `write`, `poll`, `fstat` as `S_IFSOCK`).
//!
//! - Every socket owns its receive queue of messages; a sender puts its message into its peer's
//!   queue. A message carries its bytes, the descriptions passed with `SCM_RIGHTS` (held by the
//!   queue while in flight), the sender's credentials and, for datagrams, the sender's name.
//!   Stream reads join messages (but stop after one that carried descriptions, as Linux does);
//!   datagram and seqpacket reads take one message each, cut to the buffer (`MSG_TRUNC`).
//! - A socket knows its peer by a weak reference, so a connected pair is no reference cycle: a
//!   socket lives as long as an open file description (or a listener's backlog) holds it, and its
//!   end drops its queue, with any descriptions in flight in it, and tells its peer (a stream or
//!   seqpacket peer is shut down both ways: end of file, `EPIPE`, `POLLHUP`).
//! - Cycles of sockets held only by each other's queues (a socket sent over itself, or each end
//!   of a pair sent over the pair, then closed) are collected as Linux's garbage collector
//!   (net/unix/garbage.c) does: when a socket ends, and when a send of descriptions finds many
//!   sockets with descriptions in flight, the sockets that only in-flight descriptions hold and
//!   that no socket held otherwise reaches have their queues dropped.
//! - A queue is limited as Linux's default send buffer is (`sk_sndbuf`, 212992 bytes): a
//!   message counts its bytes and an overhead (Linux's `skb` truesize, approximated), and a
//!   sender waits while its peer's queue is full. A stream write blocks until all of it is in,
//!   keeping its count across restarts as a pipe's write does.
//! - Names: a path (a socket node made by `bind`, found again by `connect`), or an abstract
//!   name (`sun_path[0] == 0`), or none. Bound names are kept in one table of weak references.
//! - `connect` to a listener makes the server's socket at once and queues it on the listener's
//!   backlog, as Linux does; `accept` takes it from there.
//!
//! Waits use kernel events: a connected pair shares one event key (the connecting side's
//! address, tagged), notified on every change of either side; an unconnected or listening
//! socket uses its own.
//!
//! Below `process`: the calls that install descriptors or send `SIGPIPE` get what they need
//! from the system-call layer (`syscall::net`).
use alloc::collections::VecDeque;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::any::Any;
use core::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use linux_abi::Errno;
use linux_abi::fcntl::S_IFSOCK;
use linux_abi::layout::Stat;
use linux_abi::poll::{POLLERR, POLLHUP, POLLIN, POLLOUT, POLLRDHUP, POLLRDNORM, POLLWRBAND, POLLWRNORM};
use linux_abi::socket::{SOCK_DGRAM, SOCK_SEQPACKET, SOCK_STREAM};
use linux_abi::time::Timespec;
use spin::Mutex;
use vfs::node::Inode;

use super::file::{File, FileError, Io, IoResult, OpenFile, push_fmt};
use crate::memory::fallible;

/// A socket's send buffer (Linux's `sysctl_wmem_default`): the most its peer's queue holds.
pub const SNDBUF: usize = 212_992;
/// What `SO_RCVBUF` reports by default (`sysctl_rmem_default`).
pub const RCVBUF: usize = 212_992;
/// The overhead a message counts against the buffer besides its bytes (an `skb`'s truesize
/// beyond its data, as Linux accounts it for a small message).
const MSG_OVERHEAD: usize = 768;
/// `sk_shutdown` bits.
const RCV_SHUTDOWN: u8 = 1;
const SEND_SHUTDOWN: u8 = 2;

/// Inode numbers of sockets (sockfs's `get_next_ino`).
static NEXT_INO: AtomicU64 = AtomicU64::new(0x8000);

/// The kind of socket.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `SOCK_STREAM`.
    Stream,
    /// `SOCK_DGRAM`.
    Dgram,
    /// `SOCK_SEQPACKET`.
    SeqPacket,
}

impl Kind {
    /// The `SOCK_*` number.
    pub fn number(self) -> u64 {
        match self {
            Self::Stream => SOCK_STREAM,
            Self::Dgram => SOCK_DGRAM,
            Self::SeqPacket => SOCK_SEQPACKET,
        }
    }

    /// Whether it has connections (stream and seqpacket).
    fn connected_kind(self) -> bool {
        self != Self::Dgram
    }
}

/// A socket's name.
pub enum Name {
    /// None (`sockaddr_un` of the family alone).
    Unnamed,
    /// An abstract name: the bytes after the leading 0.
    Abstract(Vec<u8>),
    /// A path name, as given to `bind`, and the socket node it made (held, so its identity is
    /// not another node's while the name is bound).
    Path(Vec<u8>, Arc<dyn Inode>),
}

impl PartialEq for Name {
    /// Two path names are the same when they name the same node, however they were written.
    fn eq(&self, other: &Self) -> bool {
        match (self, other) {
            (Self::Unnamed, Self::Unnamed) => true,
            (Self::Abstract(a), Self::Abstract(b)) => a == b,
            (Self::Path(_, a), Self::Path(_, b)) => Arc::ptr_eq(a, b),
            _ => false,
        }
    }
}

impl Name {
    /// The `sun_path` bytes `getsockname` reports (without the family): a path with its NUL,
    /// an abstract name with its leading 0.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn sun_path(&self) -> Result<Vec<u8>, Errno> {
        let mut out = Vec::new();
        match self {
            Self::Unnamed => {}
            Self::Abstract(n) => {
                out.try_reserve(n.len() + 1).map_err(|_| Errno::ENOMEM)?;
                out.push(0);
                out.extend_from_slice(n);
            }
            Self::Path(p, _) => {
                out.try_reserve(p.len() + 1).map_err(|_| Errno::ENOMEM)?;
                out.extend_from_slice(p);
                out.push(0);
            }
        }
        Ok(out)
    }

    fn try_clone(&self) -> Result<Self, Errno> {
        Ok(match self {
            Self::Unnamed => Self::Unnamed,
            Self::Abstract(n) => Self::Abstract(super::copy_bytes(n)?),
            Self::Path(p, node) => Self::Path(super::copy_bytes(p)?, node.clone()),
        })
    }
}

/// Credentials as `SO_PEERCRED` and `SCM_CREDENTIALS` give them.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Ucred {
    /// Process id.
    pub pid: u32,
    /// User id.
    pub uid: u32,
    /// Group id.
    pub gid: u32,
}

/// One message in a receive queue.
struct Msg {
    data: Vec<u8>,
    /// Bytes of `data` already read (a stream's partly read message).
    read: usize,
    /// Descriptions passed with it (`SCM_RIGHTS`), taken by the read that reaches it.
    fds: Vec<Arc<OpenFile>>,
    /// The sender's name (the `recvfrom`/`recvmsg` address).
    from: Option<Name>,
    /// The sender's credentials (`SCM_CREDENTIALS` with `SO_PASSCRED`).
    cred: Ucred,
}

impl Msg {
    fn truesize(&self) -> usize {
        self.data.len() + MSG_OVERHEAD
    }
}

enum Role {
    /// Neither listening nor connected.
    Idle,
    /// Listening: the backlog of connected server sockets not yet accepted, and its limit.
    Listening(VecDeque<Arc<Socket>>, usize),
    /// Connected (streams and seqpackets: for life; datagrams: a default destination).
    Connected(Weak<Socket>),
}

struct State {
    role: Role,
    name: Name,
    /// Messages to read, oldest first, and the buffer they use.
    queue: VecDeque<Msg>,
    used: usize,
    /// `sk_shutdown`.
    shutdown: u8,
    /// A pending error (`SO_ERROR`, `ECONNRESET`), taken by the next read or `SO_ERROR`.
    error: Option<Errno>,
    /// The peer's credentials at connection (`SO_PEERCRED`).
    peer_cred: Option<Ucred>,
    /// The stream was connected once (an unconnected-again stream is `EPIPE`, not `ENOTCONN`).
    was_connected: bool,
    passcred: bool,
    sndbuf: usize,
    rcvbuf: usize,
    /// Its end began (the last reference went): a peer's upgrade may still see it briefly.
    dead: bool,
}

/// An `AF_UNIX` socket.
pub struct Socket {
    kind: Kind,
    ino: u64,
    /// Whom the socket belongs to: its creator's credentials (`SO_PEERCRED` of its peer).
    cred: Ucred,
    /// The event key of its connection, or its own (module documentation).
    key: AtomicUsize,
    state: Mutex<State>,
}

impl core::fmt::Debug for Socket {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        write!(f, "Socket({:?}, {})", self.kind, self.ino)
    }
}

/// Names bound now, each to its socket (a weak reference: a closed socket frees its name).
static BOUND: Mutex<Vec<(Name, Weak<Socket>)>> = Mutex::new(Vec::new());

impl Socket {
    /// A new unconnected socket of `kind` owned by `cred`.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn new(kind: Kind, cred: Ucred) -> Result<Arc<Self>, Errno> {
        let state = State {
            role: Role::Idle,
            name: Name::Unnamed,
            queue: VecDeque::new(),
            used: 0,
            shutdown: 0,
            error: None,
            peer_cred: None,
            was_connected: false,
            passcred: false,
            sndbuf: SNDBUF,
            rcvbuf: RCVBUF,
            dead: false,
        };
        let ino = NEXT_INO.fetch_add(1, Ordering::Relaxed);
        let s = fallible::arc(Socket { kind, ino, cred, key: AtomicUsize::new(0), state: Mutex::new(state) })
            .map_err(|_| Errno::ENOMEM)?;
        s.key.store(own_key(&s), Ordering::Relaxed);
        Ok(s)
    }

    /// Its kind.
    pub fn kind(&self) -> Kind {
        self.kind
    }

    fn key(&self) -> usize {
        self.key.load(Ordering::Relaxed)
    }

    fn peer(&self) -> Option<Arc<Socket>> {
        match &self.state.lock().role {
            Role::Connected(w) => w.upgrade(),
            _ => None,
        }
    }

    /// `socketpair`: two connected sockets of `kind`.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn pair(kind: Kind, cred: Ucred) -> Result<(Arc<Self>, Arc<Self>), Errno> {
        let a = Self::new(kind, cred)?;
        let b = Self::new(kind, cred)?;
        link(&a, &b);
        Ok((a, b))
    }

    /// Its name (`getsockname`).
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn name(&self) -> Result<Name, Errno> {
        self.state.lock().name.try_clone()
    }

    /// Its peer's name (`getpeername`).
    ///
    /// # Errors
    /// `ENOTCONN` without a peer; `ENOMEM`.
    pub fn peer_name(&self) -> Result<Name, Errno> {
        let peer = self.peer().ok_or(Errno::ENOTCONN)?;
        peer.name()
    }

    /// `bind` to `name`, whose path node (if any) the caller made: `EINVAL` when already
    /// bound; `EADDRINUSE` when an abstract name is taken (a path's node creation found that).
    ///
    /// # Errors
    /// As above; `ENOMEM`.
    pub fn bind(self: &Arc<Self>, name: Name) -> Result<(), Errno> {
        let mut bound = BOUND.lock();
        bound.retain(|(_, w)| w.strong_count() > 0);
        if !matches!(self.state.lock().name, Name::Unnamed) {
            return Err(Errno::EINVAL);
        }
        if bound.iter().any(|(n, _)| *n == name) {
            return Err(Errno::EADDRINUSE);
        }
        bound.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        self.state.lock().name = name.try_clone()?;
        bound.push((name, Arc::downgrade(self)));
        Ok(())
    }

    /// Whether it has a name.
    pub fn is_bound(&self) -> bool {
        !matches!(self.state.lock().name, Name::Unnamed)
    }

    /// `listen(backlog)`: `EINVAL` for a datagram socket or an unbound or connected one
    /// (Linux's `unix_listen`: `EOPNOTSUPP` for datagrams, `EINVAL` unbound).
    ///
    /// # Errors
    /// As above.
    pub fn listen(&self, backlog: usize) -> Result<(), Errno> {
        if self.kind == Kind::Dgram {
            return Err(Errno::EOPNOTSUPP);
        }
        let mut st = self.state.lock();
        if matches!(st.name, Name::Unnamed) {
            return Err(Errno::EINVAL);
        }
        match &mut st.role {
            Role::Idle => st.role = Role::Listening(VecDeque::new(), backlog),
            Role::Listening(_, max) => *max = backlog,
            Role::Connected(_) => return Err(Errno::EINVAL),
        }
        drop(st);
        crate::sched::notify(self.key());
        Ok(())
    }

    /// Whether it listens (`SO_ACCEPTCONN`).
    pub fn listening(&self) -> bool {
        matches!(self.state.lock().role, Role::Listening(..))
    }

    /// `connect` to the socket bound to `name`, the caller's credentials `cred`: streams and
    /// seqpackets make the server's end and queue it on the listener's backlog; datagrams set
    /// the default destination.
    ///
    /// # Errors
    /// `ECONNREFUSED` (no socket there, or not listening), `EPROTOTYPE` (another kind),
    /// `EISCONN`, `EINVAL` (a listener), `WouldBlock` (a full backlog), `ENOMEM`.
    pub fn connect(self: &Arc<Self>, name: &Name, cred: Ucred) -> Result<(), FileError> {
        let target = find_bound(name).ok_or(Errno::ECONNREFUSED)?;
        if target.kind != self.kind {
            return Err(Errno::EPROTOTYPE.into());
        }
        if !self.kind.connected_kind() {
            let mut st = self.state.lock();
            st.role = Role::Connected(Arc::downgrade(&target));
            st.peer_cred = Some(target.cred);
            return Ok(());
        }
        match self.state.lock().role {
            Role::Connected(_) => return Err(Errno::EISCONN.into()),
            Role::Listening(..) => return Err(Errno::EINVAL.into()),
            Role::Idle => {}
        }
        let server = Socket::new(self.kind, target.cred)?;
        let mut guard = target.state.lock();
        let tst = &mut *guard;
        let Role::Listening(backlog, max) = &mut tst.role else {
            return Err(Errno::ECONNREFUSED.into());
        };
        if tst.shutdown & RCV_SHUTDOWN != 0 || tst.dead {
            return Err(Errno::ECONNREFUSED.into());
        }
        if backlog.len() > *max {
            return Err(FileError::WouldBlock(target.key()));
        }
        backlog.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        server.state.lock().name = tst.name.try_clone()?;
        link(self, &server);
        server.state.lock().peer_cred = Some(cred);
        self.state.lock().peer_cred = Some(target.cred);
        backlog.push_back(server);
        drop(guard);
        crate::sched::notify_poll(target.key(), POLLIN | POLLRDNORM);
        Ok(())
    }

    /// `accept`: the next connected server socket of a listener.
    ///
    /// # Errors
    /// `EINVAL` (not listening), `EOPNOTSUPP` (a datagram socket), `WouldBlock` (none yet).
    pub fn accept(&self) -> Result<Arc<Socket>, FileError> {
        if self.kind == Kind::Dgram {
            return Err(Errno::EOPNOTSUPP.into());
        }
        let mut st = self.state.lock();
        let Role::Listening(backlog, _) = &mut st.role else {
            return Err(Errno::EINVAL.into());
        };
        match backlog.pop_front() {
            Some(s) => Ok(s),
            None => Err(FileError::WouldBlock(self.key())),
        }
    }

    /// `shutdown(how)` (0 reading, 1 writing, 2 both): a connected stream's or seqpacket's peer
    /// is shut down the other way too. An unconnected socket shuts down as well (Linux's
    /// `unix_shutdown` has no `ENOTCONN`).
    ///
    /// # Errors
    /// `EINVAL` for another `how`.
    pub fn shutdown(&self, how: u64) -> Result<(), Errno> {
        let mode = match how {
            0 => RCV_SHUTDOWN,
            1 => SEND_SHUTDOWN,
            2 => RCV_SHUTDOWN | SEND_SHUTDOWN,
            _ => return Err(Errno::EINVAL),
        };
        let peer = {
            let mut st = self.state.lock();
            let peer = match &st.role {
                Role::Connected(w) => w.upgrade(),
                _ => None,
            };
            st.shutdown |= mode;
            peer
        };
        if let Some(peer) = peer
            && self.kind.connected_kind()
        {
            let peer_mode = ((mode & RCV_SHUTDOWN) << 1) | ((mode & SEND_SHUTDOWN) >> 1);
            peer.state.lock().shutdown |= peer_mode;
        }
        crate::sched::notify(self.key());
        Ok(())
    }

    /// Sends `data` with the descriptions `fds` (taken by the queue), to `to` (a datagram's
    /// destination; `None`: the peer). A stream takes what fits and says how much
    /// (`Ok(n)`, then the caller retries the rest); a datagram or seqpacket goes whole.
    ///
    /// # Errors
    /// `EPIPE` (a stream or seqpacket without a peer, or shut down for sending; the caller
    /// sends `SIGPIPE` for streams), `ENOTCONN`, `ECONNREFUSED` (a datagram peer gone),
    /// `EMSGSIZE`, `EISCONN`, `WouldBlock` (the peer's queue is full), `ENOMEM`.
    pub fn send(
        &self,
        data: &[u8],
        fds: &mut Vec<Arc<OpenFile>>,
        to: Option<&Name>,
    ) -> Result<usize, FileError> {
        let (role_peer, shut, was_connected, sndbuf) = {
            let st = self.state.lock();
            let peer = match &st.role {
                Role::Connected(w) => Some(w.clone()),
                _ => None,
            };
            (peer, st.shutdown, st.was_connected, st.sndbuf)
        };
        let target = if self.kind.connected_kind() {
            if to.is_some() && self.kind == Kind::Stream {
                return Err(Errno::EOPNOTSUPP.into());
            }
            let Some(w) = role_peer else {
                return Err(if was_connected { Errno::EPIPE } else { Errno::ENOTCONN }.into());
            };
            if shut & SEND_SHUTDOWN != 0 {
                return Err(Errno::EPIPE.into());
            }
            w.upgrade().ok_or(Errno::EPIPE)?
        } else {
            if shut & SEND_SHUTDOWN != 0 {
                return Err(Errno::EPIPE.into());
            }
            match to {
                Some(name) => find_bound(name).ok_or(Errno::ECONNREFUSED)?,
                None => {
                    let w = role_peer.ok_or(Errno::ENOTCONN)?;
                    match w.upgrade() {
                        Some(p) => p,
                        None => {
                            // Linux's unix_dgram_sendmsg: the dead peer is forgotten.
                            self.state.lock().role = Role::Idle;
                            return Err(Errno::ECONNREFUSED.into());
                        }
                    }
                }
            }
        };
        if target.kind != self.kind {
            return Err(Errno::EPROTOTYPE.into());
        }
        if self.kind != Kind::Stream && data.len() + 32 > sndbuf {
            return Err(Errno::EMSGSIZE.into());
        }
        let from = Some(self.name()?);
        // Before the target's lock: a collection takes every queue's.
        if fds.iter().any(|f| f.file_as::<Socket>().is_some()) {
            note_inflight(&target)?;
        }
        let mut tst = target.state.lock();
        if tst.dead {
            return Err(if self.kind == Kind::Dgram { Errno::ECONNREFUSED } else { Errno::EPIPE }.into());
        }
        if self.kind.connected_kind() && tst.shutdown & RCV_SHUTDOWN != 0 {
            return Err(Errno::EPIPE.into());
        }
        let room = sndbuf.saturating_sub(tst.used);
        let take = if self.kind == Kind::Stream {
            if room <= MSG_OVERHEAD && !data.is_empty() {
                return Err(FileError::WouldBlock(self.key()));
            }
            data.len().min(room - MSG_OVERHEAD.min(room))
        } else {
            if tst.used > 0 && data.len() + MSG_OVERHEAD > room {
                return Err(FileError::WouldBlock(if to.is_some() { target.key() } else { self.key() }));
            }
            data.len()
        };
        tst.queue.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        let mut bytes = Vec::new();
        bytes.try_reserve_exact(take).map_err(|_| Errno::ENOMEM)?;
        bytes.extend_from_slice(&data[..take]);
        let msg = Msg { data: bytes, read: 0, fds: core::mem::take(fds), from, cred: self.cred };
        tst.used += msg.truesize();
        tst.queue.push_back(msg);
        let key = target.key();
        drop(tst);
        crate::sched::notify_poll(key, POLLIN | POLLRDNORM);
        Ok(take)
    }

    /// Receives into `io`: the bytes, the message's full length (a datagram's, for
    /// `MSG_TRUNC`), the descriptions it carried, and the sender's name (datagrams).
    /// `peek` leaves the messages queued (the descriptions are then shared, as Linux's dups).
    ///
    /// # Errors
    /// A pending error (`ECONNRESET`), `EINVAL` (a stream not connected), `EFAULT`,
    /// `WouldBlock` (nothing yet).
    pub fn recv(&self, io: &Io<'_>, peek: bool) -> Result<Received, FileError> {
        let want = io.len().min(isize::MAX as u64) as usize;
        let mut st = self.state.lock();
        if let Some(e) = st.error.take() {
            return Err(e.into());
        }
        if st.queue.is_empty() {
            if self.kind == Kind::Stream
                && matches!(st.role, Role::Idle | Role::Listening(..))
                && !st.was_connected
            {
                return Err(Errno::EINVAL.into());
            }
            if st.shutdown & RCV_SHUTDOWN != 0 {
                return Ok(Received::default());
            }
            return Err(FileError::WouldBlock(self.key()));
        }
        let mut out = Received::default();
        let mut data = Vec::new();
        if self.kind == Kind::Stream {
            let queued: usize = st.queue.iter().map(|m| m.data.len() - m.read).sum();
            data.try_reserve_exact(want.min(queued)).map_err(|_| Errno::ENOMEM)?;
            let mut i = 0;
            let mut freed = 0;
            while data.len() < want && i < st.queue.len() {
                let m = &mut st.queue[i];
                if i == 0 && out.from.is_none() {
                    out.cred = m.cred;
                    out.from = match &m.from {
                        Some(f) => Some(f.try_clone()?),
                        None => None,
                    };
                }
                let n = (m.data.len() - m.read).min(want - data.len());
                data.extend_from_slice(&m.data[m.read..m.read + n]);
                let had_fds = !m.fds.is_empty();
                if peek {
                    if had_fds {
                        clone_into(&m.fds, &mut out.fds)?;
                        break;
                    }
                    i += 1;
                    continue;
                }
                m.read += n;
                if had_fds {
                    out.fds = core::mem::take(&mut m.fds);
                }
                if m.read == m.data.len() {
                    let m = st.queue.remove(i);
                    if let Some(m) = &m {
                        freed += m.truesize();
                    }
                } else {
                    i += 1;
                }
                if had_fds {
                    break;
                }
            }
            st.used -= freed;
            out.full = data.len();
        } else {
            let m = if peek { st.queue.front() } else { None };
            let taken;
            let m = match m {
                Some(m) => m,
                None => {
                    taken = st.queue.pop_front();
                    match &taken {
                        Some(m) => m,
                        None => return Err(FileError::WouldBlock(self.key())),
                    }
                }
            };
            let n = m.data.len().min(want);
            data.try_reserve_exact(n).map_err(|_| Errno::ENOMEM)?;
            data.extend_from_slice(&m.data[..n]);
            out.full = m.data.len();
            out.cred = m.cred;
            out.from = match &m.from {
                Some(f) => Some(f.try_clone()?),
                None => None,
            };
            clone_into(&m.fds, &mut out.fds)?;
            if !peek {
                st.used -= m.truesize();
            }
        }
        let key = self.key();
        drop(st);
        if !peek {
            crate::sched::notify_poll(key, POLLOUT | POLLWRNORM);
        }
        match io.scatter(&data) {
            Ok(n) => out.copied = n as usize,
            Err(e) if data.is_empty() => return Err(e),
            Err(e) => return Err(e),
        }
        Ok(out)
    }

    /// Its readiness (Linux's `unix_poll`, `unix_dgram_poll`).
    fn ready(&self) -> u16 {
        let st = self.state.lock();
        let mut r = 0;
        if st.error.is_some() {
            r |= POLLERR;
        }
        if st.shutdown == RCV_SHUTDOWN | SEND_SHUTDOWN {
            r |= POLLHUP;
        }
        if st.shutdown & RCV_SHUTDOWN != 0 {
            r |= POLLRDHUP | POLLIN | POLLRDNORM;
        }
        let peer = match &st.role {
            Role::Listening(backlog, _) => {
                if !backlog.is_empty() {
                    r |= POLLIN | POLLRDNORM;
                }
                return r;
            }
            Role::Connected(w) => Some(w.clone()),
            Role::Idle => None,
        };
        if !st.queue.is_empty() {
            r |= POLLIN | POLLRDNORM;
        }
        if self.kind.connected_kind() && peer.is_none() {
            r |= POLLHUP;
        }
        let sndbuf = st.sndbuf;
        drop(st);
        // Writable while what it has in flight in the peer's queue is at most a quarter of its
        // buffer (Linux's `unix_writable`).
        let writable = match peer.and_then(|w| w.upgrade()) {
            Some(p) => p.state.lock().used * 4 <= sndbuf,
            None => true,
        };
        if writable {
            r |= POLLOUT | POLLWRNORM | POLLWRBAND;
        }
        r
    }

    /// `SO_PEERCRED`.
    pub fn peer_cred(&self) -> Option<Ucred> {
        self.state.lock().peer_cred
    }

    /// Takes the pending error (`SO_ERROR`).
    pub fn take_error(&self) -> Option<Errno> {
        self.state.lock().error.take()
    }

    /// `SO_SNDBUF`/`SO_RCVBUF` as reported, and set (Linux doubles the value asked, with a
    /// floor of 4608 for the send buffer and 2304 for the receive buffer).
    pub fn buffer(&self, send: bool, set: Option<usize>) -> usize {
        let mut st = self.state.lock();
        if let Some(v) = set {
            let v = v.min(i32::MAX as usize / 2) * 2;
            if send {
                st.sndbuf = v.max(4608);
            } else {
                st.rcvbuf = v.max(2304);
            }
        }
        if send { st.sndbuf } else { st.rcvbuf }
    }

    /// `SO_PASSCRED`, read or set.
    pub fn passcred(&self, set: Option<bool>) -> bool {
        let mut st = self.state.lock();
        if let Some(v) = set {
            st.passcred = v;
        }
        st.passcred
    }
}

fn clone_into(from: &[Arc<OpenFile>], to: &mut Vec<Arc<OpenFile>>) -> Result<(), Errno> {
    to.try_reserve(from.len()).map_err(|_| Errno::ENOMEM)?;
    to.extend(from.iter().cloned());
    Ok(())
}

/// What a receive got.
#[derive(Default)]
pub struct Received {
    /// Bytes copied to the buffers.
    pub copied: usize,
    /// The message's length (more than `copied` for a cut datagram).
    pub full: usize,
    /// Descriptions it carried.
    pub fds: Vec<Arc<OpenFile>>,
    /// The sender's name.
    pub from: Option<Name>,
    /// The sender's credentials.
    pub cred: Ucred,
}

fn own_key(s: &Arc<Socket>) -> usize {
    // Tagged 3: never a futex's (4-byte aligned) key, nor a pipe's (2) or eventfd's (1) of the
    // same address.
    Arc::as_ptr(s) as usize | 3
}

/// Connects `a` and `b` as peers, sharing `a`'s key.
fn link(a: &Arc<Socket>, b: &Arc<Socket>) {
    let key = a.key();
    for (x, y) in [(a, b), (b, a)] {
        let mut st = x.state.lock();
        st.role = Role::Connected(Arc::downgrade(y));
        st.was_connected = true;
        st.peer_cred = Some(y.cred);
        drop(st);
        x.key.store(key, Ordering::Relaxed);
    }
}

/// The live socket bound to `name`.
fn find_bound(name: &Name) -> Option<Arc<Socket>> {
    let bound = BOUND.lock();
    bound.iter().find(|(n, _)| n == name).and_then(|(_, w)| w.upgrade())
}

impl Drop for Socket {
    fn drop(&mut self) {
        let (queue, backlog, peer) = {
            let mut st = self.state.lock();
            st.dead = true;
            st.used = 0;
            let role = core::mem::replace(&mut st.role, Role::Idle);
            let (backlog, peer) = match role {
                Role::Listening(b, _) => (b, None),
                Role::Connected(w) => (VecDeque::new(), w.upgrade()),
                Role::Idle => (VecDeque::new(), None),
            };
            (core::mem::take(&mut st.queue), backlog, peer)
        };
        if let Some(peer) = &peer
            && self.kind.connected_kind()
        {
            let mut pst = peer.state.lock();
            pst.shutdown = RCV_SHUTDOWN | SEND_SHUTDOWN;
            // Unread data at the close resets the peer (Linux's unix_release_sock).
            if !queue.is_empty() {
                pst.error = Some(Errno::ECONNRESET);
            }
            drop(pst);
        }
        let key = self.key();
        // The descriptions in flight go now, outside every lock (a last close may close more
        // sockets).
        drop(queue);
        drop(backlog);
        if let Some(peer) = &peer {
            crate::sched::notify(peer.key());
        }
        drop(peer);
        crate::sched::notify(key);
        collect_cycles();
    }
}

/// Sockets whose queues have held socket descriptions in flight: where [`collect_cycles`]
/// looks.
static INFLIGHT: Mutex<Vec<Weak<Socket>>> = Mutex::new(Vec::new());
/// A collection is running (the queues it drops end more sockets, whose ends would start
/// another).
static COLLECTING: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// The length of [`INFLIGHT`] past which a send of descriptions collects first (Linux's
/// `UNIX_INFLIGHT_TRIGGER_GC`, in sockets rather than descriptions); raised to twice what
/// survives a collection, so sockets legitimately in flight do not make every send collect.
static COLLECT_AT: AtomicUsize = AtomicUsize::new(1024);

/// Records that `target`'s queue is to hold socket descriptions; collects cycles first when
/// many sockets have them.
///
/// # Errors
/// `ENOMEM`.
fn note_inflight(target: &Arc<Socket>) -> Result<(), Errno> {
    let len = INFLIGHT.lock().len();
    if len > COLLECT_AT.load(Ordering::Relaxed) {
        collect_cycles();
        let left = INFLIGHT.lock().len();
        COLLECT_AT.store((2 * left).max(1024), Ordering::Relaxed);
    }
    let mut list = INFLIGHT.lock();
    // A dead entry's address may be a new socket's: only live entries count.
    if list.iter().any(|w| core::ptr::eq(w.as_ptr(), Arc::as_ptr(target)) && w.strong_count() > 0) {
        return Ok(());
    }
    list.retain(|w| w.strong_count() > 0);
    list.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
    list.push(Arc::downgrade(target));
    Ok(())
}

/// Linux's `unix_gc`, run when a socket ends: frees the sockets that only descriptions in
/// flight hold, and that no socket held otherwise can reach through its queue (a socket sent
/// over itself, two sockets each in the other's queue, ...).
///
/// A socket is a candidate when every reference to it is a description in some queue, each
/// description held by queues only. Candidates reachable from the queue of a socket that is
/// not a candidate stay (and so does what their queues reach); the queues of the rest are
/// dropped, which ends them.
fn collect_cycles() {
    if COLLECTING.swap(true, Ordering::Acquire) {
        return;
    }
    let list: Vec<Arc<Socket>> = {
        let mut l = INFLIGHT.lock();
        l.retain(|w| w.strong_count() > 0);
        let mut v = Vec::new();
        if v.try_reserve(l.len()).is_err() {
            COLLECTING.store(false, Ordering::Release);
            return;
        }
        v.extend(l.iter().filter_map(Weak::upgrade));
        v
    };
    let garbage = cycles_in(&list).unwrap_or_default();
    let mut queues = Vec::new();
    for &i in &garbage {
        let mut st = list[i].state.lock();
        st.used = 0;
        if queues.try_reserve(1).is_ok() {
            queues.push(core::mem::take(&mut st.queue));
        }
    }
    // Outside every lock: the descriptions go, and with them the sockets.
    drop(queues);
    drop(list);
    COLLECTING.store(false, Ordering::Release);
}

/// Which of `list` (the sockets with descriptions in flight, each held once more by `list`)
/// are unreachable garbage, as indexes into it; `None` when the heap cannot hold the work.
fn cycles_in(list: &[Arc<Socket>]) -> Option<Vec<usize>> {
    // `list`'s sockets by address, for the lookups below.
    let mut by_addr: Vec<(usize, usize)> = Vec::new();
    by_addr.try_reserve(list.len()).ok()?;
    by_addr.extend(list.iter().enumerate().map(|(i, s)| (Arc::as_ptr(s) as usize, i)));
    by_addr.sort_unstable();
    let index_of = |p: usize| by_addr.binary_search_by_key(&p, |&(a, _)| a).ok().map(|k| by_addr[k].1);
    // Every socket description in flight: the socket it is open on, the description (a
    // reference more, counted below), and the index of the queue holding it; sorted by socket.
    let mut flights: Vec<(usize, Arc<OpenFile>, usize)> = Vec::new();
    for (i, s) in list.iter().enumerate() {
        let st = s.state.lock();
        for f in st.queue.iter().flat_map(|m| m.fds.iter()) {
            if let Some(x) = f.file_as::<Socket>() {
                flights.try_reserve(1).ok()?;
                flights.push((core::ptr::from_ref(x) as usize, f.clone(), i));
            }
        }
    }
    flights.sort_unstable_by_key(|(x, f, _)| (*x, Arc::as_ptr(f) as usize));
    // A socket of `list` is a candidate when each of its references is a description in
    // flight held only by queues: a description twice per queue holding it (the queue's and
    // `flights`'), the socket once per description and once by `list`. Its descriptions are
    // one run of `flights`, each description a run within it.
    let mut is_candidate: Vec<bool> = Vec::new();
    is_candidate.try_reserve(list.len()).ok()?;
    is_candidate.resize(list.len(), false);
    let mut at = 0;
    while at < flights.len() {
        let x = flights[at].0;
        let end = at + flights[at..].iter().take_while(|(y, _, _)| *y == x).count();
        let (mut files, mut held_by_queues, mut k) = (0, true, at);
        while k < end {
            let f = &flights[k].1;
            let n = flights[k..end].iter().take_while(|(_, g, _)| Arc::ptr_eq(f, g)).count();
            held_by_queues &= Arc::strong_count(f) == 2 * n;
            files += 1;
            k += n;
        }
        if let Some(i) = index_of(x) {
            is_candidate[i] = held_by_queues && Arc::strong_count(&list[i]) == files + 1;
        }
        at = end;
    }
    // Reachable from the queue of a socket that is not a candidate: not garbage, nor what its
    // own queue reaches (a work list of the sockets found reachable).
    let mut held: Vec<(usize, usize)> = Vec::new(); // (holder, socket in flight), by holder
    held.try_reserve(flights.len()).ok()?;
    held.extend(flights.iter().map(|(x, _, h)| (*h, *x)));
    drop(flights);
    held.sort_unstable();
    let mut work: Vec<usize> = Vec::new();
    work.try_reserve(list.len()).ok()?;
    work.extend((0..list.len()).filter(|&i| !is_candidate[i]));
    while let Some(h) = work.pop() {
        let first = held.partition_point(|&(g, _)| g < h);
        for &(_, x) in held[first..].iter().take_while(|&&(g, _)| g == h) {
            if let Some(j) = index_of(x)
                && is_candidate[j]
            {
                is_candidate[j] = false;
                work.try_reserve(1).ok()?;
                work.push(j);
            }
        }
    }
    let mut out = Vec::new();
    out.try_reserve(list.len()).ok()?;
    out.extend((0..list.len()).filter(|&i| is_candidate[i]));
    Some(out)
}

impl File for Socket {
    fn read(&self, io: Io<'_>) -> IoResult {
        if io.len() == 0 && self.kind == Kind::Stream {
            return Ok(0);
        }
        self.recv(&io, false).map(|r| r.copied as u64)
    }

    fn write(&self, io: Io<'_>, progress: &mut u64, sigpipe: &dyn Fn()) -> IoResult {
        let r = send_io(self, &io, &mut Vec::new(), None, progress);
        if self.kind == Kind::Stream && r == Err(FileError::Errno(Errno::EPIPE)) {
            sigpipe();
        }
        r
    }

    fn poll(&self) -> (u16, usize) {
        (self.ready(), self.key())
    }

    fn stat(&self) -> Result<Stat, Errno> {
        let now = Timespec::from_ns(crate::wallclock::realtime_offset_ns());
        Ok(Stat {
            dev: 0x8,
            ino: self.ino,
            mode: S_IFSOCK | 0o777,
            nlink: 1,
            blksize: 4096,
            times: [now; 3],
            ..Stat::default()
        })
    }

    fn ioctl(&self, open: &OpenFile, request: u64, arg: u64) -> Result<u64, Errno> {
        let _ = open;
        match request as u32 as u64 {
            linux_abi::termios::ioctl::FIONREAD => {
                let st = self.state.lock();
                let n = if self.kind == Kind::Stream {
                    st.queue.iter().map(|m| m.data.len() - m.read).sum::<usize>()
                } else {
                    st.queue.front().map_or(0, |m| m.data.len())
                };
                drop(st);
                crate::memory::uaccess::copy_out(arg, &(n as u32).to_le_bytes())
                    .map(|()| 0)
                    .map_err(|_| Errno::EFAULT)
            }
            _ => Err(Errno::ENOTTY),
        }
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        let mut out = Vec::new();
        push_fmt(&mut out, format_args!("socket:[{}]", self.ino))?;
        Ok(out)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Writes `io` to the socket `s` (`write`, `writev`, `send`, `sendmsg` without descriptions
/// after the first chunk): a stream takes everything, blocking as space appears (its count in
/// `progress` across restarts, as a pipe's write); a datagram or seqpacket one message.
/// `fds` go with the first bytes.
///
/// # Errors
/// As [`Socket::send`]; `EFAULT`.
pub fn send_io(
    s: &Socket,
    io: &Io<'_>,
    fds: &mut Vec<Arc<OpenFile>>,
    to: Option<&Name>,
    progress: &mut u64,
) -> IoResult {
    let resumed = core::mem::take(progress);
    let total = io.len();
    if s.kind != Kind::Stream {
        let len = usize::try_from(total).map_err(|_| Errno::EMSGSIZE)?;
        if len + 32 > s.buffer(true, None) {
            return Err(Errno::EMSGSIZE.into());
        }
        let mut data = Vec::new();
        data.try_reserve_exact(len).map_err(|_| Errno::ENOMEM)?;
        data.resize(len, 0);
        copy_from(io, 0, &mut data)?;
        return s.send(&data, fds, to).map(|n| n as u64);
    }
    let mut written = resumed.min(total);
    if total == 0 {
        // A zero-length stream send still checks the connection.
        s.send(&[], fds, to)?;
        return Ok(0);
    }
    let mut chunk = Vec::new();
    let size = (total - written).min(64 << 10) as usize;
    chunk.try_reserve_exact(size).map_err(|_| Errno::ENOMEM)?;
    chunk.resize(size, 0);
    while written < total {
        let n = (total - written).min(size as u64) as usize;
        if let Err(e) = copy_from(io, written, &mut chunk[..n]) {
            return if written > resumed { Ok(written) } else { Err(e.into()) };
        }
        match s.send(&chunk[..n], fds, to) {
            Ok(took) => written += took as u64,
            Err(FileError::WouldBlock(key)) => {
                if io.nonblock {
                    return if written > 0 { Ok(written) } else { Err(FileError::WouldBlock(key)) };
                }
                *progress = written;
                return Err(FileError::WouldBlock(key));
            }
            Err(e) if written == 0 => return Err(e),
            Err(_) => return Ok(written),
        }
    }
    Ok(written)
}

/// Copies the bytes of `io` from offset `at` into `out`.
fn copy_from(io: &Io<'_>, at: u64, out: &mut [u8]) -> Result<(), Errno> {
    let mut skip = at;
    let mut filled = 0;
    for &(base, len) in io.buffers {
        if filled == out.len() {
            break;
        }
        if skip >= len {
            skip -= len;
            continue;
        }
        let n = ((len - skip) as usize).min(out.len() - filled);
        io.take(&mut out[filled..filled + n], base.wrapping_add(skip)).map_err(|_| Errno::EFAULT)?;
        filled += n;
        skip = 0;
    }
    Ok(())
}
