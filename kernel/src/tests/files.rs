//! Exhaustion of the file layer: a program that fills `/tmp` until `ENOSPC`, and one that opens
//! descriptors until `EMFILE`, each dying with what it holds. Everything must come back: every
//! frame once the full file is removed (the RAM file systems' budget back to where it was),
//! every descriptor (the node they were open on is held by nobody else), and the process.
//! The programs are tiny ELF files assembled here, so each says exactly what it does.
use alloc::sync::Arc;
use alloc::vec::Vec;

use linux_abi::Errno;
use linux_abi::nr;

use crate::fs::namespace::{self, FsContext};
use crate::process::exec::tiny_elf::{BASE, EXIT_GROUP, HEADERS, SVC, mov, tiny_elf};
use crate::process::{self, STATUS_SEGV};
use crate::{ensure, ensure_eq, kernel_test};

/// `tbnz x0, #63, +offset` (a negative result, an errno, jumps `offset` instructions ahead).
fn tbnz_x0_negative(offset: i32) -> u32 {
    0x8000_0000 | 0x3700_0000 | (31 << 19) | (((offset as u32) & 0x3fff) << 5)
}

/// `b offset` (instructions, back or forth).
fn branch(offset: i32) -> u32 {
    0x1400_0000 | ((offset as u32) & 0x03ff_ffff)
}

/// `neg x0, x0`.
const NEG_X0: u32 = 0xcb00_03e0;

/// A program that calls `setup` once (its result in x19), then `body` until the call fails,
/// and exits with the errno it failed with. `path` (NUL added) is placed after the code; the
/// calls find its address in x20.
fn until_error(setup: &[u32], body: &[u32], path: &[u8]) -> Vec<u8> {
    // x20 = the path's address, known once the code's length is.
    let prologue_len = 4;
    let len = prologue_len + setup.len() + body.len() + 3 + 1 + 4 + 1;
    let path_at = BASE + HEADERS + 4 * len as u64;
    let mut code = Vec::from(mov(20, path_at));
    code.extend_from_slice(setup);
    let top = code.len();
    code.extend_from_slice(body);
    // The call just made failed: leave the loop.
    code.push(tbnz_x0_negative(3));
    code.push(branch(top as i32 - code.len() as i32));
    code.push(0xd503_201f); // nop (padding: the exit starts at a known place)
    code.push(NEG_X0);
    code.extend(mov(8, EXIT_GROUP));
    code.push(SVC);
    // (The exit is where `path_at` assumed the code ends.)
    let mut bytes: Vec<u8> = path.to_vec();
    bytes.push(0);
    while !bytes.len().is_multiple_of(4) {
        bytes.push(0);
    }
    code.extend(bytes.chunks(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])));
    tiny_elf(&code)
}

/// `openat(AT_FDCWD, x20, flags, mode)`, its result in x0.
fn openat_x20(flags: u64, mode: u64) -> Vec<u32> {
    let mut code = Vec::from(mov(0, (-100i64) as u64));
    code.extend([0xaa14_03e1]); // mov x1, x20
    code.extend(mov(2, flags));
    code.extend(mov(3, mode));
    code.extend(mov(8, nr::OPENAT));
    code.push(SVC);
    code
}

/// The node `path` names now.
fn node(path: &str) -> Result<Arc<dyn vfs::node::Inode>, alloc::string::String> {
    let ctx = FsContext::first().map_err(|e| alloc::format!("no tree: {e:?}"))?;
    namespace::lookup(&ctx, &ctx.root, path.as_bytes(), true).map_err(|e| alloc::format!("{path}: {e:?}"))
}

/// The exit status of an [`until_error`] program that failed with `e` (the errno, positive).
fn errno_status(e: Errno) -> u64 {
    e.as_ret().unsigned_abs() & 0xff
}

