//! The time of day. CLOCK_REALTIME is CLOCK_MONOTONIC (the generic timer's counter, from boot)
//! plus an offset fixed once at boot from the machine's real-time clock: the device tree's
//! `arm,pl031` node (QEMU virt has one, started at the host's time). A machine without one (a
//! Raspberry Pi has no RTC) keeps offset 0, so its CLOCK_REALTIME counts from 1970 at boot, and
//! the boot report says so. `settimeofday`/`clock_settime` are not offered.
//!
//! CLOCK_MONOTONIC is the counter times a scale ([`CounterScale`]), the same the vDSO's data
//! page publishes, so that the system call and the vDSO compute the same time from the same
//! counter reading.
use core::sync::atomic::{AtomicU64, Ordering};

use linux_abi::time::{CounterScale, civil_from_unix, ns_to_ticks};

/// CLOCK_REALTIME minus CLOCK_MONOTONIC, in nanoseconds.
static OFFSET_NS: AtomicU64 = AtomicU64::new(0);

/// Reads the RTC named by the device tree, if any, and sets the offset. Returns a line for the
/// boot report.
pub fn init(fdt: &crate::devicetree::Fdt<'_>) -> alloc::string::String {
    let Some((path, node)) = crate::devicetree::find_compatible_path(fdt, &["arm,pl031"]) else {
        return alloc::string::String::from(
            "none (no arm,pl031 in the device tree): the time of day counts from 1970 at boot",
        );
    };
    let mapped = crate::devicetree::reg_translated(fdt, &path, node, 0).and_then(|(pa, _)| {
        crate::memory::kernel_map::map_device(pa, 0x1000)
            .map(|va| (pa, va))
            .map_err(|e| alloc::format!("{e:?}"))
    });
    let (pa, va) = match mapped {
        Ok(m) => m,
        Err(why) => return alloc::format!("{path}: cannot map it ({why}); the time of day counts from 1970"),
    };
    // SAFETY: `va` maps the PL031's register page as device memory (just mapped, permanently).
    let secs = u64::from(unsafe { crate::drivers::pl031::read_seconds(va) });
    OFFSET_NS.store((secs * 1_000_000_000).saturating_sub(monotonic_ns()), Ordering::Relaxed);
    let (y, mo, d, h, mi, s) = civil_from_unix(secs);
    alloc::format!("PL031 at {pa:#x}: {y:04}-{mo:02}-{d:02} {h:02}:{mi:02}:{s:02} UTC")
}

/// The scale's multiplier (0: not computed yet).
static SCALE_MULT: AtomicU64 = AtomicU64::new(0);

/// The counter's scale, computed once from its frequency (which does not change).
pub fn scale() -> CounterScale {
    let mult = SCALE_MULT.load(Ordering::Relaxed);
    if mult != 0 {
        return CounterScale { mult };
    }
    let scale = CounterScale::new(crate::arch::time::frequency());
    SCALE_MULT.store(scale.mult, Ordering::Relaxed);
    scale
}

/// CLOCK_MONOTONIC in nanoseconds.
pub fn monotonic_ns() -> u64 {
    scale().ns(crate::arch::time::counter())
}

/// CLOCK_REALTIME in nanoseconds since 1970.
pub fn realtime_ns() -> u64 {
    monotonic_ns().saturating_add(OFFSET_NS.load(Ordering::Relaxed))
}

/// CLOCK_REALTIME minus CLOCK_MONOTONIC.
pub fn realtime_offset_ns() -> u64 {
    OFFSET_NS.load(Ordering::Relaxed)
}

/// The counter value at which CLOCK_MONOTONIC reaches `ns` (rounded up: never early).
pub fn deadline_at_monotonic(ns: u64) -> u64 {
    ns_to_ticks(ns, crate::arch::time::frequency())
}

/// The counter value `ns` nanoseconds from now (rounded up).
pub fn deadline_after(ns: u64) -> u64 {
    crate::arch::time::counter().saturating_add(ns_to_ticks(ns, crate::arch::time::frequency()))
}
