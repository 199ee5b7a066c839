//! Interrupts: the interrupt controller's acknowledge/dispatch/end loop (GIC, BCM2836 or Apple
//! AIC, through `drivers::intc`), the FIQ path of the controllers that deliver the timer and IPIs
//! as FIQs (the AIC), the per-CPU tick and inter-processor interrupts.
//!
//! The kernel itself runs with IRQs (and FIQs) masked; they are taken only where the kernel
//! waits (the idle loop, [`wait_with_interrupts`]) and, from the scheduler on, while user code
//! runs. FIQs are unmasked with IRQs only where the controller uses them ([`intc::uses_fiqs`]);
//! elsewhere F stays set in the kernel. Handlers run on the CPU's exception stack and must not
//! block.
//!
//! This module does not know its handlers: the layers above register them ([`on_tick`],
//! [`set_handler`]; the console terminal registers its input polling), as Linux's
//! `request_irq` does, so the interrupt core never imports the code it calls.
use core::sync::atomic::{AtomicU64, Ordering};

use crate::cpu::{CPUS, MAX_CPUS, current_cpu};
use crate::drivers::intc;

/// The EL1 virtual timer's private interrupt (PPI 11).
pub const TIMER_INTID: u32 = 27;
/// Tick rate of the per-CPU timer.
pub const TICK_HZ: u64 = 100;
/// SGI used to wake a CPU (work is waiting).
pub const IPI_WAKE: u32 = 0;
/// SGI used by tests and `membarrier` ([`sync_cpus`]): the receiver executes a full memory
/// barrier and counts it.
pub const IPI_PING: u32 = 1;

/// Most device interrupts with a handler ([`set_handler`]).
const HANDLERS: usize = 4;
/// A routed device interrupt and its handler.
type DeviceHandler = Option<(u32, fn())>;
/// The handler of each routed device interrupt.
static DEVICE_HANDLERS: spin::Mutex<[DeviceHandler; HANDLERS]> = spin::Mutex::new([None; HANDLERS]);
/// Most handlers run on every tick ([`on_tick`]).
const TICK_HANDLERS: usize = 4;
/// The tick's handlers, in the order registered.
type TickHandlers = [Option<fn()>; TICK_HANDLERS];
/// What runs on every tick, after the timer is re-armed.
static TICK_HANDLERS_SET: spin::Mutex<TickHandlers> = spin::Mutex::new([None; TICK_HANDLERS]);

/// Makes `handler` run on every tick of every CPU (up to four handlers; registering one twice
/// changes nothing). False when the table is full.
pub fn on_tick(handler: fn()) -> bool {
    let mut set = TICK_HANDLERS_SET.lock();
    if set.iter().flatten().any(|h| core::ptr::fn_addr_eq(*h, handler)) {
        return true;
    }
    let Some(slot) = set.iter_mut().find(|s| s.is_none()) else { return false };
    *slot = Some(handler);
    true
}

/// Makes `handler` run for interrupt `intid` (a device's, routed by the caller). False when the
/// table is full.
pub fn set_handler(intid: u32, handler: fn()) -> bool {
    let mut table = DEVICE_HANDLERS.lock();
    let Some(slot) = table.iter_mut().find(|s| s.is_none_or(|(id, _)| id == intid)) else { return false };
    *slot = Some((intid, handler));
    true
}

/// Forgets the handler of interrupt `intid`.
pub fn clear_handler(intid: u32) {
    let mut table = DEVICE_HANDLERS.lock();
    for slot in table.iter_mut().filter(|s| s.is_some_and(|(id, _)| id == intid)) {
        *slot = None;
    }
}
/// Ticks taken per CPU.
pub static TICKS: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// Whether each CPU is waiting in [`sync_cpus`] (its ticks then run no handlers).
static SYNC_WAITING: [core::sync::atomic::AtomicBool; MAX_CPUS] =
    [const { core::sync::atomic::AtomicBool::new(false) }; MAX_CPUS];
/// Pings received per CPU.
pub static PINGS: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];
/// GICv2 CPU-interface number per CPU.
static GIC_TARGET: [AtomicU64; MAX_CPUS] = [const { AtomicU64::new(0) }; MAX_CPUS];

