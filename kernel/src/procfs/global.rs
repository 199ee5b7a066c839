//! The machine-wide files of `/proc` (`meminfo`, `cpuinfo`, `uptime`, `mounts`, the `sys/`
//! settings programs read) and the tree of `/sys`, as static tables of generated files
//! (`fs::text::Synthetic`), in the formats of Linux 6.1.
use alloc::vec::Vec;
use core::fmt::Write;

use linux_abi::Errno;

use crate::fs::text::{Entry, Text};

/// The machine-wide entries of `/proc`.
pub static PROC: &[(&str, Entry)] = &[
    ("cpuinfo", Entry::File(cpuinfo)),
    ("filesystems", Entry::File(filesystems)),
    ("loadavg", Entry::File(loadavg)),
    ("meminfo", Entry::File(meminfo)),
    ("mounts", Entry::Link("self/mounts")),
    ("stat", Entry::File(stat)),
    ("sys", Entry::Dir(PROC_SYS)),
    ("sysvipc", Entry::Dir(&[("shm", Entry::File(sysvipc_shm))])),
    ("uptime", Entry::File(uptime)),
    ("version", Entry::File(version)),
];

static PROC_SYS: &[(&str, Entry)] = &[
    ("fs", Entry::Dir(&[("pipe-max-size", Entry::Setting(pipe_max_size))])),
    (
        "kernel",
        Entry::Dir(&[
            ("hostname", Entry::Setting(hostname)),
            ("osrelease", Entry::File(osrelease)),
            ("ostype", Entry::File(ostype)),
            ("pid_max", Entry::Setting(pid_max)),
            ("randomize_va_space", Entry::Setting(randomize_va_space)),
            ("random", Entry::Dir(&[("boot_id", Entry::File(boot_id)), ("uuid", Entry::File(boot_id))])),
        ]),
    ),
    (
        "vm",
        Entry::Dir(&[
            ("max_map_count", Entry::Setting(max_map_count)),
            ("mmap_min_addr", Entry::Setting(mmap_min_addr)),
            ("mmap_rnd_bits", Entry::Setting(mmap_rnd_bits)),
            ("overcommit_memory", Entry::Setting(overcommit_memory)),
        ]),
    ),
];

/// The tree of `/sys`.
pub static SYS: &[(&str, Entry)] = &[
    (
        "devices",
        Entry::Dir(&[(
            "system",
            Entry::Dir(&[(
                "cpu",
                Entry::Dir(&[
                    ("online", Entry::File(cpus)),
                    ("possible", Entry::File(cpus)),
                    ("present", Entry::File(cpus)),
                ]),
            )]),
        )]),
    ),
    (
        "kernel",
        Entry::Dir(&[(
            "mm",
            Entry::Dir(&[(
                "transparent_hugepage",
                Entry::Dir(&[
                    ("enabled", Entry::Setting(thp_enabled)),
                    ("hpage_pmd_size", Entry::File(hpage_pmd_size)),
                ]),
            )]),
        )]),
    ),
];

fn text(f: impl FnOnce(&mut Text) -> core::fmt::Result) -> Result<Vec<u8>, Errno> {
    let mut out = Text::default();
    let r = f(&mut out);
    out.done(r)
}

fn sysvipc_shm() -> Result<Vec<u8>, Errno> {
    text(|o| crate::ipc::shm::proc_text(o))
}

fn cpus() -> Result<Vec<u8>, Errno> {
    let n = crate::cpu::ONLINE.load(core::sync::atomic::Ordering::Acquire);
    text(|o| if n <= 1 { writeln!(o, "0") } else { writeln!(o, "0-{}", n - 1) })
}

fn hpage_pmd_size() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "{}", 512 * mm::addr::PAGE_SIZE))
}

fn thp_enabled() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "always [madvise] never"))
}

fn cpuinfo() -> Result<Vec<u8>, Errno> {
    let n = crate::cpu::ONLINE.load(core::sync::atomic::Ordering::Acquire);
    text(|o| {
        for cpu in 0..n {
            writeln!(o, "processor\t: {cpu}")?;
            writeln!(o, "BogoMIPS\t: {}.00", crate::arch::time::frequency() / 500_000)?;
            writeln!(o, "Features\t: fp asimd evtstrm cpuid")?;
            writeln!(o, "CPU implementer\t: 0x00")?;
            writeln!(o, "CPU architecture: 8")?;
            writeln!(o, "CPU variant\t: 0x0")?;
            writeln!(o, "CPU part\t: 0x051")?;
            writeln!(o, "CPU revision\t: 0")?;
            writeln!(o)?;
        }
        Ok(())
    })
}

