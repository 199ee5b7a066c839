//! Host tests of a program's segments mapped from its file's page cache
//! ([`UserMemory::map_file_segment`]) and of fault-around on file mappings
//! ([`object::fault_around_range`]): two processes running one program share its text frames
//! with the cache, the bss and the zeroed tail of the last file page read zero though the
//! file's page holds other bytes there, a write to the data segment stays in the writer's copy,
//! and a read fault maps the cached neighbours — only those, only inside the aligned block, the
//! area, the backed range and one last-level table, never over a page already present — with
//! every frame back once at the end.

use std::sync::Arc;
use std::vec;

use super::fork::{Pool, live, parent, peek, writable};
use super::object::{object, release};

use super::*;
use crate::user::object::{FAULT_AROUND_BYTES, FileSegment, MemObject, SharedObject, fault_around_range};
use crate::vm::flags::{MAP_FIXED, MAP_PRIVATE};
use crate::vm::prot::PROT_READ;

const TEXT: u64 = 0x40_0000;

/// The object's page `index`, every byte `byte` (the cache holds it: a file written whole).
fn fill(cell: &Arc<super::object::Cell>, pool: &Pool, index: u64, byte: u8) {
    let mut frames = pool.clone();
    let mut pa = None;
    cell.with(&mut |o: &mut MemObject| pa = o.page(index, false, &mut frames).ok());
    let pa = pa.expect("inside the object");
    frames.write(pa, 0, &vec![byte; PAGE_SIZE as usize]);
}

fn rx() -> Prot {
    Prot::READ.union(Prot::EXEC)
}

/// A file of 4 pages, every page filled; text = pages 0-1, data = page 2 and the first 100
/// bytes of page 3, bss up to 3 pages past that.
fn program(pool: &Pool) -> (Arc<super::object::Cell>, crate::user::object::ObjectRef, [FileSegment; 2]) {
    let (cell, h) = object(pool, 4 * PAGE_SIZE);
    for i in 0..4 {
        fill(&cell, pool, i, 0xa0 + i as u8);
    }
    let text = FileSegment { vaddr: TEXT, filesz: 2 * PAGE_SIZE, memsz: 2 * PAGE_SIZE, offset: 0 };
    let data_va = TEXT + 0x10_0000 + 2 * PAGE_SIZE;
    let data =
        FileSegment { vaddr: data_va, filesz: PAGE_SIZE + 100, memsz: 4 * PAGE_SIZE, offset: 2 * PAGE_SIZE };
    (cell, h, [text, data])
}

fn load(m: &mut super::fork::Cow, h: &crate::user::object::ObjectRef, segs: &[FileSegment; 2]) {
    m.map_file_segment(segs[0], rx(), h.clone()).unwrap();
    m.map_file_segment(segs[1], Prot::RW, h.clone()).unwrap();
}

/// Two processes running the same program map the same frames for its text (the cache's), the
/// bss and the tail of the last file page read zero in both while the file keeps its bytes, and
/// one process's store to the data segment is seen neither by the other nor in the file.
#[test]
fn two_processes_share_the_text_and_keep_their_own_data() {
    let pool = Pool::default();
    let (cell, h, segs) = program(&pool);
    let (mut a, mut b) = (parent(&pool, false), parent(&pool, false));
    load(&mut a, &h, &segs);
    load(&mut b, &h, &segs);
    for m in [&mut a, &mut b] {
        m.fault(TEXT + PAGE_SIZE, Access::Execute).unwrap();
        assert_eq!(peek(m, &pool, TEXT + PAGE_SIZE + 7), 0xa1);
    }
    let frame = |m: &super::fork::Cow, va| m.space().translate(VirtAddr(va));
    let mut cached = None;
    cell.with(&mut |o: &mut MemObject| cached = o.frame_of(1));
    assert_eq!(frame(&a, TEXT + PAGE_SIZE), cached, "the text page is the cache's frame");
    assert_eq!(frame(&b, TEXT + PAGE_SIZE), cached, "in both processes");
    assert!(!writable(&a, TEXT + PAGE_SIZE));
    let data = segs[1].vaddr;
    for m in [&mut a, &mut b] {
        m.fault(data + PAGE_SIZE + 99, Access::Read).unwrap();
        assert_eq!(peek(m, &pool, data + PAGE_SIZE + 99), 0xa3, "the last file byte of the segment");
        assert_eq!(peek(m, &pool, data + PAGE_SIZE + 100), 0, "zeroed past filesz");
        assert_eq!(peek(m, &pool, data + 2 * PAGE_SIZE - 1), 0, "to the end of that page");
        m.fault(data + 3 * PAGE_SIZE + 5, Access::Read).unwrap();
        assert_eq!(peek(m, &pool, data + 3 * PAGE_SIZE + 5), 0, "the bss");
    }
    let mut tail = None;
    cell.with(&mut |o: &mut MemObject| tail = o.frame_of(3));
    assert_ne!(frame(&a, data + PAGE_SIZE), tail, "the zeroed page is the process's own copy");
    a.write(data + 10, &[0x11]).unwrap();
    assert_eq!(peek(&a, &pool, data + 10), 0x11);
    b.fault(data + 10, Access::Read).unwrap();
    assert_eq!(peek(&b, &pool, data + 10), 0xa2, "the other process still reads the file's byte");
    let (mut c, _) = (parent(&pool, false), ());
    c.mmap_object(0, PAGE_SIZE, PROT_READ, MAP_PRIVATE, h.clone(), 2 * PAGE_SIZE)
        .map(|va| {
            c.fault(va + 10, Access::Read).unwrap();
            assert_eq!(peek(&c, &pool, va + 10), 0xa2, "the file is unchanged");
        })
        .unwrap();
    drop((a.destroy(), b.destroy(), c.destroy()));
    drop(h);
    assert_eq!(live(&pool), 4, "the cache keeps the file's pages");
    release(&cell, &pool);
    assert_eq!(live(&pool), 0, "every frame back once");
}

