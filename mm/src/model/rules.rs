//! Tests of the model's own rules, one scenario each on a hand-built table, so that each rule is
//! shown to bite: a local TLBI acts on its CPU only, a broadcast one needs `DSB ISH`, a last-level
//! TLBI keeps walk-cache entries (and freeing the table then is reported, as is a later walk
//! through it), a stale permission is reported until a covering TLBI completes, and a contiguous
//! entry over a cached page is a TLB conflict.

use core::cell::RefCell;
use std::rc::Rc;

use super::hw::{ModelMem, Shared};
use super::machine::{DATA_BASE, Kind, Machine, Proc};
use crate::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use crate::asid::AsidContext;
use crate::descriptor::{Attributes, Descriptor, UserAccess};
use crate::paging::{Constraints, PageTable, VaRange};
use crate::tlb::TlbiOp;
use crate::tlb::operand::page_operand;

const VA: u64 = 0x4000_0000;

/// Two CPUs running two threads of one process whose table maps 16 pages at `VA`, both CPUs
/// having walked `VA` (so each caches three table entries and the leaf). Returns the machine,
/// the table and the ASID.
fn two_cpus_cached() -> (Shared, PageTable<ModelMem>, u16) {
    let m = Rc::new(RefCell::new(Machine::new(2, 8, 7)));
    let mut pt = PageTable::new(ModelMem(m.clone()), VaRange::Lower).unwrap();
    let rw = Attributes::user(UserAccess::ReadWrite);
    for i in 0..16 {
        let pa = DATA_BASE + i * PAGE_SIZE;
        m.borrow_mut().data_live.insert(pa);
        pt.map(VirtAddr(VA + i * PAGE_SIZE), PhysAddr(pa), PAGE_SIZE, rw, Constraints::NO_CONTIGUOUS)
            .unwrap();
    }
    let mut mm = m.borrow_mut();
    let root = pt.root_pa().0;
    mm.procs.push(Proc { uid: 1, root, lo: VA, pages: 16, ctx: AsidContext::new(), threads: 2, alive: true });
    mm.schedule(0, Some((0, 0)));
    mm.schedule(1, Some((0, 1)));
    mm.walk(0, VA);
    mm.walk(1, VA);
    let asid = mm.cpus[0].asid;
    assert_eq!(entries(&mm, 0), (TABLES, 1));
    assert_eq!(entries(&mm, 1), (TABLES, 1));
    drop(mm);
    (m, pt, asid)
}

/// The table entries a walk to a page caches: one a level above 3 (3 with 4 and 16 KiB pages,
/// 2 with 64 KiB).
const TABLES: usize = 3 - crate::paging::ROOT_LEVEL as usize;

/// `(table entries, leaves)` cached on `cpu`.
fn entries(m: &Machine, cpu: usize) -> (usize, usize) {
    let leaves = m.cpus[cpu].tlb.iter().filter(|e| e.is_leaf()).count();
    (m.cpus[cpu].tlb.len() - leaves, leaves)
}

/// The level-3 table frame that maps `VA`.
fn l3_table(m: &Machine) -> u64 {
    m.cpus[0]
        .tlb
        .iter()
        .find_map(|e| match e.kind {
            Kind::Table { next } if e.level == 2 => Some(next),
            _ => None,
        })
        .unwrap()
}

/// Writes descriptor `index` of the table frame `table`.
fn write(m: &Machine, table: u64, index: usize, d: Descriptor) {
    let p = m.table_ptr(table);
    // SAFETY: the frame is an allocated table (table_ptr checked it), `index < ENTRIES_PER_TABLE`, and no
    // reference to it is live.
    unsafe { p.cast::<u64>().as_ptr().add(index).write_volatile(d.bits()) };
}

