//! The Qualcomm GENI serial engine as the debug UART (`qcom,geni-debug-uart`): the console of
//! Snapdragon 845 and later boards and laptops (SDM845, SC7180, SC8280XP, SM8x50). Also a
//! high-speed GENI UART (`qcom,geni-uart`) that a tree names as its console (Sony's SDM845
//! phones): the same serial engine and primary-sequencer commands in Linux's driver, usable
//! this way as long as the loader that printed on it left it in FIFO mode (Linux switches a
//! high-speed UART to DMA only when it opens it).
//!
//! Transmit-only, relying on the loader's set-up, as Linux's earlycon does
//! (drivers/tty/serial/qcom_geni_serial.c, `qcom_geni_serial_earlycon_write` and
//! `__qcom_geni_serial_console_write`): the serial engine is already loaded with the UART
//! protocol, clocked, pinned and set to a baud rate by the boot firmware. A transfer is a
//! primary-sequencer command: the length goes to SE_UART_TX_TRANS_LEN, `UART_START_TX` to
//! SE_GENI_M_CMD0, the bytes to the TX FIFO, and the command is done when SE_GENI_M_IRQ_STATUS
//! shows M_CMD_DONE, which is then cleared. This driver sends one byte per command (a FIFO word
//! holding one byte, as the console does with its one-byte packing), so the packing the loader
//! set does not matter. Receiving would need the secondary sequencer armed and the RX FIFO's
//! word count decoded: not done, so a GENI console is output-only here.
use tock_registers::interfaces::{Readable, Writeable};
use tock_registers::registers::{ReadOnly, WriteOnly};
use tock_registers::{register_bitfields, register_structs};

use super::{Patience, Serial};

register_bitfields! [u32,
    /// SE_GENI_STATUS.
    GENI_STATUS [
        /// A primary-sequencer command is running.
        M_GENI_CMD_ACTIVE OFFSET(0) NUMBITS(1) []
    ],
    /// SE_GENI_M_IRQ_STATUS and SE_GENI_M_IRQ_CLEAR.
    M_IRQ [
        M_CMD_DONE OFFSET(0) NUMBITS(1) [],
        M_TX_FIFO_WATERMARK OFFSET(30) NUMBITS(1) []
    ],
    /// SE_GENI_M_CMD0.
    M_CMD0 [
        OPCODE OFFSET(27) NUMBITS(5) [
            UartStartTx = 1
        ]
    ]
];

register_structs! {
    /// The GENI serial engine's registers that the driver uses.
    pub Registers {
        (0x000 => _reserved0),
        (0x040 => geni_status: ReadOnly<u32, GENI_STATUS::Register>),
        (0x044 => _reserved1),
        (0x270 => uart_tx_trans_len: WriteOnly<u32>),
        (0x274 => _reserved2),
        (0x600 => m_cmd0: WriteOnly<u32, M_CMD0::Register>),
        (0x604 => _reserved3),
        (0x610 => m_irq_status: ReadOnly<u32, M_IRQ::Register>),
        (0x614 => _reserved4),
        (0x618 => m_irq_clear: WriteOnly<u32, M_IRQ::Register>),
        (0x61c => _reserved5),
        (0x700 => tx_fifo: WriteOnly<u32>),
        (0x704 => @END),
    }
}

/// A GENI UART whose registers are mapped at a known virtual address.
pub struct QcomGeni {
    base: *const Registers,
    patience: Patience,
}

// SAFETY: the register block is device memory; callers serialise use through the console lock.
unsafe impl Send for QcomGeni {}

impl QcomGeni {
    /// # Safety
    /// `base` must be the virtual address of a GENI serial engine's registers, set up as a UART
    /// by the loader, mapped as device memory for as long as the driver is used, and not used by
    /// anything else.
    pub const unsafe fn new(base: u64) -> Self {
        Self { base: base as *const Registers, patience: Patience::new() }
    }

    fn regs(&self) -> &Registers {
        // SAFETY: `new`'s contract: `base` is a mapped GENI register block.
        unsafe { &*self.base }
    }
}

impl Serial for QcomGeni {
    fn put_byte(&self, byte: u8) {
        let regs = self.regs();
        // The loader's (or the previous byte's) command must be finished first.
        if !self.patience.wait(|| !regs.geni_status.is_set(GENI_STATUS::M_GENI_CMD_ACTIVE)) {
            return;
        }
        regs.uart_tx_trans_len.set(1);
        regs.m_cmd0.write(M_CMD0::OPCODE::UartStartTx);
        regs.tx_fifo.set(u32::from(byte));
        if self.patience.wait(|| regs.m_irq_status.is_set(M_IRQ::M_CMD_DONE)) {
            regs.m_irq_clear.write(M_IRQ::M_CMD_DONE::SET + M_IRQ::M_TX_FIFO_WATERMARK::SET);
        }
    }

    fn get_byte(&self) -> Option<u8> {
        None
    }

    fn flush(&self) {
        // Each byte's command has completed before `put_byte` returns.
        self.patience.wait(|| !self.regs().geni_status.is_set(GENI_STATUS::M_GENI_CMD_ACTIVE));
    }
}
