//! The arm64 Linux Image header and the entry code, up to the jump into the upper half.
//!
//! Everything here runs at the physical address the loader chose, so it uses only PC-relative
//! addressing (`adr`, `adrp`) until the MMU is on; the one absolute address (`high_entry`) is
//! loaded from a literal and used only after the MMU maps the link address. The literals are
//! relocations of the position-independent Image: `boot::kaslr` rewrites them when it moves it.
//!
//! The header is both the arm64 Image header and a PE/COFF header, so UEFI firmware can start
//! the same file as an EFI application (`firmware::efi_stub`), which enters `primary_entry` as a
//! raw-Image loader would.
//!
//! Secondary CPUs enter at `secondary_entry` (started by `smp`), which shares the EL2 set-up.
//!
//! Register use across the entry code: x19 = x0 from the loader (device tree), x20 = load
//! address, x21 = entry EL, x22 = CNTVCT at entry. They are passed to `kernel_main`.

use core::arch::global_asm;

use super::early_map::{MAIR_EL1_VALUE, SCTLR_EL1_MMU_OFF, SCTLR_EL1_MMU_ON};

/// Image flags: bit 0 = 0 (little-endian), bits 1-2 = the kernel's page size (1 = 4 KiB,
/// 2 = 16 KiB, 3 = 64 KiB: booting.rst, so a loader can tell which granule the kernel needs),
/// bit 3 = 1 (the Image may be placed anywhere in physical memory, on a 2 MiB boundary).
pub const IMAGE_FLAGS: u64 = (IMAGE_PAGE_SIZE_FLAG << 1) | (1 << 3);

/// The page-size field of [`IMAGE_FLAGS`] for the build's granule.
const IMAGE_PAGE_SIZE_FLAG: u64 = match crate::arch::aarch64::translation::GRANULE {
    mm::granule::Granule::K4 => 1,
    mm::granule::Granule::K16 => 2,
    mm::granule::Granule::K64 => 3,
};

/// code0: `ccmp x18, #0, #0xd, pl`, whose first two bytes are "MZ" (0x4d 0x5a), the MS-DOS
/// signature PE/COFF loaders look for. Executed by a raw-Image loader's jump, it only sets the
/// flags; code1 then branches to the entry code.
pub const MZ_NOP: u32 = 0xfa40_5a4d;

/// HCR_EL2 for an EL1 kernel: RW (EL1 is AArch64), APK and API (no traps of pointer-auth keys and
/// instructions to EL2, which this kernel never handles).
const HCR_EL2_VALUE: u64 = (1 << 31) | (1 << 41) | (1 << 40);

/// SPSR for the drop from EL2: EL1h, D, A, I and F masked.
const SPSR_EL1H_MASKED: u64 = 0x3c5;

/// SCR_EL3 for a kernel entered at EL3 (QEMU `raspi3b` through the generic loader; a board whose
/// boot ROM starts the Image directly), the same set-up as the Raspberry Pi's armstub8:
/// NS (bit 0: lower ELs are non-secure), RES1 (bits 4 and 5), SMD (bit 7: SMC undefined, there is
/// no secure monitor), HCE (bit 8: HVC enabled), RW (bit 10: EL2 is AArch64). Everything else 0:
/// no IRQ/FIQ/SError routing to EL3, no traps of the counter or of FP.
const SCR_EL3_VALUE: u64 = (1 << 0) | (1 << 4) | (1 << 5) | (1 << 7) | (1 << 8) | (1 << 10);

/// SCTLR_EL2 with the MMU and caches off: its RES1 bits only (Armv8.0: 4, 5, 11, 16, 18, 22, 23,
/// 28, 29), little-endian.
const SCTLR_EL2_MMU_OFF: u64 =
    (1 << 4) | (1 << 5) | (1 << 11) | (1 << 16) | (1 << 18) | (1 << 22) | (1 << 23) | (1 << 28) | (1 << 29);