fn filesystems() -> Result<Vec<u8>, Errno> {
    text(|o| {
        for (nodev, name) in
            [(true, "sysfs"), (true, "tmpfs"), (true, "devtmpfs"), (true, "proc"), (true, "ramfs")]
        {
            writeln!(o, "{}\t{name}", if nodev { "nodev" } else { "" })?;
        }
        Ok(())
    })
}

fn loadavg() -> Result<Vec<u8>, Errno> {
    let running = crate::process::family::live();
    text(|o| writeln!(o, "0.00 0.00 0.00 1/{running} {}", running))
}

/// `/proc/meminfo`: Linux 6.1's keys in its order for Debian's arm64 configuration (zswap,
/// memory-failure, CMA, transparent and hugetlb huge pages), each `Key:` padded to 16 columns
/// and its number to 8. The RAM file systems' pages are the page cache (`Cached`, `Shmem`,
/// as tmpfs's are), counted as used memory; the rest of what is used is anonymous memory.
fn meminfo() -> Result<Vec<u8>, Errno> {
    let (used, total) = crate::memory::frames::usage();
    let page_kib = mm::addr::PAGE_SIZE / 1024;
    let kib = |frames: u64| frames * page_kib;
    let free = total.saturating_sub(used) as u64;
    let (budget, budget_free) = crate::fs::pagecache::space();
    let cached = budget - budget_free;
    let anon = (used as u64).saturating_sub(cached);
    let commit_limit = total as u64 / 2; // overcommit_ratio 50 of RAM, no swap
    text(|o| {
        let kb = |o: &mut Text, key: &str, frames: u64| meminfo_line(o, key, kib(frames), " kB");
        kb(o, "MemTotal", total as u64)?;
        kb(o, "MemFree", free)?;
        kb(o, "MemAvailable", free + cached)?;
        kb(o, "Buffers", 0)?;
        kb(o, "Cached", cached)?;
        kb(o, "SwapCached", 0)?;
        kb(o, "Active", anon)?;
        kb(o, "Inactive", cached)?;
        kb(o, "Active(anon)", anon)?;
        kb(o, "Inactive(anon)", cached)?;
        kb(o, "Active(file)", 0)?;
        kb(o, "Inactive(file)", 0)?;
        kb(o, "Unevictable", 0)?;
        kb(o, "Mlocked", 0)?;
        kb(o, "SwapTotal", 0)?;
        kb(o, "SwapFree", 0)?;
        kb(o, "Zswap", 0)?;
        kb(o, "Zswapped", 0)?;
        kb(o, "Dirty", 0)?;
        kb(o, "Writeback", 0)?;
        kb(o, "AnonPages", anon)?;
        kb(o, "Mapped", 0)?;
        kb(o, "Shmem", cached)?;
        kb(o, "KReclaimable", 0)?;
        kb(o, "Slab", 0)?;
        kb(o, "SReclaimable", 0)?;
        kb(o, "SUnreclaim", 0)?;
        kb(o, "KernelStack", 0)?;
        kb(o, "PageTables", 0)?;
        kb(o, "NFS_Unstable", 0)?;
        kb(o, "Bounce", 0)?;
        kb(o, "WritebackTmp", 0)?;
        kb(o, "CommitLimit", commit_limit)?;
        kb(o, "Committed_AS", anon)?;
        // arm64's VMALLOC_END - VMALLOC_START with 48-bit addresses, as Linux prints it.
        meminfo_line(o, "VmallocTotal", 133_143_592_960, " kB")?;
        kb(o, "VmallocUsed", 0)?;
        kb(o, "VmallocChunk", 0)?;
        kb(o, "Percpu", 0)?;
        kb(o, "HardwareCorrupted", 0)?;
        kb(o, "AnonHugePages", 0)?;
        kb(o, "ShmemHugePages", 0)?;
        kb(o, "ShmemPmdMapped", 0)?;
        kb(o, "FileHugePages", 0)?;
        kb(o, "FilePmdMapped", 0)?;
        kb(o, "CmaTotal", 0)?;
        kb(o, "CmaFree", 0)?;
        for key in ["HugePages_Total", "HugePages_Free", "HugePages_Rsvd", "HugePages_Surp"] {
            meminfo_line(o, key, 0, "")?;
        }
        kb(o, "Hugepagesize", 512)?;
        kb(o, "Hugetlb", 0)
    })
}

/// One line of `/proc/meminfo`: `key:` padded to 16 columns, the value to 8, then `unit`.
fn meminfo_line(o: &mut Text, key: &str, value: u64, unit: &str) -> core::fmt::Result {
    write!(o, "{key}:")?;
    for _ in key.len() + 1..16 {
        o.write_str(" ")?;
    }
    writeln!(o, "{value:>8}{unit}")
}

