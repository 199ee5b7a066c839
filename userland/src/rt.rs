//! The run-time the program needs without a libc: the `_start` stub, the initial stack (argc,
//! argv, envp, auxv), a spin lock, a bump allocator over `mmap`, formatted output to fd 1, the
//! generic timer and the panic handler. Everything here may be used from several threads
//! (`crate::thread`): the allocator and the output buffer are behind [`SpinLock`]s.

use core::alloc::{GlobalAlloc, Layout};
use core::arch::{asm, global_asm};
use core::cell::UnsafeCell;
use core::fmt::{self, Write};
use core::ops::{Deref, DerefMut};
use core::sync::atomic::{AtomicBool, Ordering};

use crate::sys;

// `_start` gets no arguments in registers: the kernel leaves SP pointing at argc, followed by
// argv[], NULL, envp[], NULL and the auxiliary vector (Linux `create_elf_tables`). A Rust function
// cannot see its caller's SP portably, so this stub passes it in x0, keeps SP 16-byte aligned
// (Linux already guarantees it; this costs one instruction), clears the frame chain for
// backtraces and calls `rust_start`, which never returns.
global_asm!(
    ".section .text._start, \"ax\"",
    ".globl _start",
    ".type _start, %function",
    "_start:",
    "    mov x0, sp",
    "    and sp, x0, #~15",
    "    mov x29, xzr",
    "    mov x30, xzr",
    "    bl {main}",
    "    brk #0x1",
    ".size _start, . - _start",
    main = sym rust_start,
);

/// Auxiliary vector keys this program reads (all optional).
const AT_NULL: u64 = 0;
const AT_PAGESZ: u64 = 6;
const AT_HWCAP: u64 = 16;
const AT_RANDOM: u64 = 25;
const AT_HWCAP2: u64 = 26;

/// What the initial stack told us.
pub struct Start {
    pub argc: usize,
    argv: *const *const u8,
    /// `AT_PAGESZ`, 4096 if absent.
    pub page_size: u64,
    /// `AT_HWCAP`/`AT_HWCAP2` (0 if absent), reported only.
    pub hwcap: u64,
    pub hwcap2: u64,
    /// 16 bytes from `AT_RANDOM`, if present.
    pub at_random: Option<[u8; 16]>,
    /// Number of auxv entries before `AT_NULL`.
    pub auxv_entries: usize,
}

impl Start {
    /// `argv[i]` as bytes (without the NUL).
    pub fn arg(&self, i: usize) -> Option<&'static [u8]> {
        if i >= self.argc {
            return None;
        }
        // SAFETY: `argv` has `argc` valid entries (checked above), each a NUL-terminated string the
        // kernel placed on the stack, which lives as long as the process.
        unsafe {
            let p = *self.argv.add(i);
            if p.is_null() {
                return None;
            }
            let mut n = 0;
            while *p.add(n) != 0 {
                n += 1;
            }
            Some(core::slice::from_raw_parts(p, n))
        }
    }
}

/// Parses the initial stack.
///
/// # Safety
/// `sp` must be the stack pointer the kernel gave `_start`.
unsafe fn parse_stack(sp: *const u64) -> Start {
    // SAFETY: the caller guarantees the Linux initial stack layout at `sp`: argc, argv[argc],
    // NULL, envp..., NULL, then (key, value) pairs ending with AT_NULL.
    unsafe {
        let argc = *sp as usize;
        let argv = sp.add(1) as *const *const u8;
        let mut p = sp.add(1 + argc + 1);
        while *p != 0 {
            p = p.add(1);
        }
        p = p.add(1);
        let mut start =
            Start { argc, argv, page_size: 4096, hwcap: 0, hwcap2: 0, at_random: None, auxv_entries: 0 };
        // At most 64 entries, in case a young kernel forgets AT_NULL.
        while *p != AT_NULL && start.auxv_entries < 64 {
            let (key, val) = (*p, *p.add(1));
            match key {
                AT_PAGESZ if val.is_power_of_two() => start.page_size = val,
                AT_HWCAP => start.hwcap = val,
                AT_HWCAP2 => start.hwcap2 = val,
                AT_RANDOM if val != 0 => start.at_random = Some(*(val as *const [u8; 16])),
                _ => {}
            }
            start.auxv_entries += 1;
            p = p.add(2);
        }
        start
    }
}

