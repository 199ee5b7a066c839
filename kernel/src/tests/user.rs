//! User space: programs run at EL0 through the real path (ELF loader, `eret`, system calls, the
//! fault handler, teardown). The programs are tiny ELF files assembled here from instruction
//! words, so each test says exactly what the program does.
use alloc::vec::Vec;

use crate::memory::frames;
use crate::process::{self, STATUS_ILL, STATUS_SEGV, STATUS_TRAP};
use crate::{ensure, ensure_eq, kernel_test};

use crate::process::exec::tiny_elf::{BASE, EXIT_GROUP, HEADERS, SVC, mov, syscall_then_exit, tiny_elf};

/// Runs `elf` and returns its exit status, checking that no frame leaked and that the process
/// left the process table (its entry goes with the last reference to it).
fn run(elf: &[u8]) -> Result<u64, alloc::string::String> {
    let before = super::frames_in_use();
    let status = process::run(elf, &["test"])?;
    ensure_eq!(super::frames_in_use(), before);
    ensure_eq!(process::family::listed(), 0);
    Ok(status)
}

fn errno_status(errno: linux_abi::Errno) -> u64 {
    errno.as_ret() as u64 & 0xff
}

kernel_test!(
    fn a_program_exits_with_its_status() {
        let mut code = Vec::from(mov(0, 42));
        code.extend(mov(8, EXIT_GROUP));
        code.push(SVC);
        ensure_eq!(run(&tiny_elf(&code))?, 42);
        Ok(())
    }
);

fn exit_with(status: u64) -> Vec<u8> {
    let mut code = Vec::from(mov(0, status));
    code.extend(mov(8, EXIT_GROUP));
    code.push(SVC);
    tiny_elf(&code)
}

kernel_test!(
    fn a_null_dereference_ends_the_program_with_139_and_the_kernel_goes_on() {
        let mut code = Vec::from(mov(0, 0));
        code.push(0xf940_0001); // ldr x1, [x0]
        ensure_eq!(run(&tiny_elf(&code))?, STATUS_SEGV);
        ensure_eq!(run(&exit_with(7))?, 7);
        Ok(())
    }
);

kernel_test!(
    fn writing_to_its_own_text_is_a_fault() {
        let mut code = Vec::from(mov(0, BASE + HEADERS));
        code.push(0xf900_0001); // str x1, [x0]
        ensure_eq!(run(&tiny_elf(&code))?, STATUS_SEGV);
        Ok(())
    }
);

kernel_test!(
    fn reading_kernel_memory_from_el0_is_a_fault() {
        let mut code = Vec::from(mov(0, crate::memory::layout::image().start));
        code.push(0xf940_0001); // ldr x1, [x0]
        ensure_eq!(run(&tiny_elf(&code))?, STATUS_SEGV);
        Ok(())
    }
);

kernel_test!(
    fn undefined_instruction_and_breakpoint_end_the_program() {
        ensure_eq!(run(&tiny_elf(&[0x0000_0000]))?, STATUS_ILL); // udf #0
        ensure_eq!(run(&tiny_elf(&[0xd420_0000]))?, STATUS_TRAP); // brk #0
        Ok(())
    }
);

kernel_test!(
    fn rt_sigreturn_without_a_signal_frame_is_sigsegv() {
        // mov x8, #139 (rt_sigreturn); svc #0: the "frame" at sp is the initial stack, which
        // fails validation, so SIGSEGV ends the program; the kernel runs on.
        ensure_eq!(run(&tiny_elf(&[0xd280_1168, 0xd400_0001]))?, STATUS_SEGV);
        Ok(())
    }
);

