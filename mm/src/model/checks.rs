//! The checks of the machine: which cached entries a CPU can still use, whether they agree with
//! the tables, and whether a frame is freed while a CPU can still reach it (or, for a page-cache
//! frame, which many processes may map at once, while a live process's tables still map it).
//!
//! # When an entry is usable
//! The hardware judges an entry by its tag only: CPU `c` uses an entry tagged ASID `a`
//! (Arm ARM (DDI 0487) chapter D8, "Translation Lookaside Buffers", on ASID-tagged entries) while its
//! TTBR0 holds `a`, and it will use it after any later switch to `a` that does not flush first.
//! So an entry of `c` tagged `a` is *usable* when
//! - `c` runs a thread with ASID `a` now: it is checked against that process's tables; or
//! - `c` does not owe a rollover flush and a live process holds `a` (current generation, or
//!   carried because it was running at the rollover): a switch to it needs no flush (the
//!   allocator's fast path), so the entry is checked against that process's tables.
//!
//! The second rule reads the allocator's "flush owed" state to know which future switches skip
//! the flush; the allocator's own promise is checked by the first rule at every switch (a switch
//! that should have flushed and did not leaves a usable entry of another process's tables).
//! Entries of exited processes, and entries of an ASID that its CPU must flush before it can run
//! any ASID again, are not usable and not checked.

use std::format;
use std::string::String;
use std::vec::Vec;

use super::machine::{CachePage, Entry, Kind, Machine, ZERO_FRAME, ZERO_LEN, is_zero};
use crate::addr::VirtAddr;
use crate::descriptor::level_size;

impl Machine {
    /// The process whose tables an entry of `cpu` tagged `tag` is used for, if it is usable
    /// (module documentation).
    pub(super) fn user_of(&self, cpu: usize, tag: Option<u16>) -> Option<usize> {
        let tag = tag?;
        let c = &self.cpus[cpu];
        if let Some((p, _)) = c.thread
            && c.asid == tag
        {
            return Some(p);
        }
        if self.alloc.flush_pending(cpu) {
            return None;
        }
        self.procs.iter().position(|q| {
            q.alive
                && q.ctx.has_asid()
                && q.ctx.asid() == tag
                && (self.alloc.is_current(&q.ctx) || self.running(q.ctx.id()))
        })
    }

    /// Whether some CPU runs a thread of the process with context id `id`.
    fn running(&self, id: u64) -> bool {
        self.cpus.iter().any(|c| c.thread.is_some_and(|(p, _)| self.procs[p].ctx.id() == id))
    }

    /// Whether entry `e` agrees with the current tables of process `p`: a table entry with the
    /// table descriptor there now (pointing at an allocated table frame), a leaf with every
    /// descriptor it stands for (all 16 of a contiguous run): output address, size, contiguous
    /// hint and attributes.
    fn agrees(&self, e: &Entry, p: usize) -> bool {
        let level = u32::from(e.level);
        let size = level_size(level);
        (0..e.size / size).all(|j| {
            let va = e.va.wrapping_add(j * size);
            let mut table = self.procs[p].root;
            for l in crate::paging::ROOT_LEVEL..level {
                match self.read(table, VirtAddr(va).table_index(l)) {
                    Some(d) if d.is_table(l) => table = d.output_address().0,
                    _ => return false,
                }
            }
            let Some(d) = self.read(table, VirtAddr(va).table_index(level)) else { return false };
            match e.kind {
                Kind::Table { next } => {
                    d.is_table(level) && d.output_address().0 == next && self.is_table(next)
                }
                Kind::Leaf { pa, attrs, contiguous } => {
                    d.is_leaf(level)
                        && d.is_contiguous() == contiguous
                        && d.attributes() == attrs
                        && d.output_address().0 == pa + j * size
                }
            }
        })
    }

