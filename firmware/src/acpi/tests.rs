//! The ACPI reader and the tree made from it, against fixture tables shaped like the ones
//! QEMU `virt` builds for edk2 (hw/arm/virt-acpi-build.c), and corrupted copies of them.

extern crate std;
use std::vec::Vec;

use super::*;
use crate::acpi_dt;

/// Physical memory made of tables at fixed addresses.
#[derive(Clone)]
struct Mem(Vec<(u64, Vec<u8>)>);

impl PhysMem for Mem {
    fn read(&self, pa: u64, len: usize) -> Option<&[u8]> {
        self.0.iter().find_map(|(at, bytes)| {
            let off = pa.checked_sub(*at)? as usize;
            bytes.get(off..off.checked_add(len)?)
        })
    }
}

/// Fixes the checksum byte at `at` so the whole slice sums to 0.
fn fix(bytes: &mut [u8], at: usize) {
    bytes[at] = 0;
    let sum = bytes.iter().fold(0u8, |s, &b| s.wrapping_add(b));
    bytes[at] = 0u8.wrapping_sub(sum);
}

fn header(sig: &[u8; 4], body: &[u8]) -> Vec<u8> {
    let mut t = Vec::new();
    t.extend_from_slice(sig);
    t.extend_from_slice(&((36 + body.len()) as u32).to_le_bytes());
    t.push(2); // revision
    t.push(0); // checksum
    t.extend_from_slice(b"BOCHS ");
    t.extend_from_slice(b"BXPC    ");
    t.extend_from_slice(&1u32.to_le_bytes());
    t.extend_from_slice(b"BXPC");
    t.extend_from_slice(&1u32.to_le_bytes());
    t.extend_from_slice(body);
    fix(&mut t, 9);
    t
}

const RSDP: u64 = 0x5fe0_0000;
const XSDT: u64 = 0x5fe1_0000;
const FADT: u64 = 0x5fe2_0000;
const MADT: u64 = 0x5fe3_0000;
const GTDT: u64 = 0x5fe4_0000;
const SPCR: u64 = 0x5fe5_0000;

fn rsdp(xsdt: u64) -> Vec<u8> {
    let mut r = Vec::new();
    r.extend_from_slice(b"RSD PTR ");
    r.push(0);
    r.extend_from_slice(b"BOCHS ");
    r.push(2); // revision
    r.extend_from_slice(&0u32.to_le_bytes()); // RsdtAddress
    r.extend_from_slice(&36u32.to_le_bytes());
    r.extend_from_slice(&xsdt.to_le_bytes());
    r.extend_from_slice(&[0, 0, 0, 0]); // extended checksum, reserved
    let mut first = r[..20].to_vec();
    fix(&mut first, 8);
    r[8] = first[8];
    fix(&mut r, 32);
    r
}

fn fadt(arm_boot: u16) -> Vec<u8> {
    let mut body = std::vec![0u8; 276 - 36];
    body[129 - 36..131 - 36].copy_from_slice(&arm_boot.to_le_bytes());
    header(b"FACP", &body)
}

fn gicc(mpidr: u64, enabled: bool, len: u8) -> Vec<u8> {
    let mut e = std::vec![0u8; usize::from(len)];
    e[0] = 0x0b;
    e[1] = len;
    e[12] = u8::from(enabled);
    e[32..40].copy_from_slice(&0x0801_0000u64.to_le_bytes());
    if len >= 76 {
        e[68..76].copy_from_slice(&mpidr.to_le_bytes());
    }
    e
}

fn madt(version: u8, cpus: usize) -> Vec<u8> {
    let mut body = std::vec![0u8; 8];
    for i in 0..cpus {
        body.extend(gicc(i as u64, true, 80));
    }
    body.extend(gicc(0x100, false, 80)); // present but disabled: not a CPU to start
    let mut gicd = std::vec![0u8; 24];
    gicd[0] = 0x0c;
    gicd[1] = 24;
    gicd[8..16].copy_from_slice(&0x0800_0000u64.to_le_bytes());
    gicd[20] = version;
    body.extend(gicd);
    if version >= 3 {
        let mut gicr = std::vec![0u8; 16];
        gicr[0] = 0x0e;
        gicr[1] = 16;
        gicr[4..12].copy_from_slice(&0x080a_0000u64.to_le_bytes());
        gicr[12..16].copy_from_slice(&0x00f6_0000u32.to_le_bytes());
        body.extend(gicr);
    }
    header(b"APIC", &body)
}

