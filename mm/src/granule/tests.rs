//! The numbers of every format, written out as literals from the Arm ARM tables (not computed
//! the way `granule.rs` computes them), and round trips of the output-address layouts.

use super::{Format, Granule};

// The guard a user of the crate writes compiles for the build's own format, in every build
// (`assert_build_format!`; its documentation has the `compile_fail` case).
#[cfg(not(any(feature = "granule-16k", feature = "granule-64k", feature = "lpa2")))]
crate::assert_build_format!(K4);
#[cfg(all(feature = "lpa2", not(any(feature = "granule-16k", feature = "granule-64k"))))]
crate::assert_build_format!(K4_LPA2);
#[cfg(all(feature = "granule-16k", not(feature = "lpa2")))]
crate::assert_build_format!(K16);
#[cfg(all(feature = "granule-16k", feature = "lpa2"))]
crate::assert_build_format!(K16_LPA2);
#[cfg(feature = "granule-64k")]
crate::assert_build_format!(K64);

const KIB: u64 = 1 << 10;
const MIB: u64 = 1 << 20;
const GIB: u64 = 1 << 30;
const TIB: u64 = 1 << 40;

#[test]
fn granule_numbers() {
    // (granule, shift, index bits, entries, TG0, TG1, TLBI TG)
    let rows = [
        (Granule::K4, 12, 9, 512, 0b00, 0b10, 0b01),
        (Granule::K16, 14, 11, 2048, 0b10, 0b01, 0b10),
        (Granule::K64, 16, 13, 8192, 0b01, 0b11, 0b11),
    ];
    for (g, shift, bits, entries, tg0, tg1, tg) in rows {
        assert_eq!((g.shift(), g.size(), g.index_bits(), g.entries()), (shift, 1 << shift, bits, entries));
        assert_eq!((g.tcr_tg0(), g.tcr_tg1(), g.tlbi_tg()), (tg0, tg1, tg), "{g:?}");
        assert_eq!(Granule::from_tlbi_tg(tg), Some(g));
    }
    assert_eq!(Granule::from_tlbi_tg(0), None);
    // The level shifts: the VA bit each level's index starts at.
    assert_eq!([0, 1, 2, 3].map(|l| Granule::K4.level_shift(l)), [39, 30, 21, 12]);
    assert_eq!(Granule::K4.level_shift(-1), 48);
    assert_eq!([0, 1, 2, 3].map(|l| Granule::K16.level_shift(l)), [47, 36, 25, 14]);
    assert_eq!([1, 2, 3].map(|l| Granule::K64.level_shift(l)), [42, 29, 16]);
}

#[test]
fn contiguous_runs() {
    let run =
        |g: Granule, level: i32| g.contiguous_entries(level).map(|n| u64::from(n) << g.level_shift(level));
    assert_eq!((run(Granule::K4, 3), run(Granule::K4, 2)), (Some(64 * KIB), Some(32 * MIB)));
    assert_eq!((run(Granule::K16, 3), run(Granule::K16, 2)), (Some(2 * MIB), Some(GIB)));
    assert_eq!((run(Granule::K64, 3), run(Granule::K64, 2)), (Some(2 * MIB), Some(16 * GIB)));
    assert_eq!(Granule::K16.contiguous_entries(3), Some(128));
    assert_eq!(Granule::K64.contiguous_entries(3), Some(32));
    for g in Granule::ALL {
        assert_eq!(g.contiguous_entries(1), None, "{g:?}");
        assert_eq!(g.contiguous_entries(0), None, "{g:?}");
    }
}

#[test]
fn levels_and_top_tables() {
    // (format, VA bits, PA bits, DS, start level, levels, top-level entries)
    let rows = [
        (Format::K4, 48, 48, false, 0, 4, 512),
        (Format::K4_LPA2, 52, 52, true, -1, 5, 16),
        (Format::K16, 48, 48, false, 0, 4, 2),
        (Format::K16_LPA2, 52, 52, true, 0, 4, 32),
        (Format::K64, 48, 48, false, 1, 3, 64),
        (Format::K64_52, 52, 52, false, 1, 3, 1024),
    ];
    for (f, va, pa, ds, start, levels, top) in rows {
        let got = (f.va_bits(), f.pa_bits(), f.ds(), f.start_level(), f.levels(), f.top_entries());
        assert_eq!(got, (va, pa, ds, start, levels, top), "{}", f.name());
        // The top table and the full ones below it resolve exactly va_bits − page shift bits.
        let mut bits = 0;
        for level in f.start_level()..=3 {
            bits += f.entries(level).trailing_zeros();
        }
        assert_eq!(bits + f.granule.shift(), f.va_bits(), "{}", f.name());
    }
    // The build's format follows the features (4 KiB by default; `lpa2` adds 52-bit addresses
    // to the 4 KiB or 16 KiB granule).
    let build = match (cfg!(feature = "granule-64k"), cfg!(feature = "granule-16k"), cfg!(feature = "lpa2")) {
        (true, _, _) => Format::K64,
        (false, true, false) => Format::K16,
        (false, true, true) => Format::K16_LPA2,
        (false, false, false) => Format::K4,
        (false, false, true) => Format::K4_LPA2,
    };
    assert_eq!(Format::BUILD, build);
    assert_eq!(Format::ALL.map(Format::name), ["4K", "4K-LPA2", "16K", "16K-LPA2", "64K", "64K-52"]);
}

