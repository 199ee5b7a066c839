//! Pipes and FIFOs, after Linux's fs/pipe.c: `pipe2` makes a 64 KiB buffer with a read end and a write
//! end, each an open file description that `dup`, `fork` and `execve` share like any other.
//!
//! - The bytes are held in pages, as Linux's ring of `pipe_buffer`s: a pipe of N pages
//!   (`F_SETPIPE_SZ`) holds at most N buffers, each one page of data at most. A write first
//!   tops up the last buffer with its sub-page remainder if that fits in the page, then fills
//!   new buffers a page at a time; so a page a reader has partly emptied is not written into
//!   again, and the pipe can be "full" with fewer bytes than its size, as on Linux.
//! - A write end opened with `O_DIRECT` (`pipe2`, `F_SETFL`) writes packets: each buffer it
//!   fills is one packet, never merged, and a read takes at most one packet, the rest of it
//!   discarded (Linux's `PIPE_BUF_FLAG_PACKET`).
//! - A read takes what is there (up to the buffers' size); with nothing there it returns 0
//!   (end of file) once no write end is open, `EAGAIN` with `O_NONBLOCK`, else blocks.
//! - A write of up to `PIPE_BUF` (4096) bytes is atomic: it waits until it fits whole. A larger
//!   one writes what fits and, without `O_NONBLOCK`, blocks for the rest until all of it is in
//!   (the thread keeps the count across the restarts; a signal returns it); with `O_NONBLOCK`
//!   it returns what fitted, or `EAGAIN`. With no read end open the writer gets `SIGPIPE` and
//!   `EPIPE` (or the count, if some bytes went in).
//! - The ends are counted per open file description: the last `close` of an end (its
//!   description dropped) wakes the other side, which then sees end of file or `EPIPE`.
//!
//! Blocking uses the scheduler's kernel events (`sched::WaitFor::Event`): the caller reads the
//! event count before it looks at the pipe and blocks with it; every change of a pipe notifies
//! its key, so a change between the look and the block restarts the call at once. The
//! notification says which readiness may have appeared (`sched::notify_poll`): data after a
//! write, room after a read, anything when an end opens or closes; an edge-triggered epoll
//! reader sees an edge for new data only, as on Linux.
//!
//! A FIFO (a node made by `mknod`/`mkfifo`) is the same pipe, found through its node: the first
//! open makes the pipe, which lives as long as an end is open. Opens follow Linux's `fifo_open`:
//! `O_RDONLY | O_NONBLOCK` always succeeds, `O_WRONLY | O_NONBLOCK` is `ENXIO` without a reader,
//! `O_RDWR` never waits, and a blocking open waits for the other side's first open. A waiting
//! opener counts as an open end while it waits (so the other side's open does not wait too): its
//! count is kept in the pipe under its thread id and taken over by its restarted open.
use alloc::collections::VecDeque;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::any::Any;

use spin::Mutex;

use linux_abi::Errno;
use linux_abi::fcntl::{O_ACCMODE, O_CLOEXEC, O_DIRECT, O_NONBLOCK, O_RDONLY, O_RDWR, O_WRONLY, S_IFIFO};
use linux_abi::layout::Stat;
use linux_abi::poll;
use linux_abi::time::Timespec;
use vfs::node::Inode;

use super::file::{FdEntry, FdTable, File, FileError, Io, IoResult, OpenFile};
use super::node_file::Named;
use crate::memory::fallible;
use crate::memory::uaccess::copy_out;
use crate::sched;

/// The buffer of a pipe (Linux's default: 16 pages).
pub const PIPE_SIZE: usize = 64 << 10;
/// Writes up to this size are atomic.
pub const PIPE_BUF: usize = 4096;

/// Inode numbers of anonymous pipes (pipefs's `get_next_ino`).
static NEXT_INO: core::sync::atomic::AtomicU64 = core::sync::atomic::AtomicU64::new(0x1000);

/// One buffer of a pipe: `len` unread bytes of one page, from page offset `start`.
#[derive(Clone, Copy)]
struct Buffer {
    start: usize,
    len: usize,
    /// Written by an `O_DIRECT` write end: a packet.
    packet: bool,
}

impl Buffer {
    /// Whether `n` more bytes can go into this page after its data (Linux's
    /// `PIPE_BUF_FLAG_CAN_MERGE` and `offset + chars <= PAGE_SIZE`).
    fn takes(&self, n: usize) -> bool {
        !self.packet && self.start + self.len + n <= PIPE_BUF
    }
}