kernel_test!(
    fn bad_pointers_give_efault_never_a_kernel_fault() {
        let kernel = crate::memory::layout::image().start;
        ensure_eq!(
            run(&syscall_then_exit(64, &[1, kernel, 8]))?,
            errno_status(linux_abi::Errno::EFAULT),
            "write from kernel memory"
        );
        ensure_eq!(
            run(&syscall_then_exit(64, &[1, 0x1000, 8]))?,
            errno_status(linux_abi::Errno::EFAULT),
            "write from unmapped"
        );
        ensure_eq!(
            run(&syscall_then_exit(64, &[1, u64::MAX - 3, 8]))?,
            errno_status(linux_abi::Errno::EFAULT),
            "wrapping range"
        );
        ensure_eq!(
            run(&syscall_then_exit(113, &[1, kernel]))?,
            errno_status(linux_abi::Errno::EFAULT),
            "clock_gettime to kernel"
        );
        ensure_eq!(
            run(&syscall_then_exit(113, &[1, BASE]))?,
            errno_status(linux_abi::Errno::EFAULT),
            "clock_gettime to text"
        );
        ensure_eq!(
            run(&syscall_then_exit(160, &[0]))?,
            errno_status(linux_abi::Errno::EFAULT),
            "uname to NULL"
        );
        ensure_eq!(
            run(&syscall_then_exit(278, &[kernel, 16, 0]))?,
            errno_status(linux_abi::Errno::EFAULT),
            "getrandom to kernel"
        );
        Ok(())
    }
);

kernel_test!(
    fn errors_are_the_ones_linux_gives() {
        ensure_eq!(
            run(&syscall_then_exit(999, &[]))?,
            errno_status(linux_abi::Errno::ENOSYS),
            "unknown number"
        );
        ensure_eq!(
            run(&syscall_then_exit(64, &[5, BASE, 1]))?,
            errno_status(linux_abi::Errno::EBADF),
            "write to fd 5"
        );
        ensure_eq!(
            run(&syscall_then_exit(113, &[99, BASE]))?,
            errno_status(linux_abi::Errno::EINVAL),
            "unknown clock"
        );
        ensure_eq!(
            run(&syscall_then_exit(278, &[BASE, 0, 8]))?,
            errno_status(linux_abi::Errno::EINVAL),
            "getrandom flags"
        );
        ensure_eq!(run(&syscall_then_exit(64, &[1, BASE, 0]))?, 0, "write of zero bytes");
        ensure_eq!(run(&syscall_then_exit(64, &[1, BASE, 4]))?, 4, "write of four bytes from text");
        Ok(())
    }
);

kernel_test!(
    fn bad_executables_are_refused_with_a_reason() {
        let good = exit_with(0);
        ensure!(process::run(&good[..20], &["x"]).is_err(), "a truncated ELF ran");
        let mut wrong_machine = good.clone();
        wrong_machine[18] = 62; // EM_X86_64
        let why = process::run(&wrong_machine, &["x"]).err().unwrap_or_default();
        ensure!(why.contains("AArch64"), "{why}");
        let mut wx = good.clone();
        wx[64 + 4] = 7; // PF_R | PF_W | PF_X
        let why = process::run(&wx, &["x"]).err().unwrap_or_default();
        ensure!(why.contains("W^X"), "{why}");
        ensure!(process::run(b"not an elf at all", &["x"]).is_err());
        Ok(())
    }
);

/// A program whose only data is .bss, linked by GNU ld (`elf/fixtures/bss-only.S`): its RW
/// PT_LOAD has `p_filesz` 0 and a `p_offset` past the end of the file, as Linux allows.
static BSS_ONLY: &[u8] = include_bytes!("../../../elf/fixtures/bss-only.elf");

kernel_test!(
    fn a_bss_only_program_linked_by_gnu_ld_runs() {
        ensure_eq!(run(BSS_ONLY)?, 0, "it checks that its .bss reads as zero");
        Ok(())
    }
);

