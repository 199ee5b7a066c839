//! The ACPI tables an arm64 kernel needs when firmware gives no device tree: a validated,
//! allocation-free reader.
//!
//! References: ACPI Specification 6.5, §5.2.5 (RSDP), §5.2.6 (table header, checksum), §5.2.8
//! (XSDT), §5.2.9 (FADT, `ARM_BOOT_ARCH` at offset 129), §5.2.12 (MADT; GICC §5.2.12.14, GICD
//! §5.2.12.15, GICR §5.2.12.17), §5.2.25 (GTDT); the SPCR table is Microsoft's "Serial Port
//! Console Redirection Table" specification. Linux reads the same fields in
//! drivers/acpi/arm64/, drivers/tty/serial/earlycon.c (`acpi_parse_spcr`) and
//! arch/arm64/kernel/acpi.c.
//!
//! Why not the `acpi` crate of rust-osdev: this reader runs inside the EFI stub, before the
//! kernel exists, where only PC-relative code may run (no formatting, no trait objects, no heap:
//! see kernel/src/firmware/efi_stub.rs); it needs six tables' worth of fields, each of which is
//! bounds-checked here. Every table's length and checksum is verified before a field is read; a
//! malformed table is an [`AcpiError`], never a panic (the host tests feed it cut and corrupted
//! tables).

/// Reads physical memory: the firmware's identity map in the stub, a fixture on the host.
/// (Used through generics, never as `dyn`: a vtable holds link-time addresses, which the stub
/// cannot use.)
pub trait PhysMem {
    /// `len` bytes at physical address `pa`, or `None` if they are not readable.
    fn read(&self, pa: u64, len: usize) -> Option<&[u8]>;
}

/// Why the tables were not usable.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AcpiError {
    /// The RSDP's signature, revision (2 or later: an XSDT), length or checksums are wrong.
    BadRsdp,
    /// A table (its signature) is unreadable, shorter than its header, longer than
    /// [`MAX_TABLE_LEN`], or its checksum is wrong.
    BadTable([u8; 4]),
    /// A required table (its signature) is not in the XSDT.
    Missing([u8; 4]),
    /// A MADT entry's length is below its type's minimum or runs past the table.
    BadMadtEntry,
}

/// Longest table accepted (a sanity bound against a corrupt length).
pub const MAX_TABLE_LEN: usize = 1 << 20;
/// Most CPUs kept from the MADT.
pub const MAX_CPUS: usize = 64;
const HEADER_LEN: usize = 36;

fn u8_at(b: &[u8], at: usize) -> Option<u8> {
    b.get(at).copied()
}
fn u16_at(b: &[u8], at: usize) -> Option<u16> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?))
}
fn u32_at(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}
fn u64_at(b: &[u8], at: usize) -> Option<u64> {
    Some(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?))
}

/// Whether the bytes sum to 0 modulo 256 (ACPI's checksum rule).
pub fn checksum_ok(bytes: &[u8]) -> bool {
    bytes.iter().fold(0u8, |sum, &b| sum.wrapping_add(b)) == 0
}

/// Reads the whole table at `pa` (header, length, checksum); `expect` is its signature, if known.
fn table<M: PhysMem>(mem: &M, pa: u64, expect: Option<[u8; 4]>) -> Result<&[u8], AcpiError> {
    let sig_of = |h: &[u8]| -> [u8; 4] { h.get(..4).and_then(|s| s.try_into().ok()).unwrap_or(*b"????") };
    let header = mem.read(pa, HEADER_LEN).ok_or(AcpiError::BadTable(expect.unwrap_or(*b"????")))?;
    let sig = sig_of(header);
    if expect.is_some_and(|e| e != sig) {
        return Err(AcpiError::BadTable(expect.unwrap_or(sig)));
    }
    let len = u32_at(header, 4).ok_or(AcpiError::BadTable(sig))? as usize;
    if !(HEADER_LEN..=MAX_TABLE_LEN).contains(&len) {
        return Err(AcpiError::BadTable(sig));
    }
    let bytes = mem.read(pa, len).ok_or(AcpiError::BadTable(sig))?;
    if !checksum_ok(bytes) {
        return Err(AcpiError::BadTable(sig));
    }
    Ok(bytes)
}

