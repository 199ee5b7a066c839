//! The kernel console: the UART the kernel's log lines (`klog`, at the console log level), the
//! test and benchmark reports (`cprintln!`) and the programs' terminal (`fs::tty`) write to.
//!
//! Before the device tree is read, the console is the board's fallback UART (if the build has one,
//! see `board`), reached through the early map. Once the device tree names `/chosen/stdout-path`,
//! the console moves to that UART, mapped in the final kernel map, with the driver the node's
//! `compatible` list chooses (`devicetree::support::uart_config`): a PL011, a BCM2835 mini UART,
//! or one of `drivers::uart`.
//! A console the kernel has no driver for leaves the kernel silent but running (the boot report,
//! kept in memory by no one, still records the choice in [`kind`]). Output is polled; a lock keeps
//! lines whole. Input is polled too ([`receive`], from `crate::fs::tty` on each tick). The fatal
//! paths (panic, exception report) take the console even if its lock is held, because a report that deadlocks is worse than one that interleaves.

use core::fmt::{self, Write};

use spin::Mutex;

use crate::drivers::mini_uart::MiniUart;
use crate::drivers::pl011::Pl011;
use crate::drivers::uart::{
    Serial, cadence::Cadence, imx::Imx, lpuart::Lpuart, meson::Meson, mvebu::Mvebu, ns16550::Ns16550,
    qcom_geni::QcomGeni, qcom_uartdm::QcomUartDm, samsung, samsung::Samsung, scif::Scif,
};
pub use devicetree::support::UartFamily;

/// What the console is, for the boot report.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ConsoleKind {
    /// Nothing to write to: output is dropped.
    None,
    /// The board's fallback UART through the early map.
    Fallback,
    /// The UART the device tree names, with the driver its `compatible` list chose.
    Device {
        /// Its driver.
        family: UartFamily,
        /// Its physical address (the node's first `reg`).
        pa: u64,
    },
}

/// Which driver a UART needs, and the register layout the 16550 driver needs with it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UartDriver {
    /// The register layout.
    pub family: UartFamily,
    /// 16550 only: register `n` at `n << reg_shift`.
    pub reg_shift: u32,
    /// 16550 only: access width in bytes.
    pub reg_io_width: u32,
}

impl UartDriver {
    /// A driver with the default layout (32-bit registers; only the 16550 reads these).
    pub const fn plain(family: UartFamily) -> Self {
        Self { family, reg_shift: 0, reg_io_width: 4 }
    }

    /// The driver `devicetree::support::uart_config` chose for a node.
    pub fn from_config(config: &devicetree::support::UartConfig) -> Self {
        Self { reg_shift: config.reg_shift, reg_io_width: config.reg_io_width, ..Self::plain(config.family) }
    }
}

enum Uart {
    Pl011(Pl011),
    /// A PL011 whose control registers are not there to program (SBSA generic UART).
    Sbsa(Pl011),
    MiniUart(MiniUart),
    Ns16550(Ns16550),
    Meson(Meson),
    Imx(Imx),
    Lpuart(Lpuart),
    Cadence(Cadence),
    Mvebu(Mvebu),
    QcomGeni(QcomGeni),
    QcomUartDm(QcomUartDm),
    Samsung(Samsung),
    Scif(Scif),
}

impl Uart {
    fn serial(&self) -> &dyn Serial {
        match self {
            Uart::Pl011(u) | Uart::Sbsa(u) => u,
            Uart::MiniUart(u) => u,
            Uart::Ns16550(u) => u,
            Uart::Meson(u) => u,
            Uart::Imx(u) => u,
            Uart::Lpuart(u) => u,
            Uart::Cadence(u) => u,
            Uart::Mvebu(u) => u,
            Uart::QcomGeni(u) => u,
            Uart::QcomUartDm(u) => u,
            Uart::Samsung(u) => u,
            Uart::Scif(u) => u,
        }
    }

    fn put_byte(&self, byte: u8) {
        self.serial().put_byte(byte);
    }

    fn flush(&self) {
        self.serial().flush();
    }

    fn get_byte(&self) -> Option<u8> {
        self.serial().get_byte()
    }

    fn clear_receive_interrupt(&self) {
        if let Uart::Pl011(u) | Uart::Sbsa(u) = self {
            u.clear_receive_interrupt();
        }
    }
}

struct Console {
    uart: Option<Uart>,
    kind: ConsoleKind,
}

static CONSOLE: Mutex<Console> = Mutex::new(Console { uart: None, kind: ConsoleKind::None });

impl Write for Console {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        if let Some(uart) = &self.uart {
            for byte in s.bytes() {
                if byte == b'\n' {
                    uart.put_byte(b'\r');
                }
                uart.put_byte(byte);
            }
        }
        Ok(())
    }
}

