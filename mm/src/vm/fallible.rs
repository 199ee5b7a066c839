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

/// A list that keeps up to `N` elements in place and moves to the heap, fallibly, only beyond:
/// what the common calls return (the one piece a `munmap` removes, the one change an `mprotect`
/// makes) then costs no allocation. Reads and writes go through the slice it dereferences to.
#[derive(Clone)]
pub struct List<T: Copy + Default, const N: usize> {
    /// How many places of `inline` are used, or [`SPILLED`] once the list lives in `heap`. Not
    /// `!heap.is_empty()`: a list truncated on the heap to nothing stays there, and the stale
    /// places in `inline` must not come back. Not a `bool` of its own either: its seven bytes
    /// of padding made every move of a list (mprotect's pieces, its answer) end in a `memcpy`
    /// call of them on the kernel's strict-alignment target.
    len: usize,
    inline: [T; N],
    /// Every element once the list outgrew `inline` (then `inline` is unused).
    heap: Vec<T>,
}

/// [`List::len`]'s value once the list lives on the heap.
const SPILLED: usize = usize::MAX;

impl<T: Copy + Default, const N: usize> List<T, N> {
    /// An empty list.
    pub fn new() -> Self {
        List { len: 0, inline: [T::default(); N], heap: Vec::new() }
    }

    /// A list of the one element `x`, in place (nothing allocated: `N` is at least 1).
    pub fn one(x: T) -> Self {
        const { assert!(N >= 1, "a list with no place in line") };
        let mut l = Self::new();
        l.inline[0] = x;
        l.len = 1;
        l
    }

    /// Appends `x`, moving the list to the heap when it outgrows its `N` places.
    ///
    /// # Errors
    /// `ENOMEM` when the heap cannot hold the list (the list is unchanged).
    pub fn push(&mut self, x: T) -> Result<(), Errno> {
        if self.len != SPILLED {
            if self.len < N {
                self.inline[self.len] = x;
                self.len += 1;
                return Ok(());
            }
            reserve(&mut self.heap, 2 * N + 1)?;
            self.heap.extend_from_slice(&self.inline[..self.len]);
            self.len = SPILLED;
        }
        push(&mut self.heap, x)
    }

    /// Keeps the first `n` elements.
    pub fn truncate(&mut self, n: usize) {
        if self.len == SPILLED {
            self.heap.truncate(n);
        } else {
            self.len = self.len.min(n);
        }
    }

    /// The elements, as a slice.
    #[inline]
    pub fn as_slice(&self) -> &[T] {
        if self.len == SPILLED { &self.heap } else { &self.inline[..self.len] }
    }

    /// The elements, as a mutable slice.
    #[inline]
    pub fn as_mut_slice(&mut self) -> &mut [T] {
        if self.len == SPILLED { &mut self.heap } else { &mut self.inline[..self.len] }
    }
}

impl<T: Copy + Default, const N: usize> Default for List<T, N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<T: Copy + Default, const N: usize> core::ops::Deref for List<T, N> {
    type Target = [T];
    #[inline]
    fn deref(&self) -> &[T] {
        self.as_slice()
    }
}

impl<T: Copy + Default, const N: usize> core::ops::DerefMut for List<T, N> {
    #[inline]
    fn deref_mut(&mut self) -> &mut [T] {
        self.as_mut_slice()
    }
}

impl<T: Copy + Default + core::fmt::Debug, const N: usize> core::fmt::Debug for List<T, N> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_list().entries(self.as_slice()).finish()
    }
}

impl<T: Copy + Default + PartialEq, const N: usize> PartialEq for List<T, N> {
    fn eq(&self, other: &Self) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<T: Copy + Default + Eq, const N: usize> Eq for List<T, N> {}

impl<T: Copy + Default + PartialEq, const N: usize, const M: usize> PartialEq<[T; M]> for List<T, N> {
    fn eq(&self, other: &[T; M]) -> bool {
        self.as_slice() == other.as_slice()
    }
}

impl<'a, T: Copy + Default, const N: usize> IntoIterator for &'a List<T, N> {
    type Item = &'a T;
    type IntoIter = core::slice::Iter<'a, T>;
    fn into_iter(self) -> Self::IntoIter {
        self.as_slice().iter()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::format;

    #[test]
    fn a_list_stays_in_place_up_to_its_size_then_moves_to_the_heap_in_order() {
        let mut l: List<u32, 2> = List::new();
        assert!(l.is_empty());
        fail_after(Some(0));
        l.push(1).unwrap();
        l.push(2).unwrap();
        assert_eq!(l, [1, 2], "two elements need no allocation");
        assert_eq!(l.push(3), Err(Errno::ENOMEM), "the third needs the heap, which refuses");
        assert_eq!(l, [1, 2], "a refused push changes nothing");
        fail_after(None);
        for x in 3..10 {
            l.push(x).unwrap();
        }
        assert_eq!(l.as_slice(), &[1, 2, 3, 4, 5, 6, 7, 8, 9]);
        l[0] = 7;
        l.truncate(3);
        assert_eq!(l, [7, 2, 3]);
        let mut s: List<u32, 2> = List::new();
        s.push(5).unwrap();
        s.push(6).unwrap();
        s.truncate(1);
        assert_eq!(s.iter().copied().collect::<Vec<_>>(), [5]);
        s.truncate(4);
        assert_eq!(format!("{s:?}"), "[5]");
    }

    #[test]
    fn a_list_truncated_on_the_heap_keeps_only_its_first_elements() {
        // Once on the heap, the elements left in place are stale: truncating to nothing or to
        // fewer than `N` must not bring them back (the map-count limit test found an mprotect
        // refusal at its first piece rewriting that piece anyway).
        for n in 0..4 {
            let mut l: List<u32, 2> = List::new();
            for x in 1..=3 {
                l.push(x).unwrap();
            }
            l.truncate(n);
            let kept: Vec<u32> = (1..=3).take(n).collect();
            assert_eq!(l.as_slice(), kept.as_slice(), "truncate({n})");
            assert_eq!(l.len(), n.min(3));
            l.push(9).unwrap();
            assert_eq!(l.last(), Some(&9), "a push after truncate({n}) appends");
            assert_eq!(l.len(), n.min(3) + 1);
        }
    }
}
