//! Host tests of shared memory objects (memfd): one frame per object page whatever the number of
//! mappings and processes, private copies off the object, truncation unmapping in every mapping
//! (a later access is `Fault::Bus`), `mremap` and `fork` of object mappings, the executable view
//! in the code window with the I-cache made clean once — and every frame back exactly once,
//! checked against the reference-counting pool of the fork tests.

use std::sync::{Arc, Mutex};

use super::fork::{Cow, Pool, fork, live, parent, peek, writable};

use super::*;
use crate::user::object::{MemObject, ObjectRef, SharedObject};
use crate::vm::flags::{MAP_SHARED, MAP_SHARED_VALIDATE, MAP_SYNC};
use crate::vm::prot::PROT_EXEC;

/// The object behind a host lock.
pub(super) struct Cell(Mutex<MemObject>);

impl SharedObject for Cell {
    fn with(&self, f: &mut dyn FnMut(&mut MemObject)) {
        f(&mut self.0.lock().unwrap());
    }
}

pub(super) fn object(pool: &Pool, size: u64) -> (Arc<Cell>, ObjectRef) {
    let cell = Arc::new(Cell(Mutex::new(MemObject::new())));
    cell.0.lock().unwrap().set_size(size, &mut pool.clone()).unwrap();
    let handle: ObjectRef = cell.clone();
    (cell, handle)
}

/// Truncates as the kernel does: the object first, then every memory that maps it.
fn truncate(cell: &Cell, handle: &ObjectRef, pool: &Pool, size: u64, mems: &mut [&mut Cow]) -> u64 {
    let gone = cell.0.lock().unwrap().set_size(size, &mut pool.clone()).unwrap();
    gone.map_or(0, |first| mems.iter_mut().map(|m| m.truncate_object(handle, first)).sum())
}

/// The byte at `va` as the program reads it (faulted in first).
pub(super) fn rd(m: &mut Cow, pool: &Pool, va: u64) -> u8 {
    m.fault(va, Access::Read).unwrap();
    peek(m, pool, va)
}

/// Drops the object's own references (its last descriptor closed, its last mapping gone).
pub(super) fn release(cell: &Cell, pool: &Pool) {
    cell.0.lock().unwrap().release(&mut pool.clone());
}

const SHARED: u64 = MAP_SHARED;
const PRIVATE: u64 = crate::vm::flags::MAP_PRIVATE;

/// Two shared mappings of the same offsets see the same frames (one per page, however many
/// mappings); a private mapping reads them and copies on its first write; the mappings survive
/// the handle being dropped (`close`).
#[test]
fn shared_mappings_see_one_frame_and_private_ones_copy() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let (cell, h) = object(&pool, 4 * PAGE_SIZE);
    let a = m.mmap_object(0, 4 * PAGE_SIZE, RW, SHARED, h.clone(), 0).unwrap();
    let b = m.mmap_object(0, 2 * PAGE_SIZE, RW, SHARED, h.clone(), 2 * PAGE_SIZE).unwrap();
    let p = m.mmap_object(0, 4 * PAGE_SIZE, RW, PRIVATE, h.clone(), 0).unwrap();
    drop(h); // close(fd): the mappings keep the object
    m.write(a + 2 * PAGE_SIZE + 5, &[0x5a]).unwrap();
    assert_eq!(rd(&mut m, &pool, b + 5), 0x5a, "offset 2 pages through the second view");
    m.write(b + PAGE_SIZE, &[0x77]).unwrap();
    assert_eq!(rd(&mut m, &pool, a + 3 * PAGE_SIZE), 0x77);
    assert_eq!(m.space().translate(VirtAddr(a + 2 * PAGE_SIZE)), m.space().translate(VirtAddr(b)));
    assert_eq!(cell.0.lock().unwrap().pages_held(), 2);
    // Private: reads the object's frame (read-only, even if mprotect asks again), a write copies.
    m.fault(p + 2 * PAGE_SIZE, Access::Read).unwrap();
    assert_eq!(rd(&mut m, &pool, p + 2 * PAGE_SIZE + 5), 0x5a);
    m.mprotect(p, 4 * PAGE_SIZE, RW).unwrap();
    assert!(!writable(&m, p + 2 * PAGE_SIZE), "a private view never writes the object's frame");
    m.write(p + 2 * PAGE_SIZE + 5, &[0x11]).unwrap();
    assert_eq!(
        (rd(&mut m, &pool, p + 2 * PAGE_SIZE + 5), rd(&mut m, &pool, a + 2 * PAGE_SIZE + 5)),
        (0x11, 0x5a)
    );
    m.write(p, &[0x22]).unwrap(); // a private write to a page the object never had
    assert_eq!(rd(&mut m, &pool, a), 0, "the object's page 0 stays zero");
    assert_eq!(cell.0.lock().unwrap().pages_held(), 3);
    // Pages: 3 of the object, 2 private copies.
    assert_eq!(live(&pool), 5);
    drop(m.destroy());
    assert_eq!(live(&pool), 3, "the object still holds its pages");
    release(&cell, &pool);
    assert_eq!(live(&pool), 0, "every frame back once");
}