fn gtdt() -> Vec<u8> {
    let mut body = std::vec![0u8; 104 - 36];
    for (at, gsiv) in [(48, 29u32), (56, 30), (64, 27), (72, 26)] {
        body[at - 36..at - 32].copy_from_slice(&gsiv.to_le_bytes());
    }
    header(b"GTDT", &body)
}

fn spcr(interface: u8, base: u64, gsiv: u32) -> Vec<u8> {
    spcr_accessed(interface, 3, base, gsiv) // dword access, as QEMU writes it
}

fn spcr_accessed(interface: u8, access_size: u8, base: u64, gsiv: u32) -> Vec<u8> {
    let mut body = std::vec![0u8; 80 - 36];
    body[0] = interface;
    body[4] = 0; // system memory
    body[5] = 32;
    body[7] = access_size;
    body[8..16].copy_from_slice(&base.to_le_bytes());
    body[54 - 36..58 - 36].copy_from_slice(&gsiv.to_le_bytes());
    header(b"SPCR", &body)
}

fn xsdt(tables: &[u64]) -> Vec<u8> {
    let body: Vec<u8> = tables.iter().flat_map(|t| t.to_le_bytes()).collect();
    header(b"XSDT", &body)
}

fn qemu_virt(version: u8, cpus: usize, arm_boot: u16) -> Mem {
    Mem(std::vec![
        (RSDP, rsdp(XSDT)),
        (XSDT, xsdt(&[FADT, MADT, GTDT, SPCR])),
        (FADT, fadt(arm_boot)),
        (MADT, madt(version, cpus)),
        (GTDT, gtdt()),
        (SPCR, spcr(3, 0x0900_0000, 33)),
    ])
}

#[test]
fn qemu_virt_tables_give_cpus_gic_timer_console_and_psci() {
    let p = Platform::read(&qemu_virt(3, 4, 3), RSDP).unwrap();
    assert_eq!(p.psci, Some(PsciConduit::Hvc));
    let mpidrs: Vec<u64> = p.cpus().iter().map(|c| c.mpidr).collect();
    assert_eq!(mpidrs, [0, 1, 2, 3]);
    assert_eq!(p.gicd, Some((0x0800_0000, 3)));
    assert_eq!(p.gicr, Some((0x080a_0000, 0x00f6_0000)));
    assert_eq!(p.timer_gsivs, Some([29, 30, 27, 26]));
    assert_eq!(p.console, Some(Console { interface: 3, base: 0x0900_0000, access_size: 3, gsiv: 33 }));
    // PSCI_COMPLIANT without PSCI_USE_HVC is SMC; neither bit: no PSCI.
    assert_eq!(Platform::read(&qemu_virt(3, 1, 1), RSDP).unwrap().psci, Some(PsciConduit::Smc));
    assert_eq!(Platform::read(&qemu_virt(3, 1, 0), RSDP).unwrap().psci, None);
}

#[test]
fn the_tree_made_from_acpi_is_what_the_kernel_discovers() {
    for (version, compatible) in [(2, "arm,cortex-a15-gic"), (3, "arm,gic-v3")] {
        let p = Platform::read(&qemu_virt(version, 4, 3), RSDP).unwrap();
        let mut buf = std::vec![0u8; 8192];
        let len = acpi_dt::build(&p, b"test=boot::", &mut buf).unwrap();
        let fdt = devicetree::Fdt::new(&buf[..len]).unwrap();
        let m = devicetree::Machine::from_fdt(fdt);
        let console = m.console.as_ref().unwrap();
        assert_eq!((console.compatible.as_str(), console.pa), ("arm,pl011", 0x0900_0000));
        assert_eq!(m.psci, Some(devicetree::PsciMethod::Hvc));
        assert_eq!(m.cpus.len(), 4);
        assert!(m.cpus.iter().all(|c| c.enable_method == devicetree::EnableMethod::Psci));
        assert_eq!(m.cpus.iter().map(|c| c.mpidr).collect::<Vec<_>>(), [0, 1, 2, 3]);
        assert_eq!(m.interrupt_controller, Some((std::string::String::from(compatible), 0x0800_0000)));
        assert_eq!(m.bootargs, "test=boot::");
        assert_eq!(m.model.as_bytes(), acpi_dt::MODEL);
        let (gic, node) = devicetree::find_compatible_path(&m.fdt, &[compatible]).unwrap();
        let second = devicetree::reg_translated(&m.fdt, &gic, node, 1).unwrap();
        assert_eq!(second, if version == 3 { (0x080a_0000, 0x00f6_0000) } else { (0x0801_0000, 0x2000) });
        let timer = m.fdt.find_compatible(&["arm,armv8-timer"]).unwrap();
        assert_eq!(timer.property("interrupts").unwrap().value.len(), 48);
    }
}

