//! The recorded programs replayed through [`VmMap`]: the memory calls of Debian's programs under
//! Linux 6.1 (`tests/traces/*.trace`, extracted from `strace` logs: `tests/traces/README.md`),
//! made again in this placement, to show where every executable mapping lands.
//!
//! Why a replay and not only unit tests of the rule: the rule for libraries and JITs
//! (docs/address-space.md, "Libraries and JITs") is decided from what real loaders and JITs do,
//! so it is proven on what they did: every call of glibc's and musl's loaders, of V8, Chez
//! Scheme, LuaJIT, Cranelift and Go's runtime, in their order.
//!
//! Addresses: the calls name Linux's addresses (a `MAP_FIXED` inside a reservation, an
//! `mprotect` of a library's RELRO, a hint at the program's text). Each result Linux returned
//! starts a region mapped to where this placement put the same call's result, and a later
//! address is moved with the newest region that holds it: by its offset in the region, except
//! in a reservation glibc aligned (the text goes to the first multiple of the alignment, so
//! everything after it is moved with it, as glibc computes it from the new start). An address in
//! no region (a hint near the program, Go's arena) is moved with the nearest region within
//! 4 GiB, or kept. The images the kernel maps at `execve` (the program, its interpreter) come from
//! the ELF headers the extract records, loaded where this kernel loads them.
//!
//! Granules: the traces were recorded with 4 KiB pages. A 16 KiB or 64 KiB build rounds each
//! range as the loaders would with that page size (a mapping's start down and its end up, an
//! unmapped range's start up and its end down, a file offset down with its start), and with
//! 64 KiB pages glibc's `_dl_map_segment` maps the text directly (the alignment, 64 KiB, is not
//! above the page size): the reservation and the `MAP_FIXED` text become one `mmap` of the file,
//! and the two trimming `munmap`s are not made.

extern crate std;

use std::collections::HashMap;
use std::format;
use std::string::String;
use std::vec::Vec;

use super::advice::*;
use super::flags::*;
use super::map::remap::{MREMAP_FIXED, MREMAP_MAYMOVE};
use super::{Layout, PAGE, Prot, VmMap, VmaFlags};

/// The initial stack, as the kernel maps it (`kernel/src/process/mod.rs`: `STACK_TOP`, a page
/// under the top, and 8 MiB).
const STACK_TOP: u64 = (1 << crate::addr::USER_VA_BITS) - PAGE;
const STACK_SIZE: u64 = 8 << 20;
/// The page size the traces were recorded with.
const LINUX_PAGE: u64 = 4096;
const GIB4: u64 = 4 << 30;

/// One line of an extract.
#[derive(Clone, Debug)]
enum Op {
    Exec,
    Image(Image),
    Clone { shares: bool, child: u32 },
    Mmap { addr: u64, len: u64, prot: u64, flags: u64, fd: i32, off: u64, res: Option<u64> },
    Munmap { addr: u64, len: u64 },
    Mprotect { addr: u64, len: u64, prot: u64 },
    Mremap { addr: u64, old: u64, new: u64, flags: u64, to: u64, res: Option<u64> },
    Brk { addr: u64, res: u64 },
    Madvise { addr: u64, len: u64, advice: u64 },
    Other,
}

/// An image the kernel maps at `execve` (the program or its interpreter).
#[derive(Clone, Debug)]
struct Image {
    interp: bool,
    pie: bool,
    align: u64,
    /// (vaddr, memsz, prot) of each PT_LOAD.
    loads: Vec<(u64, u64, Prot)>,
    /// Where Linux loaded it (its bias), if the extract found it.
    linux: Option<u64>,
}

impl Image {
    fn span(&self) -> (u64, u64) {
        let lo = self.loads.iter().map(|l| l.0).min().unwrap_or(0) & !(PAGE - 1);
        let hi = self.loads.iter().map(|l| l.0 + l.1).max().unwrap_or(0);
        (lo, hi.next_multiple_of(PAGE))
    }
}

fn num(s: &str) -> u64 {
    if s == "0" {
        0
    } else if let Some(h) = s.strip_prefix("0x") {
        u64::from_str_radix(h, 16).unwrap_or_else(|_| panic!("bad number {s}"))
    } else {
        s.parse().unwrap_or_else(|_| panic!("bad number {s}"))
    }
}

fn prot_of(s: &str) -> u64 {
    let b = s.as_bytes();
    u64::from(b[0] == b'r') | u64::from(b[1] == b'w') << 1 | u64::from(b[2] == b'x') << 2
}

fn map_flags(s: &str) -> u64 {
    s.split('|')
        .map(|f| match f {
            "PRIVATE" => MAP_PRIVATE,
            "SHARED" => MAP_SHARED,
            "FIXED" => MAP_FIXED,
            "ANONYMOUS" => MAP_ANONYMOUS,
            "NORESERVE" => MAP_NORESERVE,
            "STACK" => MAP_STACK,
            "DENYWRITE" => MAP_DENYWRITE,
            "GROWSDOWN" => MAP_GROWSDOWN,
            "POPULATE" => MAP_POPULATE,
            "FIXED_NOREPLACE" => MAP_FIXED_NOREPLACE,
            other => panic!("unknown mmap flag {other}"),
        })
        .fold(0, |a, b| a | b)
}

