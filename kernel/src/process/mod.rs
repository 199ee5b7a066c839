//! User processes: load a static arm64 ELF, run it at EL0, serve its system calls and page
//! faults, and tear it down without leaking a frame.
//!
//! One process runs at a time, to completion (threads and preemption come with the SMP issue);
//! several run one after another in one boot. The process's page table is live in TTBR0 with its
//! own ASID while it runs; user memory is demand-paged (a frame is allocated and zeroed on the
//! first touch) and freed on munmap, MADV_DONTNEED and exit, always after the TLB flush that
//! covers it.
pub mod elf;
pub mod stack;
pub mod syscall;
mod vmas;

use alloc::format;
use alloc::string::String;
use alloc::vec::Vec;
use core::cell::UnsafeCell;

use aarch64_cpu::registers::{ReadWriteable, TCR_EL1, TTBR0_EL1, Writeable};
use mm::addr::{PAGE_SIZE, PhysAddr, VirtAddr};
use mm::descriptor::{Attributes, UserAccess};
use mm::paging::{Constraints, PageTable, VaRange};
use mm::tlb::{Scope, TlbRequest};
use spin::Mutex;

use crate::arch::aarch64::exception::{TrapFrame, exception_class_name, fault_status_name};
use crate::arch::aarch64::user::{self, KernelContext, PSTATE_EL0, UserRegs};
use crate::kprintln;
use crate::memory::kernel_map::FrameTranslation;
use crate::memory::layout::phys_to_linear;
use crate::memory::{frames, tlb};
pub use vmas::{Prot, Vma, VmaKind, Vmas};

/// Top of the user stack (exclusive); the stack VMA ends here.
pub const STACK_TOP: u64 = 0x0000_ffff_f000_0000;
/// Size of the stack mapping (demand-paged: untouched pages cost nothing).
pub const STACK_SIZE: u64 = 8 << 20;
/// Unmapped gap kept below the stack (Linux `stack_guard_gap`, 256 pages).
pub const STACK_GUARD_GAP: u64 = 256 * PAGE_SIZE;
/// Lowest mappable address (Linux `mmap_min_addr`).
pub const MMAP_MIN_ADDR: u64 = 0x1_0000;

/// Exit status of a process killed by a fault (128 + SIGSEGV, as a shell reports it).
pub const STATUS_SEGV: u64 = 139;
/// Exit status for an undefined instruction (128 + SIGILL).
pub const STATUS_ILL: u64 = 132;
/// Exit status for a breakpoint (128 + SIGTRAP).
pub const STATUS_TRAP: u64 = 133;
/// Exit status for an alignment fault (128 + SIGBUS).
pub const STATUS_BUS: u64 = 135;

/// A user process.
pub struct Process {
    /// Process id (1, 2, ... in the order programs run).
    pub pid: u32,
    /// Its page table (TTBR0), with non-global entries tagged by `asid`.
    pub table: PageTable<FrameTranslation>,
    /// Its ASID.
    pub asid: u16,
    /// Its virtual memory areas.
    pub vmas: Vmas,
    /// Program break: (start, current).
    pub brk: (u64, u64),
    /// Page faults resolved by demand paging.
    pub faults: u64,
}

static CURRENT: Mutex<Option<Process>> = Mutex::new(None);

struct KernelContextCell(UnsafeCell<KernelContext>);
// SAFETY: one CPU runs user code at a time (the SMP issue makes this per CPU); the context is
// written by `enter_user` and read by `leave_user` on that CPU only.
unsafe impl Sync for KernelContextCell {}
static KERNEL_CONTEXT: KernelContextCell = KernelContextCell(UnsafeCell::new(KernelContext::ZERO));

static NEXT_PID: Mutex<u32> = Mutex::new(1);
static NEXT_ASID: Mutex<u16> = Mutex::new(1);

