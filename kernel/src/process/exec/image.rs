//! What `/proc` shows of the program a process runs, recorded when it is loaded (Linux keeps
//! the same facts in `mm_struct`: `exe_file`, `arg_start`..`env_end`, `saved_auxv`, and each
//! file-backed area's file and offset in its `vm_area_struct`).
//!
//! The loader maps the program's segments from the file's page cache (each area then holds the
//! cache and its offset), or copies them into anonymous memory when the bytes have no page cache
//! (the test image's built-in programs), where the memory map does not know where an area came
//! from. This record serves both alike, and names the areas (the program's or the
//! interpreter's path, which a page cache does not keep): for each segment, the pages it covers
//! and the file offset of its first page, which
//! `/proc/PID/maps` prints with the file's device and inode as Linux prints them for the
//! segments it maps from the file. `/proc/PID/cmdline` and `environ` read the process's memory
//! between the recorded bounds, as Linux's do (so a program that rewrites its arguments shows
//! them rewritten).
use alloc::sync::Arc;
use alloc::vec::Vec;

use mm::addr::PAGE_SIZE;
use mm::vm::Errno;
use vfs::node::Inode;

use super::elf::Executable;

/// One loaded segment: the pages `[start, end)` and the file offset of the page at `start`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment {
    /// First byte of its first page.
    pub start: u64,
    /// End of its last page.
    pub end: u64,
    /// The file offset of the page at `start`.
    pub offset: u64,
}

/// The record of a loaded program (module documentation).
pub struct ProgramImage {
    /// Its file (`/proc/PID/exe`, the device and inode of its areas); `None` for a program the
    /// kernel was given as bytes (the test image's).
    pub file: Option<Arc<dyn Inode>>,
    /// Its `PT_LOAD` segments, in the program's order.
    pub segments: Vec<Segment>,
    /// `[arg_start, arg_end)`: the argument strings on the initial stack, each with its NUL.
    pub args: (u64, u64),
    /// `[env_start, env_end)`: the environment strings.
    pub env: (u64, u64),
    /// The auxiliary vector given to it, `AT_NULL` last (`/proc/PID/auxv`).
    pub auxv: Vec<(u64, u64)>,
    /// Its interpreter (`PT_INTERP`), if it has one.
    pub interp: Option<Interpreter>,
    /// The end of its initial stack area (randomised per exec: `process::aslr`).
    pub stack_top: u64,
}

/// The loaded interpreter of a program (the dynamic loader): its file and segments.
pub struct Interpreter {
    /// Its file, and the path it was found by (what `/proc/PID/maps` names its areas).
    pub file: Option<(Arc<dyn Inode>, Vec<u8>)>,
    /// Its `PT_LOAD` segments.
    pub segments: Vec<Segment>,
}

impl Interpreter {
    /// The segments of `exe`, its file to be set by the caller.
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn of(exe: &Executable) -> Result<Self, Errno> {
        Ok(Self { file: None, segments: segments_of(exe)? })
    }
}

/// The pages and file offsets of `exe`'s segments.
fn segments_of(exe: &Executable) -> Result<Vec<Segment>, Errno> {
    let mut segments = Vec::new();
    crate::memory::fallible::reserve(&mut segments, exe.segments.len())?;
    for seg in &exe.segments {
        let start = seg.vaddr & !(PAGE_SIZE - 1);
        let end = (seg.vaddr + seg.memsz).next_multiple_of(PAGE_SIZE);
        segments.push(Segment { start, end, offset: seg.offset.saturating_sub(seg.vaddr - start) });
    }
    Ok(segments)
}

/// Where an image area came from: its file's device and inode, the file offset of its first
/// page, and the path to name it by (`None`: the program's own).
pub struct Origin<'a> {
    /// `st_dev` of the file (0 without one).
    pub dev: u64,
    /// `st_ino` of the file.
    pub ino: u64,
    /// The file offset of the area's first page.
    pub offset: u64,
    /// The interpreter's path, for its areas.
    pub path: Option<&'a [u8]>,
}

impl ProgramImage {
    /// The segments of `exe`, with no file yet and the stack's facts to come (the loader
    /// sets them once it has built the initial stack).
    ///
    /// # Errors
    /// `ENOMEM`.
    pub fn of(exe: &Executable) -> Result<Self, Errno> {
        Ok(Self {
            file: None,
            segments: segments_of(exe)?,
            args: (0, 0),
            env: (0, 0),
            auxv: Vec::new(),
            interp: None,
            stack_top: crate::process::STACK_TOP,
        })
    }

    /// Where the image area starting at `start` came from: the program's segments, then the
    /// interpreter's.
    pub fn origin(&self, start: u64) -> Option<Origin<'_>> {
        let find = |segs: &[Segment]| segs.iter().find(|s| s.start <= start && start < s.end).copied();
        if let Some(s) = find(&self.segments) {
            let (dev, ino) = self.file_id();
            return Some(Origin { dev, ino, offset: s.offset + (start - s.start), path: None });
        }
        let i = self.interp.as_ref()?;
        let s = find(&i.segments)?;
        let (dev, ino, path) = i.file.as_ref().map_or((0, 0, None), |(f, p)| {
            let m = f.metadata();
            (m.dev, m.ino, Some(p.as_slice()))
        });
        Some(Origin { dev, ino, offset: s.offset + (start - s.start), path })
    }

    /// The file's device and inode number (`0:0 0` without a file).
    pub fn file_id(&self) -> (u64, u64) {
        self.file.as_ref().map_or((0, 0), |f| {
            let m = f.metadata();
            (m.dev, m.ino)
        })
    }
}

/// The file of the first program, which the kernel reads from the tree by its path before it
/// hands over the bytes: the node that path names now (`None` without a tree, or for a path
/// that names nothing).
pub fn file_named(path: &str) -> Option<Arc<dyn Inode>> {
    file_at(path.as_bytes())
}

/// The node `path` names from the root, followed through symbolic links (the first program's
/// interpreter, found before any process exists).
pub fn file_at(path: &[u8]) -> Option<Arc<dyn Inode>> {
    let ctx = crate::fs::namespace::FsContext::first().ok()?;
    crate::fs::namespace::lookup(&ctx, &ctx.root, path, true).ok()
}