/// SPSR for the drop from EL3: EL2h, D, A, I and F masked.
const SPSR_EL2H_MASKED: u64 = 0x3c9;

global_asm!(
    r#"
    .section .head.text, "ax"
    .global _start
_start:
    // The arm64 Image header (booting.rst), which is also the MS-DOS stub header of a PE/COFF
    // image: "MZ" in its first two bytes, the PE header's offset at 0x3c (res5). Linux does the
    // same (arch/arm64/kernel/head.S, efi_signature_nop).
    .long   {mz_nop}                // code0: "MZ", as ccmp x18, #0, #0xd, pl (only sets flags)
    b       primary_entry           // code1: branch to the entry code
    .quad   0                       // text_offset
    .quad   __image_size            // image_size: up to __image_end, bss and stacks included
    .quad   {flags}                 // flags
    .quad   0                       // res2
    .quad   0                       // res3
    .quad   0                       // res4
    .ascii  "ARM\x64"               // magic
    .long   pe_header - _start      // res5: offset of the PE header (e_lfanew)

    // The PE/COFF header (Microsoft PE/COFF specification; UEFI 2.10 §2.1.1 for the
    // subsystem), laid out as Linux's arch/arm64/kernel/efi-header.S: no relocations (the
    // firmware may load the image anywhere: everything the stub runs is PC-relative), three
    // sections at file offsets equal to their RVAs, the entry point the EFI stub.
    .balign 8
pe_header:
    .ascii  "PE\0\0"
    .short  0xaa64                  // Machine: IMAGE_FILE_MACHINE_ARM64
    .short  3                       // NumberOfSections
    .long   0                       // TimeDateStamp
    .long   0                       // PointerToSymbolTable
    .long   0                       // NumberOfSymbols
    .short  pe_sections - pe_optional_header // SizeOfOptionalHeader
    .short  0x206                   // Characteristics: EXECUTABLE_IMAGE, LINE_NUMS_STRIPPED, DEBUG_STRIPPED
pe_optional_header:
    .short  0x20b                   // Magic: PE32+
    .byte   0, 0                    // Major/MinorLinkerVersion
    .long   __pe_text_size          // SizeOfCode
    .long   __pe_initialized_size   // SizeOfInitializedData
    .long   __pe_uninitialized_size // SizeOfUninitializedData
    .long   __pe_entry              // AddressOfEntryPoint: efi_pe_entry
    .long   __pe_header_size        // BaseOfCode
    .quad   0                       // ImageBase
    .long   4096                    // SectionAlignment
    .long   4096                    // FileAlignment
    .short  0, 0                    // Major/MinorOperatingSystemVersion
    .short  0, 0                    // Major/MinorImageVersion
    .short  0, 0                    // Major/MinorSubsystemVersion
    .long   0                       // Win32VersionValue
    .long   __image_size            // SizeOfImage
    .long   __pe_header_size        // SizeOfHeaders
    .long   0                       // CheckSum
    .short  10                      // Subsystem: IMAGE_SUBSYSTEM_EFI_APPLICATION
    .short  0                       // DllCharacteristics
    .quad   0                       // SizeOfStackReserve
    .quad   0                       // SizeOfStackCommit
    .quad   0                       // SizeOfHeapReserve
    .quad   0                       // SizeOfHeapCommit
    .long   0                       // LoaderFlags
    .long   6                       // NumberOfRvaAndSizes
    .quad   0                       // export table
    .quad   0                       // import table
    .quad   0                       // resource table
    .quad   0                       // exception table
    .quad   0                       // certificate table
    .quad   0                       // base relocation table: none
pe_sections:
    .ascii  ".text\0\0\0"
    .long   __pe_text_size          // VirtualSize
    .long   __pe_header_size        // VirtualAddress
    .long   __pe_text_size          // SizeOfRawData
    .long   __pe_header_size        // PointerToRawData
    .long   0, 0                    // PointerToRelocations, PointerToLinenumbers
    .short  0, 0                    // NumberOfRelocations, NumberOfLinenumbers
    .long   0x60000020              // CNT_CODE | MEM_EXECUTE | MEM_READ
    .ascii  ".rodata\0"
    .long   __pe_rodata_size
    .long   __pe_rodata_offset
    .long   __pe_rodata_size
    .long   __pe_rodata_offset
    .long   0, 0
    .short  0, 0
    .long   0x40000040              // CNT_INITIALIZED_DATA | MEM_READ
    .ascii  ".data\0\0\0"
    .long   __pe_data_memory_size   // .data, .bss and the stacks
    .long   __pe_data_offset
    .long   __pe_data_file_size     // the file's part; the loader zero-fills the rest
    .long   __pe_data_offset
    .long   0, 0
    .short  0, 0
    .long   0xc0000040              // CNT_INITIALIZED_DATA | MEM_READ | MEM_WRITE

    .section .text.boot, "ax"
    // Configure EL2 just enough for an EL1 kernel, then drop to EL1 at \target. Used by the
    // boot CPU and by every secondary CPU (all CPUs enter at the same EL, booting.rst). It uses
    // the numeric labels 1: to 6: internally, so callers branch around it with named labels.
    //
    // HCR_EL2.E2H is set whenever the CPU has FEAT_VHE (ID_AA64MMFR1_EL1.VH), and read back:
    // Apple's cores implement only E2H == 1 (the bit is RES1 there, and m1n1 enters the kernel at
    // EL2), so taking the E2H == 1 path on every VHE CPU makes the path an M1 takes the one that
    // QEMU's -cpu max takes in every EL2 case of the suite; CPUs without VHE (Cortex-A53, A72)
    // take the E2H == 0 path. With E2H == 1 (the Arm ARM's CPTR_EL2 and CNTHCTL_EL2 pages; Linux's
    // __init_el2_timers and __init_el2_cptr do the same): CNTHCTL_EL2's EL1 counter and timer
    // enables are bits 10 and 11, CPTR_EL2 has CPACR_EL1's layout (FPEN, bits [21:20]), and an
    // EL1 register written from EL2 must be named by its _EL12 encoding (SCTLR_EL12 is
    // S3_5_C1_C0_0), since the _EL1 name reaches the EL2 register. (Checked: with CPTR_EL2
    // written in the E2H == 0 layout on that path, the -cpu max EL2 boot hangs at the first
    // FP/SIMD instruction.)
    .macro DROP_TO_EL1 target
    ldr     x0, ={hcr}
    mrs     x1, id_aa64pfr1_el1
    ubfx    x1, x1, #8, #4           // MTE
    cmp     x1, #2
    b.lo    6f
    orr     x0, x0, #(1 << 56)       // ATA: tag access at EL1 and EL0 (FEAT_MTE2, as Linux's init_el2)
6:  mrs     x1, id_aa64mmfr1_el1
    ubfx    x1, x1, #8, #4           // VH
    cbz     x1, 3f
    orr     x0, x0, #(1 << 34)       // E2H
3:  msr     hcr_el2, x0
    isb
    ldr     x2, ={sctlr_off}
    mrs     x1, hcr_el2
    tbz     x1, #34, 4f
    mrs     x0, cnthctl_el2          // E2H == 1: EL1 may use the physical counter and timer
    orr     x0, x0, #(3 << 10)
    msr     cnthctl_el2, x0
    mov     x0, #(3 << 20)           // CPTR_EL2 (CPACR layout): FPEN, no traps of FP/SIMD
    msr     cptr_el2, x0
    msr     S3_5_C1_C0_0, x2         // SCTLR_EL12
    b       5f
4:  mrs     x0, cnthctl_el2          // E2H == 0: EL1 may use the physical counter and timer
    orr     x0, x0, #3
    msr     cnthctl_el2, x0
    mov     x0, #0x33ff              // CPTR_EL2: no traps of FP/SIMD
    msr     cptr_el2, x0
    msr     sctlr_el1, x2
5:  msr     cntvoff_el2, xzr         // virtual counter == physical counter
    mrs     x0, midr_el1             // EL1 reads MIDR/MPIDR through these
    msr     vpidr_el2, x0
    mrs     x0, mpidr_el1
    msr     vmpidr_el2, x0
    msr     hstr_el2, xzr
    msr     vttbr_el2, xzr
    mrs     x0, id_aa64dfr0_el1      // PMUv3 (PMUVer not 0 or 0xf): MDCR_EL2 = HPMN all counters,
    ubfx    x0, x0, #8, #4           // no traps of PMU or debug registers (its other bits reset
    cbz     x0, 2f                   // UNKNOWN; arch::pmu programs the PMU from EL1)
    cmp     x0, #0xf
    b.eq    2f
    mrs     x0, pmcr_el0
    ubfx    x0, x0, #11, #5
    msr     mdcr_el2, x0
2:  mrs     x0, id_aa64pfr0_el1      // GICv3 system registers: let EL1 use them
    ubfx    x0, x0, #24, #4
    cbz     x0, 1f
    mrs     x0, icc_sre_el2
    orr     x0, x0, #0x1             // SRE
    orr     x0, x0, #0x8             // Enable (lower ELs may use ICC_SRE_EL1)
    msr     icc_sre_el2, x0
    isb
1:  mov     x0, #{spsr}
    msr     spsr_el2, x0
    adr     x0, \target
    msr     elr_el2, x0
    eret
    .endm

    // Entered at EL3: set up the minimum a non-secure EL2 needs and drop to EL2h at \target,
    // DAIF masked (documented in docs/boards.md). CPTR_EL3 = 0: no FP/SIMD traps; MDCR_EL3 = 0. CNTFRQ_EL0 is
    // left alone: only EL3 can write it, and it is the firmware's or the emulator's to know (QEMU
    // sets it; a board's boot ROM that leaves it 0 gives a report without a time line).
    // CNTVOFF_EL2 and the rest of EL2 are set by DROP_TO_EL1. GICv3: ICC_SRE_EL3 SRE|DFB|DIB|Enable
    // so that EL2 and EL1 may use the system-register interface.
    .macro DROP_TO_EL2 target
    ldr     x0, ={scr_el3}
    msr     scr_el3, x0
    msr     cptr_el3, xzr
    msr     mdcr_el3, xzr            // no traps of PMU or debug registers to EL3
    ldr     x0, ={sctlr_el2_off}
    msr     sctlr_el2, x0
    mrs     x0, id_aa64pfr0_el1
    ubfx    x0, x0, #24, #4
    cbz     x0, 1f
    mov     x0, #0xf
    msr     icc_sre_el3, x0
    isb
1:  mov     x0, #{spsr_el2}
    msr     spsr_el3, x0
    adr     x0, \target
    msr     elr_el3, x0
    eret
    .endm

    .global primary_entry
primary_entry:
    // U-Boot enters with SError unmasked: mask everything before anything can go wrong.
    msr     daifset, #0xf
    mrs     x22, cntvct_el0
    mov     x19, x0
    adr     x20, _start
    mrs     x21, CurrentEL
    ubfx    x21, x21, #2, #2
    cmp     x21, #2
    b.eq    el2_setup
    cmp     x21, #1
    b.eq    el1_entry
    cmp     x21, #3
    b.ne    boot_park                // EL0 cannot happen; park rather than guess
    DROP_TO_EL2 el3_dropped
el3_dropped:
    // Now at EL2: x21 stays 3, so the boot report says where the kernel was entered.
el2_setup:
    DROP_TO_EL1 el1_entry

el1_entry:
    mov     x0, #(3 << 20)           // CPACR_EL1.FPEN: user programs use FP/SIMD (the kernel never)
    msr     cpacr_el1, x0
    ldr     x0, ={sctlr_off}         // a known SCTLR_EL1: MMU and caches off
    msr     sctlr_el1, x0
    isb

    // Zero .bss and the stacks.
    adrp    x0, __bss_start
    add     x0, x0, :lo12:__bss_start
    adrp    x1, __bss_end
    add     x1, x1, :lo12:__bss_end
2:  cmp     x0, x1
    b.hs    3f
    stp     xzr, xzr, [x0], #16
    b       2b
3:
    // A stack at its physical address for early_map (which is PC-relative Rust code).
    adrp    x0, __boot_stack_top
    add     x0, x0, :lo12:__boot_stack_top
    mov     sp, x0
    mov     x0, x20
    mov     x1, x19
    sub     sp, sp, #32
    mov     x8, sp                   // early_map's answer (TTBR0, TTBR1, TCR_EL1) goes here
    bl      early_map
    ldp     x23, x24, [sp]           // x23 = TTBR0 (identity), x24 = TTBR1 (kernel)
    ldr     x25, [sp, #16]           // x25 = TCR_EL1 (arch::aarch64::translation)
    add     sp, sp, #32
    cbz     x23, early_refused       // early_map refused (it said why on the fallback UART)

    // The tables and .bss were written with the data cache off: drop any stale lines the loader
    // may have left for those addresses, so the cached view after the MMU is on is memory's.
    mrs     x3, ctr_el0
    ubfx    x3, x3, #16, #4
    mov     x4, #4
    lsl     x4, x4, x3               // smallest D-cache line in bytes
    sub     x5, x4, #1
    adrp    x6, __bss_start
    add     x6, x6, :lo12:__bss_start
    bic     x6, x6, x5
    adrp    x7, __bss_end
    add     x7, x7, :lo12:__bss_end
4:  dc      ivac, x6
    add     x6, x6, x4
    cmp     x6, x7
    b.lo    4b
    dsb     sy

    // MAIR, TCR (made by arch::aarch64::translation for the build's granule), TTBRs.
    ldr     x0, ={mair}
    msr     mair_el1, x0
    msr     tcr_el1, x25
    msr     ttbr0_el1, x23
    msr     ttbr1_el1, x24
    isb
    tlbi    vmalle1
    dsb     nsh
    isb
    ldr     x0, ={sctlr_on}
    msr     sctlr_el1, x0
    isb
    ldr     x8, =high_entry
    br      x8

boot_park:
    wfe
    b       boot_park

    // The boot cannot go on (early_map said why). End the run with status 1 through
    // semihosting, which QEMU offers with -semihosting: SYS_EXIT (0x18) with the block
    // (ADP_Stopped_ApplicationExit, 1). Without semihosting HLT is undefined, and the
    // exception goes to early_vectors, which park: the same end as before, on a board.
early_refused:
    adr     x0, early_vectors
    msr     vbar_el1, x0
    isb
    mov     x0, #0x26
    movk    x0, #0x2, lsl #16        // ADP_Stopped_ApplicationExit = 0x20026
    mov     x1, #1
    stp     x0, x1, [sp, #-16]!
    mov     x1, sp
    mov     x0, #0x18
    hlt     #0xf000
    b       boot_park

    // Vectors for early_refused only: every entry parks.
    .balign 2048
early_vectors:
    .rept   16
    b       boot_park
    .balign 128
    .endr

    .section .text, "ax"
high_entry:
    // Now at the link address. SP_EL1 is the exception stack; the kernel itself runs on SP_EL0
    // (EL1t), so a kernel stack overflow into its guard page is taken on a good stack. (SP_EL0
    // cannot be written while it is the stack: after a KASLR move this runs again from EL1t.)
    msr     spsel, #1
    ldr     x0, =__exception_stack_top
    mov     sp, x0
    ldr     x0, =exception_vectors
    msr     vbar_el1, x0
    isb
    ldr     x0, =__boot_stack_top
    msr     sp_el0, x0
    msr     spsel, #0
    mov     x29, xzr
    mov     x30, xzr
    // boot::kaslr: moves the Image to a random address (the early map showing it there too, its
    // relocated words rewritten) and answers the distance, or 0 where it stays. Moved, the
    // literal below holds high_entry's new address: start again from there, with the stacks and
    // vectors at their new addresses (the second call answers 0).
    mov     x0, x19
    mov     x1, x20
    bl      kaslr_relocate
    cbz     x0, 1f
    ldr     x8, =high_entry
    br      x8
1:  mov     x0, x19
    mov     x1, x20
    mov     x2, x21
    mov     x3, x22
    mov     x4, x23                  // the early identity map, which secondary CPUs need
    bl      kernel_main
    b       boot_park

    .section .text.boot, "ax"
    .global secondary_entry
secondary_entry:
    msr     daifset, #0xf
    mrs     x21, CurrentEL
    ubfx    x21, x21, #2, #2
    cmp     x21, #3
    b.ne    secondary_not_el3
    DROP_TO_EL2 secondary_el2
secondary_el2:
    mov     x21, #2
secondary_not_el3:
    cmp     x21, #2
    b.ne    secondary_not_el2
    DROP_TO_EL1 secondary_el1
secondary_not_el2:
    cmp     x21, #1
    b.ne    secondary_park
secondary_el1:
    mov     x0, #(3 << 20)           // FP/SIMD untrapped (for EL0: the kernel is soft-float)
    msr     cpacr_el1, x0
    isb
    // Find this CPU's slot by MPIDR (PC-relative: we run at the physical address).
    mrs     x1, mpidr_el1
    ldr     x2, ={affinity}
    and     x1, x1, x2
    adrp    x2, SECONDARY_BOOT
    add     x2, x2, :lo12:SECONDARY_BOOT
    mov     x3, #{max_cpus}
2:  ldr     x4, [x2]
    cmp     x4, x1
    b.eq    3f
    add     x2, x2, #{slot_size}
    subs    x3, x3, #1
    b.ne    2b
    b       secondary_park
3:  ldp     x4, x5, [x2, #8]         // mair, tcr
    msr     mair_el1, x4
    msr     tcr_el1, x5
    ldp     x4, x5, [x2, #24]        // ttbr0, ttbr1
    msr     ttbr0_el1, x4
    msr     ttbr1_el1, x5
    ldr     x6, [x2, #40]            // sctlr
    ldp     x19, x20, [x2, #48]      // exception stack top, kernel stack top
    ldr     x21, [x2, #64]           // cpu index
    isb
    tlbi    vmalle1
    dsb     nsh
    isb
    msr     sctlr_el1, x6
    isb
    ldr     x8, =secondary_high
    br      x8
secondary_park:
    wfe
    b       secondary_park

    .section .text, "ax"
secondary_high:
    mov     sp, x19
    ldr     x0, =exception_vectors
    msr     vbar_el1, x0
    isb
    msr     sp_el0, x20
    msr     spsel, #0
    mov     x29, xzr
    mov     x30, xzr
    mov     x0, x21
    bl      secondary_main
    b       secondary_park
"#,
    flags = const IMAGE_FLAGS,
    mz_nop = const MZ_NOP,
    hcr = const HCR_EL2_VALUE,
    spsr = const SPSR_EL1H_MASKED,
    spsr_el2 = const SPSR_EL2H_MASKED,
    scr_el3 = const SCR_EL3_VALUE,
    sctlr_el2_off = const SCTLR_EL2_MMU_OFF,
    sctlr_off = const SCTLR_EL1_MMU_OFF,
    sctlr_on = const SCTLR_EL1_MMU_ON,
    mair = const MAIR_EL1_VALUE,
    affinity = const crate::cpu::MPIDR_AFFINITY,
    max_cpus = const crate::cpu::MAX_CPUS,
    slot_size = const crate::boot::secondary::SLOT_SIZE,
);