    /// No stale translation usable on any CPU: every usable entry agrees with the tables of the
    /// process that would use it. Called at operation boundaries, where no break-before-make
    /// sequence is in flight. `changed` is where the step may have changed a table (process,
    /// first VA, length): an entry already found to agree with the same process is checked
    /// again only if it overlaps that range (tables change nowhere else), or when `full`.
    pub(super) fn check_all(&mut self, when: &str, changed: Option<(usize, u64, u64)>, full: bool) {
        let mut found = Vec::new();
        for cpu in 0..self.cpus.len() {
            for i in 0..self.cpus[cpu].tlb.len() {
                let e = self.cpus[cpu].tlb[i];
                let Some(p) = self.user_of(cpu, e.tag) else { continue };
                let uid = self.procs[p].uid;
                let dirty = changed.is_some_and(|(q, lo, len)| q == p && e.overlaps(lo, len));
                if !full && !dirty && e.agreed == Some(uid) {
                    continue;
                }
                if let Kind::Leaf { pa, attrs, .. } = e.kind
                    && pa < ZERO_FRAME + ZERO_LEN
                    && ZERO_FRAME < pa + e.size
                    && attrs.access().writable()
                {
                    found.push(format!(
                        "{when}: CPU {cpu} holds a writable entry of the shared zero region (zero frame) for process {p}: {e:x?}"
                    ));
                }
                if self.agrees(&e, p) {
                    self.cpus[cpu].tlb[i].agreed = Some(uid);
                } else {
                    found.push(format!(
                        "{when}: stale entry usable on CPU {cpu} for process {p} (ASID {:?}): {e:x?}",
                        e.tag
                    ));
                }
            }
            // Everything issued is completed by the end of an operation.
            if !self.cpus[cpu].issued.is_empty() {
                found.push(format!("{when}: CPU {cpu} has TLBIs that no DSB completed"));
            }
        }
        if let Some((p, lo, len)) = changed {
            self.check_zero_read_only(when, p, lo, len, &mut found);
        }
        for f in found {
            self.violation(f);
        }
    }

    /// The shared zero frame is mapped read-only wherever the tables of process `p` map it in
    /// `[lo, lo + len)`: a writable entry would let one process change the page every process
    /// reads as zeros.
    fn check_zero_read_only(&self, when: &str, p: usize, lo: u64, len: u64, found: &mut Vec<String>) {
        if !self.procs[p].alive {
            return;
        }
        for va in (lo..lo + len).step_by(crate::addr::PAGE_SIZE as usize) {
            if let Some((pa, d)) = self.translate(p, va)
                && is_zero(pa)
                && d.attributes().access().writable()
            {
                found.push(format!(
                    "{when}: process {p} maps the shared zero region (zero frame) writable at VA {va:#x}"
                ));
            }
        }
    }

    /// No frame freed while a CPU can reach it: a table frame through a usable walk-cache entry
    /// that points to it, a data frame through a usable leaf that maps it.
    pub(super) fn check_frame_unreachable(&mut self, pa: u64, size: u64, table: bool) {
        let mut found = Vec::new();
        let what = match () {
            _ if table => "table",
            _ if self.cache_frames.contains_key(&pa) => "page-cache",
            _ => "data",
        };
        for cpu in 0..self.cpus.len() {
            for e in &self.cpus[cpu].tlb {
                let reaches = match e.kind {
                    Kind::Table { next } => table && next == pa,
                    Kind::Leaf { pa: p, .. } => !table && p < pa + size && pa < p + e.size,
                };
                if reaches && let Some(user) = self.user_of(cpu, e.tag) {
                    found.push(format!(
                        "{what} frame {pa:#x} freed while CPU {cpu} can still reach it (process {user}, \
                         ASID {:?}): {e:x?}",
                        e.tag
                    ));
                }
            }
        }
        for f in found {
            self.violation(f);
        }
    }

    /// A page-cache frame goes back only after every process that mapped it has unmapped it:
    /// it must not be mapped by the tables of any live process, at the address where one of
    /// that process's ranges of the object puts the page. (Its TLB entries, under every ASID,
    /// are [`check_frame_unreachable`](Self::check_frame_unreachable)'s.)
    pub(super) fn check_cache_frame_unmapped(&mut self, pa: u64, page: CachePage) {
        for (p, va) in self.mappings_of(pa, page) {
            self.violation(format!(
                "page-cache frame {pa:#x} (object {} page {:#x}) freed while process {p} still maps it \
                 at VA {va:#x}",
                page.object, page.index
            ));
        }
    }

    /// `(process, VA)` of every mapping of page-cache frame `pa` (page `page`) in the tables of a
    /// live process, at the addresses where its ranges of the object put the page.
    pub(super) fn mappings_of(&self, pa: u64, page: CachePage) -> Vec<(usize, u64)> {
        let mut found = Vec::new();
        for (p, ranges) in self.object_ranges.iter().enumerate() {
            if !self.procs.get(p).is_some_and(|q| q.alive) {
                continue;
            }
            for va in ranges.iter().filter(|r| r.object == page.object).filter_map(|r| r.va_of(page.index)) {
                if self.translate(p, va).is_some_and(|(f, _)| f == pa) {
                    found.push((p, va));
                }
            }
        }
        found
    }
}