struct State {
    /// The bytes of every buffer, in order.
    buf: VecDeque<u8>,
    /// The buffers (pages) holding them, oldest first.
    buffers: VecDeque<Buffer>,
    /// Bytes it holds at most (`F_SETPIPE_SZ`; [`PIPE_SIZE`] to start): `capacity / PIPE_BUF`
    /// buffers.
    capacity: usize,
    readers: usize,
    writers: usize,
    /// Opens for reading and for writing so far (a waiting FIFO opener watches the other's).
    read_opens: u64,
    write_opens: u64,
    /// FIFO openers waiting for the other side: thread id, for writing, and the other side's
    /// open count when it began to wait. Each already counts as an end.
    waiting: Vec<(u32, bool, u64)>,
}

/// A pipe's buffer and the count of its open ends.
pub struct Pipe {
    state: Mutex<State>,
    /// `st_ino` of an anonymous pipe (a FIFO's ends report its node's).
    ino: u64,
}

impl core::fmt::Debug for Pipe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Pipe")
    }
}

impl Pipe {
    /// An empty pipe without ends.
    fn new() -> Result<Arc<Self>, Errno> {
        let mut buf = VecDeque::new();
        buf.try_reserve_exact(PIPE_SIZE).map_err(|_| Errno::ENOMEM)?;
        let mut buffers = VecDeque::new();
        buffers.try_reserve_exact(PIPE_SIZE / PIPE_BUF).map_err(|_| Errno::ENOMEM)?;
        let state = State {
            buf,
            buffers,
            capacity: PIPE_SIZE,
            readers: 0,
            writers: 0,
            read_opens: 0,
            write_opens: 0,
            waiting: Vec::new(),
        };
        let ino = NEXT_INO.fetch_add(1, core::sync::atomic::Ordering::Relaxed);
        fallible::arc(Pipe { state: Mutex::new(state), ino }).map_err(|_| Errno::ENOMEM)
    }

    /// The event key of this pipe (offset by 2: never a user futex's key, nor a family's).
    fn key(&self) -> usize {
        core::ptr::from_ref(self) as usize | 2
    }

    /// Counts a new end (`write`: a write end) and makes it.
    fn end(self: &Arc<Self>, write: bool, fifo: Option<Arc<Named>>) -> PipeEnd {
        let mut st = self.state.lock();
        count(&mut st, write);
        drop(st);
        PipeEnd { pipe: self.clone(), write, fifo }
    }
}

impl State {
    /// Whether a buffer is free (Linux's `!pipe_full`).
    fn has_room(&self) -> bool {
        self.buffers.len() < self.capacity / PIPE_BUF
    }

    /// Puts `bytes` (at most a page) into a new buffer; the room was checked and reserved.
    fn push_buffer(&mut self, bytes: &[u8], packet: bool) {
        self.buf.extend(bytes);
        self.buffers.push_back(Buffer { start: 0, len: bytes.len(), packet });
    }

    /// Puts `bytes` at the end of the last buffer, which [`Buffer::takes`] them.
    fn top_up(&mut self, bytes: &[u8]) {
        self.buf.extend(bytes);
        if let Some(last) = self.buffers.back_mut() {
            last.len += bytes.len();
        }
    }

    /// The bytes a write could put in now: the free buffers' pages and the room after the last
    /// buffer's data when it [`Buffer::takes`] more.
    fn room(&self) -> usize {
        let free = (self.capacity / PIPE_BUF).saturating_sub(self.buffers.len()) * PIPE_BUF;
        let tail =
            self.buffers.back().filter(|b| !b.packet).map_or(0, |b| PIPE_BUF.saturating_sub(b.start + b.len));
        free + tail
    }

    /// Puts as much of `data` in as there is [`Self::room`] for, topping up the last buffer
    /// first, then a page per buffer (what `splice` into a pipe does): the bytes put in.
    fn put(&mut self, data: &[u8]) -> usize {
        let mut done = 0;
        if let Some(last) = self.buffers.back()
            && !last.packet
        {
            let n = (PIPE_BUF.saturating_sub(last.start + last.len)).min(data.len());
            if n > 0 {
                self.top_up(&data[..n]);
                done = n;
            }
        }
        while done < data.len() && self.has_room() {
            let n = (data.len() - done).min(PIPE_BUF);
            self.push_buffer(&data[done..done + n], false);
            done += n;
        }
        done
    }

