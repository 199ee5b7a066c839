//! `execve` of a program from the file tree, as Linux's fs/exec.c (`do_execveat_common`,
//! `bprm_stack_limits`, `copy_strings`, `begin_new_exec`) does it, in its order: the path
//! (`EFAULT`, `ENAMETOOLONG`, `ENOENT` for an empty one), the file (`ENOENT`, `EACCES` for one
//! that is not a regular file, `ELOOP`), then the argument and environment strings (`EFAULT`;
//! `E2BIG` for one string above 32 pages or all of them, with their pointers, above a quarter
//! of `RLIMIT_STACK`), then the format (`ENOEXEC`).
//!
//! The new memory is built completely (segments, stack, strings) before the old one is touched,
//! so every failure up to there, `ENOMEM` included, returns to the old program unchanged. Then
//! the process switches TTBR0 to the new address space (with an ASID of its own) and drops its
//! reference to the old one, which is torn down (its ASID invalidated everywhere first) unless a
//! vfork parent still runs on it; handled signals return to their defaults, close-on-exec
//! descriptors close, and a vfork parent runs on.
pub mod elf;
pub mod image;
pub mod load;
pub mod stack;
pub mod tiny_elf;

use alloc::vec::Vec;
use core::sync::atomic::Ordering;

use mm::addr::PAGE_SIZE;
use mm::paging::{PageTable, VaRange};
use mm::tlb::TlbIssuer;
use mm::tlb::issue::Aarch64Tlb;
use spin::Mutex;

use super::{Action, Mm, Thread};
use crate::arch::aarch64::exception::{FpState, TrapFrame};
use crate::arch::aarch64::user::PSTATE_EL0;
use crate::memory::asids::AsidTargets;
use crate::memory::kernel_map::FrameTranslation;
use crate::memory::uaccess::copy_in;
use crate::memory::{fallible, frames, tlb};
use linux_abi::Errno;

/// Too many levels of symbolic links.
/// Linux's `MAX_ARG_STRLEN`: one argument or environment string, its NUL included.
const MAX_ARG_STRLEN: usize = 32 * PAGE_SIZE as usize;

fn done(frame: &mut TrapFrame, result: Result<u64, Errno>) -> Action {
    Action::reply(frame, result)
}

/// The strings of a `char *const []` vector: all bytes (each string with its NUL) and where each
/// starts.
struct Strings {
    bytes: Vec<u8>,
    starts: Vec<usize>,
}

impl Strings {
    fn get(&self, i: usize) -> &[u8] {
        let end = self.starts.get(i + 1).copied().unwrap_or(self.bytes.len());
        &self.bytes[self.starts[i]..end - 1]
    }

    /// Each string, without its NUL (`ENOMEM` when the heap cannot hold the list).
    fn slices(&self) -> Result<Vec<&[u8]>, mm::vm::Errno> {
        let mut out = Vec::new();
        fallible::reserve(&mut out, self.starts.len())?;
        out.extend((0..self.starts.len()).map(|i| self.get(i)));
        Ok(out)
    }
}

/// Copies the vector at `vector` (0: empty) into `out`, with `budget` bytes left for strings
/// and pointers (each pointer costs 8, as in Linux's accounting).
fn copy_vector(vector: u64, out: &mut Strings, budget: &mut usize) -> Result<(), Errno> {
    if vector == 0 {
        return Ok(());
    }
    let mut i = 0u64;
    loop {
        let mut word = [0u8; 8];
        copy_in(&mut word, vector.wrapping_add(i * 8)).map_err(|_| Errno::EFAULT)?;
        let s = u64::from_le_bytes(word);
        if s == 0 {
            return Ok(());
        }
        *budget = budget.checked_sub(8).ok_or(Errno::E2BIG)?;
        out.starts.try_reserve(1).map_err(|_| Errno::ENOMEM)?;
        out.starts.push(out.bytes.len());
        copy_string(s, out, budget)?;
        i += 1;
    }
}

