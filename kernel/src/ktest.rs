//! The in-kernel test framework, on stable Rust.
//!
//! `custom_test_frameworks` is nightly-only, so tests register themselves the way Asterinas'
//! `#[ktest]` does: [`kernel_test!`](crate::kernel_test) places a [`KernelTest`] descriptor in the `.kernel_tests`
//! linker section, and the runner walks the array between `__kernel_tests_start` and
//! `__kernel_tests_end` (linker.ld). A test returns `Err(message)` to fail; [`ensure!`](crate::ensure) and
//! [`ensure_eq!`](crate::ensure_eq) build those. The run ends with `N passed, N failed` and the exit status.
use alloc::string::String;
use core::sync::atomic::{AtomicUsize, Ordering};

use crate::{cprintln, exit};

/// Result of one test.
pub type TestResult = Result<(), String>;

/// One registered test.
#[repr(C)]
pub struct KernelTest {
    /// `module::name`.
    pub name: &'static str,
    /// The test.
    pub run: fn() -> TestResult,
}

/// Registers a kernel test: `kernel_test!(fn name() { ...; Ok(()) });`.
#[macro_export]
macro_rules! kernel_test {
    (fn $name:ident() $body:block) => {
        fn $name() -> $crate::ktest::TestResult $body
        const _: () = {
            #[unsafe(link_section = ".kernel_tests")]
            #[used]
            static TEST: $crate::ktest::KernelTest = $crate::ktest::KernelTest {
                name: concat!(module_path!(), "::", stringify!($name)),
                run: $name,
            };
        };
    };
}

/// Fails the test with a message unless `cond` holds.
#[macro_export]
macro_rules! ensure {
    ($cond:expr, $($arg:tt)+) => {
        if !$cond {
            return Err(alloc::format!("{} ({}:{})", format_args!($($arg)+), file!(), line!()));
        }
    };
    ($cond:expr) => { $crate::ensure!($cond, "{}", stringify!($cond)) };
}

/// Fails the test unless the two values are equal, showing both (and a context message).
#[macro_export]
macro_rules! ensure_eq {
    ($left:expr, $right:expr $(,)?) => {
        $crate::ensure_eq!($left, $right, "")
    };
    ($left:expr, $right:expr, $what:expr $(,)?) => {{
        let (l, r) = (&$left, &$right);
        if l != r {
            return Err(alloc::format!(
                "{}{}{} == {} failed: {:?} != {:?} ({}:{})",
                $what,
                if $what.is_empty() { "" } else { ": " },
                stringify!($left),
                stringify!($right),
                l,
                r,
                file!(),
                line!()
            ));
        }
    }};
}

fn tests() -> &'static [KernelTest] {
    unsafe extern "C" {
        static __kernel_tests_start: u8;
        static __kernel_tests_end: u8;
    }
    let start = (&raw const __kernel_tests_start).cast::<KernelTest>();
    let end = (&raw const __kernel_tests_end).cast::<KernelTest>();
    let count = (end as usize - start as usize) / core::mem::size_of::<KernelTest>();
    // SAFETY: the linker script gathers every `.kernel_tests` entry between the two symbols; each
    // is a `KernelTest` static of the same layout and alignment, laid out back to back.
    unsafe { core::slice::from_raw_parts(start, count) }
}

/// The test running now, for the panic handler.
pub static CURRENT: spin::Mutex<Option<&'static str>> = spin::Mutex::new(None);
/// Tests passed so far (the panic handler prints the summary if a test panics).
pub static PASSED: AtomicUsize = AtomicUsize::new(0);
/// Tests failed so far.
pub static FAILED: AtomicUsize = AtomicUsize::new(0);

/// Runs every registered test whose name contains `filter`, prints the summary line and ends the
/// run: status 0 only when all passed.
pub fn run_all(filter: Option<&str>) -> ! {
    let all = tests();
    cprintln!("running {} kernel tests", all.len());
    for test in all {
        if filter.is_some_and(|f| !test.name.contains(f)) {
            continue;
        }
        // Tests named `floods_*` run for seconds (65,530 mappings, thousands of threads) and scale
        // with the machine: they run only where the command line names them (`test=floods`), in
        // the suite's dedicated configurations, not in every configuration of the matrix.
        if test.name.contains("::floods_") && filter.is_none_or(|f| !f.contains("floods")) {
            cprintln!("test {} ... skipped (run with test=floods)", test.name);
            continue;
        }
        *CURRENT.lock() = Some(test.name);
        let started = crate::arch::time::counter();
        let result = (test.run)();
        let us = crate::arch::time::ticks_to_us(crate::arch::time::counter() - started);
        *CURRENT.lock() = None;
        match result {
            Ok(()) => {
                PASSED.fetch_add(1, Ordering::Relaxed);
                cprintln!("test {} ... ok ({} us)", test.name, us);
            }
            Err(why) => {
                FAILED.fetch_add(1, Ordering::Relaxed);
                cprintln!("test {} ... FAILED: {}", test.name, why);
            }
        }
    }
    let (passed, failed) = (PASSED.load(Ordering::Relaxed), FAILED.load(Ordering::Relaxed));
    cprintln!("{} passed, {} failed", passed, failed);
    crate::console::end_run(if failed == 0 { 0 } else { exit::FAILURE })
}