kernel_test!(
    fn a_program_that_fills_tmp_until_enospc_gets_every_page_back_once_the_file_goes() {
        let (budget, free_before) = crate::fs::pagecache::space();
        ensure!(
            free_before > 1024,
            "the RAM file systems have room to start with: {free_before} of {budget}"
        );
        let before = super::frames_in_use();
        // fd = openat("/tmp/fill", O_WRONLY|O_CREAT, 0600); then write(fd, BASE, 4096) until it
        // fails (the program's own first page is the data).
        let mut setup = openat_x20(0o101, 0o600);
        setup.extend([0xaa00_03f3]); // mov x19, x0
        let mut body = Vec::from([0xaa13_03e0]); // mov x0, x19
        body.extend(mov(1, BASE));
        body.extend(mov(2, 4096));
        body.extend(mov(8, nr::WRITE));
        body.push(SVC);
        let status = process::run(&until_error(&setup, &body, b"/tmp/fill"), &["fill"])?;
        ensure_eq!(status, errno_status(Errno::ENOSPC), "the writes end with ENOSPC");
        let (_, free_full) = crate::fs::pagecache::space();
        ensure_eq!(free_full, 0, "the budget is used up");
        let file = node("/tmp/fill")?;
        ensure_eq!(
            file.metadata().size,
            (free_before) * mm::addr::PAGE_SIZE,
            "every page of the budget went to the file"
        );
        // The process is gone; its descriptor is closed: the file's node is the tree's and ours.
        ensure_eq!(process::family::listed(), 0);
        let tmp = node("/tmp")?;
        tmp.unlink(b"fill", false, crate::fs::node_file::now())
            .map_err(|e| alloc::format!("unlink: {e:?}"))?;
        ensure_eq!(Arc::strong_count(&file), 1, "nothing but this test holds the removed file");
        drop(file);
        ensure_eq!(crate::fs::pagecache::space().1, free_before, "the budget is back");
        ensure_eq!(super::frames_in_use(), before, "every frame is back");
        Ok(())
    }
);

kernel_test!(
    fn a_program_that_dies_holding_every_descriptor_it_may_have_gives_them_back() {
        let null = node("/dev/null")?;
        let held = Arc::strong_count(&null);
        let before = super::frames_in_use();
        // openat("/dev/null", O_RDONLY) until it fails: EMFILE at the 1024th descriptor; the
        // program exits holding all of them.
        let status = process::run(&until_error(&[], &openat_x20(0, 0), b"/dev/null"), &["emfile"])?;
        ensure_eq!(status, errno_status(Errno::EMFILE), "the opens end with EMFILE");
        ensure_eq!(process::family::listed(), 0);
        ensure_eq!(Arc::strong_count(&null), held, "every description of /dev/null is gone");
        ensure_eq!(super::frames_in_use(), before, "every frame is back");
        Ok(())
    }
);

kernel_test!(
    fn a_program_that_faults_holding_a_file_and_a_pipe_gives_them_back() {
        let before = super::frames_in_use();
        // openat("/tmp/held", O_RDWR|O_CREAT, 0600); pipe2; write 4096 bytes into the pipe;
        // then a null dereference: SIGSEGV with everything open.
        let mut body = openat_x20(0o102, 0o600);
        body.push(0xd100_43ff); // sub sp, sp, #16 (room for the pipe's two descriptors)
        body.push(0x9100_03e0); // mov x0, sp
        body.extend(mov(1, 0));
        body.extend(mov(8, nr::PIPE2));
        body.push(SVC);
        body.push(0xb940_07e0); // ldr w0, [sp, #4]: the write end
        body.extend(mov(1, BASE));
        body.extend(mov(2, 4096));
        body.extend(mov(8, nr::WRITE));
        body.push(SVC);
        body.extend(mov(0, 0));
        body.push(0xf940_0001); // ldr x1, [x0]: SIGSEGV
        let path_at = BASE + HEADERS + 4 * (4 + body.len()) as u64;
        let mut code = Vec::from(mov(20, path_at));
        code.extend(body);
        let mut path = b"/tmp/held".to_vec();
        path.resize(12, 0);
        code.extend(path.chunks(4).map(|w| u32::from_le_bytes([w[0], w[1], w[2], w[3]])));
        ensure_eq!(process::run(&tiny_elf(&code), &["held"])?, STATUS_SEGV);
        ensure_eq!(process::family::listed(), 0);
        let file = node("/tmp/held")?;
        node("/tmp")?
            .unlink(b"held", false, crate::fs::node_file::now())
            .map_err(|e| alloc::format!("{e:?}"))?;
        ensure_eq!(Arc::strong_count(&file), 1, "the dead program's descriptor of the file is gone");
        drop(file);
        ensure_eq!(super::frames_in_use(), before, "every frame (the pipe's buffer, the file's) is back");
        Ok(())
    }
);
