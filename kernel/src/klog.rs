//! The kernel's log, after Linux's `printk`: every kernel message is a record (sequence number,
//! level, time since boot, text) in a ring of [`LOG_SIZE`] bytes, oldest dropped first; a
//! message also goes to the console when its level is below the console log level (`loglevel=`
//! on the command line, `quiet` for 4, `debug` for 10; by default 4, so that a successful run
//! shows only the program's output; 8 in the test image). Readers: `syslog(2)` (busybox `dmesg`) and `/dev/kmsg`
//! (one record per `read`, each reader with its own sequence number).
//!
//! The ring lives in a static array: logging never allocates, so it works before the heap and
//! on the way to a panic. It sits beside the console, below everything that logs; it wakes
//! no one (a wake-up takes the scheduler's locks, which a message may be logged under), so a
//! blocking `/dev/kmsg` reader polls it (`fs::dev`).
use core::sync::atomic::{AtomicU8, AtomicU64, Ordering};

use spin::Mutex;

/// Bytes of the ring (Linux's `CONFIG_LOG_BUF_SHIFT` of 17).
pub const LOG_SIZE: usize = 128 << 10;

/// Linux's levels.
pub mod level {
    /// An error.
    pub const ERR: u8 = 3;
    /// A warning.
    pub const WARNING: u8 = 4;
    /// Information (the default level of a message).
    pub const INFO: u8 = 6;
}

/// The console log level: messages below it go to the console too.
static CONSOLE_LEVEL: AtomicU8 = AtomicU8::new(DEFAULT_CONSOLE_LEVEL);
/// The console log level when the command line names none: Linux's `quiet` (errors only), so
/// that a successful run shows only the program's output; the test image, whose console is a
/// test report, shows everything (`loglevel=8`).
pub const DEFAULT_CONSOLE_LEVEL: u8 = if cfg!(feature = "test-image") { 8 } else { 4 };

/// Header of a record in the ring: `[seq u64][ts_ns u64][level u8][len u16]` then the text.
const HEADER: usize = 19;

struct Ring {
    bytes: [u8; LOG_SIZE],
    /// Offset of the oldest record, and of the end of the newest.
    head: usize,
    tail: usize,
    /// Sequence number of the oldest record kept, and of the next.
    first_seq: u64,
    next_seq: u64,
    /// Bytes in use.
    used: usize,
}

static RING: Mutex<Ring> =
    Mutex::new(Ring { bytes: [0; LOG_SIZE], head: 0, tail: 0, first_seq: 0, next_seq: 0, used: 0 });

/// Counts records (a `/dev/kmsg` reader waiting for the next compares it).
static WRITTEN: AtomicU64 = AtomicU64::new(0);

/// Records written so far.
pub fn written() -> u64 {
    WRITTEN.load(Ordering::Acquire)
}

impl Ring {
    fn byte_at(&self, at: usize) -> u8 {
        self.bytes[at % LOG_SIZE]
    }

    fn read_u64(&self, at: usize) -> u64 {
        let mut b = [0u8; 8];
        for (i, v) in b.iter_mut().enumerate() {
            *v = self.byte_at(at + i);
        }
        u64::from_le_bytes(b)
    }

    fn record_len(&self, at: usize) -> usize {
        HEADER + usize::from(u16::from_le_bytes([self.byte_at(at + 17), self.byte_at(at + 18)]))
    }

    fn push(&mut self, level: u8, ts: u64, text: &[u8]) {
        let text = &text[..text.len().min(1024)];
        let need = HEADER + text.len();
        while self.used + need > LOG_SIZE && self.used > 0 {
            let len = self.record_len(self.head);
            self.head = (self.head + len) % LOG_SIZE;
            self.used -= len;
            self.first_seq += 1;
        }
        let mut header = [0u8; HEADER];
        header[..8].copy_from_slice(&self.next_seq.to_le_bytes());
        header[8..16].copy_from_slice(&ts.to_le_bytes());
        header[16] = level;
        header[17..19].copy_from_slice(&(text.len() as u16).to_le_bytes());
        for &b in header.iter().chain(text) {
            self.bytes[self.tail] = b;
            self.tail = (self.tail + 1) % LOG_SIZE;
        }
        self.used += need;
        self.next_seq += 1;
    }
}

/// One record, as a reader gets it.
pub struct Record {
    /// Its sequence number.
    pub seq: u64,
    /// Nanoseconds since boot.
    pub ts_ns: u64,
    /// Its level.
    pub level: u8,
    /// Its text (without the newline), cut to 1024 bytes.
    pub text: [u8; 1024],
    /// The text's length.
    pub len: usize,
}

/// Records `text` at `level` (the ring only; [`log`] also prints).
pub fn record(level: u8, text: &[u8]) {
    let ts = crate::wallclock::monotonic_ns();
    RING.lock().push(level, ts, text);
    WRITTEN.fetch_add(1, Ordering::Release);
}