/// Copies one NUL-terminated string (a page at a time: never past the page holding its end).
fn copy_string(at: u64, out: &mut Strings, budget: &mut usize) -> Result<(), Errno> {
    let mut len = 0usize;
    let mut chunk = [0u8; 256];
    loop {
        let addr = at.wrapping_add(len as u64);
        let room = (PAGE_SIZE - (addr & (PAGE_SIZE - 1))).min(chunk.len() as u64) as usize;
        copy_in(&mut chunk[..room], addr).map_err(|_| Errno::EFAULT)?;
        let nul = chunk[..room].iter().position(|&b| b == 0);
        let take = nul.map_or(room, |n| n + 1);
        if len + take > MAX_ARG_STRLEN {
            return Err(Errno::E2BIG);
        }
        *budget = budget.checked_sub(take).ok_or(Errno::E2BIG)?;
        out.bytes.try_reserve(take).map_err(|_| Errno::ENOMEM)?;
        out.bytes.extend_from_slice(&chunk[..take]);
        len += take;
        if nul.is_some() {
            return Ok(());
        }
    }
}

/// `execve(path, argv, envp)`: [`execveat`] from the working directory.
pub fn execve(thread: &mut Thread, frame: &mut TrapFrame, path: u64, argv: u64, envp: u64) -> Action {
    execveat(thread, frame, linux_abi::fcntl::AT_FDCWD as u32 as u64, path, argv, envp, 0)
}

/// The largest program file `execve` reads: a quarter of RAM (the file is read whole for its
/// headers; its segments are then mapped from its page cache).
pub fn max_program() -> u64 {
    (frames::usage().1 as u64 * PAGE_SIZE) / 4
}

/// Interpreters a `#!` script may chain through (Linux's binfmt recursion limit).
const MAX_INTERPRETERS: usize = 4;
/// The bytes of a `#!` line Linux reads (`BINPRM_BUF_SIZE`).
const BINPRM_BUF_SIZE: usize = 256;

/// A program found for `execve`.
struct Program {
    /// Its bytes.
    image: crate::fs::node_file::Image,
    /// The path of its file (what `/proc/PID/exe` names).
    path: Vec<u8>,
    /// Its file.
    node: alloc::sync::Arc<dyn vfs::node::Inode>,
    /// The name it was asked by (Linux's `bprm->filename`): the path given when it is absolute
    /// or relative to the working directory, else `/dev/fd/N` or `/dev/fd/N/PATH` for one
    /// relative to descriptor N. A script's interpreter is given this name, and the process's
    /// name (`comm`) is its last component.
    filename: Vec<u8>,
    /// The name comes from a close-on-exec descriptor, which is gone once the new program runs:
    /// an interpreter could not open it (Linux's `BINPRM_FLAGS_PATH_INACCESSIBLE`).
    inaccessible: bool,
    /// Its file held against writers from the moment it is found (Linux's `deny_write_access`
    /// in `do_open_execat`); the process keeps it while it runs this program.
    deny_write: Option<crate::fs::pagecache::DenyWrite>,
}

/// How much of a program `execve` reads first: its headers, in the first page of every program
/// a linker makes (more is read when they are not: [`Program::parse`]).
const HEAD_BYTES: u64 = 4096;

impl Program {
    /// `parse` of the file's bytes read so far, read again up to where it asks
    /// ([`::elf::Refusal::BeyondHead`]) until it has what it needs: its answer (a refusal is the
    /// file's), or the error reading the file gave (a file that did not grow as asked:
    /// `ENOEXEC`).
    fn parse<R>(
        &mut self,
        parse: impl Fn(::elf::FileBytes<'_>) -> Result<R, ::elf::Refusal>,
    ) -> Result<Result<R, ::elf::Refusal>, Errno> {
        loop {
            let read = self.image.bytes().len() as u64;
            match parse(::elf::FileBytes::head(self.image.bytes(), self.image.size())) {
                Err(::elf::Refusal::BeyondHead { end }) if end > read => {
                    self.image = crate::fs::node_file::read_image_head(&self.node, max_program(), end)?;
                    if self.image.bytes().len() as u64 <= read {
                        return Err(Errno::ENOEXEC);
                    }
                }
                Err(::elf::Refusal::BeyondHead { .. }) => return Err(Errno::ENOEXEC),
                other => return Ok(other),
            }
        }
    }
}

/// The file `found` as the loader maps it: its bytes and its page cache.
fn file_of(found: &Program) -> load::ProgramFile<'_> {
    load::ProgramFile {
        bytes: found.image.bytes(),
        size: found.image.size(),
        cache: crate::fs::pagecache::of_node(&found.node).map(|c| c.object()),
    }
}