kernel_test!(
    fn the_files_that_panicked_xmas_elf_are_refused_with_a_sentence() {
        // The corruptions that once panicked the kernel inside xmas-elf: truncated headers,
        // e_phoff past the end of the file, odd e_phentsize values. Each is one sentence now.
        let mut bad: Vec<Vec<u8>> = (64..120).map(|len| BSS_ONLY[..len].to_vec()).collect();
        for phoff in [BSS_ONLY.len() as u64, BSS_ONLY.len() as u64 - 57, u64::MAX] {
            let mut f = BSS_ONLY.to_vec();
            f[32..40].copy_from_slice(&phoff.to_le_bytes());
            bad.push(f);
        }
        for phentsize in [0u16, 1, 55, 57, 0xffff] {
            let mut f = BSS_ONLY.to_vec();
            f[54..56].copy_from_slice(&phentsize.to_le_bytes());
            bad.push(f);
        }
        for f in &bad {
            let why = process::run(f, &["x"]).err().unwrap_or_default();
            ensure!(why.split(' ').count() >= 5 && !why.contains('\n'), "{} bytes: {why:?}", f.len());
        }
        // An unaligned e_phoff is not wrong (Linux reads the table into a buffer): moved to
        // an odd offset inside the file, the table still loads.
        let mut moved = BSS_ONLY.to_vec();
        let table = moved[64..64 + 2 * 56].to_vec();
        moved.extend_from_slice(&[0; 3]);
        let at = moved.len();
        moved.extend_from_slice(&table);
        moved[32..40].copy_from_slice(&(at as u64).to_le_bytes());
        ensure_eq!(at % 8, 3);
        ensure_eq!(run(&moved)?, 0);
        Ok(())
    }
);

kernel_test!(
    fn the_initial_stack_names_the_platform_and_the_program() {
        use crate::process::exec::stack::{self, at};
        let top = 0x1_0000_0000u64;
        let built = stack::build(top, &["prog"], &["A=1"], &[(at::PAGESZ, 4096)], [7; 16])
            .map_err(|e| alloc::format!("stack::build: {e:?}"))?;
        let (sp, bytes) = (built.sp, &built.bytes);
        ensure_eq!(sp % 16, 0);
        let word = |i: usize| u64::from_le_bytes(bytes[i * 8..i * 8 + 8].try_into().unwrap_or([0; 8]));
        // The NUL-terminated string at `addr`, if it is inside the image.
        let string = |addr: u64| {
            let tail = bytes.get(addr.checked_sub(sp)? as usize..)?;
            let len = tail.iter().position(|&b| b == 0)?;
            Some(alloc::string::String::from_utf8_lossy(&tail[..len]).into_owned())
        };
        ensure_eq!(word(0), 1, "argc");
        let some = |s: &str| Some(alloc::string::String::from(s));
        ensure_eq!(string(word(1)), some("prog"));
        ensure_eq!((word(2), string(word(3)), word(4)), (0, some("A=1"), 0));
        let mut auxv = alloc::collections::BTreeMap::new();
        let mut i = 5;
        while word(i) != at::NULL {
            auxv.insert(word(i), word(i + 1));
            i += 2;
        }
        ensure_eq!(auxv.get(&at::PAGESZ), Some(&4096));
        let entry = |key| auxv.get(&key).copied().unwrap_or(0);
        ensure_eq!(string(entry(at::PLATFORM)), some("aarch64"));
        ensure_eq!(string(entry(at::EXECFN)), some("prog"));
        let random = entry(at::RANDOM).wrapping_sub(sp) as usize;
        ensure_eq!(bytes.get(random..random + 16), Some(&[7u8; 16][..]));
        // What /proc/PID/cmdline, environ and auxv show: the strings' bounds and the vector.
        ensure_eq!(built.args, (word(1), word(1) + 5), "\"prog\" and its NUL");
        ensure_eq!(built.env, (word(3), word(3) + 4), "\"A=1\" and its NUL");
        ensure_eq!(built.auxv.last(), Some(&(at::NULL, 0)));
        ensure_eq!(built.auxv.len(), auxv.len() + 1);
        Ok(())
    }
);