fn result(s: &str) -> Option<u64> {
    (!s.starts_with('-')).then(|| num(s))
}

fn parse_image(w: &[&str]) -> Image {
    let field = |k: &str| w.iter().find_map(|x| x.strip_prefix(k));
    let loads = field("load=")
        .unwrap_or_else(|| panic!("image without load= {w:?}"))
        .split(',')
        .map(|seg| {
            let (range, prot) = seg.split_once(':').unwrap();
            let (v, m) = range.split_once('+').unwrap();
            (num(v), num(m), Prot::from_bits_truncate(prot_of(prot)))
        })
        .collect();
    Image {
        interp: w[2] == "interp",
        pie: w[4] == "dyn",
        align: num(field("align=").unwrap()).max(PAGE),
        loads,
        linux: field("linux=").filter(|&v| v != "?").map(num),
    }
}

/// The lines of one extract: (thread, operation).
fn parse(text: &str) -> Vec<(u32, Op)> {
    let mut out = Vec::new();
    for line in text.lines().filter(|l| !l.starts_with('#') && !l.is_empty()) {
        let w: Vec<&str> = line.split_whitespace().collect();
        let tid: u32 = w[0].parse().unwrap();
        let res = |i: usize| w.get(i).copied().unwrap_or("-1");
        let op = match w[1] {
            "exec" => Op::Exec,
            "image" => Op::Image(parse_image(&w)),
            "clone" => Op::Clone { shares: w[2] != "fork", child: w[4].parse().unwrap() },
            "mmap" => Op::Mmap {
                addr: num(w[2]),
                len: num(w[3]),
                prot: prot_of(w[4]),
                flags: map_flags(w[5]),
                fd: w[6].parse().unwrap(),
                off: num(w[7]),
                res: result(res(9)),
            },
            "munmap" => Op::Munmap { addr: num(w[2]), len: num(w[3]) },
            "mprotect" => Op::Mprotect { addr: num(w[2]), len: num(w[3]), prot: prot_of(w[4]) },
            "mremap" => {
                let flags = w[5].split('|').fold(0, |a, f| {
                    a | match f {
                        "MAYMOVE" => MREMAP_MAYMOVE,
                        "FIXED" => MREMAP_FIXED,
                        other => panic!("unknown mremap flag {other}"),
                    }
                });
                let fixed = flags & MREMAP_FIXED != 0;
                let to = if fixed { num(w[6]) } else { 0 };
                Op::Mremap {
                    addr: num(w[2]),
                    old: num(w[3]),
                    new: num(w[4]),
                    flags,
                    to,
                    res: result(res(if fixed { 8 } else { 7 })),
                }
            }
            "brk" => Op::Brk { addr: num(w[2]), res: num(w[4]) },
            "madvise" => Op::Madvise {
                addr: num(w[2]),
                len: num(w[3]),
                advice: match w[4] {
                    "DONTNEED" => MADV_DONTNEED,
                    "DONTFORK" => MADV_DONTFORK,
                    "NOHUGEPAGE" => MADV_NOHUGEPAGE,
                    "HUGEPAGE" => MADV_HUGEPAGE,
                    "FREE" => MADV_FREE,
                    other => panic!("unknown advice {other}"),
                },
            },
            _ => Op::Other,
        };
        out.push((tid, op));
    }
    out
}

/// A range Linux returned and where this placement put the same call's result.
#[derive(Clone, Copy, Debug)]
struct Region {
    linux: u64,
    /// The length the program asked for (glibc's reservation is no whole number of pages).
    asked: u64,
    ours: u64,
    ours_len: u64,
    /// glibc aligned its text inside this reservation: Linux's aligned start and ours.
    anchor: Option<(u64, u64)>,
    /// The text was mapped directly (64 KiB pages): the trimming `munmap`s are not made.
    direct: bool,
}

impl Region {
    fn linux_end(&self) -> u64 {
        self.linux + self.asked.next_multiple_of(LINUX_PAGE)
    }

    fn ours_of(&self, a: u64) -> u64 {
        let v = match self.anchor {
            Some((al, ap)) if a >= al => ap + (a - al),
            Some((_, ap)) => (self.ours + (a - self.linux)).min(ap),
            None => self.ours + (a - self.linux),
        };
        v.min(self.ours + self.ours_len)
    }
}

/// Why a range that is not executable lies in the window.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Why {
    /// A loader placed it: the images, the loaders' reservations and file mappings.
    Loader,
    /// The program asked for it by address: what a hint or `MAP_FIXED` put there.
    Asked,
    /// A JIT's buffer for compiled code (`mm::vm::map::mmap`'s `jit_buffer`), while read-write.
    JitBuffer,
}

/// One address space of the replay.
struct Space {
    vm: VmMap,
    /// Newest last.
    regions: Vec<Region>,
    /// Set up from the image lines on the first call after `exec`.
    images: Vec<Image>,
    ready: bool,
    /// Ranges (ours) in the window and why they are there.
    explained: Vec<(u64, u64, Why)>,
    /// The window's bytes that are not executable and that the loaders placed, after the last
    /// call.
    last: u64,
}

