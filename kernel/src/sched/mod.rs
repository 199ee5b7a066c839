//! The scheduler: tasks queued, run, blocked and woken, on every CPU.
//!
//! One run queue shared by every CPU, round-robin with a 10 ms tick, and one list of blocked
//! tasks. The scheduler knows a thread only as a [`Task`], a trait the process layer
//! implements, so it sits below `process` and calls up only through that trait.
//! - [`task`]: the [`Task`] trait, and what a call asks of the scheduler when it is
//!   done ([`Action`], [`Wait`]);
//! - [`queue`]: the run queue and the wait list, admission (the thread limit), the wake-ups
//!   (kernel events, futex words, signals), parking a stopped group's threads and continuing
//!   them, and ending a whole thread group;
//! - [`switch`]: each CPU's loop, entering a task, and blocking, yielding or ending the current
//!   one;
//! - [`timer`]: deadlines that notify a kernel event (a timerfd's expiry).
pub mod queue;
pub mod switch;
pub mod task;
pub mod timer;

pub use queue::{
    admit, continue_group, event_generation, futex_requeue, futex_wake, futex_wake_op, interrupt, kick,
    live_threads, max_threads, notify, notify_poll, on_notify, should_preempt, stop_group,
};
pub use switch::{act, charge_current, cpus_running, current_slice, run_cpu, with_current};
pub use task::{Action, Rendezvous, Resumed, SHARED_FUTEX, Task, VectorWord, Wait, WaitFor};