/// A private object mapping keeps the object's frames read-only through `mprotect`, and makes
/// no other area's pages read-only: every process maps its program privately from the page
/// cache, and a JIT's cycle (`mprotect` RW, write, `mprotect` RX, run) on its own anonymous page
/// must write without a fault (Linux: `can_change_pte_writable` for an exclusive anonymous page).
#[test]
fn a_private_object_mapping_leaves_anonymous_pages_writable_at_mprotect() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let (cell, h) = object(&pool, PAGE_SIZE);
    let s = m.mmap_object(0, PAGE_SIZE, RW, SHARED, h.clone(), 0).unwrap();
    let p = m.mmap_object(0, PAGE_SIZE, RW, PRIVATE, h, 0).unwrap();
    m.fault(p, Access::Read).unwrap();
    let anon = m.mmap(0, PAGE_SIZE, RW, PRIVATE | MAP_ANONYMOUS, -1, 0).unwrap();
    m.write(anon, &[1]).unwrap();
    let faults = m.stats().faults;
    for i in 0..3 {
        m.mprotect(anon, PAGE_SIZE, RW).unwrap();
        assert!(writable(&m, anon), "the anonymous page is this memory's alone: writable at once");
        m.write(anon, &[i]).unwrap();
        m.mprotect(anon, PAGE_SIZE, PROT_READ | PROT_EXEC).unwrap();
    }
    assert_eq!(m.stats().faults, faults, "the cycle took no fault");
    m.mprotect(p, PAGE_SIZE, PROT_READ).unwrap();
    m.mprotect(p, PAGE_SIZE, RW).unwrap();
    assert!(!writable(&m, p), "a private view never writes the object's frame");
    m.write(p, &[7]).unwrap();
    assert_eq!((rd(&mut m, &pool, p), rd(&mut m, &pool, s)), (7, 0), "the write made a private copy");
    drop(m.destroy());
    release(&cell, &pool);
    assert_eq!(live(&pool), 0, "every frame back once");
}

