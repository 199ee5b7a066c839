//! `code-region` (the Chez Scheme scenario: its maintainer declined a 512 MiB code region): thousands of small code objects carved from 256 KiB
//! chunks mapped `PROT_READ | PROT_WRITE | MAP_CODE`, first in a plain address space and then after
//! `fill` has taken the free space below the next 4 GiB boundary above the text. On this kernel
//! every chunk must lie in the code window with the text, freed ranges must be reused and read
//! zero, and code written into a chunk must run after the RW → RX switch and cache maintenance.
//! On Linux (no window) the placement is reported, not checked.

use alloc::vec::Vec;

use crate::layout::{self, GIB, KIB, Size, yes};
use crate::sys::{self, CodeWindowInfo, Errno, MAP_CODE, PROT_READ, PROT_WRITE};
use crate::{Checks, Ctx, check, jit, ok, say};

const CHUNK: u64 = 256 * KIB;

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        // xorshift64*
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
}

pub fn run(ctx: &Ctx) -> bool {
    let mut c = Checks::new("code-region");
    let n = if ctx.full { 100_000 } else { 20_000 };
    say!(
        "== code-region: {n} code objects of 64-512 bytes carved from {} chunks (RW + MAP_CODE, then RX)",
        Size(CHUNK)
    );
    let win = match layout::window() {
        Ok(w) => {
            check!(
                c,
                layout::window_sane(&w),
                "window {:#x}+{:#x} is not a power of two aligned to itself",
                w.base,
                w.size
            );
            let (ts, te) = layout::text();
            ok!(
                c,
                layout::in_window(&w, ts, te),
                "text [{ts:#x}, {te:#x}) inside the code window [{:#x}, {:#x})",
                w.base,
                w.base.wrapping_add(w.size)
            );
            Some(w)
        }
        Err(Errno::ENOSYS) => {
            say!(
                "  no code window (SYS_CODE_WINDOW: ENOSYS): reporting where code lands instead of checking it"
            );
            None
        }
        Err(e) => {
            check!(c, false, "SYS_CODE_WINDOW/WINDOW_GET failed: {e}");
            None
        }
    };

    phase(ctx, &mut c, "plain", n, win.is_some());

    let (ts, _) = layout::text();
    let boundary = (ts / (4 * GIB) + 1) * (4 * GIB);
    let t = crate::rt::ticks();
    let fill = layout::fill_below(0x1_0000, boundary, CHUNK);
    let dt = crate::rt::ticks() - t;
    say!(
        "  fill: took {} below the 4 GiB boundary {boundary:#x} in {} PROT_NONE reservations ({} system calls, {} ms)",
        Size(fill.bytes),
        fill.ranges.len(),
        fill.syscalls,
        crate::rt::ticks_to_centi_us(dt) / 100_000
    );
    if let (Some(w0), Ok(w)) = (win, layout::window()) {
        let inside: u64 = fill
            .ranges
            .iter()
            .map(|&(a, l)| {
                let lo = a.max(w.base);
                let hi = (a + l).min(w.base + w.size);
                hi.saturating_sub(lo)
            })
            .sum();
        say!(
            "  fill: code window used {} -> {}; the fill holds {} inside it{}",
            Size(w0.used),
            Size(w.used),
            Size(inside),
            if inside > 0 { " (the kernel honoured non-code hints inside the window)" } else { "" }
        );
    }
    phase(ctx, &mut c, "fill", n, win.is_some());
    fill.release();
    c.done()
}

fn window_now() -> Option<CodeWindowInfo> {
    layout::window().ok()
}

/// Maps one code chunk (RW, MAP_CODE, no hint).
fn chunk() -> Result<u64, Errno> {
    sys::mmap_anon(0, CHUNK, PROT_READ | PROT_WRITE, MAP_CODE)
}

fn reads_zero(addr: u64, len: u64) -> bool {
    // SAFETY: `[addr, addr + len)` is a readable mapping this program owns; volatile so the reads
    // really reach memory (the point is what the kernel maps there).
    (0..len / 8).all(|i| unsafe { ((addr as *const u64).add(i as usize)).read_volatile() } == 0)
}

fn release(chunks: &[u64]) {
    for &a in chunks {
        // SAFETY: the chunk is ours and nothing references it any more.
        let _ = unsafe { sys::munmap(a, CHUNK) };
    }
}