/// Called by `_start` with the initial SP.
///
/// # Safety
/// Only `_start` calls it, with the kernel-provided stack pointer.
unsafe extern "C" fn rust_start(sp: *const u64) -> ! {
    // SAFETY: `_start` passes the initial stack pointer.
    let start = unsafe { parse_stack(sp) };
    let code = crate::main(&start);
    flush();
    // As Linux's init (scripts/bench boots Linux with this program as its initramfs), exiting
    // would panic the kernel: power off instead. This kernel answers reboot with ENOSYS.
    // SAFETY: getpid has no arguments and no effect.
    if unsafe { sys::syscall6(sys::nr::GETPID, [0; 6]) } == Ok(1) {
        sys::power_off();
    }
    sys::exit(code)
}

// ---------------------------------------------------------------------------------------------
// A spin lock (threads share the allocator and the output buffer)

/// A test-and-test-and-set lock that yields the CPU while contended, so that a holder preempted
/// on the same CPU gets to run and release it.
pub struct SpinLock<T> {
    locked: AtomicBool,
    value: UnsafeCell<T>,
}

// SAFETY: the lock hands out at most one guard at a time, so `T` is only ever accessed by one
// thread at a time; `T: Send` because it may be accessed from any thread.
unsafe impl<T: Send> Sync for SpinLock<T> {}

impl<T> SpinLock<T> {
    /// An unlocked lock holding `value`.
    pub const fn new(value: T) -> Self {
        SpinLock { locked: AtomicBool::new(false), value: UnsafeCell::new(value) }
    }

    /// Takes the lock, spinning (then yielding) until it is free.
    pub fn lock(&self) -> SpinGuard<'_, T> {
        let mut spins = 0u32;
        loop {
            if let Some(guard) = self.try_lock() {
                return guard;
            }
            while self.locked.load(Ordering::Relaxed) {
                spins += 1;
                if spins.is_multiple_of(64) {
                    sys::sched_yield();
                } else {
                    core::hint::spin_loop();
                }
            }
        }
    }

    /// Takes the lock if it is free.
    pub fn try_lock(&self) -> Option<SpinGuard<'_, T>> {
        if self.locked.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_ok() {
            Some(SpinGuard { lock: self })
        } else {
            None
        }
    }
}

/// Access to a [`SpinLock`]'s value; unlocks when dropped.
pub struct SpinGuard<'a, T> {
    lock: &'a SpinLock<T>,
}

impl<T> Deref for SpinGuard<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        // SAFETY: the guard exists only while this thread holds the lock.
        unsafe { &*self.lock.value.get() }
    }
}

impl<T> DerefMut for SpinGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: the guard exists only while this thread holds the lock, and `&mut self`
        // makes this the only reference derived from it.
        unsafe { &mut *self.lock.value.get() }
    }
}

impl<T> Drop for SpinGuard<'_, T> {
    fn drop(&mut self) {
        self.lock.locked.store(false, Ordering::Release);
    }
}

// ---------------------------------------------------------------------------------------------
// Output

struct Out {
    buf: [u8; 4096],
    len: usize,
}

static OUT: SpinLock<Out> = SpinLock::new(Out { buf: [0; 4096], len: 0 });

impl Write for Out {
    fn write_str(&mut self, s: &str) -> fmt::Result {
        for &b in s.as_bytes() {
            if self.len == self.buf.len() {
                sys::write_all(1, &self.buf[..self.len]);
                self.len = 0;
            }
            self.buf[self.len] = b;
            self.len += 1;
            if b == b'\n' {
                sys::write_all(1, &self.buf[..self.len]);
                self.len = 0;
            }
        }
        Ok(())
    }
}