    /// Drops the first `n` bytes (taken by `splice`), buffer after buffer.
    fn drop_front(&mut self, mut n: usize) {
        while n > 0 {
            let Some(front) = self.buffers.front_mut() else { break };
            let k = front.len.min(n);
            self.buf.drain(..k);
            front.start += k;
            front.len -= k;
            n -= k;
            if front.len == 0 {
                self.buffers.pop_front();
            }
        }
    }

    /// Takes up to `want` bytes into `out`, buffer after buffer; a packet ends the read, the
    /// rest of it discarded.
    fn take(&mut self, want: usize, out: &mut Vec<u8>) {
        while out.len() < want {
            let Some(front) = self.buffers.front_mut() else { break };
            let n = front.len.min(want - out.len());
            out.extend(self.buf.drain(..n));
            if front.packet {
                let rest = front.len - n;
                self.buf.drain(..rest);
                self.buffers.pop_front();
                break;
            }
            front.start += n;
            front.len -= n;
            if front.len == 0 {
                self.buffers.pop_front();
            }
        }
    }
}

fn count(st: &mut State, write: bool) {
    if write {
        st.writers += 1;
        st.write_opens += 1;
    } else {
        st.readers += 1;
        st.read_opens += 1;
    }
}

/// One end of a pipe, held by its open file description.
pub struct PipeEnd {
    pipe: Arc<Pipe>,
    write: bool,
    /// The FIFO node it was opened through, if any.
    fifo: Option<Arc<Named>>,
}

impl Drop for PipeEnd {
    fn drop(&mut self) {
        {
            let mut st = self.pipe.state.lock();
            if self.write {
                st.writers -= 1;
            } else {
                st.readers -= 1;
            }
        }
        sched::notify(self.pipe.key());
    }
}

/// `pipe2(fds, flags)` into the descriptor table `files`: `EINVAL` for other flags than
/// `O_CLOEXEC`, `O_NONBLOCK`, `O_DIRECT` (packet mode, on the write end only, as Linux's
/// `create_pipe_files`); `EMFILE`; `ENOMEM`; `EFAULT` (both descriptors closed again, as Linux).
///
/// # Errors
/// As above.
pub fn pipe2(files: &Mutex<FdTable>, fds: u64, flags: u64) -> Result<u64, Errno> {
    let known = u64::from(O_CLOEXEC | O_NONBLOCK | O_DIRECT);
    if flags & !known != 0 {
        return Err(Errno::EINVAL);
    }
    let pipe = Pipe::new()?;
    let status = flags as u32 & (O_NONBLOCK | O_DIRECT);
    // Each end counts itself once it exists, so an end dropped on a failure below uncounts only
    // itself.
    let end = |write: bool| {
        let end: Arc<dyn File> = fallible::arc(pipe.end(write, None)).map_err(|_| Errno::ENOMEM)?;
        let mode = if write { O_WRONLY | status } else { O_RDONLY | (status & O_NONBLOCK) };
        fallible::arc(OpenFile::new(end, mode)).map_err(|_| Errno::ENOMEM)
    };
    let cloexec = flags & u64::from(O_CLOEXEC) != 0;
    let (read_end, write_end) = end(false).and_then(|r| Ok((r, end(true)?)))?;
    let mut table = files.lock();
    let r = table.install_lowest(0, FdEntry { file: read_end, cloexec })?;
    let w = match table.install_lowest(0, FdEntry { file: write_end, cloexec }) {
        Ok(w) => w,
        Err(e) => {
            let _ = table.close(r as u64);
            return Err(e);
        }
    };
    drop(table);
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&(r as u32).to_le_bytes());
    out[4..].copy_from_slice(&(w as u32).to_le_bytes());
    if copy_out(fds, &out).is_err() {
        let mut table = files.lock();
        let closed = (table.close(r as u64), table.close(w as u64));
        drop(table);
        drop(closed);
        return Err(Errno::EFAULT);
    }
    Ok(0)
}

/// The pipes of the FIFOs open now, by node (a FIFO's pipe lives while an end is open).
static FIFOS: Mutex<Vec<(usize, Weak<Pipe>)>> = Mutex::new(Vec::new());

/// What a FIFO open does now.
pub enum FifoOpen {
    /// It is open: the end(s).
    Open(Arc<dyn File>),
    /// It waits for the other side: block on this event key, the pipe keeping this thread's
    /// count (the restarted open takes it over).
    Wait(usize),
}

