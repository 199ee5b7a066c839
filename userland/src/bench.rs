//! `bench` (after the seed's `bench.ss`): a boids-style step over small records of three f64
//! whose vector operations are generated code. Every operation is a hot indirect call from this
//! program into a call-through stub in chunk A, which calls the operation in chunk B indirectly
//! and returns through A: calls and returns between two generated chunks. It runs with A and B
//! where the kernel puts code (`MAP_CODE`, no hint: the code window here, anywhere on Linux) and,
//! when the kernel lets it, with A just below and B just above a 4 GiB boundary. Timing is
//! informative only; the two layouts must compute bit-identical flocks.

use alloc::vec;
use alloc::vec::Vec;

use crate::jit::{self, Tmpl};
use crate::layout::{self, GIB, KIB};
use crate::rt::{Centi, ticks, ticks_to_centi_us};
use crate::sys::{self, Errno, MAP_CODE, MAP_FIXED_NOREPLACE, PROT_READ, PROT_WRITE};
use crate::{Checks, Ctx, check, ok, say};

type V = [f64; 3];
const Z: V = [0.0; 3];
const CHUNK: u64 = 64 * KIB;

type Bin = extern "C" fn(*mut V, *const V, *const V);
type Scale = extern "C" fn(*mut V, *const V, f64);
type Len = extern "C" fn(*const V) -> f64;

struct Ops {
    add: Bin,
    sub: Bin,
    scale: Scale,
    len: Len,
}

/// Writes the four operations into `b`, their call-through stubs into `a`, and publishes both.
///
/// # Safety
/// `a` and `b` must be distinct RW chunks of `CHUNK` bytes owned by the caller.
unsafe fn build(a: u64, b: u64) -> Result<Ops, Errno> {
    let stub = jit::template(Tmpl::Call);
    for (i, t) in [Tmpl::Vadd, Tmpl::Vsub, Tmpl::Vscale, Tmpl::Vlen].into_iter().enumerate() {
        let off = 64 * i as u64;
        // SAFETY: the caller owns both RW chunks; every template is under 64 bytes.
        unsafe {
            jit::put_bytes(b + off, jit::template(t));
            jit::put_bytes(a + off, stub);
            ((a + off + stub.len() as u64 - 8) as *mut u64).write_volatile(b + off);
        }
    }
    // SAFETY: neither chunk is written again.
    unsafe {
        jit::publish(b, CHUNK)?;
        jit::publish(a, CHUNK)?;
    }
    // SAFETY: each address now holds a published stub that calls an operation with that
    // signature (AAPCS64: pointers in x0..x2, the scale in d0, the length returned in d0).
    unsafe {
        Ok(Ops {
            add: core::mem::transmute::<usize, Bin>(a as usize),
            sub: core::mem::transmute::<usize, Bin>((a + 64) as usize),
            scale: core::mem::transmute::<usize, Scale>((a + 128) as usize),
            len: core::mem::transmute::<usize, Len>((a + 192) as usize),
        })
    }
}

struct Flock {
    pos: Vec<V>,
    vel: Vec<V>,
    /// The next step's positions and velocities (swapped in; the bump allocator never frees).
    np: Vec<V>,
    nv: Vec<V>,
}

fn new_flock(n: usize) -> Flock {
    // (10 sin i, 10 cos i, 0.1 i) by rotating by one radian per bird, as bench.ss's new-flock.
    let (s1, c1) = (0.841_470_984_807_896_5, 0.540_302_305_868_139_8);
    let (mut s, mut c) = (0.0f64, 1.0f64);
    let mut f = Flock {
        pos: Vec::with_capacity(n),
        vel: vec![[1.0, 0.5, 0.25]; n],
        np: Vec::with_capacity(n),
        nv: Vec::with_capacity(n),
    };
    for i in 0..n {
        f.pos.push([10.0 * s, 10.0 * c, 0.1 * i as f64]);
        (s, c) = (s * c1 + c * s1, c * c1 - s * s1);
    }
    f
}