/// A segment whose offset and address disagree within a page, or whose file part is larger
/// than its memory, is refused before anything is mapped.
#[test]
fn inconsistent_segments_are_refused() {
    let pool = Pool::default();
    let (cell, h, _) = program(&pool);
    let mut m = parent(&pool, false);
    let bad = FileSegment { vaddr: TEXT + 8, filesz: 8, memsz: 8, offset: 16 };
    assert_eq!(m.map_file_segment(bad, rx(), h.clone()), Err(Errno::EINVAL));
    let bad = FileSegment { vaddr: TEXT, filesz: 16, memsz: 8, offset: 0 };
    assert_eq!(m.map_file_segment(bad, rx(), h.clone()), Err(Errno::EINVAL));
    assert!(m.vm().iter().next().is_none());
    drop((m.destroy(), h));
    release(&cell, &pool);
    assert_eq!(live(&pool), 0);
}

/// The range considered for every page position in a block, against every cut: the area's and
/// the backed range's edges on each side of the block, and a table boundary inside it.
#[test]
fn fault_around_range_is_the_block_cut_to_the_area_the_backing_and_the_table() {
    let block = FAULT_AROUND_BYTES.max(PAGE_SIZE);
    let pages = block / PAGE_SIZE;
    let base = 0x100_0000u64;
    let table = PAGE_SIZE * (PAGE_SIZE / 8);
    for at in 0..pages {
        let page = base + at * PAGE_SIZE;
        // Uncut: the whole aligned block.
        let wide = (0, u64::MAX);
        assert_eq!(fault_around_range(page, wide, wide, table), (base, base + block));
        for cut in 0..=pages {
            let edge = base + cut * PAGE_SIZE;
            // An area (or a backed range) that starts at `edge` (when the page is in it).
            if edge <= page {
                let want = (edge, base + block);
                assert_eq!(fault_around_range(page, (edge, u64::MAX), wide, table), want);
                assert_eq!(fault_around_range(page, wide, (edge, u64::MAX), table), want);
            }
            // One that ends at `edge`.
            if edge > page {
                let want = (base, edge);
                assert_eq!(fault_around_range(page, (0, edge), wide, table), want);
                assert_eq!(fault_around_range(page, wide, (0, edge), table), want);
            }
            // A table boundary at `edge` (a span of `cut` pages, when that is a power of two).
            if cut > 0 && cut.is_power_of_two() {
                let span = cut * PAGE_SIZE;
                let s = page & !(span - 1);
                assert_eq!(fault_around_range(page, wide, wide, span), (s, s + span));
            }
        }
    }
    // The block never leaves the table of a real granule.
    assert!(block <= table);
}

/// A read fault whose block the cache holds whole, in consecutive frames, maps the block in
/// one call: a whole aligned run gets the contiguous hint as it is made, with no fold (which
/// would break the run's entries and flush them) and no flush at all.
#[test]
fn a_read_fault_maps_a_block_of_consecutive_cached_frames_contiguous_without_a_flush() {
    let pool = Pool::default();
    let block = FAULT_AROUND_BYTES.max(PAGE_SIZE);
    let pages = block / PAGE_SIZE;
    if pages < crate::descriptor::CONTIGUOUS_ENTRIES as u64 {
        return; // 16 and 64 KiB pages: the block is smaller than a run (or the page alone)
    }
    let (cell, h) = object(&pool, block);
    for i in 0..pages {
        fill(&cell, &pool, i, i as u8 + 1);
    }
    let mut m = parent(&pool, false);
    let at = 0x1000_0000;
    let va = m.mmap_object(at, block, PROT_READ, MAP_PRIVATE | MAP_FIXED, h.clone(), 0).unwrap();
    let first = {
        let mut pa = None;
        let mut frames = pool.clone();
        cell.with(&mut |o: &mut MemObject| pa = o.page(0, false, &mut frames).ok());
        pa.unwrap()
    };
    for i in 0..pages {
        let mut pa = None;
        let mut frames = pool.clone();
        cell.with(&mut |o: &mut MemObject| pa = o.page(i, false, &mut frames).ok());
        assert_eq!(pa, Some(PhysAddr(first.0 + i * PAGE_SIZE)), "the pool hands out consecutive frames");
    }
    let before = m.space().stats();
    m.fault(va + 5 * PAGE_SIZE, Access::Read).unwrap();
    let after = m.space().stats();
    for v in (va..va + block).step_by(PAGE_SIZE as usize) {
        let leaf = m.space().query(VirtAddr(v)).expect("the whole block is mapped");
        assert!(leaf.contiguous, "page {:#x} without the contiguous hint", v - va);
        assert_eq!(peek(&m, &pool, v), ((v - va) / PAGE_SIZE) as u8 + 1);
    }
    assert_eq!(after.folds, before.folds, "no fold: the run was made contiguous");
    assert_eq!(after.flushes, before.flushes, "nothing valid was changed: no flush");
    assert_eq!(m.stats().fault_around_pages, pages - 1);
}

