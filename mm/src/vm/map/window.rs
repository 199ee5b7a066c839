//! The code window: one range of address space, aligned to its size, that executable and
//! `MAP_CODE` mappings are placed in ([`crate::vm::abi::SYS_CODE_WINDOW`]). It is address space
//! only — not a mapping, no memory, charged to no limit — so all it changes is placement (see
//! the parent module's documentation for the policy).

use super::VmMap;
use crate::vm::abi::{self, CodeWindowInfo};
use crate::vm::tree::{Dir, GapQuery};
use crate::vm::{Errno, PAGE};

/// Smallest code-window size.
pub const WINDOW_MIN: u64 = 2 << 20;
/// Largest code-window size.
pub const WINDOW_MAX: u64 = 4 << 30;
/// Default code-window size.
pub const WINDOW_DEFAULT: u64 = 512 << 20;

impl VmMap {
    pub(super) fn window_range(&self) -> Option<(u64, u64)> {
        self.window.base.map(|b| (b, b + self.window.size))
    }

    fn window_candidate(&self, size: u64) -> Option<u64> {
        if let Some((s, e)) = self.window.anchor {
            let base = s & !(size - 1);
            if e <= base + size && base + size <= self.layout.task_size {
                return Some(base);
            }
        }
        let q = GapQuery {
            align: size,
            ..GapQuery::new(self.layout.mmap_min_addr, self.layout.mmap_base, size, Dir::Highest)
        };
        self.tree.find_gap(&q)
    }

    /// Moves the window to `size`/its candidate base. `EBUSY` if a mapping now inside the window
    /// would end up outside it.
    fn relocate_window(&mut self, size: u64) -> Result<(), Errno> {
        let base = self.window_candidate(size).ok_or(Errno::ENOMEM)?;
        let (nb, ne) = (base, base + size);
        if let Some((ob, oe)) = self.window_range()
            && self.mappings_in(ob, oe).any(|v| v.start < nb || v.end > ne)
        {
            return Err(Errno::EBUSY);
        }
        self.window.base = Some(base);
        self.window.size = size;
        self.window.used = self.mappings_in(nb, ne).map(|v| v.len()).sum();
        // Keep the heap out of the window while it is empty: code placed lowest-first would
        // otherwise land just above the bss and stop `brk` from growing.
        let sb = self.layout.start_brk;
        if self.brk == sb && nb <= sb && sb < ne && ne < self.layout.task_size {
            self.layout.start_brk = ne;
            self.brk = ne;
        }
        Ok(())
    }

    /// Places the window if it is not placed yet; its range, if it could be placed.
    pub(super) fn ensure_window(&mut self) -> Option<(u64, u64)> {
        if self.window.base.is_none() {
            let _ = self.relocate_window(self.window.size);
        }
        self.window_range()
    }

    /// Places the code window for a new program: around `exec` (the executable segment's
    /// `[start, end)`) when it fits in one aligned window of the current size, otherwise in an
    /// aligned free gap (top-down below `mmap_base`, one search). Call after the loader has
    /// mapped the image. Without this call the window is placed on first use.
    ///
    /// # Errors
    /// `ENOMEM` when the segment does not fit and no free aligned gap exists (code then goes
    /// outside, counted); `EBUSY` if the window already holds mappings the new one would not.
    pub fn init_code_window(&mut self, exec: Option<(u64, u64)>) -> Result<CodeWindowInfo, Errno> {
        self.window.anchor = exec.filter(|(s, e)| s < e);
        self.relocate_window(self.window.size)?;
        Ok(self.code_window())
    }

