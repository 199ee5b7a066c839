//! The console's line discipline: what Linux's `n_tty` does between the UART and `read`, reduced to
//! what a shell on a serial console needs (Linux `drivers/tty/n_tty.c`, termios(3)).
//!
//! - **Canonical mode** (`ICANON`, the default): input is collected into a line that the erase
//!   (`VERASE`, DEL), word-erase (`VWERASE`, ^W) and kill (`VKILL`, ^U) characters edit; `read`
//!   returns at most one line, once it is ended by newline or `VEOF` (^D). ^D on an empty line
//!   makes one `read` return 0 (end of file).
//! - **Non-canonical mode**: each byte is readable at once (`VMIN`/`VTIME` are treated as 1/0:
//!   a read waits for at least one byte, then returns what there is).
//! - **Echo** (`ECHO`, `ECHOE`, `ECHOCTL`, `ECHONL`): the echo goes to a callback (the UART);
//!   control characters are echoed as `^X`.
//! - **Input mapping**: `ICRNL` (the Enter key of a terminal sends CR), `INLCR`, `IGNCR`, `ISTRIP`.
//! - `ISIG`: ^C and ^\ discard the line being typed and echo `^C`; no signal is sent (this kernel
//!   has no signals yet), and the character is counted in [`LineDiscipline::interrupts`].
//!
//! The buffer holds 4095 bytes of a line, as Linux's does; further bytes are dropped until the line
//! is ended.
#![no_std]

extern crate alloc;
#[cfg(test)]
extern crate std;

use alloc::collections::VecDeque;
use alloc::vec::Vec;
use linux_abi::termios::{Termios, cc, iflag, lflag};

/// Longest line kept (Linux's `N_TTY_BUF_SIZE` - 1).
pub const MAX_LINE: usize = 4095;

/// The state between the UART and `read`.
#[derive(Debug)]
pub struct LineDiscipline {
    /// The settings (`TCGETS`/`TCSETS`).
    pub termios: Termios,
    /// The line being edited (canonical mode).
    line: Vec<u8>,
    /// Bytes a read may take. In canonical mode, `ends` marks where each finished line ends.
    ready: VecDeque<u8>,
    /// Offsets in `ready` one past each finished line's end (its newline, or where ^D was typed).
    ends: VecDeque<usize>,
    /// ^C and ^\ typed with ISIG on.
    pub interrupts: u64,
}

impl Default for LineDiscipline {
    fn default() -> Self {
        Self::new()
    }
}

fn echo_char(c: u8, termios: &Termios, out: &mut impl FnMut(&[u8])) {
    if c < 0x20 && c != b'\n' && c != b'\t' && termios.has(lflag::ECHOCTL) {
        out(&[b'^', c + 0x40]);
    } else if c == 0x7f && termios.has(lflag::ECHOCTL) {
        out(b"^?");
    } else {
        out(&[c]);
    }
}

/// Columns an echoed character took (2 for `^X`).
fn echo_width(c: u8, termios: &Termios) -> usize {
    if (c < 0x20 && c != b'\t' || c == 0x7f) && termios.has(lflag::ECHOCTL) { 2 } else { 1 }
}

impl LineDiscipline {
    /// Default termios, nothing typed.
    pub fn new() -> Self {
        Self {
            termios: Termios::default(),
            line: Vec::new(),
            ready: VecDeque::new(),
            ends: VecDeque::new(),
            interrupts: 0,
        }
    }

    /// Installs new settings (`TCSETS*`). Leaving canonical mode makes the line typed so far
    /// readable, as Linux does.
    pub fn set_termios(&mut self, termios: Termios) {
        let was_canonical = self.termios.has(lflag::ICANON);
        self.termios = termios;
        if was_canonical && !termios.has(lflag::ICANON) {
            self.ready.extend(self.line.drain(..));
            self.ends.clear();
        }
    }

    /// Drops everything typed and not yet read (`TCSETSF`, `TCFLSH`).
    pub fn flush_input(&mut self) {
        self.line.clear();
        self.ready.clear();
        self.ends.clear();
    }

    /// Whether a `read` would return now (data, or an end of file).
    pub fn readable(&self) -> bool {
        if self.termios.has(lflag::ICANON) { !self.ends.is_empty() } else { !self.ready.is_empty() }
    }

    /// Bytes a read could take now (`FIONREAD`).
    pub fn available(&self) -> usize {
        if self.termios.has(lflag::ICANON) {
            self.ends.back().copied().unwrap_or(0)
        } else {
            self.ready.len()
        }
    }

