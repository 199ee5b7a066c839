//! Memory management for an arm64 (AArch64, VMSAv8-64) kernel, written so that every piece of
//! logic can be tested on the build host.
//!
//! The crate knows nothing of the kernel that uses it. Everything that touches the machine goes
//! through two small seams:
//! - [`paging::Translation`]: where page-table frames come from and how the code reaches them
//!   (the kernel: a frame allocator and the linear map; the host tests: an emulated physical
//!   memory);
//! - the TLB issuer's hardware trait in [`tlb`]: the only place a `TLBI` or a barrier is executed.
//!
//! Module map:
//! - [`addr`]: strong types for physical and virtual addresses and page counts;
//! - [`asid`]: ASID allocation with generation rollover, and where each address space may be cached;
//! - [`descriptor`]: stage-1 descriptors (table, block, page) and their attributes;
//! - [`granule`]: the translation granule (4, 16, 64 KiB) and the address width (48 or 52 bits):
//!   every number that differs between them, in one place;
//! - [`paging`]: translation tables of the build's granule: map, unmap, protect, query;
//! - [`phys`]: sets of physical ranges (usable RAM = memory minus reservations);
//! - [`space`]: live address spaces: break-before-make, one gathered flush per call, superpages;
//! - [`tlb`]: the TLB-invalidation planner (a pure function) and its issuer;
//! - [`user`]: one process's memory: the Linux memory calls and demand paging over [`vm`] and
//!   [`space`], generic over the kernel's seams so the host model can prove its flushes;
//! - [`vm`]: user address spaces: areas, gaps, the code window and near placement.
#![no_std]
#![cfg_attr(docsrs, feature(doc_cfg))]
#![deny(missing_docs, unsafe_op_in_unsafe_fn, clippy::undocumented_unsafe_blocks)]

#[cfg(all(feature = "granule-16k", feature = "granule-64k"))]
compile_error!("the features granule-16k and granule-64k choose one granule: enable at most one");
#[cfg(all(feature = "lpa2", feature = "granule-64k"))]
compile_error!("the feature lpa2 is FEAT_LPA2, for the 4 KiB and 16 KiB granules; not with granule-64k");

#[cfg(feature = "alloc")]
extern crate alloc;
#[cfg(test)]
extern crate std;

// Mutation hooks. In test builds `mutant!(original, Name => mutated, …)` evaluates `mutated`
// while the named mutation is active on the current thread (see `tlb/mutation.rs`), so the tests
// can plant the bugs that Linux and the FreeBSD review found, and wrong flush decisions, and show
// that the checks catch them. In every other build it is exactly `original`: the mutated
// expressions are never compiled. Defined before the modules so that every module can use it.
#[cfg(test)]
macro_rules! mutant {
    ($original:expr $(, $name:ident => $mutated:expr)+ $(,)?) => {
        $(
            if $crate::tlb::mutation::active($crate::tlb::mutation::Mutation::$name) {
                $mutated
            } else
        )+ {
            $original
        }
    };
}
#[cfg(not(test))]
macro_rules! mutant {
    ($original:expr $(, $name:ident => $mutated:expr)+ $(,)?) => {
        $original
    };
}

pub mod addr;
pub mod asid;
pub mod descriptor;
pub mod granule;
pub mod paging;
pub mod phys;
pub mod space;
pub mod tlb;
#[cfg(feature = "alloc")]
#[cfg_attr(docsrs, doc(cfg(feature = "alloc")))]
pub mod user;
#[cfg(feature = "alloc")]
#[cfg_attr(docsrs, doc(cfg(feature = "alloc")))]
pub mod vm;

// The multi-CPU model drives the user-memory layer, so it needs the heap too.
#[cfg(all(test, feature = "alloc"))]
mod model;
#[cfg(test)]
mod test_support;

// The example of the crate's README, compiled and run as a doctest so that it cannot go stale.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
