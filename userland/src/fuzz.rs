//! `fuzz`: a bounded system-call fuzzer for the memory and thread calls. Every worker thread
//! makes random `mmap`, `munmap`, `mprotect`, `madvise` and `brk(0)` calls, thread calls
//! (`futex`, affinity, `sched_yield`, `getcpu`, `tgkill` with signal 0; see `thread_call`), and
//! System V shared memory, timer, clock and id calls (`ipc_call`), with biased
//! arguments — addresses near its own mappings, near 0, near 2^47 and 2^48, unaligned; lengths
//! 0, 1, 4095, one page, many pages, huge and −1; random protection and flag bits — and touches
//! its pages between calls, checking every read against a shadow of what it wrote. It also
//! makes the event-loop calls (`event_call`: epoll, eventfd, timerfd, signalfd, pidfds,
//! `membarrier`, `rseq`, capabilities) on descriptors it owns, none able to block.
//!
//! What may not break the program is kept out of reach, not out of the fuzzer: calls that could
//! remove or change memory the program itself uses (`MAP_FIXED`, `munmap`, `mprotect`,
//! `MADV_DONTNEED`) go either into the worker's own arena (a reserved range it maps over, cuts and
//! reprotects at will) or at arguments the kernel must refuse before touching anything (an
//! unaligned address, a length that wraps, an address past the user half). Everything else —
//! hints, lengths, protections and flag bits — is random. The property checked: the kernel does
//! not panic or hang (the suite's timeout and exit status), every page reads what the shadow says
//! (a wrong translation or a lost page is a failure), every successful `mmap` returns a
//! page-aligned user address, and when everything is unmapped again the process holds the data
//! frames it held before (`SYS_MM_STATS`).
//!
//! Holes and the shadow. Several workers share one address space, so a worker's arena hole (the
//! pages between an arena `munmap` and their re-reservation) is a place where another worker's
//! non-fixed `mmap` may legitimately land; that worker would then own pages of the arena behind
//! its owner's back, and the shadows would disagree with the kernel without any kernel fault.
//! So holes are short and exclusive: a worker opens a hole, checks what a hole must do
//! (`mprotect` over it fails, `MAP_FIXED_NOREPLACE` into it succeeds), and reserves it again,
//! all under the write side of [`HOLES`]; every non-fixed `mmap` holds the read side from the
//! call until its result is checked. Outside a write section no arena has a hole, so a
//! non-fixed `mmap` that returns memory inside any arena placed a mapping over a live one: that
//! is a kernel bug, and counted as one.
//!
//! Usage: `userland fuzz [--calls=N] [--threads=N]` (default 20,000 calls per worker, 2 workers).

use alloc::vec::Vec;
use core::sync::atomic::{AtomicU64, Ordering};

use crate::sys::{self, Errno, PROT_READ, PROT_WRITE};
use crate::thread;
use crate::{Checks, Ctx, check, ok, say};
use linux_abi::mman::{
    MADV_DONTNEED, MAP_ANONYMOUS, MAP_FIXED, MAP_FIXED_NOREPLACE, MAP_LOCKED, MAP_POPULATE, MAP_PRIVATE,
};
use linux_abi::nr::{
    BRK, CAPGET, CAPSET, CLOCK_GETTIME, CLOSE, EPOLL_CREATE1, EPOLL_CTL, EPOLL_PWAIT, EPOLL_PWAIT2, EVENTFD2,
    FUTEX, FUTEX_WAITV, GETCPU, GETITIMER, GETPID, GETRESGID, GETRESUID, GETTID, MADVISE, MEMBARRIER, MMAP,
    MPROTECT, MUNMAP, PIDFD_OPEN, PIDFD_SEND_SIGNAL, PROCESS_MADVISE, PROCESS_MRELEASE, READ, RSEQ,
    SCHED_GETAFFINITY, SCHED_SETAFFINITY, SCHED_YIELD, SETITIMER, SHMAT, SHMCTL, SHMDT, SHMGET, SIGNALFD4,
    TGKILL, TIMER_CREATE, TIMER_DELETE, TIMER_GETOVERRUN, TIMER_GETTIME, TIMER_SETTIME, TIMERFD_CREATE,
    TIMERFD_GETTIME, TIMERFD_SETTIME, WAITID, WRITE,
};
use linux_abi::poll::{EFD_NONBLOCK, PIDFD_NONBLOCK, SFD_NONBLOCK, TFD_NONBLOCK};

/// Pages of a worker's arena.
const ARENA_PAGES: u64 = 1024;
/// Calls per worker by default.
pub const DEFAULT_CALLS: u64 = 20_000;

/// Most workers.
const MAX_WORKERS: usize = 16;
/// Every worker's arena `[start, end)`, written before any worker starts.
static ARENAS: [AtomicU64; 2 * MAX_WORKERS] = [const { AtomicU64::new(0) }; 2 * MAX_WORKERS];
/// Set once every worker exists: no thread creation (which maps a stack) after that.
static START: core::sync::atomic::AtomicBool = core::sync::atomic::AtomicBool::new(false);

/// Holes in arenas: the write side is held while a hole exists, the read side by every
/// non-fixed `mmap` from the call until its result is checked (see the module documentation).
/// A reader count with a writer bit; waiters yield the CPU (workers may outnumber CPUs).
static HOLES: AtomicU64 = AtomicU64::new(0);
const WRITER: u64 = 1 << 63;

fn holes_read<R>(f: impl FnOnce() -> R) -> R {
    loop {
        let s = HOLES.load(Ordering::Relaxed);
        if s & WRITER == 0
            && HOLES.compare_exchange_weak(s, s + 1, Ordering::Acquire, Ordering::Relaxed).is_ok()
        {
            break;
        }
        sys::sched_yield();
    }
    let r = f();
    HOLES.fetch_sub(1, Ordering::Release);
    r
}

fn holes_write<R>(f: impl FnOnce() -> R) -> R {
    while HOLES.compare_exchange_weak(0, WRITER, Ordering::Acquire, Ordering::Relaxed).is_err() {
        sys::sched_yield();
    }
    let r = f();
    HOLES.store(0, Ordering::Release);
    r
}

fn in_any_arena(a: u64, len: u64) -> bool {
    let end = a.saturating_add(len);
    (0..MAX_WORKERS).any(|i| {
        let (s, e) = (ARENAS[2 * i].load(Ordering::Relaxed), ARENAS[2 * i + 1].load(Ordering::Relaxed));
        s < e && a < e && s < end
    })
}