/// Shrinking unmaps the pages past the end from every mapping, private copies included, with
/// the object's frames dropped; an access there is `Fault::Bus` until the object grows again
/// (then the page reads zero). A page the end cuts keeps its head and reads zero past the end.
#[test]
fn truncation_unmaps_everywhere_and_later_accesses_are_bus_faults() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let (cell, h) = object(&pool, 4 * PAGE_SIZE);
    let a = m.mmap_object(0, 4 * PAGE_SIZE, RW, SHARED, h.clone(), 0).unwrap();
    let p = m.mmap_object(0, 4 * PAGE_SIZE, RW, PRIVATE, h.clone(), 0).unwrap();
    for i in 0..4 {
        m.write(a + i * PAGE_SIZE + 100, &[i as u8 + 1]).unwrap();
    }
    m.write(p + 3 * PAGE_SIZE, &[9]).unwrap(); // a private copy of page 3
    assert_eq!(live(&pool), 5);
    let mut c = fork(&mut m, &pool, 6).unwrap(); // a second process maps it too
    let unmapped = truncate(&cell, &h, &pool, PAGE_SIZE + 50, &mut [&mut m, &mut c]);
    // Per memory: pages 2 and 3 of the shared view, the private copy of page 3.
    assert_eq!(unmapped, 6);
    assert_eq!(live(&pool), 2, "the object keeps pages 0 and 1; copies and cut pages freed");
    for mem in [&mut m, &mut c] {
        assert_eq!(mem.fault(a + 2 * PAGE_SIZE, Access::Read), Err(Fault::Bus));
        assert_eq!(mem.fault(p + 3 * PAGE_SIZE, Access::Write), Err(Fault::Bus));
        assert_eq!(rd(mem, &pool, a + PAGE_SIZE + 49), 0);
        assert_eq!(rd(mem, &pool, a + PAGE_SIZE + 100), 0, "zeroed past the new end");
        assert_eq!(rd(mem, &pool, a + 100), 1);
    }
    // Growing again: the old pages read zero.
    cell.0.lock().unwrap().set_size(4 * PAGE_SIZE, &mut pool.clone()).unwrap();
    m.fault(a + 3 * PAGE_SIZE, Access::Read).unwrap();
    assert_eq!(rd(&mut m, &pool, a + 3 * PAGE_SIZE + 100), 0);
    drop(m.destroy());
    drop(c.destroy());
    release(&cell, &pool);
    assert_eq!(live(&pool), 0, "every frame back once");
}

/// A forked child shares a `MAP_SHARED` object mapping both ways, pages touched before the fork
/// and after; a `MAP_PRIVATE` one is copy-on-write between parent and child.
#[test]
fn fork_shares_object_mappings() {
    let pool = Pool::default();
    let mut p = parent(&pool, false);
    let (cell, h) = object(&pool, 3 * PAGE_SIZE);
    let a = p.mmap_object(0, 3 * PAGE_SIZE, RW, SHARED, h.clone(), 0).unwrap();
    let q = p.mmap_object(0, PAGE_SIZE, RW, PRIVATE, h, 0).unwrap();
    p.write(a, &[1]).unwrap();
    let mut c = fork(&mut p, &pool, 6).unwrap();
    assert!(writable(&c, a), "a shared page stays writable in the child");
    c.write(a, &[2]).unwrap();
    c.write(a + PAGE_SIZE, &[3]).unwrap(); // untouched before the fork
    p.write(a + 2 * PAGE_SIZE, &[4]).unwrap();
    assert_eq!((rd(&mut p, &pool, a), rd(&mut p, &pool, a + PAGE_SIZE)), (2, 3));
    assert_eq!(rd(&mut c, &pool, a + 2 * PAGE_SIZE), 4);
    c.write(q, &[5]).unwrap();
    assert_eq!((rd(&mut c, &pool, q), rd(&mut p, &pool, q), rd(&mut p, &pool, a)), (5, 2, 2));
    drop(p.destroy());
    drop(c.destroy());
    release(&cell, &pool);
    assert_eq!(live(&pool), 0);
}

