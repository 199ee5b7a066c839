//! `/proc/PID/maps`: the process's memory map, in the format of Linux's `fs/proc/task_mmu.c`
//! (`show_map_vma`), so that a program, a debugger or `scripts/pictures.py` reads this kernel's
//! layout with the parser it uses on Linux.
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
use alloc::vec::Vec;
use core::fmt::{self, Write};

use mm::vm::{Vma, VmaFlags};

use crate::fs::text::Text;
use crate::process::{Process, STACK_TOP};

/// Width the line is padded to before the space and the name (Linux: `seq_setwidth` with
/// `25 + sizeof(void *) * 6 - 1`).
const NAME_COLUMN: usize = 72;

/// The whole listing of `p`'s memory map. The text is built under the memory lock and copied
/// out after it is released (a copy may demand-page, which takes the same lock).
pub fn generate(p: &Process) -> Result<Vec<u8>, fmt::Error> {
    let (exe, exe_len) = p.posix.exe();
    let exe = core::str::from_utf8(&exe[..exe_len]).unwrap_or("");
    let mut out = Text(Vec::new());
    let Some(space) = p.space() else { return Ok(Vec::new()) };
    let mm = space.lock();
    for vma in mm.vm().iter() {
        // An attachment of a System V segment: named by its key, its inode the segment's id.
        let shm = vma.flags.contains(VmaFlags::OBJECT).then(|| mm.backings().at(vma.start)).flatten();
        match shm.and_then(|b| crate::ipc::shm::segment_of(&b.object)) {
            Some(seg) => line(&mut out, vma, seg.id() as u64, Some(&ShmName(&seg)))?,
            None => line(&mut out, vma, 0, name(vma, exe).as_ref().map(|n| n as &dyn fmt::Display))?,
        }
    }
    Ok(out.0)
}

/// The name of a System V segment's mappings (`ipc::shm::Segment::map_name`).
struct ShmName<'a>(&'a crate::ipc::shm::Segment);

impl fmt::Display for ShmName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.0.map_name(f)
    }
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

/// One line of the listing (Linux's `show_vma_header_prefix` and `show_map_vma`), with inode
/// number `ino`.
fn line(out: &mut Text, vma: &Vma, ino: u64, name: Option<&dyn fmt::Display>) -> fmt::Result {
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
        ino
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