/// Calls made, and calls the kernel refused, over all workers.
static CALLS: AtomicU64 = AtomicU64::new(0);
static REFUSED: AtomicU64 = AtomicU64::new(0);
/// Shadow mismatches and other failed invariants, over all workers.
static BROKEN: AtomicU64 = AtomicU64::new(0);

struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn chance(&mut self, percent: u64) -> bool {
        self.below(100) < percent
    }
}

/// One arena page as the worker believes it is.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Page {
    Unmapped,
    /// Mapped with this protection; `value` is what word 0 holds (0 until written).
    Mapped {
        prot: u64,
        value: u64,
    },
}

/// Descriptors a worker owns at most (its own epolls, eventfds, timerfds, signalfds, pidfds).
const MAX_FDS: usize = 24;
/// Events one `epoll_pwait` of the fuzzer may return at most (its buffer's size): more than the
/// items any of its epolls can hold (its descriptors and the 32 numbers it adds at random).
const EVENTS: usize = 64;

/// A `struct rseq` the worker may register (32 bytes, 32-aligned, as Linux 6.1 wants).
#[repr(C, align(32))]
struct RseqArea([u8; 32]);

struct Worker {
    rng: Rng,
    page: u64,
    arena: u64,
    shadow: Vec<Page>,
    /// Mappings made outside the arena (address, length), unmapped at the end.
    others: Vec<(u64, u64)>,
    generation: u64,
    /// Descriptors it made (and only these it reads, writes and closes).
    fds: Vec<u64>,
    /// Where `epoll_pwait` writes its events.
    events: [[u64; 2]; EVENTS],
    /// Its `rseq` area, and the signature it is registered with (unregistered with it before the
    /// worker ends).
    rseq: RseqArea,
    rseq_sig: Option<u64>,
}

fn raw(n: u64, a: [u64; 6]) -> Result<u64, Errno> {
    CALLS.fetch_add(1, Ordering::Relaxed);
    // SAFETY: every call the fuzzer makes either targets its own arena (whose contents only the
    // shadow cares about) or passes arguments the kernel must refuse without changing anything,
    // or maps new memory without MAP_FIXED (which cannot replace a mapping), or is a thread call
    // that at most reads memory, waits 1 µs or changes this thread's affinity: see the module
    // documentation and `thread_call`. No memory the program itself uses changes.
    let r = unsafe { sys::syscall6(n, a) };
    if r.is_err() {
        REFUSED.fetch_add(1, Ordering::Relaxed);
    }
    r
}

impl Worker {
    fn new(seed: u64, page: u64) -> Result<Self, Errno> {
        // The arena: reserved, then fuzzed over with MAP_FIXED.
        let arena = sys::mmap_anon(0, ARENA_PAGES * page, sys::PROT_NONE, 0)?;
        let shadow = alloc::vec![Page::Mapped { prot: 0, value: 0 }; ARENA_PAGES as usize];
        // Preallocated: a worker allocates nothing while it runs (an allocation could map memory
        // into another worker's arena hole).
        Ok(Self {
            rng: Rng(seed | 1),
            page,
            arena,
            shadow,
            others: Vec::with_capacity(80),
            generation: 1,
            fds: Vec::with_capacity(MAX_FDS),
            events: [[0; 2]; EVENTS],
            rseq: RseqArea([0; 32]),
            rseq_sig: None,
        })
    }

    fn broken(&self, what: core::fmt::Arguments<'_>) {
        BROKEN.fetch_add(1, Ordering::Relaxed);
        say!("  FAIL [fuzz] {what}");
    }

    /// A biased length.
    fn length(&mut self) -> u64 {
        let p = self.page;
        match self.rng.below(9) {
            0 => 0,
            1 => 1,
            2 => p - 1,
            3 => p,
            4 => p * (1 + self.rng.below(16)),
            5 => p * (1 + self.rng.below(600)),
            6 => 1 << (30 + self.rng.below(18)),
            7 => u64::MAX,
            _ => self.rng.next() >> self.rng.below(64),
        }
    }

    /// A hint for an mmap without MAP_FIXED: anything.
    fn hint(&mut self) -> u64 {
        let near = self.arena + self.rng.below(ARENA_PAGES * 2) * self.page;
        match self.rng.below(7) {
            0 => 0,
            1 => self.rng.below(1 << 20),
            2 => (1 << 47) - self.rng.below(1 << 24),
            3 => (1 << 48) - self.rng.below(1 << 24),
            4 => near,
            5 => near + self.rng.below(self.page),
            _ => self.rng.next(),
        }
    }

    /// Arguments the kernel must refuse before changing anything, for a destructive call.
    fn refused_range(&mut self) -> (u64, u64) {
        match self.rng.below(4) {
            // Unaligned (EINVAL before any change).
            0 => (self.arena + 1 + self.rng.below(self.page - 1), self.page),
            // Past the user half (EINVAL or ENOMEM).
            1 => ((1 << 48) + self.rng.below(1 << 40) * self.page, self.length()),
            // Wraps around.
            2 => (u64::MAX - self.rng.below(16) * self.page + 1 - self.page, 2 * self.page),
            // Zero length inside the arena: nothing to do.
            _ => (self.arena, 0),
        }
    }

    /// A page-aligned range inside the arena: (first page index, pages).
    fn arena_range(&mut self) -> (u64, u64) {
        let first = self.rng.below(ARENA_PAGES);
        let max = (ARENA_PAGES - first).min(64);
        (first, 1 + self.rng.below(max))
    }

    fn step(&mut self) {
        match self.rng.below(100) {
            0..=19 => self.mmap_random(),
            20..=34 => self.mmap_fixed_in_arena(),
            35..=47 => self.munmap(),
            48..=62 => self.mprotect(),
            63..=70 => self.madvise(),
            71..=72 => {
                let _ = raw(BRK, [0; 6]);
            }
            73..=76 => self.thread_call(),
            77..=80 => self.event_call(),
            81..=84 => self.ipc_call(),
            _ => self.touch(),
        }
    }