/// Finds the program `path` names from `dirfd` (`AT_EMPTY_PATH`: `dirfd`'s file) for `p`, in
/// Linux's order (`do_open_execat`): the walk with `p`'s credentials (`ENOENT`, `ENOTDIR`,
/// `ELOOP`, `EACCES`), a regular file (`EACCES`), execute permission (`EACCES`: for root, some
/// execute bit); then reads it.
fn find_program(p: &super::Process, dirfd: u64, path: &[u8], flags: u64) -> Result<Program, Errno> {
    use linux_abi::fcntl::{AT_EMPTY_PATH, AT_FDCWD, AT_SYMLINK_NOFOLLOW};
    use vfs::node::FileType;
    let ctx = p.posix.fs.lock().clone();
    let cred = p.posix.cred();
    let relative_to_fd = dirfd as i32 != AT_FDCWD && !vfs::path::is_absolute(path);
    let (node, abs) = if path.is_empty() {
        if flags & AT_EMPTY_PATH == 0 {
            return Err(Errno::ENOENT);
        }
        let f = p.posix.files.lock().file(dirfd)?;
        let node = f.file.inode().cloned().ok_or(Errno::EACCES)?;
        (node, f.file.describe()?)
    } else {
        let (start, start_path) = if vfs::path::is_absolute(path) {
            (ctx.root.clone(), crate::fs::copy_bytes(b"/")?)
        } else if dirfd as i32 == AT_FDCWD {
            (ctx.cwd.clone(), crate::fs::copy_bytes(&ctx.cwd_path)?)
        } else {
            let f = p.posix.files.lock().file(dirfd)?;
            (f.file.inode().cloned().ok_or(Errno::ENOTDIR)?, f.file.describe()?)
        };
        let walk = crate::fs::namespace::Walk { ctx: &ctx, cred: &cred, restrict: Default::default() };
        let node = walk.lookup(&start, path, flags & AT_SYMLINK_NOFOLLOW == 0)?;
        (node, crate::fs::namespace::absolute(&start_path, path)?)
    };
    let m = node.metadata();
    match m.kind {
        FileType::Regular => {}
        FileType::Symlink => return Err(Errno::ELOOP),
        _ => return Err(Errno::EACCES),
    }
    cred.permission(&m, crate::fs::cred::may::EXEC)?;
    // A file open for writing is not run (its page cache becomes the program's text).
    let deny_write = crate::fs::pagecache::of_node(&node).map(|c| c.deny_write_access()).transpose()?;
    let (filename, inaccessible) = if relative_to_fd {
        let cloexec = p.posix.files.lock().get(dirfd).is_some_and(|e| e.cloexec);
        let mut name = Vec::new();
        if path.is_empty() {
            crate::fs::file::push_fmt(&mut name, format_args!("/dev/fd/{}", dirfd as i32))?;
        } else {
            crate::fs::file::push_fmt(&mut name, format_args!("/dev/fd/{}/", dirfd as i32))?;
            name.try_reserve(path.len()).map_err(|_| Errno::ENOMEM)?;
            name.extend_from_slice(path);
        }
        (name, cloexec)
    } else {
        (crate::fs::copy_bytes(path)?, false)
    };
    // The largest program this kernel loads: a quarter of RAM. Only its headers are read when
    // its page cache maps it (`Program::parse`); all of it otherwise, to be copied.
    let want = if crate::fs::pagecache::of_node(&node).is_some() { HEAD_BYTES } else { u64::MAX };
    let image = crate::fs::node_file::read_image_head(&node, max_program(), want)?;
    Ok(Program { image, path: abs, node, filename, inaccessible, deny_write })
}