/// Where executable mappings landed and what else went into the window.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counts {
    /// The kernel's images and every executable file mapping (the loaders'), in the window.
    pub loader_in: u32,
    /// ... and outside it.
    pub loader_out: u32,
    /// Anonymous memory made executable (`mmap` or `mprotect` adding `PROT_EXEC`), in the window.
    pub jit_in: u32,
    /// ... and outside it.
    pub jit_out: u32,
    /// The most bytes in the window that are not executable and that no loader placed, the
    /// program did not ask for by address (a hint, `MAP_FIXED`) and no JIT's buffer holds.
    pub other_data_peak: u64,
    /// The bytes of the window that are not executable and that the loaders placed (the
    /// libraries' data, bss and holes), at the end (the largest address space's).
    pub library_data: u64,
    /// The most bytes of the window that are not executable and that the program asked for by
    /// address (V8's code range, hinted at its text, where it holds no code).
    pub asked_data_peak: u64,
    /// The most bytes of the window that are not executable and that a JIT's buffer for compiled
    /// code holds (Cranelift's image before its text is made executable, and its other sections).
    pub buffer_data_peak: u64,
    /// Calls Linux completed that failed here.
    pub failed: u32,
}

struct Replay {
    ops: Vec<(u32, Op)>,
    spaces: Vec<Space>,
    space_of: HashMap<u32, usize>,
    counts: Counts,
    rule: bool,
    /// The code floor every exec'd space gets (`VmMap::set_code_floor`).
    floor: u64,
    /// Operations consumed ahead (64 KiB pages: glibc's text mapped with its reservation).
    skip: Vec<bool>,
    /// Failures, for the message of a failing test.
    log: Vec<String>,
}

fn page_down(x: u64) -> u64 {
    x & !(PAGE - 1)
}

fn page_up(x: u64) -> u64 {
    x.next_multiple_of(PAGE)
}

impl Replay {
    fn new(text: &str, rule: bool) -> Replay {
        let ops = parse(text);
        let skip = std::vec![false; ops.len()];
        Replay {
            ops,
            spaces: Vec::new(),
            space_of: HashMap::new(),
            counts: Counts::default(),
            rule,
            floor: 0,
            skip,
            log: Vec::new(),
        }
    }

    fn new_space(&mut self) -> usize {
        let mut vm = VmMap::new(Layout::linux(0));
        vm.set_library_rule(self.rule);
        self.spaces.push(Space {
            vm,
            regions: Vec::new(),
            images: Vec::new(),
            ready: false,
            explained: Vec::new(),
            last: 0,
        });
        self.spaces.len() - 1
    }

    fn run(mut self) -> (Counts, Vec<String>) {
        for i in 0..self.ops.len() {
            if self.skip[i] {
                continue;
            }
            let (tid, op) = self.ops[i].clone();
            match op {
                Op::Exec => {
                    let s = self.new_space();
                    self.space_of.insert(tid, s);
                }
                Op::Image(img) => {
                    let s = self.space_of[&tid];
                    self.spaces[s].images.push(img);
                }
                Op::Clone { shares, child } => {
                    let s = self.space_of[&tid];
                    let c = if shares {
                        s
                    } else {
                        let parent = &self.spaces[s];
                        let mut vm = parent.vm.fork_copy().unwrap();
                        vm.set_library_rule(self.rule);
                        let copy = Space {
                            vm,
                            regions: parent.regions.clone(),
                            images: Vec::new(),
                            ready: parent.ready,
                            explained: parent.explained.clone(),
                            last: parent.last,
                        };
                        self.spaces.push(copy);
                        self.spaces.len() - 1
                    };
                    self.space_of.insert(child, c);
                }
                Op::Other => {}
                op => {
                    let s = self.space_of[&tid];
                    if !self.spaces[s].ready {
                        self.load(s);
                    }
                    self.call(i, s, tid, op);
                    self.measure(s);
                }
            }
        }
        for sp in &self.spaces {
            self.counts.library_data = self.counts.library_data.max(sp.last);
        }
        (self.counts, self.log)
    }