    fn mmap_random(&mut self) {
        let len = self.length();
        let hint = self.hint();
        let mut prot = self.rng.below(8);
        if self.rng.chance(10) {
            prot |= self.rng.next() & !0xff;
        }
        let mut flags = if self.rng.chance(85) { MAP_PRIVATE | MAP_ANONYMOUS } else { self.rng.below(0x40) };
        if self.rng.chance(15) {
            flags |= self.rng.next() & 0x1ff_ff00;
        }
        // Never able to replace a mapping outside the arena.
        flags &= !(MAP_FIXED | MAP_FIXED_NOREPLACE);
        // Population (MAP_POPULATE, MAP_LOCKED) only of mappings up to 64 MiB: read-only memory
        // populates with the zero page, which costs no frame, so nothing stops a populated
        // mapping of a terabyte before its last page; where blocks may not go (a MAP_STACK or
        // MAP_GROWSDOWN mapping) that is one entry per 4 KiB, as on Linux, and minutes of a run
        // that checks invariants, not speed.
        if len > 64 << 20 {
            flags &= !(MAP_POPULATE | MAP_LOCKED);
        }
        let fd = if self.rng.chance(90) { u64::MAX } else { self.rng.below(8) };
        let placed = holes_read(|| {
            let a = raw(MMAP, [hint, len, prot, flags, fd, 0]).ok()?;
            let plen = len.next_multiple_of(self.page);
            // No arena has a hole now (holes exist only under the write side): a mapping placed
            // inside one replaced live memory.
            if in_any_arena(a, plen) {
                self.broken(format_args!(
                    "mmap without MAP_FIXED placed {plen:#x} bytes at {a:#x}, inside an arena"
                ));
            }
            Some((a, plen))
        });
        if let Some((a, plen)) = placed {
            if a % self.page != 0 || a >= 1 << 48 {
                self.broken(format_args!("mmap returned {a:#x}"));
                return;
            }
            if in_any_arena(a, plen) {
                return; // reported above; not unmapped, which would cut the arena
            }
            self.others.push((a, plen));
            if self.others.len() > 64 {
                let (a, l) = self.others.swap_remove(self.rng.below(64) as usize);
                let _ = raw(MUNMAP, [a, l, 0, 0, 0, 0]);
            }
        }
    }

    fn mmap_fixed_in_arena(&mut self) {
        let (first, pages) = self.arena_range();
        let prot = [PROT_READ | PROT_WRITE, PROT_READ, 0, PROT_READ | PROT_WRITE][self.rng.below(4) as usize];
        let flags =
            MAP_PRIVATE | MAP_ANONYMOUS | if self.rng.chance(20) { MAP_FIXED_NOREPLACE } else { MAP_FIXED };
        let at = self.arena + first * self.page;
        let r = raw(MMAP, [at, pages * self.page, prot, flags, u64::MAX, 0]);
        match r {
            Ok(a) if a == at => {
                for p in first..first + pages {
                    self.shadow[p as usize] = Page::Mapped { prot, value: 0 };
                }
            }
            Ok(a) => self.broken(format_args!("MAP_FIXED at {at:#x} returned {a:#x}")),
            Err(Errno::EEXIST) if flags & MAP_FIXED_NOREPLACE != 0 => {
                let any = (first..first + pages).any(|p| self.shadow[p as usize] != Page::Unmapped);
                if !any {
                    self.broken(format_args!("MAP_FIXED_NOREPLACE: EEXIST over a free range"));
                }
            }
            // Out of memory or map count: nothing changed.
            Err(_) => {}
        }
    }

    fn munmap(&mut self) {
        if self.rng.chance(30) {
            let (a, l) = self.refused_range();
            if l != 0 && raw(MUNMAP, [a, l, 0, 0, 0, 0]).is_ok() {
                self.broken(format_args!("munmap({a:#x}, {l:#x}) succeeded"));
            }
            return;
        }
        let (first, pages) = self.arena_range();
        holes_write(|| self.hole(first, pages));
    }

    /// Opens a hole of `pages` pages at `first`, checks what a hole must do, and closes it again
    /// (called under the write side of [`HOLES`]: no other worker maps anything meanwhile).
    fn hole(&mut self, first: u64, pages: u64) {
        let (at, len) = (self.arena + first * self.page, pages * self.page);
        if raw(MUNMAP, [at, len, 0, 0, 0, 0]).is_err() {
            self.broken(format_args!("munmap of an arena range failed"));
            return;
        }
        for p in first..first + pages {
            self.shadow[p as usize] = Page::Unmapped;
        }
        match self.rng.below(3) {
            0 => self.mprotect_fails_over(at, len),
            1 => {
                let flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE;
                match raw(MMAP, [at, len, PROT_READ | PROT_WRITE, flags, u64::MAX, 0]) {
                    Ok(a) if a == at => {
                        for p in first..first + pages {
                            self.shadow[p as usize] = Page::Mapped { prot: PROT_READ | PROT_WRITE, value: 0 };
                        }
                        self.touch_range(first, pages);
                    }
                    Ok(a) => self.broken(format_args!("MAP_FIXED_NOREPLACE at {at:#x} returned {a:#x}")),
                    Err(Errno::EEXIST) => {
                        self.broken(format_args!("MAP_FIXED_NOREPLACE: EEXIST over a hole"))
                    }
                    Err(_) => {} // out of memory or the map count: nothing mapped
                }
            }
            _ => {}
        }
        // The hole closes: whatever the range holds now is replaced by a fresh reservation.
        self.reserve(first, pages);
        // A reservation that failed (memory or the map count, both passing) is retried, so that
        // no hole outlives the write section.
        let mut tries = 0;
        while (first..first + pages).any(|p| self.shadow[p as usize] == Page::Unmapped) {
            tries += 1;
            if tries == 1000 {
                self.broken(format_args!("an arena hole at page {first} could not be reserved again"));
                return;
            }
            sys::sched_yield();
            self.reserve(first, pages);
        }
    }

    /// `mprotect` over the hole `[at, at + len)` must fail (ENOMEM).
    fn mprotect_fails_over(&self, at: u64, len: u64) {
        if raw(MPROTECT, [at, len, PROT_READ, 0, 0, 0]).is_ok() {
            self.broken(format_args!("mprotect over a hole succeeded"));
        }
    }

    /// Maps `[first, first + pages)` of the arena `PROT_NONE` again (MAP_FIXED).
    fn reserve(&mut self, first: u64, pages: u64) {
        let at = self.arena + first * self.page;
        let flags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED;
        if raw(MMAP, [at, pages * self.page, 0, flags, u64::MAX, 0]) == Ok(at) {
            for p in first..first + pages {
                self.shadow[p as usize] = Page::Mapped { prot: 0, value: 0 };
            }
        }
    }