/// `mremap` moves an object mapping (its pages keep their offsets) and grows it over the next
/// pages of the object; `MAP_FIXED` over it and `munmap` end the backing.
#[test]
fn mremap_and_map_fixed_follow_the_object_ranges() {
    use crate::vm::map::remap::MREMAP_MAYMOVE;
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let (cell, h) = object(&pool, 8 * PAGE_SIZE);
    let a = m.mmap_object(0, 2 * PAGE_SIZE, RW, SHARED, h.clone(), PAGE_SIZE).unwrap();
    m.write(a, &[1]).unwrap(); // object page 1
    let _block = m.mmap(a + 2 * PAGE_SIZE, PAGE_SIZE, RW, ANON | crate::vm::flags::MAP_FIXED, -1, 0).unwrap();
    let b = m.mremap(a, 2 * PAGE_SIZE, 4 * PAGE_SIZE, MREMAP_MAYMOVE, 0).unwrap();
    assert_ne!(a, b, "moved (the next page was taken)");
    assert_eq!(rd(&mut m, &pool, b), 1);
    m.write(b + 3 * PAGE_SIZE, &[4]).unwrap(); // object page 4, through the grown part
    assert_eq!(cell.0.lock().unwrap().frame_of(4), m.space().translate(VirtAddr(b + 3 * PAGE_SIZE)));
    let view = m.mmap_object(0, PAGE_SIZE, PROT_READ, SHARED, h.clone(), 4 * PAGE_SIZE).unwrap();
    assert_eq!(rd(&mut m, &pool, view), 4);
    m.mmap(b, PAGE_SIZE, RW, ANON | crate::vm::flags::MAP_FIXED, -1, 0).unwrap();
    m.write(b, &[7]).unwrap();
    assert_eq!(
        cell.0.lock().unwrap().frame_of(1).map(|f| f != m.space().translate(VirtAddr(b)).unwrap()),
        Some(true)
    );
    assert!(m.backings().at(b).is_none() && m.backings().at(b + PAGE_SIZE).is_some());
    m.munmap(b, 4 * PAGE_SIZE).unwrap();
    assert!(m.backings().at(b + PAGE_SIZE).is_none());
    drop(m.destroy());
    release(&cell, &pool);
    assert_eq!(live(&pool), 0);
}

/// The JIT pattern: a read-write view and a read-execute view of the same pages. The executable
/// view lands in the code window, the data view outside; both map the same frame; the first
/// executable mapping of the zero-filled page cleans and invalidates it once, and again only
/// after the kernel wrote the page (a truncation's zeroing).
#[test]
fn dual_mapping_jit_views_share_frames_and_the_exec_view_is_in_the_code_window() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let (cell, h) = object(&pool, PAGE_SIZE);
    let rw = m.mmap_object(0, PAGE_SIZE, RW, SHARED, h.clone(), 0).unwrap();
    let rx = m.mmap_object(0, PAGE_SIZE, PROT_READ | PROT_EXEC, SHARED, h.clone(), 0).unwrap();
    let info = m.code_window_op(crate::vm::abi::WINDOW_GET, 0).unwrap().unwrap();
    let inside = |va: u64| va >= info.base && va < info.base + info.size;
    assert!(inside(rx) && !inside(rw), "rx {rx:#x} rw {rw:#x} window {info:?}");
    assert_eq!(m.mmap_object(0, PAGE_SIZE, RW | PROT_EXEC, SHARED, h.clone(), 0), Err(Errno::EACCES), "W^X");
    m.write(rw, &0xd65f_03c0u32.to_le_bytes()).unwrap(); // ret
    m.fault(rx, Access::Execute).unwrap();
    let frame = m.space().translate(VirtAddr(rx)).unwrap();
    assert_eq!(Some(frame), m.space().translate(VirtAddr(rw)));
    assert_eq!(rd(&mut m, &pool, rx), 0xc0);
    let syncs = |pool: &Pool| pool.0.borrow().icache_syncs.get(&frame.0).copied().unwrap_or(0);
    assert_eq!(syncs(&pool), 1);
    let again = m.mmap_object(0, PAGE_SIZE, PROT_READ | PROT_EXEC, SHARED, h.clone(), 0).unwrap();
    m.fault(again, Access::Execute).unwrap();
    assert_eq!(syncs(&pool), 1, "clean since: no second maintenance");
    truncate(&cell, &h, &pool, 8, &mut [&mut m]); // zeroes bytes 8.. of the page
    let third = m.mmap_object(0, PAGE_SIZE, PROT_READ | PROT_EXEC, SHARED, h.clone(), 0).unwrap();
    m.fault(third, Access::Execute).unwrap();
    assert_eq!(syncs(&pool), 2, "written by the kernel: cleaned again");
    cell.0.lock().unwrap().written(0); // a write() to the memfd
    let fourth = m.mmap_object(0, PAGE_SIZE, PROT_READ | PROT_EXEC, SHARED, h.clone(), 0).unwrap();
    m.fault(fourth, Access::Execute).unwrap();
    assert_eq!(syncs(&pool), 3, "a write() makes the next executable mapping clean it again");
    drop(m.destroy());
    release(&cell, &pool);
    assert_eq!(live(&pool), 0);
}