    /// `execve`'s mappings: the program where this kernel loads it, the stack, the code window
    /// around the program's text, the interpreter placed by [`VmMap::place_image`].
    fn load(&mut self, s: usize) {
        let sp = &mut self.spaces[s];
        sp.ready = true;
        let images = core::mem::take(&mut sp.images);
        let Some(exe) = images.iter().find(|i| !i.interp) else { return };
        let (lo, hi) = exe.span();
        // Where this kernel loads a PIE without randomisation (Linux's place, in the middle half
        // of its window).
        let task = 1 << crate::addr::USER_VA_BITS;
        let align = super::aslr::pie_align(super::map::WINDOW_DEFAULT, exe.align);
        let bias = if exe.pie {
            super::aslr::pie_base_unrandomised(task, super::map::WINDOW_DEFAULT, align) - lo
        } else {
            0
        };
        let start_brk = page_up(hi + bias);
        let mut vm = VmMap::new(Layout::linux(start_brk));
        vm.set_library_rule(self.rule);
        vm.set_allow_wx(true);
        let mut text = None;
        for &(v, m, p) in &exe.loads {
            let (a, b) = (page_down(v + bias), page_up(v + m + bias));
            vm.map_kernel(a, b - a, p, VmaFlags::IMAGE).unwrap();
            if p.exec() {
                text = Some((a, b));
            }
        }
        vm.map_kernel(STACK_TOP - STACK_SIZE, STACK_SIZE, Prot::RW, VmaFlags::STACK).unwrap();
        vm.init_code_window(text).unwrap();
        vm.set_code_floor(self.floor);
        sp.explained.push((lo + bias, hi + bias, Why::Loader));
        if let Some(linux) = exe.linux {
            sp.regions.push(image_region(linux + lo, hi - lo, lo + bias));
        }
        let inside =
            |vm: &VmMap, a: u64, b: u64| vm.code_window_range().is_some_and(|(w0, w1)| w0 <= a && b <= w1);
        if let Some((a, b)) = text {
            self.counts.count_loader(inside(&vm, a, b));
        }
        if let Some(interp) = images.iter().find(|i| i.interp) {
            let (lo, hi) = interp.span();
            let at = vm.place_image(hi - lo, interp.align).unwrap();
            for &(v, m, p) in &interp.loads {
                let (a, b) = (page_down(v - lo + at), page_up(v - lo + m + at));
                vm.map_kernel(a, b - a, p, VmaFlags::IMAGE).unwrap();
                if p.exec() {
                    self.counts.count_loader(inside(&vm, a, b));
                }
            }
            sp.explained.push((at, at + hi - lo, Why::Loader));
            if let Some(linux) = interp.linux {
                sp.regions.push(image_region(linux + lo, hi - lo, at));
            }
        }
        sp.vm = vm;
    }

    /// Linux's `[start, start + len)` in this placement, rounded to pages (`shrink`: to the pages
    /// wholly inside, as `munmap` takes them; else to every page touched); `None` if empty.
    fn translate(&self, s: usize, start: u64, len: u64, shrink: bool) -> Option<(u64, u64)> {
        let sp = &self.spaces[s];
        let end = start.saturating_add(len);
        let (a, b) = match sp.regions.iter().rev().find(|r| r.linux <= start && start < r.linux_end()) {
            Some(r) if end <= r.linux_end() => (r.ours_of(start), r.ours_of(end)),
            Some(r) => {
                let a = r.ours_of(start);
                let e = sp.regions.iter().rev().find(|r| r.linux < end && end <= r.linux_end());
                (a, e.map_or(a + len, |r| r.ours_of(end)))
            }
            None => {
                let a = self.nearby(s, start);
                (a, a.saturating_add(len))
            }
        };
        let (a, b) = if shrink { (page_up(a), page_down(b)) } else { (page_down(a), page_up(b)) };
        (a < b).then_some((a, b))
    }

    /// An address in no region: moved with the nearest region within 4 GiB, or kept.
    fn nearby(&self, s: usize, a: u64) -> u64 {
        let sp = &self.spaces[s];
        let dist = |r: &Region| if a < r.linux { r.linux - a } else { a.saturating_sub(r.linux_end()) };
        match sp.regions.iter().rev().filter(|r| dist(r) < GIB4).min_by_key(|r| dist(r)) {
            Some(r) => a.wrapping_add(r.ours).wrapping_sub(r.linux),
            None => a,
        }
    }

    fn region_at(&self, s: usize, a: u64) -> Option<usize> {
        let rs = &self.spaces[s].regions;
        (0..rs.len()).rev().find(|&i| rs[i].linux <= a && a < rs[i].linux_end())
    }

    fn fail(&mut self, i: usize, what: String) {
        self.counts.failed += 1;
        self.log.push(format!("line {}: {what}", i + 1));
    }

    fn inside(&self, s: usize, a: u64, b: u64) -> bool {
        self.spaces[s].vm.code_window_range().is_some_and(|(w0, w1)| w0 <= a && b <= w1)
    }

    /// glibc's `_dl_map_segment`: the reservation `r` (`asked` bytes), then the text `m` bytes
    /// at `a`, the first multiple of the alignment in it. The alignment, if this is the pattern.
    fn glibc_alignment(r: &Region, a: u64, m: u64) -> Option<u64> {
        let n = r.asked;
        let g = if n > m && (n - m).is_power_of_two() {
            n - m
        } else if n.is_power_of_two() && m < n / 2 {
            n / 2
        } else {
            return None;
        };
        (g >= LINUX_PAGE && a == r.linux.next_multiple_of(g)).then_some(g)
    }

    /// The next memory call of thread `tid` after line `i`.
    fn next_call(&self, i: usize, tid: u32) -> Option<usize> {
        (i + 1..self.ops.len()).find(|&j| self.ops[j].0 == tid && !matches!(self.ops[j].1, Op::Other))
    }