fn arm_timer() {
    let interval = crate::arch::time::frequency() / TICK_HZ;
    // SAFETY: programs this CPU's EL1 virtual timer (TVAL, then enable, unmasked).
    unsafe {
        core::arch::asm!("msr cntv_tval_el0, {}", "mov {t}, #1", "msr cntv_ctl_el0, {t}", "isb",
            in(reg) interval, t = out(reg) _, options(nostack));
    }
}

/// Sets up this CPU's interrupt delivery: GIC CPU interface, the timer PPI and the SGIs.
///
/// # Errors
/// The GIC's complaint, if this CPU cannot take interrupts.
pub fn init_cpu() -> Result<(), alloc::string::String> {
    intc::init_cpu()?;
    GIC_TARGET[current_cpu()].store(u64::from(intc::v2_interface_number()), Ordering::Relaxed);
    intc::enable_private(IPI_WAKE);
    intc::enable_private(IPI_PING);
    intc::enable_private(TIMER_INTID);
    arm_timer();
    Ok(())
}

/// Test image only: a test has a GICv3 signal group 0 as FIQs (`gic::group0_test`), which
/// [`handle_fiq`] then takes.
#[cfg(feature = "test-image")]
pub static FIQ_TEST: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

fn dispatch(intid: u32) {
    let cpu = current_cpu();
    match intid {
        TIMER_INTID => {
            TICKS[cpu].fetch_add(1, Ordering::Relaxed);
            arm_timer();
            // Copied out of the lock: a handler may run for a while (it is not reentered: the
            // tick comes again only after this one ends).
            // Not while this CPU waits in `sync_cpus`: the waiting call may hold locks the
            // handlers take (a system call runs holding its CPU's current task); the next tick
            // does their work.
            if SYNC_WAITING[cpu].load(Ordering::Acquire) {
                return;
            }
            let handlers = *TICK_HANDLERS_SET.lock();
            for tick in handlers.iter().flatten() {
                tick();
            }
        }
        IPI_PING => {
            // The barrier `sync_cpus` asks for: what the interrupted program did before is
            // ordered before what the caller does after it sees the count move.
            core::sync::atomic::fence(Ordering::SeqCst);
            PINGS[cpu].fetch_add(1, Ordering::Release);
        }
        id => {
            let handler = DEVICE_HANDLERS.lock().iter().flatten().find(|(i, _)| *i == id).map(|(_, h)| *h);
            if let Some(handler) = handler {
                handler();
            }
        }
    }
}

/// Called by the vectors for every IRQ.
pub fn handle() {
    loop {
        let (intid, token) = intc::acknowledge();
        if intid >= 1020 {
            return; // spurious: nothing (more) pending
        }
        dispatch(intid);
        intc::end_of_interrupt(token);
    }
}

/// Called by the vectors for every FIQ: the tick and the IPIs it carried, on a controller that
/// delivers them as FIQs. False where FIQs have no use (the vectors then report it as unexpected).
pub fn handle_fiq() -> bool {
    #[cfg(feature = "test-image")]
    if FIQ_TEST.load(Ordering::Acquire) && crate::drivers::gic::group0_test::take() {
        return true;
    }
    let Some(tick) = intc::fiq() else { return false };
    if tick {
        dispatch(TIMER_INTID);
    }
    while let Some(ipi) = intc::next_ipi() {
        dispatch(ipi);
    }
    true
}

/// Makes this CPU's timer fire no later than counter value `deadline` (a blocked thread's
/// timeout), without delaying the next tick; the tick handler re-arms the periodic interval.
pub fn wake_by(deadline: u64) {
    let cval: u64;
    // SAFETY: reads this CPU's EL1 virtual timer compare value; no memory is touched.
    unsafe { core::arch::asm!("mrs {}, cntv_cval_el0", out(reg) cval, options(nomem, nostack)) };
    if deadline < cval {
        // SAFETY: moves this CPU's virtual timer compare value earlier; the timer stays enabled.
        unsafe { core::arch::asm!("msr cntv_cval_el0, {}", "isb", in(reg) deadline, options(nostack)) };
    }
}