/// Linux's checks for an object mapping: an unaligned offset is `EINVAL`,
/// `MAP_SHARED_VALIDATE` takes the known flags and refuses the others (`EOPNOTSUPP`).
#[test]
fn object_mapping_flags_are_checked_as_linux() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let (cell, h) = object(&pool, PAGE_SIZE);
    assert_eq!(m.mmap_object(0, PAGE_SIZE, RW, SHARED, h.clone(), 1), Err(Errno::EINVAL));
    assert_eq!(
        m.mmap_object(0, PAGE_SIZE, RW, MAP_SHARED_VALIDATE | MAP_SYNC, h.clone(), 0),
        Err(Errno::EOPNOTSUPP)
    );
    let a = m.mmap_object(0, PAGE_SIZE, RW, MAP_SHARED_VALIDATE, h.clone(), 0).unwrap();
    m.write(a, &[3]).unwrap();
    // Past the end of the object at mmap time: allowed, the access is the SIGBUS.
    let b = m.mmap_object(0, 2 * PAGE_SIZE, RW, SHARED, h, 0).unwrap();
    assert_eq!(rd(&mut m, &pool, b), 3);
    assert_eq!(m.fault(b + PAGE_SIZE, Access::Read), Err(Fault::Bus));
    drop(m.destroy());
    release(&cell, &pool);
    assert_eq!(live(&pool), 0);
}

/// `next_page` finds the next page the object holds, for `SEEK_DATA`: allocated pages, never
/// the holes between them, nothing past the last.
#[test]
fn next_page_skips_holes() {
    let pool = Pool::default();
    let (cell, _h) = object(&pool, 300 * PAGE_SIZE);
    let mut o = cell.0.lock().unwrap();
    assert_eq!(o.next_page(0), None);
    o.page(0, false, &mut pool.clone()).unwrap();
    o.page(256, false, &mut pool.clone()).unwrap();
    assert_eq!(
        (o.next_page(0), o.next_page(1), o.next_page(256), o.next_page(257)),
        (Some(0), Some(256), Some(256), None)
    );
    o.release(&mut pool.clone());
}

/// An object that counts the ranges mapping it, as a System V segment counts its attachments.
struct Counted(Mutex<MemObject>, std::sync::atomic::AtomicI64);

impl SharedObject for Counted {
    fn with(&self, f: &mut dyn FnMut(&mut MemObject)) {
        f(&mut self.0.lock().unwrap());
    }
    fn mapped(&self, attached: bool) {
        let v = self.1.fetch_add(if attached { 1 } else { -1 }, std::sync::atomic::Ordering::SeqCst);
        assert!(v > 0 || attached, "counted out below zero");
    }
}

impl Counted {
    fn count(&self) -> i64 {
        self.1.load(std::sync::atomic::Ordering::SeqCst)
    }
}

