//! Terminals: `struct termios` as the kernel's `TCGETS`/`TCSETS` copy it (asm-generic
//! `termbits.h`), its flag bits and control-character indices, and the terminal ioctls.

/// `c_iflag` bits.
pub mod iflag {
    /// Strip the eighth bit.
    pub const ISTRIP: u32 = 0o040;
    /// NL to CR.
    pub const INLCR: u32 = 0o100;
    /// Ignore CR.
    pub const IGNCR: u32 = 0o200;
    /// CR to NL.
    pub const ICRNL: u32 = 0o400;
    /// XON/XOFF output flow control.
    pub const IXON: u32 = 0o2000;
}
/// `c_oflag` bits.
pub mod oflag {
    /// Post-process output.
    pub const OPOST: u32 = 0o1;
    /// NL to CR NL.
    pub const ONLCR: u32 = 0o4;
}
/// `c_lflag` bits.
pub mod lflag {
    /// INTR, QUIT, SUSP characters are special.
    pub const ISIG: u32 = 0o1;
    /// Canonical mode.
    pub const ICANON: u32 = 0o2;
    /// Echo input.
    pub const ECHO: u32 = 0o10;
    /// Erase echoes as backspace-space-backspace.
    pub const ECHOE: u32 = 0o20;
    /// Echo NL after KILL.
    pub const ECHOK: u32 = 0o40;
    /// Echo NL even without ECHO.
    pub const ECHONL: u32 = 0o100;
    /// Echo control characters as ^X.
    pub const ECHOCTL: u32 = 0o1000;
    /// KILL erases the line visibly.
    pub const ECHOKE: u32 = 0o4000;
    /// Extensions (VWERASE, VLNEXT).
    pub const IEXTEN: u32 = 0o100_000;
}
/// Indices into `c_cc`.
pub mod cc {
    /// Interrupt (^C).
    pub const VINTR: usize = 0;
    /// Quit (^\).
    pub const VQUIT: usize = 1;
    /// Erase (DEL).
    pub const VERASE: usize = 2;
    /// Kill line (^U).
    pub const VKILL: usize = 3;
    /// End of file (^D).
    pub const VEOF: usize = 4;
    /// Timeout of a non-canonical read.
    pub const VTIME: usize = 5;
    /// Minimum bytes of a non-canonical read.
    pub const VMIN: usize = 6;
    /// Extra end of line.
    pub const VEOL: usize = 11;
    /// Word erase (^W).
    pub const VWERASE: usize = 14;
    /// Second extra end of line.
    pub const VEOL2: usize = 16;
}

/// `NCCS` of the kernel's `struct termios` (asm-generic).
pub const NCCS: usize = 19;
/// `sizeof(struct termios)` as `TCGETS` copies it: four flags, the line, 19 control characters.
pub const TERMIOS_SIZE: usize = 36;

/// The kernel's `struct termios`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Termios {
    /// Input modes.
    pub iflag: u32,
    /// Output modes.
    pub oflag: u32,
    /// Control modes.
    pub cflag: u32,
    /// Local modes.
    pub lflag: u32,
    /// Line discipline number.
    pub line: u8,
    /// Control characters.
    pub cc: [u8; NCCS],
}

impl Default for Termios {
    /// Linux's `tty_std_termios` (B38400 CS8 CREAD HUPCL, ICRNL IXON, OPOST ONLCR, ISIG ICANON
    /// ECHO ECHOE ECHOK ECHOCTL ECHOKE IEXTEN) with `INIT_C_CC`.
    fn default() -> Self {
        use {iflag::*, lflag::*, oflag::*};
        Self {
            iflag: ICRNL | IXON,
            oflag: OPOST | ONLCR,
            cflag: 0o17 | 0o60 | 0o200 | 0o2000,
            lflag: ISIG | ICANON | ECHO | ECHOE | ECHOK | ECHOCTL | ECHOKE | IEXTEN,
            line: 0,
            cc: [3, 0x1c, 0x7f, 0x15, 4, 0, 1, 0, 0x11, 0x13, 0x1a, 0, 0x12, 0x0f, 0x17, 0x16, 0, 0, 0],
        }
    }
}

impl Termios {
    /// The 36 bytes `TCGETS` returns.
    pub fn to_bytes(&self) -> [u8; TERMIOS_SIZE] {
        let mut b = [0u8; TERMIOS_SIZE];
        for (i, v) in [self.iflag, self.oflag, self.cflag, self.lflag].into_iter().enumerate() {
            b[i * 4..i * 4 + 4].copy_from_slice(&v.to_le_bytes());
        }
        b[16] = self.line;
        b[17..].copy_from_slice(&self.cc);
        b
    }

    /// From the 36 bytes `TCSETS` passes.
    pub fn from_bytes(b: [u8; TERMIOS_SIZE]) -> Self {
        let f = |i: usize| u32::from_le_bytes([b[i * 4], b[i * 4 + 1], b[i * 4 + 2], b[i * 4 + 3]]);
        let mut cc = [0u8; NCCS];
        cc.copy_from_slice(&b[17..]);
        Self { iflag: f(0), oflag: f(1), cflag: f(2), lflag: f(3), line: b[16], cc }
    }

    /// Whether every local-mode bit of `l` is set.
    pub fn has(&self, l: u32) -> bool {
        self.lflag & l == l
    }

    /// Whether `c` is the enabled control character `index` (a `c_cc` of 0 is disabled).
    pub fn is(&self, c: u8, index: usize) -> bool {
        self.cc[index] != 0 && self.cc[index] == c
    }
}

/// `ioctl` requests on terminals (asm-generic `ioctls.h`).
pub mod ioctl {
    /// Get the termios.
    pub const TCGETS: u64 = 0x5401;
    /// Set the termios now.
    pub const TCSETS: u64 = 0x5402;
    /// Set the termios once output drained.
    pub const TCSETSW: u64 = 0x5403;
    /// Set the termios once output drained, flushing input.
    pub const TCSETSF: u64 = 0x5404;
    /// Suspend or restart output or input.
    pub const TCXONC: u64 = 0x540A;
    /// Flush input and/or output.
    pub const TCFLSH: u64 = 0x540B;
    /// Make this the controlling terminal.
    pub const TIOCSCTTY: u64 = 0x540E;
    /// Get the foreground process group.
    pub const TIOCGPGRP: u64 = 0x540F;
    /// Set the foreground process group.
    pub const TIOCSPGRP: u64 = 0x5410;
    /// Bytes waiting in the output queue.
    pub const TIOCOUTQ: u64 = 0x5411;
    /// Get the window size.
    pub const TIOCGWINSZ: u64 = 0x5413;
    /// Set the window size.
    pub const TIOCSWINSZ: u64 = 0x5414;
    /// Bytes waiting to be read (also `FIONREAD`).
    pub const TIOCINQ: u64 = 0x541B;
    /// Bytes waiting to be read.
    pub const FIONREAD: u64 = 0x541B;
    /// Set or clear non-blocking mode.
    pub const FIONBIO: u64 = 0x5421;
    /// Give up the controlling terminal.
    pub const TIOCNOTTY: u64 = 0x5422;
    /// Get the session of the terminal.
    pub const TIOCGSID: u64 = 0x5429;
    /// Clear close-on-exec.
    pub const FIONCLEX: u64 = 0x5450;
    /// Set close-on-exec.
    pub const FIOCLEX: u64 = 0x5451;
    /// Set or clear asynchronous mode.
    pub const FIOASYNC: u64 = 0x5452;
}
