//! A strict multi-CPU TLB model that proves the flush decisions of the user-memory code on the
//! build host (test builds only).
//!
//! QEMU 7.2, where the kernel's tests run, is lenient: it ignores the ASID of a TLBI, and it
//! caches only final translations, never table entries, so a flush that names the wrong ASID,
//! uses the local form where another CPU holds entries, or forgets the walk cache still passes
//! there. This model is the opposite: several CPUs, each with its own TLB of leaf entries and a
//! walk cache of table entries, all tagged with the ASID they were filled under, used by later
//! walks until a TLBI that the Arm rules say covers them has completed on that CPU. The rules
//! and their Arm ARM sections are listed in `docs/mm.md` ("The multi-CPU TLB model").
//!
//! - [`machine`]: memory, CPUs, TLBs, the table walker, TLBI completion, scheduling;
//! - [`checks`]: what is usable, stale-entry and frame-release checks;
//! - [`hw`]: the `Translation` and `TlbHardware` seams of the code under test over the machine;
//! - [`driver`]: seeded random operation sequences, checked after every step;
//! - `rules`: one scenario per rule of the machine, so that each is shown to bite;
//! - `tests`: the runs, and the planted bugs the model must catch.

mod checks;
mod driver;
mod hw;
mod machine;
mod rules;
mod tests;

pub(crate) use crate::test_support::Rng;