/// The ranges mapping an object are counted as Linux counts a segment's attachments (one per
/// area): a new mapping, a fork's copy, a piece left by a partial `munmap`, a `MAP_FIXED` over
/// it, `mremap`, and the end of the memory (exit, exec) each move the count, and it is back to
/// zero when no memory maps the object.
#[test]
fn the_ranges_mapping_an_object_are_counted_through_every_call() {
    let pool = Pool::default();
    let cell = Arc::new(Counted(Mutex::new(MemObject::new()), std::sync::atomic::AtomicI64::new(0)));
    cell.0.lock().unwrap().set_size(8 * PAGE_SIZE, &mut pool.clone()).unwrap();
    let h: ObjectRef = cell.clone();
    let mut m = parent(&pool, false);
    let a = m.mmap_object(0, 8 * PAGE_SIZE, RW, SHARED, h.clone(), 0).unwrap();
    let b = m.mmap_object(0, 2 * PAGE_SIZE, RW, SHARED, h.clone(), 0).unwrap();
    assert_eq!(cell.count(), 2, "two attachments");
    // Side by side (top-down placement puts the second right below the first), they stay two
    // areas: object areas never merge.
    assert_eq!(b + 2 * PAGE_SIZE, a);
    assert_eq!(m.vm().find(b).map(|v| v.end), Some(a));
    let c = fork(&mut m, &pool, 0).unwrap();
    assert_eq!(cell.count(), 4, "a fork copies both");
    // A hole punched in the middle leaves two pieces of the first range.
    m.munmap(a + 3 * PAGE_SIZE, PAGE_SIZE).unwrap();
    assert_eq!(cell.count(), 5);
    // Unmapping a whole range, and a MAP_FIXED over another, count them out.
    m.munmap(b, 2 * PAGE_SIZE).unwrap();
    assert_eq!(cell.count(), 4);
    m.mmap(a, 3 * PAGE_SIZE, RW, ANON | crate::vm::flags::MAP_FIXED, -1, 0).unwrap();
    assert_eq!(cell.count(), 3);
    // mremap moves a range (counted out and in again: the same count).
    let moved = m
        .mremap(
            a + 4 * PAGE_SIZE,
            4 * PAGE_SIZE,
            4 * PAGE_SIZE,
            crate::vm::map::remap::MREMAP_MAYMOVE | crate::vm::map::remap::MREMAP_FIXED,
            a + (64 << 20),
        )
        .unwrap();
    assert_eq!(cell.count(), 3);
    m.write(moved, &[9]).unwrap();
    // The child's end (exit, or exec replacing its memory) counts out its two.
    drop(c.destroy());
    assert_eq!(cell.count(), 1);
    drop(m.destroy());
    assert_eq!(cell.count(), 0, "no memory maps it");
    release(&Cell(Mutex::new(core::mem::take(&mut *cell.0.lock().unwrap()))), &pool);
}

/// An object mapped as never writable (`SHM_RDONLY`) refuses `mprotect(PROT_WRITE)` with EACCES,
/// and says so in smaps' names (no `mw`).
#[test]
fn a_mapping_that_may_never_be_written_refuses_prot_write() {
    let pool = Pool::default();
    let mut m = parent(&pool, false);
    let (cell, h) = object(&pool, PAGE_SIZE);
    let r = m.map_object(0, PAGE_SIZE, crate::vm::prot::PROT_READ, SHARED, h.clone(), 0, false).unwrap();
    assert_eq!(m.mprotect(r, PAGE_SIZE, RW), Err(Errno::EACCES));
    m.mprotect(r, PAGE_SIZE, crate::vm::prot::PROT_READ).unwrap();
    let names: Vec<&str> = m.vm().find(r).unwrap().vm_flag_names().collect();
    assert!(!names.contains(&"mw") && names.contains(&"ms"), "{names:?}");
    // A program cannot set the mark itself.
    let w = m.mmap(0, PAGE_SIZE, RW, ANON | crate::vm::flags::MAP_NOMAYWRITE, -1, 0).unwrap();
    m.mprotect(w, PAGE_SIZE, RW).unwrap();
    drop(m.destroy());
    drop(h);
    release(&cell, &pool);
}
