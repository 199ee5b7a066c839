//! Apple's interrupt controller, AIC (`apple,aic`: M1) and AIC2 (`apple,aic2`: M1 Pro/Max, M2),
//! at the register level: masking, acknowledge through the event register, end of interrupt,
//! and AIC1's register IPIs. Host-tested against a register model (tools/uart-check, which
//! compiles this file too); `apple_intc` puts it behind `intc`.
//!
//! The AIC itself only carries device interrupts (and AIC1's slower register IPIs): on Apple
//! silicon the architected timer and the fast IPIs arrive as FIQs, not IRQs (Linux
//! drivers/irqchip/irq-apple-aic.c, `aic_handle_fiq`), which `apple_fiq` handles.
//!
//! Register map as Linux's driver has it:
//! - AIC1: INFO 0x0004 (IRQ count in bits 15:0), EVENT 0x2004, IPI_SEND 0x2008, IPI_ACK 0x200c,
//!   IPI_MASK_SET 0x2024, IPI_MASK_CLR 0x2028, TARGET_CPU 0x3000 (one word per IRQ), then for
//!   1024 IRQs SW_SET 0x4000, SW_CLR 0x4080, MASK_SET 0x4100, MASK_CLR 0x4180 (one bit per IRQ).
//! - AIC2: INFO1 0x0004 (IRQ count), INFO3 0x000c (the IRQ space, bits 15:0), CONFIG 0x0014
//!   (bit 0 enable); from 0x2000 IRQ_CFG (one word per IRQ of the space), then SW_SET, SW_CLR,
//!   MASK_SET, MASK_CLR, each a bit per IRQ; the event register is the tree's second `reg`.
//! - EVENT: type in bits 23:16 (1 IRQ, 4 IPI), number in 15:0; reading it acknowledges and masks
//!   the interrupt, so the end of an IRQ is unmasking it (`aic_irq_eoi`).

/// Which AIC.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Version {
    /// `apple,aic` (M1).
    Aic1,
    /// `apple,aic2` (M1 Pro/Max/Ultra, M2).
    Aic2,
}

/// What an acknowledge returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// Nothing pending.
    None,
    /// Hardware interrupt `n` (now masked until [`Aic::end_of_interrupt`]).
    Irq(u32),
    /// AIC1's "other" IPI (now masked until [`Aic::end_of_interrupt`]).
    Ipi,
    /// Something this driver does not handle (type, number), left as it is.
    Other(u32, u32),
}

const AIC_INFO: u64 = 0x0004;
const AIC_EVENT: u64 = 0x2004;
const AIC_IPI_SEND: u64 = 0x2008;
const AIC_IPI_ACK: u64 = 0x200c;
const AIC_IPI_MASK_SET: u64 = 0x2024;
const AIC_IPI_MASK_CLR: u64 = 0x2028;
const AIC_TARGET_CPU: u64 = 0x3000;
/// AIC1's IRQ space: TARGET_CPU has a word for each.
const AIC_MAX_IRQ: u32 = 0x400;
const AIC_IPI_OTHER: u32 = 1 << 0;
const AIC_IPI_SELF: u32 = 1 << 31;
const AIC2_INFO1: u64 = 0x0004;
const AIC2_INFO3: u64 = 0x000c;
const AIC2_CONFIG: u64 = 0x0014;
const AIC2_CONFIG_ENABLE: u32 = 1 << 0;
const AIC2_IRQ_CFG: u64 = 0x2000;
const EVENT_TYPE_IRQ: u32 = 1;
const EVENT_TYPE_IPI: u32 = 4;
const EVENT_IPI_OTHER: u32 = 1;

/// An AIC whose registers are mapped at known virtual addresses.
pub struct Aic {
    base: u64,
    event: u64,
    version: Version,
    /// IRQs implemented.
    irqs: u32,
    mask_set: u64,
    mask_clr: u64,
    sw_clr: u64,
    /// Bytes from `base` through the last MASK_CLR word.
    span: u64,
}

// SAFETY: the registers are device memory; callers serialise set-up, and the per-CPU registers
// (EVENT, IPI_*) are banked by the hardware for the CPU that touches them.
unsafe impl Send for Aic {}
// SAFETY: as above: every access is a single volatile register read or write.
unsafe impl Sync for Aic {}

impl Aic {
    /// # Safety
    /// `base` must map the AIC's register block as device memory, at least through its info
    /// registers (and through [`Aic::span`] before any other method is called), and `event`
    /// its event register (AIC1: `base + 0x2004`; AIC2: the tree's second `reg`), for as long as
    /// the driver is used.
    pub unsafe fn new(version: Version, base: u64, event: u64) -> Self {
        // SAFETY: the caller's contract: the info registers are inside the mapped block.
        let read = |off: u64| unsafe { ((base + off) as *const u32).read_volatile() };
        let (irqs, space, start) = match version {
            Version::Aic1 => ((read(AIC_INFO) & 0xffff).min(AIC_MAX_IRQ), AIC_MAX_IRQ, AIC_TARGET_CPU),
            Version::Aic2 => {
                let space = read(AIC2_INFO3) & 0xffff;
                ((read(AIC2_INFO1) & 0xffff).min(space), space, AIC2_IRQ_CFG)
            }
        };
        // One config word per IRQ of the space, then bit arrays of space / 32 words each.
        let words = u64::from(space.div_ceil(32)) * 4;
        let sw_set = start + u64::from(space) * 4;
        let sw_clr = sw_set + words;
        let mask_set = sw_clr + words;
        let mask_clr = mask_set + words;
        Self { base, event, version, irqs, mask_set, mask_clr, sw_clr, span: mask_clr + words }
    }