/// Whether a message at `level` goes to the console.
pub fn to_console(level: u8) -> bool {
    level < CONSOLE_LEVEL.load(Ordering::Relaxed)
}

/// Sets the console log level (`loglevel=`, `syslog(SYSLOG_ACTION_CONSOLE_LEVEL)`), 1 to 15.
pub fn set_console_level(level: u8) {
    CONSOLE_LEVEL.store(level.clamp(1, 15), Ordering::Relaxed);
}

/// The record with sequence number `seq`, or the oldest after it if it was dropped (`None`:
/// none yet).
pub fn read(seq: u64) -> Option<Record> {
    let ring = RING.lock();
    if seq >= ring.next_seq {
        return None;
    }
    let mut at = ring.head;
    let mut s = ring.first_seq;
    while s < seq.max(ring.first_seq) {
        at = (at + ring.record_len(at)) % LOG_SIZE;
        s += 1;
    }
    let len = ring.record_len(at) - HEADER;
    let mut text = [0u8; 1024];
    for (i, b) in text.iter_mut().enumerate().take(len) {
        *b = ring.byte_at(at + HEADER + i);
    }
    Some(Record {
        seq: ring.read_u64(at),
        ts_ns: ring.read_u64(at + 8),
        level: ring.byte_at(at + 16),
        text,
        len,
    })
}

/// The sequence numbers kept: (oldest, next).
pub fn bounds() -> (u64, u64) {
    let ring = RING.lock();
    (ring.first_seq, ring.next_seq)
}

/// Forgets every record (`syslog(SYSLOG_ACTION_CLEAR)`).
pub fn clear() {
    let mut ring = RING.lock();
    ring.first_seq = ring.next_seq;
    ring.head = ring.tail;
    ring.used = 0;
}

/// Bytes the whole log takes in `syslog(2)`'s format (`<L>[    S.UUUUUU] text\n` per record).
pub fn syslog_len() -> usize {
    let (first, next) = bounds();
    (first..next).filter_map(read).map(|r| syslog_line(&r, &mut [0u8; 1100])).sum()
}

/// Formats `r` as `syslog(2)` does into `out`; its length.
pub fn syslog_line(r: &Record, out: &mut [u8; 1100]) -> usize {
    let mut w = Cursor { buf: out, at: 0 };
    let secs = r.ts_ns / 1_000_000_000;
    let us = (r.ts_ns % 1_000_000_000) / 1000;
    let _ = core::fmt::write(&mut w, format_args!("<{}>[{:5}.{:06}] ", r.level, secs, us));
    w.put(&r.text[..r.len]);
    w.put(b"\n");
    w.at
}

/// Formats `r` as `/dev/kmsg` does (`L,SEQ,US,-;text\n`) into `out`; its length.
pub fn kmsg_line(r: &Record, out: &mut [u8; 1100]) -> usize {
    let mut w = Cursor { buf: out, at: 0 };
    let _ = core::fmt::write(&mut w, format_args!("{},{},{},-;", r.level, r.seq, r.ts_ns / 1000));
    w.put(&r.text[..r.len]);
    w.put(b"\n");
    w.at
}

struct Cursor<'a> {
    buf: &'a mut [u8; 1100],
    at: usize,
}

impl Cursor<'_> {
    fn put(&mut self, b: &[u8]) {
        let n = b.len().min(self.buf.len() - self.at);
        self.buf[self.at..self.at + n].copy_from_slice(&b[..n]);
        self.at += n;
    }
}

impl core::fmt::Write for Cursor<'_> {
    fn write_str(&mut self, s: &str) -> core::fmt::Result {
        self.put(s.as_bytes());
        Ok(())
    }
}

/// Records the formatted message at `level`, and prints it on the console when the console log
/// level says so. A message is one line: the newline is the console's, not the record's.
pub fn log(level: u8, args: core::fmt::Arguments<'_>) {
    let mut buf = [0u8; 1100];
    let mut w = Cursor { buf: &mut buf, at: 0 };
    let _ = core::fmt::write(&mut w, args);
    let len = w.at;
    let text = &buf[..len];
    let text = text.strip_suffix(b"\n").unwrap_or(text);
    record(level, text);
    if to_console(level) {
        crate::console::print_bytes(text);
        crate::console::print_bytes(b"\n");
    }
}

/// Logs a line at the default level (information): into the kernel's log (`dmesg`), and on
/// the console when the console log level is above it (`loglevel=7`; by default it is not).
#[macro_export]
macro_rules! kprintln {
    ($($arg:tt)*) => ($crate::klog::log($crate::klog::level::INFO, format_args!($($arg)*)));
}

/// Logs a line at the error level: on the console at the default console log level too.
#[macro_export]
macro_rules! kerr {
    ($($arg:tt)*) => ($crate::klog::log($crate::klog::level::ERR, format_args!($($arg)*)));
}

/// Logs a line at the warning level.
#[macro_export]
macro_rules! kwarn {
    ($($arg:tt)*) => ($crate::klog::log($crate::klog::level::WARNING, format_args!($($arg)*)));
}