/// The RSDP (revision 2 or later): both checksums, and the XSDT's address.
pub fn xsdt_address<M: PhysMem>(mem: &M, rsdp: u64) -> Result<u64, AcpiError> {
    let head = mem.read(rsdp, 36).ok_or(AcpiError::BadRsdp)?;
    if head.get(..8) != Some(b"RSD PTR ".as_slice()) || u8_at(head, 15).unwrap_or(0) < 2 {
        return Err(AcpiError::BadRsdp);
    }
    let len = u32_at(head, 20).ok_or(AcpiError::BadRsdp)? as usize;
    if !(36..=4096).contains(&len) {
        return Err(AcpiError::BadRsdp);
    }
    let all = mem.read(rsdp, len).ok_or(AcpiError::BadRsdp)?;
    if !checksum_ok(&all[..20]) || !checksum_ok(all) {
        return Err(AcpiError::BadRsdp);
    }
    u64_at(all, 24).ok_or(AcpiError::BadRsdp)
}

/// The address of the first table with `signature` listed in the XSDT.
fn find<M: PhysMem>(mem: &M, xsdt: &[u8], signature: [u8; 4]) -> Result<Option<u64>, AcpiError> {
    let mut at = HEADER_LEN;
    while let Some(pa) = u64_at(xsdt, at) {
        at += 8;
        let header = mem.read(pa, 4).ok_or(AcpiError::BadTable(*b"XSDT"))?;
        if header == signature {
            return Ok(Some(pa));
        }
    }
    Ok(None)
}

/// How PSCI calls reach the firmware (FADT `ARM_BOOT_ARCH`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PsciConduit {
    /// `SMC #0`.
    Smc,
    /// `HVC #0` (bit 1, PSCI_USE_HVC).
    Hvc,
}

/// A GIC CPU interface entry of the MADT (an enabled one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Cpu {
    /// MPIDR (affinity fields).
    pub mpidr: u64,
    /// The GICv2 CPU interface's physical base (0 on GICv3).
    pub gicc_base: u64,
    /// This CPU's GICv3 redistributor, when listed per CPU (0 otherwise).
    pub gicr_base: u64,
}

/// The serial console SPCR names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Console {
    /// SPCR Interface Type (Microsoft's DBG2 numbering: 0 16550, 1 16450, 3 ARM PL011,
    /// 5 NVIDIA 16550, 0x0d/0x0e Arm SBSA generic UART, 0x10 BCM2835, 0x12 16550 with GAS, ...).
    pub interface: u8,
    /// MMIO base address (the Generic Address Structure's address, system memory space).
    pub base: u64,
    /// The Generic Address Structure's Access Size (ACPI 6.5 §5.2.3.2: 1 byte, 2 word, 3 dword,
    /// 4 qword, 0 undefined): how a 16550's registers are accessed and spaced.
    pub access_size: u8,
    /// Its GSIV (global system interrupt), 0 if none.
    pub gsiv: u32,
}

/// What the kernel needs from ACPI.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Platform {
    /// From the FADT: whether PSCI is implemented and its conduit (`None`: not PSCI compliant).
    pub psci: Option<PsciConduit>,
    /// From the MADT: the enabled CPUs (up to [`MAX_CPUS`]).
    pub cpus: [Cpu; MAX_CPUS],
    /// How many of `cpus` are filled in.
    pub cpu_count: usize,
    /// Enabled CPUs left out for lack of room.
    pub cpus_dropped: usize,
    /// From the MADT GICD entry: the distributor's base and the GIC version (1..=4; 0 unknown).
    pub gicd: Option<(u64, u8)>,
    /// From the first MADT GICR entry: the redistributor discovery range (base, length).
    pub gicr: Option<(u64, u32)>,
    /// From the GTDT: the GSIVs of the secure EL1, non-secure EL1, virtual EL1 and EL2 timers.
    pub timer_gsivs: Option<[u32; 4]>,
    /// From the SPCR, if present and in system memory space.
    pub console: Option<Console>,
}

impl Platform {
    /// The enabled CPUs.
    pub fn cpus(&self) -> &[Cpu] {
        &self.cpus[..self.cpu_count]
    }

