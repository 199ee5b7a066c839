//! The user-space demo: a static arm64 program with no libc that speaks only the Linux syscall
//! ABI, so the same binary runs on this kernel and on arm64 Linux.
//!
//! Until the user-space issue lands this is a stub that prints one line and exits 0; the code
//! window and near-placement modes come with it.
#![no_std]
#![no_main]

use core::arch::asm;

const SYS_WRITE: u64 = 64;
const SYS_EXIT_GROUP: u64 = 94;

fn write(fd: u64, bytes: &[u8]) -> i64 {
    let ret: i64;
    // SAFETY: the Linux `write` system call reads `len` bytes from a valid buffer we own.
    unsafe {
        asm!("svc #0", inlateout("x0") fd => ret, in("x1") bytes.as_ptr(), in("x2") bytes.len(),
             in("x8") SYS_WRITE, options(nostack));
    }
    ret
}

fn exit(code: u64) -> ! {
    // SAFETY: `exit_group` does not return.
    unsafe { asm!("svc #0", in("x0") code, in("x8") SYS_EXIT_GROUP, options(noreturn, nostack)) }
}

/// Entry point: the kernel (or Linux) jumps here with SP at argc.
#[unsafe(no_mangle)]
extern "C" fn _start() -> ! {
    write(1, b"userland: stub (the demo modes arrive with the user-space issue)\n");
    exit(0)
}

#[panic_handler]
fn panic(_: &core::panic::PanicInfo<'_>) -> ! {
    write(2, b"userland: panic\n");
    exit(101)
}
