//! Pipes, after Linux's fs/pipe.c: `pipe2` makes a 64 KiB buffer with a read end and a write
//! end, each an open file description that `dup`, `fork` and `execve` share like any other.
//!
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
//! its key, so a change between the look and the block restarts the call at once.
use alloc::collections::VecDeque;
use alloc::sync::Arc;
use core::sync::atomic::{AtomicU32, Ordering};

use spin::Mutex;

use linux_abi::Errno;
use linux_abi::fcntl::{O_CLOEXEC, O_DIRECT, O_NONBLOCK, O_WRONLY};

use super::file::{FdEntry, FdTable, FileKind, OpenFile};
use crate::arch::aarch64::exception::TrapFrame;
use crate::memory::fallible;
use crate::memory::uaccess::{copy_in, copy_out};
use crate::sched::{self, Action, Wait, WaitFor};

/// The buffer of a pipe (Linux's default: 16 pages).
pub const PIPE_SIZE: usize = 64 << 10;
/// Writes up to this size are atomic.
pub const PIPE_BUF: usize = 4096;

struct State {
    buf: VecDeque<u8>,
    readers: usize,
    writers: usize,
}

/// A pipe's buffer and the count of its open ends.
pub struct Pipe {
    state: Mutex<State>,
}

impl core::fmt::Debug for Pipe {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.write_str("Pipe")
    }
}

impl Pipe {
    /// The event key of this pipe (offset by 2: never a user futex's key, nor a family's).
    fn key(&self) -> usize {
        core::ptr::from_ref(self) as usize | 2
    }
}

