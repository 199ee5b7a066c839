//! Secondary CPUs: every CPU the device tree describes comes up, on its own guarded stacks.
use mm::addr::PAGE_SIZE;

use crate::arch::mmu::{par_fault_status, translate};
use crate::cpu::{CPUS, KERNEL_STACK, MAX_CPUS, ONLINE, STACK_SLOT};
use crate::memory::layout::STACK_AREA;
use crate::{booted, ensure, kernel_test};

kernel_test!(
    fn every_cpu_of_the_device_tree_is_online() {
        let nodes = &booted().machine.cpus;
        ensure!(!nodes.is_empty(), "no cpu nodes");
        for node in nodes.iter().take(MAX_CPUS) {
            let online = CPUS.iter().any(|c| {
                c.mpidr.load(core::sync::atomic::Ordering::Acquire) == node.mpidr
                    && c.online_at.load(core::sync::atomic::Ordering::Acquire) != 0
            });
            ensure!(online, "CPU with MPIDR {:#x} ({}) did not come up", node.mpidr, node.enable_method);
        }
        ensure!(ONLINE.load(core::sync::atomic::Ordering::Acquire) == nodes.len().min(MAX_CPUS));
        Ok(())
    }
);

kernel_test!(
    fn secondary_stacks_have_unmapped_guard_pages() {
        let online = ONLINE.load(core::sync::atomic::Ordering::Acquire);
        for cpu in 1..online {
            let slot = STACK_AREA + cpu as u64 * STACK_SLOT;
            for guard in [slot, slot + PAGE_SIZE + KERNEL_STACK] {
                let par = translate(guard, false)
                    .err()
                    .ok_or_else(|| alloc::format!("cpu{cpu} guard {guard:#x} mapped"))?;
                ensure!((0x04..=0x07).contains(&par_fault_status(par)), "cpu{cpu}: not a translation fault");
                ensure!(
                    translate(guard + PAGE_SIZE, true).is_ok(),
                    "cpu{cpu}: stack above {guard:#x} not writable"
                );
            }
        }
        Ok(())
    }
);
