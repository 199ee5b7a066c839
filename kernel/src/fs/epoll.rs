//! epoll, after Linux's fs/eventpoll.c: an epoll instance is a [`File`] holding a set of
//! *items*, one per (open file description, descriptor number) added with `EPOLL_CTL_ADD`, and a
//! *ready list* of the items that may be ready. `epoll_wait` looks only at the ready list; the
//! descriptors that nothing happened to are never polled, however many there are.
//!
//! **How an item becomes ready.** Each item records the kernel-event key of its file (the key
//! the file's `poll` names: a pipe's, a timerfd's, the console's input). Every
//! `sched::notify_poll(key, mask)` runs [`readiness`] first (registered with `sched::on_notify`),
//! which looks the key up in a hashed table of the items watching it ([`WATCHES`]) and puts each
//! item whose events meet `mask` on its epoll's ready list, as Linux's `ep_poll_callback` does
//! with the wake-up's poll key: a pipe's read announces `POLLOUT` (room), its write `POLLIN`
//! (data), so a reader's read is no new edge for an edge-triggered reader. An epoll with such an
//! item is notified in turn (its own key, `POLLIN`): that wakes the threads blocked in its
//! `epoll_wait`, and the epolls that watch it (nesting). Adding or changing an item polls its
//! file once and queues it if it is ready.
//!
//! **What `epoll_wait` reports.** It takes items from the front of the ready list and polls each
//! file: an item not ready now leaves the list; a ready one is reported with its readiness
//! limited to what it asked for (`EPOLLERR` and `EPOLLHUP` always). Then a level-triggered item
//! goes to the back of the list (it is looked at again next time, and the items behind it come
//! first: round robin when `maxevents` is small), an edge-triggered one leaves it until the
//! next event on its key, and an `EPOLLONESHOT` one is disarmed until `EPOLL_CTL_MOD`.
//!
//! **Lifetime.** An item holds its file weakly; the open file description lists the items that
//! watch it ([`Watchers`], Linux's `file->f_ep`), and its last reference going (the last
//! descriptor closed) removes them from their epolls ([`released`], Linux's
//! `eventpoll_release`). Closing the epoll removes its items from the table. Nothing is left
//! behind and nothing points at a freed file.
//!
//! **Locks.** Three kinds, always taken in this order: a description's [`Watchers`], a bucket of
//! [`WATCHES`], an epoll's item set. Nothing else is called while one is held: a file's `poll`
//! may notify (the console's drains its input), and dropping the last reference to a
//! description runs [`released`], so both happen with no epoll lock held. The table's room and
//! the ready list's room are made when an item is added (`ENOMEM` there), so [`readiness`],
//! which may run in an interrupt handler, never allocates.
use alloc::collections::VecDeque;
use alloc::sync::{Arc, Weak};
use alloc::vec::Vec;
use core::any::Any;
use core::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, AtomicUsize, Ordering};

use linux_abi::Errno;
use linux_abi::layout::Stat;
use linux_abi::poll::{
    EPOLL_CTL_ADD, EPOLL_CTL_DEL, EPOLL_CTL_MOD, EPOLLERR, EPOLLET, EPOLLEXCLUSIVE, EPOLLHUP, EPOLLIN,
    EPOLLONESHOT, EPOLLOUT, EPOLLWAKEUP, POLLIN, POLLRDNORM,
};
use spin::Mutex;

use super::file::{File, OpenFile};
use crate::memory::fallible;
use crate::memory::uaccess::copy_out;

/// The flags that are not events (Linux's `EP_PRIVATE_BITS`): what a disarmed one-shot item keeps.
const PRIVATE_BITS: u32 = EPOLLWAKEUP | EPOLLONESHOT | EPOLLET | EPOLLEXCLUSIVE;
/// What an `EPOLLEXCLUSIVE` item may ask for besides (Linux's `EPOLLEXCLUSIVE_OK_BITS`).
const EXCLUSIVE_OK_BITS: u32 =
    EPOLLIN | EPOLLOUT | EPOLLERR | EPOLLHUP | EPOLLWAKEUP | EPOLLET | EPOLLEXCLUSIVE;
/// How deep epolls may nest (Linux's `EP_MAX_NESTS`).
const MAX_NESTS: usize = 4;
/// `sizeof(struct epoll_event)` on arm64 (not packed there: `events`, 4 bytes of padding, `data`).
pub const EVENT_SIZE: u64 = 16;
/// The most events one `epoll_wait` may ask for (Linux's `EP_MAX_EVENTS`).
pub const MAX_EVENTS: u64 = (i32::MAX as u64) / EVENT_SIZE;

