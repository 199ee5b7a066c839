//! The Memory Tagging Extension for user space (FEAT_MTE2), as Linux's `arch/arm64/kernel/mte.c`
//! gives it: every 16-byte granule of tagged memory carries a 4-bit Allocation Tag, and a load
//! or store through a pointer whose bits `[59:56]` differ from it is a tag-check fault when
//! the thread asked for checks (`prctl(PR_SET_TAGGED_ADDR_CTRL)`: none, synchronous or
//! asynchronous, `SCTLR_EL1.TCF0`), and otherwise goes through.
//!
//! Where each piece lives: the tagged memory type (MAIR index 4) and `PROT_MTE` are `mm`'s
//! (`descriptor::MemoryType::NormalTagged`, `vm::Prot::MTE`); this module sets the CPU up
//! (MAIR's tagged byte, `SCTLR_EL1.ATA`/`ATA0`, `GCR_EL1`, `RGSR_EL1`), zeroes the tags of
//! every fresh user frame and copies them with its data (`memory::frames::UserFrames`), and
//! keeps each thread's check mode and tag-exclusion mask ([`TagControl`]), installed when the
//! thread is switched in. The kernel reaches frames through its linear map, which is mapped
//! tagged on a CPU with the feature (as Linux's `map_mem` does) so that `DC GZVA`, `LDG` and
//! `STG` through it reach the tags; the kernel's own accesses are never checked
//! (`SCTLR_EL1.TCF` = 0). Without FEAT_MTE2 nothing here runs: `PROT_MTE` is ignored by `mmap`
//! and refused by `mprotect`, as on Linux.
use core::arch::asm;
use core::sync::atomic::{AtomicBool, AtomicU8, Ordering};

use linux_abi::prctl::{
    PR_MTE_TAG_MASK, PR_MTE_TAG_SHIFT, PR_MTE_TCF_ASYNC, PR_MTE_TCF_MASK, PR_MTE_TCF_SYNC,
    PR_TAGGED_ADDR_ENABLE,
};

/// Whether the CPU has FEAT_MTE2 (tag storage); 0x80 until read.
static SUPPORT: AtomicU8 = AtomicU8::new(0x80);

/// `ID_AA64PFR1_EL1.MTE` (bits `[11:8]`): 2 or more is FEAT_MTE2, 3 FEAT_MTE3 (asymmetric).
fn mte_field() -> u64 {
    let pfr1: u64;
    // SAFETY: reading an ID register has no side effect.
    unsafe { asm!("mrs {}, id_aa64pfr1_el1", out(reg) pfr1, options(nomem, nostack)) };
    (pfr1 >> 8) & 0xf
}

/// Whether this machine has tag storage (FEAT_MTE2): QEMU's `-M virt,mte=on -cpu max`. Linux
/// uses the feature only from MTE2 on (MTE1 has the instructions but no tags).
pub fn supported() -> bool {
    let s = SUPPORT.load(Ordering::Relaxed);
    if s & 0x80 == 0 {
        return s != 0;
    }
    let s = u8::from(mte_field() >= 2);
    SUPPORT.store(s, Ordering::Relaxed);
    s != 0
}

/// Whether the CPU has FEAT_MTE3 (the asymmetric check mode; `HWCAP2_MTE3`).
pub fn has_mte3() -> bool {
    mte_field() >= 3
}

// SCTLR_EL1 fields (Arm ARM D19.2.118).
const SCTLR_ATA: u64 = 1 << 43;
const SCTLR_ATA0: u64 = 1 << 42;
const SCTLR_TCF_SHIFT: u32 = 40;
const SCTLR_TCF0_SHIFT: u32 = 38;
const SCTLR_ITFSB: u64 = 1 << 37;
/// GCR_EL1.RRND: `IRG` draws its tags from the implementation's random source (`RGSR_EL1` is
/// then unused), as Linux sets it.
const GCR_RRND: u64 = 1 << 16;

/// Sets this CPU up for tagged user memory, on every CPU before it runs user code (nothing when
/// the CPU lacks FEAT_MTE2): the tagged byte of `MAIR_EL1` (index 4, nothing is mapped with it
/// yet, so no TLB entry holds the old byte), tag access at EL1 and EL0 (`ATA`, `ATA0`), no tag
/// checks at EL1 (`TCF` = 0: the kernel's own accesses, the linear map included, are never
/// checked), asynchronous faults recorded on exception entry (`ITFSB`), random tags for `IRG`
/// with every tag excluded until a thread asks (`GCR_EL1`), and `TFSRE0_EL1`/`TFSR_EL1` clear.
pub fn init_cpu() {
    if !supported() {
        return;
    }
    let mair = mm::descriptor::mair_el1_value(true);
    // SAFETY: index 4 of MAIR_EL1 is used by no live descriptor yet (the boot CPU runs this
    // before the linear map is built tagged, and a secondary CPU's MAIR is the boot CPU's);
    // the system registers written here affect tag accesses and checks only.
    unsafe {
        asm!(
            "msr mair_el1, {mair}",
            "mrs {t}, sctlr_el1",
            "bic {t}, {t}, {tcf}",
            "orr {t}, {t}, {set}",
            "msr sctlr_el1, {t}",
            "msr s3_0_c1_c0_6, {gcr}",   // GCR_EL1
            "msr s3_0_c1_c0_5, {seed}",  // RGSR_EL1
            "msr s3_0_c5_c6_1, xzr",     // TFSRE0_EL1
            "msr s3_0_c5_c6_0, xzr",     // TFSR_EL1
            "isb",
            mair = in(reg) mair,
            t = out(reg) _,
            tcf = in(reg) (3u64 << SCTLR_TCF_SHIFT) | (3u64 << SCTLR_TCF0_SHIFT),
            set = in(reg) SCTLR_ATA | SCTLR_ATA0 | SCTLR_ITFSB,
            gcr = in(reg) GCR_RRND | 0xffff,
            seed = in(reg) (crate::arch::time::counter() & 0xffff) << 8,
            options(nostack)
        );
    }
}