kernel_test!(
    fn munmap_gives_back_each_frame_once_and_only_user_frames() {
        const PAGE: u64 = mm::addr::PAGE_SIZE;
        // mmap 16 pages, touch each (demand paging: consecutive frames the address space may
        // report as one merged extent), munmap them, exit. Regression: merged extents were once
        // freed as one buddy block, corrupting the allocator.
        let mut code = Vec::new();
        code.extend(mov(0, 0));
        code.extend(mov(1, 16 * PAGE));
        code.extend(mov(2, 3)); // PROT_READ | PROT_WRITE
        code.extend(mov(3, 0x22)); // MAP_PRIVATE | MAP_ANONYMOUS
        code.extend(mov(4, u64::MAX)); // fd -1
        code.extend(mov(5, 0));
        code.extend(mov(8, 222)); // mmap
        code.push(SVC);
        code.push(0xaa00_03f3); // mov x19, x0
        code.push(0xaa00_03f5); // mov x21, x0
        code.push(0xd280_0214); // movz x20, #16
        code.push(0xf900_0274); // loop: str x20, [x19]
        code.push(0x9140_0273 | ((PAGE >> 12) << 10) as u32); // add x19, x19, #PAGE
        code.push(0xf100_0694); // subs x20, x20, #1
        code.push(0x54ff_ffa1); // b.ne loop
        code.push(0xaa15_03e0); // mov x0, x21
        code.extend(mov(1, 16 * PAGE));
        code.extend(mov(8, 215)); // munmap
        code.push(SVC);
        code.extend(mov(8, EXIT_GROUP));
        code.push(SVC);
        ensure_eq!(run(&tiny_elf(&code))?, 0);
        let usable = &crate::booted().usable;
        let mut taken = Vec::new();
        for _ in 0..512 {
            let pa = frames::alloc(1).ok_or("out of frames")?;
            taken.push(pa);
        }
        let all_usable = taken.iter().all(|pa| usable.contains(pa.0));
        let mut sorted: Vec<u64> = taken.iter().map(|p| p.0).collect();
        sorted.sort_unstable();
        sorted.dedup();
        let distinct = sorted.len() == taken.len();
        for pa in taken {
            frames::free(pa, 1);
        }
        ensure!(all_usable, "the allocator handed out a frame outside usable RAM");
        ensure!(distinct, "the allocator handed out a frame twice");
        Ok(())
    }
);

