//! Kernel symbol lookup for exception reports and backtraces: address → (name, offset).
//!
//! The table is built in two passes, because the symbols' addresses are only known after the
//! final link, and the table must not move them:
//! 1. The kernel links with [`KSYMS`], a fixed-size, all-zero area of [`KSYMS_SIZE`] bytes in the
//!    read-only `.ksyms` section (the linker script keeps it inside a loadable read-only segment).
//! 2. `kimage symbols <ELF>` (tools/image-check) writes the symbol table into that section's
//!    bytes in the ELF file, in place; no address changes.
//! 3. `llvm-objcopy -O binary` turns the patched ELF into the Image, and `kimage check` verifies
//!    the Image against the ELF.
//!
//! The blob layout and the decoder are in `tools/image-check/src/ksyms_format.rs`, included here
//! verbatim so the kernel runs exactly the decoder the host tests exercise. A kernel whose
//! `.ksyms` was never patched (or holds a corrupt table) simply finds no symbols: [`lookup`]
//! returns `None`, it never panics.

#[path = "../../tools/image-check/src/ksyms_format.rs"]
#[allow(dead_code, reason = "shared with the host tool, which uses more of the decoder than the kernel does")]
mod format;

/// Size of the `.ksyms` area, the most the symbol table may occupy. `kimage symbols` fails,
/// giving the size it needs, when the table does not fit even with long names truncated.
pub const KSYMS_SIZE: usize = 96 * 1024;

/// The storage behind [`KSYMS`]: 8-byte aligned so the 64-bit entries are naturally aligned.
#[repr(C, align(8))]
pub struct KsymsArea([u8; KSYMS_SIZE]);

/// The symbol table, zero at link time and patched in the ELF file afterwards (see the module
/// documentation). Never read directly: the compiler would fold the reads to the zeros it sees.
#[unsafe(link_section = ".ksyms")]
#[used]
static KSYMS: KsymsArea = KsymsArea([0; KSYMS_SIZE]);

/// The patched contents of [`KSYMS`]. `black_box` hides the address from the optimiser, so
/// every read goes to memory instead of being constant-folded to the link-time zeros.
fn blob() -> &'static [u8] {
    let area: &'static KsymsArea = core::hint::black_box(&KSYMS);
    &area.0
}

/// The symbol containing `addr`, and the offset of `addr` into it; `None` when no symbol
/// covers `addr` or the table is missing or corrupt.
/// `addr` is a link address, as the table holds them: a run address less `boot::kaslr::offset()`
/// (which `trap::kernel::symbol_at` subtracts).
pub fn lookup(addr: u64) -> Option<(&'static str, u64)> {
    format::lookup(blob(), addr)
}