    fn call(&mut self, i: usize, s: usize, tid: u32, op: Op) {
        match op {
            Op::Mmap { addr, len, prot, flags, fd, off, res } => {
                self.mmap(i, s, tid, (addr, len, prot, flags, fd, off), res)
            }
            Op::Munmap { addr, len } => {
                // A reservation whose text was mapped directly was never made: nothing to trim.
                if let Some(r) = self.region_at(s, addr).map(|k| self.spaces[s].regions[k])
                    && r.direct
                    && let Some((al, _)) = r.anchor
                    && (addr < al || addr >= al + self.direct_len(&r))
                {
                    return;
                }
                if let Some((a, b)) = self.translate(s, addr, len, true)
                    && let Err(e) = self.spaces[s].vm.munmap(a, b - a)
                {
                    self.fail(i, format!("munmap {a:#x}+{:#x}: {e:?}", b - a));
                }
            }
            Op::Mprotect { addr, len, prot } => {
                let Some((a, b)) = self.translate(s, addr, len, false) else { return };
                let adds_x = prot & 4 != 0 && self.spaces[s].vm.mappings_in(a, b).any(|v| !v.prot.exec());
                let anon = self.spaces[s].vm.mappings_in(a, b).all(|v| !v.flags.contains(VmaFlags::OBJECT));
                match self.spaces[s].vm.mprotect(a, b - a, prot) {
                    Ok(p) if p.error.is_none() => {
                        if adds_x {
                            let inside = self.inside(s, a, b);
                            if anon {
                                self.counts.count_jit(inside)
                            } else {
                                self.counts.count_loader(inside)
                            }
                        }
                    }
                    r => self.fail(i, format!("mprotect {a:#x}+{:#x} {prot}: {r:?}", b - a)),
                }
            }
            Op::Madvise { addr, len, advice } => {
                let Some((a, b)) = self.translate(s, addr, len, false) else { return };
                match self.spaces[s].vm.madvise(a, b - a, advice) {
                    Ok(m) if m.error.is_none() => {}
                    r => self.fail(i, format!("madvise {a:#x}+{:#x} {advice}: {r:?}", b - a)),
                }
            }
            Op::Brk { addr, res } => {
                let sp = &mut self.spaces[s];
                if addr == 0 {
                    if !sp.regions.iter().any(|r| r.linux == res && r.asked == GIB4) {
                        let ours = sp.vm.brk_value();
                        sp.regions.push(Region {
                            linux: res,
                            asked: GIB4,
                            ours,
                            ours_len: GIB4,
                            anchor: None,
                            direct: false,
                        });
                    }
                    return;
                }
                let Some((a, _)) = self.translate(s, addr, 0, false).or(Some((self.nearby(s, addr), 0)))
                else {
                    return;
                };
                let target = a + (addr & (LINUX_PAGE - 1));
                let got = self.spaces[s].vm.brk(target).brk;
                if got != target && res == addr {
                    self.fail(i, format!("brk {target:#x} gave {got:#x}"));
                }
            }
            Op::Mremap { addr, old, new, flags, to, res } => {
                let Some(res) = res else { return };
                let Some((a, b)) = self.translate(s, addr, old, false) else { return };
                let to = if flags & MREMAP_FIXED != 0 {
                    self.translate(s, to, new, false).map_or(0, |t| t.0)
                } else {
                    0
                };
                match self.spaces[s].vm.mremap(a, b - a, page_up(new), flags, to) {
                    // Moved or grown in place, the result is a region of its own.
                    Ok(r) => self.spaces[s].regions.push(Region {
                        linux: res,
                        asked: new,
                        ours: r.addr,
                        ours_len: page_up(new),
                        anchor: None,
                        direct: false,
                    }),
                    Err(e) => {
                        let around: Vec<_> =
                            self.spaces[s].vm.mappings_in(a.saturating_sub(1 << 20), b + (1 << 20)).collect();
                        self.fail(i, format!("mremap {a:#x}+{:#x} -> {new:#x}: {e:?} {around:x?}", b - a))
                    }
                }
            }
            Op::Exec | Op::Image(_) | Op::Clone { .. } | Op::Other => unreachable!(),
        }
    }

    /// The length glibc's directly mapped text covers (64 KiB pages).
    fn direct_len(&self, r: &Region) -> u64 {
        r.ours_len.min(r.asked)
    }

