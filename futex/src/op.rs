//! The futex system call's encoded arguments: the operation word (command and flags) and
//! `FUTEX_WAKE_OP`'s packed operation (Linux `kernel/futex/syscalls.c` and `futex_atomic_op_inuser`).
//! The numbers themselves are Linux's, defined once in `linux_abi::futex`.
use linux_abi::futex::{FUTEX_CLOCK_REALTIME, FUTEX_PRIVATE_FLAG, FUTEX_WAIT_BITSET};

/// A decoded `futex_op` argument.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Op {
    /// The command (`FUTEX_WAIT`, ...).
    pub cmd: u32,
    /// `FUTEX_PRIVATE_FLAG` was set.
    pub private: bool,
    /// `FUTEX_CLOCK_REALTIME` was set.
    pub realtime: bool,
}

impl Op {
    /// Splits `op` into command and flags.
    pub fn decode(op: u32) -> Self {
        Self {
            cmd: op & !(FUTEX_PRIVATE_FLAG | FUTEX_CLOCK_REALTIME),
            private: op & FUTEX_PRIVATE_FLAG != 0,
            realtime: op & FUTEX_CLOCK_REALTIME != 0,
        }
    }

    /// Linux's first check (`do_futex`): FUTEX_CLOCK_REALTIME only with the commands that take an
    /// absolute timeout (FUTEX_WAIT_BITSET here), else ENOSYS.
    pub fn clock_allowed(&self) -> bool {
        !self.realtime || self.cmd == FUTEX_WAIT_BITSET
    }

    /// Whether the command's timeout is absolute (the bitset wait) rather than relative.
    pub fn absolute_timeout(&self) -> bool {
        self.cmd == FUTEX_WAIT_BITSET
    }
}

/// `FUTEX_WAKE_OP`'s encoded operation (`val3`): what to do to the second word, and the test of
/// its old value that decides whether its waiters are woken too.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct WakeOp {
    op: u32,
    cmp: u32,
    oparg: u32,
    cmparg: i32,
}

fn sign_extend_12(v: u32) -> i32 {
    ((v << 20) as i32) >> 20
}

impl WakeOp {
    /// Decodes `val3`: bits 28..30 the operation (SET, ADD, OR, ANDN, XOR), bit 31 "the argument is
    /// a shift count", 24..27 the comparison (EQ, NE, LT, LE, GT, GE), 12..23 the operation's
    /// argument and 0..11 the comparison's (both signed 12-bit). `None`: an operation or a
    /// comparison Linux does not know (it answers ENOSYS).
    pub fn decode(val3: u32) -> Option<Self> {
        let op = (val3 >> 28) & 7;
        let cmp = (val3 >> 24) & 15;
        let mut oparg = sign_extend_12((val3 >> 12) & 0xfff) as u32;
        let cmparg = sign_extend_12(val3 & 0xfff);
        if val3 & (1 << 31) != 0 {
            // Linux warns about a shift outside 0..31 and uses it masked.
            oparg = 1u32 << (oparg & 31);
        }
        (op <= 4 && cmp <= 5).then_some(Self { op, cmp, oparg, cmparg })
    }

    /// The new value of the second word, from its old value.
    pub fn apply(&self, old: u32) -> u32 {
        match self.op {
            0 => self.oparg,
            1 => old.wrapping_add(self.oparg),
            2 => old | self.oparg,
            3 => old & !self.oparg,
            _ => old ^ self.oparg,
        }
    }

    /// Whether the old value passes the comparison (signed, as Linux compares `int`s).
    pub fn test(&self, old: u32) -> bool {
        let old = old as i32;
        match self.cmp {
            0 => old == self.cmparg,
            1 => old != self.cmparg,
            2 => old < self.cmparg,
            3 => old <= self.cmparg,
            4 => old > self.cmparg,
            _ => old >= self.cmparg,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use linux_abi::futex::FUTEX_WAIT;
    #[test]
    fn the_op_word_splits_into_command_and_flags() {
        assert_eq!(Op::decode(0x109), Op { cmd: FUTEX_WAIT_BITSET, private: false, realtime: true });
        assert_eq!(Op::decode(0x189), Op { cmd: FUTEX_WAIT_BITSET, private: true, realtime: true });
        assert_eq!(Op::decode(128), Op { cmd: FUTEX_WAIT, private: true, realtime: false });
        assert!(Op::decode(0x109).clock_allowed());
        assert!(!Op::decode(0x100).clock_allowed()); // FUTEX_WAIT | FUTEX_CLOCK_REALTIME: ENOSYS
        assert!(Op::decode(0x109).absolute_timeout() && !Op::decode(0).absolute_timeout());
    }

    #[test]
    fn wake_op_decodes_like_the_futex_op_macro() {
        // FUTEX_OP(op, oparg, cmp, cmparg) = (op << 28) | (cmp << 24) | (oparg << 12) | cmparg
        let enc = |op: u32, oparg: u32, cmp: u32, cmparg: u32| {
            (op << 28) | (cmp << 24) | ((oparg & 0xfff) << 12) | (cmparg & 0xfff)
        };
        let add = WakeOp::decode(enc(1, 5, 4, 0)).unwrap(); // ADD 5, wake if old > 0
        assert_eq!(add.apply(10), 15);
        assert!(add.test(1) && !add.test(0) && !add.test(u32::MAX)); // -1 > 0 is false (signed)
        let set = WakeOp::decode(enc(0, 0xfff, 0, 0xfff)).unwrap(); // SET -1, wake if old == -1
        assert_eq!(set.apply(7), u32::MAX);
        assert!(set.test(u32::MAX) && !set.test(0xfff));
        assert_eq!(WakeOp::decode(enc(2, 0b100, 1, 3)).unwrap().apply(0b001), 0b101); // OR
        assert_eq!(WakeOp::decode(enc(3, 0b100, 1, 3)).unwrap().apply(0b111), 0b011); // ANDN
        assert_eq!(WakeOp::decode(enc(4, 0b110, 1, 3)).unwrap().apply(0b011), 0b101); // XOR
        let shift = WakeOp::decode((8 << 28) | enc(0, 4, 2, 0)).unwrap(); // SET 1 << 4, wake if old < 0
        assert_eq!(shift.apply(0), 16);
        assert!(shift.test(u32::MAX) && !shift.test(0));
        let le = WakeOp::decode(enc(0, 0, 3, 2)).unwrap();
        assert!(le.test(2) && !le.test(3));
        let ge = WakeOp::decode(enc(0, 0, 5, 2)).unwrap();
        assert!(ge.test(2) && !ge.test(1));
    }

    #[test]
    fn unknown_wake_op_operations_and_comparisons_are_refused() {
        assert_eq!(WakeOp::decode(5 << 28), None);
        assert_eq!(WakeOp::decode(6 << 24), None);
    }
}