#[test]
fn indices() {
    // 4K: the split 9/9/9/9/12.
    let va = (3u64 << 39) | (5 << 30) | (7 << 21) | (11 << 12) | 0x123;
    assert_eq!([0, 1, 2, 3].map(|l| Format::K4.table_index(va, l)), [3, 5, 7, 11]);
    assert_eq!(Format::K4.table_index(u64::MAX, 0), 511);
    assert_eq!(Format::K4_LPA2.table_index(u64::MAX, -1), 15);
    assert_eq!(Format::K4_LPA2.table_index(u64::MAX, 0), 511);
    // 16K: 1/11/11/11/14; with 52 bits the top index is 5 bits.
    let va = (1u64 << 47) | (2047 << 36) | (6 << 25) | (9 << 14);
    assert_eq!([0, 1, 2, 3].map(|l| Format::K16.table_index(va, l)), [1, 2047, 6, 9]);
    assert_eq!(Format::K16.table_index(u64::MAX, 0), 1);
    assert_eq!(Format::K16_LPA2.table_index(u64::MAX, 0), 31);
    // 64K: 6/13/13/16; 10 top bits with 52.
    let va = (33u64 << 42) | (8191 << 29) | (4 << 16);
    assert_eq!([1, 2, 3].map(|l| Format::K64.table_index(va, l)), [33, 8191, 4]);
    assert_eq!(Format::K64_52.table_index(u64::MAX, 1), 1023);
}

#[test]
fn block_sizes() {
    // (format, [level 0, level 1, level 2]) block sizes; level 3 is a page in every format.
    let rows = [
        (Format::K4, [None, Some(GIB), Some(2 * MIB)]),
        (Format::K4_LPA2, [Some(512 * GIB), Some(GIB), Some(2 * MIB)]),
        (Format::K16, [None, None, Some(32 * MIB)]),
        (Format::K16_LPA2, [None, Some(64 * GIB), Some(32 * MIB)]),
        (Format::K64, [None, None, Some(512 * MIB)]),
        (Format::K64_52, [None, Some(4 * TIB), Some(512 * MIB)]),
    ];
    for (f, sizes) in rows {
        assert_eq!([0, 1, 2].map(|l| f.block_size(l)), sizes, "{}", f.name());
        assert_eq!(f.block_size(3), None, "level 3 holds pages, not blocks");
        assert_eq!(f.block_size(-1), None);
        assert!(f.leaf_allowed(3));
        for level in 0..3 {
            assert_eq!(f.leaf_allowed(level), sizes[level as usize].is_some());
        }
    }
}

#[test]
fn ttl_hints() {
    assert_eq!([1, 2, 3].map(|l| Format::K4.ttl(l)), [Some(0b0101), Some(0b0110), Some(0b0111)]);
    assert_eq!(Format::K4.ttl(0), None, "0b0100 is reserved without LPA2");
    assert_eq!(Format::K4_LPA2.ttl(0), Some(0b0100));
    assert_eq!([1, 2, 3].map(|l| Format::K16.ttl(l)), [Some(0b1001), Some(0b1010), Some(0b1011)]);
    assert_eq!(Format::K16_LPA2.ttl(0), None);
    assert_eq!([1, 2, 3].map(|l| Format::K64_52.ttl(l)), [Some(0b1101), Some(0b1110), Some(0b1111)]);
    assert_eq!(Format::K64.ttl(0), None);
    assert_eq!(Format::K4_LPA2.ttl(-1), None);
}

#[test]
fn range_base_units() {
    let shifts = Format::ALL.map(Format::range_base_shift);
    assert_eq!(shifts, [12, 16, 14, 16, 16, 16]);
}

