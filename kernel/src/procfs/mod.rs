//! `/proc/self/maps`: the process's memory map, in the format of Linux's `fs/proc/task_mmu.c`
//! (`show_map_vma`), so that a program, a debugger or `scripts/pictures.py` reads this kernel's
//! layout with the parser it uses on Linux. It is the only file `openat` finds: the machine has
//! no file system (every other path is ENOENT, as `files::no_such_path` answers the other path
//! calls).
//!
//! One line per area, ascending (tests/programs/maps.c on this kernel):
//!
//! ```text
//! 00010000-00011000 r-xp 00000000 00:00 0
//! 00400000-00491000 r-xp 00000000 00:00 0                                  /maps-test
//! 004ac000-004b0000 r--p 00000000 00:00 0                                  /maps-test
//! 004b0000-005b8000 rw-p 00000000 00:00 0                                  /maps-test
//! 20000000-20032000 rw-p 00000000 00:00 0                                  [heap]
//! fffff7eef000-fffff7ef0000 rw-s 00000000 00:00 0                          /dev/zero (deleted)
//! fffff7ef0000-fffff7ff0000 ---p 00000000 00:00 0
//! fffff7ff0000-fffff8000000 rw-p 00000000 00:00 0
//! ffffff7ff000-fffffffff000 rw-p 00000000 00:00 0                          [stack]
//! ```
//!
//! Start and end in at least 8 lower-case hex digits; `r`/`w`/`x` or `-`, then `s` (shared) or
//! `p` (private); the file offset, device and inode, which are 0 here: the loader copies the
//! program's segments into anonymous memory and records neither their file offsets nor a file
//! (Linux prints the segment's offset and the initramfs file's device and inode, and lists the
//! bss beyond the file's last page as an anonymous area of its own). A named area's line is
//! padded with spaces to 72 characters (`seq_pad`), then a space and the name: the program's
//! path for its segments, `[heap]` for the `brk` area, `[stack]` for the initial stack, and
//! `/dev/zero (deleted)` for shared anonymous memory (Linux backs it with an unlinked shmem
//! file). Anonymous lines end with the space after the inode, as Linux's do. There is no
//! `[vdso]` or `[vvar]`: this kernel maps neither.
//!
//! Linux generates the text as it is read (`seq_file`); here it is generated when a read starts
//! at offset 0 and kept until the descriptor is closed, so a mapping made between `open` and the
//! first `read` shows, as on Linux, and one made while a long listing is half read does not.
use alloc::boxed::Box;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::fmt::{self, Write};
use core::sync::atomic::AtomicU32;

use linux_abi::Errno;
use linux_abi::fcntl::{O_ACCMODE, O_CLOEXEC, O_CREAT, O_DIRECTORY, O_EXCL, O_NONBLOCK, S_IFREG};
use linux_abi::layout::Stat;
use mm::vm::{Vma, VmaFlags};

use crate::fs::file::{FdEntry, FileKind, OpenFile};
use crate::fs::text::{Snapshot, TextSource};
use crate::process::{Process, STACK_TOP};

/// Width the line is padded to before the space and the name (Linux: `seq_setwidth` with
/// `25 + sizeof(void *) * 6 - 1`).
const NAME_COLUMN: usize = 72;

/// The source of an open `/proc/self/maps`: the process it was opened in, held weakly (the
/// process's descriptor table holds the file).
struct Maps(Weak<Process>);

impl TextSource for Maps {
    fn generate(&self) -> Result<Vec<u8>, Errno> {
        let Some(owner) = self.0.upgrade() else { return Ok(Vec::new()) };
        generate(&owner).map_err(|fmt::Error| Errno::ENOMEM)
    }

    /// A regular file of size 0, mode 0444, as Linux's procfs reports.
    fn stat(&self) -> Stat {
        Stat { dev: 22, ino: 4026531840, mode: S_IFREG | 0o444, nlink: 1, blksize: 1024, ..Stat::default() }
    }
}