    /// Where the kernel's loader puts an image whose place it chooses (the program's interpreter,
    /// `PT_INTERP`): `len` bytes aligned to `align` (the image's largest `p_align`, a power of
    /// two of at least a page), placed as code: the lowest fit of the code window, beside the
    /// program's text; when the window has no room, outside it on a range that crosses no 1 GiB
    /// line, counted in `placed_outside`. Maps nothing: the loader then maps the segments with
    /// [`VmMap::map_kernel`]. Call after [`VmMap::init_code_window`].
    ///
    /// # Errors
    /// `EINVAL` for an `align` that is not a power of two of at least a page, or a `len` that is
    /// zero or not a whole number of pages; `ENOMEM` when nothing fits (strict mode: nothing in
    /// the window).
    pub fn place_image(&mut self, len: u64, align: u64) -> Result<u64, Errno> {
        if !align.is_power_of_two() || align < PAGE || len == 0 || !len.is_multiple_of(PAGE) {
            return Err(Errno::EINVAL);
        }
        let (at, outside) = self.place_code(0, len, align)?;
        if outside {
            self.window.placed_outside += 1;
        }
        Ok(at)
    }

    /// Sets where lowest-fit code placement starts in the window, `offset` bytes above its
    /// start (`aslr::code_floor`, drawn at exec; 0 by default and without randomisation):
    /// the interpreter ([`VmMap::place_image`]), loaders' reservations, JIT buffers and code
    /// mapped without a hint in the window go to the lowest fit at or above it, else to the
    /// lowest fit in the whole window. So a library's address carries random bits of its own
    /// besides the window's: without a floor the interpreter sat at the window's start, which
    /// a leak of the program's text (it lies in the same self-aligned window) gives away. An
    /// offset past the window's first quarter is taken as its largest value below it.
    pub fn set_code_floor(&mut self, offset: u64) {
        let most = (self.window.size / 4).saturating_sub(PAGE);
        self.window.floor = offset.min(most) & !(PAGE - 1);
    }

    /// The lowest fit for code of `len` bytes aligned to `align` in the window `[b, e)`: at or
    /// above its floor, else anywhere in it.
    pub(super) fn lowest_code_fit(&self, (b, e): (u64, u64), len: u64, align: u64) -> Option<u64> {
        let l = self.layout;
        let lo = b.max(l.mmap_min_addr).max(super::mmap::WINDOW_FLOOR);
        let q = GapQuery { align, ..GapQuery::new(lo, e.min(l.task_size), len, Dir::Lowest) };
        // (Within the first quarter of the window as it is now: a program may have shrunk it.)
        let floor = b.saturating_add(self.window.floor.min((e - b) / 4));
        if floor > lo
            && let Some(a) = self.tree.find_gap(&GapQuery { lo: floor, ..q })
        {
            return Some(a);
        }
        self.tree.find_gap(&q)
    }

    /// The window's counters ([`abi::WINDOW_GET`]). Base 0 while it is not placed.
    pub fn code_window(&self) -> CodeWindowInfo {
        CodeWindowInfo {
            base: self.window.base.unwrap_or(0),
            size: self.window.size,
            used: self.window.used,
            placed_outside: self.window.placed_outside,
            strict: u64::from(self.window.strict),
        }
    }

    /// The window's `[start, end)`, if placed.
    pub fn code_window_range(&self) -> Option<(u64, u64)> {
        self.window_range()
    }

    /// Sets the window size ([`abi::WINDOW_SET_SIZE`]). The window moves to the aligned block of
    /// the new size around the program's executable segment if that fits, else to a free aligned
    /// gap.
    ///
    /// # Errors
    /// `EINVAL` unless `size` is a power of two in 2 MiB..=4 GiB; `EBUSY` if the window holds a
    /// mapping the new window would not contain (the program's own segment, kept inside when it
    /// fits, does not count); `ENOMEM` if no place exists.
    pub fn set_window_size(&mut self, size: u64) -> Result<(), Errno> {
        if !size.is_power_of_two() || !(WINDOW_MIN..=WINDOW_MAX).contains(&size) {
            return Err(Errno::EINVAL);
        }
        if self.window.base.is_none() {
            self.window.size = size;
            return Ok(());
        }
        self.relocate_window(size)
    }

    /// Strict mode on or off ([`abi::WINDOW_SET_STRICT`]).
    pub fn set_window_strict(&mut self, strict: bool) {
        self.window.strict = strict;
    }

    /// Turns the placement rule for libraries and JITs off (reservations placed as data, hints
    /// in the window ignored as before it), to measure what it changes.
    #[cfg(test)]
    pub(crate) fn set_library_rule(&mut self, on: bool) {
        self.window.library_rule = on;
    }