/// Opens the FIFO `node` with `flags` for thread `tid` (Linux's `fifo_open`; module
/// documentation).
///
/// # Errors
/// `ENXIO` (a non-blocking writer without readers), `ENOMEM`.
pub fn open_fifo(node: &Arc<dyn Inode>, path: &[u8], flags: u32, tid: u32) -> Result<FifoOpen, Errno> {
    let id = Arc::as_ptr(node).cast::<u8>() as usize;
    let pipe = {
        let mut fifos = FIFOS.lock();
        fifos.retain(|(_, w)| w.strong_count() > 0);
        match fifos.iter().find(|(k, _)| *k == id).and_then(|(_, w)| w.upgrade()) {
            Some(p) => p,
            None => {
                let p = Pipe::new()?;
                fifos.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
                fifos.push((id, Arc::downgrade(&p)));
                p
            }
        }
    };
    let nonblock = flags & O_NONBLOCK != 0;
    let named = Named { node: node.clone(), path: super::copy_bytes(path)? };
    let fifo = Some(fallible::arc(named).map_err(|_| Errno::ENOMEM)?);
    let make = |end: FifoEnd| -> Result<FifoOpen, Errno> {
        let file: Arc<dyn File> = match end {
            FifoEnd::One(e) => fallible::arc(e).map_err(|_| Errno::ENOMEM)?,
            FifoEnd::Both(r, w) => {
                fallible::arc(BothEnds { read: r, write: w }).map_err(|_| Errno::ENOMEM)?
            }
        };
        Ok(FifoOpen::Open(file))
    };
    match flags & O_ACCMODE {
        O_RDWR => {
            let r = pipe.end(false, fifo.clone());
            let w = pipe.end(true, fifo);
            sched::notify(pipe.key());
            make(FifoEnd::Both(r, w))
        }
        mode => {
            let write = mode == O_WRONLY;
            let mut st = pipe.state.lock();
            let waited = st.waiting.iter().position(|&(t, w, _)| t == tid && w == write);
            let other_present = if write { st.readers > 0 } else { st.writers > 0 };
            let other_opens = if write { st.read_opens } else { st.write_opens };
            if let Some(i) = waited {
                // The restart of a waiting open: its count is already in. It is done once the
                // other side has opened since it began to wait, even if that end is closed again
                // (Linux's `wait_for_partner` watches the open count, not the ends).
                if other_present || nonblock || other_opens != st.waiting[i].2 {
                    st.waiting.swap_remove(i);
                    drop(st);
                    return make(FifoEnd::One(PipeEnd { pipe: pipe.clone(), write, fifo }));
                }
                return Ok(FifoOpen::Wait(pipe.key()));
            }
            if write && nonblock && st.readers == 0 {
                return Err(Errno::ENXIO);
            }
            if other_present || nonblock {
                drop(st);
                let end = pipe.end(write, fifo);
                sched::notify(pipe.key());
                return make(FifoEnd::One(end));
            }
            st.waiting.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
            st.waiting.push((tid, write, other_opens));
            count(&mut st, write);
            drop(st);
            // Keep the pipe alive while its count waits: the node holds it through FIFOS only
            // weakly, so the waiting opener's count is kept by a strong reference in the list.
            keep_waiting(&pipe)?;
            sched::notify(pipe.key());
            Ok(FifoOpen::Wait(pipe.key()))
        }
    }
}

enum FifoEnd {
    One(PipeEnd),
    Both(PipeEnd, PipeEnd),
}

/// Pipes with a FIFO opener waiting (kept alive for its restart).
static WAITING: Mutex<Vec<Arc<Pipe>>> = Mutex::new(Vec::new());

/// Keys of pipes whose ends an abandoned open gave back, for the next tick to notify (an
/// abandoned open is seen under the scheduler's lock, where no event may be sent).
static ABANDONED: Mutex<Vec<usize>> = Mutex::new(Vec::new());

/// Thread `tid` left a call it was blocked in without finishing it (a signal interrupted it, or
/// it exits): a FIFO open it was waiting in is abandoned, and the end it counted as goes, as
/// Linux's `fifo_open` gives it back on its error path. The other side hears of it at the next
/// tick ([`tick`]).
pub fn open_abandoned(tid: u32) {
    let mut waiting = WAITING.lock();
    for pipe in waiting.iter() {
        let mut st = pipe.state.lock();
        let before = st.waiting.len();
        let mut gone = (0, 0);
        st.waiting.retain(|&(t, write, _)| {
            if t == tid {
                if write { gone.1 += 1 } else { gone.0 += 1 }
            }
            t != tid
        });
        if st.waiting.len() != before {
            st.readers -= gone.0;
            st.writers -= gone.1;
            drop(st);
            let mut keys = ABANDONED.lock();
            if keys.try_reserve(1).is_ok() {
                keys.push(pipe.key());
            }
        }
    }
    waiting.retain(|p| !p.state.lock().waiting.is_empty());
}

