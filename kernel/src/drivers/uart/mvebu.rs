//! The Marvell Armada 3700 standard UART (`marvell,armada-3700-uart`): the console of the
//! ESPRESSObin, Turris MOX and uDPU boards.
//!
//! As Linux's drivers/tty/serial/mvebu-uart.c earlycon does (`mvebu_uart_putc`): wait while
//! STAT.TX_FIFO_FUL is set, write TSH. A byte is waiting when STAT.STD_RX_RDY is set; it is in
//! RBR. The baud rate is the loader's. (The second, "extended" UART has another layout and is not
//! driven.)
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::registers::{ReadOnly, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

use super::{Patience, Serial};

register_bitfields! [u32,
    /// UART_STAT.
    STAT [
        STD_RX_RDY OFFSET(4) NUMBITS(1) [],
        TX_EMP OFFSET(6) NUMBITS(1) [],
        TX_FIFO_FUL OFFSET(11) NUMBITS(1) []
    ]
];

register_structs! {
    /// The standard UART's registers that the driver uses.
    pub Registers {
        (0x00 => rbr: ReadOnly<u32>),
        (0x04 => tsh: WriteOnly<u32>),
        (0x08 => _reserved0),
        (0x0c => stat: ReadOnly<u32, STAT::Register>),
        (0x10 => @END),
    }
}

/// An Armada 3700 UART whose registers are mapped at a known virtual address.
pub struct Mvebu {
    base: *const Registers,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for Mvebu {}

impl Mvebu {
    /// # Safety
    /// `base` must be the virtual address of an Armada 3700 standard UART's registers, mapped as
    /// device memory for as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers, patience: Patience::new() }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped register block.
        unsafe { &*self.base }
    }
}

impl Serial for Mvebu {
    fn put_byte(&self, byte: u8) {
        if self.patience.wait(|| !self.regs().stat.is_set(STAT::TX_FIFO_FUL)) {
            self.regs().tsh.set(u32::from(byte));
        }
    }

    fn get_byte(&self) -> Option<u8> {
        if self.patience.is_dead() || !self.regs().stat.is_set(STAT::STD_RX_RDY) {
            return None;
        }
        Some(self.regs().rbr.get() as u8)
    }

    fn flush(&self) {
        self.patience.wait(|| self.regs().stat.is_set(STAT::TX_EMP));
    }
}
