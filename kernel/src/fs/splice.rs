//! Moving bytes between two open files without the program's memory, after Linux's
//! `fs/splice.c` and `fs/read_write.c`: what `sendfile`, `copy_file_range`, `splice` and `tee`
//! do once the system-call layer has checked their descriptors and offsets.
//!
//! Every move goes through the [`File`] interface with a kernel buffer ([`KernelBuf`]), a chunk
//! at a time, so any file that reads and writes takes part as it does for `read` and `write`;
//! pipes are reached as pipes (`pipe::drain_into`, `pipe::push`, `pipe::pipe_to_pipe`), so that
//! bytes leave a pipe only once they are taken and go into one only as far as there is room,
//! as Linux moves pipe buffers. A move stops at the input's end, at the first short write, or at
//! an error; what moved before an error is the result, the error only when nothing did.
use alloc::sync::Arc;

use super::file::{File, FileError, Io, IoResult, KernelBuf, Offset};
use super::pipe::{self, Pipe};

/// Bytes moved per step.
const CHUNK: usize = 4096;

/// Linux's `MAX_RW_COUNT`: one call moves at most this much.
pub const MAX_COUNT: u64 = 0x7fff_f000;

/// Moves up to `len` bytes from `input` at `*in_pos` to `output` at `*out_pos` (`sendfile` to a
/// file that is no pipe, `copy_file_range`: Linux's `do_splice_direct`), advancing both.
/// `sigpipe` is the caller's, for an output that has no reader.
///
/// # Errors
/// The first read's or write's error when nothing moved.
pub fn file_to_file(
    input: &dyn File,
    in_pos: &mut u64,
    output: &dyn File,
    out_pos: &mut u64,
    len: u64,
    sigpipe: &dyn Fn(),
) -> IoResult {
    let mut chunk = [0u8; CHUNK];
    let mut done = 0u64;
    let partial = |done: u64, e: FileError| if done == 0 { Err(e) } else { Ok(done) };
    while done < len {
        let want = (len - done).min(CHUNK as u64) as usize;
        let got = {
            let buf = KernelBuf::reading_into(&mut chunk[..want]);
            match input.read(Io::kernel(&buf, Offset::At(*in_pos), false, false)) {
                Ok(n) => n as usize,
                Err(e) => return partial(done, e),
            }
        };
        if got == 0 {
            break;
        }
        let buf = KernelBuf::writing_from(&chunk[..got]);
        let mut progress = 0;
        let wrote = match output.write(
            Io::kernel(&buf, Offset::At(*out_pos), false, false),
            &mut progress,
            sigpipe,
        ) {
            Ok(n) => n,
            Err(e) => return partial(done, e),
        };
        *in_pos += wrote;
        *out_pos += wrote;
        done += wrote;
        if (wrote as usize) < got {
            break;
        }
    }
    Ok(done)
}

/// Moves up to `len` bytes from `input` at `*in_pos` into pipe `to` (`sendfile` or `splice`
/// into a pipe: Linux's `splice_file_to_pipe`), as far as the pipe has room, advancing
/// `*in_pos`: `WouldBlock` when the pipe is full before anything moved.
///
/// # Errors
/// `EPIPE` (the caller sends `SIGPIPE`), `WouldBlock`, the read's error, when nothing moved.
pub fn file_to_pipe(input: &dyn File, in_pos: &mut u64, to: &Arc<Pipe>, len: u64) -> IoResult {
    let mut chunk = [0u8; CHUNK];
    let mut done = 0u64;
    let partial = |done: u64, e: FileError| if done == 0 { Err(e) } else { Ok(done) };
    while done < len {
        let room = match pipe::room(to) {
            Ok(n) => n,
            Err(e) => return partial(done, e),
        };
        let want = (len - done).min(CHUNK as u64).min(room as u64) as usize;
        let got = {
            let buf = KernelBuf::reading_into(&mut chunk[..want]);
            match input.read(Io::kernel(&buf, Offset::At(*in_pos), false, false)) {
                Ok(n) => n as usize,
                Err(e) => return partial(done, e),
            }
        };
        if got == 0 {
            break;
        }
        let put = match pipe::push(to, &chunk[..got]) {
            Ok(n) => n,
            Err(e) => return partial(done, e),
        };
        *in_pos += put;
        done += put;
        if (put as usize) < got {
            break;
        }
    }
    Ok(done)
}

/// Moves up to `len` bytes out of pipe `from` into `output` at `*out_pos` (`splice` from a
/// pipe: Linux's `do_splice_from`), advancing it; the bytes leave the pipe as the file takes
/// them. 0 at the pipe's end; `WouldBlock` while it is empty.
///
/// # Errors
/// `WouldBlock`, the write's error, when nothing moved.
pub fn pipe_to_file(
    from: &Arc<Pipe>,
    output: &dyn File,
    out_pos: &mut u64,
    append: bool,
    len: u64,
    sigpipe: &dyn Fn(),
) -> IoResult {
    pipe::drain_into(from, len, &mut |bytes| {
        let buf = KernelBuf::writing_from(bytes);
        let mut progress = 0;
        let n =
            output.write(Io::kernel(&buf, Offset::At(*out_pos), append, false), &mut progress, sigpipe)?;
        *out_pos += n;
        Ok(n)
    })
}
