//! The area side of `fork`: the child's map of areas, as Linux's `dup_mmap` (kernel/fork.c)
//! builds it — every area but the `MADV_DONTFORK` ones, with the lock flags dropped (memory
//! locks are not inherited), the placement state (break, code window, limits) copied.
//!
//! Why here: which areas the child gets and what it is charged are decisions on the set of
//! areas alone; which pages it shares is the user-memory layer's (`mm::user::fork`).

use alloc::vec::Vec;
use linux_abi::prctl::PR_MDWE_NO_INHERIT;

use super::{VmMap, is_data, overlap_len};
use crate::vm::{Errno, Vma, VmaFlags, fallible};

/// What a child does not inherit from an area's flags (Linux's `dup_mmap` clears `VM_LOCKED`
/// and `VM_LOCKONFAULT`).
const NOT_INHERITED: VmaFlags = VmaFlags::LOCKED.union(VmaFlags::LOCKONFAULT);

impl VmMap {
    /// The child's map: the areas this map would give a child (every one but `MADV_DONTFORK`,
    /// unlocked; areas that become equal once unlocked are merged, as the map keeps them), with
    /// this map's layout, limits, break and code window.
    ///
    /// # Errors
    /// `ENOMEM` when the heap cannot hold the child's areas (nothing is changed).
    pub fn fork_copy(&self) -> Result<VmMap, Errno> {
        let mut areas: Vec<Vma> = Vec::new();
        fallible::reserve(&mut areas, self.tree.len())?;
        for v in self.tree.iter() {
            if v.flags.contains(VmaFlags::DONTFORK) {
                continue;
            }
            let v = Vma { flags: v.flags.difference(NOT_INHERITED), ..*v };
            match areas.last_mut() {
                Some(prev) if prev.end == v.start && prev.merges_with(&v) => prev.end = v.end,
                _ => areas.push(v),
            }
        }
        let mut child = VmMap::new(self.layout);
        child.window = self.window;
        child.window.used = 0;
        child.allow_wx = self.allow_wx;
        child.read_implies_exec = self.read_implies_exec;
        child.mdwe = if self.mdwe & PR_MDWE_NO_INHERIT != 0 { 0 } else { self.mdwe };
        child.brk = self.brk;
        child.as_limit = self.as_limit;
        child.data_limit = self.data_limit;
        child.names = self.names.try_clone_empty()?;
        child.stack_limit = self.stack_limit;
        child.sealed = self.sealed;
        let window = self.window_range();
        for v in areas {
            child.names.count(v.name, v.len(), true);
            child.mapped += v.len();
            if is_data(v.prot, v.flags) {
                child.data += v.len();
            }
            if let Some(w) = window {
                child.window.used += overlap_len((v.start, v.end), w);
            }
            // One insertion's worst case at a time: the areas come in address order, so few
            // insertions split a node, and reserving for all of them at once (k * height +
            // k(k+1)/2 nodes for k areas) would leave the child holding hundreds of unused
            // nodes. ENOMEM drops the half-built child.
            child.tree.reserve(1)?;
            child.tree.insert(v)?;
        }
        Ok(child)
    }
}
