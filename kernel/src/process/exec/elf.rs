//! The kernel side of reading a program: the `elf` crate parses and validates the ELF file as
//! Linux's binfmt_elf does (host-tested against 10^5 mutated programs, never a panic); this
//! module gives it the kernel's address-space limits and policy and hands back the refusal,
//! whose `Display` is the sentence `run` reports.
use mm::addr::PAGE_SIZE;
use mm::vm::Layout;

pub use ::elf::Executable;

/// Where a page-aligned PIE is loaded without randomisation (Linux's place, 2/3 of the user
/// range); `process::aslr` chooses per program (its alignment, the draw).
pub const PIE_BASE: u64 =
    mm::vm::aslr::pie_base_unrandomised(LAYOUT.task_size, mm::vm::map::WINDOW_DEFAULT, PAGE_SIZE);

/// The user address range every process gets (the same as its area map's, `Layout::linux`).
const LAYOUT: Layout = Layout { mmap_min_addr: crate::process::LOWEST_MAPPING, ..Layout::linux(0) };

/// The loader's limits: 4 KiB pages, `[mmap_min_addr, TASK_SIZE)`, W^X (no process has opted
/// out at exec time).
pub const LIMITS: ::elf::Limits = ::elf::Limits {
    page_size: PAGE_SIZE,
    min_addr: LAYOUT.mmap_min_addr,
    task_size: LAYOUT.task_size,
    pie_base: PIE_BASE,
    w_xor_x: true,
};

/// Parses `bytes` as an arm64 executable: static, a PIE placed at `pie_base` (aligned down as
/// Linux's `load_bias`; [`PIE_BASE`] without randomisation), or dynamically linked (its
/// interpreter in [`Executable::interp`], which the caller finds and loads).
///
/// # Errors
/// Why the file cannot run here (its `Display` is one sentence; no heap is needed to fail, so
/// `execve` can fail without any).
pub fn parse_placed(file: ::elf::FileBytes<'_>, pie_base: u64) -> Result<Executable, ::elf::Refusal> {
    ::elf::parse(file, &::elf::Limits { pie_base, ..LIMITS })
}

/// Parses `bytes` as a program's interpreter whose lowest page goes at `base` (Linux's
/// `load_elf_interp`).
///
/// # Errors
/// As [`parse_placed`].
pub fn parse_interpreter(file: ::elf::FileBytes<'_>, base: u64) -> Result<Executable, ::elf::Refusal> {
    ::elf::parse_at(file, &LIMITS, base)
}