/// A `#!` line: the interpreter and its one optional argument (Linux's `load_script`: the first
/// line, at most 256 bytes, blanks around both trimmed). `None` if `bytes` is no script.
fn shebang(bytes: &[u8]) -> Option<(&[u8], Option<&[u8]>)> {
    let line = bytes.strip_prefix(b"#!")?;
    let line = &line[..line.len().min(BINPRM_BUF_SIZE - 2)];
    let end = line.iter().position(|&b| b == b'\n').unwrap_or(line.len());
    let line = &line[..end];
    let blank = |b: &u8| *b == b' ' || *b == b'\t';
    let start = line.iter().position(|b| !blank(b))?;
    let line = &line[start..];
    let interp_end = line.iter().position(blank).unwrap_or(line.len());
    let interp = &line[..interp_end];
    let rest = &line[interp_end..];
    let arg = rest.iter().position(|b| !blank(b)).map(|s| {
        let a = &rest[s..];
        let e = a.iter().rposition(|b| !blank(b)).map_or(0, |e| e + 1);
        &a[..e]
    });
    Some((interp, arg.filter(|a| !a.is_empty())))
}

/// `execveat(dirfd, path, argv, envp, flags)` (`AT_EMPTY_PATH`, `AT_SYMLINK_NOFOLLOW`).
pub fn execveat(
    thread: &mut Thread,
    frame: &mut TrapFrame,
    dirfd: u64,
    path: u64,
    argv: u64,
    envp: u64,
    flags: u64,
) -> Action {
    use linux_abi::fcntl::{AT_EMPTY_PATH, AT_SYMLINK_NOFOLLOW};
    let p = thread.process.clone();
    if flags & !(AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) != 0 {
        return done(frame, Err(Errno::EINVAL));
    }
    let path = match crate::memory::uaccess::read_path(path) {
        Ok(path) => path,
        Err(e) => return done(frame, Err(e)),
    };
    let mut program = match find_program(&p, dirfd, &path, flags) {
        Ok(found) => found,
        Err(e) => return done(frame, Err(e)),
    };
    // The name the process takes (`comm`): the last component of the name it was asked by, a
    // script's own rather than its interpreter's, as Linux's `bprm->filename`.
    let name_path = match crate::fs::copy_bytes(&program.filename) {
        Ok(n) => n,
        Err(e) => return done(frame, Err(e)),
    };
    // Linux's bprm_stack_limits: a quarter of the stack limit (at most 3/4 of 8 MiB's quarter
    // times 3, at least ARG_MAX's 128 KiB) for the strings and their pointers.
    let stack = p.rlimits.lock().get(mm::vm::limits::resource::RLIMIT_STACK).cur;
    let mut budget = (stack / 4).clamp(128 << 10, 6 << 20) as usize;
    let mut args = Strings { bytes: Vec::new(), starts: Vec::new() };
    let mut env = Strings { bytes: Vec::new(), starts: Vec::new() };
    if let Err(e) =
        copy_vector(argv, &mut args, &mut budget).and_then(|()| copy_vector(envp, &mut env, &mut budget))
    {
        return done(frame, Err(e));
    }
    if args.starts.is_empty() {
        // Linux 5.18+: an empty argv gets "" as argv[0].
        if fallible::push(&mut args.starts, 0).and_then(|()| fallible::push(&mut args.bytes, 0)).is_err() {
            return done(frame, Err(Errno::ENOMEM));
        }
    }
    // `#!` scripts: the interpreter runs with [interpreter, its argument, the file's path,
    // argv[1..]], as Linux's binfmt_script; an interpreter that is a script itself puts its own
    // words in front the same way, up to four deep (`ELOOP` past that).
    let mut prefix: Vec<Vec<u8>> = Vec::new();
    let mut filename = match crate::fs::copy_bytes(&name_path) {
        Ok(f) => f,
        Err(e) => return done(frame, Err(e)),
    };
    for depth in 0..=MAX_INTERPRETERS {
        let Some((interp, arg)) = shebang(program.image.bytes()) else { break };
        if depth == MAX_INTERPRETERS {
            return done(frame, Err(Errno::ELOOP));
        }
        if program.inaccessible {
            return done(frame, Err(Errno::ENOENT));
        }
        if interp.is_empty() {
            return done(frame, Err(Errno::ENOEXEC));
        }
        let next = (|| {
            let mut w: Vec<Vec<u8>> = Vec::new();
            w.try_reserve(prefix.len() + 3).map_err(|_| Errno::ENOMEM)?;
            w.push(crate::fs::copy_bytes(interp)?);
            if let Some(a) = arg {
                w.push(crate::fs::copy_bytes(a)?);
            }
            w.push(core::mem::take(&mut filename));
            w.extend(prefix.drain(..).skip(1));
            Ok::<_, Errno>(w)
        })();
        prefix = match next {
            Ok(w) => w,
            Err(e) => return done(frame, Err(e)),
        };
        filename = match crate::fs::copy_bytes(&prefix[0]) {
            Ok(f) => f,
            Err(e) => return done(frame, Err(e)),
        };
        program = match find_program(&p, linux_abi::fcntl::AT_FDCWD as u32 as u64, &filename, 0) {
            Ok(found) => found,
            Err(e) => return done(frame, Err(e)),
        };
    }
    // This exec's layout (random unless turned off), the PIE base needed to parse.
    let draws = super::aslr::draw(p.posix.personality.load(Ordering::Acquire), stack);
    let exe = match program.parse(|f| crate::process::exec::elf::parse_placed(f, draws.pie_base(f))) {
        Ok(Ok(exe)) => exe,
        Ok(Err(::elf::Refusal::OutOfMemory)) => return done(frame, Err(Errno::ENOMEM)),
        Ok(Err(_)) => return done(frame, Err(Errno::ENOEXEC)),
        Err(e) => return done(frame, Err(e)),
    };
    // A dynamically linked program: its interpreter, found as the program is (Linux's
    // `open_exec` of the PT_INTERP path, from the caller's root and working directory), with
    // as much of it read as its headers need (the loader parses them where it places it).
    let interp = match exe.interp_path(program.image.bytes()) {
        None => None,
        Some(path) => match find_program(&p, linux_abi::fcntl::AT_FDCWD as u32 as u64, path, 0) {
            Ok(mut found) => match found.parse(|f| crate::process::exec::elf::parse_interpreter(f, 0)) {
                Ok(_) => Some(found),
                Err(e) => return done(frame, Err(e)),
            },
            Err(e) => return done(frame, Err(e)),
        },
    };
    if p.threads.load(Ordering::Acquire) > 1 {
        // Linux ends the other threads first (de_thread); not done here.
        return done(frame, Err(Errno::EAGAIN));
    }
    let (Ok(given_argv), Ok(envp)) = (args.slices(), env.slices()) else {
        return done(frame, Err(Errno::ENOMEM));
    };
    // A script's interpreter gets the prefix words, then argv without its first word.
    let mut argv: Vec<&[u8]> = Vec::new();
    if argv.try_reserve(prefix.len() + given_argv.len()).is_err() {
        return done(frame, Err(Errno::ENOMEM));
    }
    if prefix.is_empty() {
        argv.extend(given_argv.iter().copied());
    } else {
        argv.extend(prefix.iter().map(Vec::as_slice));
        argv.extend(given_argv.iter().skip(1).copied());
    }
    let Ok(asid) = fallible::arc(Mutex::new(mm::asid::AsidContext::new())) else {
        return done(frame, Err(Errno::ENOMEM));
    };
    let Ok(table) = PageTable::new(FrameTranslation, VaRange::Lower) else {
        return done(frame, Err(Errno::ENOMEM));
    };
    let features = tlb::features();
    let brk_start =
        exe.segments.iter().map(|s| (s.vaddr + s.memsz).next_multiple_of(PAGE_SIZE)).max().unwrap_or(0);
    let layout = super::layout(brk_start, draws.mmap_base);
    let targets = AsidTargets::new(asid.clone());
    let mm = Mm::new(
        table,
        TlbIssuer::new(Aarch64Tlb, features.errata),
        features,
        targets,
        frames::UserFrames,
        layout,
    );
    // An address space from here on: dropping it on a failure frees the memory.
    let Ok(space) = super::Vmspace::new(mm, asid) else { return done(frame, Err(Errno::ENOMEM)) };
    let loaded = {
        let mut mm = space.lock();
        let c = p.posix.cred();
        let ids = load::Ids { uid: c.uid, euid: c.euid, gid: c.gid, egid: c.egid };
        let Ok(loaded) = super::load(
            &mut mm,
            &draws,
            &exe,
            file_of(&program),
            interp.as_ref().map(file_of),
            ids,
            &argv,
            &envp,
        ) else {
            return done(frame, Err(Errno::ENOMEM));
        };
        use mm::vm::limits::resource::{RLIMIT_AS, RLIMIT_DATA, RLIMIT_STACK};
        let limits = *p.rlimits.lock();
        mm.vm_mut().set_rlimits(limits.get(RLIMIT_AS), limits.get(RLIMIT_DATA));
        mm.vm_mut().set_stack_limit(limits.get(RLIMIT_STACK));
        // MDWE outlives execve, as Linux's MMF_HAS_MDWE in MMF_INIT_MASK.
        if let Some(old) = p.space() {
            let flags = old.lock().vm().mdwe();
            if flags != 0 {
                let _ = mm.vm_mut().set_mdwe(flags);
            }
        }
        // The personality outlives execve as on Linux; its READ_IMPLIES_EXEC is the W^X opt-out.
        mm.vm_mut()
            .set_personality(u64::from(p.posix.personality.load(core::sync::atomic::Ordering::Acquire)));
        loaded
    };
    let regs = loaded.regs;
    let mut record = loaded.image;
    if let (Some(i), Some(found)) = (record.interp.as_mut(), interp) {
        i.file = Some((found.node, found.path));
    }
    let Ok(image) = fallible::arc(image::ProgramImage { file: Some(program.node.clone()), ..record }) else {
        return done(frame, Err(Errno::ENOMEM));
    };
    let Ok(cred) = p.posix.cred().after_exec().and_then(|c| fallible::arc(c).map_err(|_| Errno::ENOMEM))
    else {
        return done(frame, Err(Errno::ENOMEM));
    };
    // The point of no return: the new table goes live here with its own ASID; then the old
    // space loses this process's reference (the last one tears it down after every CPU's
    // entries of its ASID are gone; a vfork parent may still run on it).
    crate::memory::vmspace::switch_to(space.clone(), crate::cpu::current_cpu());
    drop(p.replace_space(space));
    p.signals.exec_reset();
    p.posix.files.lock().close_on_exec();
    thread.posix.name = super::posix::name_from_path(core::str::from_utf8(&name_path).unwrap_or(""));
    p.posix.set_exe(&program.path);
    p.posix.set_image(image, program.deny_write.take());
    thread.posix.robust_list = 0;
    // New keys for the new program (Linux's `ptrauth_thread_init_user`), in the registers before
    // the return to EL0.
    thread.pac = super::fresh_pac_keys();
    thread.pac.install();
    thread.mte = Default::default();
    thread.mte.install();
    thread.posix.rseq = None;
    p.posix.exec_reset(cred);
    thread.clear_child_tid = 0;
    {
        use aarch64_cpu::registers::{TPIDR_EL0, Writeable};
        TPIDR_EL0.set(0);
        thread.tpidr = 0;
    }
    super::family::release_vfork(&p);
    frame.x = [0; 31];
    frame.sp_el0 = regs.sp;
    frame.elr = regs.pc;
    frame.spsr = PSTATE_EL0;
    // SAFETY: `frame` comes from the EL0 exception entry being handled (FpState::below's rule); the
    // exit path reloads the registers from there.
    unsafe { *FpState::below(frame) = FpState::ZERO };
    Action::Continue
}
