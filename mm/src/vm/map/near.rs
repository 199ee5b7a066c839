//! Near placement ([`crate::vm::abi::SYS_MMAP_NEAR`]): the free range within a radius of a
//! target that minimises the distance to its farthest byte, in at most two gap searches (one
//! below the target, one above), inside the code window for code and outside it for data.

use super::{Mapped, Pieces, VmMap, is_data, page_down, page_up};
use crate::vm::flags::*;
use crate::vm::prot::*;
use crate::vm::tree::{Dir, Fit, GapQuery};
use crate::vm::{Advice, AnonName, Errno, PAGE, Prot, Vma, VmaFlags};

impl VmMap {
    /// The address [`VmMap::map_near`] would choose, without mapping anything: at most two gap
    /// searches. `code` limits the search to the code window (placing it if needed is not done
    /// here: without a window the answer is `ENOMEM`); otherwise the window is skipped.
    ///
    /// # Errors
    /// `ENOMEM` when no free range lies wholly within `radius` of `target`.
    pub fn find_near(&self, target: u64, len: u64, radius: u64, code: bool) -> Result<u64, Errno> {
        self.near(target, len, radius, code).map(|(at, _)| at)
    }

    /// [`VmMap::find_near`], with the search above the target and its answer, if it had one:
    /// what [`VmMap::map_near`] teaches the tree's bottom-up hint, so that the next search above
    /// a target at or above this one's starts where this one's answer lies.
    pub(super) fn near(
        &self,
        target: u64,
        len: u64,
        radius: u64,
        code: bool,
    ) -> Result<(u64, Option<(GapQuery, Fit)>), Errno> {
        let l = &self.layout;
        let mut lo = target.saturating_sub(radius).max(l.mmap_min_addr);
        let mut hi = page_down(target.saturating_add(radius).min(l.task_size));
        lo = page_up(lo).ok_or(Errno::ENOMEM)?;
        let mut exclude = self.window_range();
        if code {
            let (b, e) = self.window_range().ok_or(Errno::ENOMEM)?;
            lo = lo.max(b);
            hi = hi.min(e);
            exclude = None;
        }
        if hi <= lo || hi - lo < len {
            return Err(Errno::ENOMEM);
        }
        // d(a) = max(t - a, a + len - t) is V-shaped with its minimum at c = t - len/2: the best
        // candidate is the highest fit below c or the lowest fit at or above it. `amin` is the
        // first page-aligned address with 2a >= 2t - len.
        let m = 2 * i128::from(target) - i128::from(len);
        let half_up = if m <= 0 { 0 } else { ((m + 1) / 2) as u64 };
        let amin = page_up(half_up).unwrap_or(!(PAGE - 1));
        let base = GapQuery { exclude, ..GapQuery::new(lo, hi, len, Dir::Lowest) };
        let up = GapQuery { lo: lo.max(amin), ..base };
        let fit = self.tree.find_fit(&up);
        let above = fit.map(|f| f.at);
        let below = amin.checked_sub(PAGE).and_then(|last| {
            let top = hi.min(last.saturating_add(len));
            self.tree.find_gap(&GapQuery { hi: top, dir: Dir::Highest, ..base })
        });
        let dist = |a: u64| -> u128 {
            let (a, t, n) = (i128::from(a), i128::from(target), i128::from(len));
            (t - a).max(a + n - t) as u128
        };
        let learnt = fit.map(|f| (up, f));
        match (below, above) {
            (Some(b), Some(a)) => Ok((if dist(a) <= dist(b) { a } else { b }, learnt)),
            (Some(b), None) => Ok((b, learnt)),
            (None, Some(a)) => Ok((a, learnt)),
            (None, None) => Err(Errno::ENOMEM),
        }
    }

    /// [`abi::SYS_MMAP_NEAR`]: maps `len` bytes of anonymous private memory wholly within
    /// `radius` of `target`, minimising the distance from `target` to the mapping's farthest end
    /// (ties: above). Executable or `MAP_CODE` requests search only the code window; others skip
    /// it. Never replaces a mapping.
    ///
    /// # Errors
    /// `EINVAL` zero or overflowing `len`, `target` not page-aligned, unknown `prot` bits, or
    /// flags other than `MAP_PRIVATE | MAP_ANONYMOUS [| MAP_CODE]`; `EACCES` writable and
    /// executable (W^X); `ENOMEM` no such free range, too many mappings, past `RLIMIT_AS` or
    /// `RLIMIT_DATA`, larger than RAM (writable), or no kernel memory for the bookkeeping.
    ///
    /// [`abi::SYS_MMAP_NEAR`]: crate::vm::abi::SYS_MMAP_NEAR
    pub fn map_near(
        &mut self,
        target: u64,
        len: u64,
        radius: u64,
        prot: u64,
        flags: u64,
    ) -> Result<Mapped, Errno> {
        let len = page_up(len).filter(|&l| l != 0 && l <= self.layout.task_size).ok_or(Errno::EINVAL)?;
        if target & (PAGE - 1) != 0 || prot & !(PROT_READ | PROT_WRITE | PROT_EXEC | PROT_SEM | PROT_BTI) != 0
        {
            return Err(Errno::EINVAL);
        }
        if flags & !MAP_CODE != MAP_PRIVATE | MAP_ANONYMOUS {
            return Err(Errno::EINVAL);
        }
        let p = Prot::from_bits_truncate(prot);
        if p.write() && p.exec() && self.refuses_wx() {
            return Err(Errno::EACCES);
        }
        if self.tree.len() > self.layout.max_map_count {
            return Err(Errno::ENOMEM);
        }
        let code = p.exec() || flags & MAP_CODE != 0;
        if code {
            self.ensure_window();
        }
        let (at, learnt) = self.near(target, len, radius, code)?;
        if let Some((q, fit)) = learnt {
            self.tree.learn(&q, fit);
        }
        let vflags = if flags & MAP_CODE != 0 { VmaFlags::CODE } else { VmaFlags::empty() };
        // As mmap: the address-space limits and the heuristic overcommit.
        if !self.may_expand(is_data(p, vflags), len) || (p.write() && !self.enough_memory(len)) {
            return Err(Errno::ENOMEM);
        }
        self.reserve()?;
        self.add_merge(Vma {
            start: at,
            end: at + len,
            prot: p,
            flags: vflags,
            advice: Advice::Normal,
            name: AnonName::NONE,
        });
        Ok(Mapped { addr: at, len, prot: p, replaced: Pieces::new(), populate: false, outside_window: false })
    }
}