    fn mmap(&mut self, i: usize, s: usize, tid: u32, call: (u64, u64, u64, u64, i32, u64), res: Option<u64>) {
        let (addr, len, prot, flags, fd, off) = call;
        let Some(res) = res else { return };
        let file = fd >= 0;
        let os_flags = if file { flags | MAP_ANONYMOUS | MAP_OBJECT } else { flags };
        let exec = prot & 4 != 0;
        if flags & MAP_FIXED != 0 {
            // glibc's text into its reservation: remember how glibc aligned it.
            if let Some(k) = self.region_at(s, addr) {
                let r = self.spaces[s].regions[k];
                if file
                    && exec
                    && r.anchor.is_none()
                    && let Some(g) = Self::glibc_alignment(&r, addr, len)
                {
                    self.spaces[s].regions[k].anchor = Some((addr, r.ours.next_multiple_of(g)));
                }
            }
            let Some((a, b)) = self.translate(s, addr, len, false) else { return };
            match self.spaces[s].vm.mmap(a, b - a, prot, os_flags, -1, off & !(PAGE - 1)) {
                Ok(m) => {
                    if exec {
                        let inside = self.inside(s, a, b);
                        if file { self.counts.count_loader(inside) } else { self.counts.count_jit(inside) }
                    }
                    if self.inside(s, a, b) {
                        let sp = &mut self.spaces[s];
                        if !sp.explained.iter().any(|&(x, y, _)| x <= a && b <= y) {
                            sp.explained.push((
                                m.addr,
                                m.addr + m.len,
                                if file { Why::Loader } else { Why::Asked },
                            ));
                        }
                    }
                }
                Err(e) => self.fail(i, format!("mmap fixed {a:#x}+{:#x}: {e:?}", b - a)),
            }
            return;
        }
        // 64 KiB pages: glibc maps the text directly when the alignment is not above a page.
        let reservation_like = !file && prot == 0 && addr == 0 && flags & (MAP_NORESERVE | MAP_STACK) == 0;
        if reservation_like
            && let Some(j) = self.next_call(i, tid)
            && let Op::Mmap { addr: ta, len: tl, prot: tp, flags: tf, fd: tfd, off: toff, .. } = self.ops[j].1
            && tf & MAP_FIXED != 0
            && tfd >= 0
            && tp & 4 != 0
        {
            let probe = Region { linux: res, asked: len, ours: 0, ours_len: 0, anchor: None, direct: false };
            if let Some(g) = Self::glibc_alignment(&probe, ta, tl)
                && g <= PAGE
            {
                self.skip[j] = true;
                let direct = (tf & !MAP_FIXED) | MAP_ANONYMOUS | MAP_OBJECT;
                match self.spaces[s].vm.mmap(0, tl, tp, direct, -1, toff & !(PAGE - 1)) {
                    Ok(m) => {
                        let inside = self.inside(s, m.addr, m.addr + m.len);
                        self.counts.count_loader(inside);
                        let sp = &mut self.spaces[s];
                        sp.explained.push((m.addr, m.addr + m.len, Why::Loader));
                        sp.regions.push(Region {
                            ours: m.addr,
                            ours_len: m.len,
                            anchor: Some((ta, m.addr)),
                            direct: true,
                            ..probe
                        });
                    }
                    Err(e) => self.fail(j, format!("mmap of the text: {e:?}")),
                }
                return;
            }
        }
        let hint = if addr == 0 { 0 } else { self.translate(s, addr, len, false).map_or(0, |t| t.0) };
        match self.spaces[s].vm.mmap(hint, len, prot, os_flags, -1, off & !(PAGE - 1)) {
            Ok(m) => {
                let inside = self.inside(s, m.addr, m.addr + m.len);
                if exec {
                    if file { self.counts.count_loader(inside) } else { self.counts.count_jit(inside) }
                }
                let reservation = reservation_like && !len.is_multiple_of(PAGE);
                // The placement's own predicate: what it placed in the window as a JIT's buffer.
                let window_size = self.spaces[s].vm.code_window().size;
                let buffer = !file
                    && super::map::jit_buffer(addr, len, Prot::from_bits_truncate(prot), flags, window_size);
                let why = if reservation || file {
                    Some(Why::Loader)
                } else if hint != 0 {
                    Some(Why::Asked)
                } else if buffer {
                    Some(Why::JitBuffer)
                } else {
                    None
                };
                let sp = &mut self.spaces[s];
                if let Some(why) = why.filter(|_| inside) {
                    sp.explained.push((m.addr, m.addr + m.len, why));
                }
                sp.regions.push(Region {
                    linux: res,
                    asked: len,
                    ours: m.addr,
                    ours_len: m.len,
                    anchor: None,
                    direct: false,
                });
            }
            Err(e) => self.fail(i, format!("mmap {len:#x} {prot}: {e:?}")),
        }
    }

    /// The bytes of the window that are not executable: those the loaders placed, those the
    /// program asked for by address, and the rest.
    fn measure(&mut self, s: usize) {
        let sp = &self.spaces[s];
        let Some((w0, w1)) = sp.vm.code_window_range() else { return };
        let (mut loader, mut asked, mut buffer, mut other) = (0, 0, 0, 0);
        for v in sp.vm.mappings_in(w0, w1).filter(|v| !v.prot.exec()) {
            let overlap = |want: Why| -> u64 {
                sp.explained
                    .iter()
                    .filter(|e| e.2 == want)
                    .map(|&(x, y, _)| y.min(v.end).saturating_sub(x.max(v.start)))
                    .sum::<u64>()
                    .min(v.len())
            };
            let l = overlap(Why::Loader);
            let a = overlap(Why::Asked).min(v.len() - l);
            let j = overlap(Why::JitBuffer).min(v.len() - l - a);
            loader += l;
            asked += a;
            buffer += j;
            other += v.len() - l - a - j;
        }
        self.spaces[s].last = loader;
        self.counts.asked_data_peak = self.counts.asked_data_peak.max(asked);
        self.counts.buffer_data_peak = self.counts.buffer_data_peak.max(buffer);
        self.counts.other_data_peak = self.counts.other_data_peak.max(other);
    }
}

