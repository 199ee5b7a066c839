//! System V shared memory segments (Linux's `ipc/shm.c`): `shmget` finds or makes a segment by
//! key, `shmat` maps it into a process (as `syscall::ipc` does, with the mapping `mm` makes of any
//! memory object), `shmctl` reads, changes and removes it, and `/proc/sysvipc/shm` lists them.
//!
//! A segment is a memory object like a memfd: its pages are frames found by page offset
//! (`mm::user::object::MemObject`), allocated zeroed on first touch and shared by every
//! attachment, and each attachment is a range of a process's memory that maps it. The mappings
//! count themselves as they come and go (`SharedObject::mapped`: a `shmat`, each copy a fork
//! makes, each piece a partial `munmap` leaves, and the end of a range at `shmdt`, `munmap`,
//! `exec` or exit), which is `shm_nattch`, as Linux counts its areas. A segment lives in the table
//! until it is removed (`IPC_RMID`) and has no attachment left: removal with attachments marks it
//! (`SHM_DEST`, its key made private so no `shmget` finds it again), and the last detach takes it
//! out; its frames go back when the last mapping and the table have let go of it.
//!
//! Lock order: a process's memory (the counting runs under it), then the table, then a segment's
//! state; a segment's pages are locked by the fault path under the memory lock too. `shmat` looks
//! the segment up in the table and lets go of the table before it maps.
use alloc::sync::Arc;
use alloc::vec::Vec;
use core::fmt::Write;

use linux_abi::Errno;
use linux_abi::ipc::*;
use mm::addr::PAGE_SIZE;
use mm::user::object::{MemObject, ObjectRef, SharedObject};
use spin::Mutex;

use super::{Caller, Perm, SLOTS, build_id, seq_of, slot_of};
use crate::memory::fallible;

/// One segment.
pub struct Segment {
    /// Its id (`shmid`).
    id: i32,
    /// The key it was made with, which names its mappings (`/SYSV%08x`) even after removal.
    name_key: i32,
    /// Its size in bytes, as asked (its mappings cover whole pages).
    size: u64,
    /// Its pages.
    pages: Mutex<MemObject>,
    /// What `IPC_STAT` reports.
    state: Mutex<State>,
}

/// A segment's changing state (`struct shmid_kernel`).
#[derive(Clone, Copy, Debug, Default)]
struct State {
    /// The key `shmget` finds it by (`IPC_PRIVATE` once removed).
    key: i32,
    perm: Perm,
    cpid: u32,
    lpid: u32,
    atime: i64,
    dtime: i64,
    ctime: i64,
    nattch: u64,
}

fn now() -> i64 {
    (crate::wallclock::realtime_ns() / 1_000_000_000) as i64
}

impl SharedObject for Segment {
    fn with(&self, f: &mut dyn FnMut(&mut MemObject)) {
        f(&mut self.pages.lock());
    }

    /// An attachment came or went (module documentation): the count and the times move, and the
    /// last detach of a removed segment takes it out of the table.
    fn mapped(&self, attached: bool) {
        let gone = {
            let mut st = self.state.lock();
            if attached {
                st.nattch += 1;
                st.atime = now();
            } else {
                st.nattch = st.nattch.saturating_sub(1);
                st.dtime = now();
            }
            !attached && st.nattch == 0 && st.perm.mode & SHM_DEST != 0
        };
        if gone {
            // Checked again under the table's lock: an attach may have come in between.
            let mut table = TABLE.lock();
            let still = self.state.lock().nattch == 0;
            if still {
                table.take(self.id);
            }
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // The table and every mapping have let go: the frames go back.
        self.pages.get_mut().release(&mut crate::memory::frames::UserFrames);
    }
}

impl Segment {
    /// Its id.
    pub fn id(&self) -> i32 {
        self.id
    }

    /// Its size in bytes.
    pub fn size(&self) -> u64 {
        self.size
    }

    /// What its mappings are called in `/proc/PID/maps`: `/SYSV` and its key in 8 hex digits,
    /// "(deleted)" (Linux's shm file is unlinked from the start).
    pub fn map_name(&self, out: &mut dyn Write) -> core::fmt::Result {
        write!(out, "/SYSV{:08x} (deleted)", self.name_key as u32)
    }

    /// `shmat` or `shmdt` by `pid`: the last user (the times move with the attachment's count).
    pub fn used_by(&self, pid: u32) {
        self.state.lock().lpid = pid;
    }

