//! Device drivers. Each driver is given its registers' virtual address by the code that found the
//! device in the device tree and mapped it; drivers know nothing of boards.
//!
//! - consoles: [`pl011`] (QEMU `virt`, Pi 5's `uart10`, any PrimeCell UART, and the SBSA generic
//!   UART), [`mini_uart`] (the BCM2835 mini UART, the Pi 3 and 4 console), and [`uart`]: the
//!   16550 family, Amlogic, i.MX, LPUART, Cadence (QEMU `xlnx-zcu102`), Armada 3700, Qualcomm and
//!   Samsung/Apple layouts, host-tested against register models (tools/uart-check);
//! - [`pl031`]: the real-time clock of QEMU virt (read once at boot, `wallclock`);
//! - interrupt controllers behind one interface, [`intc`]: [`gic`] (GICv2, GICv3),
//!   [`bcm2836_local_intc`] (the Pi 3's per-core controller) and Apple's AIC ([`apple_intc`]
//!   over [`aic`], the register level, and [`apple_fiq`], the FIQ sources), the last two
//!   host-tested against register models (tools/uart-check).
pub mod aic;
pub mod apple_fiq;
pub mod apple_intc;
pub mod bcm2836_local_intc;
pub mod gic;
pub mod intc;
pub mod mini_uart;
pub mod pl011;
pub mod pl031;
pub mod uart;
