//! Strong types for addresses, so that a physical address is never used where a virtual one is
//! meant (the commonest bug in page-table code) and page alignment is checked in one place.

use crate::granule::Format;
use core::fmt;

/// log2 of the translation granule (12: 4 KiB), from the build's [`Format`]. The tables take
/// the granule from here; [`crate::granule`] has the other granules.
pub const PAGE_SHIFT: u32 = Format::BUILD.granule.shift();
/// Size of a translation granule (a "page") in bytes.
pub const PAGE_SIZE: u64 = 1 << PAGE_SHIFT;
/// Size of a level-2 block: 2 MiB with the 4 KiB granule (the name), 32 MiB with 16 KiB, 512 MiB
/// with 64 KiB.
pub const BLOCK_2M: u64 = Format::BUILD.block_size(2).unwrap();
/// The span of a level-1 entry: 1 GiB with the 4 KiB granule (the name), where it may be a
/// block; 64 GiB with 16 KiB and 4 TiB with 64 KiB, where it is never a block (48-bit addresses).
pub const BLOCK_1G: u64 = Format::BUILD.entry_span(1);
/// Number of virtual-address bits one translation tree ([`crate::paging::PageTable`]) covers:
/// 48 (4 levels of 9 bits + 12). With the `lpa2` feature, 52 with 16 KiB pages (the level-0
/// root grows to 32 entries) and still 48 with 4 KiB pages, where a 52-bit TTBR has a level −1
/// table of 16 such trees ([`crate::paging::lpa2`]).
pub const VA_BITS: u32 = if Format::BUILD.start_level() < 0 { 48 } else { Format::BUILD.va_bits() };
/// Bits of user virtual address (`TASK_SIZE` = `2^USER_VA_BITS`): 48 in every build. As on
/// Linux, a 52-bit build keeps user space below 2^48 (Linux's `DEFAULT_MAP_WINDOW`).
pub const USER_VA_BITS: u32 = 48;
/// Number of physical-address bits a descriptor can hold without FEAT_LPA/LPA2.
pub const PA_BITS: u32 = Format::BUILD.pa_bits();

macro_rules! address_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
        #[repr(transparent)]
        pub struct $name(pub u64);

        impl $name {
            /// The raw value.
            #[inline]
            pub const fn as_u64(self) -> u64 {
                self.0
            }
            /// Whether the address is a multiple of `align` (a power of two).
            #[inline]
            pub const fn is_aligned(self, align: u64) -> bool {
                self.0 & (align - 1) == 0
            }
            /// Whether the address is page-aligned.
            #[inline]
            pub const fn is_page_aligned(self) -> bool {
                self.is_aligned(PAGE_SIZE)
            }
            /// Rounds down to a multiple of `align` (a power of two).
            #[inline]
            pub const fn align_down(self, align: u64) -> Self {
                Self(self.0 & !(align - 1))
            }
            /// Rounds up to a multiple of `align` (a power of two); `None` on overflow.
            #[inline]
            pub const fn checked_align_up(self, align: u64) -> Option<Self> {
                match self.0.checked_add(align - 1) {
                    Some(v) => Some(Self(v & !(align - 1))),
                    None => None,
                }
            }
            /// `self + bytes`, or `None` on overflow.
            #[inline]
            pub const fn checked_add(self, bytes: u64) -> Option<Self> {
                match self.0.checked_add(bytes) {
                    Some(v) => Some(Self(v)),
                    None => None,
                }
            }
            /// `self + bytes`, wrapping (for address arithmetic known not to overflow).
            #[inline]
            pub const fn wrapping_add(self, bytes: u64) -> Self {
                Self(self.0.wrapping_add(bytes))
            }
        }

        impl fmt::Debug for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, concat!(stringify!($name), "({:#x})"), self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "{:#x}", self.0)
            }
        }
    };
}

address_type!(
    /// A physical (output) address.
    PhysAddr
);
address_type!(
    /// A virtual (input) address, as the CPU issues it: for TTBR1 the top 16 bits are all ones.
    VirtAddr
);