    /// Takes what one `read` returns into `out`: at most one line in canonical mode; `None` if
    /// nothing is readable (the reader must wait). `Some(0)` is an end of file (or `out` empty).
    pub fn read(&mut self, out: &mut [u8]) -> Option<usize> {
        if !self.readable() {
            return None;
        }
        let limit = if self.termios.has(lflag::ICANON) { self.ends[0] } else { self.ready.len() };
        let n = limit.min(out.len());
        for (slot, byte) in out.iter_mut().zip(self.ready.drain(..n)) {
            *slot = byte;
        }
        if self.termios.has(lflag::ICANON) {
            for end in &mut self.ends {
                *end -= n;
            }
            // A line fully read is gone; an empty one (an end of file) is read once. A read into
            // an empty buffer takes nothing, not even an end of file.
            if self.ends[0] == 0 && !out.is_empty() {
                self.ends.pop_front();
            }
        }
        Some(n)
    }

    /// Takes one input byte from the UART; the echo, if any, goes to `echo`.
    pub fn input(&mut self, byte: u8, echo: &mut impl FnMut(&[u8])) {
        let t = self.termios;
        let mut c = if t.iflag & iflag::ISTRIP != 0 { byte & 0x7f } else { byte };
        if c == b'\r' {
            if t.iflag & iflag::IGNCR != 0 {
                return;
            }
            if t.iflag & iflag::ICRNL != 0 {
                c = b'\n';
            }
        } else if c == b'\n' && t.iflag & iflag::INLCR != 0 {
            c = b'\r';
        }
        let echoing = t.has(lflag::ECHO);
        if t.has(lflag::ISIG) && (t.is(c, cc::VINTR) || t.is(c, cc::VQUIT)) {
            self.interrupts += 1;
            self.line.clear();
            if echoing {
                echo_char(c, &t, echo);
                echo(b"\n");
            }
            return;
        }
        if !t.has(lflag::ICANON) {
            self.ready.push_back(c);
            if echoing {
                echo_char(c, &t, echo);
            }
            return;
        }
        if t.is(c, cc::VERASE) {
            if let Some(gone) = self.line.pop()
                && echoing
            {
                self.erase_echo(gone, echo);
            }
            return;
        }
        if t.is(c, cc::VWERASE) && t.has(lflag::IEXTEN) {
            // Blanks before the word, then the word.
            while self.line.last().is_some_and(|b| *b == b' ' || *b == b'\t') {
                let gone = self.line.pop().unwrap_or(b' ');
                if echoing {
                    self.erase_echo(gone, echo);
                }
            }
            while self.line.last().is_some_and(|b| *b != b' ' && *b != b'\t') {
                let gone = self.line.pop().unwrap_or(b' ');
                if echoing {
                    self.erase_echo(gone, echo);
                }
            }
            return;
        }
        if t.is(c, cc::VKILL) {
            if echoing && t.has(lflag::ECHOKE) && t.has(lflag::ECHOE) {
                while let Some(gone) = self.line.pop() {
                    self.erase_echo(gone, echo);
                }
            } else {
                self.line.clear();
                if echoing {
                    echo_char(c, &t, echo);
                    if t.has(lflag::ECHOK) {
                        echo(b"\n");
                    }
                }
            }
            return;
        }
        if t.is(c, cc::VEOF) {
            // The line so far becomes readable without a newline; alone, it is an end of file.
            self.finish_line();
            return;
        }
        let ends_line = c == b'\n' || t.is(c, cc::VEOL) || t.is(c, cc::VEOL2);
        if self.line.len() >= MAX_LINE && !ends_line {
            return; // full: dropped, as Linux drops (and beeps)
        }
        self.line.push(c);
        if echoing || (c == b'\n' && t.has(lflag::ECHONL)) {
            echo_char(c, &t, echo);
        }
        if ends_line {
            self.finish_line();
        }
    }

    fn finish_line(&mut self) {
        self.ready.extend(self.line.drain(..));
        self.ends.push_back(self.ready.len());
    }