/// On every tick (`fs::tick`): the notices of abandoned opens.
pub fn tick() {
    let keys = core::mem::take(&mut *ABANDONED.lock());
    for key in keys {
        sched::notify(key);
    }
}

fn keep_waiting(pipe: &Arc<Pipe>) -> Result<(), Errno> {
    let mut w = WAITING.lock();
    w.retain(|p| !p.state.lock().waiting.is_empty());
    if !w.iter().any(|p| Arc::ptr_eq(p, pipe)) {
        w.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        w.push(pipe.clone());
    }
    Ok(())
}

impl PipeEnd {
    fn read_io(&self, io: &Io<'_>) -> IoResult {
        if self.write {
            return Err(Errno::EBADF.into());
        }
        let total = io.len().min(self.pipe.state.lock().capacity as u64) as usize;
        if total == 0 {
            return Ok(0);
        }
        let mut data = Vec::new();
        data.try_reserve_exact(total).map_err(|_| Errno::ENOMEM)?;
        {
            let mut st = self.pipe.state.lock();
            if st.buf.is_empty() {
                if st.writers == 0 {
                    return Ok(0);
                }
                return Err(FileError::WouldBlock(self.pipe.key()));
            }
            st.take(total, &mut data);
        }
        sched::notify_poll(self.pipe.key(), poll::POLLOUT | poll::POLLWRNORM);
        io.scatter(&data)
    }

    /// `write`, as Linux's `pipe_write`: up to `PIPE_BUF` bytes go in whole or not at all; a
    /// larger write goes in as space appears. Without `O_NONBLOCK` the call returns only when
    /// everything is written: when the pipe fills first it blocks, counting in `progress` (the
    /// thread's) what it wrote so far, and its restart skips those bytes; a signal that ends the
    /// wait returns that count (`sched::interrupt`). With `O_NONBLOCK` it returns what fitted,
    /// `EAGAIN` if nothing did. No reader: `sigpipe` (the caller sends `SIGPIPE`), and `EPIPE`
    /// unless some bytes went in.
    fn write_io(&self, io: &Io<'_>, progress: &mut u64, sigpipe: &dyn Fn()) -> IoResult {
        let resumed = core::mem::take(progress);
        if !self.write {
            return Err(Errno::EBADF.into());
        }
        let total = io.len();
        if total == 0 {
            return Ok(0);
        }
        let pipe = &self.pipe;
        let mut chunk = [0u8; PIPE_BUF];
        if total as usize <= PIPE_BUF {
            // Atomic: gathered first, then put in whole under one hold of the lock, so no other
            // writer's bytes come between.
            let mut at = 0;
            for &(base, len) in io.buffers {
                if io.take(&mut chunk[at..at + len as usize], base).is_err() {
                    return Err(Errno::EFAULT.into());
                }
                at += len as usize;
            }
            let mut st = pipe.state.lock();
            if st.readers == 0 {
                drop(st);
                return broken(sigpipe, pipe, 0);
            }
            // Into the last page if it has room (a whole page never merges), else a buffer of
            // its own; the bytes never grow the buffer: it holds its capacity from the start.
            if at < PIPE_BUF && !io.direct && st.buffers.back().is_some_and(|b| b.takes(at)) {
                st.top_up(&chunk[..at]);
            } else if st.has_room() {
                st.push_buffer(&chunk[..at], io.direct);
            } else {
                drop(st);
                return Err(FileError::WouldBlock(pipe.key()));
            }
            drop(st);
            return wrote(pipe, at as u64);
        }
        let mut written = resumed.min(total);
        let mut stop: Option<FileError> = None;
        // Linux's `pipe_write`: the sub-page remainder first tops up the last page (once, at
        // the start of the write), then the rest goes in a page per buffer.
        let remainder = (total % PIPE_BUF as u64) as usize;
        while written < total {
            let n = (total - written).min(PIPE_BUF as u64) as usize;
            match copy_from(io, written, &mut chunk[..n]) {
                Ok(()) => {}
                Err(e) if written == 0 => return Err(e.into()),
                Err(_) => break,
            }
            let mut st = pipe.state.lock();
            if st.readers == 0 {
                stop = Some(FileError::Errno(Errno::EPIPE));
                break;
            }
            let merge = written == 0 && remainder != 0 && !io.direct;
            if merge && st.buffers.back().is_some_and(|b| b.takes(remainder)) {
                st.top_up(&chunk[..remainder]);
                written += remainder as u64;
            } else if st.has_room() {
                st.push_buffer(&chunk[..n], io.direct);
                written += n as u64;
            } else {
                // Full: the rest waits (or, non-blocking, is not written).
                stop = Some(FileError::WouldBlock(pipe.key()));
                break;
            }
        }
        match stop {
            None => wrote(pipe, written),
            Some(FileError::Errno(_)) => broken(sigpipe, pipe, written),
            Some(FileError::WouldBlock(key)) => {
                if io.nonblock {
                    return if written > 0 { wrote(pipe, written) } else { Err(FileError::WouldBlock(key)) };
                }
                if written > resumed {
                    // Readers may be waiting for what went in: wake them before sleeping.
                    sched::notify_poll(key, poll::POLLIN | poll::POLLRDNORM);
                }
                *progress = written;
                Err(FileError::WouldBlock(key))
            }
        }
    }

