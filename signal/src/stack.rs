//! The alternate signal stack (`sigaltstack`) and `stack_t` (24 bytes: `ss_sp`, `ss_flags` as an
//! `int` padded to 8, `ss_size`), with the rules of Linux's `do_sigaltstack`, `on_sig_stack`
//! and `sigsp` for a downward-growing stack.
use crate::{get_u32, get_u64, put_u32, put_u64};

/// Bytes of `stack_t`.
pub const STACK_T_SIZE: usize = 24;
pub use linux_abi::signal::{MINSIGSTKSZ, SS_AUTODISARM, SS_DISABLE, SS_ONSTACK};

/// A `stack_t` as the program gives or receives it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct StackT {
    /// `ss_sp`: the lowest address of the stack.
    pub sp: u64,
    /// `ss_flags`.
    pub flags: u32,
    /// `ss_size`.
    pub size: u64,
}

impl StackT {
    /// Decodes a user `stack_t`.
    pub fn from_bytes(b: &[u8; STACK_T_SIZE]) -> Self {
        Self { sp: get_u64(b, 0), flags: get_u32(b, 8), size: get_u64(b, 16) }
    }

    /// Encodes it (the padding after `ss_flags` is zero).
    pub fn to_bytes(&self) -> [u8; STACK_T_SIZE] {
        let mut b = [0u8; STACK_T_SIZE];
        put_u64(&mut b, 0, self.sp);
        put_u32(&mut b, 8, self.flags);
        put_u64(&mut b, 16, self.size);
        b
    }
}

/// Why `sigaltstack` refused a new stack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StackError {
    /// EPERM: the thread is running on the current alternate stack.
    OnStack,
    /// EINVAL: unknown `ss_flags`.
    BadFlags,
    /// ENOMEM: smaller than `MINSIGSTKSZ`.
    TooSmall,
}

/// A thread's alternate signal stack (size 0: none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AltStack {
    /// Lowest address.
    pub sp: u64,
    /// Size in bytes (0 = disabled).
    pub size: u64,
    /// The flags given (only `SS_AUTODISARM` is remembered).
    pub flags: u32,
}

impl AltStack {
    /// Whether a thread whose stack pointer is `sp` is running on this stack.
    pub fn on_stack(&self, sp: u64) -> bool {
        // With SS_AUTODISARM the stack is forgotten while in use, so being on it cannot be told.
        if self.flags & SS_AUTODISARM != 0 {
            return false;
        }
        sp > self.sp && sp - self.sp <= self.size
    }

    /// `ss_flags` as reported for a thread at `sp`: disabled, on the stack, or available.
    pub fn state(&self, sp: u64) -> u32 {
        if self.size == 0 {
            SS_DISABLE
        } else if self.on_stack(sp) {
            SS_ONSTACK
        } else {
            0
        }
    }

    /// The `stack_t` `sigaltstack` reports (and a signal frame saves) for a thread at `sp`.
    pub fn report(&self, sp: u64) -> StackT {
        StackT { sp: self.sp, flags: self.state(sp) | (self.flags & SS_AUTODISARM), size: self.size }
    }

    /// Installs `new` for a thread at `sp` (`do_sigaltstack`).
    ///
    /// # Errors
    /// [`StackError`] as Linux checks: on the stack, then flags, then size.
    pub fn set(&mut self, new: StackT, sp: u64) -> Result<(), StackError> {
        if self.on_stack(sp) {
            return Err(StackError::OnStack);
        }
        let mode = new.flags & !SS_AUTODISARM;
        if mode != 0 && mode != SS_ONSTACK && mode != SS_DISABLE {
            return Err(StackError::BadFlags);
        }
        if mode == SS_DISABLE {
            *self = Self { sp: 0, size: 0, flags: new.flags };
            return Ok(());
        }
        if new.size < MINSIGSTKSZ {
            return Err(StackError::TooSmall);
        }
        *self = Self { sp: new.sp, size: new.size, flags: new.flags };
        Ok(())
    }

    /// Where a signal frame goes for a thread at `sp` (`sigsp`): the top of the alternate stack
    /// when the action asks for it (`on_stack_wanted`, SA_ONSTACK) and the thread is not already
    /// on it, else `sp` itself.
    pub fn frame_top(&self, sp: u64, on_stack_wanted: bool) -> u64 {
        if on_stack_wanted && self.state(sp) == 0 { self.sp.wrapping_add(self.size) } else { sp }
    }

    /// What is left once a handler is entered on the stack with `SS_AUTODISARM`: no stack.
    pub fn after_entry(&self, switched: bool) -> Self {
        if switched && self.flags & SS_AUTODISARM != 0 { Self::default() } else { *self }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stack_t_layout() {
        let s = StackT { sp: 0x1000, flags: SS_ONSTACK, size: 0x4000 };
        let b = s.to_bytes();
        assert_eq!(&b[0..8], &0x1000u64.to_le_bytes());
        assert_eq!(&b[8..12], &1u32.to_le_bytes());
        assert_eq!(&b[12..16], &[0; 4]);
        assert_eq!(&b[16..24], &0x4000u64.to_le_bytes());
        assert_eq!(StackT::from_bytes(&b), s);
    }

    #[test]
    fn install_report_and_use() {
        let mut a = AltStack::default();
        assert_eq!(a.state(0x9000), SS_DISABLE);
        assert_eq!(a.set(StackT { sp: 0x10000, flags: 0, size: 100 }, 0x9000), Err(StackError::TooSmall));
        assert_eq!(a.set(StackT { sp: 0x10000, flags: 8, size: 0x4000 }, 0x9000), Err(StackError::BadFlags));
        assert_eq!(a.set(StackT { sp: 0x10000, flags: 0, size: 0x4000 }, 0x9000), Ok(()));
        assert_eq!(a.report(0x9000), StackT { sp: 0x10000, flags: 0, size: 0x4000 });
        // On the stack: (sp, sp + size], so the top itself counts and the base does not.
        assert!(a.on_stack(0x14000) && a.on_stack(0x10001) && !a.on_stack(0x10000));
        assert_eq!(a.report(0x12000).flags, SS_ONSTACK);
        assert_eq!(a.set(StackT { sp: 0, flags: SS_DISABLE, size: 0 }, 0x12000), Err(StackError::OnStack));
        assert_eq!(a.frame_top(0x9000, true), 0x14000);
        assert_eq!(a.frame_top(0x9000, false), 0x9000);
        assert_eq!(a.frame_top(0x12000, true), 0x12000); // nested: stays where it is
        assert_eq!(a.set(StackT { sp: 5, flags: SS_DISABLE, size: 7 }, 0x9000), Ok(()));
        assert_eq!(a.report(0).flags, SS_DISABLE);
        assert_eq!((a.sp, a.size), (0, 0));
    }

    #[test]
    fn autodisarm_forgets_the_stack_in_the_handler() {
        let mut a = AltStack::default();
        a.set(StackT { sp: 0x10000, flags: SS_AUTODISARM, size: 0x4000 }, 0).unwrap();
        assert_eq!(a.report(0).flags, SS_AUTODISARM);
        assert_eq!(a.after_entry(true), AltStack::default());
        assert_eq!(a.after_entry(false), a);
    }
}
