//! Readiness: what each kind of open file is ready for now (the console's line discipline, a
//! pipe end's buffer and ends), as `poll`, `select` and the event loops ask it.
use linux_abi::poll;

use super::file::{FileKind, OpenFile};

/// What the console is ready for now (POLLIN when a read would return, POLLOUT always).
fn console_ready() -> u16 {
    crate::fs::tty::poll_input();
    let input = if crate::fs::tty::readable() { poll::POLLIN | poll::POLLRDNORM } else { 0 };
    input | poll::POLLOUT | poll::POLLWRNORM
}

/// What `f` is ready for now: the console's state, or a pipe end's (`POLLHUP` for a read end
/// whose writers are gone, `POLLERR` for a write end whose readers are).
pub fn ready_of(f: &OpenFile) -> u16 {
    match &f.kind {
        FileKind::Console => console_ready(),
        // A regular file is always ready, as Linux's poll says for files without a poll method.
        FileKind::Text(_) => poll::POLLIN | poll::POLLRDNORM | poll::POLLOUT | poll::POLLWRNORM,
        FileKind::Pipe(end) => {
            let (readable, writable) = crate::fs::pipe::ready(end);
            let mut r = 0;
            if readable {
                r |= poll::POLLIN | poll::POLLRDNORM;
            }
            if writable {
                r |= poll::POLLOUT | poll::POLLWRNORM;
            }
            r | crate::fs::pipe::hangup(end)
        }
        // A regular file is always ready (Linux's DEFAULT_POLLMASK).
        FileKind::Memfd(_) => poll::POLLIN | poll::POLLRDNORM | poll::POLLOUT | poll::POLLWRNORM,
    }
}
