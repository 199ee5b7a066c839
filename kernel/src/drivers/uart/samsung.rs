//! The Samsung UART layout: Exynos (`samsung,exynos4210-uart` and its successors) and Apple's
//! S5L (`apple,s5l-uart`), the console m1n1 hands over on Apple silicon.
//!
//! As Linux's drivers/tty/serial/samsung_tty.c earlycon does (`samsung_early_putc`): in FIFO mode
//! (UFCON bit 0) wait while UFSTAT's TX-full bit is set, otherwise wait for UTRSTAT.TXFE; then
//! write UTXH. The two layouts differ only in UFSTAT: Exynos (the S5PV210 layout) has RX count in
//! bits 7:0, RX full at bit 8 and TX full at bit 24; the S5L (the S3C2410 layout) has RX count in
//! bits 3:0, RX full at bit 8 and TX full at bit 9. A byte is waiting when the RX count or RX-full
//! bit says so (FIFO mode) or UTRSTAT.RXDR is set. Clocks, pins and baud rate are the loader's.
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::registers::{ReadOnly, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

use super::{Patience, Serial};

register_bitfields! [u32,
    /// UFCON (FIFO control).
    UFCON [
        FIFO_MODE OFFSET(0) NUMBITS(1) []
    ],
    /// UTRSTAT (transmit/receive status).
    UTRSTAT [
        /// Receive buffer data ready.
        RXDR OFFSET(0) NUMBITS(1) [],
        /// Transmit buffer empty.
        TXFE OFFSET(1) NUMBITS(1) [],
        /// Transmitter (buffer and shifter) empty.
        TXE OFFSET(2) NUMBITS(1) []
    ]
];

register_structs! {
    /// The Samsung UART's registers that the driver uses.
    pub Registers {
        (0x00 => _reserved0),
        (0x08 => ufcon: ReadOnly<u32, UFCON::Register>),
        (0x0c => _reserved1),
        (0x10 => utrstat: ReadOnly<u32, UTRSTAT::Register>),
        (0x14 => _reserved2),
        (0x18 => ufstat: ReadOnly<u32>),
        (0x1c => _reserved3),
        (0x20 => utxh: WriteOnly<u32>),
        (0x24 => urxh: ReadOnly<u32>),
        (0x28 => @END),
    }
}

/// Which UFSTAT layout.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Layout {
    /// Exynos 4210 and later (S5PV210 bits).
    Exynos,
    /// Apple S5L (S3C2410 bits).
    AppleS5l,
}

impl Layout {
    fn tx_full(self) -> u32 {
        match self {
            Self::Exynos => 1 << 24,
            Self::AppleS5l => 1 << 9,
        }
    }

    /// RX count mask and the RX-full bit.
    fn rx_waiting(self) -> u32 {
        match self {
            Self::Exynos => 0xff | (1 << 8),
            Self::AppleS5l => 0xf | (1 << 8),
        }
    }
}

/// A Samsung-layout UART whose registers are mapped at a known virtual address.
pub struct Samsung {
    base: *const Registers,
    layout: Layout,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for Samsung {}

impl Samsung {
    /// # Safety
    /// `base` must be the virtual address of a Samsung-layout UART register block, mapped as
    /// device memory for as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64, layout: Layout) -> Self {
        Self { base: base as *const Registers, layout, patience: Patience::new() }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped Samsung UART register block.
        unsafe { &*self.base }
    }

    fn fifo_mode(&self) -> bool {
        self.regs().ufcon.is_set(UFCON::FIFO_MODE)
    }
}

impl Serial for Samsung {
    fn put_byte(&self, byte: u8) {
        let room = || {
            if self.fifo_mode() {
                self.regs().ufstat.get() & self.layout.tx_full() == 0
            } else {
                self.regs().utrstat.is_set(UTRSTAT::TXFE)
            }
        };
        if self.patience.wait(room) {
            self.regs().utxh.set(u32::from(byte));
        }
    }

    fn get_byte(&self) -> Option<u8> {
        if self.patience.is_dead() {
            return None;
        }
        let waiting = if self.fifo_mode() {
            self.regs().ufstat.get() & self.layout.rx_waiting() != 0
        } else {
            self.regs().utrstat.is_set(UTRSTAT::RXDR)
        };
        waiting.then(|| self.regs().urxh.get() as u8)
    }

    fn flush(&self) {
        self.patience.wait(|| self.regs().utrstat.is_set(UTRSTAT::TXE));
    }
}
