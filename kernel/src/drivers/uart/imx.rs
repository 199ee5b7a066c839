//! The i.MX UART (`fsl,imx6q-uart`, `fsl,imx21-uart`, `fsl,imx53-uart`): the console of i.MX 8M
//! Mini, Nano, Plus and Quad boards, whose nodes list the SoC's own string first and
//! `fsl,imx6q-uart` second.
//!
//! As Linux's drivers/tty/serial/imx_earlycon.c does (`imx_uart_console_early_putchar`): wait
//! while UTS.TXFULL is set, write the byte to UTXD. A byte is waiting when USR2.RDR is set; it is
//! the low eight bits of URXD. The clocks, pins and baud rate are the loader's.
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::registers::{ReadOnly, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

use super::{Patience, Serial};

register_bitfields! [u32,
    /// UART status register 2.
    USR2 [
        /// Receive data ready.
        RDR OFFSET(0) NUMBITS(1) [],
        /// Transmitter complete: FIFO and shift register empty.
        TXDC OFFSET(3) NUMBITS(1) []
    ],
    /// UART test register (on every i.MX after the i.MX1 at 0xb4).
    UTS [
        TXFULL OFFSET(4) NUMBITS(1) []
    ]
];

register_structs! {
    /// The i.MX UART's registers that the driver uses.
    pub Registers {
        (0x00 => urxd: ReadOnly<u32>),
        (0x04 => _reserved0),
        (0x40 => utxd: WriteOnly<u32>),
        (0x44 => _reserved1),
        (0x98 => usr2: ReadOnly<u32, USR2::Register>),
        (0x9c => _reserved2),
        (0xb4 => uts: ReadOnly<u32, UTS::Register>),
        (0xb8 => @END),
    }
}

/// An i.MX UART whose registers are mapped at a known virtual address.
pub struct Imx {
    base: *const Registers,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for Imx {}

impl Imx {
    /// # Safety
    /// `base` must be the virtual address of an i.MX UART register block, mapped as device memory
    /// for as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers, patience: Patience::new() }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped i.MX UART register block.
        unsafe { &*self.base }
    }
}

impl Serial for Imx {
    fn put_byte(&self, byte: u8) {
        if self.patience.wait(|| !self.regs().uts.is_set(UTS::TXFULL)) {
            self.regs().utxd.set(u32::from(byte));
        }
    }

    fn get_byte(&self) -> Option<u8> {
        if self.patience.is_dead() || !self.regs().usr2.is_set(USR2::RDR) {
            return None;
        }
        Some(self.regs().urxd.get() as u8)
    }

    fn flush(&self) {
        self.patience.wait(|| self.regs().usr2.is_set(USR2::TXDC));
    }
}
