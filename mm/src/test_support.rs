//! What the crate's unit tests share (test builds only): a heap-backed [`Translation`], one
//! deterministic stream of 64-bit values, the list of every [`Attributes`] constructor, and
//! [`per_granule`] for the expected values that are genuinely different in each granule's build.
//!
//! Why it is a module of its own: each of these was written out in two or three test files, and a
//! copy that drifts (a constructor added to one list, a stream seeded differently) silently tests
//! less. Unlike the `testing` feature's scaffolding (`tlb::model`, `tlb::compare`, `vm::bench`),
//! nothing here is for other crates, so it is compiled for `cfg(test)` only.

use core::ptr::NonNull;
use std::boxed::Box;

use crate::addr::PhysAddr;
use crate::descriptor::{Attributes, UserAccess};
use crate::granule::{Format, Granule};
use crate::paging::{AlignedTable, ENTRIES_PER_TABLE, Translation};

/// Table frames from the heap; the "physical address" is the pointer (below 2^48 on the host).
pub(crate) struct Heap;

// SAFETY: every frame is a fresh, page-aligned boxed `AlignedTable`, exclusively owned by the
// table until it is handed back; `table_ptr` returns the box's own address, valid until then.
unsafe impl Translation for Heap {
    fn allocate_table(&mut self) -> Option<PhysAddr> {
        Some(PhysAddr(Box::into_raw(Box::new(AlignedTable([0; ENTRIES_PER_TABLE]))) as u64))
    }
    fn deallocate_table(&mut self, pa: PhysAddr) {
        // SAFETY: `pa` came from `allocate_table` and is handed back once.
        drop(unsafe { Box::from_raw(pa.0 as *mut AlignedTable) });
    }
    fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
        NonNull::new(pa.0 as *mut [u64; ENTRIES_PER_TABLE]).expect("a heap pointer")
    }
}

/// `n` values of a deterministic xorshift stream (Marsaglia's 13/7/17), then the edge values
/// no stream is likely to produce: 0, all ones, the top bit, a 48-bit mask and the two
/// alternating patterns. The properties tested with it hold for every 64-bit value.
pub(crate) fn values(n: usize) -> impl Iterator<Item = u64> {
    let mut x = 0x2545_f491_4f6c_dd1du64;
    core::iter::repeat_with(move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    })
    .take(n)
    .chain([0, u64::MAX, 1 << 63, (1 << 48) - 1, 0x5555_5555_5555_5555, 0xaaaa_aaaa_aaaa_aaaa])
}

/// What every constructor of [`Attributes`] builds: the kernel's four kinds, both device types
/// and each user access.
pub(crate) fn all_attributes() -> [Attributes; 9] {
    [
        Attributes::kernel_text(),
        Attributes::kernel_rodata(),
        Attributes::kernel_data(),
        Attributes::device(),
        Attributes::device_ngnrne(),
        Attributes::user(UserAccess::ReadOnly),
        Attributes::user(UserAccess::ReadWrite),
        Attributes::user(UserAccess::ReadExecute),
        Attributes::user(UserAccess::ReadWriteExecute),
    ]
}

/// The one of `k4`, `k16`, `k64` for the build's granule ([`Format::BUILD`]): for expected values
/// a test pins per granule (counts of tables or instructions, text of a listing) where a formula
/// in the format's numbers would only repeat the code under test.
pub(crate) fn per_granule<T>(k4: T, k16: T, k64: T) -> T {
    match Format::BUILD.granule {
        Granule::K4 => k4,
        Granule::K16 => k16,
        Granule::K64 => k64,
    }
}