    /// `IPC_STAT`'s view.
    fn stat(&self) -> ShmidDs {
        let st = *self.state.lock();
        ShmidDs {
            key: st.key,
            uid: st.perm.uid,
            gid: st.perm.gid,
            cuid: st.perm.cuid,
            cgid: st.perm.cgid,
            mode: st.perm.mode,
            seq: seq_of(self.id) as u16,
            segsz: self.size,
            atime: st.atime,
            dtime: st.dtime,
            ctime: st.ctime,
            cpid: st.cpid,
            lpid: st.lpid,
            nattch: st.nattch,
        }
    }
}

/// The segments, by slot.
struct Table {
    slots: Vec<Option<Arc<Segment>>>,
    /// Segments made so far (the next one's sequence number).
    seq: u32,
    /// Where the cyclic search for a free slot starts (Linux's `idr_alloc_cyclic`).
    next: usize,
    /// Segments in the table.
    count: usize,
}

impl Table {
    /// The segment with id `id`, if it is in the table (its slot holds it at that sequence).
    fn get(&self, id: i32) -> Option<&Arc<Segment>> {
        self.slots.get(slot_of(id)?)?.as_ref().filter(|s| s.id == id)
    }

    /// Takes segment `id` out of the table.
    fn take(&mut self, id: i32) -> Option<Arc<Segment>> {
        let slot = slot_of(id)?;
        let s = self.slots.get_mut(slot)?;
        if s.as_ref().is_some_and(|seg| seg.id == id) {
            self.count -= 1;
            return s.take();
        }
        None
    }

    fn by_key(&self, key: i32) -> Option<&Arc<Segment>> {
        self.slots.iter().flatten().find(|s| s.state.lock().key == key)
    }