    fn mprotect(&mut self) {
        if self.rng.chance(30) {
            let (a, l) = self.refused_range();
            if l != 0 && raw(MPROTECT, [a, l, PROT_READ, 0, 0, 0]).is_ok() {
                self.broken(format_args!("mprotect({a:#x}, {l:#x}) succeeded"));
            }
            return;
        }
        let (first, pages) = self.arena_range();
        let all_mapped = (first..first + pages).all(|p| self.shadow[p as usize] != Page::Unmapped);
        let mut prot = [PROT_READ | PROT_WRITE, PROT_READ, 0][self.rng.below(3) as usize];
        if self.rng.chance(5) {
            prot |= self.rng.next() & !0x7;
        }
        let r = raw(MPROTECT, [self.arena + first * self.page, pages * self.page, prot, 0, 0, 0]);
        match r {
            Ok(_) if all_mapped => {
                for p in first..first + pages {
                    if let Page::Mapped { value, .. } = self.shadow[p as usize] {
                        self.shadow[p as usize] = Page::Mapped { prot, value };
                    }
                }
            }
            Ok(_) => self.broken(format_args!("mprotect over a hole succeeded")),
            // Unknown bits: EINVAL before any change.
            Err(_) if prot & !0x7 != 0 => {}
            // ENOMEM for a hole (the mapped prefix may have changed), or a split that found no
            // memory: the shadow no longer knows the range, so it is made known again.
            Err(_) => self.reserve(first, pages),
        }
    }

    fn madvise(&mut self) {
        if self.rng.chance(20) {
            let (a, l) = self.refused_range();
            let advice = self.rng.below(30);
            let _ = raw(MADVISE, [a, l, advice, 0, 0, 0]);
            return;
        }
        let (first, pages) = self.arena_range();
        let advice = [MADV_DONTNEED, 3, 14, 15, 22, 23, 0, 1, 2][self.rng.below(9) as usize];
        let r = raw(MADVISE, [self.arena + first * self.page, pages * self.page, advice, 0, 0, 0]);
        if advice == MADV_DONTNEED {
            // Applied to every mapped page of the range (ENOMEM afterwards for a hole).
            let _ = r;
            for p in first..first + pages {
                if let Page::Mapped { prot, .. } = self.shadow[p as usize] {
                    self.shadow[p as usize] = Page::Mapped { prot, value: 0 };
                }
            }
        }
    }

    /// A thread call with biased arguments, none able to block for long or to change memory:
    /// futex waits (always with a 1 µs timeout, at own, unaligned, null, non-canonical and
    /// kernel addresses, with random flag bits and bitsets), wakes, unknown futex operations, affinity
    /// masks (restored at once), `sched_yield`, `getcpu`, `gettid`, `tgkill` with signal 0. The
    /// futex operations that move waiters or write memory (REQUEUE, CMP_REQUEUE, WAKE_OP) are
    /// left out: at random addresses they could strand the join of a worker thread.
    fn thread_call(&mut self) {
        static TIMEOUT: [u64; 2] = [0, 1000];
        let arena_word = self.arena + self.rng.below(ARENA_PAGES) * self.page;
        let uaddr = match self.rng.below(6) {
            0 => arena_word,
            1 => arena_word + 1 + self.rng.below(3),
            2 => 0,
            3 => 0xffff_8000_0000_0000 + self.rng.below(1 << 30),
            // Past the user half. (Not any user address: a futex read of a page the program
            // never touched faults it in here, where Linux maps its shared zero page, and the
            // frame would then count as held at the end.)
            _ => (1 << 48) + (self.rng.next() >> 16),
        };
        let flags = if self.rng.chance(30) { 128 } else { 0 } | if self.rng.chance(10) { 256 } else { 0 };
        let value = if self.rng.chance(50) { 0 } else { self.rng.next() };
        let bitset = [u64::from(u32::MAX), 0, self.rng.next()][self.rng.below(3) as usize];
        let timeout = (&raw const TIMEOUT) as u64;
        match self.rng.below(8) {
            // FUTEX_WAIT, FUTEX_WAIT_BITSET: a mismatch is EAGAIN, a match waits out the timeout.
            0 => {
                let _ = raw(FUTEX, [uaddr, flags, value, timeout, 0, 0]);
            }
            1 => {
                let _ = raw(FUTEX, [uaddr, 9 | flags, value, timeout, 0, bitset]);
            }
            // FUTEX_WAKE, FUTEX_WAKE_BITSET: wakes nobody or a spurious waiter (joins re-check).
            2 => {
                let _ = raw(FUTEX, [uaddr, 1 | flags, self.rng.below(4), 0, 0, 0]);
            }
            3 => {
                let _ = raw(FUTEX, [uaddr, 10 | flags, 1, 0, 0, bitset]);
            }
            // An operation Linux does not have (ENOSYS), or a clock flag it refuses (ENOSYS).
            4 => {
                let op = 14 + self.rng.below(100);
                if raw(FUTEX, [uaddr, op | flags, value, timeout, 0, 0]).is_ok() {
                    self.broken(format_args!("futex op {op} succeeded"));
                }
            }
            5 => {
                let mut mask = 0u64;
                let mine = raw(SCHED_GETAFFINITY, [0, 8, (&raw mut mask) as u64, 0, 0, 0]);
                let try_mask = self.rng.next() >> self.rng.below(64);
                let _ = raw(SCHED_SETAFFINITY, [0, 8, (&raw const try_mask) as u64, 0, 0, 0]);
                if mine.is_ok() {
                    let _ = raw(SCHED_SETAFFINITY, [0, 8, (&raw const mask) as u64, 0, 0, 0]);
                }
            }
            6 => {
                let _ = raw(SCHED_YIELD, [0; 6]);
                let _ = raw(GETCPU, [0, 0, 0, 0, 0, 0]);
            }
            _ => {
                let tid = raw(GETTID, [0; 6]).unwrap_or(0);
                let pid = raw(GETPID, [0; 6]).unwrap_or(0);
                if raw(TGKILL, [pid, tid, 0, 0, 0, 0]).is_err() {
                    self.broken(format_args!("tgkill({pid}, {tid}, 0) failed"));
                }
            }
        }
    }

