//! The 8250/16550 family: DesignWare APB UARTs (Rockchip, Allwinner, many more), NVIDIA Tegra,
//! MediaTek, TI K3, NXP Layerscape, and plain `ns16550a` nodes.
//!
//! The registers are the 16550's eight, but their spacing and access width vary by SoC:
//! register `n` is at `n << reg-shift` and is read and written `reg-io-width` bytes wide (1, 2
//! or 4), both from the device tree (`devicetree::support::uart_config` checks them). Transmit
//! and receive follow Linux's drivers/tty/serial/8250/8250_early.c (`serial8250_early_out`,
//! `early_serial8250_write`): wait for LSR.THRE, write THR; a byte is waiting when LSR.DR is
//! set. The line settings and divisor are the loader's, as earlycon leaves them when no baud
//! rate is given.
use tock_registers::LocalRegisterCopy;
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::register_bitfields;
use tock_registers::registers::ReadWrite;

use super::{Patience, Serial};

register_bitfields! [u32,
    /// Line status register.
    LSR [
        /// Data ready: the receive buffer (or FIFO) holds a byte.
        DATA_READY OFFSET(0) NUMBITS(1) [],
        /// Transmit holding register (or FIFO) empty: room for a byte.
        THR_EMPTY OFFSET(5) NUMBITS(1) [],
        /// Transmitter empty: holding and shift registers both empty.
        TRANSMITTER_EMPTY OFFSET(6) NUMBITS(1) []
    ]
];

/// Receive buffer (read) and transmit holding register (write).
pub const RBR_THR: u64 = 0;
/// Line status register.
pub const LSR_INDEX: u64 = 5;

/// A 16550 whose registers are mapped at a known virtual address.
pub struct Ns16550 {
    base: u64,
    reg_shift: u32,
    reg_io_width: u32,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for Ns16550 {}

impl Ns16550 {
    /// # Safety
    /// `base` must be the virtual address of a 16550 register block whose registers are
    /// `1 << reg_shift` bytes apart and `reg_io_width` (1, 2 or 4) bytes wide, mapped as device
    /// memory through register 7 for as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64, reg_shift: u32, reg_io_width: u32) -> Self {
        Self { base, reg_shift, reg_io_width, patience: Patience::new() }
    }

    fn read(&self, index: u64) -> u32 {
        let at = self.base + (index << self.reg_shift);
        // SAFETY: `new`'s contract: register `index` (< 8) is mapped at `at`, `reg_io_width`
        // bytes wide, and naturally aligned for that width.
        unsafe {
            match self.reg_io_width {
                1 => u32::from((*(at as *const ReadWrite<u8>)).get()),
                2 => u32::from((*(at as *const ReadWrite<u16>)).get()),
                _ => (*(at as *const ReadWrite<u32>)).get(),
            }
        }
    }

    fn write(&self, index: u64, value: u32) {
        let at = self.base + (index << self.reg_shift);
        // SAFETY: as for `read`.
        unsafe {
            match self.reg_io_width {
                1 => (*(at as *const ReadWrite<u8>)).set(value as u8),
                2 => (*(at as *const ReadWrite<u16>)).set(value as u16),
                _ => (*(at as *const ReadWrite<u32>)).set(value),
            }
        }
    }

    fn lsr(&self) -> LocalRegisterCopy<u32, LSR::Register> {
        LocalRegisterCopy::new(self.read(LSR_INDEX))
    }
}

impl Serial for Ns16550 {
    fn put_byte(&self, byte: u8) {
        if self.patience.wait(|| self.lsr().is_set(LSR::THR_EMPTY)) {
            self.write(RBR_THR, u32::from(byte));
        }
    }

    fn get_byte(&self) -> Option<u8> {
        if self.patience.is_dead() || !self.lsr().is_set(LSR::DATA_READY) {
            return None;
        }
        Some(self.read(RBR_THR) as u8)
    }

    fn flush(&self) {
        self.patience.wait(|| self.lsr().is_set(LSR::TRANSMITTER_EMPTY));
    }
}
