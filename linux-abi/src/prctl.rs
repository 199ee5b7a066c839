//! `prctl` options (`linux/prctl.h`) and `personality` values (`linux/personality.h`).

/// Set the parent-death signal.
pub const PR_SET_PDEATHSIG: u64 = 1;
/// Get the parent-death signal.
pub const PR_GET_PDEATHSIG: u64 = 2;
/// Get the dumpable flag.
pub const PR_GET_DUMPABLE: u64 = 3;
/// Set the dumpable flag.
pub const PR_SET_DUMPABLE: u64 = 4;
/// Keep capabilities across setuid.
pub const PR_GET_KEEPCAPS: u64 = 7;
/// Keep capabilities across setuid.
pub const PR_SET_KEEPCAPS: u64 = 8;
/// Set the thread's name (16 bytes with the terminator).
pub const PR_SET_NAME: u64 = 15;
/// Get the thread's name.
pub const PR_GET_NAME: u64 = 16;
/// Get the seccomp mode.
pub const PR_GET_SECCOMP: u64 = 21;
/// Set the seccomp mode.
pub const PR_SET_SECCOMP: u64 = 22;
/// Whether a capability is in the bounding set.
pub const PR_CAPBSET_READ: u64 = 23;
/// Get the timer slack.
pub const PR_GET_TIMERSLACK: u64 = 30;
/// Set the timer slack.
pub const PR_SET_TIMERSLACK: u64 = 29;
/// Disable transparent huge pages for the process.
pub const PR_SET_THP_DISABLE: u64 = 41;
/// Whether transparent huge pages are disabled.
pub const PR_GET_THP_DISABLE: u64 = 42;
/// Set the child-subreaper flag.
pub const PR_SET_CHILD_SUBREAPER: u64 = 36;
/// Get the child-subreaper flag.
pub const PR_GET_CHILD_SUBREAPER: u64 = 37;
/// Set no_new_privs.
pub const PR_SET_NO_NEW_PRIVS: u64 = 38;
/// Get no_new_privs.
pub const PR_GET_NO_NEW_PRIVS: u64 = 39;
/// Memory-map fields of the process (`PR_SET_MM_*` sub-options).
pub const PR_SET_MM: u64 = 35;
/// Ambient capabilities.
pub const PR_CAP_AMBIENT: u64 = 47;
/// arm64 SVE: set the vector length.
pub const PR_SVE_SET_VL: u64 = 50;
/// arm64 SVE: get the vector length.
pub const PR_SVE_GET_VL: u64 = 51;
/// Speculation-control state.
pub const PR_GET_SPECULATION_CTRL: u64 = 52;
/// arm64: reset pointer-authentication keys.
pub const PR_PAC_RESET_KEYS: u64 = 54;
/// arm64: the tagged-address ABI and MTE control.
pub const PR_SET_TAGGED_ADDR_CTRL: u64 = 55;
/// arm64: read the tagged-address ABI and MTE control.
pub const PR_GET_TAGGED_ADDR_CTRL: u64 = 56;
/// arm64: enable or disable pointer-authentication keys.
pub const PR_PAC_SET_ENABLED_KEYS: u64 = 60;
/// arm64: which pointer-authentication keys are enabled.
pub const PR_PAC_GET_ENABLED_KEYS: u64 = 61;
/// Name an anonymous memory range (with `PR_SET_VMA_ANON_NAME`).
pub const PR_SET_VMA: u64 = 0x5356_4d41;
/// `PR_SET_VMA` sub-option: the name shown as `[anon:NAME]`.
pub const PR_SET_VMA_ANON_NAME: u64 = 0;
/// Memory-deny-write-execute (Linux 6.3).
pub const PR_SET_MDWE: u64 = 65;
/// Memory-deny-write-execute state (Linux 6.3).
pub const PR_GET_MDWE: u64 = 66;
/// `PR_SET_MDWE`: refuse writable-and-executable and making writable memory executable.
pub const PR_MDWE_REFUSE_EXEC_GAIN: u64 = 1;
/// `PR_SET_MDWE`: not inherited by children (Linux 6.6).
pub const PR_MDWE_NO_INHERIT: u64 = 2;
/// `PR_SET_TAGGED_ADDR_CTRL`: accept tagged pointers in system calls.
pub const PR_TAGGED_ADDR_ENABLE: u64 = 1;
/// `PR_SET_TAGGED_ADDR_CTRL`: MTE tag-check faults are ignored.
pub const PR_MTE_TCF_NONE: u64 = 0;
/// `PR_SET_TAGGED_ADDR_CTRL`: MTE tag-check faults are synchronous.
pub const PR_MTE_TCF_SYNC: u64 = 1 << 1;
/// `PR_SET_TAGGED_ADDR_CTRL`: MTE tag-check faults are asynchronous.
pub const PR_MTE_TCF_ASYNC: u64 = 1 << 2;
/// `PR_SET_TAGGED_ADDR_CTRL`: the MTE tag-check fault mode mask.
pub const PR_MTE_TCF_MASK: u64 = PR_MTE_TCF_SYNC | PR_MTE_TCF_ASYNC;
/// `PR_SET_TAGGED_ADDR_CTRL`: shift of the MTE tag-inclusion mask.
pub const PR_MTE_TAG_SHIFT: u64 = 3;
/// `PR_SET_TAGGED_ADDR_CTRL`: the MTE tag-inclusion mask (16 bits).
pub const PR_MTE_TAG_MASK: u64 = 0xffff << PR_MTE_TAG_SHIFT;
/// `PR_PAC_RESET_KEYS` and friends: instruction key A.
pub const PR_PAC_APIAKEY: u64 = 1 << 0;
/// Instruction key B.
pub const PR_PAC_APIBKEY: u64 = 1 << 1;
/// Data key A.
pub const PR_PAC_APDAKEY: u64 = 1 << 2;
/// Data key B.
pub const PR_PAC_APDBKEY: u64 = 1 << 3;
/// Generic key.
pub const PR_PAC_APGAKEY: u64 = 1 << 4;

/// `personality`: the query value (no change).
pub const PERSONALITY_QUERY: u64 = 0xffff_ffff;
/// `personality`: Linux.
pub const PER_LINUX: u64 = 0;
/// `personality` flag: disable address-space randomisation.
pub const ADDR_NO_RANDOMIZE: u64 = 0x0004_0000;
/// `personality` flag: `PROT_READ` implies `PROT_EXEC`.
pub const READ_IMPLIES_EXEC: u64 = 0x0040_0000;
