//! The machine, as the device tree describes it: the kernel's glue to the `devicetree` crate.
//!
//! Reading and checking the tree, and everything discovered from it (memory, reservations,
//! console, CPUs, PSCI, interrupt controller, initrd, command line), live in the host-tested
//! `devicetree` crate (devicetree/), which validates the whole blob before anything reads it and
//! cannot panic on any input. What stays here is what needs the kernel's address space: checking
//! that x0 points at something the early map shows, and bounding the blob by that window.
pub use devicetree::machine::interrupt_parent;
pub use devicetree::{
    CpuNode, EnableMethod, Fdt, Machine, Node, PsciMethod, find_compatible_path, reg_translated,
};

pub use devicetree::FDT_MAGIC;

/// Why x0 is not a usable device tree.
#[derive(Debug)]
pub enum FdtProblem {
    /// x0 was zero, misaligned or beyond 48 bits, so it was not even mapped.
    NotMapped,
    /// The first word is not the FDT magic.
    BadMagic(u32),
    /// `totalsize` is below the header's size or beyond the bytes mapped from x0.
    BadSize {
        /// The header's `totalsize`.
        size: u32,
        /// Bytes mapped from x0 on.
        window: usize,
    },
    /// The blob is not a valid device tree (the reader says where and why).
    Rejected(devicetree::Error),
}

impl core::fmt::Display for FdtProblem {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        match self {
            Self::NotMapped => write!(f, "it is zero, not 8-byte aligned, or beyond 48 bits"),
            Self::BadMagic(magic) => {
                write!(f, "its first word is {magic:#010x}, not the FDT magic {FDT_MAGIC:#010x}")
            }
            Self::BadSize { size, window } => write!(
                f,
                "its totalsize {size} is below 40 bytes or beyond the {window} bytes the early map \
                 shows from x0 on"
            ),
            Self::Rejected(e) => write!(f, "{e}"),
        }
    }
}

/// Checks the blob at `va` (mapped, at least `window` bytes readable) and validates it.
///
/// The boot protocol (booting.rst) allows at most 2 MiB, but a tree is taken as long as the early
/// map's window holds it: QEMU pads a `-dtb` file to twice its size plus 10000 bytes
/// (`load_device_tree`, QEMU's system/device_tree.c), so a 1 MiB tree dumped by QEMU and given back
/// arrives as 2,117,152 bytes, nearly all padding. (Linux's arm64 `fixmap_remap_fdt` refuses it.)
///
/// # Errors
/// An [`FdtProblem`] saying what is wrong with it.
///
/// # Safety
/// `[va, va + window)` is mapped readable for the kernel's life and not written by anyone.
pub unsafe fn open(va: u64, window: usize) -> Result<Fdt<'static>, FdtProblem> {
    // SAFETY: the caller guarantees the window is mapped; the header is 8-byte aligned (x0 was).
    let magic = u32::from_be(unsafe { (va as *const u32).read_volatile() });
    if magic != FDT_MAGIC {
        return Err(FdtProblem::BadMagic(magic));
    }
    // SAFETY: as above; totalsize is the second header word.
    let size = u32::from_be(unsafe { ((va + 4) as *const u32).read_volatile() });
    if (size as usize) < 40 || size as usize > window {
        return Err(FdtProblem::BadSize { size, window });
    }
    // SAFETY: `size` bytes from `va` lie inside the mapped, immutable window.
    let bytes = unsafe { core::slice::from_raw_parts(va as *const u8, size as usize) };
    Fdt::new(bytes).map_err(FdtProblem::Rejected)
}

/// The driver and register layout of the console the tree names (its whole `compatible` list
/// walked), or why there is none.
///
/// # Errors
/// The tree's own problem with the console (no stdout-path, ...), or the reason no driver takes
/// the node.
pub fn console_uart(machine: &Machine<'_>) -> Result<devicetree::support::UartConfig, alloc::string::String> {
    let console = machine.console.as_ref().map_err(alloc::string::String::clone)?;
    let node = machine
        .fdt
        .find_node(&console.path)
        .ok_or_else(|| alloc::format!("console node {} vanished", console.path))?;
    devicetree::support::uart_config(&machine.fdt, &console.path, &node)
}