fn image_region(linux: u64, len: u64, ours: u64) -> Region {
    Region { linux, asked: len, ours, ours_len: len, anchor: None, direct: false }
}

impl Counts {
    fn count_loader(&mut self, inside: bool) {
        if inside {
            self.loader_in += 1;
        } else {
            self.loader_out += 1;
        }
    }

    fn count_jit(&mut self, inside: bool) {
        if inside {
            self.jit_in += 1;
        } else {
            self.jit_out += 1;
        }
    }
}

/// The programs recorded, in the order of the docs' table.
pub(crate) const PROGRAMS: [&str; 13] = [
    "hello-glibc",
    "hello-musl",
    "hello-musl-lib",
    "ls",
    "bash",
    "python3",
    "pyworld",
    "node",
    "racket",
    "luajit",
    "wasmtime",
    "goprog",
    "maps",
];

fn extract(name: &str) -> String {
    let path = format!("{}/../tests/traces/{name}.trace", env!("CARGO_MANIFEST_DIR"));
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
}

/// The replay of one extract, with the rule for libraries and JITs on or off.
pub(crate) fn replay(name: &str, rule: bool) -> (Counts, Vec<String>) {
    Replay::new(&extract(name), rule).run()
}

/// [`replay`] with the rule and a code floor of `floor` bytes in every exec'd space (0: as
/// [`replay`]).
fn replay_with_floor(name: &str, floor: u64) -> (Counts, Vec<String>) {
    Replay { floor, ..Replay::new(&extract(name), true) }.run()
}

/// Every `mmap(NULL, n, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS)` without `MAP_NORESERVE` or
/// `MAP_STACK` in the traces, by whether `n` is a whole number of pages (of 4 KiB: all of them
/// are of 16 KiB too) and whether the thread's next memory call maps executable file pages
/// `MAP_FIXED` inside it: (odd length and text inside, odd and not, whole pages and text inside,
/// whole pages and not).
fn reservations() -> [u32; 4] {
    let mut counts = [0; 4];
    for name in PROGRAMS {
        let ops = parse(&extract(name));
        for (i, (tid, op)) in ops.iter().enumerate() {
            let Op::Mmap { addr: 0, len, prot: 0, flags, fd: -1, res: Some(res), .. } = *op else { continue };
            if flags != MAP_PRIVATE | MAP_ANONYMOUS {
                continue;
            }
            let next = ops[i + 1..].iter().find(|(t, o)| t == tid && !matches!(o, Op::Other));
            let text_inside = matches!(next, Some((_, Op::Mmap { addr, prot, flags, fd, .. }))
                if flags & MAP_FIXED != 0 && *fd >= 0 && prot & 4 != 0 && res <= *addr && *addr < res + len);
            let whole = len.is_multiple_of(LINUX_PAGE);
            counts[usize::from(whole) * 2 + usize::from(!text_inside)] += 1;
        }
    }
    counts
}

#[test]
fn the_reservations_no_whole_number_of_pages_long_are_glibcs_for_a_librarys_text() {
    // 66 libraries loaded by glibc (17 in node, 14 in the Python script, ...), each in a
    // reservation of an odd length; the 7 others (Go's runtime: 128 KiB to 512 MiB, Cranelift's
    // signal stack: 260 KiB) are whole pages and never get text.
    assert_eq!(reservations(), [66, 0, 0, 7]);
}

/// Every private anonymous read-write `MAP_NORESERVE` mapping asked for with no hint in the
/// recordings: (later made executable in part by `mprotect`, never made executable).
fn read_write_noreserve_buffers() -> [u32; 2] {
    let mut counts = [0; 2];
    for name in PROGRAMS {
        let ops = parse(&extract(name));
        for (i, (_, op)) in ops.iter().enumerate() {
            let Op::Mmap { addr: 0, len, prot: 3, flags, fd: -1, res: Some(res), .. } = *op else { continue };
            if flags & !MAP_NORESERVE != MAP_PRIVATE | MAP_ANONYMOUS || flags & MAP_NORESERVE == 0 {
                continue;
            }
            let made_code = ops[i + 1..].iter().any(|(_, o)| {
                matches!(*o, Op::Mprotect { addr, prot, .. } if prot & 4 != 0 && res <= addr && addr < res + len)
            });
            counts[usize::from(!made_code)] += 1;
        }
    }
    counts
}

#[test]
fn the_read_write_noreserve_mappings_without_a_hint_are_jit_buffers_made_executable() {
    // One in the thirteen recordings, Cranelift's image of compiled code in wasmtime, whose text
    // is made executable; none that stays data.
    assert_eq!(read_write_noreserve_buffers(), [1, 0]);
}