impl VirtAddr {
    /// Whether a 48-bit translation regime can translate the address: bits `[63:48]` all zero
    /// (TTBR0, the lower 256 TiB) or all one (TTBR1, the upper 256 TiB). Unlike x86, bit 47 need
    /// not match them.
    #[inline]
    pub const fn is_canonical(self) -> bool {
        let top = self.0 >> VA_BITS;
        top == 0 || top == (u64::MAX >> VA_BITS)
    }

    /// Whether the address belongs to the upper range (TTBR1, the kernel's half).
    #[inline]
    pub const fn is_upper(self) -> bool {
        self.0 >> 63 == 1
    }

    /// Index into the table at `level` (0..=3) for this address.
    #[inline]
    pub const fn table_index(self, level: u32) -> usize {
        Format::BUILD.table_index(self.0, level as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn canonical_and_upper() {
        assert!(VirtAddr(0).is_canonical());
        assert!(VirtAddr(0x0000_7fff_ffff_f000).is_canonical());
        assert!(VirtAddr(0x0000_8000_0000_0000).is_canonical()); // TTBR0, bit 47 set
        assert!(!VirtAddr(0x0001_0000_0000_0000).is_canonical());
        assert!(VirtAddr(0xffff_8000_0000_0000).is_canonical());
        assert!(!VirtAddr(0xfffe_ffff_ffff_f000).is_canonical());
        assert!(VirtAddr(0xffff_0000_0000_0000).is_upper());
        assert!(!VirtAddr(0x0000_7fff_ffff_f000).is_upper());
    }

    /// Each level's index comes from its own bits of the VA: indices 3, 5, 7 and 11 (each level
    /// that the build's format has; the top table of 16 KiB pages has 2 entries, so its index is
    /// 3 mod 2), and the top index of all ones is the top table's last entry.
    #[test]
    fn indices() {
        let f = Format::BUILD;
        let want = |level: i32| [3usize, 5, 7, 11][level as usize] % f.entries(level);
        let root = crate::paging::ROOT_LEVEL as i32;
        let levels = root..=3;
        let va = levels.clone().map(|l| (want(l) as u64) << f.granule.level_shift(l)).sum::<u64>();
        for level in levels {
            assert_eq!(VirtAddr(va).table_index(level as u32), want(level), "level {level}");
        }
        if f == Format::K4 {
            assert_eq!(va, (1 << 39) * 3 + (1 << 30) * 5 + (1 << 21) * 7 + (1 << 12) * 11);
        }
        if !f.bits52 {
            let top = crate::test_support::per_granule(511, 1, 63);
            assert_eq!(VirtAddr(u64::MAX).table_index(root as u32), top);
        }
    }

    #[test]
    fn alignment() {
        let sizes =
            crate::test_support::per_granule((4 << 10, 2 << 20), (16 << 10, 32 << 20), (64 << 10, 512 << 20));
        assert_eq!((PAGE_SIZE, BLOCK_2M), sizes, "the build's page and level-2 block");
        let block = BLOCK_2M;
        assert!(PhysAddr(block).is_aligned(BLOCK_2M));
        assert!(!PhysAddr(block + PAGE_SIZE).is_aligned(BLOCK_2M));
        assert!(PhysAddr(block + PAGE_SIZE).is_page_aligned());
        assert!(!PhysAddr(block + PAGE_SIZE / 2).is_page_aligned());
        assert_eq!(PhysAddr(block + 2 * PAGE_SIZE - 1).align_down(PAGE_SIZE), PhysAddr(block + PAGE_SIZE));
        assert_eq!(
            PhysAddr(block + PAGE_SIZE + 1).checked_align_up(PAGE_SIZE),
            Some(PhysAddr(block + 2 * PAGE_SIZE))
        );
        assert_eq!(PhysAddr(u64::MAX).checked_align_up(PAGE_SIZE), None);
        assert_eq!(VirtAddr(u64::MAX).checked_add(1), None);
    }
}
