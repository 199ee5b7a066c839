//! The event objects give back everything they take: an epoll's items leave the watch table when
//! their file's last reference goes or the epoll closes, a timerfd's wake-up timer leaves the
//! timer list, and a second run of the same scenario ends with the heap exactly where it began
//! (the first run may leave room behind in the tables, which keep their capacity).
use alloc::string::String;
use alloc::sync::Arc;

use linux_abi::Errno;
use linux_abi::fcntl::O_RDWR;
use linux_abi::poll::{EPOLL_CTL_ADD, EPOLL_CTL_DEL, EPOLL_CTL_MOD, EPOLLIN, EPOLLONESHOT, POLLIN};
use spin::Mutex;

use crate::fs::epoll;
use crate::fs::file::{FdTable, OpenFile};
use crate::fs::timerfd::{Setting, TimerFd};
use crate::{ensure, ensure_eq, kernel_test};

fn err(e: Errno) -> String {
    alloc::format!("{e:?}")
}

fn new_epoll() -> Result<Arc<OpenFile>, String> {
    Ok(Arc::new(OpenFile::new(epoll::create().map_err(err)?, O_RDWR)))
}

fn readable(f: &OpenFile) -> bool {
    f.file.poll().0 & POLLIN != 0
}

/// An eventfd watched by an epoll, that epoll watched by another, a timerfd; everything closed.
fn scenario() -> Result<(), String> {
    let watched = epoll::watched();
    let timers = crate::sched::timer::registered();
    let mut table = FdTable::default();
    table.set_limit(16);
    let files = Mutex::new(table);
    // An eventfd with a count of 1 is readable; the epoll watching it says so.
    let efd = crate::fs::eventfd::eventfd2(&files, 1, 0).map_err(err)?;
    let counter = files.lock().file(efd).map_err(err)?;
    let inner = new_epoll()?;
    ensure!(!readable(&inner), "an empty epoll is not readable");
    epoll::ctl(&inner, EPOLL_CTL_ADD, &counter, efd, (EPOLLIN, 7)).map_err(err)?;
    ensure_eq!(epoll::watched(), watched + 1);
    ensure!(readable(&inner), "an epoll with a readable eventfd is readable");
    ensure_eq!(epoll::ctl(&inner, EPOLL_CTL_ADD, &counter, efd, (EPOLLIN, 7)), Err(Errno::EEXIST));
    // A one-shot item is still ready until it is reported (reading is epoll_wait's, not poll's).
    epoll::ctl(&inner, EPOLL_CTL_MOD, &counter, efd, (EPOLLIN | EPOLLONESHOT, 8)).map_err(err)?;
    ensure!(readable(&inner), "still readable after EPOLL_CTL_MOD");
    // Nesting: the outer epoll sees the inner one ready; the reverse addition is a loop.
    let outer = new_epoll()?;
    epoll::ctl(&outer, EPOLL_CTL_ADD, &inner, 100, (EPOLLIN, 1)).map_err(err)?;
    ensure!(readable(&outer), "the outer epoll sees the inner one's readiness");
    ensure_eq!(epoll::ctl(&inner, EPOLL_CTL_ADD, &outer, 101, (EPOLLIN, 2)), Err(Errno::ELOOP));
    ensure_eq!(epoll::ctl(&inner, EPOLL_CTL_ADD, &inner, 102, (EPOLLIN, 2)), Err(Errno::EINVAL));
    // A timerfd armed 200 ms ahead is readable once that passed (its readiness is the clock's);
    // 200 ms, so that a host that stalls the virtual CPU does not expire it before the first look.
    let tfd = crate::fs::timerfd::create(&files, false, 0).map_err(err)?;
    ensure_eq!(crate::sched::timer::registered(), timers + 1);
    let timer = files.lock().file(tfd).map_err(err)?;
    let old = timer.file_as::<TimerFd>().map(|t| t.set(false, Setting { value: 200_000_000, interval: 0 }));
    ensure_eq!(old, Some(Setting::default()));
    ensure!(!readable(&timer), "not expired yet");
    let start = crate::arch::time::counter();
    while !readable(&timer) && crate::arch::time::counter() - start < 3 * crate::arch::time::frequency() {}
    ensure!(readable(&timer), "expired after 200 ms");
    epoll::ctl(&outer, EPOLL_CTL_ADD, &timer, tfd, (EPOLLIN, 3)).map_err(err)?;
    ensure_eq!(epoll::watched(), watched + 3);
    // The eventfd's last reference goes: its item leaves the inner epoll.
    drop(counter);
    drop(files.lock().close(efd).map_err(err)?);
    ensure_eq!(epoll::watched(), watched + 2);
    ensure!(!readable(&inner), "the inner epoll watches nothing ready any more");
    epoll::ctl(&outer, EPOLL_CTL_DEL, &inner, 100, (0, 0)).map_err(err)?;
    ensure_eq!(epoll::watched(), watched + 1);
    // Closing the epoll takes its items out; closing the timerfd gives its timer back.
    drop(outer);
    ensure_eq!(epoll::watched(), watched);
    drop(timer);
    drop(core::mem::take(&mut *files.lock()));
    ensure_eq!(crate::sched::timer::registered(), timers);
    drop(inner);
    Ok(())
}

kernel_test!(
    fn epoll_eventfd_and_timerfd_leave_nothing_behind() {
        scenario()?;
        let before = crate::memory::heap::usage().used;
        scenario()?;
        ensure_eq!(crate::memory::heap::usage().used, before, "heap bytes after a second run");
        Ok(())
    }
);