/// Makes every online CPU of `cpus` (bit per CPU) but this one take an interrupt that executes a
/// full memory barrier, and waits until each has (`membarrier`): whatever a program ran there
/// before is ordered before what the caller does next, and its return from the interrupt is a
/// context synchronisation event, so it fetches instructions written before this call anew.
/// While it waits this CPU takes its own interrupts (another CPU may be waiting for it in the
/// same way): the pings it answers take no lock, and its ticks run no handlers meanwhile (the
/// caller, a system call, holds its CPU's current task, which the tick handlers lock). A CPU
/// that does not answer within 100 ms (stopped by a debugger) is given up on.
pub fn sync_cpus(cpus: u64) {
    let me = current_cpu();
    let mut seen = [0u64; MAX_CPUS];
    let mut waiting = 0u64;
    for (cpu, info) in CPUS.iter().enumerate() {
        if cpu != me && cpus & (1 << cpu) != 0 && info.online_at.load(Ordering::Acquire) != 0 {
            seen[cpu] = PINGS[cpu].load(Ordering::Acquire);
            send_ipi(cpu, IPI_PING);
            waiting |= 1 << cpu;
        }
    }
    core::sync::atomic::fence(Ordering::SeqCst);
    let start = crate::arch::time::counter();
    let limit = crate::arch::time::frequency() / 10;
    SYNC_WAITING[me].store(true, Ordering::Release);
    while waiting != 0 {
        for (cpu, seen) in seen.iter().enumerate() {
            if waiting & (1 << cpu) != 0 && PINGS[cpu].load(Ordering::Acquire) != *seen {
                waiting &= !(1 << cpu);
            }
        }
        if waiting == 0 || crate::arch::time::counter() - start > limit {
            break;
        }
        take_pending_interrupts();
    }
    SYNC_WAITING[me].store(false, Ordering::Release);
    core::sync::atomic::fence(Ordering::SeqCst);
}

/// Lets the interrupts pending on this CPU be taken, then masks them again.
fn take_pending_interrupts() {
    if intc::uses_fiqs() {
        // SAFETY: unmasks IRQs and FIQs for the handlers of what is pending (ordinary Rust, so
        // caller-saved registers are declared clobbered) and masks them again.
        unsafe {
            core::arch::asm!("msr daifclr, #3", "isb", "msr daifset, #3", options(nostack), clobber_abi("C"))
        };
        return;
    }
    // SAFETY: as above, for IRQs.
    unsafe {
        core::arch::asm!("msr daifclr, #2", "isb", "msr daifset, #2", options(nostack), clobber_abi("C"))
    };
}

/// Sends `intid` (an SGI) to CPU `cpu`.
pub fn send_ipi(cpu: usize, intid: u32) {
    let mpidr = CPUS[cpu].mpidr.load(Ordering::Relaxed);
    intc::send_ipi(intid, cpu, mpidr, GIC_TARGET[cpu].load(Ordering::Relaxed) as u8);
}

#[cfg_attr(
    not(feature = "test-image"),
    expect(dead_code, reason = "the test image waits for interrupts with it")
)]
/// Waits with interrupts enabled until `done()` holds or `timeout_us` passes; returns `done()`.
pub fn wait_with_interrupts(timeout_us: u64, mut done: impl FnMut() -> bool) -> bool {
    let start = crate::arch::time::counter();
    let limit = timeout_us * crate::arch::time::frequency() / 1_000_000;
    while !done() {
        if crate::arch::time::counter() - start > limit {
            return done();
        }
        wait_for_interrupt();
    }
    true
}

/// Sleeps until an interrupt is pending, then lets it be handled. The WFI runs with IRQs still
/// masked: an interrupt that arrives after the caller's last check (a wake IPI, a tick) is
/// pending and ends the WFI at once (WFI wakes on a pending interrupt whatever PSTATE.I says);
/// only then are IRQs unmasked so the handler runs. Unmasking first would let it be taken just
/// before the WFI, which would then sleep until the next one. Where the controller delivers the
/// timer and IPIs as FIQs, F is unmasked and masked with I (a pending FIQ would otherwise end
/// every WFI without ever being taken).
pub fn wait_for_interrupt() {
    if intc::uses_fiqs() {
        // SAFETY: as below, for IRQs and FIQs.
        unsafe {
            core::arch::asm!(
                "wfi",
                "msr daifclr, #3",
                "isb",
                "msr daifset, #3",
                options(nostack),
                clobber_abi("C")
            )
        };
        return;
    }
    // SAFETY: the handler is ordinary Rust, so caller-saved registers (FP/SIMD included) are
    // declared clobbered; IRQs are masked again before returning.
    unsafe {
        core::arch::asm!(
            "wfi",
            "msr daifclr, #2",
            "isb",
            "msr daifset, #2",
            options(nostack),
            clobber_abi("C")
        )
    };
}