    /// A System V shared memory, timer, clock or id call with biased arguments, none able to
    /// change memory the program uses or to send it a signal: a segment made, attached where the
    /// kernel likes (which must be outside every arena, as for a non-fixed `mmap`), written, read
    /// back, checked with `IPC_STAT`, detached and removed; `shmctl` with random commands on
    /// random ids (never one that changes or removes a segment: it could be another worker's);
    /// `shmat`/`shmdt` at addresses the kernel must refuse; POSIX timers that signal nothing
    /// (`SIGEV_NONE`, or a `sigevent` the kernel must refuse) set, read and deleted; `setitimer`
    /// with arguments it must refuse and `getitimer`; `futex_waitv` with a timeout long past;
    /// `clock_gettime` on random clocks (CPU clocks of random pids and tids); `getresuid` and
    /// `getresgid` at good and bad addresses.
    fn ipc_call(&mut self) {
        const IPC_CREAT: u64 = 0o1000;
        const IPC_RMID: u64 = 0;
        const IPC_STAT: u64 = 2;
        let bad = [0, 8, 1 << 48, 0xffff_8000_0000_0000][self.rng.below(4) as usize];
        let mut buf = [0u64; 16];
        let out = (&raw mut buf) as u64;
        match self.rng.below(9) {
            0 | 1 => {
                let len = 1 + self.rng.below(16 * self.page);
                let Ok(id) = raw(SHMGET, [0, len, IPC_CREAT | 0o600, 0, 0, 0]) else { return };
                let attached = holes_read(|| {
                    let a = raw(SHMAT, [id, 0, 0, 0, 0, 0]).ok()?;
                    if in_any_arena(a, len.next_multiple_of(self.page)) {
                        self.broken(format_args!("shmat placed {len:#x} bytes at {a:#x}, inside an arena"));
                    }
                    Some(a)
                });
                if let Some(a) = attached {
                    let value = self.rng.next();
                    // SAFETY: the segment was just attached there, read-write, by this call.
                    let back = unsafe {
                        (a as *mut u64).write_volatile(value);
                        (a as *const u64).read_volatile()
                    };
                    if back != value {
                        self.broken(format_args!("a shm segment read {back:#x} after {value:#x} at {a:#x}"));
                    }
                    if raw(SHMDT, [a, 0, 0, 0, 0, 0]).is_err() {
                        self.broken(format_args!("shmdt({a:#x}) of an attachment failed"));
                    }
                }
                match raw(SHMCTL, [id, IPC_STAT, out, 0, 0, 0]) {
                    // struct shmid64_ds: shm_segsz at 48, shm_nattch at 88.
                    Ok(_) if buf[6] != len || buf[11] != 0 => self.broken(format_args!(
                        "IPC_STAT of a detached segment of {len:#x} bytes: size {:#x}, nattch {}",
                        buf[6], buf[11]
                    )),
                    Ok(_) => {}
                    Err(e) => self.broken(format_args!("IPC_STAT of a segment just made: {e}")),
                }
                if raw(SHMCTL, [id, IPC_RMID, 0, 0, 0, 0]).is_err() {
                    self.broken(format_args!("IPC_RMID of a segment just made failed"));
                }
            }
            2 => {
                // Reading commands, and unknown ones, on random ids and buffers.
                let cmd = [IPC_STAT, 3, 13, 14, 15, 77, u64::MAX][self.rng.below(7) as usize];
                let id = [self.rng.below(1 << 20), u64::MAX, self.rng.next()][self.rng.below(3) as usize];
                let _ = raw(SHMCTL, [id, cmd, if self.rng.chance(70) { out } else { bad }, 0, 0, 0]);
                // An address the kernel must refuse: unaligned without SHM_RND, past the user half.
                let at = [self.arena + 1 + self.rng.below(self.page - 1), (1 << 48) + self.page]
                    [self.rng.below(2) as usize];
                let _ = raw(SHMAT, [self.rng.below(1 << 16), at, 0, 0, 0, 0]);
                let _ = raw(SHMDT, [self.arena + 1 + self.rng.below(self.page - 1), 0, 0, 0, 0, 0]);
            }
            3 | 4 => {
                // A timer that signals nothing (or a sigevent the kernel must refuse).
                let clock = [0, 1, 2, 3, 4, 5, 7, 99, self.rng.next() | 1 << 63][self.rng.below(9) as usize];
                let mut ev = [0u64; 8];
                ev[1] = if self.rng.chance(80) { 1 << 32 } else { (77 << 32) | self.rng.below(70) };
                let mut id = u32::MAX;
                // Never NULL: a timer created without a sigevent signals SIGALRM (Linux's
                // default), which would end the process when it expires before its delete.
                let evp = if self.rng.chance(90) { (&raw const ev) as u64 } else { bad.max(8) };
                if raw(TIMER_CREATE, [clock, evp, (&raw mut id) as u64, 0, 0, 0]).is_err() {
                    return;
                }
                let spec =
                    [self.rng.below(3), self.rng.below(1 << 31), self.rng.below(3), self.rng.below(1 << 31)];
                let flags = self.rng.below(2);
                let _ = raw(TIMER_SETTIME, [u64::from(id), flags, (&raw const spec) as u64, out, 0, 0]);
                let _ = raw(
                    TIMER_GETTIME,
                    [u64::from(id), if self.rng.chance(80) { out } else { bad }, 0, 0, 0, 0],
                );
                let _ = raw(TIMER_GETOVERRUN, [u64::from(id), 0, 0, 0, 0, 0]);
                if raw(TIMER_DELETE, [u64::from(id), 0, 0, 0, 0, 0]).is_err() {
                    self.broken(format_args!("timer_delete of timer {id} just made failed"));
                }
            }
            5 => {
                // Interval timers: getitimer of any, setitimer only with what must be refused.
                let _ = raw(
                    GETITIMER,
                    [self.rng.below(5), if self.rng.chance(80) { out } else { bad }, 0, 0, 0, 0],
                );
                let it = [0u64, 0, self.rng.below(5), 1_000_000 + self.rng.below(1 << 20)];
                if raw(SETITIMER, [self.rng.below(3), (&raw const it) as u64, 0, 0, 0, 0]).is_ok() {
                    self.broken(format_args!("setitimer with tv_usec {} succeeded", it[3]));
                }
                let _ = raw(SETITIMER, [3 + self.rng.below(1 << 10), bad, 0, 0, 0, 0]);
            }
            6 => {
                // futex_waitv with a timeout long past: never waits.
                let mut words = [0u64; 3 * 130];
                let n = [0, 1, 2, 128, 129, self.rng.below(130)][self.rng.below(6) as usize] as usize;
                for w in words.chunks_exact_mut(3).take(n) {
                    w[0] = if self.rng.chance(50) { 0 } else { self.rng.next() };
                    w[1] = match self.rng.below(3) {
                        0 => self.arena + self.rng.below(ARENA_PAGES) * self.page,
                        1 => (self.arena + self.rng.below(ARENA_PAGES * self.page)) & !3,
                        _ => bad,
                    };
                    w[2] = if self.rng.chance(80) { 2 | (128 * self.rng.below(2)) } else { self.rng.next() };
                }
                let past = [0u64, 0];
                let flags = if self.rng.chance(90) { 0 } else { self.rng.next() };
                let clock = [1, 0, 7][self.rng.below(3) as usize];
                let r = raw(
                    FUTEX_WAITV,
                    [(&raw const words) as u64, n as u64, flags, (&raw const past) as u64, clock, 0],
                );
                if r.is_ok() {
                    self.broken(format_args!("futex_waitv with a timeout long past was woken: {r:?}"));
                }
            }
            7 => {
                let pid = raw(GETPID, [0; 6]).unwrap_or(0);
                let who = [pid, raw(GETTID, [0; 6]).unwrap_or(0), self.rng.below(1 << 16)]
                    [self.rng.below(3) as usize];
                let clock = match self.rng.below(4) {
                    0 => self.rng.below(16),
                    1 => (!who << 3) | self.rng.below(8),
                    2 => self.rng.next(),
                    _ => 2 + self.rng.below(2),
                };
                let _ = raw(
                    CLOCK_GETTIME,
                    [clock & 0xffff_ffff, if self.rng.chance(90) { out } else { bad }, 0, 0, 0, 0],
                );
            }
            _ => {
                let p = |ok: bool| if ok { out } else { bad };
                let (a, b, c) = (p(self.rng.chance(70)), p(self.rng.chance(70)), p(self.rng.chance(70)));
                let call = if self.rng.chance(50) { GETRESUID } else { GETRESGID };
                let r = raw(call, [a, b + 8, c + 16, 0, 0, 0]);
                if r.is_ok() != (a == out && b == out && c == out) {
                    self.broken(format_args!("getres*id({a:#x}, {b:#x}, {c:#x}): {r:?}"));
                }
            }
        }
    }

