//! The translation regime of the build's granule (`arch::aarch64::translation`): what the boot CPU runs
//! with, checked against the architecture's numbers written out here as literals per page size
//! (not through the mm crate's encoding functions, which the boot code uses), the CPU check on
//! made-up ID register values, and the Image's page-granular layout as the MMU sees it.
use aarch64_cpu::registers::{ID_AA64MMFR0_EL1, Readable, TCR_EL1, TTBR1_EL1};
use mm::addr::PAGE_SIZE;

use crate::arch::aarch64::translation::{granule_supported, tcr_el1, ttbr, ttbr_table};
use crate::arch::mmu::translate;
use crate::memory::kernel_map;
use crate::memory::layout;
use crate::{ensure, ensure_eq, kernel_test};

/// (TG0, TG1, Image flags bits 1-2) for the build's page size: Arm ARM D19.2 `TCR_EL1` (TG0:
/// 0b00 4 KiB, 0b10 16 KiB, 0b01 64 KiB; TG1: 0b10 4 KiB, 0b01 16 KiB, 0b11 64 KiB) and Linux
/// booting.rst (1, 2, 3).
fn expected_encodings() -> (u64, u64, u64) {
    match PAGE_SIZE {
        4096 => (0b00, 0b10, 1),
        16384 => (0b10, 0b01, 2),
        _ => (0b01, 0b11, 3),
    }
}

kernel_test!(
    fn tcr_el1_selects_the_builds_granule_in_both_halves() {
        let tcr = TCR_EL1.get();
        let (tg0, tg1, _) = expected_encodings();
        ensure_eq!((tcr >> 14) & 0b11, tg0, "TG0");
        ensure_eq!((tcr >> 30) & 0b11, tg1, "TG1");
        // 48-bit VAs in both halves; the lpa2 build's kernel half has 52 (its own tests check it).
        #[cfg(not(feature = "lpa2"))]
        ensure_eq!((tcr & 0x3f, (tcr >> 16) & 0x3f), (16, 16), "T0SZ, T1SZ: 48-bit VAs");
        #[cfg(feature = "lpa2")]
        ensure_eq!((tcr & 0x3f, (tcr >> 16) & 0x3f), (mm::paging::lpa2::T0SZ, 12), "T0SZ, T1SZ");
        // What the boot wrote, but for EPD0 (bit 7), which the kernel sets while no process runs.
        ensure_eq!(tcr & !(1 << 7), tcr_el1(ID_AA64MMFR0_EL1.get()));
        Ok(())
    }
);

kernel_test!(
    fn the_granule_check_refuses_only_a_cpu_without_the_builds_granule() {
        // TGran4 [31:28] (0b1111 absent, 0b0001 with 52 bits), TGran64 [27:24] (0b1111 absent),
        // TGran16 [23:20] (0b0000 absent, 0b0010 with 52 bits).
        let field = |shift: u32, value: u64| value << shift;
        let all = field(28, 0) | field(24, 0) | field(20, 1);
        let lpa2 = field(28, 1) | field(24, 0) | field(20, 2);
        ensure!(granule_supported(all).is_ok());
        ensure!(granule_supported(lpa2).is_ok());
        let (without_this, without_others, kib) = match PAGE_SIZE {
            4096 => (all | field(28, 0xf), (lpa2 & !field(20, 0xf)) | field(24, 0xf), "4 KiB"),
            16384 => (all & !field(20, 0xf), all | field(28, 0xf) | field(24, 0xf), "16 KiB"),
            _ => (all | field(24, 0xf), (all | field(28, 0xf)) & !field(20, 0xf), "64 KiB"),
        };
        ensure!(granule_supported(without_others).is_ok(), "refused for a granule this build does not use");
        let message =
            granule_supported(without_this).err().ok_or("a CPU without the granule was accepted")?;
        let text = core::str::from_utf8(message).map_err(|_| "the message is not UTF-8")?;
        ensure!(text.starts_with("kernel: this CPU has no ") && text.contains(kib), "{text}");
        ensure!(text.ends_with("\r\n"), "the message ends without CR LF: {text}");
        // This CPU passed the check, or the kernel would not be running.
        ensure!(granule_supported(ID_AA64MMFR0_EL1.get()).is_ok());
        Ok(())
    }
);

kernel_test!(
    fn the_image_header_names_the_page_size() {
        // SAFETY: the Image's first page (its header) is mapped read-only at its link address.
        let flags = unsafe { ((layout::image().start + 24) as *const u64).read_volatile() };
        ensure_eq!((flags >> 1) & 0b11, expected_encodings().2, "Image flags bits 1-2");
        Ok(())
    }
);

kernel_test!(
    fn the_images_sections_and_guard_pages_are_whole_pages() {
        let img = layout::image();
        for (what, va) in [
            ("text end", img.text_end),
            ("rodata", img.rodata_start),
            ("rodata end", img.rodata_end),
            ("data", img.data_start),
            ("boot stack guard", img.boot_stack_guard),
            ("exception stack guard", img.exception_stack_guard),
            ("image end", img.end),
        ] {
            ensure!(va.is_multiple_of(PAGE_SIZE), "{what} at {va:#x} is not on a {PAGE_SIZE}-byte page");
        }
        // The guard pages are one whole page each, unmapped to their last byte; the stacks
        // above them are mapped from their first.
        for (guard, stack) in [
            (img.boot_stack_guard, img.boot_stack_bottom),
            (img.exception_stack_guard, img.exception_stack_bottom),
        ] {
            ensure_eq!(stack - guard, PAGE_SIZE, "guard size");
            ensure!(translate(guard, false).is_err() && translate(stack - 1, false).is_err(), "guard mapped");
            ensure!(translate(stack, true).is_ok(), "the stack's first byte is not writable");
        }
        // Text is read-only, data writable, each from its first page on.
        ensure!(translate(img.start, false).is_ok() && translate(img.start, true).is_err());
        ensure!(translate(img.rodata_start, true).is_err());
        ensure!(translate(img.data_start, true).is_ok());
        Ok(())
    }
);

kernel_test!(
    fn ttbr1_names_the_kernel_tables_in_the_builds_layout() {
        // The live TTBR1 reads back as a value `ttbr` makes (with a 52-bit OA, BADDR[51:48] in
        // bits [5:2], ASID 0), naming the kernel tree's root (with 4 KiB pages and LPA2, the
        // level -1 table above it, which `tests::lpa2` follows).
        let raw = TTBR1_EL1.get();
        let table = ttbr_table(raw);
        ensure_eq!(ttbr(table, 0), raw, "TTBR1 {raw:#x}");
        ensure!(table != 0 && table.is_multiple_of(PAGE_SIZE), "TTBR1 names {table:#x}");
        let root = kernel_map::with_space(|s| s.table().root_pa().0).ok_or("no kernel space")?;
        if !mm::paging::lpa2::LEVEL_MINUS_ONE {
            ensure_eq!(table, root, "TTBR1 {raw:#x} names the kernel's root");
        }
        Ok(())
    }
);