/// One step; returns the number of generated-code calls it made.
fn step(o: &Ops, f: &mut Flock, dt: f64) -> u64 {
    let n = f.pos.len();
    let mut calls = 0;
    let (mut np, mut nv) = (core::mem::take(&mut f.np), core::mem::take(&mut f.nv));
    np.clear();
    nv.clear();
    let (mut t, mut u) = (Z, Z);
    for i in 0..n {
        let (p, v) = (f.pos[i], f.vel[i]);
        let (mut sep, mut ali, mut coh, mut near) = (Z, Z, Z, 0u32);
        for j in 0..n {
            (o.sub)(&mut t, &f.pos[j], &p);
            let d = (o.len)(&t);
            calls += 2;
            if d > 0.0 && d < 6.0 {
                near += 1;
                (o.add)(&mut u, &ali, &f.vel[j]);
                ali = u;
                (o.add)(&mut u, &coh, &f.pos[j]);
                coh = u;
                calls += 2;
                if d < 1.5 {
                    (o.sub)(&mut t, &p, &f.pos[j]);
                    (o.add)(&mut u, &sep, &t);
                    sep = u;
                    calls += 2;
                }
            }
        }
        if near > 0 {
            let k = 1.0 / f64::from(near);
            (o.scale)(&mut t, &ali, k);
            (o.sub)(&mut ali, &t, &v);
            (o.scale)(&mut t, &coh, k);
            (o.sub)(&mut coh, &t, &p);
            calls += 4;
        }
        let (mut a, mut b, mut s) = (Z, Z, Z);
        (o.scale)(&mut a, &sep, 1.6);
        (o.scale)(&mut b, &ali, 0.8);
        (o.add)(&mut s, &a, &b);
        (o.scale)(&mut a, &coh, 1.2);
        (o.add)(&mut b, &s, &a);
        (o.scale)(&mut a, &b, dt);
        let mut vv = Z;
        (o.add)(&mut vv, &v, &a);
        (o.scale)(&mut a, &vv, dt);
        let mut pp = Z;
        (o.add)(&mut pp, &p, &a);
        calls += 9;
        np.push(pp);
        nv.push(vv);
    }
    f.np = core::mem::replace(&mut f.pos, np);
    f.nv = core::mem::replace(&mut f.vel, nv);
    calls
}

/// Runs the benchmark on ops in chunks `a`, `b`; returns (centi-µs per step, checksum bits).
fn time(o: &Ops, birds: usize, steps: u32) -> (u64, u64, u64) {
    let mut f = new_flock(birds);
    let dt = 1.0 / 60.0;
    for _ in 0..3 {
        step(o, &mut f, dt);
    }
    let mut calls = 0;
    let t0 = ticks();
    for _ in 0..steps {
        calls += step(o, &mut f, dt);
    }
    let t = ticks() - t0;
    let sum: f64 = f.pos.iter().map(|p| p[0] + p[1] + p[2]).sum();
    (ticks_to_centi_us(t) / u64::from(steps), sum.to_bits(), calls / u64::from(steps))
}

fn release(a: u64, b: u64) {
    for x in [a, b] {
        // SAFETY: the chunk is ours and its code is no longer called.
        let _ = unsafe { sys::munmap(x, CHUNK) };
    }
}

/// Maps A just below and B just above a 4 GiB boundary at or above `from`.
fn straddle(from: u64) -> Option<(u64, u64, u64)> {
    let mut x = from;
    for _ in 0..16 {
        let a = sys::mmap_anon(x - CHUNK, CHUNK, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE);
        let b = sys::mmap_anon(x, CHUNK, PROT_READ | PROT_WRITE, MAP_FIXED_NOREPLACE);
        if a == Ok(x - CHUNK) && b == Ok(x) {
            return Some((x - CHUNK, x, x));
        }
        for (r, want) in [(a, x - CHUNK), (b, x)] {
            if let Ok(got) = r {
                // SAFETY: a fresh mapping nothing references.
                let _ = unsafe { sys::munmap(got, CHUNK) };
                let _ = want;
            }
        }
        x += 4 * GIB;
    }
    None
}