/// One watched (description, descriptor) of one epoll.
pub struct Item {
    /// The description watched.
    file: Weak<OpenFile>,
    /// Its address: with `fd`, what `EPOLL_CTL_MOD`/`DEL` name.
    desc: usize,
    fd: u64,
    /// The kernel-event key its file's `poll` names.
    key: usize,
    /// Whether the file is an epoll (the loop check follows these).
    nested: bool,
    /// The epoll it belongs to.
    epoll: Weak<Shared>,
    /// What it asks for, with `EPOLLERR | EPOLLHUP` and the flags; only the flags once a
    /// one-shot item has fired. Changed under the epoll's lock.
    events: AtomicU32,
    /// The caller's 64 bits, given back with each event.
    data: AtomicU64,
    /// On the ready list (under the epoll's lock).
    queued: AtomicBool,
    /// Removed from its epoll (under the epoll's lock): never queued again.
    removed: AtomicBool,
}

/// The items watching one open file description (Linux's `file->f_ep`), for [`released`].
#[derive(Default)]
pub struct Watchers(Mutex<Vec<Weak<Item>>>);

/// An epoll's state, shared by the instance (the [`Epoll`] file) and its items' back links.
pub struct Shared {
    inner: Mutex<Inner>,
}

struct Inner {
    /// Every item, in the order added.
    items: Vec<Arc<Item>>,
    /// The items that may be ready, each once; room for every item is kept.
    ready: VecDeque<Arc<Item>>,
}

/// An epoll instance (`epoll_create1`).
pub struct Epoll {
    shared: Arc<Shared>,
}

/// Items in [`WATCHES`] (0: every kernel event's hook returns at once).
static WATCHED: AtomicUsize = AtomicUsize::new(0);
/// Buckets of [`WATCHES`].
const BUCKETS: usize = 64;
/// Every item, by its file's event key (hashed into [`BUCKETS`] lists).
static WATCHES: [Mutex<Bucket>; BUCKETS] =
    [const { Mutex::new(Bucket { items: Vec::new(), changes: 0 }) }; BUCKETS];

/// One bucket of [`WATCHES`].
struct Bucket {
    items: Vec<Arc<Item>>,
    /// Counts the changes of `items`, so a walk resumed after dropping the lock knows whether
    /// its place is still good.
    changes: u64,
}
/// Serialises the additions of an epoll to an epoll, so no two can close a loop together
/// (Linux's `epmutex`).
static NESTING: Mutex<()> = Mutex::new(());

#[cfg_attr(not(feature = "test-image"), expect(dead_code, reason = "the test image checks it"))]
/// Items watching a file now, every epoll together (the test image checks they all go).
pub fn watched() -> usize {
    WATCHED.load(Ordering::Acquire)
}

fn bucket(key: usize) -> &'static Mutex<Bucket> {
    // Keys are addresses with a tag in the low bits: mix in the bits above the allocation's
    // alignment.
    let h = (key >> 3) ^ (key >> 11) ^ (key >> 19);
    &WATCHES[h % BUCKETS]
}

impl Shared {
    /// The kernel-event key of this epoll: its readiness changes, and its waiters wake, on it.
    fn key(self: &Arc<Self>) -> usize {
        Arc::as_ptr(self) as usize | 1
    }

    /// Puts `item` on the ready list unless it is there or removed; whether it was put there.
    /// Never allocates: the list has room for every item.
    fn queue(&self, item: &Arc<Item>) -> bool {
        let mut inner = self.inner.lock();
        if item.removed.load(Ordering::Relaxed) || item.queued.load(Ordering::Relaxed) {
            return false;
        }
        item.queued.store(true, Ordering::Relaxed);
        inner.ready.push_back(item.clone());
        true
    }

    /// Takes `item` out of the set and the ready list, once: true for the caller that did, which
    /// then takes it out of [`WATCHES`].
    fn unlink(&self, item: &Arc<Item>) -> bool {
        let mut inner = self.inner.lock();
        if item.removed.swap(true, Ordering::Relaxed) {
            return false;
        }
        inner.items.retain(|i| !Arc::ptr_eq(i, item));
        if item.queued.swap(false, Ordering::Relaxed) {
            inner.ready.retain(|i| !Arc::ptr_eq(i, item));
        }
        true
    }

    /// The item for (`desc`, `fd`), if any.
    fn find(&self, desc: usize, fd: u64) -> Option<Arc<Item>> {
        self.inner.lock().items.iter().find(|i| i.desc == desc && i.fd == fd).cloned()
    }