    /// Reads FADT, MADT (both required), GTDT and SPCR (optional) through the RSDP at `rsdp`.
    ///
    /// # Errors
    /// The first table found malformed, or a required one missing.
    pub fn read<M: PhysMem>(mem: &M, rsdp: u64) -> Result<Platform, AcpiError> {
        let xsdt = table(mem, xsdt_address(mem, rsdp)?, Some(*b"XSDT"))?;
        let mut p = Platform {
            psci: None,
            cpus: [Cpu::default(); MAX_CPUS],
            cpu_count: 0,
            cpus_dropped: 0,
            gicd: None,
            gicr: None,
            timer_gsivs: None,
            console: None,
        };
        let fadt_pa = find(mem, xsdt, *b"FACP")?.ok_or(AcpiError::Missing(*b"FACP"))?;
        let fadt = table(mem, fadt_pa, Some(*b"FACP"))?;
        // ARM_BOOT_ARCH (2 bytes at 129, ACPI 5.1 and later): bit 0 PSCI_COMPLIANT, bit 1 PSCI_USE_HVC.
        let arm_boot = u16_at(fadt, 129).unwrap_or(0);
        p.psci = match (arm_boot & 1 != 0, arm_boot & 2 != 0) {
            (false, _) => None,
            (true, true) => Some(PsciConduit::Hvc),
            (true, false) => Some(PsciConduit::Smc),
        };
        let madt_pa = find(mem, xsdt, *b"APIC")?.ok_or(AcpiError::Missing(*b"APIC"))?;
        p.read_madt(table(mem, madt_pa, Some(*b"APIC"))?)?;
        if let Some(pa) = find(mem, xsdt, *b"GTDT")? {
            let gtdt = table(mem, pa, Some(*b"GTDT"))?;
            // Secure EL1 at 48, non-secure EL1 at 56, virtual EL1 at 64, EL2 at 72 (each GSIV
            // followed by its flags).
            let gsiv = |at| u32_at(gtdt, at).ok_or(AcpiError::BadTable(*b"GTDT"));
            p.timer_gsivs = Some([gsiv(48)?, gsiv(56)?, gsiv(64)?, gsiv(72)?]);
        }
        if let Some(pa) = find(mem, xsdt, *b"SPCR")? {
            let spcr = table(mem, pa, Some(*b"SPCR"))?;
            let bad = AcpiError::BadTable(*b"SPCR");
            let interface = u8_at(spcr, 36).ok_or(bad)?;
            // The base address is a Generic Address Structure at 40: space 0 = system memory.
            let space = u8_at(spcr, 40).ok_or(bad)?;
            let access_size = u8_at(spcr, 43).ok_or(bad)?;
            let base = u64_at(spcr, 44).ok_or(bad)?;
            let gsiv = u32_at(spcr, 54).ok_or(bad)?;
            if space == 0 && base != 0 {
                p.console = Some(Console { interface, base, access_size, gsiv });
            }
        }
        Ok(p)
    }

    fn read_madt(&mut self, madt: &[u8]) -> Result<(), AcpiError> {
        let mut at = 44;
        while at < madt.len() {
            let (Some(kind), Some(len)) = (u8_at(madt, at), u8_at(madt, at + 1)) else {
                return Err(AcpiError::BadMadtEntry);
            };
            let len = usize::from(len);
            let min = match kind {
                0x0b => 76, // GICC: up to and including MPIDR (ACPI 5.1: 76 bytes; 6.x: 80, 82)
                0x0c => 24, // GICD
                0x0e => 16, // GICR
                _ => 2,
            };
            let entry = madt.get(at..at + len).filter(|_| len >= min).ok_or(AcpiError::BadMadtEntry)?;
            match kind {
                0x0b => {
                    let flags = u32_at(entry, 12).unwrap_or(0);
                    if flags & 1 != 0 {
                        let cpu = Cpu {
                            mpidr: u64_at(entry, 68).unwrap_or(0) & 0xff_00ff_ffff,
                            gicc_base: u64_at(entry, 32).unwrap_or(0),
                            gicr_base: u64_at(entry, 60).unwrap_or(0),
                        };
                        if self.cpu_count < MAX_CPUS {
                            self.cpus[self.cpu_count] = cpu;
                            self.cpu_count += 1;
                        } else {
                            self.cpus_dropped += 1;
                        }
                    }
                }
                0x0c if self.gicd.is_none() => {
                    self.gicd = Some((u64_at(entry, 8).unwrap_or(0), u8_at(entry, 20).unwrap_or(0)));
                }
                0x0e if self.gicr.is_none() => {
                    self.gicr = Some((u64_at(entry, 4).unwrap_or(0), u32_at(entry, 12).unwrap_or(0)));
                }
                _ => {}
            }
            at += len;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests;
