//! What the crate's unit tests share (test builds only): a heap-backed [`Translation`], one
//! deterministic stream of 64-bit values and one seeded generator, the list of every
//! [`Attributes`] constructor, when an invalidation removes a cached entry of a model TLB, and
//! [`per_granule`] and [`per_lpa2`] for the expected values that are genuinely different in each
//! granule's build and with 52-bit addresses.
//!
//! Why it is a module of its own: each of these was written out in two or three test files, and a
//! copy that drifts (a constructor added to one list, a stream seeded differently) silently tests
//! less. Unlike the `testing` feature's scaffolding (`tlb::model`, `tlb::compare`, `vm::bench`),
//! nothing here is for other crates, so it is compiled for `cfg(test)` only.

use core::ptr::NonNull;
use std::boxed::Box;

use crate::addr::PhysAddr;
use crate::addr::VirtAddr;
use crate::descriptor::{Attributes, UserAccess, level_size};
use crate::granule::{Format, Granule};
use crate::paging::{AlignedTable, ENTRIES_PER_TABLE, Translation};
use crate::tlb::model::{Invalidation, ModelEntry};

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

/// `plain`, or `lpa2` in the builds with the `lpa2` feature (FEAT_LPA2, `TCR_EL1.DS`: 52-bit
/// output addresses, level-0 blocks with 4 KiB pages, range `TLBI`s on a 64 KiB grid): with
/// [`per_granule`], for the expected values that differ with the address width. Taken from the
/// feature, not from [`Format::BUILD`], so that a wrong build format cannot pick the expectation.
pub(crate) fn per_lpa2<T>(plain: T, lpa2: T) -> T {
    if cfg!(feature = "lpa2") { lpa2 } else { plain }
}

/// splitmix64: a fast seeded generator, so that every randomised run is reproducible from its
/// seed.
#[derive(Clone, Debug)]
pub(crate) struct Rng(pub(crate) u64);

impl Rng {
    pub(crate) fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    pub(crate) fn below(&mut self, n: u64) -> u64 {
        if n == 0 { 0 } else { self.next() % n }
    }

    pub(crate) fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// Whether the completed invalidation `inv` removes a model TLB's entry caching a descriptor
/// of `level` (a leaf or a table, tagged with an ASID or global) that covers `size` bytes from
/// `va`. A contiguous entry stands for a run of descriptors that differ only in their VA: it is
/// hit if the op hits any of them, so the one tested is the first that overlaps the op's range.
pub(crate) fn entry_hit_by(
    inv: &Invalidation,
    va: u64,
    size: u64,
    level: u8,
    leaf: bool,
    tag: Option<u16>,
) -> bool {
    let step = level_size(u32::from(level));
    let va = match inv.va_bounds() {
        None => va,
        Some((s, e)) => {
            let (es, ee) = (u128::from(va), u128::from(va) + u128::from(size));
            if !(es < e && s < ee) {
                return false;
            }
            (s.max(es) as u64) & !(step - 1)
        }
    };
    inv.hits(&ModelEntry { va: VirtAddr(va), level, leaf, asid: tag })
}

/// `full` scaled by `MM_PROPTEST_PERCENT` (default 100, at least 1 case): the proptest case count
/// of the table tests. `scripts/mutants --screen` sets it low to screen mutants quickly; every
/// mutant that survives the screen is run again at the full count, so the knob changes how long a
/// mutation run takes, never its verdict. `cargo test` and `scripts/test` leave it unset.
pub(crate) fn proptest_cases(full: u32) -> u32 {
    let percent =
        std::env::var("MM_PROPTEST_PERCENT").ok().and_then(|v| v.parse::<u32>().ok()).unwrap_or(100);
    (full.saturating_mul(percent) / 100).max(1)
}