/// Formats `args` and a newline to stdout as one line (used by `say!`): lines from different
/// threads do not interleave.
pub fn print_line(args: fmt::Arguments<'_>) {
    let mut out = OUT.lock();
    let _ = out.write_fmt(args);
    let _ = out.write_str("\n");
}

/// Writes out any partial line. Gives up rather than wait if another thread holds the buffer
/// (it is called on the way out, possibly from the panic handler).
pub fn flush() {
    if let Some(mut out) = OUT.try_lock() {
        let len = out.len;
        sys::write_all(1, &out.buf[..len]);
        out.len = 0;
    }
}

/// `println!` for this program.
#[macro_export]
macro_rules! say {
    ($($arg:tt)*) => {{ $crate::rt::print_line(format_args!($($arg)*)); }};
}

// ---------------------------------------------------------------------------------------------
// Generic timer (CNTVCT_EL0/CNTFRQ_EL0 are readable at EL0 on Linux and on this kernel)

/// The virtual counter, ordered after earlier instructions by an ISB.
pub fn ticks() -> u64 {
    let t: u64;
    // SAFETY: reads a system register that EL0 may read (CNTKCTL_EL1.EL0VCTEN set by the kernel).
    unsafe { asm!("isb", "mrs {t}, cntvct_el0", t = out(reg) t, options(nomem, nostack)) };
    t
}

/// Counter frequency in Hz.
pub fn freq() -> u64 {
    let f: u64;
    // SAFETY: CNTFRQ_EL0 is readable at EL0 whenever CNTVCT_EL0 is.
    unsafe { asm!("mrs {f}, cntfrq_el0", f = out(reg) f, options(nomem, nostack)) };
    f
}

/// Ticks to microseconds (as a fixed-point value with two decimals: 1234 = 12.34 µs).
pub fn ticks_to_centi_us(t: u64) -> u64 {
    let f = freq().max(1);
    ((t as u128 * 100_000_000) / f as u128) as u64
}

/// Displays hundredths as `12.34`.
pub struct Centi(pub u64);

impl fmt::Display for Centi {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:02}", self.0 / 100, self.0 % 100)
    }
}

// ---------------------------------------------------------------------------------------------
// Memory: a bump allocator over mmap (memory is returned only at exit)

const ARENA: u64 = 4 << 20;

struct Bump {
    /// Next free byte and end of the current arena.
    state: SpinLock<(u64, u64)>,
}

// SAFETY: every block returned is freshly carved from a private anonymous mapping that nothing else
// uses, aligned as asked and never handed out twice (the cursor is behind a lock); `dealloc` does
// nothing.
unsafe impl GlobalAlloc for Bump {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let align = layout.align() as u64;
        let size = layout.size() as u64;
        let mut state = self.state.lock();
        let (next, end) = *state;
        let mut at = (next + align - 1) & !(align - 1);
        if next == 0 || at + size > end {
            let len = (size + align).max(ARENA).next_multiple_of(ARENA);
            let Ok(base) = sys::mmap_anon(0, len, sys::PROT_READ | sys::PROT_WRITE, sys::MAP_NORESERVE)
            else {
                return core::ptr::null_mut();
            };
            state.1 = base + len;
            at = (base + align - 1) & !(align - 1);
        }
        state.0 = at + size;
        at as *mut u8
    }

    unsafe fn dealloc(&self, _ptr: *mut u8, _layout: Layout) {}
}

#[global_allocator]
static HEAP: Bump = Bump { state: SpinLock::new((0, 0)) };

#[panic_handler]
fn panic(info: &core::panic::PanicInfo<'_>) -> ! {
    flush();
    sys::write_all(2, b"userland: panic: ");
    struct Err;
    impl Write for Err {
        fn write_str(&mut self, s: &str) -> fmt::Result {
            sys::write_all(2, s.as_bytes());
            Ok(())
        }
    }
    let _ = writeln!(Err, "{info}");
    sys::exit(101)
}