    /// Reads (and, where writable, writes) a few pages of the arena, checking them.
    fn touch(&mut self) {
        for _ in 0..4 {
            let p = self.rng.below(ARENA_PAGES);
            let Page::Mapped { prot, value } = self.shadow[p as usize] else { continue };
            let addr = (self.arena + p * self.page) as *mut u64;
            if prot & PROT_READ != 0 {
                // SAFETY: a readable page of our own arena, as the shadow (kept in step with
                // every successful call) says.
                let got = unsafe { addr.read_volatile() };
                if got != value {
                    self.broken(format_args!("arena page {p} reads {got:#x}, expected {value:#x}"));
                }
            }
            if prot & PROT_WRITE != 0 {
                self.generation += 1;
                let v = self.generation << 16 | p;
                // SAFETY: a writable page of our own arena.
                unsafe { addr.write_volatile(v) };
                self.shadow[p as usize] = Page::Mapped { prot, value: v };
            }
        }
    }

    /// Writes and reads back word 0 of each page in `[first, first + pages)` that the shadow
    /// says is writable.
    fn touch_range(&mut self, first: u64, pages: u64) {
        for p in first..first + pages.min(4) {
            let Page::Mapped { prot, .. } = self.shadow[p as usize] else { continue };
            if prot & PROT_WRITE == 0 {
                continue;
            }
            let addr = (self.arena + p * self.page) as *mut u64;
            self.generation += 1;
            let v = self.generation << 16 | p;
            // SAFETY: a writable page of our own arena, just mapped under the write side of HOLES.
            let got = unsafe {
                addr.write_volatile(v);
                addr.read_volatile()
            };
            if got != v {
                self.broken(format_args!("arena page {p} read {got:#x} right after writing {v:#x}"));
            }
            self.shadow[p as usize] = Page::Mapped { prot, value: v };
        }
    }

    /// One of its descriptors, or a number it does not own (only for calls that neither read,
    /// write nor close it).
    fn some_fd(&mut self, owned_only: bool) -> Option<u64> {
        if !self.fds.is_empty() && (owned_only || self.rng.chance(80)) {
            return Some(self.fds[self.rng.below(self.fds.len() as u64) as usize]);
        }
        if owned_only {
            return None;
        }
        Some(match self.rng.below(3) {
            0 => self.rng.below(32),
            1 => u64::MAX,
            _ => self.rng.next() >> self.rng.below(64),
        })
    }

    /// Keeps a descriptor a call made (closing it when the worker has enough).
    fn keep(&mut self, r: Result<u64, Errno>) {
        let Ok(fd) = r else { return };
        if self.fds.len() < MAX_FDS {
            self.fds.push(fd);
        } else {
            let _ = raw(CLOSE, [fd, 0, 0, 0, 0, 0]);
        }
    }