    /// Bytes of registers from the base that [`Aic::init`] and the masks reach, as the info
    /// registers size them: the caller checks this against what it mapped before `init`.
    pub fn span(&self) -> u64 {
        self.span
    }

    /// The AIC1 layout's event register for `base` (AIC2 has its own `reg`).
    pub const fn aic1_event(base: u64) -> u64 {
        base + AIC_EVENT
    }

    fn write(&self, off: u64, value: u32) {
        // SAFETY: `new`'s contract: every offset used is inside the mapped block.
        unsafe { ((self.base + off) as *mut u32).write_volatile(value) }
    }

    fn read(&self, off: u64) -> u32 {
        // SAFETY: as for `write`.
        unsafe { ((self.base + off) as *const u32).read_volatile() }
    }

    /// IRQs the hardware implements.
    #[allow(
        dead_code,
        reason = "the kernel routes no AIC device interrupt yet; the register-model test reads it"
    )]
    pub fn irqs(&self) -> u32 {
        self.irqs
    }

    /// Masks every IRQ, clears software-raised ones, routes each to CPU 0 (AIC1), and enables
    /// the controller (AIC2), as `aic_of_ic_init` does.
    pub fn init(&self) {
        for word in 0..u64::from(self.irqs.div_ceil(32)) {
            self.write(self.mask_set + word * 4, u32::MAX);
            self.write(self.sw_clr + word * 4, u32::MAX);
        }
        match self.version {
            Version::Aic1 => {
                for irq in 0..u64::from(self.irqs) {
                    self.write(AIC_TARGET_CPU + irq * 4, 1);
                }
            }
            Version::Aic2 => self.write(AIC2_CONFIG, self.read(AIC2_CONFIG) | AIC2_CONFIG_ENABLE),
        }
    }

    /// This CPU's IPIs (AIC1): both masked and acknowledged, then "other" unmasked
    /// (`aic_init_cpu` without fast IPIs).
    pub fn init_cpu(&self) {
        if self.version == Version::Aic1 {
            self.write(AIC_IPI_MASK_SET, AIC_IPI_SELF | AIC_IPI_OTHER);
            self.write(AIC_IPI_ACK, AIC_IPI_SELF | AIC_IPI_OTHER);
            self.write(AIC_IPI_MASK_CLR, AIC_IPI_OTHER);
        }
    }

    /// Unmasks IRQ `irq`; false if the hardware has no such IRQ.
    pub fn unmask(&self, irq: u32) -> bool {
        if irq >= self.irqs {
            return false;
        }
        self.write(self.mask_clr + u64::from(irq / 32) * 4, 1 << (irq % 32));
        true
    }

    /// Masks IRQ `irq` (ignored past the hardware's count).
    #[allow(
        dead_code,
        reason = "the kernel routes no AIC device interrupt yet; the register-model test uses it"
    )]
    pub fn mask(&self, irq: u32) {
        if irq < self.irqs {
            self.write(self.mask_set + u64::from(irq / 32) * 4, 1 << (irq % 32));
        }
    }

    /// Reads this CPU's event register: the highest-priority pending interrupt, acknowledged
    /// and masked by the read. An AIC1 IPI is also acknowledged in IPI_ACK.
    pub fn acknowledge(&self) -> Event {
        // SAFETY: `new`'s contract: `event` maps the event register.
        let event = unsafe { (self.event as *const u32).read_volatile() };
        let (kind, number) = ((event >> 16) & 0xff, event & 0xffff);
        match (kind, number) {
            _ if event == 0 => Event::None,
            (EVENT_TYPE_IRQ, n) if n < self.irqs => Event::Irq(n),
            (EVENT_TYPE_IPI, EVENT_IPI_OTHER) if self.version == Version::Aic1 => {
                self.write(AIC_IPI_ACK, AIC_IPI_OTHER);
                Event::Ipi
            }
            (kind, number) => Event::Other(kind, number),
        }
    }

    /// Ends an interrupt [`Aic::acknowledge`] returned: unmasks it again.
    pub fn end_of_interrupt(&self, event: Event) {
        match event {
            Event::Irq(n) => {
                self.unmask(n);
            }
            Event::Ipi => self.write(AIC_IPI_MASK_CLR, AIC_IPI_OTHER),
            Event::None | Event::Other(..) => {}
        }
    }

    /// Raises AIC1's "other" IPI on CPU `cpu` (0..31, the AIC's CPU number); false on AIC2, whose
    /// IPIs are fast IPIs through system registers, or for a CPU number past 31.
    pub fn send_ipi(&self, cpu: u32) -> bool {
        if self.version != Version::Aic1 || cpu >= 32 {
            return false;
        }
        self.write(AIC_IPI_SEND, 1 << cpu);
        true
    }
}