    fn erase_echo(&self, gone: u8, echo: &mut impl FnMut(&[u8])) {
        if self.termios.has(lflag::ECHOE) {
            for _ in 0..echo_width(gone, &self.termios) {
                echo(b"\x08 \x08");
            }
        } else {
            echo_char(self.termios.cc[cc::VERASE], &self.termios, echo);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use alloc::string::String;

    fn feed(ld: &mut LineDiscipline, input: &[u8]) -> String {
        let mut echoed = Vec::new();
        for &b in input {
            ld.input(b, &mut |e: &[u8]| echoed.extend_from_slice(e));
        }
        String::from_utf8(echoed).unwrap()
    }

    fn read_all(ld: &mut LineDiscipline, size: usize) -> Option<Vec<u8>> {
        let mut buf = alloc::vec![0u8; size];
        let n = ld.read(&mut buf)?;
        buf.truncate(n);
        Some(buf)
    }

    #[test]
    fn termios_round_trips_through_its_36_bytes_and_defaults_to_linuxs() {
        let t = Termios::default();
        assert_eq!(Termios::from_bytes(t.to_bytes()), t);
        assert_eq!(t.lflag, 0o105_073); // 0x8a3b, Linux's default c_lflag
        assert_eq!(t.iflag, 0o2400);
        assert_eq!(t.cflag, 0o2277);
        assert_eq!(t.to_bytes()[17 + cc::VERASE], 0x7f);
    }

    #[test]
    fn a_canonical_read_waits_for_the_line_and_returns_one_line() {
        let mut ld = LineDiscipline::new();
        assert_eq!(feed(&mut ld, b"ab"), "ab");
        assert_eq!(read_all(&mut ld, 100), None, "no line yet");
        feed(&mut ld, b"\rcd\n");
        assert_eq!(read_all(&mut ld, 100).unwrap(), b"ab\n", "CR became NL");
        assert_eq!(read_all(&mut ld, 100).unwrap(), b"cd\n");
        assert_eq!(read_all(&mut ld, 100), None);
    }

    #[test]
    fn a_short_read_takes_the_rest_of_the_line_next_time() {
        let mut ld = LineDiscipline::new();
        feed(&mut ld, b"hello\nx\n");
        assert_eq!(read_all(&mut ld, 2).unwrap(), b"he");
        assert_eq!(ld.available(), 8 - 2);
        assert_eq!(read_all(&mut ld, 100).unwrap(), b"llo\n");
        assert_eq!(read_all(&mut ld, 100).unwrap(), b"x\n");
    }

    #[test]
    fn erase_kill_and_word_erase_edit_the_line_and_echo_it() {
        let mut ld = LineDiscipline::new();
        assert_eq!(feed(&mut ld, b"abc\x7f"), "abc\x08 \x08");
        feed(&mut ld, b"d one two\x17\x17x\n");
        assert_eq!(read_all(&mut ld, 100).unwrap(), b"abd x\n");
        feed(&mut ld, b"junk\x15ok\n");
        assert_eq!(read_all(&mut ld, 100).unwrap(), b"ok\n");
        feed(&mut ld, b"\x7f\x7fz\n"); // erasing an empty line does nothing
        assert_eq!(read_all(&mut ld, 100).unwrap(), b"z\n");
    }

    #[test]
    fn control_characters_echo_as_caret_letters_and_erase_two_columns() {
        let mut ld = LineDiscipline::new();
        assert_eq!(feed(&mut ld, b"\x01\x7f"), "^A\x08 \x08\x08 \x08");
    }

    #[test]
    fn eof_on_an_empty_line_reads_as_zero_once_and_mid_line_ends_the_line() {
        let mut ld = LineDiscipline::new();
        feed(&mut ld, b"\x04");
        assert_eq!(read_all(&mut ld, 10).unwrap(), b"");
        assert_eq!(read_all(&mut ld, 10), None, "the end of file is read once");
        feed(&mut ld, b"ab\x04");
        assert_eq!(read_all(&mut ld, 10).unwrap(), b"ab");
        assert_eq!(read_all(&mut ld, 10), None);
    }

    #[test]
    fn noncanonical_mode_delivers_each_byte_and_echo_follows_the_flag() {
        let mut ld = LineDiscipline::new();
        let mut raw = ld.termios;
        raw.lflag &= !(lflag::ICANON | lflag::ECHO);
        ld.set_termios(raw);
        assert_eq!(feed(&mut ld, b"q\x7f"), "", "no echo");
        assert_eq!(read_all(&mut ld, 10).unwrap(), b"q\x7f", "DEL is data");
        assert_eq!(read_all(&mut ld, 10), None);
    }

    #[test]
    fn leaving_canonical_mode_makes_the_partial_line_readable() {
        let mut ld = LineDiscipline::new();
        feed(&mut ld, b"par");
        let mut raw = ld.termios;
        raw.lflag &= !lflag::ICANON;
        ld.set_termios(raw);
        assert_eq!(read_all(&mut ld, 10).unwrap(), b"par");
    }

    #[test]
    fn interrupt_discards_the_line_and_is_counted() {
        let mut ld = LineDiscipline::new();
        assert_eq!(feed(&mut ld, b"rm -rf\x03"), "rm -rf^C\n");
        assert_eq!(ld.interrupts, 1);
        feed(&mut ld, b"ls\n");
        assert_eq!(read_all(&mut ld, 10).unwrap(), b"ls\n");
    }

    #[test]
    fn a_full_line_drops_bytes_but_still_ends() {
        let mut ld = LineDiscipline::new();
        let long = alloc::vec![b'a'; MAX_LINE + 10];
        feed(&mut ld, &long);
        feed(&mut ld, b"\n");
        assert_eq!(read_all(&mut ld, 10_000).unwrap().len(), MAX_LINE + 1);
    }

    #[test]
    fn input_mapping_flags_apply() {
        let mut ld = LineDiscipline::new();
        let mut t = ld.termios;
        t.iflag = iflag::IGNCR | iflag::ISTRIP;
        ld.set_termios(t);
        feed(&mut ld, b"a\r\xe2\n");
        assert_eq!(read_all(&mut ld, 10).unwrap(), b"ab\n");
        ld.flush_input();
        assert!(!ld.readable());
    }
}