    /// An event-loop call with biased arguments on descriptors the worker owns: every one it
    /// makes is non-blocking, `epoll_pwait` waits 0 and writes into a buffer larger than any of
    /// its epolls can fill, signals are only 0 or invalid numbers, the `rseq` area is its own
    /// (never given a critical section). Some answers are checked: what must be refused is.
    #[allow(clippy::too_many_lines, reason = "one match arm per call family, each short")]
    fn event_call(&mut self) {
        let junk = |rng: &mut Rng| if rng.chance(15) { rng.next() } else { 0 };
        match self.rng.below(16) {
            0 => {
                let flags = [0, 0o2000000, self.rng.next()][self.rng.below(3) as usize];
                let r = raw(EPOLL_CREATE1, [flags, 0, 0, 0, 0, 0]);
                self.keep(r);
            }
            1 => {
                let flags = EFD_NONBLOCK | (self.rng.below(2) + (junk(&mut self.rng) & !EFD_NONBLOCK));
                let r = raw(EVENTFD2, [self.rng.next() >> self.rng.below(64), flags, 0, 0, 0, 0]);
                self.keep(r);
            }
            2 => {
                let clock = [0, 1, 7, 8, 9, 2, self.rng.next()][self.rng.below(7) as usize];
                let flags = TFD_NONBLOCK | (junk(&mut self.rng) & !TFD_NONBLOCK);
                let r = raw(TIMERFD_CREATE, [clock, flags, 0, 0, 0, 0]);
                self.keep(r);
            }
            3 => {
                let mask = self.rng.next();
                let size = if self.rng.chance(90) { 8 } else { self.rng.below(16) };
                let fd = if self.rng.chance(70) { u64::MAX } else { self.some_fd(false).unwrap_or(u64::MAX) };
                let flags = SFD_NONBLOCK | (junk(&mut self.rng) & !SFD_NONBLOCK);
                let r = raw(SIGNALFD4, [fd, (&raw const mask) as u64, size, flags, 0, 0]);
                if fd == u64::MAX {
                    self.keep(r);
                }
            }
            4 => {
                let pid =
                    if self.rng.chance(80) { raw(GETPID, [0; 6]).unwrap_or(1) } else { self.rng.below(64) };
                let flags = PIDFD_NONBLOCK | junk(&mut self.rng);
                let r = raw(PIDFD_OPEN, [pid, flags, 0, 0, 0, 0]);
                self.keep(r);
            }
            5 | 6 => {
                let (Some(ep), Some(fd)) = (self.some_fd(false), self.some_fd(false)) else { return };
                let op = [1, 2, 3, 1, 0, 4, self.rng.next()][self.rng.below(7) as usize];
                let event = [self.rng.next() & 0xf000_3fff, self.rng.next()];
                let ptr =
                    if self.rng.chance(95) { (&raw const event) as u64 } else { self.rng.next() | (1 << 48) };
                if raw(EPOLL_CTL, [ep, op, fd, ptr, 0, 0]).is_ok() && !(1..=3).contains(&op) {
                    self.broken(format_args!("epoll_ctl op {op} succeeded"));
                }
            }
            7 => {
                let Some(ep) = self.some_fd(false) else { return };
                let max = match self.rng.below(5) {
                    0 => 0,
                    1 => u64::from(u32::MAX), // -1
                    2 => (i32::MAX as u64) / 16 + 1,
                    _ => 1 + self.rng.below(EVENTS as u64),
                };
                let mask = self.rng.next();
                let sigmask = if self.rng.chance(20) { (&raw const mask) as u64 } else { 0 };
                let size = if self.rng.chance(90) { 8 } else { self.rng.below(16) };
                let out = self.events.as_mut_ptr() as u64;
                let r = if self.rng.chance(50) {
                    raw(EPOLL_PWAIT, [ep, out, max, 0, sigmask, size])
                } else {
                    let ts = [0u64, [0, 1_000_000_000, 1][self.rng.below(3) as usize]];
                    raw(EPOLL_PWAIT2, [ep, out, max, (&raw const ts) as u64, sigmask, size])
                };
                if r.is_ok_and(|n| n > max.min(EVENTS as u64)) {
                    self.broken(format_args!("epoll_pwait returned {r:?} events for {max}"));
                }
            }
            8 => {
                let Some(fd) = self.some_fd(true) else { return };
                let mut buf = [0u8; 256];
                let len = [8, 4, 128, 256, 0][self.rng.below(5) as usize];
                let _ = raw(READ, [fd, buf.as_mut_ptr() as u64, len, 0, 0, 0]);
            }
            9 => {
                let Some(fd) = self.some_fd(true) else { return };
                let value = [1u64, u64::MAX, u64::MAX - 1, self.rng.next()][self.rng.below(4) as usize];
                let len = if self.rng.chance(90) { 8 } else { self.rng.below(8) };
                let _ = raw(WRITE, [fd, (&raw const value) as u64, len, 0, 0, 0]);
            }
            10 => {
                let Some(fd) = self.some_fd(true) else { return };
                let ns = |rng: &mut Rng| [0, 1, 1_000_000, 999_999_999, 1_000_000_000][rng.below(5) as usize];
                let spec = [0, ns(&mut self.rng), self.rng.below(2), ns(&mut self.rng)];
                let mut old = [0u64; 4];
                let flags = [0, 1, 2, 3, self.rng.next()][self.rng.below(5) as usize];
                let _ =
                    raw(TIMERFD_SETTIME, [fd, flags, (&raw const spec) as u64, (&raw mut old) as u64, 0, 0]);
                let _ = raw(TIMERFD_GETTIME, [fd, (&raw mut old) as u64, 0, 0, 0, 0]);
            }
            11 => {
                if !self.fds.is_empty() {
                    let fd = self.fds.swap_remove(self.rng.below(self.fds.len() as u64) as usize);
                    let _ = raw(CLOSE, [fd, 0, 0, 0, 0, 0]);
                }
            }
            12 => {
                let cmd =
                    [0, 1, 2, 4, 8, 16, 32, 64, 128, 256, 512, self.rng.next()][self.rng.below(12) as usize];
                let flags = if self.rng.chance(80) { 0 } else { self.rng.below(4) };
                let r = raw(MEMBARRIER, [cmd, flags, self.rng.next(), 0, 0, 0]);
                if cmd == 0 && flags == 0 && r.is_ok_and(|q| q & 0x1ff != 0x1ff) {
                    self.broken(format_args!("membarrier QUERY said {r:?}"));
                }
            }
            13 => self.rseq_call(),
            14 => {
                let version =
                    [0x2008_0522u64, 0x2007_1026, 0x1998_0330, self.rng.next()][self.rng.below(4) as usize];
                let pid = [0, raw(GETPID, [0; 6]).unwrap_or(0), self.rng.below(100), u64::MAX]
                    [self.rng.below(4) as usize];
                let mut header = [version as u32, pid as u32];
                let mut data = [0u32; 6];
                let data_ptr = if self.rng.chance(90) { (&raw mut data) as u64 } else { 0 };
                let got = raw(CAPGET, [(&raw mut header) as u64, data_ptr, 0, 0, 0, 0]);
                if got.is_ok() && self.rng.chance(30) {
                    // What it had, or a random set (refused unless it only drops).
                    if self.rng.chance(50) {
                        data[self.rng.below(6) as usize] = self.rng.next() as u32;
                    }
                    let _ = raw(CAPSET, [(&raw mut header) as u64, (&raw const data) as u64, 0, 0, 0, 0]);
                }
            }
            _ => {
                let Some(fd) = self.some_fd(false) else { return };
                let sig = [0, 65, 100, self.rng.below(1 << 20) + 65][self.rng.below(4) as usize];
                let flags = if self.rng.chance(80) { 0 } else { self.rng.next() };
                let _ = raw(PIDFD_SEND_SIGNAL, [fd, sig, 0, flags, 0, 0]);
                let iov =
                    [self.arena + self.rng.below(ARENA_PAGES) * self.page, self.page * self.rng.below(4)];
                let advice = [20, 21, 3, 25, 4, self.rng.below(100)][self.rng.below(6) as usize];
                let _ = raw(
                    PROCESS_MADVISE,
                    [fd, (&raw const iov) as u64, self.rng.below(3), advice, junk(&mut self.rng), 0],
                );
                let _ = raw(PROCESS_MRELEASE, [fd, self.rng.below(2), 0, 0, 0, 0]);
                let mut info = [0u8; 128];
                // waitid(P_PIDFD, fd, info, WEXITED | WNOHANG): never a wait.
                let _ = raw(WAITID, [3, fd, (&raw mut info) as u64, 4 | 1, 0, 0]);
            }
        }
    }