/// Whether `init_cpu` made the linear map's memory type tagged: the kernel map uses
/// [`mm::descriptor::MemoryType::NormalTagged`] for RAM then.
pub fn linear_map_tagged() -> bool {
    supported()
}

/// Per CPU: whether the thread it runs accepts tagged pointers in system calls
/// (`PR_TAGGED_ADDR_ENABLE`), set when the thread is switched in ([`TagControl::install`]) and
/// read by the user copies' range check, as Linux's `access_ok` reads `TIF_TAGGED_ADDR`.
static TAGGED_ADDRESSES: [AtomicBool; CPU_SLOTS] = [const { AtomicBool::new(false) }; CPU_SLOTS];

/// The CPU numbers [`TAGGED_ADDRESSES`] has room for (`crate::cpu` checks that its `MAX_CPUS`
/// fits).
pub const CPU_SLOTS: usize = 64;

/// This CPU's number, as `crate::cpu::current_cpu` reads it (TPIDR_EL1), kept in range.
fn cpu_slot() -> usize {
    let cpu: u64;
    // SAFETY: reading TPIDR_EL1 has no side effect.
    unsafe { asm!("mrs {}, tpidr_el1", out(reg) cpu, options(nomem, nostack)) };
    cpu as usize % CPU_SLOTS
}

/// `addr` without its tag byte, exactly as Linux's arm64 `untagged_addr`: `addr` ANDed with
/// its own sign extension from bit 55, so an address with bit 55 clear (the user half) loses
/// bits `[63:56]` and one with bit 55 set keeps them (a kernel address is unchanged). This is
/// the one untagging rule: system calls (`syscall::memory`), the user copies' range check and
/// fault addresses all use it.
pub const fn untagged(addr: u64) -> u64 {
    addr & ((((addr << 8) as i64) >> 8) as u64)
}

/// `addr` as the user copies' range check should see it: untagged when the running thread
/// enabled the tagged-address ABI, as is otherwise (a tagged pointer then lies outside the
/// user half, `EFAULT`, as on Linux).
pub fn user_pointer_for_check(addr: u64) -> u64 {
    if TAGGED_ADDRESSES[cpu_slot()].load(Ordering::Relaxed) { untagged(addr) } else { addr }
}

/// A thread's tagged-address control (`prctl(PR_SET_TAGGED_ADDR_CTRL)`): the value as
/// `PR_GET_TAGGED_ADDR_CTRL` returns it. All clear after `execve` (Linux's
/// `mte_thread_init_user`), copied by `fork` and `clone`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TagControl(u64);

impl TagControl {
    /// The control as `PR_GET_TAGGED_ADDR_CTRL` reports it.
    pub fn bits(self) -> u64 {
        self.0
    }

    /// Whether system calls accept tagged pointers (`PR_TAGGED_ADDR_ENABLE`).
    pub fn tagged_addresses(self) -> bool {
        self.0 & PR_TAGGED_ADDR_ENABLE != 0
    }

    /// The control `prctl(PR_SET_TAGGED_ADDR_CTRL, arg)` asks for, or `EINVAL` as Linux's
    /// `set_tagged_addr_ctrl`: bits outside the enable bit (and, with MTE, the check modes and
    /// the tag mask) set. Both SYNC and ASYNC asked is "either" (Linux 5.16 on): this kernel
    /// picks SYNC, which Linux's default per-CPU preference also picks.
    pub fn from_prctl(arg: u64) -> Result<Self, linux_abi::Errno> {
        let mut valid = PR_TAGGED_ADDR_ENABLE;
        if supported() {
            valid |= PR_MTE_TCF_MASK | PR_MTE_TAG_MASK;
        }
        if arg & !valid != 0 {
            return Err(linux_abi::Errno::EINVAL);
        }
        Ok(Self(arg))
    }

    /// SCTLR_EL1.TCF0 for this control: 0 none, 1 synchronous, 2 asynchronous.
    fn tcf0(self) -> u64 {
        if self.0 & PR_MTE_TCF_SYNC != 0 {
            1
        } else if self.0 & PR_MTE_TCF_ASYNC != 0 {
            2
        } else {
            0
        }
    }