    /// Whether adding `to` under this epoll would close a loop or nest deeper than
    /// [`MAX_NESTS`] (Linux's `ep_loop_check`): a walk down `to`'s nested epolls.
    fn loops(self: &Arc<Self>, to: &Arc<Shared>, depth: usize) -> bool {
        let count = to.inner.lock().items.len();
        for i in 0..count {
            let Some(item) = to.inner.lock().items.get(i).cloned() else { break };
            if !item.nested {
                continue;
            }
            let Some(file) = item.file.upgrade() else { continue };
            let below = file.file_as::<Epoll>().map(|e| e.shared.clone());
            drop(file); // with no epoll lock held: it may be the last reference
            let Some(below) = below else { continue };
            if Arc::ptr_eq(&below, self) || depth > MAX_NESTS || self.loops(&below, depth + 1) {
                return true;
            }
        }
        false
    }
}

impl Item {
    /// Its file's readiness now, limited to what it asks for (0 when disarmed or the file is
    /// gone). Called with no epoll lock held.
    fn ready_now(&self) -> u32 {
        let events = self.events.load(Ordering::Acquire);
        if events & !PRIVATE_BITS == 0 {
            return 0;
        }
        let Some(file) = self.file.upgrade() else { return 0 };
        let mask = file.file.poll().0;
        drop(file);
        u32::from(mask) & events & !PRIVATE_BITS
    }
}

/// What every kernel event runs first (`sched::on_notify`): the items watching `key` whose
/// events meet `mask` go on their epolls' ready lists, and each of those epolls is notified,
/// whether its item was on the list already or not, as Linux's `ep_poll_callback` wakes its
/// waiters either way: a nested epoll may have looked at the item and found it not ready yet
/// (module documentation). Allocates nothing.
fn readiness(key: usize, mask: u16) {
    if WATCHED.load(Ordering::Acquire) == 0 {
        return;
    }
    // The bucket is walked in passes that each collect a few epolls to notify (rarely more
    // than one), notified with the lock dropped; the next pass resumes where the last stopped,
    // or starts again if the bucket changed meanwhile (notifying an epoll twice is harmless).
    let mut at = 0;
    let mut seen = None;
    loop {
        let mut gained: [Option<Arc<Shared>>; 8] = Default::default();
        let mut n = 0;
        let done = {
            let watches = bucket(key).lock();
            if seen.is_some_and(|c| c != watches.changes) {
                at = 0;
            }
            seen = Some(watches.changes);
            while at < watches.items.len() && n < gained.len() {
                let item = &watches.items[at];
                at += 1;
                if item.key != key
                    || u32::from(mask) & item.events.load(Ordering::Acquire) & !PRIVATE_BITS == 0
                {
                    continue;
                }
                let Some(ep) = item.epoll.upgrade() else { continue };
                ep.queue(item);
                if !item.removed.load(Ordering::Relaxed)
                    && !gained[..n].iter().flatten().any(|g| Arc::ptr_eq(g, &ep))
                {
                    gained[n] = Some(ep);
                    n += 1;
                }
            }
            at >= watches.items.len()
        };
        for ep in gained.iter().flatten() {
            crate::sched::notify_poll(ep.key(), POLLIN | POLLRDNORM);
        }
        if done {
            return;
        }
    }
}

/// `epoll_create1`: a new, empty epoll.
///
/// # Errors
/// `ENOMEM`.
pub fn create() -> Result<Arc<dyn File>, Errno> {
    crate::sched::on_notify(readiness);
    let shared =
        fallible::arc(Shared { inner: Mutex::new(Inner { items: Vec::new(), ready: VecDeque::new() }) })
            .map_err(|_| Errno::ENOMEM)?;
    Ok(fallible::arc(Epoll { shared }).map_err(|_| Errno::ENOMEM)?)
}

