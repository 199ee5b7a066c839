//! Sets of physical address ranges, for turning "RAM from the device tree, minus the Image, the
//! device tree blob and every reserved range" into the frame allocator's input.
//!
//! Fixed capacity and no allocation, because the kernel computes this before its heap can hold
//! much. Ranges are half-open `[start, end)`, kept sorted, disjoint and coalesced.

/// Error from a [`RegionSet`] operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RegionError {
    /// The set would need more than its capacity of ranges.
    Full,
    /// `start > end`.
    Inverted,
}

/// A set of disjoint half-open ranges with room for `N` of them.
#[derive(Clone, Debug)]
pub struct RegionSet<const N: usize> {
    ranges: [(u64, u64); N],
    len: usize,
}

impl<const N: usize> Default for RegionSet<N> {
    fn default() -> Self {
        Self::new()
    }
}

impl<const N: usize> RegionSet<N> {
    /// An empty set.
    pub const fn new() -> Self {
        Self { ranges: [(0, 0); N], len: 0 }
    }

    /// The ranges, sorted by address.
    pub fn ranges(&self) -> &[(u64, u64)] {
        &self.ranges[..self.len]
    }

    /// Total bytes covered.
    pub fn total(&self) -> u64 {
        self.ranges().iter().map(|&(s, e)| e - s).sum()
    }

    /// Whether `addr` is in the set.
    pub fn contains(&self, addr: u64) -> bool {
        self.ranges().iter().any(|&(s, e)| (s..e).contains(&addr))
    }

    /// Adds `[start, end)`, merging with overlapping or adjacent ranges.
    ///
    /// # Errors
    /// [`RegionError::Inverted`] if `start > end`; [`RegionError::Full`] if the result needs more
    /// than `N` ranges (the set is then unchanged).
    pub fn add(&mut self, start: u64, end: u64) -> Result<(), RegionError> {
        if start > end {
            return Err(RegionError::Inverted);
        }
        if start == end {
            return Ok(());
        }
        // Ranges strictly before (end < start) stay; those touching [start, end] merge.
        let first = self.ranges().iter().position(|&(_, e)| e >= start).unwrap_or(self.len);
        let mut last = first;
        let (mut new_start, mut new_end) = (start, end);
        while last < self.len && self.ranges[last].0 <= end {
            new_start = new_start.min(self.ranges[last].0);
            new_end = new_end.max(self.ranges[last].1);
            last += 1;
        }
        let merged = last - first;
        if merged == 0 && self.len == N {
            return Err(RegionError::Full);
        }
        // Replace ranges[first..last] by the one merged range.
        if merged == 0 {
            self.ranges.copy_within(first..self.len, first + 1);
            self.len += 1;
        } else {
            self.ranges.copy_within(last..self.len, first + 1);
            self.len -= merged - 1;
        }
        self.ranges[first] = (new_start, new_end);
        Ok(())
    }

    /// Removes `[start, end)` from the set.
    ///
    /// # Errors
    /// [`RegionError::Inverted`] if `start > end`; [`RegionError::Full`] if a range would split in
    /// two and there is no room (the set is then unchanged).
    pub fn remove(&mut self, start: u64, end: u64) -> Result<(), RegionError> {
        if start > end {
            return Err(RegionError::Inverted);
        }
        if start == end {
            return Ok(());
        }
        let splits = self.ranges().iter().any(|&(s, e)| s < start && end < e);
        if splits && self.len == N {
            return Err(RegionError::Full);
        }
        let mut out = [(0u64, 0u64); N];
        let mut n = 0;
        for &(s, e) in self.ranges() {
            if e <= start || s >= end {
                out[n] = (s, e);
                n += 1;
                continue;
            }
            if s < start {
                out[n] = (s, start);
                n += 1;
            }
            if end < e {
                out[n] = (end, e);
                n += 1;
            }
        }
        self.ranges = out;
        self.len = n;
        Ok(())
    }

    /// Shrinks every range inward to multiples of `align` (a power of two), dropping those that
    /// become empty: frames must be whole.
    pub fn align_inward(&mut self, align: u64) {
        let mut n = 0;
        for i in 0..self.len {
            let (s, e) = self.ranges[i];
            let s = s.checked_add(align - 1).map_or(u64::MAX, |v| v & !(align - 1));
            let e = e & !(align - 1);
            if s < e {
                self.ranges[n] = (s, e);
                n += 1;
            }
        }
        self.len = n;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::vec::Vec;

    fn model_apply(model: &mut [bool], op: (bool, u64, u64)) {
        let (add, s, e) = op;
        for slot in &mut model[s as usize..e as usize] {
            *slot = add;
        }
    }

    fn model_ranges(model: &[bool]) -> Vec<(u64, u64)> {
        let mut out = Vec::new();
        let mut i = 0;
        while i < model.len() {
            if model[i] {
                let s = i;
                while i < model.len() && model[i] {
                    i += 1;
                }
                out.push((s as u64, i as u64));
            } else {
                i += 1;
            }
        }
        out
    }

    proptest! {
        #[test]
        fn matches_a_bitmap(ops in proptest::collection::vec((any::<bool>(), 0u64..200, 0u64..40), 0..60)) {
            let mut set = RegionSet::<64>::new();
            let mut model = [false; 240];
            for (add, s, len) in ops {
                let e = s + len;
                let before = set.clone();
                let result = if add { set.add(s, e) } else { set.remove(s, e) };
                match result {
                    Ok(()) => model_apply(&mut model, (add, s, e)),
                    Err(RegionError::Full) => prop_assert_eq!(set.ranges(), before.ranges()),
                    Err(e) => prop_assert!(false, "unexpected {:?}", e),
                }
                prop_assert_eq!(set.ranges().to_vec(), model_ranges(&model));
            }
        }
    }

    #[test]
    fn ram_minus_reserved() {
        let mut set = RegionSet::<8>::new();
        set.add(0x4000_0000, 0x4800_0000).unwrap();
        set.remove(0x4020_0000, 0x4060_0000).unwrap(); // the Image
        set.remove(0x4400_0000, 0x4400_2000).unwrap(); // the device tree
        assert_eq!(
            set.ranges(),
            &[(0x4000_0000, 0x4020_0000), (0x4060_0000, 0x4400_0000), (0x4400_2000, 0x4800_0000)]
        );
        assert_eq!(set.total(), 0x0800_0000 - 0x40_0000 - 0x2000);
        assert!(set.contains(0x4000_0000) && !set.contains(0x4020_0000));
    }

    #[test]
    fn full_and_inverted_are_errors() {
        let mut set = RegionSet::<2>::new();
        set.add(0, 10).unwrap();
        set.add(20, 30).unwrap();
        assert_eq!(set.add(40, 50), Err(RegionError::Full));
        assert_eq!(set.remove(2, 4), Err(RegionError::Full));
        assert_eq!(set.ranges(), &[(0, 10), (20, 30)]);
        assert_eq!(set.add(5, 1), Err(RegionError::Inverted));
        set.add(10, 20).unwrap();
        assert_eq!(set.ranges(), &[(0, 30)]);
    }

    #[test]
    fn align_inward_keeps_whole_frames() {
        let mut set = RegionSet::<4>::new();
        set.add(0x1001, 0x5fff).unwrap();
        set.add(0x8000, 0x8800).unwrap();
        set.align_inward(0x1000);
        assert_eq!(set.ranges(), &[(0x2000, 0x5000)]);
    }
}