    /// `rseq` with biased arguments on the worker's own area: registering and unregistering it
    /// (with the right signature or not), other areas, lengths and flags.
    fn rseq_call(&mut self) {
        const SIG: u64 = 0xd428_bc00;
        let area = (&raw const self.rseq) as u64;
        let (addr, len, flags, sig) = match self.rng.below(6) {
            0 => (area, 32, 0, SIG),
            1 => (area, 32, 1, SIG),
            2 => (area + 1 + self.rng.below(31), 32, self.rng.below(2), SIG),
            3 => (area, self.rng.below(64), self.rng.below(2), SIG),
            4 => (area, 32, self.rng.below(2), self.rng.next()),
            _ => (area, 32, self.rng.next(), SIG),
        };
        let r = raw(RSEQ, [addr, len, flags, sig, 0, 0]);
        // Only these may succeed: registering the area when it is not, unregistering it with
        // the signature it was registered with.
        let sig = sig & 0xffff_ffff;
        match (r, flags, self.rseq_sig) {
            (Ok(_), 0, None) if addr == area && len == 32 => self.rseq_sig = Some(sig),
            (Ok(_), 1, Some(s)) if addr == area && len == 32 && sig == s => self.rseq_sig = None,
            (Ok(_), ..) => {
                self.broken(format_args!("rseq({addr:#x}, {len}, {flags:#x}, {sig:#x}) succeeded"))
            }
            (Err(_), ..) => {}
        }
    }

    fn finish(&mut self) {
        for fd in core::mem::take(&mut self.fds) {
            let _ = raw(CLOSE, [fd, 0, 0, 0, 0, 0]);
        }
        if let Some(sig) = self.rseq_sig {
            let area = (&raw const self.rseq) as u64;
            if raw(RSEQ, [area, 32, 1, sig, 0, 0]).is_err() {
                self.broken(format_args!("rseq could not be unregistered"));
            }
        }
        // The arena leaves the list in the same write section that unmaps it: its range is free
        // for other workers' mappings from then on.
        holes_write(|| {
            let _ = raw(MUNMAP, [self.arena, ARENA_PAGES * self.page, 0, 0, 0, 0]);
            for i in 0..MAX_WORKERS {
                if ARENAS[2 * i].load(Ordering::Relaxed) == self.arena {
                    ARENAS[2 * i + 1].store(0, Ordering::Relaxed);
                    ARENAS[2 * i].store(0, Ordering::Relaxed);
                }
            }
        });
        for (a, l) in core::mem::take(&mut self.others) {
            let _ = raw(MUNMAP, [a, l, 0, 0, 0, 0]);
        }
    }
}

/// Calls per worker (`--calls=N`), set by `main`.
pub static CALLS_PER_WORKER: AtomicU64 = AtomicU64::new(DEFAULT_CALLS);

extern "C" fn worker_main(arg: u64) -> u64 {
    // SAFETY: `arg` is a `Box<Worker>` leaked by `run` for this thread alone; taken back here.
    let mut w = unsafe { alloc::boxed::Box::from_raw(arg as *mut Worker) };
    while !START.load(Ordering::Acquire) {
        sys::sched_yield();
    }
    for _ in 0..CALLS_PER_WORKER.load(Ordering::Relaxed) {
        w.step();
    }
    w.finish();
    0
}

/// Faults in `bytes` of this thread's stack below the caller's frame.
#[inline(never)]
fn touch_stack(bytes: usize) {
    let mut area = [0u8; 64 * 1024];
    let n = bytes.min(area.len());
    for i in (0..n).step_by(4096) {
        // SAFETY: a byte of a local array; volatile so the stores are not optimised away.
        unsafe { (&raw mut area[i]).write_volatile(1) };
    }
    core::hint::black_box(&area);
}

/// The `fuzz` mode.
pub fn run(ctx: &Ctx) -> bool {
    let mut c = Checks::new("fuzz");
    let workers = ctx.threads.unwrap_or(2).min(MAX_WORKERS as u32);
    let calls = CALLS_PER_WORKER.load(Ordering::Relaxed);
    say!("== fuzz: {workers} workers x {calls} memory calls, seed {:#x}", ctx.seed);
    // Every arena and worker first, then the threads (whose stacks are mapped now), then go.
    let mut ready = Vec::new();
    for i in 0..workers {
        let seed = ctx.seed.wrapping_mul(0x9e37_79b9_7f4a_7c15).wrapping_add(u64::from(i) * 0x1234_5678);
        match Worker::new(seed, ctx.page) {
            Ok(w) => {
                ARENAS[2 * i as usize].store(w.arena, Ordering::Relaxed);
                ARENAS[2 * i as usize + 1].store(w.arena + ARENA_PAGES * ctx.page, Ordering::Relaxed);
                ready.push(alloc::boxed::Box::into_raw(alloc::boxed::Box::new(w)) as u64);
            }
            Err(e) => {
                check!(c, false, "the arena of worker {i} could not be mapped: {e}");
            }
        }
    }
    // The frames held now: the workers are allocated (the heap keeps its pages), their arenas
    // hold none yet, the threads' stacks are mapped later and unmapped at the joins. This thread
    // is a worker too, and its stack is never unmapped: the pages a worker's deepest call path
    // reaches are faulted in first, so they do not count as frames held at the end.
    touch_stack(64 * 1024);
    let before = sys::mm_stats().ok();
    let mine = ready.pop();
    let mut threads = Vec::new();
    for arg in ready {
        match thread::spawn(worker_main, arg, 0) {
            Ok(t) => threads.push(t),
            Err(e) => {
                check!(c, false, "clone of a worker failed: {e}");
            }
        }
    }
    START.store(true, Ordering::Release);
    if let Some(arg) = mine {
        worker_main(arg);
    }
    for t in threads {
        if t.join(thread::deadline_in(600)).is_err() {
            check!(c, false, "a worker did not finish within 600 s");
        }
    }
    let (calls, refused, broken) =
        (CALLS.load(Ordering::Relaxed), REFUSED.load(Ordering::Relaxed), BROKEN.load(Ordering::Relaxed));
    say!("  {calls} calls, {refused} refused with an errno, {broken} broken invariants");
    ok!(
        c,
        broken == 0,
        "every page read what was written, every mmap result was a page-aligned user address"
    );
    if let (Some(b), Ok(a)) = (before, sys::mm_stats()) {
        say!(
            "  data frames held before {}, after {}; table frames {} / {}",
            b.data_frames,
            a.data_frames,
            b.table_frames,
            a.table_frames
        );
        if b.free_frames != 0 || b.data_frames != 0 {
            ok!(c, a.data_frames == b.data_frames, "every data frame back after unmapping everything");
        }
    }
    c.done()
}