    /// A free slot (cyclically from the last one given), room for it made.
    fn free_slot(&mut self) -> Result<usize, Errno> {
        if self.count as u64 >= SHMMNI {
            return Err(Errno::ENOSPC);
        }
        let len = self.slots.len();
        let found = (0..len).map(|i| (self.next + i) % len.max(1)).find(|&i| self.slots[i].is_none());
        let slot = match found {
            Some(i) => i,
            None if len < SLOTS => {
                fallible::reserve(&mut self.slots, 1).map_err(|_| Errno::ENOMEM)?;
                self.slots.push(None);
                len
            }
            None => return Err(Errno::ENOSPC),
        };
        self.next = slot + 1;
        Ok(slot)
    }
}

static TABLE: Mutex<Table> = Mutex::new(Table { slots: Vec::new(), seq: 0, next: 0, count: 0 });

/// `shmget(key, size, shmflg)` for `who`, in Linux's order (`ipcget`, `newseg`,
/// `shm_more_checks`): a key with no segment is `ENOENT` without `IPC_CREAT`; an existing one is
/// `EEXIST` with `IPC_CREAT | IPC_EXCL`, `EINVAL` if smaller than `size`, `EACCES` without the
/// rights the flags' mode bits ask for; a new segment is `EINVAL` for a size of 0 or past
/// `SHMMAX`, `ENOSPC` at `SHMMNI` segments, `ENOMEM`. Returns the id.
///
/// # Errors
/// As above.
pub fn get(who: &Caller, key: i32, size: u64, flags: u32) -> Result<i32, Errno> {
    let mut table = TABLE.lock();
    if key != IPC_PRIVATE
        && let Some(seg) = table.by_key(key)
    {
        if flags & IPC_CREAT != 0 && flags & IPC_EXCL != 0 {
            return Err(Errno::EEXIST);
        }
        if seg.size < size {
            return Err(Errno::EINVAL);
        }
        if !seg.state.lock().perm.permits(who, flags) {
            return Err(Errno::EACCES);
        }
        return Ok(seg.id);
    }
    if key != IPC_PRIVATE && flags & IPC_CREAT == 0 {
        return Err(Errno::ENOENT);
    }
    if !(SHMMIN..=SHMMAX).contains(&size) {
        return Err(Errno::EINVAL);
    }
    let slot = table.free_slot()?;
    let id = build_id(slot, table.seq);
    let mut pages = MemObject::new();
    pages.set_size(size, &mut crate::memory::frames::UserFrames).map_err(|_| Errno::EINVAL)?;
    let state =
        State { key, perm: Perm::made_by(who, flags), cpid: who.pid, ctime: now(), ..State::default() };
    let seg = Segment { id, name_key: key, size, pages: Mutex::new(pages), state: Mutex::new(state) };
    let seg = fallible::arc(seg).map_err(|_| Errno::ENOMEM)?;
    table.slots[slot] = Some(seg);
    table.seq = table.seq.wrapping_add(1) % 65536;
    table.count += 1;
    Ok(id)
}

/// What `shmat` maps: segment `id`, if `who` may attach it for reading (and writing unless
/// `read_only`, executing with `exec`); it may be removed already (Linux allows attaching a
/// segment marked `SHM_DEST`). The mapping's object and the segment.
///
/// # Errors
/// `EINVAL` no such segment; `EACCES` without the rights.
pub fn for_attach(
    who: &Caller,
    id: i32,
    read_only: bool,
    exec: bool,
) -> Result<(ObjectRef, Arc<Segment>), Errno> {
    let table = TABLE.lock();
    let seg = table.get(id).ok_or(Errno::EINVAL)?.clone();
    drop(table);
    let mut wanted = if read_only { 0o444 } else { 0o666 };
    if exec {
        wanted |= 0o111;
    }
    if !seg.state.lock().perm.permits(who, wanted) {
        return Err(Errno::EACCES);
    }
    let object: ObjectRef = seg.clone();
    Ok((object, seg))
}

/// The segment `object` is, if it is one (a mapping's object: `shmdt`, `/proc/PID/maps`).
pub fn segment_of(object: &ObjectRef) -> Option<Arc<Segment>> {
    let table = TABLE.lock();
    table.slots.iter().flatten().find(|s| core::ptr::addr_eq(Arc::as_ptr(s), Arc::as_ptr(object))).cloned()
}

/// `shmctl(id, cmd, buf)` for `who`: `IPC_STAT`, `SHM_STAT`, `SHM_STAT_ANY` write `buf` (the
/// caller copies it out: `Stat`); `IPC_SET` takes the owner and mode from `set`; `IPC_RMID`;
/// `IPC_INFO` and `SHM_INFO` (the system's limits and use: `Info`); `SHM_LOCK` and `SHM_UNLOCK`
/// (nothing is ever swapped: only the mode bit). In Linux's order: `EINVAL` for a negative
/// command or id and an unknown command; then the segment (`EINVAL`), then the rights (`EACCES`
/// to read, `EPERM` to change).
///
/// # Errors
/// As above.
pub fn ctl(who: &Caller, id: i32, cmd: i32, set: Option<ShmidDs>) -> Result<Ctl, Errno> {
    if cmd < 0 || id < 0 {
        return Err(Errno::EINVAL);
    }
    let mut table = TABLE.lock();
    match cmd {
        IPC_INFO => return Ok(Ctl::Info(info(&table, false))),
        SHM_INFO => return Ok(Ctl::Info(info(&table, true))),
        SHM_STAT | SHM_STAT_ANY => {
            // By slot index, returning the id.
            let seg = table.slots.get(id as usize).and_then(Option::as_ref).ok_or(Errno::EINVAL)?;
            if cmd == SHM_STAT && !seg.state.lock().perm.permits(who, 0o444) {
                return Err(Errno::EACCES);
            }
            return Ok(Ctl::Stat(seg.stat(), seg.id));
        }
        IPC_STAT | IPC_SET | IPC_RMID | SHM_LOCK | SHM_UNLOCK => {}
        _ => return Err(Errno::EINVAL),
    }
    let seg = table.get(id).ok_or(Errno::EINVAL)?.clone();
    let mut st = seg.state.lock();
    match cmd {
        IPC_STAT => {
            if !st.perm.permits(who, 0o444) {
                return Err(Errno::EACCES);
            }
            drop(st);
            Ok(Ctl::Stat(seg.stat(), 0))
        }
        IPC_SET => {
            st.perm.may_change(who)?;
            let new = set.ok_or(Errno::EFAULT)?;
            st.perm.uid = new.uid;
            st.perm.gid = new.gid;
            st.perm.mode = (st.perm.mode & !0o777) | (new.mode & 0o777);
            st.ctime = now();
            Ok(Ctl::Done)
        }
        IPC_RMID => {
            st.perm.may_change(who)?;
            if st.nattch == 0 {
                drop(st);
                table.take(id);
            } else {
                st.perm.mode |= SHM_DEST;
                st.key = IPC_PRIVATE;
            }
            Ok(Ctl::Done)
        }
        _ => {
            // SHM_LOCK, SHM_UNLOCK: the owner, or root.
            st.perm.may_change(who)?;
            if cmd == SHM_LOCK {
                st.perm.mode |= SHM_LOCKED;
            } else {
                st.perm.mode &= !SHM_LOCKED;
            }
            Ok(Ctl::Done)
        }
    }
}

/// What `shmctl` answers.
#[derive(Clone, Copy, Debug)]
pub enum Ctl {
    /// Nothing to copy out: the call returns 0.
    Done,
    /// A segment's `struct shmid64_ds`, and what the call returns (its id for `SHM_STAT`).
    Stat(ShmidDs, i32),
    /// `IPC_INFO` or `SHM_INFO`: the bytes to copy out, their length, and the highest slot in use.
    Info(([u8; 72], usize, i32)),
}

/// `IPC_INFO` (`struct shminfo64`: the limits) or `SHM_INFO` (`struct shm_info`: the use), and
/// the highest slot index in use (what both return).
fn info(table: &Table, usage: bool) -> ([u8; 72], usize, i32) {
    let mut b = [0u8; 72];
    let highest = table.slots.iter().rposition(Option::is_some).map_or(0, |i| i as i32);
    if usage {
        // int used_ids; unsigned long shm_tot, shm_rss, shm_swp, swap_attempts, swap_successes.
        let (mut tot, mut rss) = (0u64, 0u64);
        for s in table.slots.iter().flatten() {
            tot += s.size.div_ceil(PAGE_SIZE);
            rss += s.pages.lock().pages_held() as u64;
        }
        b[0..4].copy_from_slice(&(table.count as u32).to_le_bytes());
        b[8..16].copy_from_slice(&tot.to_le_bytes());
        b[16..24].copy_from_slice(&rss.to_le_bytes());
        return (b, 48, highest);
    }
    // shmmax, shmmin, shmmni, shmseg, shmall, then four unused longs.
    let limits = [SHMMAX, SHMMIN, SHMMNI, SHMMNI, SHMMAX];
    for (i, v) in limits.iter().enumerate() {
        b[i * 8..i * 8 + 8].copy_from_slice(&v.to_le_bytes());
    }
    (b, 72, highest)
}

/// `/proc/sysvipc/shm`: Linux 6.1's header and one line per segment (`sysvipc_shm_proc_show`),
/// the resident size being the pages touched.
///
/// # Errors
/// `ENOMEM`.
pub fn proc_text(out: &mut dyn Write) -> core::fmt::Result {
    writeln!(
        out,
        "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap"
    )?;
    let table = TABLE.lock();
    for s in table.slots.iter().flatten() {
        let st = *s.state.lock();
        let rss = s.pages.lock().pages_held() as u64 * PAGE_SIZE;
        let p = st.perm;
        writeln!(
            out,
            "{:10} {:10}  {:4o} {:21} {:5} {:5}  {:5} {:5} {:5} {:5} {:5} {:10} {:10} {:10} {:21} {:21}",
            st.key,
            s.id,
            p.mode,
            s.size,
            st.cpid,
            st.lpid,
            st.nattch,
            p.uid,
            p.gid,
            p.cuid,
            p.cgid,
            st.atime,
            st.dtime,
            st.ctime,
            rss,
            0
        )?;
    }
    Ok(())
}

/// Where `shmat(id, addr, flags)` maps, as Linux's `do_shmat` decides it before looking at the
/// segment: `Ok(None)` anywhere (no address; or `SHM_RND` rounding a low address down to 0,
/// which Linux maps at 0 for root and this kernel, which keeps `mmap_min_addr` for everyone,
/// treats as no address), `Ok(Some(addr))` exactly there. `SHMLBA` is a page for arm64
/// programs; an address not aligned to it is `EINVAL` unless `SHM_RND` rounds it down
/// (arm64's `__ARCH_FORCE_SHMLBA`); `SHM_REMAP` without an address is `EINVAL`.
///
/// # Errors
/// As above.
pub fn attach_address(addr: u64, flags: u32) -> Result<Option<u64>, Errno> {
    const SHMLBA: u64 = PAGE_SIZE;
    if addr == 0 {
        return if flags & SHM_REMAP != 0 { Err(Errno::EINVAL) } else { Ok(None) };
    }
    let mut addr = addr;
    if addr & (SHMLBA - 1) != 0 {
        if flags & SHM_RND == 0 {
            return Err(Errno::EINVAL);
        }
        addr &= !(SHMLBA - 1);
        if addr == 0 {
            return if flags & SHM_REMAP != 0 { Err(Errno::EINVAL) } else { Ok(None) };
        }
    }
    Ok(Some(addr))
}
