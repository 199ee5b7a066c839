//! `near` (the Node.js scenario, its `MAP_FIXED_NOREPLACE` probing for code near the binary): a target whose neighbourhood is taken (±2048 pages, one hole
//! 1000 pages below it), then the placement of one page as close to the target as possible:
//! by probing with `MAP_FIXED_NOREPLACE` one page at a time (16 and 1024 pages each way, as
//! Node did before and after its fix), and by one `SYS_MMAP_NEAR` call. Each method's guest time,
//! system calls and distance are printed. On Linux (ENOSYS) only the probes run.

use crate::rt::{Centi, ticks, ticks_to_centi_us};
use crate::sys::{self, Errno, MAP_FIXED_NOREPLACE, PROT_READ, PROT_WRITE};
use crate::{Checks, Ctx, check, ok, say};

const SPAN: u64 = 2048;
const HOLE: u64 = 1000;

/// Distance from `t` to the farthest byte of `[a, a + len)`, the quantity near placement minimises.
fn dist(t: u64, a: u64, len: u64) -> u64 {
    a.abs_diff(t).max((a + len).abs_diff(t))
}

struct Found {
    addr: Option<u64>,
    syscalls: u64,
    centi_us: u64,
}

/// Node's `AllocateCodeNear`: try `target + i*page`, then `target - i*page`, for i = 1..=radius.
fn probe(target: u64, page: u64, radius: u64, ignored: &mut u64) -> Found {
    let s0 = sys::count();
    let t0 = ticks();
    let mut addr = None;
    'outer: for i in 1..=radius {
        for cand in [target.checked_add(i * page), target.checked_sub(i * page)] {
            let Some(cand) = cand else { continue };
            match sys::mmap_anon(cand, page, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE) {
                Ok(a) if a == cand => {
                    addr = Some(a);
                    break 'outer;
                }
                Ok(a) => {
                    // A kernel that does not know the flag treats the address as a hint.
                    *ignored += 1;
                    // SAFETY: `a` is the fresh page just mapped; nothing references it.
                    let _ = unsafe { sys::munmap(a, page) };
                }
                Err(_) => {}
            }
        }
    }
    let t = ticks() - t0;
    Found { addr, syscalls: sys::count() - s0, centi_us: ticks_to_centi_us(t) }
}

fn near(target: u64, page: u64, radius_pages: u64) -> (Result<u64, Errno>, u64, u64) {
    let s0 = sys::count();
    let t0 = ticks();
    let r = sys::mmap_near(target, page, radius_pages * page, PROT_READ | PROT_WRITE, 0);
    let t = ticks() - t0;
    (r, sys::count() - s0, ticks_to_centi_us(t))
}

fn give_back(a: Option<u64>, page: u64) {
    if let Some(a) = a {
        // SAFETY: the page was mapped by a probe or SYS_MMAP_NEAR here and is not used.
        let _ = unsafe { sys::munmap(a, page) };
    }
}

fn show(what: &str, f: &Found, target: u64, page: u64) {
    match f.addr {
        Some(a) => say!(
            "  {what}: found {a:#x}, {} pages from the target, {} system calls, {} us",
            dist(target, a, page) / page,
            f.syscalls,
            Centi(f.centi_us)
        ),
        None => say!("  {what}: nothing free, {} system calls, {} us", f.syscalls, Centi(f.centi_us)),
    }
}

