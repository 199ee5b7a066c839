//! Exceptions taken at EL1 that no fixup claimed: each ends the run with a decoded report
//! (exception class by name, ISS details for aborts, FAR with what lives there, ELR and LR with
//! their symbols, the register file) and a failing exit. The kernel asks for no exception it
//! cannot handle, so one arriving here is a bug (or an SError from the machine).
use core::fmt;

use crate::arch::aarch64::exception::{TrapFrame, exception_class_name, fault_status_name};

/// Prints the report of an unexpected exception and ends the run.
pub fn fatal(frame: &TrapFrame, kind: u64) -> ! {
    crate::console::print_fatal(format_args!("\n*** unexpected exception: {}\n", Report { frame, kind }));
    crate::console::end_run(crate::exit::FAILURE)
}

struct Report<'a> {
    frame: &'a TrapFrame,
    kind: u64,
}

const KINDS: [&str; 4] = ["synchronous", "IRQ", "FIQ", "SError"];
const SOURCES: [&str; 4] = [
    "from EL1 on SP_EL0 (kernel)",
    "from EL1 on SP_EL1 (exception stack)",
    "from EL0 (AArch64)",
    "from EL0 (AArch32)",
];

impl fmt::Display for Report<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let fr = self.frame;
        let ec = (fr.esr >> 26) & 0x3f;
        let iss = fr.esr & 0x1ff_ffff;
        writeln!(f, "{} {}", KINDS[(self.kind & 3) as usize], SOURCES[(self.kind >> 2) as usize & 3])?;
        writeln!(
            f,
            "  ESR_EL1 {:#018x}: EC {:#04x} {}, IL {}, ISS {:#x}",
            fr.esr,
            ec,
            exception_class_name(ec),
            (fr.esr >> 25) & 1,
            iss
        )?;
        if matches!(ec, 0x20 | 0x21 | 0x24 | 0x25) {
            let fsc = iss & 0x3f;
            let level = fsc & 3;
            write!(f, "  {} (FSC {:#04x}", fault_status_name(fsc), fsc)?;
            if matches!(fsc, 0x04..=0x0f) {
                write!(f, ", level {level}")?;
            }
            write!(f, ")")?;
            if ec >= 0x24 {
                write!(f, ", {}", if iss & (1 << 6) != 0 { "write" } else { "read" })?;
                if iss & (1 << 8) != 0 {
                    write!(f, ", cache maintenance")?;
                }
            } else {
                write!(f, ", instruction fetch")?;
            }
            if iss & (1 << 7) != 0 {
                write!(f, ", on a stage-1 table walk")?;
            }
            if iss & (1 << 10) != 0 {
                write!(f, ", FAR not valid")?;
            }
            writeln!(f)?;
        }
        // FAR is meaningful for aborts, alignment faults and watchpoints only.
        if matches!(ec, 0x20 | 0x21 | 0x22 | 0x24 | 0x25 | 0x34 | 0x35) {
            write!(f, "  FAR_EL1 {:#018x}", fr.far)?;
            if let Some(what) = crate::memory::layout::describe_address(fr.far) {
                write!(f, " ({what})")?;
            }
            writeln!(f)?;
        }
        write!(f, "  ELR_EL1 {:#018x}", fr.elr)?;
        if let Some((name, offset)) = symbol_at(fr.elr) {
            write!(f, " <{name}+{offset:#x}>")?;
        }
        writeln!(f)?;
        writeln!(f, "  SPSR_EL1 {:#018x}  SP_EL0 {:#018x}  SP_EL1 {:#018x}", fr.spsr, fr.sp_el0, fr.sp_el1)?;
        for row in 0..8 {
            for col in 0..4 {
                let i = row * 4 + col;
                if i < 31 {
                    write!(f, "  x{i:<2} {:#018x}", fr.x[i])?;
                }
            }
            writeln!(f)?;
        }
        if let Some((name, offset)) = symbol_at(fr.x[30]) {
            writeln!(f, "  LR <{name}+{offset:#x}>")?;
        }
        Ok(())
    }
}

/// The kernel symbol holding run address `addr`, and the offset into it: the symbol table holds
/// link addresses, from which KASLR moved the kernel by `boot::kaslr::offset()`.
pub fn symbol_at(addr: u64) -> Option<(&'static str, u64)> {
    crate::symbols::lookup(addr.wrapping_sub(crate::boot::kaslr::offset()))
}
