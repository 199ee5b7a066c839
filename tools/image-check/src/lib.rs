//! `kimage`, the host-side checker and patcher of the kernel image.
//!
//! The kernel is built in two passes: the linker produces the ELF with an all-zero `.ksyms`
//! area, [`symbols`] (`kimage symbols`) writes the symbol table into that area in the ELF file,
//! `llvm-objcopy -O binary` turns the ELF into the raw arm64 Image, and [`check`]
//! (`kimage check`) verifies the Image header and layout against the ELF.
//!
//! Module map:
//! - [`elf`]: the facts read from an ELF file with `xmas-elf` (segments, sections), bounds-checked;
//! - [`check`]: the Image header checks;
//! - [`pe`]: the PE/COFF header checks (the Image as an EFI application);
//! - [`early`]: the check that the code run with the MMU off uses no link address;
//! - [`symbols`]: symbol collection, demangling, encoding and the `.ksyms` patch;
//! - [`ksyms_format`]: the blob layout and its decoder, shared verbatim with the kernel.
#![forbid(unsafe_code)]

pub mod check;
pub mod early;
pub mod elf;
pub mod ksyms_format;
pub mod pe;
pub mod symbols;

#[cfg(test)]
mod tests;