/// `epoll_ctl(epfd, op, fd, event)` with both descriptions looked up (`EBADF` is the caller's):
/// Linux's checks in Linux's order, then the operation. `event` is `(events, data)`, read by the
/// caller for every operation but `EPOLL_CTL_DEL`.
///
/// # Errors
/// `EPERM` (a file that cannot be polled: its `poll` names no event key, as a regular file's),
/// `EINVAL` (not an epoll, itself, a bad `EPOLLEXCLUSIVE`, an unknown operation), `ELOOP`,
/// `EEXIST`, `ENOENT`, `ENOMEM`.
pub fn ctl(
    epoll: &Arc<OpenFile>,
    op: u64,
    target: &Arc<OpenFile>,
    fd: u64,
    event: (u32, u64),
) -> Result<(), Errno> {
    let key = target.file.poll().1;
    if key == 0 {
        return Err(Errno::EPERM);
    }
    let Some(ep) = epoll.file_as::<Epoll>() else { return Err(Errno::EINVAL) };
    if Arc::ptr_eq(epoll, target) {
        return Err(Errno::EINVAL);
    }
    let nested = target.file_as::<Epoll>().map(|e| e.shared.clone());
    let (mut events, data) = event;
    // EPOLLEXCLUSIVE only when adding, not for an epoll, and with few other flags.
    let exclusive_refused = op == EPOLL_CTL_MOD
        || (op == EPOLL_CTL_ADD && (nested.is_some() || events & !EXCLUSIVE_OK_BITS != 0));
    if op != EPOLL_CTL_DEL && events & EPOLLEXCLUSIVE != 0 && exclusive_refused {
        return Err(Errno::EINVAL);
    }
    let shared = &ep.shared;
    let desc = Arc::as_ptr(target) as usize;
    match op {
        EPOLL_CTL_ADD => {
            let _nesting = nested.as_ref().map(|_| NESTING.lock());
            if let Some(below) = &nested
                && shared.loops(below, 0)
            {
                return Err(Errno::ELOOP);
            }
            events |= EPOLLERR | EPOLLHUP;
            insert(shared, target, desc, fd, key, nested.is_some(), events, data)
        }
        EPOLL_CTL_DEL => {
            let item = shared.find(desc, fd).ok_or(Errno::ENOENT)?;
            remove(shared, &item);
            target.watchers.0.lock().retain(|w| !core::ptr::eq(w.as_ptr(), Arc::as_ptr(&item)));
            Ok(())
        }
        EPOLL_CTL_MOD => {
            let item = shared.find(desc, fd).ok_or(Errno::ENOENT)?;
            {
                let _inner = shared.inner.lock();
                if item.events.load(Ordering::Relaxed) & EPOLLEXCLUSIVE != 0 {
                    return Err(Errno::EINVAL);
                }
                item.events.store(events | EPOLLERR | EPOLLHUP, Ordering::Release);
                item.data.store(data, Ordering::Relaxed);
            }
            queue_if_ready(shared, &item);
            Ok(())
        }
        _ => Err(Errno::EINVAL),
    }
}

/// `EPOLL_CTL_ADD` of (`target`, `fd`), whose file's key is `key`: the room everywhere first,
/// then the item in the set, the table and the description's watchers under their locks (in
/// the module's order), then one poll.
#[allow(clippy::too_many_arguments, reason = "the item's fields, decided by the caller")]
fn insert(
    shared: &Arc<Shared>,
    target: &Arc<OpenFile>,
    desc: usize,
    fd: u64,
    key: usize,
    nested: bool,
    events: u32,
    data: u64,
) -> Result<(), Errno> {
    let item = fallible::arc(Item {
        file: Arc::downgrade(target),
        desc,
        fd,
        key,
        nested,
        epoll: Arc::downgrade(shared),
        events: AtomicU32::new(events),
        data: AtomicU64::new(data),
        queued: AtomicBool::new(false),
        removed: AtomicBool::new(false),
    })
    .map_err(|_| Errno::ENOMEM)?;
    {
        let mut watchers = target.watchers.0.lock();
        watchers.retain(|w| w.strong_count() > 0);
        fallible::reserve(&mut watchers, 1)?;
        let mut watches = bucket(key).lock();
        fallible::reserve(&mut watches.items, 1)?;
        let mut inner = shared.inner.lock();
        if inner.items.iter().any(|i| i.desc == desc && i.fd == fd) {
            return Err(Errno::EEXIST);
        }
        fallible::reserve(&mut inner.items, 1)?;
        let room = (inner.items.len() + 1).saturating_sub(inner.ready.len());
        inner.ready.try_reserve(room).map_err(|_| Errno::ENOMEM)?;
        inner.items.push(item.clone());
        drop(inner);
        watches.items.push(item.clone());
        watches.changes += 1;
        WATCHED.fetch_add(1, Ordering::AcqRel);
        drop(watches);
        watchers.push(Arc::downgrade(&item));
    }
    queue_if_ready(shared, &item);
    Ok(())
}