    fn ready(&self) -> u16 {
        let st = self.pipe.state.lock();
        let mut r = 0;
        if self.write {
            if st.readers == 0 {
                r |= poll::POLLERR;
            }
            if st.readers == 0 || st.has_room() {
                r |= poll::POLLOUT | poll::POLLWRNORM;
            }
        } else {
            if !st.buf.is_empty() {
                r |= poll::POLLIN | poll::POLLRDNORM;
            }
            // Linux's pipe_poll: a hang-up once every writer is gone (a FIFO nobody has opened
            // for writing yet counts as none gone).
            if st.writers == 0 && (self.fifo.is_none() || st.write_opens > 0) {
                r |= poll::POLLHUP;
            }
        }
        r
    }

    fn stat(&self) -> Result<Stat, Errno> {
        if let Some(node) = &self.fifo {
            return Ok(super::node_file::stat_of(&node.node));
        }
        let now = Timespec::from_ns(crate::wallclock::realtime_offset_ns());
        Ok(Stat {
            dev: 0xd,
            ino: self.pipe.ino,
            mode: S_IFIFO | 0o600,
            nlink: 1,
            blksize: 4096,
            times: [now; 3],
            ..Stat::default()
        })
    }

    fn ioctl(&self, request: u64, arg: u64) -> Result<u64, Errno> {
        match request as u32 as u64 {
            linux_abi::termios::ioctl::FIONREAD => {
                let n = self.pipe.state.lock().buf.len() as u32;
                copy_out(arg, &n.to_le_bytes()).map(|()| 0).map_err(|_| Errno::EFAULT)
            }
            _ => Err(Errno::ENOTTY),
        }
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        if let Some(named) = &self.fifo {
            return named.describe();
        }
        let mut out = Vec::new();
        super::file::push_fmt(&mut out, format_args!("pipe:[{}]", self.pipe.ino))?;
        Ok(out)
    }
}

/// Copies `out.len()` bytes of the buffers of `io` (a program's, or a kernel buffer for
/// `sendfile` and `splice`), from byte `skip` on.
fn copy_from(io: &Io<'_>, skip: u64, out: &mut [u8]) -> Result<(), Errno> {
    let (mut skip, mut at) = (skip, 0usize);
    for &(base, len) in io.buffers {
        if at == out.len() {
            break;
        }
        let from = skip.min(len);
        skip -= from;
        let n = ((len - from) as usize).min(out.len() - at);
        if n > 0 {
            io.take(&mut out[at..at + n], base.wrapping_add(from)).map_err(|()| Errno::EFAULT)?;
            at += n;
        }
    }
    Ok(())
}

/// A write with no read end open: `SIGPIPE` (`sigpipe`), and `EPIPE` unless `written` bytes
/// went in.
fn broken(sigpipe: &dyn Fn(), pipe: &Pipe, written: u64) -> IoResult {
    sigpipe();
    if written > 0 { wrote(pipe, written) } else { Err(Errno::EPIPE.into()) }
}

fn wrote(pipe: &Pipe, n: u64) -> IoResult {
    sched::notify_poll(pipe.key(), poll::POLLIN | poll::POLLRDNORM);
    Ok(n)
}

impl File for PipeEnd {
    fn read(&self, io: Io<'_>) -> IoResult {
        self.read_io(&io)
    }

    fn write(&self, io: Io<'_>, progress: &mut u64, sigpipe: &dyn Fn()) -> IoResult {
        self.write_io(&io, progress, sigpipe)
    }

    fn poll(&self) -> (u16, usize) {
        (self.ready(), self.pipe.key())
    }