/// Makes EL0 able to do what Linux lets it do: read the virtual counter (CNTKCTL_EL1.EL0VCTEN),
/// clean and invalidate caches by VA and read CTR_EL0 (SCTLR_EL1.UCI, UCT; a JIT publishes its
/// code this way), use DC ZVA (DZE), and WFI/WFE without trapping (nTWI, nTWE).
pub fn init_el0_controls() {
    use aarch64_cpu::registers::{CNTKCTL_EL1, SCTLR_EL1};
    CNTKCTL_EL1.modify(CNTKCTL_EL1::EL0VCTEN::SET);
    SCTLR_EL1.modify(
        SCTLR_EL1::UCI::DontTrap
            + SCTLR_EL1::UCT::DontTrap
            + SCTLR_EL1::DZE::DontTrap
            + SCTLR_EL1::NTWI::DontTrap
            + SCTLR_EL1::NTWE::DontTrap,
    );
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
}

fn user_attrs(prot: Prot) -> Option<Attributes> {
    let access = match (prot.read || prot.write || prot.exec, prot.write, prot.exec) {
        (false, _, _) => return None,
        (_, true, true) => UserAccess::ReadWriteExecute,
        (_, true, false) => UserAccess::ReadWrite,
        (_, false, true) => UserAccess::ReadExecute,
        (_, false, false) => UserAccess::ReadOnly,
    };
    Some(Attributes::user(access))
}

/// How a user access faulted.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// A load.
    Read,
    /// A store.
    Write,
    /// An instruction fetch.
    Execute,
}

impl Process {
    /// Allocates a zeroed frame for the page holding `addr` if a VMA allows `access` there.
    ///
    /// # Errors
    /// A description of why the fault is not demand paging (no mapping, or the protection
    /// forbids the access, or no memory).
    pub fn resolve_fault(&mut self, addr: u64, access: Access) -> Result<(), String> {
        let page = addr & !(PAGE_SIZE - 1);
        let vma = self.vmas.find(addr).ok_or_else(|| format!("no mapping at {addr:#x}"))?;
        let prot = vma.prot;
        let allowed = match access {
            Access::Read => prot.read || prot.write || prot.exec,
            Access::Write => prot.write,
            Access::Execute => prot.exec,
        };
        if !allowed {
            return Err(format!("{access:?} access to [{:#x}, {:#x}) which is {prot}", vma.start, vma.end));
        }
        if self.table.query(VirtAddr(page)).is_some() {
            return Err(format!(
                "{access:?} fault on a present page of [{:#x}, {:#x}) ({prot})",
                vma.start, vma.end
            ));
        }
        let attrs = user_attrs(prot).ok_or("PROT_NONE")?;
        let frame = frames::alloc(1).ok_or("out of memory")?;
        // SAFETY: a fresh frame, reached through the linear map.
        unsafe { core::ptr::write_bytes(phys_to_linear(frame.0) as *mut u8, 0, PAGE_SIZE as usize) };
        if let Err(e) = self.table.map(VirtAddr(page), frame, PAGE_SIZE, attrs, Constraints::NO_CONTIGUOUS) {
            frames::free(frame, 1);
            return Err(format!("mapping the page failed: {e:?}"));
        }
        // Invalid to valid: no TLBI; make the entry visible before the access is retried.
        aarch64_cpu::asm::barrier::dsb(aarch64_cpu::asm::barrier::ISHST);
        if prot.exec {
            // A page that becomes executable: the I-cache must not hold stale lines for it
            // (a fresh zeroed frame may alias lines of its previous life).
            crate::arch::aarch64::cache::sync_icache(phys_to_linear(frame.0), PAGE_SIZE as usize);
        }
        self.faults += 1;
        Ok(())
    }

    /// Unmaps `[start, end)` from the page table, flushes the TLB once for the whole range, then
    /// frees the data frames and detached tables (never before the flush).
    pub fn unmap_pages(&mut self, start: u64, end: u64) {
        if start >= end {
            return;
        }
        let mut data = Vec::new();
        let _ = self.table.walk(VirtAddr(start), end - start, |leaf| data.push((leaf.pa, leaf.size)));
        let Ok(record) = self.table.unmap(VirtAddr(start), end - start) else { return };
        if record.needs_flush() {
            let req = TlbRequest::new(VirtAddr(start), VirtAddr(end), Scope::Asid(self.asid))
                .with_leaf_only(record.leaf_only());
            tlb::flush(&req, tlb::caps(), false);
        }
        record.release(self.table.translation_mut());
        for (pa, size) in data {
            frames::free(pa, (size / PAGE_SIZE) as usize);
        }
    }