/// Polls `item`'s file (no lock held) and, if it is ready, queues it and notifies its epoll.
fn queue_if_ready(shared: &Arc<Shared>, item: &Arc<Item>) {
    if item.ready_now() != 0 && shared.queue(item) {
        crate::sched::notify_poll(shared.key(), POLLIN | POLLRDNORM);
    }
}

/// Takes `item` out of `shared` and of [`WATCHES`] (once, whoever asks first).
fn remove(shared: &Shared, item: &Arc<Item>) {
    if shared.unlink(item) {
        unwatch(item);
    }
}

/// Takes `item` out of its bucket of [`WATCHES`].
fn unwatch(item: &Arc<Item>) {
    let mut watches = bucket(item.key).lock();
    watches.items.retain(|i| !Arc::ptr_eq(i, item));
    watches.changes += 1;
    drop(watches);
    WATCHED.fetch_sub(1, Ordering::AcqRel);
}

/// The last reference to an open file description went (its `Drop`): the items watching it
/// leave their epolls (Linux's `eventpoll_release`).
pub fn released(watchers: &Watchers) {
    let list = core::mem::take(&mut *watchers.0.lock());
    for item in list.iter().filter_map(Weak::upgrade) {
        if let Some(shared) = item.epoll.upgrade() {
            remove(&shared, &item);
        }
    }
}

impl Epoll {
    /// `epoll_wait`'s look at the ready list: up to `max` events written to the user array at
    /// `out`; 0 when none is ready (the caller then waits on [`Epoll::key`]).
    ///
    /// # Errors
    /// `EFAULT` when not even the first event could be written (the item stays ready).
    pub fn collect(&self, out: u64, max: u64) -> Result<u64, Errno> {
        let shared = &self.shared;
        let mut n = 0u64;
        // Each item on the list now is looked at once: one reported level-triggered goes to
        // the back and is not looked at again in this call.
        let budget = shared.inner.lock().ready.len();
        for _ in 0..budget {
            if n == max {
                break;
            }
            let item = {
                let mut inner = shared.inner.lock();
                let Some(item) = inner.ready.pop_front() else { break };
                item.queued.store(false, Ordering::Relaxed);
                item
            };
            let events = item.events.load(Ordering::Acquire);
            let revents = item.ready_now();
            if revents == 0 {
                continue;
            }
            let mut record = [0u8; EVENT_SIZE as usize];
            record[..4].copy_from_slice(&revents.to_le_bytes());
            record[8..].copy_from_slice(&item.data.load(Ordering::Relaxed).to_le_bytes());
            if copy_out(out + n * EVENT_SIZE, &record).is_err() {
                shared.queue(&item);
                return if n == 0 { Err(Errno::EFAULT) } else { Ok(n) };
            }
            n += 1;
            if events & EPOLLONESHOT != 0 {
                // Disarmed, unless an EPOLL_CTL_MOD re-armed it meanwhile.
                let _inner = shared.inner.lock();
                let _ = item.events.compare_exchange(
                    events,
                    events & PRIVATE_BITS,
                    Ordering::AcqRel,
                    Ordering::Relaxed,
                );
            } else if events & EPOLLET == 0 {
                shared.queue(&item);
            }
        }
        Ok(n)
    }

    /// The key a thread waiting in `epoll_wait` blocks on.
    pub fn key(&self) -> usize {
        self.shared.key()
    }
}

impl Drop for Epoll {
    fn drop(&mut self) {
        // The items leave the table; the descriptions' watcher lists drop theirs when they
        // next change or go.
        let items = core::mem::take(&mut self.shared.inner.lock().items);
        for item in &items {
            let unlinked = !item.removed.swap(true, Ordering::AcqRel);
            if unlinked {
                unwatch(item);
            }
        }
        self.shared.inner.lock().ready.clear();
    }
}

impl File for Epoll {
    /// Readable when an item on the ready list is ready (Linux's `ep_eventpoll_poll`); the list
    /// is looked at, not consumed.
    fn poll(&self) -> (u16, usize) {
        let shared = &self.shared;
        let count = shared.inner.lock().ready.len();
        for i in 0..count {
            let Some(item) = shared.inner.lock().ready.get(i).cloned() else { break };
            if item.ready_now() != 0 {
                return (POLLIN | POLLRDNORM, shared.key());
            }
        }
        (0, shared.key())
    }

    fn stat(&self) -> Result<Stat, Errno> {
        Ok(super::anon::stat())
    }

    fn describe(&self) -> Result<Vec<u8>, Errno> {
        super::anon::describe("eventpoll")
    }

    fn as_any(&self) -> &dyn Any {
        self
    }
}