#[test]
fn a_local_tlbi_acts_on_the_issuing_cpu_only() {
    let (m, _pt, asid) = two_cpus_cached();
    let mut m = m.borrow_mut();
    m.current = 0;
    m.tlbi(TlbiOp::Vae1, page_operand(asid, VirtAddr(VA)));
    m.dsb(false);
    assert_eq!(entries(&m, 0), (0, 0));
    assert_eq!(entries(&m, 1), (TABLES, 1));
}

#[test]
fn a_broadcast_tlbi_is_completed_by_dsb_ish_only() {
    let (m, _pt, asid) = two_cpus_cached();
    let mut m = m.borrow_mut();
    m.current = 1;
    m.tlbi(TlbiOp::Vae1is, page_operand(asid, VirtAddr(VA)));
    m.dsb(false);
    assert_eq!(entries(&m, 0), (TABLES, 1), "DSB NSH completed a broadcast TLBI");
    m.check_all("after DSB NSH", None, true);
    assert!(m.violations.iter().any(|v| v.contains("no DSB completed")), "{:?}", m.violations);
    m.dsb(true);
    assert_eq!(entries(&m, 0), (0, 0));
    assert_eq!(entries(&m, 1), (0, 0));
}

#[test]
fn a_last_level_tlbi_keeps_the_walk_cache_and_the_freed_table_is_reported() {
    let (m, mut pt, asid) = two_cpus_cached();
    {
        let mut m = m.borrow_mut();
        m.current = 0;
        m.tlbi(TlbiOp::Vale1is, page_operand(asid, VirtAddr(VA)));
        m.dsb(true);
        assert_eq!(entries(&m, 0), (TABLES, 0));
        assert_eq!(entries(&m, 1), (TABLES, 0));
    }
    // Unmap everything: the emptied tables are freed, though both walk caches point to them.
    let record = pt.unmap(VirtAddr(VA), 16 * PAGE_SIZE).unwrap();
    record.release(pt.translation_mut());
    let mut m = m.borrow_mut();
    assert!(m.violations.iter().any(|v| v.contains("table frame") && v.contains("freed while CPU")));
    m.violations.clear();
    m.walk(1, VA + PAGE_SIZE);
    assert!(m.violations.iter().any(|v| v.contains("through freed table frame")), "{:?}", m.violations);
}

#[test]
fn a_stale_permission_is_reported_until_a_covering_tlbi_completes() {
    let (m, _pt, asid) = two_cpus_cached();
    let mut m = m.borrow_mut();
    let l3 = l3_table(&m);
    let ro = Attributes::user(UserAccess::ReadOnly).with_global(false);
    let index = VirtAddr(VA).table_index(3);
    write(&m, l3, index, Descriptor::leaf(3, PhysAddr(DATA_BASE), ro, false));
    m.check_all("after the permission change", None, true);
    assert_eq!(m.violations.iter().filter(|v| v.contains("stale entry")).count(), 2, "{:?}", m.violations);
    m.violations.clear();
    m.current = 0;
    m.tlbi(TlbiOp::Vale1is, page_operand(asid, VirtAddr(VA)));
    m.dsb(true);
    m.check_all("after the flush", None, true);
    assert!(m.violations.is_empty(), "{:?}", m.violations);
}

#[test]
fn a_contiguous_entry_over_a_cached_page_is_a_conflict() {
    let (m, _pt, _asid) = two_cpus_cached();
    let mut m = m.borrow_mut();
    let l3 = l3_table(&m);
    let rw = Attributes::user(UserAccess::ReadWrite).with_global(false);
    let first = VirtAddr(VA).table_index(3);
    for i in 0..16 {
        let pa = PhysAddr(DATA_BASE + i as u64 * PAGE_SIZE);
        write(&m, l3, first + i, Descriptor::leaf(3, pa, rw, true));
    }
    // CPU 0 still caches the 4 KiB entry of VA; a walk of the next page caches the 64 KiB run.
    m.walk(0, VA + PAGE_SIZE);
    assert!(m.violations.iter().any(|v| v.contains("TLB conflict on CPU 0")), "{:?}", m.violations);
}
