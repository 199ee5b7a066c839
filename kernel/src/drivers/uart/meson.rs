//! The Amlogic Meson UART (`amlogic,meson-gx-uart`, `amlogic,meson-ao-uart`, ...): the console
//! of Meson GX, G12 and later boards (Odroid C2/N2, Khadas VIM, Libre Computer).
//!
//! As Linux's drivers/tty/serial/meson_uart.c earlycon does (`meson_serial_early_console_setup`
//! enables the transmit engine, `meson_serial_port_write` waits while the transmit FIFO is
//! full, then writes the write FIFO): the transmitter (and receiver) enable bits are set, the
//! baud rate is the loader's. A byte is waiting when STATUS.RX_EMPTY is clear.
use tock_registers::interfaces::{ReadWriteable, Readable, Writeable};
use tock_registers::registers::{ReadOnly, ReadWrite, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

use super::{Patience, Serial};

register_bitfields! [u32,
    /// AML_UART_CONTROL.
    CONTROL [
        TX_EN OFFSET(12) NUMBITS(1) [],
        RX_EN OFFSET(13) NUMBITS(1) []
    ],
    /// AML_UART_STATUS.
    STATUS [
        RX_EMPTY OFFSET(20) NUMBITS(1) [],
        TX_FULL OFFSET(21) NUMBITS(1) [],
        TX_EMPTY OFFSET(22) NUMBITS(1) []
    ]
];

register_structs! {
    /// The Meson UART's registers.
    pub Registers {
        (0x00 => wfifo: WriteOnly<u32>),
        (0x04 => rfifo: ReadOnly<u32>),
        (0x08 => control: ReadWrite<u32, CONTROL::Register>),
        (0x0c => status: ReadOnly<u32, STATUS::Register>),
        (0x10 => misc: ReadWrite<u32>),
        (0x14 => reg5: ReadWrite<u32>),
        (0x18 => @END),
    }
}

/// A Meson UART whose registers are mapped at a known virtual address.
pub struct Meson {
    base: *const Registers,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for Meson {}

impl Meson {
    /// # Safety
    /// `base` must be the virtual address of a Meson UART register block, mapped as device memory
    /// for as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers, patience: Patience::new() }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped Meson UART register block.
        unsafe { &*self.base }
    }

    /// Sets the transmit and receive enables (only if one is clear: the rest of CONTROL is the
    /// loader's).
    pub fn enable(&self) {
        let control = self.regs().control.extract();
        if !control.is_set(CONTROL::TX_EN) || !control.is_set(CONTROL::RX_EN) {
            self.regs().control.modify(CONTROL::TX_EN::SET + CONTROL::RX_EN::SET);
        }
    }
}

impl Serial for Meson {
    fn put_byte(&self, byte: u8) {
        if self.patience.wait(|| !self.regs().status.is_set(STATUS::TX_FULL)) {
            self.regs().wfifo.set(u32::from(byte));
        }
    }

    fn get_byte(&self) -> Option<u8> {
        if self.patience.is_dead() || self.regs().status.is_set(STATUS::RX_EMPTY) {
            return None;
        }
        Some(self.regs().rfifo.get() as u8)
    }

    fn flush(&self) {
        self.patience.wait(|| self.regs().status.is_set(STATUS::TX_EMPTY));
    }
}
