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
//! path for its segments, `[heap]` for the `brk` area, `[stack]` for the initial stack,
//! `/dev/zero (deleted)` for shared anonymous memory (Linux backs it with an unlinked shmem
//! file), and `[anon:NAME]` for anonymous memory a program named (`prctl(PR_SET_VMA_ANON_NAME)`). Anonymous lines end with the space after the inode, as Linux's do. There is no
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
        // Linux shows a name given with prctl(PR_SET_VMA_ANON_NAME) when no other applies.
        let anon = mm.vm().anon_name(vma).map(|n| core::str::from_utf8(n).unwrap_or(""));
        line(&mut out, vma, name(vma, exe), anon)?;
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
fn line(out: &mut Text, vma: &Vma, name: Option<&str>, anon: Option<&str>) -> fmt::Result {
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
    if name.is_some() || anon.is_some() {
        let width = out.0.len() - at;
        for _ in width..NAME_COLUMN {
            out.write_str(" ")?;
        }
        match (name, anon) {
            (Some(name), _) => write!(out, " {name}")?,
            (None, anon) => write!(out, " [anon:{}]", anon.unwrap_or(""))?,
        }
    }
    out.write_str("\n")
}