#[test]
fn a_tree_that_does_not_fit_is_refused() {
    let p = Platform::read(&qemu_virt(3, 4, 3), RSDP).unwrap();
    for size in [0, 40, 56, 200, 600] {
        let mut buf = std::vec![0u8; size];
        assert_eq!(acpi_dt::build(&p, b"", &mut buf), None, "{size}");
    }
}

#[test]
fn a_bad_rsdp_is_refused() {
    let good = qemu_virt(3, 1, 3);
    let mut m = good.clone();
    m.0[0].1[0] = b'X'; // signature
    assert_eq!(Platform::read(&m, RSDP), Err(AcpiError::BadRsdp));
    let mut m = good.clone();
    m.0[0].1[15] = 0; // ACPI 1.0: no XSDT
    assert_eq!(Platform::read(&m, RSDP), Err(AcpiError::BadRsdp));
    let mut m = good.clone();
    m.0[0].1[24] ^= 1; // XSDT address: the extended checksum fails
    assert_eq!(Platform::read(&m, RSDP), Err(AcpiError::BadRsdp));
    assert_eq!(Platform::read(&good, RSDP + 4), Err(AcpiError::BadRsdp));
    assert_eq!(Platform::read(&good, 0), Err(AcpiError::BadRsdp));
}

#[test]
fn every_corrupted_byte_of_every_table_is_caught() {
    let good = qemu_virt(3, 4, 3);
    for table in 1..good.0.len() {
        for at in 0..good.0[table].1.len() {
            let mut m = good.clone();
            m.0[table].1[at] ^= 0x5a;
            let sig: [u8; 4] = good.0[table].1[..4].try_into().unwrap();
            match Platform::read(&m, RSDP) {
                Err(AcpiError::BadTable(_)) | Err(AcpiError::Missing(_)) => {}
                // An optional table whose signature is corrupted is just not there.
                Ok(p) if at < 4 && &sig == b"GTDT" && p.timer_gsivs.is_none() => {}
                Ok(p) if at < 4 && &sig == b"SPCR" && p.console.is_none() => {}
                other => panic!("table {} byte {at}: {other:?}", std::str::from_utf8(&sig).unwrap()),
            }
        }
    }
}

#[test]
fn missing_or_truncated_tables_are_errors() {
    let mut m = qemu_virt(3, 1, 3);
    m.0[1].1 = xsdt(&[MADT, GTDT]);
    assert_eq!(Platform::read(&m, RSDP), Err(AcpiError::Missing(*b"FACP")));
    let mut m = qemu_virt(3, 1, 3);
    m.0[1].1 = xsdt(&[FADT]);
    assert_eq!(Platform::read(&m, RSDP), Err(AcpiError::Missing(*b"APIC")));
    // The XSDT points at memory that is not there.
    let mut m = qemu_virt(3, 1, 3);
    m.0[1].1 = xsdt(&[FADT, MADT, 0x1234_0000]);
    assert_eq!(Platform::read(&m, RSDP), Err(AcpiError::BadTable(*b"XSDT")));
    // A table whose length runs past readable memory.
    let mut m = qemu_virt(3, 1, 3);
    m.0[2].1.truncate(100);
    assert_eq!(Platform::read(&m, RSDP), Err(AcpiError::BadTable(*b"FACP")));
    // Optional tables may be absent.
    let mut m = qemu_virt(3, 1, 3);
    m.0[1].1 = xsdt(&[FADT, MADT]);
    let p = Platform::read(&m, RSDP).unwrap();
    assert_eq!((p.timer_gsivs, p.console), (None, None));
}

#[test]
fn malformed_madt_entries_are_errors_and_checksummed_ones_are_still_checked() {
    for entry_len in [0u8, 1, 20, 75] {
        let mut body = std::vec![0u8; 8];
        let mut e = std::vec![0u8; 80];
        e[0] = 0x0b; // a GICC entry that claims to be shorter than a GICC
        e[1] = entry_len;
        body.extend(e);
        let mut m = qemu_virt(3, 1, 3);
        m.0[3].1 = header(b"APIC", &body);
        assert_eq!(Platform::read(&m, RSDP), Err(AcpiError::BadMadtEntry), "entry length {entry_len}");
    }
    // An entry running past the end of the table.
    let mut body = std::vec![0u8; 8];
    let mut e = gicc(0, true, 80);
    e[1] = 200;
    body.extend(e);
    let mut m = qemu_virt(3, 1, 3);
    m.0[3].1 = header(b"APIC", &body);
    assert_eq!(Platform::read(&m, RSDP), Err(AcpiError::BadMadtEntry));
}

