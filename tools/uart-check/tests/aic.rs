//! The Apple AIC driver against a register model: a zeroed block of host memory the size of the
//! AIC's register space. Set-up must mask and route exactly the implemented IRQs at the offsets
//! each version's layout gives, an event must be decoded and ended by unmasking the same IRQ,
//! and IPIs must use AIC1's registers only.
use std::alloc::{Layout, alloc_zeroed, dealloc};

use uart_check::aic::{Aic, Event, Version};

const SIZE: usize = 0x8000;

struct Model {
    ptr: *mut u8,
}

impl Model {
    fn new() -> Self {
        // SAFETY: a non-zero size.
        let ptr = unsafe { alloc_zeroed(Layout::from_size_align(SIZE, 0x4000).unwrap()) };
        assert!(!ptr.is_null());
        Self { ptr }
    }

    fn base(&self) -> u64 {
        self.ptr as u64
    }

    fn r32(&self, off: usize) -> u32 {
        assert!(off + 4 <= SIZE);
        // SAFETY: inside the block, aligned (offsets are multiples of 4).
        unsafe { (self.ptr.add(off) as *const u32).read_volatile() }
    }

    fn w32(&self, off: usize, v: u32) {
        assert!(off + 4 <= SIZE);
        // SAFETY: as for `r32`.
        unsafe { (self.ptr.add(off) as *mut u32).write_volatile(v) }
    }
}

impl Drop for Model {
    fn drop(&mut self) {
        // SAFETY: allocated in `new` with this layout.
        unsafe { dealloc(self.ptr, Layout::from_size_align(SIZE, 0x4000).unwrap()) }
    }
}

fn aic1(m: &Model, irqs: u32) -> Aic {
    m.w32(0x0004, 0x00a0_0000 | irqs); // AIC_INFO: the upper bits are not the count
    // SAFETY: the model covers the AIC1 register block, and its event register.
    unsafe { Aic::new(Version::Aic1, m.base(), Aic::aic1_event(m.base())) }
}

#[test]
fn aic1_set_up_masks_and_routes_exactly_the_implemented_irqs() {
    let m = Model::new();
    let aic = aic1(&m, 576);
    assert_eq!(aic.irqs(), 576);
    assert_eq!(aic.span(), 0x4200, "through MASK_CLR's 32 words");
    aic.init();
    for word in 0..18 {
        assert_eq!(m.r32(0x4100 + word * 4), u32::MAX, "MASK_SET word {word}");
        assert_eq!(m.r32(0x4080 + word * 4), u32::MAX, "SW_CLR word {word}");
    }
    assert_eq!(m.r32(0x4100 + 18 * 4), 0, "no mask word past the implemented IRQs");
    assert_eq!((m.r32(0x3000), m.r32(0x3000 + 575 * 4)), (1, 1), "TARGET_CPU: CPU 0");
    assert_eq!(m.r32(0x3000 + 576 * 4), 0);
    assert_eq!(m.r32(0x4000), 0, "SW_SET untouched");
}

#[test]
fn aic1_events_are_decoded_and_ended_by_unmasking() {
    let m = Model::new();
    let aic = aic1(&m, 576);
    assert_eq!(aic.acknowledge(), Event::None);
    m.w32(0x2004, (1 << 16) | 33); // EVENT: IRQ 33
    assert_eq!(aic.acknowledge(), Event::Irq(33));
    aic.end_of_interrupt(Event::Irq(33));
    assert_eq!(m.r32(0x4184), 1 << 1, "MASK_CLR word 1, bit 1");
    // An IRQ number past the hardware's is not taken for one.
    m.w32(0x2004, (1 << 16) | 700);
    assert_eq!(aic.acknowledge(), Event::Other(1, 700));
    assert!(!aic.unmask(576));
    // The "other" IPI: acknowledged in IPI_ACK, unmasked at the end.
    m.w32(0x2004, (4 << 16) | 1);
    assert_eq!(aic.acknowledge(), Event::Ipi);
    assert_eq!(m.r32(0x200c), 1, "IPI_ACK: other");
    aic.end_of_interrupt(Event::Ipi);
    assert_eq!(m.r32(0x2028), 1, "IPI_MASK_CLR: other");
    aic.mask(40);
    assert_eq!(m.r32(0x4104), 1 << 8, "MASK_SET word 1, bit 8");
}

#[test]
fn aic1_ipis_go_through_its_registers() {
    let m = Model::new();
    let aic = aic1(&m, 64);
    aic.init_cpu();
    assert_eq!(m.r32(0x2024), (1 << 31) | 1, "IPI_MASK_SET: self and other");
    assert_eq!(m.r32(0x200c), (1 << 31) | 1, "IPI_ACK: self and other");
    assert_eq!(m.r32(0x2028), 1, "IPI_MASK_CLR: other");
    assert!(aic.send_ipi(3));
    assert_eq!(m.r32(0x2008), 1 << 3, "IPI_SEND: CPU 3");
    assert!(!aic.send_ipi(32));
}

#[test]
fn aic2_layout_follows_its_irq_space_and_has_no_register_ipis() {
    let m = Model::new();
    let events = Model::new();
    m.w32(0x0004, 0x0300_0040); // AIC2_INFO1: 64 IRQs (die bits above)
    m.w32(0x000c, 0x0100_0080); // AIC2_INFO3: an IRQ space of 128
    m.w32(0x0014, 1 << 28); // AIC2_CONFIG: the loader's PREFER_PCPU stays
    // SAFETY: the models cover the AIC2 block and its event register.
    let aic = unsafe { Aic::new(Version::Aic2, m.base(), events.base()) };
    assert_eq!(aic.irqs(), 64);
    assert_eq!(aic.span(), 0x2240, "MASK_CLR at 0x2230, four words");
    aic.init();
    // IRQ_CFG: 128 words from 0x2000; then SW_SET 0x2200, SW_CLR 0x2210, MASK_SET 0x2220,
    // MASK_CLR 0x2230 (four words each).
    assert_eq!((m.r32(0x2220), m.r32(0x2224), m.r32(0x2228)), (u32::MAX, u32::MAX, 0));
    assert_eq!((m.r32(0x2210), m.r32(0x2214)), (u32::MAX, u32::MAX));
    assert_eq!(m.r32(0x0014), (1 << 28) | 1, "AIC2_CONFIG: enabled");
    assert_eq!(m.r32(0x3000), 0, "no AIC1 TARGET_CPU writes");
    events.w32(0, (1 << 16) | 40);
    assert_eq!(aic.acknowledge(), Event::Irq(40));
    aic.end_of_interrupt(Event::Irq(40));
    assert_eq!(m.r32(0x2234), 1 << 8, "MASK_CLR word 1, bit 8");
    events.w32(0, (4 << 16) | 1);
    assert_eq!(aic.acknowledge(), Event::Other(4, 1), "AIC2 has no register IPIs");
    assert!(!aic.send_ipi(1));
    aic.init_cpu();
    assert_eq!(m.r32(0x2024), 0);
}
