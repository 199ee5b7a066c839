//! The vDSO as the kernel made it: the assembled image read back through its own tables (the
//! host tests of `elf::vdso` check the writer with stand-in code), and its data page.
use crate::{ensure, ensure_eq, kernel_test};
use elf::header::{FileHeader, ProgramHeader, u32_at, u64_at};

/// The dynamic entry `tag`'s value in `img`.
fn dynamic(img: &[u8], tag: u64) -> Option<u64> {
    let eh = FileHeader::read(img)?;
    let dynamic = (0..usize::from(eh.phnum))
        .filter_map(|i| ProgramHeader::read(img.get(eh.phoff as usize + i * 56..)?))
        .find(|p| p.kind == 2)?;
    let mut at = dynamic.offset as usize;
    loop {
        match u64_at(img, at)? {
            0 => return None,
            t if t == tag => return u64_at(img, at + 8),
            _ => at += 16,
        }
    }
}

/// The value of the dynamic symbol `name`.
fn symbol(img: &[u8], name: &[u8]) -> Option<u64> {
    let (symtab, strtab, hash) =
        (dynamic(img, 6)? as usize, dynamic(img, 5)? as usize, dynamic(img, 4)? as usize);
    (1..u32_at(img, hash + 4)? as usize).find_map(|i| {
        let s = symtab + 24 * i;
        let at = strtab + u32_at(img, s)? as usize;
        let end = at + img.get(at..)?.iter().position(|&b| b == 0)?;
        (&img[at..end] == name).then(|| u64_at(img, s + 8)).flatten()
    })
}

kernel_test!(
    fn the_vdso_image_is_a_pie_whose_symbols_are_the_assembled_code() {
        let Some((image, _)) = crate::vdso::pages() else { return Err("no vDSO".into()) };
        let limits = elf::Limits {
            page_size: mm::addr::PAGE_SIZE,
            min_addr: 0x1000,
            task_size: 1 << 48,
            pie_base: 1 << 40,
            w_xor_x: true,
        };
        let exe = elf::parse(image, &limits).map_err(|e| alloc::format!("{e}"))?;
        ensure!(exe.pie && exe.segments.len() == 1 && exe.segments[0].prot.exec, "{:?}", exe.segments);
        ensure_eq!(symbol(image, b"__kernel_clock_gettime"), Some(crate::vdso::clock_gettime_offset()));
        for name in [&b"__kernel_gettimeofday"[..], b"__kernel_clock_getres"] {
            ensure!(symbol(image, name).is_some(), "no {}", core::str::from_utf8(name).unwrap_or("?"));
        }
        let sigreturn = symbol(image, b"__kernel_rt_sigreturn").ok_or("no __kernel_rt_sigreturn")? as usize;
        let code = signal::frame::SIGRETURN_CODE;
        ensure_eq!((u32_at(image, sigreturn), u32_at(image, sigreturn + 4)), (Some(code[0]), Some(code[1])));
        Ok(())
    }
);

kernel_test!(
    fn the_vdso_data_page_holds_the_scale_clock_gettime_uses() {
        let Some((_, vvar)) = crate::vdso::pages() else { return Err("no vDSO".into()) };
        ensure!(
            u32_at(vvar, 0).is_some_and(|seq| seq % 2 == 0 && seq != 0),
            "sequence {:?}",
            u32_at(vvar, 0)
        );
        ensure_eq!(u64_at(vvar, 8), Some(crate::wallclock::scale().mult));
        ensure_eq!(u64_at(vvar, 16), Some(crate::wallclock::realtime_offset_ns()));
        Ok(())
    }
);