#[test]
fn more_cpus_than_room_are_counted_not_overrun() {
    let p = Platform::read(&qemu_virt(3, MAX_CPUS + 5, 3), RSDP).unwrap();
    assert_eq!(p.cpus().len(), MAX_CPUS);
    assert_eq!(p.cpus_dropped, 5);
}

/// The console the kernel would drive for an SPCR of `interface` and `access_size`: the tree
/// made from the tables, read back by the `devicetree` crate and given to the UART table.
fn spcr_console(m: &Mem) -> Result<devicetree::support::UartConfig, std::string::String> {
    let p = Platform::read(m, RSDP).map_err(|e| std::format!("{e:?}"))?;
    let mut buf = std::vec![0u8; 8192];
    let len = acpi_dt::build(&p, b"", &mut buf).ok_or("no room")?;
    let fdt = devicetree::Fdt::new(&buf[..len]).map_err(|e| std::format!("{e:?}"))?;
    let machine = devicetree::Machine::from_fdt(fdt);
    let console = machine.console.as_ref().map_err(|e| std::format!("{e:?}"))?;
    let node = machine.fdt.find_node(&console.path).ok_or("no node")?;
    devicetree::support::uart_config(&machine.fdt, &console.path, &node)
}

fn with_spcr(table: Vec<u8>) -> Mem {
    let mut m = qemu_virt(3, 1, 3);
    m.0[5].1 = table;
    m
}

#[test]
fn spcr_interface_types_get_the_driver_linux_gives_them_an_earlycon() {
    use devicetree::support::UartFamily;
    // (interface type, access size) -> (driver, reg-shift, reg-io-width)
    for (interface, access, family, shift, width) in [
        (3, 3, UartFamily::Pl011, 0, 4),
        (0x10, 3, UartFamily::Pl011, 0, 4), // BCM2835: Linux's spcr.c takes it as a PL011
        (0x0d, 3, UartFamily::SbsaUart, 0, 4),
        (0x0e, 3, UartFamily::SbsaUart, 0, 4),
        (0, 1, UartFamily::Ns16550, 0, 1),    // 16550, byte registers 1 apart
        (1, 1, UartFamily::Ns16550, 0, 1),    // 16450 (the 16550 subset)
        (0x12, 3, UartFamily::Ns16550, 2, 4), // 16550 with GAS, dword: 4 apart (mmio32)
        (0x12, 2, UartFamily::Ns16550, 1, 2), // word: 2 apart (mmio16)
        (5, 3, UartFamily::Ns16550, 2, 4),    // NVIDIA 16550
        (0, 0, UartFamily::Ns16550, 0, 1),    // access size undefined: bytes, as Linux defaults
        (0, 4, UartFamily::Ns16550, 0, 1),    // qword: no 16550 has it; bytes
    ] {
        let c = spcr_console(&with_spcr(spcr_accessed(interface, access, 0x0900_0000, 33)))
            .unwrap_or_else(|e| panic!("type {interface:#x}: {e}"));
        assert_eq!((c.family, c.reg_shift, c.reg_io_width), (family, shift, width), "type {interface:#x}");
        assert_eq!(c.pa, 0x0900_0000);
    }
    // A type with no driver here (e.g. 0x0f, the Arm DCC) names a console the kernel cannot use.
    let e = spcr_console(&with_spcr(spcr_accessed(0x0f, 3, 0x0900_0000, 33))).unwrap_err();
    assert!(e.contains("acpi,spcr-unknown-interface"), "{e}");
}

#[test]
fn every_byte_of_an_spcr_set_to_anything_checksummed_is_discovered_without_panic() {
    // Unlike the corruption test above, the checksum is fixed after each change, so every
    // value reaches the reader, the tree writer, discovery and the UART table.
    for interface in [0u8, 3, 0x0e, 0x12] {
        let good = spcr_accessed(interface, 1, 0x0900_0000, 33);
        for at in 36..good.len() {
            for value in [0u8, 1, 2, 3, 4, 0x10, 0x12, 0x7f, 0xff] {
                let mut t = good.clone();
                t[at] = value;
                fix(&mut t, 9);
                let _ = spcr_console(&with_spcr(t));
            }
        }
    }
}
