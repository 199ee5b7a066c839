//! Stage-1 memory management for an arm64 (AArch64, VMSAv8-64) kernel: translation-table
//! descriptors, page tables with blocks and the contiguous hint, live address spaces that do
//! break-before-make with one gathered TLB flush per call, a TLB-invalidation planner (range
//! `TLBI`s where the CPUs have them), Linux's ASID allocator, and the user address-space policy
//! (Linux's `mmap` family, a code window, near placement). `no_std`, and written so that every
//! line of logic runs as a host test: it knows nothing of the kernel that uses it.
//!
//! # Scope
//!
//! The EL1&0 translation regime, stage 1 only: `TTBR0_EL1` for user address spaces (non-global
//! entries tagged with an ASID) and `TTBR1_EL1` for the kernel (global entries), walked with the
//! 4, 16 or 64 KiB granule and 48-bit addresses, or 52-bit ones with FEAT_LPA2 (4 and 16 KiB).
//! The kernel runs at EL1 (a kernel entered at EL2 drops to EL1 first). Not covered: EL2 and the
//! EL2&0 regime (VHE), stage 2, EL3 and the Secure state; hardware management of the Access
//! flag and dirty state (`TCR_EL1.HA`/`HD`: the crate sets the Access flag itself); FEAT_LPA's
//! 52-bit 64 KiB format ([`granule::Format::K64_52`] is encoded, no build selects it); cache
//! maintenance of the tables (walks must be cacheable and inner shareable, below).
//!
//! # The seams
//!
//! Four traits are all the crate needs from a kernel, so the host tests replace each:
//! - [`paging::Translation`]: where table frames come from and how the code reaches them (a
//!   kernel: a frame allocator and its linear map; early boot: a static arena, the MMU off);
//! - [`tlb::TlbHardware`]: the only place a `TLBI` or a barrier executes
//!   (`tlb::issue::Aarch64Tlb` on aarch64);
//! - [`space::FlushTargets`]: asked at the moment of each flush which ASID it must hit and on
//!   which CPUs (a kernel: its [`asid::AsidAllocator`]);
//! - `user::UserFrames` (with the `alloc` feature): the data frames of user memory.
//!
//! # Example: the integration in miniature
//!
//! A user address space on a two-CPU machine whose TLB features are combined, with flushes
//! aimed by the ASID allocator: local while only one CPU has run the space, broadcast once
//! another has. (The kernel-side steps on a real CPU, from the boot tables to turning the MMU
//! on, are `examples/bare_metal.rs`, which also boots on QEMU.)
//!
//! ```
//! use core::cell::RefCell;
//! use core::mem::MaybeUninit;
//! use core::ptr::NonNull;
//!
//! use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
//! use mm::asid::{AsidAllocator, AsidContext};
//! use mm::descriptor::{Attributes, MAIR_EL1_VALUE, UserAccess};
//! use mm::granule::Format;
//! use mm::paging::{AlignedTable, Constraints, ENTRIES_PER_TABLE, PageTable, Translation, VaRange};
//! use mm::space::{AddressSpace, FlushTargets};
//! use mm::tlb::{FlushTarget, TlbFeatures, TlbHardware, TlbIssuer, TlbiOp};
//!
//! /// Table frames from the host heap (a kernel: its frame allocator, through its linear map).
//! struct Frames;
//! // SAFETY: each frame is a fresh heap block of one page, aligned to it (`AlignedTable`), used
//! // by nothing else until `deallocate_table`; `table_ptr` returns that pointer.
//! unsafe impl Translation for Frames {
//!     fn allocate_table(&mut self) -> Option<PhysAddr> {
//!         Some(PhysAddr(Box::into_raw(Box::<MaybeUninit<AlignedTable>>::new_uninit()) as u64))
//!     }
//!     fn deallocate_table(&mut self, pa: PhysAddr) {
//!         // SAFETY: `pa` came from `allocate_table` and is returned once.
//!         drop(unsafe { Box::from_raw(pa.0 as *mut MaybeUninit<AlignedTable>) });
//!     }
//!     fn table_ptr(&self, pa: PhysAddr) -> NonNull<[u64; ENTRIES_PER_TABLE]> {
//!         NonNull::new(pa.0 as *mut _).unwrap()
//!     }
//! }
//!
//! /// The TLB instructions, recorded (a kernel: `mm::tlb::issue::Aarch64Tlb`).
//! #[derive(Default)]
//! struct Tlb(Vec<TlbiOp>);
//! impl TlbHardware for Tlb {
//!     fn dsb_ishst(&mut self) {}
//!     fn dsb_ish(&mut self) {}
//!     fn dsb_nshst(&mut self) {}
//!     fn dsb_nsh(&mut self) {}
//!     fn isb(&mut self) {}
//!     fn tlbi(&mut self, op: TlbiOp, _operand: u64) {
//!         self.0.push(op);
//!     }
//! }
//!
//! /// Where a flush goes, decided by the allocator when the space flushes, for the CPU that
//! /// issues it (a kernel: under the allocator's lock, on the executing CPU).
//! struct Targets<'a> {
//!     asids: &'a RefCell<AsidAllocator<2>>,
//!     context: &'a RefCell<AsidContext>,
//!     cpu: &'a RefCell<usize>,
//! }
//! impl FlushTargets for Targets<'_> {
//!     fn target(&mut self) -> FlushTarget {
//!         self.asids.borrow().flush_target(&self.context.borrow(), *self.cpu.borrow())
//!     }
//! }
//!
//! // At boot, on each CPU: its TLB features (ID_AA64ISAR0_EL1, MIDR_EL1), combined over the
//! // machine: range TLBIs only if every CPU has them, every erratum workaround any CPU needs.
//! let cpu0 = TlbFeatures::from_id_registers(2 << 56, 0); // FEAT_TLBIRANGE
//! let cpu1 = TlbFeatures::from_id_registers(0, 0); // none
//! let features = cpu0.combine(cpu1);
//! assert!(!features.range);
//! // The registers come from the crate's constants (the crate's fixed MAIR indices; TCR_EL1 and
//! // the TTBR layout from the build's format: see "Integrating" below).
//! assert_eq!(MAIR_EL1_VALUE & 0xff, 0xff); // index 0: Normal write-back, what RAM is mapped with
//!
//! // A user address space, and one ASID allocator for the machine (16-bit ASIDs, TCR_EL1.AS).
//! let asids = RefCell::new(AsidAllocator::<2>::new(16));
//! let (context, cpu) = (RefCell::new(AsidContext::new()), RefCell::new(0));
//! let targets = Targets { asids: &asids, context: &context, cpu: &cpu };
//! let table = PageTable::new(Frames, VaRange::Lower)?;
//! let issuer = TlbIssuer::new(Tlb::default(), features.errata);
//! let mut space = AddressSpace::user(table, issuer, features, targets);
//!
//! // CPU 0 runs it: an ASID (and, after a rollover, a local TLBI VMALLE1 first), then TTBR0.
//! let (asid, _flush_first) = asids.borrow_mut().switch_to(&mut context.borrow_mut(), 0);
//! let ttbr0 = Format::BUILD.ttbr_baddr(space.table().root_pa().0) | u64::from(asid) << 48;
//! assert_eq!(Format::BUILD.ttbr_table(ttbr0), space.table().root_pa().0);
//!
//! // Map and unmap four pages: the map needs no TLBI, the unmap one flush, local (only CPU 0
//! // ran the space), one TLBI per page (not every CPU has range TLBIs).
//! let (va, pa, rw) = (VirtAddr(0x40_0000), PhysAddr(0x8000_0000), Attributes::user(UserAccess::ReadWrite));
//! space.map(va, pa, 4 * PAGE_SIZE, rw, Constraints::NONE)?;
//! let mut freed = 0;
//! space.unmap(va, 4 * PAGE_SIZE, |gone| freed += gone.size)?; // frames back after the flush
//! assert_eq!(freed, 4 * PAGE_SIZE);
//! assert_eq!(space.tlb().hw().0, [TlbiOp::Vae1; 4]);
//!
//! // CPU 1 runs it too: the next flush must reach every CPU.
//! asids.borrow_mut().switch_to(&mut context.borrow_mut(), 1);
//! space.map(va, pa, 4 * PAGE_SIZE, rw, Constraints::NONE)?;
//! space.unmap(va, 4 * PAGE_SIZE, |_| {})?;
//! assert_eq!(space.tlb().hw().0[4..], [TlbiOp::Vae1is; 4]);
//!
//! // The end: once no TTBR0 names the table (and the ASID was flushed everywhere), the frames go.
//! let (frames, _tlb, _targets) = space.destroy(|_| {});
//! # let _ = frames;
//! # Ok::<(), mm::paging::MapError>(())
//! ```
//!
//! # Features, and the page size of every user
//!
//! | feature | default | what it does |
//! | --- | --- | --- |
//! | `alloc` | on | the heap: [`vm`] and [`user`] need it. Without it (`default-features = false`) the crate is the descriptors, the tables, the planner and the issuer, [`space::AddressSpace`], [`asid`] and [`phys`], none of which allocates: what early boot or a heapless kernel uses. |
//! | `granule-16k`, `granule-64k` | off | the translation granule, [`granule::Format::BUILD`]: 4 KiB unless one is on (both: a compile error). Every page size, table size, level and `TLBI` operand of the crate follows it. |
//! | `lpa2` | off | FEAT_LPA2: 52-bit addresses (`TCR_EL1.DS`) with 4 KiB pages, or 16 KiB with `granule-16k` ([`paging::lpa2`] says why it is a build choice). |
//! | `testing` | off | test scaffolding for other crates' tests and benchmarks (a TLB model, other designs' instruction counts); not part of the design. |
//!
//! **Cargo unifies features.** The format is a property of the build, not of a dependent: if any
//! crate of a build enables `granule-16k`, `granule-64k` or `lpa2`, every crate of that build
//! that depends on `mm` gets that format ([`addr::PAGE_SIZE`], [`paging::ENTRIES_PER_TABLE`],
//! every table and every operand change), and nothing warns. So only the final binary (the
//! kernel) enables them, a library that depends on `mm` never does, and a crate that relies on
//! a format says so with [`assert_build_format!`]: `mm::assert_build_format!(K4);` makes a
//! build with any other format fail to compile, naming the cause. (A type parameter for the
//! granule would avoid the hazard at the price of every walk's constants; see
//! [`paging::lpa2`] for why the crate folds the format into constants.)
//!
//! These pages show the default build: 4 KiB pages, 48-bit addresses. The numbers of every
//! other format are documented whatever the build: [`granule::Format::ALL`], and the tables of
//! [`paging`] and [`tlb`].
//!
//! # Integrating: what a kernel programs and guarantees
//!
//! The guide with the reasons for each point is `docs/integrating-mm.md` in the crate's
//! repository; `examples/bare_metal.rs` does every step on QEMU.
//!
//! **Registers, on every CPU, before the MMU is on** (the values the crate's tables assume):
//! - `MAIR_EL1` = [`descriptor::MAIR_EL1_VALUE`]: attribute index `i` is
//!   [`descriptor::MemoryType`] `i` (0 Normal write-back, 1 Normal non-cacheable,
//!   2 Device-nGnRE, 3 Device-nGnRnE, 4 Normal Tagged). A kernel with its own MAIR keeps these
//!   five in 0 to 4; on a CPU with FEAT_MTE2 it programs [`descriptor::mair_el1_value`]`(true)`
//!   (index 4 Tagged, `0xf0`) before anything is mapped `PROT_MTE`.
//! - `TCR_EL1`: `T0SZ` = `T1SZ` = `64 −` [`addr::VA_BITS`] (16; 12 with 16 KiB pages and LPA2;
//!   a 4 KiB LPA2 kernel may widen its own half to 52 bits with [`paging::lpa2::T1SZ_52`] and a
//!   level −1 table); `TG0`/`TG1` = [`granule::Granule::tcr_tg0`]/[`granule::Granule::tcr_tg1`]
//!   of [`granule::Format::BUILD`]; walks inner shareable and write-back cacheable in both
//!   halves (`SH` = 0b11, `IRGN`/`ORGN` = 0b01 or 0b11): the crate writes tables through
//!   cacheable memory and publishes them with `DSB ISHST`, never with cache maintenance; `IPS`
//!   covers every physical address mapped (at most 48 bits, 52 in an `lpa2` build); `AS` = 1
//!   exactly when the ASID allocator has 16 bits ([`asid::asid_bits_from_mmfr0`]); `A1` = 0
//!   (the ASID is TTBR0's); `DS` = [`paging::lpa2::TCR_DS`] in an `lpa2` build; `HA`, `HD` = 0.
//!   The CPU must offer the granule (`ID_AA64MMFR0_EL1.TGran*`) and, for `lpa2`, LPA2
//!   ([`paging::lpa2::cpu_supports_lpa2`]).
//! - `TTBRn_EL1` = [`granule::Format::ttbr_baddr`]`(root)` `| asid << 48`, where `root` is
//!   [`paging::PageTable::root_pa`] (the layout moves address bits `[51:48]` to `[5:2]` in a
//!   52-bit build); ASID 0 in TTBR1; `CnP` = 0.
//! - `SCTLR_EL1.M`, `C`, `I` = 1 (data accesses cacheable, as the walks are). Tables written
//!   with the MMU off went straight to memory: invalidate the data cache over them before the
//!   walks become cacheable.
//!
//! **The seams' guarantees:**
//! - [`paging::Translation`] (an `unsafe` trait): frames page-aligned, below
//!   2^[`addr::PA_BITS`], exclusively the engine's until returned; `table_ptr` reaches them as
//!   Normal write-back memory (or physically, MMU off); `publish_barrier` issues `DSB ISHST`
//!   once any walker may see the tree.
//! - [`tlb::TlbHardware`]: every method executes exactly its instruction on the calling CPU.
//! - [`space::FlushTargets::target`]: the ASID the space's entries are tagged with now and the
//!   reach the allocator decides now, for the CPU that will issue the flush; no migration between
//!   the call and the end of the flush.
//! - `user::UserFrames`: frames handed out zeroed, exclusively, with their contents visible to
//!   every CPU when the call returns (`DMB ISHST`); its documentation has the rest.
//!
//! **TLB features:** read on every CPU ([`tlb::TlbFeatures::from_id_registers`], or
//! `Aarch64Tlb::detect_features`) and combined with [`tlb::TlbFeatures::combine`] (range =
//! intersection, errata = union) before a space uses them: a range `TLBI` is UNDEFINED on a CPU
//! without FEAT_TLBIRANGE. An [`space::AddressSpace`] keeps the features it was made with and
//! its [`tlb::TlbIssuer`] the errata: when a late CPU changes them, make the space again
//! ([`space::AddressSpace::into_parts`]).
//!
//! **ASIDs:** one [`asid::AsidAllocator`] per machine behind one lock, one
//! [`asid::AsidContext`] per address space. Before writing `TTBR0_EL1` for a space, call
//! [`asid::AsidAllocator::switch_to`] under that lock, and do the local `TLBI VMALLE1` it asks
//! for before returning to EL0. [`space::FlushTargets::target`] is
//! [`asid::AsidAllocator::flush_target`] for the executing CPU, under the same lock. When a space
//! dies: no TTBR0 names its table, `TLBI ASIDE1IS` of its ASID, [`asid::AsidAllocator::note_full_flush`],
//! then `destroy`.
//!
//! **Locks:** one per address space (every change takes `&mut self`; nothing else writes its
//! tables); the allocator's lock is taken inside `target()`, so the order is space, then
//! allocator, then context; never call into a space while holding the allocator's lock, and
//! never touch user memory while holding its space's lock (the fault needs it).
//!
//! **Lifetimes:** a table becomes live when a TTBR may name it ([`space::AddressSpace::kernel`]
//! and [`space::AddressSpace::user`] mark it); a live table ends with `destroy` once no TTBR
//! names it, never with `drop` (which leaks a live table's frames on purpose). Direct
//! [`paging::PageTable`] changes of a live table are the caller's break-before-make: flush what
//! the returned [`paging::PendingFlush`] covers, then release it.
//!
//! # What is where
//!
//! - [`addr`]: strong types for physical and virtual addresses and page counts;
//! - [`asid`]: ASID allocation with generation rollover, and where each address space may be cached;
//! - [`descriptor`]: stage-1 descriptors (table, block, page) and their attributes;
//! - [`granule`]: the translation granule (4, 16, 64 KiB) and the address width (48 or 52 bits):
//!   every number that differs between them, in one place;
//! - [`paging`]: translation tables of the build's granule: map, unmap, protect, query;
//! - [`phys`]: sets of physical ranges (usable RAM = memory minus reservations);
//! - [`space`]: live address spaces: break-before-make, one gathered flush per call, superpages;
//! - [`tlb`]: the TLB-invalidation planner (a pure function) and its issuer;
//! - [`user`] (`alloc`): one process's memory: the Linux memory calls and demand paging over
//!   [`vm`] and [`space`], generic over the kernel's seams so the host model can prove its
//!   flushes;
//! - [`vm`] (`alloc`): user address spaces: areas, gaps, the code window and near placement.
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