/// Switches the console to the UART at virtual address `va`, driven by `driver`.
///
/// The fallback UART is used as the loader left it (nothing is written until there is something
/// to say): until the device tree confirms it, its address may not even be a UART on this board
/// (see `board`).
///
/// # Safety
/// `va` must map a register block of that kind of UART as device memory for the rest of the
/// kernel's life (or until the console is switched again).
pub unsafe fn use_uart(driver: UartDriver, va: u64, kind: ConsoleKind) {
    let enable = kind != ConsoleKind::Fallback;
    // SAFETY (every arm): forwarded from the caller: `va` maps a register block of the kind
    // `driver.family` names, with the layout `driver` gives.
    let uart = match driver.family {
        UartFamily::Pl011 => {
            // SAFETY: see above.
            let u = unsafe { Pl011::new(va) };
            if enable {
                u.enable_transmit();
            }
            Uart::Pl011(u)
        }
        // SAFETY: see above.
        UartFamily::SbsaUart => Uart::Sbsa(unsafe { Pl011::new(va) }),
        UartFamily::MiniUart => {
            // SAFETY: see above.
            let u = unsafe { MiniUart::new(va) };
            if enable {
                u.enable_transmit();
            }
            Uart::MiniUart(u)
        }
        UartFamily::Ns16550 => {
            // SAFETY: see above; `reg_shift` and `reg_io_width` were checked by `uart_config`.
            Uart::Ns16550(unsafe { Ns16550::new(va, driver.reg_shift, driver.reg_io_width) })
        }
        UartFamily::Meson => {
            // SAFETY: see above.
            let u = unsafe { Meson::new(va) };
            if enable {
                u.enable();
            }
            Uart::Meson(u)
        }
        // SAFETY: see above.
        UartFamily::Imx => Uart::Imx(unsafe { Imx::new(va) }),
        // SAFETY: see above (`va` is past the i.MX identification words).
        UartFamily::Lpuart => Uart::Lpuart(unsafe { Lpuart::new(va) }),
        UartFamily::Cadence => {
            // SAFETY: see above.
            let u = unsafe { Cadence::new(va) };
            if enable {
                u.enable();
            }
            Uart::Cadence(u)
        }
        // SAFETY: see above.
        UartFamily::Mvebu => Uart::Mvebu(unsafe { Mvebu::new(va) }),
        // SAFETY: see above.
        UartFamily::QcomGeni => Uart::QcomGeni(unsafe { QcomGeni::new(va) }),
        // SAFETY: see above.
        UartFamily::QcomUartDm => Uart::QcomUartDm(unsafe { QcomUartDm::new(va) }),
        // SAFETY: see above.
        UartFamily::Exynos => Uart::Samsung(unsafe { Samsung::new(va, samsung::Layout::Exynos) }),
        // SAFETY: see above.
        UartFamily::AppleS5l => Uart::Samsung(unsafe { Samsung::new(va, samsung::Layout::AppleS5l) }),
        UartFamily::Scif => {
            // SAFETY: see above.
            let u = unsafe { Scif::new(va) };
            if enable {
                u.enable();
            }
            Uart::Scif(u)
        }
    };
    let mut console = CONSOLE.lock();
    console.uart = Some(uart);
    console.kind = kind;
}

/// Drops the console: output is discarded from here on (a console the kernel has no driver for,
/// or a fallback UART that the device tree shows is not a UART on this board).
pub fn silence() {
    let mut console = CONSOLE.lock();
    console.uart = None;
    console.kind = ConsoleKind::None;
}

/// What the console currently is.
pub fn kind() -> ConsoleKind {
    CONSOLE.lock().kind
}

/// Ends the run with `code` (0 = success) once everything printed has left the UART.
pub fn end_run(code: u32) -> ! {
    flush();
    crate::exit::exit(code)
}

/// Waits until everything written has left the UART (before powering off).
pub fn flush() {
    if let Some(uart) = &CONSOLE.lock().uart {
        uart.flush();
    }
}

/// Writes a program's bytes as they are (no UTF-8 check), turning `\n` into `\r\n` when `onlcr`
/// (the tty's `OPOST | ONLCR`).
pub fn write_bytes(bytes: &[u8], onlcr: bool) {
    let console = CONSOLE.lock();
    if let Some(uart) = &console.uart {
        for &byte in bytes {
            if byte == b'\n' && onlcr {
                uart.put_byte(b'\r');
            }
            uart.put_byte(byte);
        }
    }
}

/// Moves the bytes the UART has received into `buf`; returns how many. Returns 0 at once if
/// another CPU holds the console (the UART is polled again at the next tick).
pub fn receive(buf: &mut [u8]) -> usize {
    let Some(console) = CONSOLE.try_lock() else { return 0 };
    let Some(uart) = &console.uart else { return 0 };
    let mut n = 0;
    // Bounded by `buf`: a UART that always reports data (a broken one) cannot hold the CPU.
    while n < buf.len() {
        match uart.get_byte() {
            Some(byte) => buf[n] = byte,
            None => break,
        }
        n += 1;
    }
    uart.clear_receive_interrupt();
    n
}

/// Makes the console UART interrupt when it receives (a PL011 or SBSA UART; the others stay
/// polled on the tick).
/// Returns whether it will.
pub fn enable_receive_interrupt() -> bool {
    match &CONSOLE.lock().uart {
        Some(Uart::Pl011(u) | Uart::Sbsa(u)) => {
            u.enable_receive_interrupt();
            true
        }
        _ => false,
    }
}

#[doc(hidden)]
pub fn _print(args: fmt::Arguments<'_>) {
    let _ = CONSOLE.lock().write_fmt(args);
}

/// Prints bytes as they are (the kernel log's lines).
pub fn print_bytes(bytes: &[u8]) {
    let mut console = CONSOLE.lock();
    for chunk in bytes.utf8_chunks() {
        let _ = console.write_str(chunk.valid());
        if !chunk.invalid().is_empty() {
            let _ = console.write_str("?");
        }
    }
}

/// Prints on the fatal paths: takes the console even if someone holds its lock.
pub fn print_fatal(args: fmt::Arguments<'_>) {
    if CONSOLE.is_locked() {
        // SAFETY: only on the way to ending the run; interleaving is accepted (see module doc).
        unsafe { CONSOLE.force_unlock() };
    }
    _print(args);
}

/// Prints a line on the console, not in the log: the output of the modes a command line asks
/// for (the kernel's tests, the benchmarks, the self-tests), which is the run's own output.
#[macro_export]
macro_rules! cprintln {
    () => ($crate::console::_print(format_args!("\n")));
    ($($arg:tt)*) => ($crate::console::_print(format_args!("{}\n", format_args!($($arg)*))));
}