pub fn run(ctx: &Ctx) -> bool {
    let mut c = Checks::new("bench");
    let birds = 100;
    let (steps, reps) = if ctx.full { (300, 5) } else { (10, 2) };
    say!(
        "== bench: boids step over {birds} birds, {steps} timed steps, best of {reps} interleaved runs; \
         vector ops in generated chunk B called through stubs in chunk A"
    );

    // Layout 1: where the kernel puts code.
    let a = sys::mmap_anon(0, CHUNK, PROT_READ | PROT_WRITE, MAP_CODE);
    let b = sys::mmap_anon(0, CHUNK, PROT_READ | PROT_WRITE, MAP_CODE);
    let (Ok(a), Ok(b)) = (a, b) else {
        check!(c, false, "cannot map the benchmark's chunks: {a:?} {b:?}");
        return c.done();
    };
    // SAFETY: `a` and `b` are fresh distinct RW chunks.
    let ops = unsafe { build(a, b) };
    let Ok(ops) = ops else {
        check!(c, false, "cannot publish the benchmark's code: {:?}", ops.err());
        release(a, b);
        return c.done();
    };
    let (lo, hi) = (a.min(b), a.max(b) + CHUNK);
    let (c1, c4) = layout::report_placement("default placement (MAP_CODE)", lo, hi);
    if let (true, Ok(w)) = (ctx.ext, layout::window()) {
        // A window aligned to its size crosses no boundary of its size or larger.
        let c1 = c1 && w.size <= GIB;
        check!(
            c,
            !c1 && !c4,
            "benchmark code crosses a 1 GiB / 4 GiB boundary with the text despite the window"
        );
    }
    let default = (a, b);

    // Layout 2: A just below, B just above the next 4 GiB boundary above the text, if the kernel
    // lets a program put code there.
    let (_, te) = layout::text();
    let first = (te / (4 * GIB) + 1) * (4 * GIB);
    let mut spread = None;
    match straddle(first) {
        None => say!(
            "  straddling a 4 GiB boundary: could not map chunks at the boundary (hints refused); not run"
        ),
        // SAFETY: fresh distinct RW chunks.
        Some((a, b, x)) => match unsafe { build(a, b) } {
            Err(e) => {
                say!(
                    "  straddling 4 GiB boundary {x:#x}: making code executable there refused ({e}); not run"
                );
                release(a, b);
            }
            Ok(o) => spread = Some((o, a, b, x)),
        },
    }

    let (mut best1, mut best2, mut sum1, mut sum2, mut calls) = (u64::MAX, u64::MAX, 0, 0, 0);
    for _ in 0..reps {
        let (us, sum, n) = time(&ops, birds, steps);
        (best1, sum1, calls) = (best1.min(us), sum, n);
        if let Some((o, ..)) = &spread {
            let (us, sum, _) = time(o, birds, steps);
            (best2, sum2) = (best2.min(us), sum);
        }
    }
    say!(
        "  default placement: {} us per step ({calls} generated-code calls per step, each a call and return \
         between A and B{})",
        Centi(best1),
        if layout::crosses(lo, hi, 4 * GIB) { ", which lie across a 4 GiB boundary" } else { "" }
    );
    if let Some((_, a, b, x)) = spread {
        say!(
            "  straddling 4 GiB boundary {x:#x} (A {a:#x}, B {b:#x}): {} us per step ({}x default)",
            Centi(best2),
            Centi(best2 * 100 / best1.max(1))
        );
        ok!(c, sum1 == sum2, "both layouts compute the same flock (checksum {sum1:#x})");
        release(a, b);
    }
    release(default.0, default.1);
    say!("  (timings are informative; under QEMU TCG they say nothing about branch prediction)");
    c.done()
}
