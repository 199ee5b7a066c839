//! Where things are: this program's text, aligned boundaries, the code window as the kernel
//! reports it (or as observed on Linux), and the `fill` scenario that takes the free address space
//! below the next 4 GiB boundary (from a Chez Scheme change for Apple M1, which measured hot
//! indirect branches that cross 1 GiB / 4 GiB aligned boundaries 1.36x slower by pushing new code
//! past the next 4 GiB boundary this way).

use alloc::vec::Vec;

use crate::say;
use crate::sys::{self, CodeWindowInfo, Errno};

pub const KIB: u64 = 1 << 10;
pub const MIB: u64 = 1 << 20;
pub const GIB: u64 = 1 << 30;

unsafe extern "C" {
    static __text_start: u8;
    static __text_end: u8;
}

/// This program's executable segment `[start, end)` (from the link script).
pub fn text() -> (u64, u64) {
    (&raw const __text_start as u64, &raw const __text_end as u64)
}

/// Does `[lo, hi)` cross a boundary of `align` bytes (a power of two)?
pub fn crosses(lo: u64, hi: u64, align: u64) -> bool {
    hi > lo && lo / align != (hi - 1) / align
}

/// The smallest window aligned to its own size that holds `[lo, hi)`.
pub fn aligned_window(lo: u64, hi: u64) -> (u64, u64) {
    let diff = lo ^ (hi - 1);
    let size = if diff == 0 { 1 } else { 1u64.checked_shl(64 - diff.leading_zeros()).unwrap_or(0) };
    if size == 0 { (0, 0) } else { (lo & !(size - 1), size) }
}

/// Bytes in a human unit.
pub struct Size(pub u64);

impl core::fmt::Display for Size {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        let v = self.0;
        if v == 0 {
            write!(f, "0")
        } else if v.is_multiple_of(GIB) {
            write!(f, "{} GiB", v / GIB)
        } else if v.is_multiple_of(MIB) {
            write!(f, "{} MiB", v / MIB)
        } else if v.is_multiple_of(KIB) {
            write!(f, "{} KiB", v / KIB)
        } else {
            write!(f, "{v} B")
        }
    }
}

/// The code window, if this kernel has one (`None` with the reason when not: ENOSYS on Linux).
pub fn window() -> Result<CodeWindowInfo, Errno> {
    sys::code_window()
}

/// Prints and checks `info` for sanity; returns false if it is malformed.
pub fn window_sane(info: &CodeWindowInfo) -> bool {
    info.size.is_power_of_two() && info.base.is_multiple_of(info.size)
}

/// Does the window hold `[lo, hi)`?
pub fn in_window(info: &CodeWindowInfo, lo: u64, hi: u64) -> bool {
    lo >= info.base && hi <= info.base.saturating_add(info.size) && hi >= lo
}

/// Reports where `[lo, hi)` (all code chunks) landed relative to the text: span, smallest aligned
/// window holding both, and 1 GiB / 4 GiB boundary crossings between them.
pub fn report_placement(what: &str, lo: u64, hi: u64) -> (bool, bool) {
    let (ts, te) = text();
    let all_lo = lo.min(ts);
    let all_hi = hi.max(te);
    let (wbase, wsize) = aligned_window(all_lo, all_hi);
    let c1 = crosses(all_lo, all_hi, GIB);
    let c4 = crosses(all_lo, all_hi, 4 * GIB);
    say!(
        "  {what}: code in [{lo:#x}, {hi:#x}) span {}; text [{ts:#x}, {te:#x}); smallest aligned window \
         holding both: {} at {wbase:#x}; text<->code crosses 1 GiB: {}, 4 GiB: {}",
        Size(hi - lo),
        Size(wsize),
        yes(c1),
        yes(c4)
    );
    (c1, c4)
}

pub fn yes(b: bool) -> &'static str {
    if b { "yes" } else { "no" }
}

/// One reservation made by [`fill_below`].
pub struct Fill {
    pub ranges: Vec<(u64, u64)>,
    pub bytes: u64,
    pub syscalls: u64,
}

impl Fill {
    /// Returns the reservations.
    pub fn release(self) {
        for (a, l) in self.ranges {
            // SAFETY: these PROT_NONE reservations were made by `fill_below` and hold nothing.
            let _ = unsafe { sys::munmap(a, l) };
        }
    }
}

/// Takes (PROT_NONE, private, no reserve) all free address space in `[floor, limit)` that the
/// kernel will give to a plain hinted `mmap`, largest aligned pieces first, the way that Chez Scheme
/// change's `fill-below!` does with `mmap(0, …)` on a bottom-up macOS. Linux places top-down, so an
/// unhinted fill would never get below 4 GiB; hints are needed. A plain hint (not
/// `MAP_FIXED_NOREPLACE`) is used on purpose: it leaves the kernel free to refuse space it
/// reserves for code, exactly as a reservation-holding runtime would. Holes smaller than `grain`
/// (the code chunk size) are left: no chunk fits in them anyway, and probing them would cost
/// thousands of system calls.
pub fn fill_below(floor: u64, limit: u64, grain: u64) -> Fill {
    let mut fill = Fill { ranges: Vec::new(), bytes: 0, syscalls: sys::count() };
    const TOP: u64 = 256 * MIB;
    let mut a = floor & !(TOP - 1);
    while a < limit {
        let lo = a.max(floor);
        let hi = (a + TOP).min(limit);
        fill_piece(&mut fill, lo, hi, TOP, grain);
        a += TOP;
    }
    fill.syscalls = sys::count() - fill.syscalls;
    fill
}

fn fill_piece(fill: &mut Fill, lo: u64, hi: u64, block: u64, grain: u64) {
    if lo >= hi {
        return;
    }
    match sys::mmap_anon(lo, hi - lo, sys::PROT_NONE, sys::MAP_NORESERVE) {
        Ok(got) if got == lo => {
            fill.ranges.push((lo, hi - lo));
            fill.bytes += hi - lo;
            return;
        }
        Ok(got) => {
            // The hint was not honoured: give the mapping back.
            // SAFETY: `got` is a fresh mapping nothing references.
            let _ = unsafe { sys::munmap(got, hi - lo) };
        }
        Err(_) => {}
    }
    if hi - lo <= grain {
        return;
    }
    // Split into 16 aligned sub-blocks and try each.
    let sub = (block / 16).max(grain);
    let mut a = lo & !(sub - 1);
    while a < hi {
        fill_piece(fill, a.max(lo), (a + sub).min(hi), sub, grain);
        a += sub;
    }
}