    fn stat(&self) -> Result<Stat, Errno> {
        PipeEnd::stat(self)
    }

    fn ioctl(&self, open: &OpenFile, request: u64, arg: u64) -> Result<u64, Errno> {
        let _ = open;
        PipeEnd::ioctl(self, request, arg)
    }

    fn inode(&self) -> Option<&Arc<dyn Inode>> {
        self.fifo.as_ref().map(|n| &n.node)
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        PipeEnd::describe(self)
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// A FIFO opened for reading and writing (`O_RDWR`): both ends in one description.
pub struct BothEnds {
    read: PipeEnd,
    write: PipeEnd,
}

impl File for BothEnds {
    fn read(&self, io: Io<'_>) -> IoResult {
        self.read.read_io(&io)
    }

    fn write(&self, io: Io<'_>, progress: &mut u64, sigpipe: &dyn Fn()) -> IoResult {
        self.write.write_io(&io, progress, sigpipe)
    }

    fn poll(&self) -> (u16, usize) {
        (self.read.ready() | self.write.ready(), self.read.pipe.key())
    }

    fn stat(&self) -> Result<Stat, Errno> {
        self.read.stat()
    }

    fn ioctl(&self, open: &OpenFile, request: u64, arg: u64) -> Result<u64, Errno> {
        let _ = open;
        self.read.ioctl(request, arg)
    }

    fn inode(&self) -> Option<&Arc<dyn Inode>> {
        self.read.fifo.as_ref().map(|n| &n.node)
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        self.read.describe()
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// The largest size `F_SETPIPE_SZ` gives (`/proc/sys/fs/pipe-max-size`; root may go past it on
/// Linux, and here every program is root, so this is the bound of the call).
pub const PIPE_MAX_SIZE: usize = 1 << 20;

/// `fcntl(F_GETPIPE_SZ)` (`set` `None`) and `fcntl(F_SETPIPE_SZ, size)` on `file`: the capacity,
/// rounded up to a power of two pages, at least one page (Linux's `pipe_set_size`). `EBADF` for
/// a file that is not a pipe; `EBUSY` when the pipe holds more buffers than the new size has;
/// `EINVAL` past 2^31.
///
/// # Errors
/// As above, and `ENOMEM`.
pub fn pipe_size(file: &Arc<dyn File>, set: Option<u64>) -> Result<u64, Errno> {
    let pipe = pipe_of(&**file).ok_or(Errno::EBADF)?;
    let mut st = pipe.state.lock();
    let Some(size) = set else { return Ok(st.capacity as u64) };
    if size > 1 << 31 {
        return Err(Errno::EINVAL);
    }
    let size = size.max(4096).next_power_of_two() as usize;
    if st.buffers.len() > size / PIPE_BUF {
        return Err(Errno::EBUSY);
    }
    if size > st.buf.capacity() {
        let more = size - st.buf.len();
        st.buf.try_reserve_exact(more).map_err(|_| Errno::ENOMEM)?;
    }
    let slots = size / PIPE_BUF;
    let more = slots.saturating_sub(st.buffers.len());
    st.buffers.try_reserve_exact(more).map_err(|_| Errno::ENOMEM)?;
    st.capacity = size;
    drop(st);
    sched::notify_poll(pipe.key(), poll::POLLOUT | poll::POLLWRNORM);
    Ok(size as u64)
}

/// The pipe `file` is an end of (an anonymous pipe's or a FIFO's; Linux's `get_pipe_info`).
pub fn pipe_of(file: &dyn File) -> Option<&Arc<Pipe>> {
    let any = file.as_any();
    match (any.downcast_ref::<PipeEnd>(), any.downcast_ref::<BothEnds>()) {
        (Some(e), _) => Some(&e.pipe),
        (None, Some(b)) => Some(&b.read.pipe),
        (None, None) => None,
    }
}

/// What `splice` and `tee` find in pipe `pipe` to take: `Ok(true)` bytes, `Ok(false)` none
/// and no writer (the end: 0 bytes), else wait (Linux's `ipipe_prep`).
fn has_input(pipe: &Pipe, st: &State) -> Result<bool, FileError> {
    if !st.buf.is_empty() {
        return Ok(true);
    }
    if st.writers == 0 { Ok(false) } else { Err(FileError::WouldBlock(pipe.key())) }
}

/// `splice` from pipe `pipe` into `sink`, which takes what it can of the bytes it is given and
/// says how many: at most `len` bytes, taken out of the pipe as the sink takes them (under the
/// pipe's lock, so no other reader takes them twice). 0 at the end (no writer), else
/// `WouldBlock` while the pipe is empty.
///
/// # Errors
/// `WouldBlock`, or the sink's error when it took nothing.
pub fn drain_into(pipe: &Arc<Pipe>, len: u64, sink: &mut dyn FnMut(&[u8]) -> IoResult) -> IoResult {
    let mut st = pipe.state.lock();
    if !has_input(pipe, &st)? {
        return Ok(0);
    }
    let mut done = 0u64;
    let r = loop {
        let (front, _) = st.buf.as_slices();
        let n = front.len().min((len - done).min(usize::MAX as u64) as usize);
        if n == 0 {
            break Ok(done);
        }
        match sink(&front[..n]) {
            Ok(took) => {
                st.drop_front(took as usize);
                done += took;
                if (took as usize) < n {
                    break Ok(done);
                }
            }
            Err(e) if done == 0 => break Err(e),
            Err(_) => break Ok(done),
        }
    };
    drop(st);
    if done > 0 {
        sched::notify(pipe.key());
    }
    r
}

/// Puts what fits of `data` into pipe `pipe` (`splice` into a pipe, Linux's
/// `splice_file_to_pipe`: no atomicity, as much as there is room for): the bytes put, or
/// `WouldBlock` when there is no room at all. No reader: `EPIPE` (the caller sends `SIGPIPE`).
///
/// # Errors
/// `EPIPE`, `WouldBlock`.
pub fn push(pipe: &Arc<Pipe>, data: &[u8]) -> IoResult {
    let mut st = pipe.state.lock();
    if st.readers == 0 {
        return Err(Errno::EPIPE.into());
    }
    if st.room() == 0 && !data.is_empty() {
        return Err(FileError::WouldBlock(pipe.key()));
    }
    let n = st.put(data); // within the capacity the bytes hold from the start
    drop(st);
    wrote(pipe, n as u64)
}

/// The room left in pipe `pipe`, for a caller that reads a file's bytes to [`push`] only what
/// can go in: `WouldBlock` when it is full, `EPIPE` without a reader.
///
/// # Errors
/// As above.
pub fn room(pipe: &Arc<Pipe>) -> Result<usize, FileError> {
    let st = pipe.state.lock();
    if st.readers == 0 {
        return Err(Errno::EPIPE.into());
    }
    match st.room() {
        0 => Err(FileError::WouldBlock(pipe.key())),
        n => Ok(n),
    }
}

/// `splice` (`consume`) or `tee` (copies, leaving them) of at most `len` bytes from pipe `from`
/// to pipe `to`, with both locked (the lower address first, so two opposite calls cannot
/// deadlock): the bytes moved; 0 at the end of `from`; `WouldBlock` on the key of the pipe that
/// is empty or full; `EPIPE` without a reader of `to`.
///
/// # Errors
/// As above; `EINVAL` for one pipe to itself.
pub fn pipe_to_pipe(from: &Arc<Pipe>, to: &Arc<Pipe>, len: u64, consume: bool) -> IoResult {
    if Arc::ptr_eq(from, to) {
        return Err(Errno::EINVAL.into());
    }
    let from_first = Arc::as_ptr(from) < Arc::as_ptr(to);
    let (mut a, mut b) =
        if from_first { (from.state.lock(), to.state.lock()) } else { (to.state.lock(), from.state.lock()) };
    let (src, dst) = if from_first { (&mut *a, &mut *b) } else { (&mut *b, &mut *a) };
    if !has_input(from, src)? {
        return Ok(0);
    }
    if dst.readers == 0 {
        return Err(Errno::EPIPE.into());
    }
    let room = dst.room();
    if room == 0 {
        return Err(FileError::WouldBlock(to.key()));
    }
    let n = src.buf.len().min(room).min(len.min(usize::MAX as u64) as usize);
    let mut chunk = [0u8; PIPE_BUF];
    let mut moved = 0;
    while moved < n {
        let k = (n - moved).min(PIPE_BUF);
        for (to, from) in chunk[..k].iter_mut().zip(src.buf.range(moved..moved + k)) {
            *to = *from;
        }
        let put = dst.put(&chunk[..k]);
        moved += put;
        if put < k {
            break; // cannot happen: the room was counted above
        }
    }
    let n = moved;
    if consume {
        src.drop_front(n);
    }
    drop((a, b));
    sched::notify_poll(to.key(), poll::POLLIN | poll::POLLRDNORM);
    if consume {
        sched::notify_poll(from.key(), poll::POLLOUT | poll::POLLWRNORM);
    }
    Ok(n as u64)
}