/// What the replay must show per program, with the rule: (loaders' executable mappings in the
/// window, JIT mappings in, JIT mappings out).
const EXPECTED: [(&str, u32, u32, u32); 13] = [
    ("hello-glibc", 3, 0, 0),
    ("hello-musl", 2, 0, 0),
    ("hello-musl-lib", 6, 0, 0),
    ("ls", 5, 0, 0),
    ("bash", 10, 0, 0),
    ("python3", 6, 0, 0),
    ("pyworld", 20, 0, 0),
    // V8's code range, hinted at libnode's text: pages made executable by mprotect (2 with
    // 4 KiB pages, 5 with 16 and 64 KiB: V8 commits the code range's pages by the page).
    ("node", 19, if PAGE == 4096 { 2 } else { 5 }, 0),
    // Chez Scheme's code segments, mapped RWX with no hint: code placement.
    ("racket", 6, 20, 0),
    // LuaJIT's machine code, at a hint 34 MiB below the program's text: inside the window,
    // which holds a quarter of itself (128 MiB) below the text.
    ("luajit", 5, 2, 0),
    // libffi's RWX page; Cranelift's code image, mapped read-write, MAP_NORESERVE, with no hint
    // and made executable by mprotect: a JIT's buffer, in the window.
    ("wasmtime", 13, 2, 0),
    ("goprog", 4, 0, 0),
    ("maps", 7, 0, 0),
];

/// Replays every recorded program with the rule and the code floor `floor`, and checks what
/// [`EXPECTED`] says of it: no failed call, every loader's executable mapping in the window,
/// the JITs' where expected, no data there that no loader placed nor the program asked for.
fn assert_code_lands_in_the_window(floor: u64) {
    for (name, loader_in, jit_in, jit_out) in EXPECTED {
        let (c, log) = replay_with_floor(name, floor);
        assert_eq!(c.failed, 0, "{name}, floor {floor:#x}: calls Linux completed failed here: {log:#?}");
        assert_eq!(
            c.loader_out, 0,
            "{name}, floor {floor:#x}: a loader's executable mapping outside the window"
        );
        assert_eq!(c.loader_in, loader_in, "{name}, floor {floor:#x}: the loaders' executable mappings");
        assert_eq!(
            (c.jit_in, c.jit_out),
            (jit_in, jit_out),
            "{name}, floor {floor:#x}: the JITs' executable mappings"
        );
        assert_eq!(
            c.other_data_peak, 0,
            "{name}, floor {floor:#x}: data in the window that no loader placed nor the program asked for"
        );
    }
}

#[test]
fn every_librarys_code_lands_in_the_code_window() {
    assert_code_lands_in_the_window(0);
}

/// A random code floor (the libraries' own bits at exec) keeps every recorded program's code
/// where it was, with the floor at the start of its range, in the middle and at its end (the
/// libraries then packed against the text, or above it).
#[test]
fn every_librarys_code_lands_in_the_code_window_from_any_code_floor() {
    let last = super::aslr::code_floor(u64::MAX, super::map::WINDOW_DEFAULT);
    let span = super::map::WINDOW_DEFAULT / 4;
    assert_eq!(last, span - super::aslr::CODE_FLOOR_UNIT);
    for floor in [super::aslr::CODE_FLOOR_UNIT, span / 2, last] {
        assert_code_lands_in_the_window(floor);
    }
}

#[test]
fn without_the_rule_glibcs_libraries_miss_the_window_below_64_kib_pages() {
    for (name, loader_in, ..) in EXPECTED {
        let (c, log) = replay(name, false);
        assert_eq!(c.failed, 0, "{name}: {log:#?}");
        assert_eq!(c.loader_in + c.loader_out, loader_in, "{name}");
        // With 64 KiB pages glibc maps each text directly, as code: no rule needed. Below, each
        // library glibc loads goes where its reservation went, outside the window (musl maps
        // the text directly: its one library is in).
        let glibc_libraries = match name {
            "hello-glibc" | "hello-musl-lib" | "goprog" => 1,
            "hello-musl" => 0,
            "ls" | "luajit" => 3,
            "bash" | "python3" | "racket" => 4,
            "pyworld" => 14,
            "node" => 17,
            "wasmtime" => 11,
            "maps" => 3,
            _ => unreachable!(),
        };
        assert_eq!(c.loader_out, if PAGE < 65536 { glibc_libraries } else { 0 }, "{name}");
    }
}

/// The table of docs/address-space.md ("Libraries and JITs"):
/// `cargo test -p mm --lib trace_replay::table -- --ignored --nocapture` (with `--features
/// granule-16k` or `granule-64k` for the other builds).
#[test]
#[ignore = "prints the table of the docs"]
fn table() {
    std::println!(
        "| program | loaders' code in / out, before | after | JITs' code in / out, before | after | not code in the window: the loaders' / asked for / JITs' buffers / other |"
    );
    std::println!("| --- | ---: | ---: | ---: | ---: | ---: |");
    for name in PROGRAMS {
        let (b, _) = replay(name, false);
        let (a, _) = replay(name, true);
        std::println!(
            "| {name} | {} / {} | {} / {} | {} / {} | {} / {} | {} KiB / {} KiB / {} KiB / {} |",
            b.loader_in,
            b.loader_out,
            a.loader_in,
            a.loader_out,
            b.jit_in,
            b.jit_out,
            a.jit_in,
            a.jit_out,
            a.library_data >> 10,
            a.asked_data_peak >> 10,
            a.buffer_data_peak >> 10,
            a.other_data_peak
        );
    }
}