    /// GCR_EL1.Exclude: the tags `IRG` may not draw, the complement of the inclusion mask.
    fn exclude(self) -> u64 {
        !(self.0 & PR_MTE_TAG_MASK) >> PR_MTE_TAG_SHIFT & 0xffff
    }

    /// Loads the check mode into SCTLR_EL1.TCF0 and the exclusion mask into GCR_EL1 (with
    /// FEAT_MTE2), and the tagged-address ABI into this CPU's flag, for the thread about to run.
    pub fn install(self) {
        TAGGED_ADDRESSES[cpu_slot()].store(self.tagged_addresses(), Ordering::Relaxed);
        if !supported() {
            return;
        }
        let tcf0 = self.tcf0() << SCTLR_TCF0_SHIFT;
        // SAFETY: TCF0 only decides how EL0's tag-check faults are reported, and GCR_EL1 which
        // tags IRG draws; neither affects the kernel's own accesses (TCF stays 0).
        unsafe {
            asm!(
                "mrs {t}, sctlr_el1",
                "bic {t}, {t}, {mask}",
                "orr {t}, {t}, {tcf0}",
                "msr sctlr_el1, {t}",
                "msr s3_0_c1_c0_6, {gcr}",
                "isb",
                t = out(reg) _,
                mask = in(reg) 3u64 << SCTLR_TCF0_SHIFT,
                tcf0 = in(reg) tcf0,
                gcr = in(reg) GCR_RRND | self.exclude(),
                options(nostack)
            );
        }
    }
}

/// Takes an asynchronous tag-check fault of EL0 this CPU recorded (TFSRE0_EL1.TF0), clearing
/// it: Linux's `check_mte_async_tcf` on every entry from EL0, whose fault is then delivered as
/// `SIGSEGV`/`SEGV_MTEAERR` on the way back. `SCTLR_EL1.ITFSB` makes the entry synchronize the
/// register first.
pub fn take_async_fault() -> bool {
    if !supported() {
        return false;
    }
    let tfsre0: u64;
    // SAFETY: reads and clears this CPU's record of EL0's asynchronous tag-check faults.
    unsafe {
        asm!("mrs {}, s3_0_c5_c6_1", out(reg) tfsre0, options(nomem, nostack));
        if tfsre0 & 1 != 0 {
            asm!("msr s3_0_c5_c6_1, xzr", "isb", options(nomem, nostack));
        }
    }
    tfsre0 & 1 != 0
}

/// Zeroes `len` bytes at `va` and their Allocation Tags, as Linux's `mte_zero_clear_page_tags`,
/// with `STZ2G` (32 bytes and two tags a store). Linux uses `DC GZVA`, which takes the tag from
/// the address's bits `[59:56]`: with its `TCR_EL1.TBI1` a kernel address can carry tag 0 there,
/// but this kernel leaves `TBI1` clear (its addresses must be canonical, top byte 0xff, tag 0xf),
/// so it uses the store form, whose tag comes from a register of its own.
///
/// # Safety
/// `[va, va + len)` is RAM the caller owns, mapped tagged (the linear map with the feature),
/// `va` and `len` multiples of 128, and the CPU has FEAT_MTE2.
pub unsafe fn zero_with_tags(va: usize, len: usize) {
    // SAFETY: the caller's promise: whole 128-byte lines of its tagged RAM; each STZ2G writes
    // zero data and tag 0 (from `zero`, not the address) to two granules.
    unsafe {
        asm!(
            ".arch_extension memtag",
            "2:",
            "stz2g {z}, [{a}]",
            "stz2g {z}, [{a}, #32]",
            "stz2g {z}, [{a}, #64]",
            "stz2g {z}, [{a}, #96]",
            "add {a}, {a}, #128",
            "cmp {a}, {e}",
            "b.lo 2b",
            a = inout(reg) va => _,
            e = in(reg) va + len,
            z = in(reg) 0u64,
            options(nostack)
        );
    }
}

/// Copies the Allocation Tags of the `len` bytes at `from` to `to`, one 16-byte granule at a
/// time (`LDG`, `STG`), as Linux's `mte_copy_page_tags` (which uses `LDGM`/`STGM`, EL1's
/// block forms; the granule forms need no `GMID_EL1`).
///
/// # Safety
/// Both ranges are RAM mapped tagged, `to` the caller's, 16-byte aligned, and the CPU has
/// FEAT_MTE2.
pub unsafe fn copy_tags(to: usize, from: usize, len: usize) {
    let mut off = 0;
    while off < len {
        // SAFETY: the caller's promise; LDG reads the source granule's tag into `t`'s bits
        // [59:56] and STG writes it to the destination granule, neither touching data.
        unsafe {
            asm!(
                ".arch_extension memtag",
                "mov {t}, {s}",
                "ldg {t}, [{s}]",
                "stg {t}, [{d}]",
                t = out(reg) _,
                s = in(reg) from + off,
                d = in(reg) to + off,
                options(nostack)
            );
        }
        off += 16;
    }
}
