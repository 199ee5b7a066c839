//! Fallible heap allocation for the user address-space layer: every allocation [`super::VmMap`]
//! and [`super::tree::VmaTree`] make on behalf of a process goes through here, so that running
//! out of kernel heap becomes `ENOMEM` for that process instead of the allocation-failure panic
//! of `Box::new` and `Vec::push`.
//!
//! Why a module and not `try_reserve` sprinkled about: it is the one place a host test can make
//! allocation fail (`fail_after`, test builds only), which is how the tests prove that every system call either
//! completes or fails with `ENOMEM` leaving the map exactly as it was.
use alloc::boxed::Box;
use alloc::vec::Vec;

use super::Errno;

#[cfg(test)]
std::thread_local! {
    /// Test hook: how many more allocations may succeed (`None`: no limit).
    static BUDGET: core::cell::Cell<Option<usize>> = const { core::cell::Cell::new(None) };
}

/// Host tests only: let `n` more allocations succeed on this thread, then fail every one
/// (`None` lifts the limit).
#[cfg(test)]
pub fn fail_after(n: Option<usize>) {
    BUDGET.with(|b| b.set(n));
}

/// Whether the test hook lets one more allocation happen (always true outside tests).
fn allowed() -> bool {
    #[cfg(test)]
    {
        BUDGET.with(|b| match b.get() {
            None => true,
            Some(0) => false,
            Some(n) => {
                b.set(Some(n - 1));
                true
            }
        })
    }
    #[cfg(not(test))]
    true
}

/// `Box::new(value)`, or `None` when the heap cannot hold it (stable Rust has no `Box::try_new`).
pub fn boxed<T>(value: T) -> Option<Box<T>> {
    let layout = core::alloc::Layout::new::<T>();
    if layout.size() == 0 {
        return Some(Box::new(value));
    }
    if !allowed() {
        return None;
    }
    // SAFETY: the layout is not zero-sized (checked above), as `alloc` requires.
    let ptr = unsafe { alloc::alloc::alloc(layout) }.cast::<T>();
    if ptr.is_null() {
        return None;
    }
    // SAFETY: `ptr` is a fresh allocation from the global allocator with `T`'s layout, which is
    // exactly what `Box::from_raw` takes ownership of; it is initialised by the write first.
    unsafe {
        ptr.write(value);
        Some(Box::from_raw(ptr))
    }
}

/// Makes room for `additional` more elements in `v` (`ENOMEM` if the heap cannot).
///
/// # Errors
/// `ENOMEM` when the allocation fails (or the test hook refuses it).
pub fn reserve<T>(v: &mut Vec<T>, additional: usize) -> Result<(), Errno> {
    if v.capacity() - v.len() >= additional {
        return Ok(());
    }
    if !allowed() {
        return Err(Errno::ENOMEM);
    }
    v.try_reserve(additional).map_err(|_| Errno::ENOMEM)
}

/// `v.push(x)`, growing fallibly.
///
/// # Errors
/// `ENOMEM` when growing fails.
pub fn push<T>(v: &mut Vec<T>, x: T) -> Result<(), Errno> {
    if v.len() == v.capacity() {
        // Doubling, as `push` would, so a long build stays amortised O(1).
        reserve(v, v.len().max(4))?;
    }
    v.push(x);
    Ok(())
}
