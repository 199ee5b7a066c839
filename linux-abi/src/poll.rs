//! Readiness: `poll` events (asm-generic `poll.h`), `epoll` (`linux/eventpoll.h`) and the flags of
//! the descriptors an event loop waits on: `eventfd`, `timerfd`, `signalfd`, `pidfd`.

/// There is data to read.
pub const POLLIN: u16 = 0x001;
/// There is urgent data to read.
pub const POLLPRI: u16 = 0x002;
/// Writing will not block.
pub const POLLOUT: u16 = 0x004;
/// An error condition (output only).
pub const POLLERR: u16 = 0x008;
/// Hang up (output only).
pub const POLLHUP: u16 = 0x010;
/// Invalid descriptor (output only).
pub const POLLNVAL: u16 = 0x020;
/// Normal data may be read.
pub const POLLRDNORM: u16 = 0x040;
/// Priority band data may be read.
pub const POLLRDBAND: u16 = 0x080;
/// Normal data may be written.
pub const POLLWRNORM: u16 = 0x100;
/// Priority data may be written.
pub const POLLWRBAND: u16 = 0x200;
/// The peer closed its writing side (sockets).
pub const POLLRDHUP: u16 = 0x2000;

/// `epoll_ctl`: add a descriptor.
pub const EPOLL_CTL_ADD: u64 = 1;
/// `epoll_ctl`: remove a descriptor.
pub const EPOLL_CTL_DEL: u64 = 2;
/// `epoll_ctl`: change a descriptor's events.
pub const EPOLL_CTL_MOD: u64 = 3;
/// `epoll_create1`: close on exec.
pub const EPOLL_CLOEXEC: u64 = 0o2000000;
/// `epoll` event: readable.
pub const EPOLLIN: u32 = 0x001;
/// `epoll` event: urgent data.
pub const EPOLLPRI: u32 = 0x002;
/// `epoll` event: writable.
pub const EPOLLOUT: u32 = 0x004;
/// `epoll` event: error.
pub const EPOLLERR: u32 = 0x008;
/// `epoll` event: hang up.
pub const EPOLLHUP: u32 = 0x010;
/// `epoll` event: invalid request.
pub const EPOLLNVAL: u32 = 0x020;
/// `epoll` event: normal data readable.
pub const EPOLLRDNORM: u32 = 0x040;
/// `epoll` event: priority data readable.
pub const EPOLLRDBAND: u32 = 0x080;
/// `epoll` event: normal data writable.
pub const EPOLLWRNORM: u32 = 0x100;
/// `epoll` event: priority data writable.
pub const EPOLLWRBAND: u32 = 0x200;
/// `epoll` event: message available (unused).
pub const EPOLLMSG: u32 = 0x400;
/// `epoll` event: the peer closed its writing side.
pub const EPOLLRDHUP: u32 = 0x2000;
/// `epoll` flag: wake only one of the epolls watching the descriptor.
pub const EPOLLEXCLUSIVE: u32 = 1 << 28;
/// `epoll` flag: keep the system awake (needs a capability; ignored without it).
pub const EPOLLWAKEUP: u32 = 1 << 29;
/// `epoll` flag: report once, then disable until re-armed with `EPOLL_CTL_MOD`.
pub const EPOLLONESHOT: u32 = 1 << 30;
/// `epoll` flag: edge triggered.
pub const EPOLLET: u32 = 1 << 31;

/// `eventfd2`: semaphore semantics.
pub const EFD_SEMAPHORE: u64 = 0o1;
/// `eventfd2`: close on exec.
pub const EFD_CLOEXEC: u64 = 0o2000000;
/// `eventfd2`: non-blocking.
pub const EFD_NONBLOCK: u64 = 0o4000;
/// `timerfd_create`: close on exec.
pub const TFD_CLOEXEC: u64 = 0o2000000;
/// `timerfd_create`: non-blocking.
pub const TFD_NONBLOCK: u64 = 0o4000;
/// `timerfd_settime`: absolute expiry.
pub const TFD_TIMER_ABSTIME: u64 = 1 << 0;
/// `timerfd_settime`: cancel on a change of CLOCK_REALTIME.
pub const TFD_TIMER_CANCEL_ON_SET: u64 = 1 << 1;
/// `signalfd4`: close on exec.
pub const SFD_CLOEXEC: u64 = 0o2000000;
/// `signalfd4`: non-blocking.
pub const SFD_NONBLOCK: u64 = 0o4000;
/// `pidfd_open`: non-blocking (`waitid` does not block).
pub const PIDFD_NONBLOCK: u64 = 0o4000;