    /// Changes the protection of the mapped pages of `[start, end)` (one flush for the range).
    pub fn protect_pages(&mut self, start: u64, end: u64, prot: Prot) {
        if start >= end {
            return;
        }
        match user_attrs(prot) {
            // PROT_NONE: drop the pages' translations but keep the VMA (and the data: a later
            // mprotect back must find it). Keeping frames mapped but inaccessible is simplest:
            // map them EL1-only is not expressible per user, so unmapping would lose data.
            // Instead the pages stay mapped read-only for EL1 and inaccessible for EL0.
            None => {
                let attrs = Attributes::kernel_rodata().with_global(false);
                self.protect_leaves(start, end, attrs);
            }
            Some(attrs) => self.protect_leaves(start, end, attrs),
        }
    }

    fn protect_leaves(&mut self, start: u64, end: u64, attrs: Attributes) {
        let Ok(record) =
            self.table.protect_with(VirtAddr(start), end - start, |a| a.with_permissions_of(attrs))
        else {
            return;
        };
        if record.needs_flush() {
            let req = TlbRequest::new(VirtAddr(start), VirtAddr(end), Scope::Asid(self.asid))
                .with_leaf_only(record.leaf_only());
            tlb::flush(&req, tlb::caps(), record.has_executable());
        }
        record.release(self.table.translation_mut());
    }
}

/// Loads `bytes` as a static arm64 executable and runs it with `argv` until it exits; returns
/// its exit status.
///
/// # Errors
/// A sentence saying why the program could not be started (bad ELF, out of memory).
pub fn run(bytes: &[u8], argv: &[&str]) -> Result<u64, String> {
    let exe = elf::parse(bytes)?;
    let pid = {
        let mut next = NEXT_PID.lock();
        *next += 1;
        *next - 1
    };
    let asid = {
        let mut next = NEXT_ASID.lock();
        let asid = *next;
        *next = if *next == u16::MAX { 1 } else { *next + 1 };
        asid
    };
    let table =
        PageTable::new(FrameTranslation, VaRange::Lower).map_err(|e| format!("no page table: {e:?}"))?;
    let mut process = Process { pid, table, asid, vmas: Vmas::new(), brk: (0, 0), faults: 0 };
    let loaded = load(&mut process, &exe, bytes, argv);
    let regs = match loaded {
        Ok(regs) => regs,
        Err(e) => {
            teardown(process);
            return Err(e);
        }
    };
    *CURRENT.lock() = Some(process);
    let status = {
        let asid_root =
            CURRENT.lock().as_ref().map_or(0, |p| p.table.root_pa().0 | (u64::from(p.asid) << 48));
        TTBR0_EL1.set(asid_root);
        TCR_EL1.modify(TCR_EL1::EPD0::EnableTTBR0Walks);
        aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
        // SAFETY: TTBR0 holds the process's table; every exception from EL0 goes to
        // `handle_user_exception`, which returns to the program or calls `exit_user` with
        // KERNEL_CONTEXT.
        unsafe { user::run_user(&regs, &mut *KERNEL_CONTEXT.0.get()) }
    };
    TCR_EL1.modify(TCR_EL1::EPD0::DisableTTBR0Walks);
    TTBR0_EL1.set(0);
    aarch64_cpu::asm::barrier::isb(aarch64_cpu::asm::barrier::SY);
    if let Some(process) = CURRENT.lock().take() {
        teardown(process);
    }
    Ok(status)
}