kernel_test!(
    fn memory_calls_give_the_errno_linux_gives() {
        // From mmap(2), munmap(2), mprotect(2), madvise(2), getrlimit(2): each row is one
        // program that makes the call and exits with its result (0 for a mapping: its address
        // is page-aligned). (The full table runs on the host in
        // mm::vm::tests::errno_table_from_the_man_pages; these check the kernel's wiring.)
        use linux_abi::Errno;
        use linux_abi::errno::consts::{EACCES, EBADF, EEXIST, EFAULT, EINVAL, ENOMEM, EPERM, ESRCH};
        use linux_abi::mman::{
            MAP_ANONYMOUS, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_PRIVATE, PROT_READ, PROT_WRITE,
        };
        const RW: u64 = PROT_READ | PROT_WRITE;
        const PRIVATE_ANON: u64 = MAP_PRIVATE | MAP_ANONYMOUS;
        const FIXED: u64 = MAP_FIXED;
        const NOREPLACE: u64 = MAP_FIXED_NOREPLACE;
        let none = u64::MAX; // fd -1
        // The last page below mmap_min_addr (64 KiB): page-aligned with every granule (0 with
        // 64 KiB pages), so the refusal is EPERM for the address and not EINVAL for alignment.
        const BELOW_MIN: u64 = process::exec::elf::LIMITS.min_addr - mm::addr::PAGE_SIZE;
        type Row = (&'static str, u64, [u64; 6], Result<(), Errno>);
        let rows: [Row; 20] = [
            ("mmap of length 0", 222, [0, 0, RW, PRIVATE_ANON, none, 0], Err(EINVAL)),
            (
                "MAP_FIXED at an unaligned address",
                222,
                [0x10_0001, 4096, RW, PRIVATE_ANON | FIXED, none, 0],
                Err(EINVAL),
            ),
            (
                "MAP_FIXED below mmap_min_addr",
                222,
                [BELOW_MIN, 4096, RW, PRIVATE_ANON | FIXED, none, 0],
                Err(EPERM),
            ),
            (
                "MAP_FIXED_NOREPLACE over the program's text",
                222,
                [BASE, 4096, RW, PRIVATE_ANON | NOREPLACE, none, 0],
                Err(EEXIST),
            ),
            (
                "MAP_FIXED past the 48-bit limit",
                222,
                [1 << 48, 4096, RW, PRIVATE_ANON | FIXED, none, 0],
                Err(ENOMEM),
            ),
            ("writable and executable (W^X)", 222, [0, 4096, RW | 4, PRIVATE_ANON, none, 0], Err(EACCES)),
            ("a file mapping with a descriptor that is not open", 222, [0, 4096, RW, 0x02, 3, 0], Err(EBADF)),
            ("neither MAP_PRIVATE nor MAP_SHARED", 222, [0, 4096, RW, 0x20, none, 0], Err(EINVAL)),
            ("munmap of an unaligned address", 215, [0x10_0001, 4096, 0, 0, 0, 0], Err(EINVAL)),
            ("mprotect with unknown bits", 226, [BASE, 4096, 0x40, 0, 0, 0], Err(EINVAL)),
            ("mprotect over a hole", 226, [0x7000_0000, 4096, 1, 0, 0, 0], Err(ENOMEM)),
            ("madvise with unknown advice", 233, [BASE, 4096, 77, 0, 0, 0], Err(EINVAL)),
            (
                "mmap ignores unknown prot bits, as Linux",
                222,
                [0, 4096, RW | 0x40, PRIVATE_ANON, none, 0],
                Ok(()),
            ),
            ("mmap: an unaligned offset is EINVAL before EBADF", 222, [0, 4096, RW, 0x02, 3, 1], Err(EINVAL)),
            ("mmap: no mapping type, executable", 222, [0, 4096, 5, 0x20, none, 0], Err(EINVAL)),
            ("mmap: no mapping type, MAP_CODE", 222, [0, 4096, RW, 0x20 | 0x0200_0000, none, 0], Err(EINVAL)),
            (
                "mmap of 1 TiB private writable (overcommit)",
                222,
                [0, 1 << 40, RW, PRIVATE_ANON, none, 0],
                Err(ENOMEM),
            ),
            ("getrlimit of an unknown resource", 163, [16, BASE, 0, 0, 0, 0], Err(EINVAL)),
            ("setrlimit from an unreadable address", 164, [9, 0, 0, 0, 0, 0], Err(EFAULT)),
            ("prlimit64 of another process", 261, [12345, 9, 0, BASE, 0, 0], Err(ESRCH)),
        ];
        for (what, nr, args, want) in rows {
            ensure_eq!(run(&syscall_then_exit(nr, &args))?, want.err().map_or(0, errno_status), what);
        }
        Ok(())
    }
);

kernel_test!(
    fn every_system_call_number_with_garbage_arguments_leaves_the_kernel_standing() {
        // nr = x28 counts down from 1010 to 1 (0 is not tried); exit, exit_group and
        // rt_sigreturn (whose frame would be garbage: SIGSEGV, as on Linux) are skipped so the
        // program runs to the end. Arguments: a kernel address, junk, and values just past what
        // is valid. Every call must come back (with an errno), nothing may leak.
        let mut body = alloc::vec![
            0xf101_779f, // cmp x28, #93
            0x5400_03c0, // b.eq skip
            0xf101_7b9f, // cmp x28, #94
            0x5400_0380, // b.eq skip
            0xf102_2f9f, // cmp x28, #139
            0x5400_0340, // b.eq skip
        ];
        for (reg, value) in [
            (0, 0xffff_8000_0000_0000),
            (1, 0xdead_beef),
            (2, 0x1000),
            (3, 0xffff_ffff),
            (4, 0x7fff_ffff_f000),
            (5, 0),
        ] {
            body.extend(mov(reg, value));
        }
        body.push(0xaa1c_03e8); // mov x8, x28
        body.push(SVC);
        // skip:
        let program = crate::process::exec::tiny_elf::loop_program(&[], &body, 1010);
        ensure_eq!(run(&program)?, 0);
        Ok(())
    }
);

kernel_test!(
    fn fp_registers_survive_a_context_switch() {
        // d8 = a pattern; sched_yield (the thread's context is saved and restored through the
        // scheduler); exit(d8 != pattern). Regression: enter_user once loaded the FP/SIMD state
        // from the wrong address, so every resumed thread got garbage q registers.
        let mut code = Vec::from(mov(19, 0x1122_3344_5566_7788)); // x19 survives the call
        code.push(0x9e67_0268); // fmov d8, x19
        code.extend(mov(8, 124)); // sched_yield
        code.push(SVC);
        code.push(0x9e66_0101); // fmov x1, d8
        code.push(0xeb01_027f); // cmp x19, x1
        code.push(0x9a9f_07e0); // cset x0, ne
        code.extend(mov(8, EXIT_GROUP));
        code.push(SVC);
        ensure_eq!(run(&tiny_elf(&code))?, 0, "d8 changed across sched_yield");
        Ok(())
    }
);

kernel_test!(
    fn a_call_whose_user_copy_faults_returns_with_its_pc_flags_and_stack() {
        // The exception return writes ELR, SPSR and SP_EL0 back only when the frame's values
        // differ from the registers'. Here the call's copy to user memory faults on a fresh page
        // (demand paging inside the call): that nested exception from EL1 leaves kernel values in
        // ELR and SPSR, so the call's own return must write them. The program sets NZCV before
        // the call and exits with bit 0 = the call failed, bit 1 = NZCV changed, bit 2 = SP
        // changed; a return to the wrong PC or level would not reach the exit at all.
        use core::sync::atomic::Ordering;
        // mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0): never touched.
        let mut code = Vec::new();
        for (r, v) in [(0, 0), (1, 4096), (2, 3), (3, 0x22), (4, u64::MAX), (5, 0), (8, 222)] {
            code.extend(mov(r, v));
        }
        code.push(SVC);
        code.push(0xaa00_03e1); // mov x1, x0: the timespec goes to the fresh page
        code.extend(mov(0, 1)); // CLOCK_MONOTONIC
        code.extend(mov(8, 113)); // clock_gettime
        code.extend(mov(9, 0xa000_0000)); // N and C set
        code.push(0x9100_03f3); // mov x19, sp
        code.push(0xd51b_4209); // msr nzcv, x9
        code.push(SVC);
        code.push(0xd53b_420a); // mrs x10, nzcv
        code.push(0x9100_03eb); // mov x11, sp
        code.push(0xf100_001f); // cmp x0, #0
        code.push(0x9a9f_07ec); // cset x12, ne
        code.push(0xeb09_015f); // cmp x10, x9
        code.push(0x9a9f_07ed); // cset x13, ne
        code.push(0xeb13_017f); // cmp x11, x19
        code.push(0x9a9f_07ee); // cset x14, ne
        code.push(0xaa0d_0580); // orr x0, x12, x13, lsl #1
        code.push(0xaa0e_0800); // orr x0, x0, x14, lsl #2
        code.extend(mov(8, EXIT_GROUP));
        code.push(SVC);
        let faults = crate::memory::vmspace::PAGE_FAULTS.load(Ordering::Relaxed);
        ensure_eq!(run(&tiny_elf(&code))?, 0, "bit 0: call failed, 1: NZCV changed, 2: SP changed");
        ensure!(
            crate::memory::vmspace::PAGE_FAULTS.load(Ordering::Relaxed) > faults,
            "the copy did not fault: the nested exception this tests did not happen"
        );
        Ok(())
    }
);

/// Runs the built-in userland demo in one mode; it exits non-zero when an invariant fails.
fn run_demo(mode: &str) -> crate::ktest::TestResult {
    let program = crate::builtin_program();
    if program.is_empty() {
        return Err(alloc::string::String::from("no built-in userland (build through scripts/)"));
    }
    let before = super::frames_in_use();
    let status = process::run(program, &["userland", mode])?;
    ensure_eq!(super::frames_in_use(), before, "frames leaked");
    ensure_eq!(status, 0, mode);
    Ok(())
}

kernel_test!(
    fn userland_threads_stress_one_address_space_from_every_cpu() {
        run_demo("threads")
    }
);

kernel_test!(
    fn userland_tlbi_locality_local_until_the_process_migrates() {
        run_demo("tlbi-locality")
    }
);