fn phase(ctx: &Ctx, c: &mut Checks, name: &str, n: u32, ext: bool) {
    let w0 = window_now();
    let mut rng = Rng(ctx.seed ^ (name.len() as u64).wrapping_mul(0x9e37_79b9));
    let mut chunks: Vec<u64> = Vec::new();
    let mut objs: Vec<(u64, u32)> = Vec::with_capacity(n as usize);
    let (mut cur, mut left) = (0u64, 0u64);
    let sc = sys::count();
    let t = crate::rt::ticks();
    for id in 0..n {
        let size = (64 + rng.next() % 449) & !3;
        if size > left {
            match chunk() {
                Ok(a) => {
                    chunks.push(a);
                    cur = a;
                    left = CHUNK;
                }
                Err(e) => {
                    check!(c, false, "{name}: mmap of code chunk {} failed: {e}", chunks.len());
                    release(&chunks);
                    return;
                }
            }
        }
        let words = (size / 4) as usize;
        let mut code = [jit::brk(id as u16); 128];
        code[0] = jit::movz(0, id as u16, 0);
        code[1] = jit::RET;
        // SAFETY: `[cur, cur + size)` lies in a fresh RW chunk owned by this function.
        unsafe { jit::put(cur, &code[..words]) };
        objs.push((cur, id));
        cur += size;
        left -= size;
    }
    let dt = crate::rt::ticks() - t;
    let lo = *chunks.iter().min().unwrap_or(&0);
    let hi = chunks.iter().max().map_or(0, |&a| a + CHUNK);
    say!(
        "  {name}: {n} objects in {} chunks, {} system calls, {} ms",
        chunks.len(),
        sys::count() - sc,
        crate::rt::ticks_to_centi_us(dt) / 100_000
    );
    let (c1, c4) = layout::report_placement(name, lo, hi);
    if let (true, Some(w)) = (ext, window_now()) {
        let outside = chunks.iter().filter(|&&a| !layout::in_window(&w, a, a + CHUNK)).count();
        ok!(
            c,
            outside == 0,
            "{name}: all {} chunks inside the code window [{:#x}, {:#x}) with the text ({outside} outside; \
             window used {})",
            chunks.len(),
            w.base,
            w.base.wrapping_add(w.size),
            Size(w.used)
        );
        let (ts, te) = layout::text();
        check!(c, layout::in_window(&w, ts, te), "{name}: text left the code window");
        let before = w0.map_or(0, |w| w.placed_outside);
        ok!(
            c,
            w.placed_outside == before,
            "{name}: kernel placed no code mapping outside the window ({before} -> {})",
            w.placed_outside
        );
        // A window aligned to its size crosses no boundary of its size or larger.
        let c1 = c1 && w.size <= GIB;
        check!(c, !c1 && !c4, "{name}: code and text cross a 1 GiB or 4 GiB boundary");
    } else {
        say!(
            "  {name}: (Linux) code crossed 1 GiB: {}, 4 GiB: {} relative to the text — informative",
            yes(c1),
            yes(c4)
        );
    }

    // Free every other chunk; first check that MADV_DONTNEED makes a written chunk read zero.
    if chunks.len() >= 2 {
        // SAFETY: the objects in chunk 0 are never called; only this function references it.
        let r = unsafe { sys::madvise(chunks[0], CHUNK, sys::MADV_DONTNEED) };
        check!(c, r.is_ok(), "{name}: madvise(MADV_DONTNEED) failed: {:?}", r.err());
        ok!(c, reads_zero(chunks[0], CHUNK), "{name}: chunk reads zero after MADV_DONTNEED");
    }
    let freed: Vec<u64> = chunks.iter().step_by(2).copied().collect();
    let kept: Vec<u64> = chunks.iter().skip(1).step_by(2).copied().collect();
    release(&freed);
    let mut again: Vec<u64> = Vec::new();
    for _ in 0..freed.len() {
        match chunk() {
            Ok(a) => again.push(a),
            Err(e) => {
                check!(c, false, "{name}: re-allocation failed: {e}");
                break;
            }
        }
    }
    let reused = again.iter().filter(|a| freed.contains(a)).count();
    let zero = again.iter().filter(|&&a| reads_zero(a, CHUNK)).count();
    ok!(c, zero == again.len(), "{name}: {} re-allocated chunks read zero ({zero} did)", again.len());
    if ext {
        ok!(c, reused == freed.len(), "{name}: freed ranges reused: {reused} of {}", freed.len());
        if let Some(w) = window_now() {
            let outside = again.iter().filter(|&&a| !layout::in_window(&w, a, a + CHUNK)).count();
            check!(c, outside == 0, "{name}: {outside} re-allocated chunks outside the window");
        }
    } else {
        say!("  {name}: (Linux) freed ranges reused: {reused} of {} — informative", freed.len());
    }

    run_code(c, name, ext, &objs, &kept, &again);
    release(&kept);
    release(&again);
}

