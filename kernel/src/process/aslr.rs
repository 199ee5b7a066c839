//! Per-`exec` layout randomisation: whether to randomise (Linux's `randomize_va_space`, the
//! `norandmaps` boot parameter, `personality(ADDR_NO_RANDOMIZE)`), and the draws from the
//! kernel's generator that `mm::vm::aslr` turns into the mmap base, the stack top, the heap's
//! start and a PIE's load base. The arithmetic, its entropy and the code window's invariants
//! under every draw live (and are proved) in `mm`; this module only decides and draws.
use core::sync::atomic::{AtomicU32, Ordering};

use mm::addr::PAGE_SIZE;
use mm::vm::aslr;
use mm::vm::map::{STACK_GUARD_GAP, WINDOW_DEFAULT};

use super::STACK_TOP;

/// Linux's `kernel.randomize_va_space`: 0 off, 1 everything but the heap, 2 everything (the
/// default). `norandmaps` on the command line sets 0.
pub static RANDOMIZE_VA_SPACE: AtomicU32 = AtomicU32::new(2);

/// Linux's `vm.mmap_rnd_bits` (between `aslr::MMAP_RND_BITS_MIN` and `MMAP_RND_BITS_MAX`).
pub static MMAP_RND_BITS: AtomicU32 = AtomicU32::new(aslr::MMAP_RND_BITS_DEFAULT);

/// Reads `norandmaps` from the kernel's part of the command line (before `--`).
pub fn configure(bootargs: &str) {
    if bootargs.split_ascii_whitespace().take_while(|w| *w != "--").any(|w| w == "norandmaps") {
        RANDOMIZE_VA_SPACE.store(0, Ordering::Relaxed);
    }
}

/// The layout choices of one `exec`.
#[derive(Clone, Copy, Debug)]
pub struct Draws {
    /// Top-down `mmap` starts below this.
    pub mmap_base: u64,
    /// The stack area ends here (page-aligned).
    pub stack_top: u64,
    /// The initial stack's contents start this far below `stack_top` (below a page, a
    /// multiple of 16: Linux's `arch_align_stack`).
    pub stack_pad: u64,
    /// The empty heap's start moves up by this (whole pages).
    pub brk_offset: u64,
    /// The vDSO goes this far above the program's code (whole pages, below 2 MiB).
    pub vdso_offset: u64,
    /// Lowest-fit code placement starts this far into the code window
    /// (`mm::vm::aslr::code_floor`: the interpreter's and the libraries' own random bits).
    pub code_floor: u64,
    /// The PIE draw and `vm.mmap_rnd_bits` at the time; `None`: not randomised.
    pie: Option<(u64, u32)>,
}

impl Draws {
    /// Where the program in `file` goes if it is a PIE: the draw made in units of its largest
    /// `p_align` (`mm::vm::aslr::pie_base`), or Linux's place without randomisation
    /// (`mm::vm::aslr::pie_base_unrandomised`); either leaves a quarter of the code window below
    /// the text.
    pub fn pie_base(&self, file: ::elf::FileBytes<'_>) -> u64 {
        let p_align = ::elf::load_span(file, &super::exec::elf::LIMITS).map_or(PAGE_SIZE, |(_, a)| a);
        let align = aslr::pie_align(WINDOW_DEFAULT, p_align);
        match self.pie {
            Some((draw, bits)) => aslr::pie_base(STACK_TOP + PAGE_SIZE, draw, bits, WINDOW_DEFAULT, align),
            None => aslr::pie_base_unrandomised(STACK_TOP + PAGE_SIZE, WINDOW_DEFAULT, align),
        }
    }
}

/// How far above the program's code the vDSO may go: a few bits of its own beside the program's
/// base (the code window keeps it within branch reach of the program; docs/address-space.md).
const VDSO_SPREAD: u64 = 2 << 20;

/// The draws for a program exec'd under `personality` with `stack_limit` (`RLIMIT_STACK`'s soft
/// value): random ones unless randomisation is off, else this kernel's fixed layout.
pub fn draw(personality: u32, stack_limit: u64) -> Draws {
    let level = RANDOMIZE_VA_SPACE.load(Ordering::Relaxed);
    let no_randomize = u64::from(personality) & linux_abi::prctl::ADDR_NO_RANDOMIZE != 0;
    if level == 0 || no_randomize {
        return Draws {
            mmap_base: mm::vm::Layout::linux(0).mmap_base,
            stack_top: STACK_TOP,
            stack_pad: 0,
            brk_offset: 0,
            pie: None,
            vdso_offset: 0,
            code_floor: 0,
        };
    }
    let bits = MMAP_RND_BITS.load(Ordering::Relaxed);
    let r = || crate::random::next_u64();
    let rnd = aslr::mmap_rnd(r(), bits);
    Draws {
        mmap_base: aslr::mmap_base(STACK_TOP, stack_limit, STACK_GUARD_GAP, true, rnd),
        stack_top: aslr::stack_top(STACK_TOP, r()),
        stack_pad: aslr::stack_pad(r()),
        brk_offset: if level >= 2 { aslr::brk_offset(r()) } else { 0 },
        pie: Some((r(), bits)),
        vdso_offset: (r() % (VDSO_SPREAD / PAGE_SIZE)) * PAGE_SIZE,
        code_floor: aslr::code_floor(r(), WINDOW_DEFAULT),
    }
}
