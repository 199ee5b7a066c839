//! The BCM2835 auxiliary "mini UART" (BCM2835 ARM Peripherals, section 2.2), polled transmit only:
//! the console of the Raspberry Pi 3 and 4 device trees (`serial1`, `brcm,bcm2835-aux-uart`, at
//! CPU address 0x3f21_5040 on a Pi 3 and 0xfe21_5040 on a Pi 4), which the firmware routes to the
//! GPIO 14/15 header pins.
//!
//! What real hardware needs, and why the driver does not do it itself:
//! - the AUX block's enable bit (AUX_ENABLES bit 0, at 0x...21_5004): while it is clear the mini
//!   UART's registers read as zero and ignore writes. The firmware sets it, and programs 115200
//!   8N1, when `config.txt` has `enable_uart=1` (see `scripts/sdcard`).
//! - a fixed VPU core clock: the baud-rate divisor counts the core clock, so the core clock must not
//!   scale. `enable_uart=1` fixes it (250 MHz on a Pi 3); so does `core_freq=250`.
//!
//! The baud rate is therefore left as the firmware set it: this kernel does not know the core clock,
//! and a wrong divisor would turn a working console into noise. Only the transmitter enable is
//! ensured. QEMU's model (`-serial` #2 of `raspi3b`) works without any of this.
//!
//! A mini UART that never reports room for a byte (AUX disabled, or no UART at all) is given up
//! after a bounded wait: output is then dropped rather than the kernel hanging in the console.

use core::sync::atomic::{AtomicBool, Ordering};

use tock_registers::interfaces::{ReadWriteable, Readable, Writeable};
use tock_registers::register_bitfields;
use tock_registers::register_structs;
use tock_registers::registers::{ReadOnly, ReadWrite};

register_bitfields! [u32,
    LSR [
        /// The receive FIFO holds at least one byte.
        DATA_READY OFFSET(0) NUMBITS(1) [],
        /// The transmit FIFO can take at least one byte.
        TX_EMPTY OFFSET(5) NUMBITS(1) [],
        /// The transmit FIFO is empty and the transmitter idle.
        TX_IDLE OFFSET(6) NUMBITS(1) []
    ],
    CNTL [
        RX_ENABLE OFFSET(0) NUMBITS(1) [],
        TX_ENABLE OFFSET(1) NUMBITS(1) []
    ]
];

register_structs! {
    /// The mini UART's registers, from AUX_MU_IO_REG (the device tree's `reg`, AUX base + 0x40).
    pub Registers {
        (0x00 => io: ReadWrite<u32>),
        (0x04 => ier: ReadWrite<u32>),
        (0x08 => iir: ReadWrite<u32>),
        (0x0c => lcr: ReadWrite<u32>),
        (0x10 => mcr: ReadWrite<u32>),
        (0x14 => lsr: ReadOnly<u32, LSR::Register>),
        (0x18 => msr: ReadOnly<u32>),
        (0x1c => scratch: ReadWrite<u32>),
        (0x20 => cntl: ReadWrite<u32, CNTL::Register>),
        (0x24 => stat: ReadOnly<u32>),
        (0x28 => baud: ReadWrite<u32>),
        (0x2c => @END),
    }
}

/// Polls before a mini UART that never has room is given up (about a millisecond or more: far
/// longer than one byte takes at 115200 baud, 87 us).
const SPIN_LIMIT: u32 = 1_000_000;

/// A mini UART whose registers are mapped at a known virtual address.
pub struct MiniUart {
    base: *const Registers,
    dead: AtomicBool,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for MiniUart {}

impl MiniUart {
    /// # Safety
    /// `base` must be the virtual address of a mini UART register block (AUX_MU_IO_REG), mapped as
    /// device memory for as long as the driver is used, and not used by anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers, dead: AtomicBool::new(false) }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped mini UART register block.
        unsafe { &*self.base }
    }

    /// Makes sure the transmitter and receiver are enabled, without touching the baud rate or
    /// line settings.
    pub fn enable_transmit(&self) {
        if !self.regs().cntl.is_set(CNTL::TX_ENABLE) || !self.regs().cntl.is_set(CNTL::RX_ENABLE) {
            self.regs().cntl.modify(CNTL::TX_ENABLE::SET + CNTL::RX_ENABLE::SET);
        }
    }

    /// A received byte, if one is waiting.
    pub fn get_byte(&self) -> Option<u8> {
        if self.dead.load(Ordering::Relaxed) || !self.regs().lsr.is_set(LSR::DATA_READY) {
            None
        } else {
            Some(self.regs().io.get() as u8)
        }
    }

    /// Sends one byte, waiting (boundedly) for room in the transmit FIFO.
    pub fn put_byte(&self, byte: u8) {
        if self.dead.load(Ordering::Relaxed) {
            return;
        }
        let mut spins = 0;
        while !self.regs().lsr.is_set(LSR::TX_EMPTY) {
            spins += 1;
            if spins == SPIN_LIMIT {
                self.dead.store(true, Ordering::Relaxed);
                return;
            }
            core::hint::spin_loop();
        }
        self.regs().io.set(u32::from(byte));
    }

    /// Waits (boundedly) until every queued byte has left the UART.
    pub fn flush(&self) {
        let mut spins = 0;
        while !self.dead.load(Ordering::Relaxed)
            && !self.regs().lsr.is_set(LSR::TX_IDLE)
            && spins < SPIN_LIMIT
        {
            spins += 1;
            core::hint::spin_loop();
        }
    }
}

impl super::uart::Serial for MiniUart {
    fn put_byte(&self, byte: u8) {
        MiniUart::put_byte(self, byte);
    }

    fn get_byte(&self) -> Option<u8> {
        MiniUart::get_byte(self)
    }

    fn flush(&self) {
        MiniUart::flush(self);
    }
}