/// A read fault maps the neighbours the cache holds inside the block and the area, read-only
/// (a private mapping: a write then copies), skipping holes and pages already present and
/// stopping at the area's edges; a write fault maps only its page.
#[test]
fn a_read_fault_maps_the_cached_neighbours_only() {
    let pool = Pool::default();
    let block = FAULT_AROUND_BYTES.max(PAGE_SIZE);
    if block / PAGE_SIZE < 4 {
        return; // 64 KiB pages: the block is the faulting page alone (the range test covers it)
    }
    let n = 2 * block / PAGE_SIZE; // two blocks of pages
    let (cell, h) = object(&pool, n * PAGE_SIZE);
    let hole = |i: u64| i % 5 == 3;
    for i in (0..n).filter(|&i| !hole(i)) {
        fill(&cell, &pool, i, i as u8 + 1);
    }
    let mut m = parent(&pool, false);
    // The mapping starts one page into the file and ends one page early: its area's edges cut
    // the first and the last block.
    let len = (n - 2) * PAGE_SIZE;
    let at = 0x1000_0000;
    let va = m.mmap_object(at, len, PROT_READ, MAP_PRIVATE | MAP_FIXED, h.clone(), PAGE_SIZE).unwrap();
    assert_eq!(va, at);
    let file_page = |v: u64| (v - va) / PAGE_SIZE + 1;
    // A read fault on a cached page of the second block (cut by the area's end).
    let early = (va + block..va + len).step_by(PAGE_SIZE as usize).find(|&v| !hole(file_page(v))).unwrap();
    let before = m.stats().fault_around_pages;
    m.fault(early, Access::Read).unwrap();
    let around_first = m.stats().fault_around_pages - before;
    let first_block = (va + block..va + len).step_by(PAGE_SIZE as usize);
    let expect: u64 = first_block.clone().filter(|&v| v != early && !hole(file_page(v))).count() as u64;
    assert_eq!(around_first, expect, "the second block's cached pages, inside the area");
    for v in (va..va + len).step_by(PAGE_SIZE as usize) {
        let in_block = v >= va + block;
        let present = m.space().query(VirtAddr(v)).is_some();
        assert_eq!(present, in_block && !hole(file_page(v)), "page {:#x}", v - va);
        if present {
            assert!(!writable(&m, v), "read-only in a private mapping");
            assert_eq!(peek(&m, &pool, v), file_page(v) as u8 + 1);
        }
    }
    // A write fault in the first block maps only its own copy.
    m.mprotect(va, len, PROT_READ | crate::vm::prot::PROT_WRITE).unwrap();
    m.write(va + PAGE_SIZE, &[0x55]).unwrap();
    assert_eq!(m.stats().fault_around_pages - before, around_first, "no fault-around on a write");
    assert!(m.space().query(VirtAddr(va)).is_none());
    // A read fault there maps the rest of the block but leaves the present (copied) page alone.
    m.fault(va, Access::Read).unwrap();
    assert_eq!(peek(&m, &pool, va + PAGE_SIZE), 0x55, "the copy is kept");
    for v in (va..va + block).step_by(PAGE_SIZE as usize) {
        assert_eq!(m.space().query(VirtAddr(v)).is_some(), !hole(file_page(v)) || v == va + PAGE_SIZE);
    }
    // A later write to a page fault-around mapped takes the copy-on-write fault.
    let shared_page = va + 2 * PAGE_SIZE;
    m.write(shared_page, &[0x66]).unwrap();
    let mut cached = None;
    cell.with(&mut |o: &mut MemObject| cached = o.frame_of(file_page(shared_page)));
    assert_ne!(m.space().translate(VirtAddr(shared_page)), cached);
    drop((m.destroy(), h));
    release(&cell, &pool);
    assert_eq!(live(&pool), 0, "every frame back once");
}