/// One end of a pipe, held by its open file description.
#[derive(Debug)]
pub struct PipeEnd {
    pipe: Arc<Pipe>,
    write: bool,
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

fn done(frame: &mut TrapFrame, result: Result<u64, Errno>) -> Action {
    Action::reply(frame, result)
}

fn block(pipe: &Pipe, generation: u32) -> Action {
    Action::Block(Wait { what: WaitFor::Event { key: pipe.key(), generation }, deadline: None })
}

/// `pipe2(fds, flags)` into the descriptor table `files`: `EINVAL` for other flags than
/// `O_CLOEXEC`, `O_NONBLOCK`, `O_DIRECT` (packet mode: accepted, the pipe stays a byte stream);
/// `EMFILE`; `ENOMEM`; `EFAULT` (both descriptors closed again, as Linux).
///
/// # Errors
/// As above.
pub fn pipe2(files: &Mutex<FdTable>, fds: u64, flags: u64) -> Result<u64, Errno> {
    let known = u64::from(O_CLOEXEC | O_NONBLOCK | O_DIRECT);
    if flags & !known != 0 {
        return Err(Errno::EINVAL);
    }
    let mut buf = VecDeque::new();
    buf.try_reserve_exact(PIPE_SIZE).map_err(|_| Errno::ENOMEM)?;
    let pipe = fallible::arc(Pipe { state: Mutex::new(State { buf, readers: 0, writers: 0 }) })
        .map_err(|_| Errno::ENOMEM)?;
    let status = flags as u32 & (O_NONBLOCK | O_DIRECT);
    // Each end counts itself once it exists, so an end dropped on a failure below uncounts only
    // itself.
    let end = |write: bool| {
        let mut st = pipe.state.lock();
        if write {
            st.writers += 1
        } else {
            st.readers += 1
        }
        drop(st);
        let kind = FileKind::Pipe(PipeEnd { pipe: pipe.clone(), write });
        let mode = if write { O_WRONLY } else { 0 };
        fallible::arc(OpenFile { kind, flags: AtomicU32::new(mode | status) }).map_err(|_| Errno::ENOMEM)
    };
    let cloexec = flags & u64::from(O_CLOEXEC) != 0;
    let (read_end, write_end) = end(false).and_then(|r| Ok((r, end(true)?)))?;
    let mut table = files.lock();
    let r = table.install_lowest(0, FdEntry { file: read_end, cloexec })?;
    let w = match table.install_lowest(0, FdEntry { file: write_end, cloexec }) {
        Ok(w) => w,
        Err(e) => {
            table.close(r as u64);
            return Err(e);
        }
    };
    drop(table);
    let mut out = [0u8; 8];
    out[..4].copy_from_slice(&(r as u32).to_le_bytes());
    out[4..].copy_from_slice(&(w as u32).to_le_bytes());
    if copy_out(fds, &out).is_err() {
        let mut table = files.lock();
        table.close(r as u64);
        table.close(w as u64);
        return Err(Errno::EFAULT);
    }
    Ok(0)
}

/// `read` on a pipe's read end (a write end reads as `EBADF`, as Linux's `FMODE_READ` check).
pub fn read(frame: &mut TrapFrame, file: &OpenFile, end: &PipeEnd, buffers: &[(u64, u64)]) -> Action {
    if end.write {
        return done(frame, Err(Errno::EBADF));
    }
    let total = buffers.iter().map(|b| b.1).sum::<u64>().min(PIPE_SIZE as u64) as usize;
    if total == 0 {
        return done(frame, Ok(0));
    }
    let generation = sched::event_generation();
    let mut data = alloc::vec::Vec::new();
    if data.try_reserve_exact(total).is_err() {
        return done(frame, Err(Errno::ENOMEM));
    }
    {
        let mut st = end.pipe.state.lock();
        if st.buf.is_empty() {
            if st.writers == 0 {
                return done(frame, Ok(0));
            }
            drop(st);
            if file.flags.load(Ordering::Relaxed) & O_NONBLOCK != 0 {
                return done(frame, Err(Errno::EAGAIN));
            }
            return block(&end.pipe, generation);
        }
        let n = total.min(st.buf.len());
        data.extend(st.buf.drain(..n));
    }
    sched::notify(end.pipe.key());
    let mut at = 0;
    for &(base, len) in buffers {
        let take = (len as usize).min(data.len() - at);
        if take == 0 {
            break;
        }
        if copy_out(base, &data[at..at + take]).is_err() {
            return done(frame, if at == 0 { Err(Errno::EFAULT) } else { Ok(at as u64) });
        }
        at += take;
    }
    done(frame, Ok(at as u64))
}

/// `write` on a pipe's write end, as Linux's `pipe_write`: up to `PIPE_BUF` bytes go in whole
/// or not at all; a larger write goes in as space appears. Without `O_NONBLOCK` the call
/// returns only when everything is written: when the pipe fills first it blocks, counting in
/// `progress` (the thread's) what it wrote so far, and its restart skips those bytes; a signal
/// that ends the wait returns that count (`sched::interrupt`). With `O_NONBLOCK` it returns
/// what fitted, `EAGAIN` if nothing did. No reader: `sigpipe` (the caller sends `SIGPIPE`), and
/// `EPIPE` unless some bytes went in.
pub fn write(
    frame: &mut TrapFrame,
    progress: &mut u64,
    file: &OpenFile,
    end: &PipeEnd,
    buffers: &[(u64, u64)],
    sigpipe: &dyn Fn(),
) -> Action {
    let resumed = core::mem::take(progress);
    if !end.write {
        return done(frame, Err(Errno::EBADF));
    }
    let total: u64 = buffers.iter().map(|b| b.1).sum();
    if total == 0 {
        return done(frame, Ok(0));
    }
    let generation = sched::event_generation();
    let nonblock = file.flags.load(Ordering::Relaxed) & O_NONBLOCK != 0;
    let mut chunk = [0u8; PIPE_BUF];
    if total as usize <= PIPE_BUF {
        // Atomic: gathered first, then put in whole under one hold of the lock, so no other
        // writer's bytes come between.
        let mut at = 0;
        for &(base, len) in buffers {
            if copy_in(&mut chunk[at..at + len as usize], base).is_err() {
                return done(frame, Err(Errno::EFAULT));
            }
            at += len as usize;
        }
        let mut st = end.pipe.state.lock();
        if st.readers == 0 {
            drop(st);
            return broken(sigpipe, frame, &end.pipe, 0);
        }
        if PIPE_SIZE - st.buf.len() < at {
            drop(st);
            return if nonblock { done(frame, Err(Errno::EAGAIN)) } else { block(&end.pipe, generation) };
        }
        st.buf.extend(&chunk[..at]); // never grows the buffer: it holds PIPE_SIZE from `pipe2` on
        drop(st);
        return wrote(frame, &end.pipe, at as u64);
    }
    let mut written = resumed.min(total);
    let mut skip = written;
    for &(base, len) in buffers {
        let mut off = skip.min(len);
        skip -= off;
        while off < len {
            let space = {
                let st = end.pipe.state.lock();
                if st.readers == 0 {
                    drop(st);
                    return broken(sigpipe, frame, &end.pipe, written);
                }
                PIPE_SIZE - st.buf.len()
            };
            if space == 0 {
                if nonblock {
                    return if written > 0 {
                        wrote(frame, &end.pipe, written)
                    } else {
                        done(frame, Err(Errno::EAGAIN))
                    };
                }
                if written > resumed {
                    // Readers may be waiting for what went in: wake them before sleeping.
                    sched::notify(end.pipe.key());
                }
                *progress = written;
                return block(&end.pipe, generation);
            }
            let n = ((len - off) as usize).min(chunk.len()).min(space);
            if copy_in(&mut chunk[..n], base.wrapping_add(off)).is_err() {
                return if written == 0 {
                    done(frame, Err(Errno::EFAULT))
                } else {
                    wrote(frame, &end.pipe, written)
                };
            }
            let pushed = {
                let mut st = end.pipe.state.lock();
                // Another writer may have taken some of the space meanwhile.
                let fit = n.min(PIPE_SIZE - st.buf.len());
                st.buf.extend(&chunk[..fit]);
                fit
            };
            written += pushed as u64;
            off += pushed as u64;
        }
    }
    wrote(frame, &end.pipe, written)
}

/// A write with no read end open: `SIGPIPE` (`sigpipe`), and `EPIPE` unless `written` bytes
/// went in.
fn broken(sigpipe: &dyn Fn(), frame: &mut TrapFrame, pipe: &Pipe, written: u64) -> Action {
    sigpipe();
    if written > 0 { wrote(frame, pipe, written) } else { done(frame, Err(Errno::EPIPE)) }
}

fn wrote(frame: &mut TrapFrame, pipe: &Pipe, n: u64) -> Action {
    sched::notify(pipe.key());
    done(frame, Ok(n))
}

/// Bytes waiting in the pipe (`FIONREAD`).
pub fn available(end: &PipeEnd) -> usize {
    end.pipe.state.lock().buf.len()
}

/// What a poll of this end reports ready: (readable or at end of file, writable or broken).
pub fn ready(end: &PipeEnd) -> (bool, bool) {
    let st = end.pipe.state.lock();
    if end.write { (false, st.readers == 0 || st.buf.len() < PIPE_SIZE) } else { (!st.buf.is_empty(), false) }
}

/// `POLLHUP` for a read end without writers, `POLLERR` for a write end without readers.
pub fn hangup(end: &PipeEnd) -> u16 {
    use linux_abi::poll;
    let st = end.pipe.state.lock();
    match (end.write, st.readers, st.writers) {
        (false, _, 0) => poll::POLLHUP,
        (true, 0, _) => poll::POLLERR,
        _ => 0,
    }
}