#[test]
fn output_address_layouts() {
    // The field masks, as the Arm ARM draws them for a page descriptor.
    assert_eq!(Format::K4.oa_field_mask(12), 0x0000_ffff_ffff_f000);
    assert_eq!(Format::K16.oa_field_mask(14), 0x0000_ffff_ffff_c000);
    assert_eq!(Format::K64.oa_field_mask(16), 0x0000_ffff_ffff_0000);
    assert_eq!(Format::K4_LPA2.oa_field_mask(12), 0x0003_ffff_ffff_f300);
    assert_eq!(Format::K16_LPA2.oa_field_mask(14), 0x0003_ffff_ffff_c300);
    assert_eq!(Format::K64_52.oa_field_mask(16), 0x0000_ffff_ffff_f000);
    // A 2 MiB block of the 4K format: [47:21].
    assert_eq!(Format::K4.oa_field_mask(21), 0x0000_ffff_ffe0_0000);
    // The top PA bits land where the architecture puts them.
    let top = 0x000f_0000_0000_0000u64; // PA[51:48]
    assert_eq!(Format::K64_52.encode_oa(top, 16), 0xf << 12);
    assert_eq!(Format::K4_LPA2.encode_oa(0x000c_0000_0000_0000, 12), 0b11 << 8); // PA[51:50]
    assert_eq!(Format::K16_LPA2.encode_oa(0x0003_0000_0000_0000, 14), 0x0003_0000_0000_0000);
    // Round trips: every aligned PA below 2^pa_bits comes back, at every leaf size.
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    for f in Format::ALL {
        for level in 0..=3 {
            if !f.leaf_allowed(level) {
                continue;
            }
            let shift = f.granule.level_shift(level);
            for i in 0..2000 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let pa = match i {
                    0 => 0,
                    1 => ((1u64 << f.pa_bits()) - 1) & !((1 << shift) - 1),
                    _ => x & ((1u64 << f.pa_bits()) - 1) & !((1 << shift) - 1),
                };
                assert!(f.oa_fits(pa, shift));
                let bits = f.encode_oa(pa, shift);
                assert_eq!(bits & !f.oa_field_mask(shift), 0, "{} {pa:#x}", f.name());
                assert_eq!(f.decode_oa(bits, shift), pa, "{} level {level} {pa:#x}", f.name());
                // Attribute bits around the field never change the address.
                let noise = !f.oa_field_mask(shift);
                assert_eq!(f.decode_oa(bits | noise, shift), pa, "{} {pa:#x}", f.name());
            }
            assert!(!f.oa_fits(1 << f.pa_bits(), shift), "{}", f.name());
            assert!(!f.oa_fits(1 << (shift - 1), shift));
        }
    }
    // 48-bit formats keep no address bits above 47, and 52-bit ones no gap in [51:0].
    assert_eq!(Format::K4.decode_oa(u64::MAX, 12), 0x0000_ffff_ffff_f000);
    assert_eq!(Format::K4_LPA2.decode_oa(u64::MAX, 12), 0x000f_ffff_ffff_f000);
    assert_eq!(Format::K16_LPA2.decode_oa(u64::MAX, 14), 0x000f_ffff_ffff_c000);
    assert_eq!(Format::K64_52.decode_oa(u64::MAX, 16), 0x000f_ffff_ffff_0000);
}

#[test]
fn ttbr_holds_table_address_bits_51_to_48_in_bits_5_to_2() {
    // A table at 0xa_bcde_f012_3000 (above 2^48) and at a 64-byte line of a 4 KiB page, as the
    // Arm ARM's TTBR0_EL1 BADDR layout with a 52-bit OA puts them: [47:6] in place, [51:48] at
    // [5:2]. Literal expectations, not the encoding's own arithmetic.
    let high = 0x000a_bcde_f012_3000;
    for f in [Format::K4_LPA2, Format::K16_LPA2, Format::K64_52] {
        assert_eq!(f.ttbr_baddr(high), 0x0000_bcde_f012_3000 | 0xa << 2, "{}", f.name());
        assert_eq!(f.ttbr_baddr(0x000f_0000_0000_0040), 0x40 | 0b11_1100, "{}", f.name());
        assert_eq!(f.ttbr_baddr(0x0001_0000_0000_0000), 0b100, "{}", f.name());
        // The highest table a 52-bit TTBR can name, and one below 2^48 (unchanged).
        assert_eq!(f.ttbr_baddr(0x000f_ffff_ffff_ffc0), 0x0000_ffff_ffff_fffc, "{}", f.name());
        assert_eq!(f.ttbr_baddr(0x4008_0000), 0x4008_0000, "{}", f.name());
        // Back again, whatever the ASID and CnP say.
        for table in [high, 0x000f_ffff_ffff_ffc0, 0x0001_0000_0000_0000, 0x4008_0000, 0] {
            let ttbr = f.ttbr_baddr(table) | 0xbeef << 48 | 1;
            assert_eq!(f.ttbr_table(ttbr), table, "{} {table:#x}", f.name());
        }
    }
    // With 48-bit addresses BADDR is [47:1]: bits 51:48 have nowhere to go, and the low bits of
    // a small top table's address (16 KiB pages: a 2-entry, 16-byte level 0) stay in place.
    for f in [Format::K4, Format::K16, Format::K64] {
        assert_eq!(f.ttbr_baddr(0x0000_bcde_f012_3000), 0x0000_bcde_f012_3000, "{}", f.name());
        assert_eq!(f.ttbr_baddr(0x4000_0010), 0x4000_0010, "{}", f.name());
        assert_eq!(f.ttbr_baddr(high), 0x0000_bcde_f012_3000, "{}", f.name());
        assert_eq!(f.ttbr_table(0x0000_bcde_f012_303c | 0x1234 << 48), 0x0000_bcde_f012_303c, "{}", f.name());
    }
}
