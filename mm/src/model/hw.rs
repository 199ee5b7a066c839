//! The seams of the code under test implemented over the machine: [`ModelMem`] is the
//! [`Translation`] (table frames from the emulated memory, their release checked), [`ModelHw`]
//! the [`TlbHardware`] of whichever CPU executes the operation, [`ModelTargets`] the
//! [`FlushTargets`] (asks the ASID allocator for the executing CPU at the moment of the flush,
//! as the kernel's provider does), [`ModelFrames`] the [`UserFrames`] (data frames, their
//! release checked). Every call is also a moment at which the other CPUs (and this one,
//! speculatively) may walk.

use core::cell::RefCell;
use core::ptr::NonNull;
use std::rc::Rc;

use super::machine::{Machine, ZERO_FRAME, ZERO_LEN, is_zero};
use crate::addr::PhysAddr;
use crate::paging::{ENTRIES_PER_TABLE, Translation};
use crate::space::FlushTargets;
use crate::tlb::{FlushTarget, TlbHardware, TlbiOp};
use crate::user::{UserFrames, ZeroRegion};

pub(super) type Shared = Rc<RefCell<Machine>>;

/// Table frames of the machine's memory.
pub(super) struct ModelMem(pub(super) Shared);

// SAFETY: frames are distinct page-sized heap allocations that live as long as the machine (which
// this handle keeps alive); `table_ptr` refuses frames that are not allocated.
unsafe impl Translation for ModelMem {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        let mut m = self.0.borrow_mut();
        let pa = m.alloc_table();
        m.noise(1);
        Some(PhysAddr(pa))
    }

    fn deallocate_table(&mut self, pa: PhysAddr) {
        let mut m = self.0.borrow_mut();
        m.free_table(pa.0);
        m.noise(1);
    }

    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        // Every table read or write of the code under test comes here first: now and then the
        // other CPUs walk between two of its accesses (as they would, concurrently).
        let mut m = self.0.borrow_mut();
        if m.rng.chance(2) {
            m.noise(1);
        }
        m.table_ptr(pa.0)
    }

    fn publish_barrier(&self) {
        self.0.borrow_mut().noise(1);
    }
}

/// The TLB and barrier instructions of the CPU executing the operation (`Machine::current`).
pub(super) struct ModelHw(pub(super) Shared);

impl TlbHardware for ModelHw {
    fn dsb_ishst(&mut self) {
        self.0.borrow_mut().noise(1);
    }
    fn dsb_ish(&mut self) {
        let mut m = self.0.borrow_mut();
        m.dsb(true);
        m.noise(1);
    }
    fn dsb_nshst(&mut self) {
        self.0.borrow_mut().noise(1);
    }
    fn dsb_nsh(&mut self) {
        let mut m = self.0.borrow_mut();
        m.dsb(false);
        m.noise(1);
    }
    fn isb(&mut self) {
        self.0.borrow_mut().noise(1);
    }
    fn tlbi(&mut self, op: TlbiOp, operand: u64) {
        let mut m = self.0.borrow_mut();
        m.tlbi(op, operand);
        if m.rng.chance(25) {
            m.noise(1);
        }
    }
}

/// The flush targets of the process in `slot`: asked at each flush, on the executing CPU. If
/// the driver decided a target before the operation (`Machine::decided`: what the kernel did
/// before the provider existed), that one instead, so that the tests can show what it misses.
pub(super) struct ModelTargets {
    pub(super) m: Shared,
    pub(super) slot: usize,
}

impl FlushTargets for ModelTargets {
    fn target(&mut self) -> FlushTarget {
        let m = self.m.borrow();
        m.decided.unwrap_or_else(|| m.alloc.flush_target(&m.procs[self.slot].ctx, m.current))
    }
}

/// Data frames of the machine's memory.
pub(super) struct ModelFrames(pub(super) Shared);

impl UserFrames for ModelFrames {
    fn alloc_zeroed(&mut self) -> Option<PhysAddr> {
        let mut m = self.0.borrow_mut();
        let pa = m.alloc_data();
        m.noise(1);
        Some(PhysAddr(pa))
    }

    fn free(&mut self, pa: PhysAddr) {
        let mut m = self.0.borrow_mut();
        if is_zero(pa.0) {
            m.violation(std::format!(
                "a page of the shared zero region (zero frame {:#x} + {:#x}) handed back to the allocator",
                ZERO_FRAME,
                pa.0 - ZERO_FRAME
            ));
            return;
        }
        if m.absorb_free(pa.0) {
            return;
        }
        match m.data_refs.get_mut(&pa.0) {
            Some(1) => {
                m.data_refs.remove(&pa.0);
            }
            Some(n) => *n -= 1,
            None => m.free_data(pa.0),
        }
        if m.rng.chance(10) {
            m.noise(1);
        }
    }

    fn write(&mut self, pa: PhysAddr, _offset: usize, _data: &[u8]) {
        assert!(self.0.borrow().data_live.contains(&pa.0), "write to data frame {:#x}, not allocated", pa.0);
    }

    fn share(&mut self, pa: PhysAddr) -> bool {
        let mut m = self.0.borrow_mut();
        assert!(m.data_live.contains(&pa.0), "sharing data frame {:#x}, not allocated", pa.0);
        *m.data_refs.entry(pa.0).or_insert(0) += 1;
        true
    }

    fn is_shared(&self, pa: PhysAddr) -> bool {
        self.0.borrow().data_refs.contains_key(&pa.0)
    }

    fn zero_region(&self) -> Option<ZeroRegion> {
        Some(ZeroRegion { base: PhysAddr(ZERO_FRAME), len: ZERO_LEN })
    }

    fn alloc_copy_of(&mut self, src: PhysAddr) -> Option<PhysAddr> {
        assert!(self.0.borrow().data_live.contains(&src.0), "copy of data frame {:#x}, not allocated", src.0);
        self.alloc_zeroed()
    }
}