    /// The W^X opt-out ([`abi::WINDOW_ALLOW_WX`]).
    pub fn set_allow_wx(&mut self, allow: bool) {
        self.allow_wx = allow;
    }

    /// The process's `personality(2)` value, as far as placement cares: `READ_IMPLIES_EXEC`
    /// lifts W^X (docs/address-space.md, "W^X and the way out"). The kernel passes it at
    /// `execve` (Linux keeps the personality across exec; `setarch -X PROGRAM` sets it and execs)
    /// and whenever `personality(2)` changes it. Unlike Linux it does not add `PROT_EXEC` to
    /// readable mappings: what an administrator needs is "this program may map RWX", and
    /// executable data would put every readable mapping into the code window.
    pub fn set_personality(&mut self, persona: u64) {
        self.read_implies_exec = persona & linux_abi::prctl::READ_IMPLIES_EXEC != 0;
    }

    /// Whether a writable and executable mapping is refused: W^X (unless the program opted out
    /// or its personality has `READ_IMPLIES_EXEC`) or MDWE (which nothing turns off).
    pub(super) fn refuses_wx(&self) -> bool {
        !(self.allow_wx || self.read_implies_exec) || self.mdwe != 0
    }

    /// `prctl(PR_SET_MDWE, flags)`, as Linux 6.6: `PR_MDWE_REFUSE_EXEC_GAIN` refuses
    /// writable-and-executable mappings and making a mapping executable that was not;
    /// `PR_MDWE_NO_INHERIT` keeps a forked child free of it. Once set it cannot be cleared or
    /// weakened (`EPERM`); unknown bits, or `NO_INHERIT` alone, are `EINVAL`. It is kept across
    /// `execve` (the kernel carries it into the new space: [`VmMap::mdwe`]).
    ///
    /// # Errors
    /// As above.
    pub fn set_mdwe(&mut self, flags: u64) -> Result<(), Errno> {
        use linux_abi::prctl::{PR_MDWE_NO_INHERIT, PR_MDWE_REFUSE_EXEC_GAIN};
        if flags & !(PR_MDWE_REFUSE_EXEC_GAIN | PR_MDWE_NO_INHERIT) != 0
            || (flags & PR_MDWE_NO_INHERIT != 0 && flags & PR_MDWE_REFUSE_EXEC_GAIN == 0)
        {
            return Err(Errno::EINVAL);
        }
        if self.mdwe & !flags != 0 {
            return Err(Errno::EPERM);
        }
        self.mdwe = flags;
        Ok(())
    }

    /// `prctl(PR_GET_MDWE)`: the flags set.
    pub fn mdwe(&self) -> u64 {
        self.mdwe
    }

    /// [`abi::SYS_CODE_WINDOW`] as one call: returns the info to copy out for
    /// [`abi::WINDOW_GET`], `None` for the other ops (return 0).
    ///
    /// # Errors
    /// `EINVAL` for an unknown op or an `arg` other than 0/1 for the switches; the errors of
    /// [`VmMap::set_window_size`].
    pub fn code_window_op(&mut self, op: u64, arg: u64) -> Result<Option<CodeWindowInfo>, Errno> {
        let switch = |a: u64| match a {
            0 => Ok(false),
            1 => Ok(true),
            _ => Err(Errno::EINVAL),
        };
        match op {
            abi::WINDOW_GET => Ok(Some(self.code_window())),
            abi::WINDOW_SET_SIZE => self.set_window_size(arg).map(|()| None),
            abi::WINDOW_SET_STRICT => switch(arg).map(|s| self.set_window_strict(s)).map(|()| None),
            abi::WINDOW_ALLOW_WX => switch(arg).map(|s| self.set_allow_wx(s)).map(|()| None),
            _ => Err(Errno::EINVAL),
        }
    }

    pub(super) fn inside_window(&self, s: u64, e: u64) -> bool {
        self.window_range().is_some_and(|(b, we)| b <= s && e <= we)
    }
}