pub fn run(ctx: &Ctx) -> bool {
    let mut c = Checks::new("near");
    let page = ctx.page;
    let reps = if ctx.full { 10 } else { 3 };
    say!(
        "== near: target with ±{SPAN} pages taken except one hole {HOLE} pages below; probing vs SYS_MMAP_NEAR (best of {reps})"
    );
    let len = (2 * SPAN + 1) * page;
    let base = match sys::mmap_anon(0, len, sys::PROT_NONE, sys::MAP_NORESERVE) {
        Ok(b) => b,
        Err(e) => {
            check!(c, false, "cannot reserve the neighbourhood: {e}");
            return c.done();
        }
    };
    let target = base + SPAN * page;
    let hole = target - HOLE * page;
    // SAFETY: the hole is inside our own PROT_NONE reservation.
    let r = unsafe { sys::munmap(hole, page) };
    check!(c, r.is_ok(), "munmap of the hole failed: {:?}", r.err());
    say!("  target {target:#x}, neighbourhood [{base:#x}, {:#x}), hole {hole:#x}", base + len);

    let mut ignored = 0;
    let best = |c: &mut Found, n: Found| {
        if c.centi_us == 0 || n.centi_us < c.centi_us {
            *c = n;
        }
    };
    let (mut p16, mut p1024) =
        (Found { addr: None, syscalls: 0, centi_us: 0 }, Found { addr: None, syscalls: 0, centi_us: 0 });
    for _ in 0..reps {
        let f = probe(target, page, 16, &mut ignored);
        give_back(f.addr, page);
        best(&mut p16, f);
        let f = probe(target, page, 1024, &mut ignored);
        give_back(f.addr, page);
        best(&mut p1024, f);
    }
    show("probe ±16 pages  ", &p16, target, page);
    show("probe ±1024 pages", &p1024, target, page);
    if ignored > 0 {
        say!("  note: {ignored} probes came back at another address (MAP_FIXED_NOREPLACE treated as a hint)");
    }
    check!(c, p16.addr.is_none(), "a ±16 probe found {:?} inside the taken neighbourhood", p16.addr);
    if ignored == 0 {
        ok!(c, p1024.addr == Some(hole), "probing ±1024 pages finds the hole ({:?})", p1024.addr);
    }

    let (r, _, _) = near(target, page, 1024);
    match r {
        Err(Errno::ENOSYS) => {
            say!("  SYS_MMAP_NEAR: ENOSYS (Linux): probing is the only way; no comparison");
        }
        Err(e) => {
            check!(c, false, "SYS_MMAP_NEAR(radius 1024 pages) failed: {e}");
        }
        Ok(a) => {
            give_back(Some(a), page);
            let (mut calls, mut cus, mut same) = (0, u64::MAX, true);
            for _ in 0..reps {
                let (r, n, t) = near(target, page, 1024);
                give_back(r.ok(), page);
                same &= r == Ok(a);
                if t < cus {
                    (calls, cus) = (n, t);
                }
            }
            check!(c, same, "SYS_MMAP_NEAR gave different answers for the same layout (first {a:#x})");
            let d = dist(target, a, page);
            say!(
                "  SYS_MMAP_NEAR r=1024 pages: found {a:#x}, {} pages from the target, {calls} system call, {} us",
                d / page,
                Centi(cus)
            );
            ok!(c, d <= 1024 * page && a >= target - 1024 * page, "near result lies within the radius");
            let pd = p1024.addr.map_or(u64::MAX, |p| dist(target, p, page));
            ok!(
                c,
                d <= pd,
                "near result is no farther than the best probe ({} vs {} pages)",
                d / page,
                pd / page
            );
            if p1024.centi_us > 0 && cus > 0 {
                say!("  speed-up over ±1024 probing: {}x", Centi(p1024.centi_us * 100 / cus.max(1)));
            }
            let (r16, _, _) = near(target, page, 16);
            give_back(r16.ok(), page);
            ok!(
                c,
                r16 == Err(Errno::ENOMEM),
                "SYS_MMAP_NEAR r=16 pages: ENOMEM as nothing is free ({r16:?})"
            );
            // Exhausted: fill the hole, then both methods must come back empty.
            let plug = sys::mmap_anon(hole, page, sys::PROT_NONE, MAP_FIXED_NOREPLACE);
            check!(c, plug == Ok(hole), "could not plug the hole: {plug:?}");
            let f = probe(target, page, 1024, &mut ignored);
            give_back(f.addr, page);
            show("exhausted, probe ±1024", &f, target, page);
            let (r, calls, cus) = near(target, page, 1024);
            give_back(r.ok(), page);
            say!("  exhausted, SYS_MMAP_NEAR r=1024: {r:?}, {calls} system call, {} us", Centi(cus));
            ok!(c, r == Err(Errno::ENOMEM), "exhausted neighbourhood: SYS_MMAP_NEAR gives ENOMEM");
            // The neighbourhood is intact (nothing was replaced): the target page is still taken.
            let t = sys::mmap_anon(target, page, sys::PROT_NONE, MAP_FIXED_NOREPLACE);
            give_back(t.ok(), page);
            ok!(c, t == Err(Errno::EEXIST), "neighbourhood intact after near placement ({t:?})");
            // Argument checks from the ABI.
            let bad = sys::mmap_near(target + 1, page, 16 * page, PROT_READ, 0);
            give_back(bad.ok(), page);
            check!(
                c,
                bad == Err(Errno::EINVAL),
                "SYS_MMAP_NEAR with unaligned target: {bad:?}, expected EINVAL"
            );
            let bad = sys::mmap_near(target, 0, 16 * page, PROT_READ, 0);
            give_back(bad.ok(), page);
            check!(c, bad == Err(Errno::EINVAL), "SYS_MMAP_NEAR with len 0: {bad:?}, expected EINVAL");
        }
    }
    // SAFETY: the whole neighbourhood reservation is ours and unused.
    let _ = unsafe { sys::munmap(base, len) };
    if ctx.ext {
        near_text(&mut c, page);
    }
    c.done()
}

/// A code page near this program's text (a trampoline within BL range, ±128 MiB): with
/// `MAP_CODE` the search is confined to the code window, so the result must lie in the window and
/// within the radius.
fn near_text(c: &mut Checks, page: u64) {
    let (ts, _) = crate::layout::text();
    let radius = 128 * crate::layout::MIB;
    let r = sys::mmap_near(ts, page, radius, PROT_READ | PROT_WRITE, sys::MAP_CODE);
    give_back(r.ok(), page);
    match (r, crate::layout::window()) {
        (Ok(a), Ok(w)) => {
            ok!(
                c,
                dist(ts, a, page) <= radius && crate::layout::in_window(&w, a, a + page),
                "SYS_MMAP_NEAR(MAP_CODE) near the text {ts:#x}: {a:#x}, {} pages away, inside the code window",
                dist(ts, a, page) / page
            );
        }
        (r, w) => {
            check!(c, false, "SYS_MMAP_NEAR(MAP_CODE) near the text {ts:#x}: {r:?} (window {w:?})");
        }
    }
}