/// Publishes a kept chunk of objects and a fresh chunk of hand-made functions, calls them and
/// checks the results; then re-writes code in place (RX → RW → RX) and checks the new code runs.
fn run_code(c: &mut Checks, name: &str, ext: bool, objs: &[(u64, u32)], kept: &[u64], again: &[u64]) {
    let (Some(&k), Some(&fresh)) = (kept.first(), again.first()) else {
        say!("  {name}: too few chunks to run code");
        return;
    };
    // SAFETY: nothing writes chunk `k` after this point.
    let r = unsafe { jit::publish(k, CHUNK) };
    if !check!(c, r.is_ok(), "{name}: mprotect RW -> RX failed: {:?}", r.err()) {
        return;
    }
    let mut calls = 0;
    let mut wrong = 0;
    for &(a, id) in objs.iter().filter(|&&(a, _)| a >= k && a < k + CHUNK) {
        // SAFETY: `a` holds `movz x0, #id; ret`, published above.
        let v = unsafe { jit::call0(a) };
        calls += 1;
        if v != u64::from(id as u16) {
            wrong += 1;
        }
    }
    ok!(
        c,
        wrong == 0 && calls > 0,
        "{name}: called {calls} code objects in chunk {k:#x}: {wrong} wrong results"
    );

    // A fresh chunk: an add function, a 64-bit constant and a call into the kept chunk.
    let first_kept = objs.iter().find(|&&(a, _)| a == k).map(|&(_, id)| id as u16);
    let magic = 0x1234_5678_9abc_def0u64 ^ fresh;
    let stub = jit::template(jit::Tmpl::Call);
    // SAFETY: `fresh` is a RW chunk of CHUNK bytes owned here; offsets 0..64, 64..84 and 128..
    // (the stub is under 64 bytes) are disjoint and inside it.
    unsafe {
        jit::put(fresh, &[jit::ADD_X0_X0_X1, jit::RET]);
        let m = jit::mov_imm64(0, magic);
        jit::put(fresh + 64, &[m[0], m[1], m[2], m[3], jit::RET]);
        jit::put_bytes(fresh + 128, stub);
        ((fresh + 128 + stub.len() as u64 - 8) as *mut u64).write_volatile(k);
    }
    // SAFETY: nothing writes `fresh` until the RX → RW switch below.
    let r = unsafe { jit::publish(fresh, CHUNK) };
    if !check!(c, r.is_ok(), "{name}: mprotect RW -> RX failed: {:?}", r.err()) {
        return;
    }
    // SAFETY: each address holds a published function with the called signature.
    let (sum, imm, via) =
        unsafe { (jit::call2(fresh, 40, 2), jit::call0(fresh + 64), jit::call0(fresh + 128)) };
    ok!(
        c,
        sum == 42 && imm == magic && Some(via as u16) == first_kept,
        "{name}: generated add(40, 2) = {sum}, mov imm64 = {imm:#x}, cross-chunk call {fresh:#x} -> {k:#x} = {via}"
    );

    // Patch in place: RX -> RW, rewrite, RX; the new instruction must be fetched.
    // SAFETY: no code in `fresh` runs while it is writable.
    let r = unsafe { sys::mprotect(fresh, CHUNK, PROT_READ | PROT_WRITE) };
    if check!(c, r.is_ok(), "{name}: mprotect RX -> RW failed: {:?}", r.err()) {
        // SAFETY: the chunk is RW again and ours.
        unsafe { jit::put(fresh + 64, &[jit::movz(0, 77, 0), jit::RET]) };
        // SAFETY: nothing writes `fresh` afterwards.
        let r = unsafe { jit::publish(fresh, CHUNK) };
        // SAFETY: offset 64 now holds `movz x0, #77; ret`, published.
        let v = if r.is_ok() { unsafe { jit::call0(fresh + 64) } } else { 0 };
        ok!(c, v == 77, "{name}: code rewritten in place (RX -> RW -> RX) returns {v} (expected 77)");
    }

    dual_mapping(c, name, ext);

    // W^X: a mapping may not be writable and executable at once on this kernel.
    if let Some(&x) = again.get(1) {
        // SAFETY: chunk `x` holds no code anyone calls; adding rights breaks nothing.
        let r = unsafe { sys::mprotect(x, CHUNK, PROT_READ | PROT_WRITE | sys::PROT_EXEC) };
        if ext {
            ok!(c, r == Err(Errno::EACCES), "{name}: mprotect(RWX) refused with EACCES (W^X): got {r:?}");
        } else {
            say!("  {name}: (Linux) mprotect(RWX) -> {r:?} — Linux permits W+X; informative");
        }
    }
}

/// The W^X dual-mapping pattern: code written through a read-write view of a memfd runs
/// through a read-execute view of the same pages, rewritten and run again with no `mprotect`;
/// on this kernel the executable view lies in the code window.
fn dual_mapping(c: &mut Checks, name: &str, ext: bool) {
    let view = match jit::DualView::new(CHUNK) {
        Ok(v) => v,
        Err(e) => {
            check!(c, false, "{name}: memfd dual mapping failed: {e:?}");
            return;
        }
    };
    let mut results = [0u64; 2];
    for (i, n) in [55u16, 66].into_iter().enumerate() {
        // SAFETY: the read-write view is ours and nothing runs the code while it is written.
        unsafe { jit::put(view.rw, &[jit::movz(0, n, 0), jit::RET]) };
        view.publish(0, 8);
        // SAFETY: the executable view now holds `movz x0, #n; ret`, published.
        results[i] = unsafe { jit::call0(view.rx) };
    }
    let inside = window_now().is_some_and(|w| view.rx >= w.base && view.rx < w.base + w.size);
    ok!(
        c,
        results == [55, 66] && (inside || !ext),
        "{name}: dual mapping (RW {:#x}, RX {:#x}{}): wrote, published, ran {}, rewrote, ran {}",
        view.rw,
        view.rx,
        if ext { if inside { ", in the code window" } else { ", OUTSIDE the code window" } } else { "" },
        results[0],
        results[1]
    );
}