/// `/proc/stat`: the CPU times in clock ticks (100 a second), each CPU's then their sum, as
/// Linux lists them; the time the processes ran is user time (every process's, shared evenly
/// among the CPUs), the rest of the time since boot idle. The counts this kernel does not keep
/// (interrupts, context switches, soft interrupts) are 0.
fn stat() -> Result<Vec<u8>, Errno> {
    let n = crate::cpu::ONLINE.load(core::sync::atomic::Ordering::Acquire).max(1) as u64;
    let boot = crate::wallclock::realtime_offset_ns() / 1_000_000_000;
    let up = crate::wallclock::monotonic_ns() / 10_000_000;
    let mut busy_us = 0u64;
    crate::process::family::for_each_process(|p| {
        busy_us += crate::arch::time::ticks_to_us(crate::process::cpu_ticks(p));
    });
    let user = (busy_us / 10_000).min(up * n);
    let idle = up * n - user;
    text(|o| {
        writeln!(o, "cpu  {user} 0 0 {idle} 0 0 0 0 0 0")?;
        for cpu in 0..n {
            writeln!(o, "cpu{cpu} {} 0 0 {} 0 0 0 0 0 0", user / n, idle / n)?;
        }
        writeln!(o, "intr 0")?;
        writeln!(o, "ctxt 0")?;
        writeln!(o, "btime {boot}")?;
        writeln!(o, "processes {}", crate::process::family::listed())?;
        writeln!(o, "procs_running 1")?;
        writeln!(o, "procs_blocked 0")?;
        writeln!(o, "softirq 0 0 0 0 0 0 0 0 0 0 0")
    })
}

fn uptime() -> Result<Vec<u8>, Errno> {
    let ns = crate::wallclock::monotonic_ns();
    let cs = ns / 10_000_000;
    text(|o| writeln!(o, "{}.{:02} {}.{:02}", cs / 100, cs % 100, cs / 100, cs % 100))
}

fn version() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "Linux version {} (arm64 kernel in Rust) #1 SMP", crate::process::posix::RELEASE))
}

fn osrelease() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "{}", crate::process::posix::RELEASE))
}

fn ostype() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "Linux"))
}

fn hostname() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "(none)"))
}

fn pid_max() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "32768"))
}

fn pipe_max_size() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "{}", crate::fs::pipe::PIPE_MAX_SIZE))
}

fn randomize_va_space() -> Result<Vec<u8>, Errno> {
    text(|o| {
        writeln!(
            o,
            "{}",
            crate::process::aslr::RANDOMIZE_VA_SPACE.load(core::sync::atomic::Ordering::Relaxed)
        )
    })
}

fn mmap_rnd_bits() -> Result<Vec<u8>, Errno> {
    text(|o| {
        writeln!(o, "{}", crate::process::aslr::MMAP_RND_BITS.load(core::sync::atomic::Ordering::Relaxed))
    })
}

fn max_map_count() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "{}", mm::vm::Layout::linux(0).max_map_count))
}

fn mmap_min_addr() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "{}", crate::process::MMAP_MIN_ADDR))
}

fn overcommit_memory() -> Result<Vec<u8>, Errno> {
    text(|o| writeln!(o, "0"))
}

fn boot_id() -> Result<Vec<u8>, Errno> {
    static ID: spin::Once<[u8; 16]> = spin::Once::new();
    let id = ID.call_once(|| {
        let mut b = [0u8; 16];
        crate::random::fill(&mut b);
        b[6] = (b[6] & 0x0f) | 0x40;
        b[8] = (b[8] & 0x3f) | 0x80;
        b
    });
    text(|o| {
        for (i, b) in id.iter().enumerate() {
            if matches!(i, 4 | 6 | 8 | 10) {
                o.write_str("-")?;
            }
            write!(o, "{b:02x}")?;
        }
        writeln!(o)
    })
}

/// `/proc/mounts` (and `/proc/PID/mounts`): one line per mount, `source point type options 0 0`.
///
/// # Errors
/// `ENOMEM`.
pub fn mounts() -> Result<Vec<u8>, Errno> {
    let mut out = Text::default();
    let mut r = Ok(());
    crate::fs::namespace::for_each_mount(&mut |m| {
        if r.is_ok() {
            let path = core::str::from_utf8(&m.path).unwrap_or("?");
            r = writeln!(out, "{} {} {} {} 0 0", m.source, path, m.fstype, m.options);
        }
    });
    out.done(r)
}
