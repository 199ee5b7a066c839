//! An address space as the processes that run on it share it (Linux's `mm_struct`, counted by
//! `mm_users`): the memory behind its lock, the ASID context its translations are tagged with
//! (which also holds the set of CPUs that may cache them), and the root of its page table.
//!
//! Named `Vmspace` after FreeBSD's `struct vmspace` (the same object): `mm`'s `AddressSpace` is
//! the page table with its flush planning, one level below.
//!
//! A process holds its address space through an `Arc`. `fork` gives the
//! child a new one (a copy-on-write copy); `clone(CLONE_VM)` without `CLONE_THREAD` (vfork, what
//! `posix_spawn` does) gives the child another handle to the parent's, so what the child writes
//! the parent sees, while the parent's other threads keep running on it. `execve` replaces the
//! caller's handle with a new address space, and the last thread's exit drops it. The last
//! reference tears the memory down ([`Drop`]): the ASID is invalidated on every CPU first, then
//! the frames and tables go back. Nothing else frees an address space, so no caller has to
//! remember to.
//!
//! Because the ASID context belongs to the address space and not to a process, a flush issued
//! by any sharer (`mm::user` asks [`AsidTargets`] at each flush, with this one context) reaches
//! every CPU that ran any of them: one ASID for all, as on Linux.
//!
//! **The current space.** While a task runs on a CPU, its space is in the CPU's TTBR0 and in
//! [`current`]'s slot for that CPU ([`switch_to`], [`leave`]): the user copies (`uaccess`) go
//! through TTBR0, so the space whose pages a faulting copy must bring in is always this one.
use alloc::sync::Arc;
use core::mem::ManuallyDrop;
use core::sync::atomic::AtomicU64;

use aarch64_cpu::registers::{TTBR0_EL1, Writeable};
use mm::asid::AsidContext;
use mm::tlb::issue::Aarch64Tlb;
use mm::user::UserMemory;
use spin::{Mutex, MutexGuard};

use crate::cpu::MAX_CPUS;
use crate::memory::asids::{self, AsidTargets};
use crate::memory::kernel_map::FrameTranslation;
use crate::memory::{fallible, frames};

/// The memory of an address space: `mm::user`'s layer over its live page table (break-before-make,
/// one planned flush per call, each aimed by the ASID allocator at the moment it is issued) and
/// its map of areas, with the kernel's frame allocator.
pub type Mm = UserMemory<FrameTranslation, Aarch64Tlb, AsidTargets, frames::UserFrames>;

/// Page faults resolved by demand paging, all address spaces (for `SYS_MM_STATS`).
pub static PAGE_FAULTS: AtomicU64 = AtomicU64::new(0);

/// The space in each CPU's TTBR0 while a task runs there.
static CURRENT: [Mutex<Option<Arc<Vmspace>>>; MAX_CPUS] = [const { Mutex::new(None) }; MAX_CPUS];

/// One address space, shared by every process that runs on it.
pub struct Vmspace {
    /// Its ASID and the CPUs that may cache its translations (`mm::asid`, through
    /// `memory::asids`), shared with the flush targets of `mm`.
    asid: Arc<Mutex<AsidContext>>,
    /// Physical address of the page table's root, for TTBR0 (fixed: `execve` makes a new space).
    root: u64,
    /// The memory. Taken out only by `drop`, which has the only reference.
    mm: ManuallyDrop<Mutex<Mm>>,
}

impl Vmspace {
    /// The address space of `mm`, whose translations are tagged by `asid`'s ASID (its flush
    /// targets are set to follow `asid` here, so the two cannot disagree). The space is handed
    /// back when the heap cannot hold its counter; dropping it frees the memory.
    ///
    /// # Errors
    /// The space itself, when the heap cannot hold it.
    #[allow(clippy::result_large_err, reason = "the failure hands the memory back to be freed")]
    pub fn new(mut mm: Mm, asid: Arc<Mutex<AsidContext>>) -> Result<Arc<Self>, Self> {
        *mm.targets_mut() = AsidTargets::new(asid.clone());
        let root = mm.space().table().root_pa().0;
        fallible::arc(Self { asid, root, mm: ManuallyDrop::new(Mutex::new(mm)) })
    }

    /// Its memory, locked.
    pub fn lock(&self) -> MutexGuard<'_, Mm> {
        self.mm.lock()
    }

    /// Its memory, if no one else holds the lock.
    pub fn try_lock(&self) -> Option<MutexGuard<'_, Mm>> {
        self.mm.try_lock()
    }

    /// Its ASID context (for switching to it).
    pub fn asid(&self) -> &Mutex<AsidContext> {
        &self.asid
    }

    /// The page table's root, for TTBR0.
    pub fn root(&self) -> u64 {
        self.root
    }
}

impl Drop for Vmspace {
    /// The last reference: no process runs on the space any more and no TTBR0 holds its table
    /// with walks enabled. Its ASID is invalidated on every CPU (its walk-cache entries
    /// included), then its frames and tables go back.
    fn drop(&mut self) {
        // SAFETY: `drop` runs once, and `self.mm` is not used after this.
        let mm = unsafe { ManuallyDrop::take(&mut self.mm) }.into_inner();
        // The test image checks the area map's invariants whenever a memory dies (every
        // program's end, and every execve); a violation panics, which fails the run with the
        // invariant named.
        #[cfg(feature = "test-image")]
        mm.vm().check();
        asids::flush_everywhere(&self.asid);
        let _ = mm.destroy();
    }
}

/// Makes `space` this CPU's (`cpu`) user address space: its table in TTBR0 with its ASID (which
/// marks the CPU as one that may cache its translations), and the current space of the user
/// copies. The space it replaces is dropped (the last reference tears it down); the caller has
/// TTBR0 walks disabled, or is the owner of both (`execve`).
pub fn switch_to(space: Arc<Vmspace>, cpu: usize) {
    let asid = asids::switch_to(space.asid(), cpu);
    TTBR0_EL1.set(crate::arch::aarch64::translation::ttbr(space.root(), asid));
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    let old = CURRENT[cpu].lock().replace(space);
    drop(old);
}

/// This CPU (`cpu`) runs no task any more (its TTBR0 walks are off): it forgets the space.
pub fn leave(cpu: usize) {
    let old = CURRENT[cpu].lock().take();
    drop(old);
}

/// The space of the task this CPU runs, if any.
pub fn current() -> Option<Arc<Vmspace>> {
    CURRENT[crate::cpu::current_cpu()].lock().clone()
}