/// Maps the segments, the stack and the initial stack contents; returns the entry registers.
fn load(p: &mut Process, exe: &elf::Executable, bytes: &[u8], argv: &[&str]) -> Result<UserRegs, String> {
    let mut brk = 0;
    for seg in &exe.segments {
        let start = seg.vaddr & !(PAGE_SIZE - 1);
        let end = (seg.vaddr + seg.memsz).next_multiple_of(PAGE_SIZE);
        let prot = Prot { read: seg.prot.read, write: seg.prot.write, exec: seg.prot.exec };
        p.vmas.insert(Vma { start, end, prot, kind: VmaKind::Image }).map_err(|e| format!("segment: {e}"))?;
        let attrs = user_attrs(prot).ok_or("a PROT_NONE segment")?;
        let mut page = start;
        while page < end {
            let frame = frames::alloc(1).ok_or("out of memory loading the program")?;
            let dst = phys_to_linear(frame.0) as *mut u8;
            // SAFETY: a fresh frame of PAGE_SIZE bytes through the linear map.
            let dst = unsafe { core::slice::from_raw_parts_mut(dst, PAGE_SIZE as usize) };
            dst.fill(0);
            // File bytes that land in this page.
            let file_start = seg.vaddr.max(page);
            let file_end = (seg.vaddr + seg.filesz).min(page + PAGE_SIZE);
            if file_start < file_end {
                let from = (seg.offset + (file_start - seg.vaddr)) as usize;
                let len = (file_end - file_start) as usize;
                dst[(file_start - page) as usize..][..len].copy_from_slice(&bytes[from..from + len]);
            }
            if prot.exec {
                crate::arch::aarch64::cache::sync_icache(dst.as_ptr() as u64, PAGE_SIZE as usize);
            }
            if let Err(e) = p.table.map(VirtAddr(page), frame, PAGE_SIZE, attrs, Constraints::NONE) {
                frames::free(frame, 1);
                return Err(format!("mapping the program failed: {e:?}"));
            }
            page += PAGE_SIZE;
        }
        brk = brk.max(end);
    }
    p.brk = (brk, brk);
    let stack = Vma { start: STACK_TOP - STACK_SIZE, end: STACK_TOP, prot: Prot::RW, kind: VmaKind::Stack };
    p.vmas.insert(stack).map_err(|e| format!("stack: {e}"))?;

    let mut random = [0u8; 16];
    crate::random::fill(&mut random);
    let auxv = [
        (stack::at::PHDR, exe.phdr),
        (stack::at::PHENT, 56),
        (stack::at::PHNUM, exe.phnum),
        (stack::at::PAGESZ, PAGE_SIZE),
        (stack::at::BASE, 0),
        (stack::at::FLAGS, 0),
        (stack::at::ENTRY, exe.entry),
        (stack::at::UID, 0),
        (stack::at::EUID, 0),
        (stack::at::GID, 0),
        (stack::at::EGID, 0),
        (stack::at::HWCAP, crate::arch::aarch64::cpu::hwcaps()),
        (stack::at::HWCAP2, 0),
        (stack::at::CLKTCK, 100),
        (stack::at::SECURE, 0),
    ];
    let (sp, image) = stack::build(STACK_TOP, argv, &["HOME=/", "TERM=dumb"], &auxv, random);
    // Write the initial stack through the page table: fault the pages in, then copy.
    let mut page = sp & !(PAGE_SIZE - 1);
    while page < STACK_TOP {
        p.resolve_fault(page, Access::Write)?;
        page += PAGE_SIZE;
    }
    for (i, chunk) in image.chunks(PAGE_SIZE as usize).enumerate() {
        let va = sp + (i as u64) * PAGE_SIZE;
        write_user_via_table(&p.table, va, chunk)?;
    }
    Ok(UserRegs { x: [0; 31], sp, pc: exe.entry, pstate: PSTATE_EL0 })
}

/// Writes `data` at user address `va` by translating through `table` (the table need not be
/// live), crossing page boundaries as needed.
fn write_user_via_table(table: &PageTable<FrameTranslation>, va: u64, data: &[u8]) -> Result<(), String> {
    let mut done = 0;
    while done < data.len() {
        let at = va + done as u64;
        let pa = table.translate(VirtAddr(at)).ok_or_else(|| format!("{at:#x} not mapped"))?;
        let room = (PAGE_SIZE - (at & (PAGE_SIZE - 1))) as usize;
        let n = room.min(data.len() - done);
        // SAFETY: `pa` is a frame owned by this process's table, reached through the linear map;
        // `n` bytes stay inside its page.
        unsafe {
            core::ptr::copy_nonoverlapping(data[done..].as_ptr(), phys_to_linear(pa.0) as *mut u8, n);
        }
        done += n;
    }
    Ok(())
}

