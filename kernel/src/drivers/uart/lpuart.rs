//! NXP's LPUART with 32-bit registers (`fsl,imx7ulp-lpuart`, `fsl,imx8qxp-lpuart`,
//! `fsl,imx8ulp-lpuart`, `fsl,ls1028a-lpuart`): the console of i.MX 8QXP/8QM, 8ULP and 93 boards.
//!
//! As Linux's drivers/tty/serial/fsl_lpuart.c earlycon does (`lpuart32_console_putchar`: wait
//! for STAT.TDRE, write DATA). On the i.MX parts the registers below start 0x10 past the node's
//! `reg` (`lpuart32_imx_early_console_setup` adds `IMX_REG_OFF`); the caller passes the address
//! with that offset applied (`UartConfig::reg_offset`). A byte is waiting when STAT.RDRF is set.
//! Clocks, pins and baud rate are the loader's. (The big-endian Layerscape LS1021A variant is
//! not driven.)
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::registers::{ReadOnly, ReadWrite};
use tock_registers::{register_bitfields, register_structs};

use super::{Patience, Serial};

register_bitfields! [u32,
    /// Status register.
    STAT [
        /// Receive data register full.
        RDRF OFFSET(21) NUMBITS(1) [],
        /// Transmission complete.
        TC OFFSET(22) NUMBITS(1) [],
        /// Transmit data register empty: room for a byte.
        TDRE OFFSET(23) NUMBITS(1) []
    ]
];

register_structs! {
    /// The LPUART's registers, from BAUD.
    pub Registers {
        (0x00 => baud: ReadOnly<u32>),
        (0x04 => stat: ReadOnly<u32, STAT::Register>),
        (0x08 => ctrl: ReadOnly<u32>),
        (0x0c => data: ReadWrite<u32>),
        (0x10 => @END),
    }
}

/// An LPUART whose registers are mapped at a known virtual address.
pub struct Lpuart {
    base: *const Registers,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for Lpuart {}

impl Lpuart {
    /// # Safety
    /// `base` must be the virtual address of an LPUART's BAUD register (past the i.MX parts'
    /// identification words), mapped as device memory for as long as the driver is used, and not
    /// used by anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers, patience: Patience::new() }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped LPUART register block.
        unsafe { &*self.base }
    }
}

impl Serial for Lpuart {
    fn put_byte(&self, byte: u8) {
        if self.patience.wait(|| self.regs().stat.is_set(STAT::TDRE)) {
            self.regs().data.set(u32::from(byte));
        }
    }

    fn get_byte(&self) -> Option<u8> {
        if self.patience.is_dead() || !self.regs().stat.is_set(STAT::RDRF) {
            return None;
        }
        Some(self.regs().data.get() as u8)
    }

    fn flush(&self) {
        self.patience.wait(|| self.regs().stat.is_set(STAT::TC));
    }
}