/// `openat(dirfd, path, flags, mode)`: `/proc/self/maps` or `/proc/PID/maps` of the caller;
/// every other path is missing (ENOENT). An absolute path ignores `dirfd`, as on Linux; a
/// relative one is taken from the root, the only working directory there is.
///
/// # Errors
/// As above; `EFAULT`, `ENAMETOOLONG` (the path), `ENOTDIR`, `EEXIST`, `EMFILE`, `ENOMEM`.
pub fn openat(p: &Arc<Process>, path: u64, flags: u64) -> Result<u64, Errno> {
    let path = crate::memory::uaccess::read_path(path)?;
    let mut parts = path.split(|&b| b == b'/').filter(|c| !c.is_empty() && *c != b".");
    // Linux's `name_to_int`: decimal digits without a leading zero.
    let number = |c: &[u8]| {
        if c.first() == Some(&b'0') { None } else { core::str::from_utf8(c).ok()?.parse::<u32>().ok() }
    };
    let own_pid = |c: &[u8]| c == b"self" || number(c) == Some(p.pid);
    let found = parts.next() == Some(b"proc")
        && parts.next().is_some_and(own_pid)
        && parts.next() == Some(b"maps")
        && parts.next().is_none();
    if !found {
        return Err(Errno::ENOENT);
    }
    let flags = flags as u32;
    if flags & O_DIRECTORY != 0 {
        return Err(Errno::ENOTDIR);
    }
    if flags & (O_CREAT | O_EXCL) == O_CREAT | O_EXCL {
        return Err(Errno::EEXIST);
    }
    let source = crate::memory::fallible::boxed(Maps(Arc::downgrade(p))).ok_or(Errno::ENOMEM)?;
    let snapshot = Snapshot::new(source as Box<dyn TextSource>);
    // The access mode and O_NONBLOCK are kept (fcntl F_GETFL reads them); programs run as root,
    // so a write-mode open succeeds as on Linux and only the write fails (`text::write_error`).
    let status = flags & (O_ACCMODE | O_NONBLOCK);
    let file = crate::memory::fallible::arc(OpenFile {
        kind: FileKind::Text(snapshot),
        flags: AtomicU32::new(status),
    })
    .map_err(|_| Errno::ENOMEM)?;
    let cloexec = flags & O_CLOEXEC != 0;
    p.posix.files.lock().install_lowest(0, FdEntry { file, cloexec }).map(|fd| fd as u64)
}

/// A `fmt::Write` into a vector that fails instead of aborting when the heap is full.
struct Text(Vec<u8>);

impl Write for Text {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        self.0.try_reserve(s.len()).map_err(|_| fmt::Error)?;
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

/// The whole listing of `p`'s memory map. The text is built under the memory lock and copied
/// out after it is released (a copy may demand-page, which takes the same lock).
fn generate(p: &Process) -> Result<Vec<u8>, fmt::Error> {
    let (exe, exe_len) = p.posix.exe();
    let exe = core::str::from_utf8(&exe[..exe_len]).unwrap_or("");
    let mut out = Text(Vec::new());
    let Some(space) = p.space() else { return Ok(Vec::new()) };
    let mm = space.lock();
    for vma in mm.vm().iter() {
        line(&mut out, vma, name(vma, exe))?;
    }
    Ok(out.0)
}

/// What Linux would name `vma` (`show_map_vma`), if anything.
fn name<'a>(vma: &Vma, exe: &'a str) -> Option<&'a str> {
    if vma.flags.contains(VmaFlags::IMAGE) {
        Some(exe)
    } else if vma.flags.contains(VmaFlags::SHARED) {
        // Linux backs shared anonymous memory with an unlinked shmem file (`shmem_zero_setup`).
        Some("/dev/zero (deleted)")
    } else if vma.flags.contains(VmaFlags::HEAP) {
        Some("[heap]")
    } else if vma.flags.contains(VmaFlags::STACK) && vma.start < STACK_TOP && STACK_TOP <= vma.end {
        // Linux names the area holding `mm->start_stack`; thread stacks stay anonymous.
        Some("[stack]")
    } else {
        None
    }
}

/// One line of the listing (Linux's `show_vma_header_prefix` and `show_map_vma`).
fn line(out: &mut Text, vma: &Vma, name: Option<&str>) -> fmt::Result {
    let at = out.0.len();
    let flag = |on: bool, c: char| if on { c } else { '-' };
    let p = vma.prot;
    let shared = if vma.flags.contains(VmaFlags::SHARED) { 's' } else { 'p' };
    write!(out, "{:08x}-{:08x} ", vma.start, vma.end)?;
    write!(
        out,
        "{}{}{}{shared} {:08x} {:02x}:{:02x} {} ",
        flag(p.read(), 'r'),
        flag(p.write(), 'w'),
        flag(p.exec(), 'x'),
        0,
        0,
        0,
        0
    )?;
    if let Some(name) = name {
        let width = out.0.len() - at;
        for _ in width..NAME_COLUMN {
            out.write_str(" ")?;
        }
        write!(out, " {name}")?;
    }
    out.write_str("\n")
}