/// Frees everything the process owns: the TLB entries of its ASID first, then its frames.
fn teardown(process: Process) {
    let mut data: Vec<(PhysAddr, u64)> = Vec::new();
    process.table.walk_all(|leaf| data.push((leaf.pa, leaf.size)));
    let (mut translation, record) = process.table.destroy();
    tlb::flush_all(Scope::Asid(process.asid), tlb::caps());
    record.release(&mut translation);
    for (pa, size) in data {
        frames::free(pa, (size / PAGE_SIZE) as usize);
    }
}

/// Entry from the exception vectors for every exception taken from EL0.
pub fn handle_user_exception(frame: &mut TrapFrame, kind: u64) {
    let exit = {
        let mut current = CURRENT.lock();
        match current.as_mut() {
            Some(p) => user_exception(p, frame, kind),
            None => Some(STATUS_SEGV),
        }
    };
    if let Some(status) = exit {
        // SAFETY: we are on the exception stack handling an exception from the program that
        // `run` entered with KERNEL_CONTEXT; nothing on the exception stack is needed any more.
        unsafe { user::exit_user(status, KERNEL_CONTEXT.0.get()) }
    }
}

/// Handles one exception from the program; `Some(status)` ends it.
fn user_exception(p: &mut Process, frame: &mut TrapFrame, kind: u64) -> Option<u64> {
    let ec = (frame.esr >> 26) & 0x3f;
    if kind & 3 == 1 {
        return None; // an IRQ taken from EL0, already handled: back to the program
    }
    if kind & 3 != 0 {
        kprintln!(
            "\n*** pid {}: unexpected {} from EL0 at {:#x}; ending it",
            p.pid,
            ["", "IRQ", "FIQ", "SError"][(kind & 3) as usize],
            frame.elr
        );
        return Some(STATUS_SEGV);
    }
    match ec {
        0x15 => syscall::dispatch(p, frame),
        0x20 | 0x24 => {
            let iss = frame.esr & 0x1ff_ffff;
            let access = if ec == 0x20 {
                Access::Execute
            } else if iss & (1 << 6) != 0 {
                Access::Write
            } else {
                Access::Read
            };
            let fsc = iss & 0x3f;
            let translation_fault = (0x04..=0x07).contains(&fsc);
            let why = if translation_fault {
                match p.resolve_fault(frame.far, access) {
                    Ok(()) => return None,
                    Err(why) => why,
                }
            } else {
                describe_mapping(p, frame.far)
            };
            report_user_fault(p, frame, access, fsc, &why);
            Some(STATUS_SEGV)
        }
        _ => {
            kprintln!(
                "\n*** pid {}: {} (EC {:#04x}, ESR {:#x}) at pc {:#x}; ending it with status {}",
                p.pid,
                exception_class_name(ec),
                ec,
                frame.esr,
                frame.elr,
                status_for(ec)
            );
            Some(status_for(ec))
        }
    }
}

fn status_for(ec: u64) -> u64 {
    match ec {
        0x00 | 0x0e => STATUS_ILL,
        0x3c | 0x30..=0x35 => STATUS_TRAP,
        0x22 | 0x26 => STATUS_BUS,
        _ => STATUS_SEGV,
    }
}

fn describe_mapping(p: &Process, addr: u64) -> String {
    match p.vmas.find(addr) {
        Some(vma) => format!("mapping [{:#x}, {:#x}) is {}", vma.start, vma.end, vma.prot),
        None => String::from("no mapping there"),
    }
}

fn report_user_fault(p: &Process, frame: &TrapFrame, access: Access, fsc: u64, why: &str) {
    kprintln!(
        "\n*** pid {}: segmentation fault: {:?} at {:#x} (pc {:#x}, sp {:#x})",
        p.pid,
        access,
        frame.far,
        frame.elr,
        frame.sp_el0
    );
    kprintln!(
        "    {} (FSC {:#04x}); {}; {}",
        fault_status_name(fsc),
        fsc,
        why,
        describe_mapping(p, frame.far)
    );
    kprintln!(
        "    x0 {:#x} x1 {:#x} x2 {:#x} x30 {:#x}; exit status {}",
        frame.x[0],
        frame.x[1],
        frame.x[2],
        frame.x[30],
        STATUS_SEGV
    );
}
