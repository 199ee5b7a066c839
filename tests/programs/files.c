// files-test: files, directories and the special file systems as an unmodified static glibc
// program sees them on Linux 6.1, with the errno Linux gives for each refusal (and, where a path
// has several faults, the one Linux reports first): openat and openat2, close and close_range,
// the read/write family and lseek (SEEK_DATA/SEEK_HOLE), directories read with readdir,
// newfstatat/fstat/statx, faccessat/faccessat2, readlinkat, mkdirat, mknodat (FIFOs),
// unlinkat, renameat2, linkat, symlinkat (the 40-link limit, ENAMETOOLONG, `..` at /, trailing
// slashes), truncate/fallocate, chmod/chown/utimensat, the working directory, umask, fcntl
// (descriptors, record locks between processes, OFD locks), ioctl, flock, the sync family,
// statfs, sendfile/copy_file_range/splice/tee, a memfd as a file, `#!` scripts and execveat,
// RLIMIT_NOFILE, /dev's devices, /tmp, /proc (self, the system files, /proc/sys) and /sys, and
// the kernel log (syslog(2), /dev/kmsg). Permission checks run as uid 1000 in a child.
// Output is deterministic: numbers that differ between kernels (inode numbers, times, pids,
// addresses) are compared, never printed. Each case runs in a child process of its own
// (check.h's run_cases_apart) and works in /tmp/files-CASE; the case prints "ok - NAME" or
// "FAIL - NAME", the last line is "N passed, N failed"; the output is Linux 6.1's
// (tests/linux-parity/files-test.out). Built by scripts/lib.sh (build_linux_programs).
#define _GNU_SOURCE
#include <dirent.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/falloc.h>
#include <linux/magic.h>
#include <linux/openat2.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <grp.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/ioctl.h>
#include <sys/klog.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>

#include "check.h"

static const char *self_path = "/files-test";
static int self_argc;
static char **self_argv;
static char *start_environ; // /proc/self/environ's expected text, captured before any change
static size_t start_environ_len;

// ---- helpers -------------------------------------------------------------------------------------

// enter: a fresh, empty directory /tmp/files-NAME as the working directory of the case.
static int enter(const char *name) {
    char path[128];
    snprintf(path, sizeof path, "/tmp/files-%s", name);
    if (mkdir(path, 0755) != 0 || chdir(path) != 0) {
        printf("    cannot make and enter %s: %s\n", path, strerrorname_np(errno));
        return -1;
    }
    return 0;
}
#define ENTER(name) CHECK(enter(name) == 0, "no working directory")

static int put(const char *path, const char *text, mode_t mode) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, mode);
    if (fd < 0) return -1;
    ssize_t n = write(fd, text, strlen(text));
    close(fd);
    return n == (ssize_t)strlen(text) ? 0 : -1;
}

// get: the whole file (up to size - 1 bytes, NUL-terminated); its length, or -1.
static ssize_t get(const char *path, char *buf, size_t size) {
    int fd = open(path, O_RDONLY);
    if (fd < 0) return -1;
    size_t got = 0;
    for (;;) {
        ssize_t n = read(fd, buf + got, size - 1 - got);
        if (n < 0) {
            close(fd);
            return -1;
        }
        if (n == 0 || got + n == size - 1) {
            got += n;
            break;
        }
        got += n;
    }
    close(fd);
    buf[got] = 0;
    return (ssize_t)got;
}

static mode_t mode_of(const char *path) {
    struct stat st;
    return lstat(path, &st) == 0 ? st.st_mode : 0;
}

static int64_t ns_of(struct timespec t) { return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec; }

// lines_with: how many lines of TEXT begin with PREFIX.
static int lines_with(const char *text, const char *prefix) {
    int n = 0;
    size_t len = strlen(prefix);
    for (const char *l = text; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        n += strncmp(l, prefix, len) == 0;
    return n;
}

// keys_in_order: whether the "Key:" lines of TEXT include KEYS (a NULL-ended list) in that order.
static const char *keys_in_order(const char *text, const char *const *keys) {
    const char *at = text;
    for (; *keys; keys++) {
        char want[64];
        snprintf(want, sizeof want, "\n%s:", *keys);
        const char *hit = strncmp(text, want + 1, strlen(want + 1)) == 0 && at == text ? text : strstr(at, want);
        if (!hit) return *keys;
        at = hit + 1;
    }
    return NULL;
}

// run_childat: runs PATH with ARGV in a child (execve when DIRFD is -1, else
// execveat(DIRFD, PATH, ARGV, envp, FLAGS)) with its stdout into OUT; returns the wait status. A
// child whose exec failed exits with 100 + errno. run_child: the same with execve.
static int run_childat(int dirfd, const char *path, char *const argv[], int flags, char *out, size_t size) {
    int p[2];
    if (pipe(p) != 0) return -1;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        char *envp[] = {"PATH=/", NULL};
        if (dirfd == -1)
            execve(path, argv, envp);
        else
            syscall(SYS_execveat, dirfd, path, argv, envp, flags);
        _exit(100 + errno);
    }
    close(p[1]);
    size_t got = 0;
    ssize_t n;
    while (got < size - 1 && (n = read(p[0], out + got, size - 1 - got)) > 0) got += n;
    out[got] = 0;
    close(p[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    return status;
}
static int run_child(const char *path, char *const argv[], char *out, size_t size) {
    return run_childat(-1, path, argv, 0, out, size);
}

// ---- open ------------------------------------------------------------------------------------------

static void test_open_flags(void) {
    ENTER("open");
    umask(022);
    int fd = openat(AT_FDCWD, "a", O_CREAT | O_EXCL | O_WRONLY | O_CLOEXEC, 0666);
    CHECK_SYS(fd);
    struct stat st;
    CHECK_SYS(fstat(fd, &st));
    CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0644 && st.st_size == 0 && st.st_nlink == 1, "mode %o", st.st_mode);
    CHECK(st.st_uid == 0 && st.st_gid == 0, "owner %d:%d", st.st_uid, st.st_gid);
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC, "O_CLOEXEC: F_GETFD %d", fcntl(fd, F_GETFD));
    CHECK((fcntl(fd, F_GETFL) & O_ACCMODE) == O_WRONLY, "F_GETFL %#x", fcntl(fd, F_GETFL));
    CHECK(write(fd, "abc", 3) == 3, "write");
    close(fd);
    CHECK_ERR(openat(AT_FDCWD, "a", O_CREAT | O_EXCL | O_RDWR, 0600), EEXIST);
    // O_APPEND: every write goes to the end, wherever the offset was.
    fd = open("a", O_WRONLY | O_APPEND);
    CHECK_SYS(fd);
    CHECK(lseek(fd, 0, SEEK_SET) == 0 && write(fd, "def", 3) == 3, "append");
    CHECK(lseek(fd, 0, SEEK_CUR) == 6, "offset after an appending write %ld", (long)lseek(fd, 0, SEEK_CUR));
    close(fd);
    char buf[64];
    CHECK(get("a", buf, sizeof buf) == 6 && strcmp(buf, "abcdef") == 0, "content %s", buf);
    // O_TRUNC truncates, even with O_RDONLY (Linux does; POSIX leaves it open).
    fd = open("a", O_RDONLY | O_TRUNC);
    CHECK_SYS(fd);
    CHECK(fstat(fd, &st) == 0 && st.st_size == 0, "O_RDONLY|O_TRUNC left %ld bytes", (long)st.st_size);
    close(fd);
    // The creation mode is masked by umask.
    umask(0);
    CHECK_SYS(close(open("b", O_CREAT | O_WRONLY, 0777)));
    CHECK((mode_of("b") & 07777) == 0777, "umask 0: %o", mode_of("b"));
    umask(077);
    CHECK_SYS(close(open("c", O_CREAT | O_WRONLY, 0666)));
    CHECK((mode_of("c") & 07777) == 0600, "umask 077: %o", mode_of("c"));
    umask(022);
    // Directories.
    CHECK_ERR(open("a", O_RDONLY | O_DIRECTORY), ENOTDIR);
    CHECK_SYS(mkdir("d", 0755));
    fd = open("d", O_RDONLY | O_DIRECTORY);
    CHECK_SYS(fd);
    close(fd);
    CHECK_ERR(open("d", O_WRONLY), EISDIR);
    CHECK_ERR(open("d", O_RDWR), EISDIR);
    CHECK_ERR(open("d", O_CREAT | O_RDONLY, 0600), EISDIR);
    CHECK_ERR(open("new/", O_CREAT | O_RDWR, 0600), EISDIR);
    // Missing and non-directory components.
    CHECK_ERR(open("missing", O_RDONLY), ENOENT);
    CHECK_ERR(open("", O_RDONLY), ENOENT);
    CHECK_ERR(open("a/x", O_RDONLY), ENOTDIR);
    CHECK_ERR(open("a/x", O_CREAT | O_RDONLY, 0600), ENOTDIR);
    CHECK_ERR(open("missing/x", O_CREAT | O_RDONLY, 0600), ENOENT);
    CHECK_ERR(open("a/", O_RDONLY), ENOTDIR);
    // Symbolic links: O_NOFOLLOW refuses one at the end, O_PATH|O_NOFOLLOW opens the link itself.
    CHECK_SYS(symlink("a", "l"));
    CHECK_ERR(open("l", O_RDONLY | O_NOFOLLOW), ELOOP);
    fd = open("l", O_PATH | O_NOFOLLOW);
    CHECK_SYS(fd);
    CHECK(fstat(fd, &st) == 0 && S_ISLNK(st.st_mode), "O_PATH of a link: mode %o", st.st_mode);
    CHECK(fcntl(fd, F_GETFL) & O_PATH, "F_GETFL %#x", fcntl(fd, F_GETFL));
    CHECK_ERR(read(fd, buf, 1), EBADF);
    CHECK_ERR(write(fd, buf, 1), EBADF);
    close(fd);
    CHECK_ERR(open("l", O_CREAT | O_EXCL | O_WRONLY, 0600), EEXIST);
    // O_CREAT through a dangling link creates its target.
    CHECK_SYS(symlink("target", "dangling"));
    CHECK_SYS(close(open("dangling", O_CREAT | O_WRONLY, 0644)));
    CHECK(S_ISREG(mode_of("target")), "the link's target was not created");
    fd = open("a", O_RDONLY | O_NONBLOCK);
    CHECK(fd >= 0 && (fcntl(fd, F_GETFL) & O_NONBLOCK), "O_NONBLOCK kept: %#x", fcntl(fd, F_GETFL));
    close(fd);
    // An O_PATH descriptor of a directory serves as openat's base.
    int dfd = open("d", O_PATH | O_DIRECTORY);
    CHECK_SYS(dfd);
    fd = openat(dfd, "inner", O_CREAT | O_WRONLY, 0644);
    CHECK_SYS(fd);
    close(fd);
    CHECK(S_ISREG(mode_of("d/inner")), "openat relative to an O_PATH directory");
    CHECK_ERR(openat(99, "inner", O_RDONLY), EBADF);
    int ffd = open("a", O_RDONLY);
    CHECK_ERR(openat(ffd, "x", O_RDONLY), ENOTDIR);
    CHECK(openat(ffd, "/tmp", O_RDONLY | O_DIRECTORY) >= 0, "an absolute path ignores the base");
}

static void test_permission_order(void) {
    ENTER("perm");
    CHECK_SYS(mkdir("private", 0700));
    CHECK_SYS(put("private/f", "x", 0644));
    CHECK_SYS(put("secret", "x", 0600));
    CHECK_SYS(put("public", "x", 0644));
    CHECK_SYS(mkdir("open", 0777));
    CHECK_SYS(chmod("open", 0777));
    CHECK_SYS(mkdir("sticky", 0777));
    CHECK_SYS(chmod("sticky", 01777));
    CHECK_SYS(put("sticky/roots", "x", 0644));
    CHECK_SYS(mkdir("noread", 0711));
    CHECK_SYS(put("noread/f", "x", 0644));
    CHECK_SYS(setgroups(0, NULL));
    CHECK_SYS(setresgid(1000, 1000, 1000));
    CHECK_SYS(setresuid(1000, 1000, 1000));
    CHECK(geteuid() == 1000, "euid %d", geteuid());
    // A directory without search permission hides everything below it, existing or not.
    CHECK_ERR(open("private/f", O_RDONLY), EACCES);
    CHECK_ERR(open("private/missing", O_RDONLY), EACCES);
    CHECK_ERR(open("private/missing/x", O_RDONLY), EACCES);
    CHECK_ERR(open("private/f", O_CREAT | O_WRONLY, 0644), EACCES);
    CHECK_ERR(access("private/f", F_OK), EACCES);
    struct stat st;
    CHECK_SYS(stat("private", &st));
    CHECK_ERR(open("private", O_RDONLY | O_DIRECTORY), EACCES);
    // Search without read: names resolve, the listing is refused.
    CHECK_SYS(close(open("noread/f", O_RDONLY)));
    CHECK_ERR(open("noread", O_RDONLY | O_DIRECTORY), EACCES);
    // A file component is ENOTDIR before anything about permission; a missing one ENOENT.
    CHECK_ERR(open("secret/x", O_RDONLY), ENOTDIR);
    CHECK_ERR(open("missing/x", O_RDONLY), ENOENT);
    CHECK_ERR(open("secret", O_RDONLY), EACCES);
    CHECK_ERR(open("public", O_WRONLY), EACCES);
    CHECK_SYS(close(open("public", O_RDONLY)));
    CHECK_ERR(access("public", W_OK), EACCES);
    CHECK_ERR(access("public", X_OK), EACCES);
    CHECK_SYS(access("public", R_OK));
    // Creating needs write permission on the directory; EEXIST comes before EACCES.
    CHECK_ERR(open("new", O_CREAT | O_WRONLY, 0644), EACCES);
    CHECK_ERR(open("public", O_CREAT | O_EXCL | O_WRONLY, 0644), EEXIST);
    CHECK_ERR(mkdir("public", 0755), EEXIST);
    CHECK_ERR(mkdir("newdir", 0755), EACCES);
    CHECK_ERR(unlink("public"), EACCES);
    int fd = open("open/mine", O_CREAT | O_WRONLY, 0644);
    CHECK_SYS(fd);
    CHECK(fstat(fd, &st) == 0 && st.st_uid == 1000 && st.st_gid == 1000, "new file owned by %d:%d", st.st_uid, st.st_gid);
    close(fd);
    // Not the owner: chmod and chown are EPERM; in a sticky directory so is unlinking.
    CHECK_ERR(chmod("public", 0777), EPERM);
    CHECK_ERR(chown("open/mine", 0, 0), EPERM);
    CHECK_ERR(unlink("sticky/roots"), EPERM);
    CHECK_ERR(rename("sticky/roots", "sticky/other"), EPERM);
    CHECK_SYS(put("sticky/mine", "x", 0644));
    CHECK_SYS(unlink("sticky/mine"));
    CHECK_ERR(utimensat(AT_FDCWD, "public", (struct timespec[2]){{1, 0}, {1, 0}}, 0), EPERM);
    CHECK_ERR(utimensat(AT_FDCWD, "public", NULL, 0), EACCES);
    CHECK_ERR(truncate("public", 0), EACCES);
    CHECK_ERR(mknod("open/dev", S_IFCHR | 0600, makedev(1, 3)), EPERM);
    CHECK_ERR(setresuid(0, 0, 0), EPERM);
}

static void test_openat2(void) {
    ENTER("openat2");
    CHECK_SYS(mkdir("sub", 0755));
    CHECK_SYS(put("sub/f", "f", 0644));
    CHECK_SYS(put("top", "t", 0644));
    CHECK_SYS(symlink("f", "sub/link"));
    CHECK_SYS(symlink("../top", "sub/up"));
    CHECK_SYS(symlink("/top", "sub/abs"));
    int dir = open("sub", O_PATH | O_DIRECTORY);
    CHECK_SYS(dir);
    struct open_how how = {.flags = O_RDONLY, .resolve = RESOLVE_BENEATH};
#define OPENAT2(d, p, h) syscall(SYS_openat2, d, p, h, sizeof(struct open_how))
    long fd = OPENAT2(dir, "f", &how);
    CHECK_SYS(fd);
    close(fd);
    CHECK_SYS(fd = OPENAT2(dir, "link", &how));
    close(fd);
    CHECK_ERR(OPENAT2(dir, "../top", &how), EXDEV);
    CHECK_ERR(OPENAT2(dir, "up", &how), EXDEV);
    CHECK_ERR(OPENAT2(dir, "/tmp", &how), EXDEV);
    // RESOLVE_IN_ROOT: the base is /, and .. stops there.
    how.resolve = RESOLVE_IN_ROOT;
    CHECK_SYS(fd = OPENAT2(dir, "/f", &how));
    close(fd);
    CHECK_SYS(fd = OPENAT2(dir, "../../f", &how));
    close(fd);
    CHECK_ERR(OPENAT2(dir, "abs", &how), ENOENT);
    how.resolve = RESOLVE_NO_SYMLINKS;
    CHECK_ERR(OPENAT2(dir, "link", &how), ELOOP);
    CHECK_SYS(fd = OPENAT2(dir, "f", &how));
    close(fd);
    how.resolve = RESOLVE_NO_MAGICLINKS;
    CHECK_ERR(OPENAT2(AT_FDCWD, "/proc/self/exe", &how), ELOOP);
    CHECK_SYS(fd = OPENAT2(dir, "link", &how));
    close(fd);
    how.resolve = RESOLVE_NO_XDEV;
    CHECK_ERR(OPENAT2(AT_FDCWD, "/proc/self/status", &how), EXDEV);
    CHECK_SYS(fd = OPENAT2(AT_FDCWD, "sub/f", &how));
    close(fd);
    // The structure itself.
    how.resolve = 1ULL << 40;
    CHECK_ERR(OPENAT2(dir, "f", &how), EINVAL);
    how = (struct open_how){.flags = O_RDONLY, .mode = 0644};
    CHECK_ERR(OPENAT2(dir, "f", &how), EINVAL);
    how = (struct open_how){.flags = 1ULL << 40};
    CHECK_ERR(OPENAT2(dir, "f", &how), EINVAL);
    how = (struct open_how){.flags = O_RDONLY};
    CHECK_ERR(syscall(SYS_openat2, dir, "f", &how, 8), EINVAL);
    struct {
        struct open_how how;
        uint64_t extra;
    } big = {{.flags = O_RDONLY}, 1};
    CHECK_ERR(syscall(SYS_openat2, dir, "f", &big, sizeof big), E2BIG);
    big.extra = 0;
    CHECK_SYS(fd = syscall(SYS_openat2, dir, "f", &big, sizeof big));
    how = (struct open_how){.flags = O_CREAT | O_WRONLY, .mode = 0640};
    CHECK_SYS(fd = OPENAT2(dir, "made", &how));
    CHECK((mode_of("sub/made") & 0777) == 0640, "mode %o", mode_of("sub/made"));
}

static void test_close_and_close_range(void) {
    ENTER("close");
    int fd = open("/dev/null", O_RDONLY);
    CHECK_SYS(fd);
    for (int i = 10; i <= 15; i++) CHECK(dup2(fd, i) == i, "dup2 %d", i);
    CHECK_SYS(close_range(10, 12, 0));
    for (int i = 10; i <= 12; i++) CHECK_ERR(fcntl(i, F_GETFD), EBADF);
    CHECK(fcntl(13, F_GETFD) == 0, "13 stays open");
    CHECK_SYS(close_range(13, 14, CLOSE_RANGE_CLOEXEC));
    CHECK(fcntl(13, F_GETFD) == FD_CLOEXEC && fcntl(14, F_GETFD) == FD_CLOEXEC && fcntl(15, F_GETFD) == 0, "CLOSE_RANGE_CLOEXEC");
    CHECK_ERR(close_range(20, 10, 0), EINVAL);
    CHECK_ERR(close_range(10, 20, 1U << 5), EINVAL);
    CHECK_SYS(close_range(100, ~0U, 0));
    CHECK_SYS(close_range(13, ~0U, CLOSE_RANGE_UNSHARE));
    CHECK_ERR(fcntl(15, F_GETFD), EBADF);
    CHECK_ERR(close(-1), EBADF);
    CHECK_ERR(close(999), EBADF);
    CHECK_SYS(close(fd));
    CHECK_ERR(close(fd), EBADF);
}

// ---- reading and writing ---------------------------------------------------------------------------

static void test_read_write_family(void) {
    ENTER("rw");
    int fd = open("f", O_RDWR | O_CREAT | O_TRUNC, 0644);
    CHECK_SYS(fd);
    CHECK(write(fd, "hello world", 11) == 11, "write");
    char buf[64] = {0};
    CHECK(pread(fd, buf, 5, 6) == 5 && memcmp(buf, "world", 5) == 0, "pread %.5s", buf);
    CHECK(lseek(fd, 0, SEEK_CUR) == 11, "pread moved the offset");
    CHECK(pwrite(fd, "HELLO", 5, 0) == 5 && lseek(fd, 0, SEEK_CUR) == 11, "pwrite");
    char a[5], b[6];
    struct iovec iov[2] = {{a, 5}, {b, 6}};
    CHECK(lseek(fd, 0, SEEK_SET) == 0 && readv(fd, iov, 2) == 11, "readv");
    CHECK(memcmp(a, "HELLO", 5) == 0 && memcmp(b, " world", 6) == 0, "readv scattered %.5s|%.6s", a, b);
    struct iovec out[2] = {{"!", 1}, {"?", 1}};
    CHECK(writev(fd, out, 2) == 2 && lseek(fd, 0, SEEK_CUR) == 13, "writev");
    memset(a, 0, 5);
    memset(b, 0, 6);
    CHECK(preadv(fd, iov, 2, 6) == 7 && memcmp(a, "world", 5) == 0 && memcmp(b, "!?", 2) == 0, "preadv");
    CHECK(pwritev(fd, out, 2, 20) == 2, "pwritev past the end");
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && st.st_size == 22, "size %ld", (long)st.st_size);
    CHECK(pread(fd, buf, 7, 13) == 7 && memcmp(buf, "\0\0\0\0\0\0\0", 7) == 0, "the gap reads as zeros");
    CHECK(lseek(fd, 0, SEEK_END) == 22 && read(fd, buf, 10) == 0, "read at the end");
    CHECK(pread(fd, buf, 10, 100) == 0, "pread past the end");
    CHECK_ERR(pread(fd, buf, 1, -1), EINVAL);
    CHECK_ERR(syscall(SYS_readv, fd, iov, -1), EINVAL);
    CHECK_ERR(syscall(SYS_readv, fd, iov, 1025), EINVAL);
    CHECK(readv(fd, iov, 0) == 0, "no vectors");
    CHECK(syscall(SYS_read, fd, 8L, 4L) == 0, "at the end nothing is copied, so a bad buffer is no EFAULT");
    CHECK(lseek(fd, 0, SEEK_SET) == 0, "rewind");
    CHECK_ERR(syscall(SYS_read, fd, 8L, 4L), EFAULT);
    CHECK_ERR(syscall(SYS_write, fd, 8L, 4L), EFAULT);
    // Linux's pwrite on an O_APPEND descriptor appends, whatever the offset says.
    int app = open("f", O_WRONLY | O_APPEND);
    CHECK(pwrite(app, "Z", 1, 0) == 1, "pwrite O_APPEND");
    CHECK(pread(fd, buf, 1, 0) == 1 && buf[0] == 'H' && pread(fd, buf, 1, 22) == 1 && buf[0] == 'Z', "pwrite with O_APPEND appended");
    CHECK_ERR(read(app, buf, 1), EBADF);
    int ro = open("f", O_RDONLY);
    CHECK_ERR(write(ro, "x", 1), EBADF);
    int dir = open(".", O_RDONLY);
    CHECK_ERR(read(dir, buf, 1), EISDIR);
    int p[2];
    CHECK_SYS(pipe(p));
    CHECK_ERR(pread(p[0], buf, 1, 0), ESPIPE);
    CHECK_ERR(pwrite(p[1], buf, 1, 0), ESPIPE);
    CHECK_ERR(read(-1, buf, 1), EBADF);
}

static void test_lseek(void) {
    ENTER("lseek");
    int fd = open("f", O_RDWR | O_CREAT, 0644);
    CHECK_SYS(fd);
    char block[4096];
    memset(block, 'x', sizeof block);
    CHECK(write(fd, block, 100) == 100, "write");
    CHECK(lseek(fd, 10, SEEK_SET) == 10 && lseek(fd, 5, SEEK_CUR) == 15 && lseek(fd, -10, SEEK_END) == 90, "SET/CUR/END");
    CHECK(lseek(fd, 1000, SEEK_SET) == 1000 && lseek(fd, 0, SEEK_END) == 100, "past the end is allowed, the size stays");
    CHECK_ERR(lseek(fd, -1, SEEK_SET), EINVAL);
    CHECK_ERR(lseek(fd, -200, SEEK_END), EINVAL);
    CHECK_ERR(lseek(fd, 0, 7), EINVAL);
    // Data and holes: one page of data, a hole, one page of data at 1 MiB.
    CHECK_SYS(ftruncate(fd, 0));
    CHECK(pwrite(fd, block, 4096, 0) == 4096 && pwrite(fd, block, 4096, 1 << 20) == 4096, "sparse writes");
    CHECK(lseek(fd, 0, SEEK_DATA) == 0, "SEEK_DATA 0: %ld", (long)lseek(fd, 0, SEEK_DATA));
    CHECK(lseek(fd, 0, SEEK_HOLE) == 4096, "SEEK_HOLE 0: %ld", (long)lseek(fd, 0, SEEK_HOLE));
    CHECK(lseek(fd, 100, SEEK_HOLE) == 4096, "SEEK_HOLE 100: %ld", (long)lseek(fd, 100, SEEK_HOLE));
    CHECK(lseek(fd, 4096, SEEK_DATA) == 1 << 20, "SEEK_DATA 4096: %ld", (long)lseek(fd, 4096, SEEK_DATA));
    CHECK(lseek(fd, 5000, SEEK_HOLE) == 5000, "SEEK_HOLE in a hole: %ld", (long)lseek(fd, 5000, SEEK_HOLE));
    CHECK(lseek(fd, 1 << 20, SEEK_HOLE) == (1 << 20) + 4096, "the end is a hole: %ld", (long)lseek(fd, 1 << 20, SEEK_HOLE));
    CHECK_ERR(lseek(fd, (1 << 20) + 4096, SEEK_DATA), ENXIO);
    CHECK_ERR(lseek(fd, (1 << 20) + 5000, SEEK_HOLE), ENXIO);
    CHECK_ERR(lseek(fd, -1, SEEK_DATA), ENXIO);
    int p[2];
    CHECK_SYS(pipe(p));
    CHECK_ERR(lseek(p[0], 0, SEEK_CUR), ESPIPE);
    int dir = open(".", O_RDONLY);
    CHECK(lseek(dir, 0, SEEK_SET) == 0, "a directory seeks to 0");
}

// ---- directories -----------------------------------------------------------------------------------

static int cmp_str(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

// listing: "name/type name/type ..." of a directory, sorted by name (types: d, f, l, p, ?).
static int listing(const char *path, char *out, size_t size) {
    DIR *d = opendir(path);
    if (!d) return -1;
    char *names[512];
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) && n < 512) {
        char t = e->d_type == DT_DIR ? 'd' : e->d_type == DT_REG ? 'f' : e->d_type == DT_LNK ? 'l' : e->d_type == DT_FIFO ? 'p' : '?';
        if (asprintf(&names[n], "%s/%c", e->d_name, t) < 0) return -1;
        n++;
    }
    closedir(d);
    qsort(names, n, sizeof names[0], cmp_str);
    out[0] = 0;
    for (int i = 0; i < n; i++) {
        if (strlen(out) + strlen(names[i]) + 2 < size) strcat(strcat(out, i ? " " : ""), names[i]);
        free(names[i]);
    }
    return n;
}

static void test_readdir(void) {
    ENTER("readdir");
    CHECK_SYS(mkdir("d", 0755));
    CHECK_SYS(put("d/b", "", 0644));
    CHECK_SYS(put("d/a", "", 0644));
    CHECK_SYS(put("d/c", "", 0644));
    CHECK_SYS(mkdir("d/sub", 0755));
    CHECK_SYS(symlink("a", "d/lnk"));
    CHECK_SYS(mkfifo("d/fifo", 0644));
    char text[4096];
    CHECK(listing("d", text, sizeof text) == 8, "entries: %s", text);
    CHECK(strcmp(text, "../d ./d a/f b/f c/f fifo/p lnk/l sub/d") == 0, "listing %s", text);
    CHECK(listing("d/sub", text, sizeof text) == 2 && strcmp(text, "../d ./d") == 0, "empty: %s", text);
    CHECK_SYS(unlink("d/b"));
    CHECK(listing("d", text, sizeof text) == 7 && !strstr(text, "b/f"), "after unlink: %s", text);
    // A directory larger than one getdents64 buffer.
    CHECK_SYS(mkdir("big", 0755));
    for (int i = 0; i < 300; i++) {
        char name[64];
        snprintf(name, sizeof name, "big/entry-with-a-longer-name-%03d", i);
        CHECK_SYS(put(name, "", 0644));
    }
    CHECK(listing("big", text, sizeof text) == 302, "300 files and . and ..");
    DIR *d = opendir("big");
    int n = 0;
    while (readdir(d)) n++;
    rewinddir(d);
    while (readdir(d)) n++;
    CHECK(n == 604, "rewinddir: %d entries in two passes", n);
    closedir(d);
    // getdents64 itself.
    int fd = open("d", O_RDONLY | O_DIRECTORY);
    char small[8];
    CHECK_ERR(syscall(SYS_getdents64, fd, small, sizeof small), EINVAL);
    char buf[4096];
    long got = syscall(SYS_getdents64, fd, buf, sizeof buf);
    CHECK(got > 0, "getdents64: %ld", got);
    CHECK(syscall(SYS_getdents64, fd, buf, sizeof buf) == 0, "the end reads 0");
    int file = open("d/a", O_RDONLY);
    CHECK_ERR(syscall(SYS_getdents64, file, buf, sizeof buf), ENOTDIR);
    CHECK(opendir("d/a") == NULL && errno == ENOTDIR, "opendir of a file");
    CHECK(opendir("missing") == NULL && errno == ENOENT, "opendir of nothing");
    // An open directory whose entries go: reading it again still works.
    CHECK_SYS(mkdir("gone", 0755));
    fd = open("gone", O_RDONLY | O_DIRECTORY);
    CHECK_SYS(rmdir("gone"));
    CHECK_ERR(syscall(SYS_getdents64, fd, buf, sizeof buf), ENOENT); // a removed directory is not read
    CHECK_ERR(openat(fd, "x", O_CREAT | O_WRONLY, 0644), ENOENT);
}

static void test_stat_family(void) {
    ENTER("stat");
    int fd = open("f", O_RDWR | O_CREAT, 0640);
    CHECK(write(fd, "0123456789", 10) == 10, "write");
    struct stat st, st2;
    CHECK_SYS(fstat(fd, &st));
    CHECK(S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0640 && st.st_size == 10 && st.st_nlink == 1, "fstat mode %o size %ld", st.st_mode, (long)st.st_size);
    CHECK(st.st_blksize == 4096, "st_blksize %ld", (long)st.st_blksize);
    CHECK_SYS(link("f", "g"));
    CHECK_SYS(fstatat(AT_FDCWD, "g", &st2, 0));
    CHECK(st2.st_nlink == 2 && st2.st_ino == st.st_ino && st2.st_dev == st.st_dev, "a hard link is the same file");
    CHECK_SYS(fstat(fd, &st));
    CHECK(st.st_nlink == 2, "nlink %ld", (long)st.st_nlink);
    CHECK_SYS(mkdir("d", 0755));
    CHECK(stat("d", &st) == 0 && S_ISDIR(st.st_mode) && st.st_nlink == 2, "an empty directory has 2 links: %ld", (long)st.st_nlink);
    CHECK_SYS(mkdir("d/e", 0755));
    CHECK(stat("d", &st) == 0 && st.st_nlink == 3, "a subdirectory adds one: %ld", (long)st.st_nlink);
    CHECK_SYS(symlink("f", "l"));
    CHECK(lstat("l", &st) == 0 && S_ISLNK(st.st_mode) && st.st_size == 1 && (st.st_mode & 0777) == 0777, "lstat of a link: %o size %ld", st.st_mode, (long)st.st_size);
    CHECK(fstatat(AT_FDCWD, "l", &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISLNK(st.st_mode), "AT_SYMLINK_NOFOLLOW");
    CHECK(stat("l", &st) == 0 && S_ISREG(st.st_mode) && st.st_size == 10, "stat follows");
    CHECK_SYS(fstatat(fd, "", &st2, AT_EMPTY_PATH));
    CHECK(st2.st_ino == st.st_ino, "AT_EMPTY_PATH is the descriptor's file");
    CHECK_ERR(fstatat(fd, "", &st2, 0), ENOENT);
    CHECK_ERR(fstatat(AT_FDCWD, "f", &st2, 0x40000000), EINVAL);
    CHECK_ERR(stat("f/", &st2), ENOTDIR);
    CHECK_ERR(stat("missing", &st2), ENOENT);
    CHECK_ERR(stat("f", (struct stat *)8), EFAULT);
    // statx.
    struct statx sx;
    CHECK_SYS(statx(AT_FDCWD, "f", 0, STATX_BASIC_STATS, &sx));
    CHECK((sx.stx_mask & STATX_BASIC_STATS) == STATX_BASIC_STATS, "stx_mask %#x", sx.stx_mask);
    CHECK(S_ISREG(sx.stx_mode) && (sx.stx_mode & 07777) == 0640 && sx.stx_size == 10 && sx.stx_nlink == 2, "statx mode %o", sx.stx_mode);
    CHECK(sx.stx_ino == st.st_ino && makedev(sx.stx_dev_major, sx.stx_dev_minor) == st.st_dev, "statx names the same file");
    CHECK_SYS(statx(AT_FDCWD, "l", AT_SYMLINK_NOFOLLOW, STATX_TYPE, &sx));
    CHECK(S_ISLNK(sx.stx_mode), "statx of a link: %o", sx.stx_mode);
    CHECK_ERR(statx(AT_FDCWD, "f", AT_STATX_FORCE_SYNC | AT_STATX_DONT_SYNC, STATX_BASIC_STATS, &sx), EINVAL);
    CHECK_ERR(statx(AT_FDCWD, "f", 0, STATX__RESERVED, &sx), EINVAL);
    // Types of other files.
    int p[2];
    CHECK_SYS(pipe(p));
    CHECK(fstat(p[0], &st) == 0 && S_ISFIFO(st.st_mode), "a pipe is a FIFO: %o", st.st_mode);
    CHECK(stat("/dev/null", &st) == 0 && S_ISCHR(st.st_mode), "/dev/null: %o", st.st_mode);
    CHECK(stat("/", &st) == 0 && S_ISDIR(st.st_mode) && stat("/..", &st2) == 0 && st.st_ino == st2.st_ino, "/");
    CHECK(put("empty", "", 0644) == 0 && stat("empty", &st) == 0 && st.st_blocks == 0 && st.st_size == 0, "an empty file has no blocks");
}

static void test_access(void) {
    ENTER("access");
    CHECK_SYS(put("f", "x", 0644));
    CHECK_SYS(faccessat(AT_FDCWD, "f", F_OK, 0));
    CHECK_SYS(faccessat(AT_FDCWD, "f", R_OK | W_OK, 0));
    // root may read and write anything but executes only what has an x bit.
    CHECK_ERR(faccessat(AT_FDCWD, "f", X_OK, 0), EACCES);
    CHECK_SYS(chmod("f", 0700));
    CHECK_SYS(faccessat(AT_FDCWD, "f", X_OK, 0));
    CHECK_SYS(chmod("f", 0));
    CHECK_SYS(faccessat(AT_FDCWD, "f", R_OK | W_OK, 0));
    CHECK_SYS(mkdir("d", 0));
    CHECK_SYS(faccessat(AT_FDCWD, "d", R_OK | W_OK | X_OK, 0));
    CHECK_ERR(faccessat(AT_FDCWD, "missing", F_OK, 0), ENOENT);
    CHECK_ERR(faccessat(AT_FDCWD, "f/x", F_OK, 0), ENOTDIR);
    CHECK_ERR(faccessat(AT_FDCWD, "f", 8, 0), EINVAL);
    CHECK_SYS(syscall(SYS_faccessat2, AT_FDCWD, "f", R_OK, AT_EACCESS));
    CHECK_ERR(syscall(SYS_faccessat2, AT_FDCWD, "f", R_OK, 0x10000), EINVAL);
    CHECK_SYS(symlink("nowhere", "dangling"));
    CHECK_ERR(syscall(SYS_faccessat2, AT_FDCWD, "dangling", F_OK, 0), ENOENT);
    CHECK_SYS(syscall(SYS_faccessat2, AT_FDCWD, "dangling", F_OK, AT_SYMLINK_NOFOLLOW));
    int fd = open("f", O_PATH);
    CHECK_SYS(syscall(SYS_faccessat2, fd, "", F_OK, AT_EMPTY_PATH));
    CHECK_ERR(syscall(SYS_faccessat2, fd, "", F_OK, 0), ENOENT);
    CHECK_SYS(access("/tmp", W_OK | X_OK));
    CHECK_ERR(access("/proc/self/status", X_OK), EACCES);
}

static void test_readlink(void) {
    ENTER("readlink");
    CHECK_SYS(symlink("some/target", "l"));
    char buf[64];
    CHECK(readlinkat(AT_FDCWD, "l", buf, sizeof buf) == 11 && memcmp(buf, "some/target", 11) == 0, "readlinkat");
    memset(buf, '#', sizeof buf);
    CHECK(readlink("l", buf, 4) == 4 && memcmp(buf, "some#", 5) == 0, "a short buffer truncates, no NUL");
    CHECK_SYS(put("f", "", 0644));
    CHECK_ERR(readlink("f", buf, sizeof buf), EINVAL);
    CHECK_ERR(readlink("missing", buf, sizeof buf), ENOENT);
    CHECK_ERR(readlink("l", buf, 0), EINVAL);
    int fd = open("l", O_PATH | O_NOFOLLOW);
    CHECK(readlinkat(fd, "", buf, sizeof buf) == 11, "readlinkat of an O_PATH link with an empty path");
    int dir = open(".", O_RDONLY);
    CHECK(readlinkat(dir, "l", buf, sizeof buf) == 11, "relative to a directory");
    CHECK_ERR(readlinkat(dir, "", buf, sizeof buf), ENOENT);
    CHECK_SYS(symlink("/tmp/files-readlink/l", "abs"));
    CHECK(readlink("abs", buf, sizeof buf) == 21, "an absolute target");
}

static void test_mkdir_and_rmdir(void) {
    ENTER("mkdir");
    umask(022);
    CHECK_SYS(mkdirat(AT_FDCWD, "d", 0777));
    CHECK(mode_of("d") == (S_IFDIR | 0755), "mode %o", mode_of("d"));
    CHECK_SYS(mkdir("s", 01777));
    CHECK(mode_of("s") == (S_IFDIR | 01755), "sticky kept: %o", mode_of("s"));
    CHECK_ERR(mkdir("d", 0755), EEXIST);
    CHECK_SYS(put("f", "", 0644));
    CHECK_ERR(mkdir("f", 0755), EEXIST);
    CHECK_ERR(mkdir("missing/x", 0755), ENOENT);
    CHECK_ERR(mkdir("f/x", 0755), ENOTDIR);
    CHECK_SYS(mkdir("e/", 0755));
    CHECK_SYS(symlink("nowhere", "l"));
    CHECK_ERR(mkdir("l", 0755), EEXIST);
    CHECK_ERR(mkdir("", 0755), ENOENT);
    CHECK_SYS(mkdir("d/inner", 0755));
    CHECK_ERR(rmdir("d"), ENOTEMPTY);
    CHECK_ERR(rmdir("f"), ENOTDIR);
    CHECK_ERR(rmdir("."), EINVAL);
    CHECK_ERR(rmdir("d/.."), ENOTEMPTY);
    CHECK_ERR(rmdir("missing"), ENOENT);
    CHECK_ERR(rmdir("l"), ENOTDIR);
    CHECK_ERR(rmdir("/"), EBUSY);
    CHECK_SYS(rmdir("d/inner/"));
    CHECK_SYS(rmdir("d"));
    CHECK_ERR(rmdir("d"), ENOENT);
    CHECK_ERR(rmdir("/proc"), EBUSY);
}

static void test_mknod_fifo(void) {
    ENTER("fifo");
    umask(022);
    CHECK_SYS(mknodat(AT_FDCWD, "p", S_IFIFO | 0666, 0));
    CHECK(mode_of("p") == (S_IFIFO | 0644), "mode %o", mode_of("p"));
    CHECK_ERR(mkfifo("p", 0600), EEXIST);
    CHECK_ERR(open("p", O_WRONLY | O_NONBLOCK), ENXIO);
    int r = open("p", O_RDONLY | O_NONBLOCK);
    CHECK_SYS(r);
    int w = open("p", O_WRONLY);
    CHECK_SYS(w);
    char buf[16];
    CHECK_ERR(read(r, buf, sizeof buf), EAGAIN);
    CHECK(write(w, "fifo", 4) == 4 && read(r, buf, sizeof buf) == 4 && memcmp(buf, "fifo", 4) == 0, "through the FIFO");
    close(w);
    CHECK(read(r, buf, sizeof buf) == 0, "end of file once the writer closed");
    close(r);
    // Blocking opens meet: the child's open for writing waits for this open for reading.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int fd = open("p", O_WRONLY);
        _exit(fd >= 0 && write(fd, "child", 5) == 5 ? 0 : 1);
    }
    r = open("p", O_RDONLY);
    CHECK_SYS(r);
    ssize_t n = read(r, buf, sizeof buf);
    int status;
    waitpid(pid, &status, 0);
    CHECK(n == 5 && memcmp(buf, "child", 5) == 0 && status == 0, "the child wrote %zd, status %#x", n, status);
    CHECK_SYS(mknod("r", S_IFREG | 0600, 0));
    CHECK(mode_of("r") == (S_IFREG | 0600), "mknod S_IFREG: %o", mode_of("r"));
    CHECK_SYS(mknod("r0", 0600, 0));
    CHECK(S_ISREG(mode_of("r0")), "mknod of type 0 is a regular file");
    CHECK_ERR(mknod("dir", S_IFDIR | 0755, 0), EPERM);
    CHECK_ERR(mknod("bad", 0170000 | 0755, 0), EINVAL);
    CHECK_SYS(mknod("null", S_IFCHR | 0666, makedev(1, 3)));
    int fd = open("null", O_RDWR);
    CHECK(fd >= 0 && write(fd, "x", 1) == 1 && read(fd, buf, 1) == 0, "a device node made with mknod is the device");
}

static void test_unlink(void) {
    ENTER("unlink");
    CHECK_SYS(put("f", "kept", 0644));
    int fd = open("f", O_RDONLY);
    CHECK_SYS(unlinkat(AT_FDCWD, "f", 0));
    CHECK_ERR(unlinkat(AT_FDCWD, "f", 0), ENOENT);
    struct stat st;
    char buf[8];
    CHECK(fstat(fd, &st) == 0 && st.st_nlink == 0, "an unlinked open file has nlink %ld", (long)st.st_nlink);
    CHECK(read(fd, buf, 8) == 4 && memcmp(buf, "kept", 4) == 0, "its data stays while open");
    CHECK_SYS(mkdir("d", 0755));
    CHECK_SYS(put("d/x", "", 0644));
    CHECK_ERR(unlinkat(AT_FDCWD, "d", 0), EISDIR);
    CHECK_ERR(unlinkat(AT_FDCWD, "d", AT_REMOVEDIR), ENOTEMPTY);
    CHECK_ERR(unlinkat(AT_FDCWD, "d/x", AT_REMOVEDIR), ENOTDIR);
    CHECK_ERR(unlinkat(AT_FDCWD, "d/x", 0x1), EINVAL);
    CHECK_ERR(unlink("d/x/"), ENOTDIR);
    CHECK_SYS(unlinkat(AT_FDCWD, "d/x", 0));
    CHECK_SYS(unlinkat(AT_FDCWD, "d", AT_REMOVEDIR));
    CHECK_SYS(put("t", "", 0644));
    CHECK_SYS(symlink("t", "l"));
    CHECK_SYS(unlink("l"));
    CHECK(S_ISREG(mode_of("t")) && mode_of("l") == 0, "unlink removes the link, not its target");
    CHECK_SYS(mkdir("d2", 0755));
    CHECK_SYS(symlink("d2", "ld"));
    CHECK_ERR(unlink("ld/"), ENOTDIR);
    CHECK_ERR(rmdir("ld/"), ENOTDIR);
    int dir = open(".", O_RDONLY);
    CHECK_SYS(unlinkat(dir, "t", 0));
    CHECK_ERR(unlink(""), ENOENT);
}

static void test_rename(void) {
    ENTER("rename");
    char buf[16];
    CHECK_SYS(put("a", "A", 0644));
    CHECK_SYS(put("b", "B", 0644));
    CHECK_SYS(renameat2(AT_FDCWD, "a", AT_FDCWD, "c", 0));
    CHECK(mode_of("a") == 0 && get("c", buf, sizeof buf) == 1 && buf[0] == 'A', "renamed");
    CHECK_SYS(rename("c", "b"));
    CHECK(mode_of("c") == 0 && get("b", buf, sizeof buf) == 1 && buf[0] == 'A', "rename replaces");
    CHECK_SYS(put("x", "X", 0644));
    CHECK_ERR(renameat2(AT_FDCWD, "b", AT_FDCWD, "x", RENAME_NOREPLACE), EEXIST);
    CHECK_SYS(renameat2(AT_FDCWD, "b", AT_FDCWD, "y", RENAME_NOREPLACE));
    CHECK_SYS(renameat2(AT_FDCWD, "y", AT_FDCWD, "x", RENAME_EXCHANGE));
    CHECK(get("x", buf, sizeof buf) == 1 && buf[0] == 'A' && get("y", buf, sizeof buf) == 1 && buf[0] == 'X', "exchanged");
    CHECK_ERR(renameat2(AT_FDCWD, "x", AT_FDCWD, "missing", RENAME_EXCHANGE), ENOENT);
    CHECK_ERR(renameat2(AT_FDCWD, "x", AT_FDCWD, "y", RENAME_EXCHANGE | RENAME_NOREPLACE), EINVAL);
    CHECK_ERR(renameat2(AT_FDCWD, "x", AT_FDCWD, "y", 1U << 10), EINVAL);
    CHECK_ERR(rename("missing", "z"), ENOENT);
    // Directories.
    CHECK_SYS(mkdir("d1", 0755));
    CHECK_SYS(mkdir("d2", 0755));
    CHECK_SYS(put("d2/child", "", 0644));
    CHECK_ERR(rename("d1", "d2"), ENOTEMPTY);
    CHECK_ERR(rename("x", "d1"), EISDIR);
    CHECK_ERR(rename("d1", "x"), ENOTDIR);
    CHECK_ERR(rename("d2", "d2/sub"), EINVAL);
    CHECK_ERR(rename(".", "z"), EBUSY);
    CHECK_ERR(rename("x", "d2/child/z"), ENOTDIR);
    CHECK_SYS(mkdir("empty", 0755));
    CHECK_SYS(rename("d1", "empty"));
    CHECK(S_ISDIR(mode_of("empty")) && mode_of("d1") == 0, "a directory replaces an empty one");
    CHECK_SYS(renameat2(AT_FDCWD, "d2", AT_FDCWD, "x", RENAME_EXCHANGE));
    CHECK(S_ISDIR(mode_of("x")) && S_ISREG(mode_of("d2")) && S_ISREG(mode_of("x/child")), "a directory and a file exchanged");
    // Renaming a file onto itself, or onto another link of itself, does nothing.
    CHECK_SYS(rename("y", "y"));
    CHECK_SYS(link("y", "y2"));
    CHECK_SYS(rename("y", "y2"));
    CHECK(S_ISREG(mode_of("y")) && S_ISREG(mode_of("y2")), "both links stay");
    CHECK_SYS(mkdir("dest", 0755));
    CHECK_SYS(rename("y", "dest/y"));
    CHECK_ERR(rename("y2", "missing/y2"), ENOENT);
    CHECK_ERR(rename("y2", "y3/"), ENOTDIR);
    int fd = open("dest", O_RDONLY);
    CHECK_SYS(renameat(fd, "y", AT_FDCWD, "back"));
    CHECK(S_ISREG(mode_of("back")), "renameat between directories");
}

static void test_link(void) {
    ENTER("link");
    CHECK_SYS(put("f", "F", 0644));
    CHECK_SYS(linkat(AT_FDCWD, "f", AT_FDCWD, "g", 0));
    struct stat a, b;
    CHECK(stat("f", &a) == 0 && stat("g", &b) == 0 && a.st_ino == b.st_ino && a.st_nlink == 2, "linked");
    CHECK_ERR(link("f", "g"), EEXIST);
    CHECK_SYS(mkdir("d", 0755));
    CHECK_ERR(link("d", "d2"), EPERM);
    CHECK_ERR(link("missing", "m"), ENOENT);
    CHECK_ERR(link("f", "missing/m"), ENOENT);
    CHECK_SYS(symlink("f", "l"));
    CHECK_SYS(linkat(AT_FDCWD, "l", AT_FDCWD, "to-link", 0));
    CHECK(S_ISLNK(mode_of("to-link")), "linkat without AT_SYMLINK_FOLLOW links the link: %o", mode_of("to-link"));
    CHECK_SYS(linkat(AT_FDCWD, "l", AT_FDCWD, "to-target", AT_SYMLINK_FOLLOW));
    CHECK(S_ISREG(mode_of("to-target")), "AT_SYMLINK_FOLLOW links the target: %o", mode_of("to-target"));
    CHECK(stat("f", &a) == 0 && a.st_nlink == 3, "nlink %ld", (long)a.st_nlink);
    int fd = open("f", O_RDONLY);
    CHECK_SYS(linkat(fd, "", AT_FDCWD, "by-fd", AT_EMPTY_PATH));
    CHECK_ERR(linkat(fd, "", AT_FDCWD, "by-fd2", 0), ENOENT);
    CHECK_ERR(linkat(AT_FDCWD, "f", AT_FDCWD, "h", 0x1), EINVAL);
    CHECK(stat("f", &a) == 0 && a.st_nlink == 4, "nlink %ld", (long)a.st_nlink);
    CHECK_SYS(unlink("f"));
    CHECK(stat("g", &a) == 0 && a.st_nlink == 3, "after unlink: nlink %ld", (long)a.st_nlink);
    // An O_TMPFILE file has no name until linkat gives it one.
    int tmp = open(".", O_TMPFILE | O_RDWR, 0600);
    CHECK_SYS(tmp);
    CHECK(write(tmp, "T", 1) == 1, "write");
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", tmp);
    CHECK_SYS(linkat(AT_FDCWD, path, AT_FDCWD, "named", AT_SYMLINK_FOLLOW));
    char buf[8];
    CHECK(get("named", buf, sizeof buf) == 1 && buf[0] == 'T', "the O_TMPFILE file, named");
}

static void test_symlink_resolution(void) {
    ENTER("symlink");
    CHECK_SYS(put("t", "T", 0644));
    // A chain of links: 40 are followed, the 41st is ELOOP.
    CHECK_SYS(symlink("t", "l0"));
    for (int i = 1; i <= 40; i++) {
        char from[16], to[16];
        snprintf(from, sizeof from, "l%d", i - 1);
        snprintf(to, sizeof to, "l%d", i);
        CHECK_SYS(symlink(from, to));
    }
    char buf[8];
    CHECK(get("l39", buf, sizeof buf) == 1, "40 links are followed: %s", strerrorname_np(errno));
    CHECK_ERR(open("l40", O_RDONLY), ELOOP);
    CHECK_ERR(stat("l40", &(struct stat){0}), ELOOP);
    CHECK_SYS(lstat("l40", &(struct stat){0}));
    CHECK_SYS(symlink("self", "self"));
    CHECK_ERR(open("self", O_RDONLY), ELOOP);
    CHECK_ERR(open("self/x", O_RDONLY), ELOOP);
    // Names too long.
    char name[300];
    memset(name, 'n', 255);
    name[255] = 0;
    int fd = open(name, O_CREAT | O_WRONLY, 0644);
    CHECK(fd >= 0, "a 255-byte name: %s", strerrorname_np(errno));
    close(fd);
    name[255] = 'n';
    name[256] = 0;
    CHECK_ERR(open(name, O_CREAT | O_WRONLY, 0644), ENAMETOOLONG);
    CHECK_ERR(stat(name, &(struct stat){0}), ENAMETOOLONG);
    static char longpath[PATH_MAX + 16];
    for (int i = 0; i + 2 < (int)sizeof longpath - 1; i += 2) memcpy(longpath + i, "./", 2);
    longpath[sizeof longpath - 1] = 0;
    CHECK_ERR(open(longpath, O_RDONLY), ENAMETOOLONG);
    longpath[PATH_MAX - 1] = 0; // 4095 bytes and the NUL: accepted
    CHECK_SYS(stat(longpath, &(struct stat){0}));
    // `..` at / stays at /.
    struct stat root, up, tmp1, tmp2;
    CHECK(stat("/", &root) == 0 && stat("/../..", &up) == 0 && root.st_ino == up.st_ino && root.st_dev == up.st_dev, "/..");
    CHECK(stat("/tmp", &tmp1) == 0 && stat("/../../tmp/.", &tmp2) == 0 && tmp1.st_ino == tmp2.st_ino, "/../../tmp");
    // Trailing slashes.
    CHECK_SYS(mkdir("d", 0755));
    CHECK_SYS(symlink("d", "ld"));
    CHECK_SYS(symlink("t", "lt"));
    CHECK(lstat("ld/", &up) == 0 && S_ISDIR(up.st_mode), "a trailing slash follows a link to a directory");
    CHECK(lstat("ld", &up) == 0 && S_ISLNK(up.st_mode), "lstat of the link itself");
    CHECK_ERR(stat("lt/", &up), ENOTDIR);
    CHECK_ERR(stat("t/", &up), ENOTDIR);
    CHECK_ERR(open("t/", O_RDONLY), ENOTDIR);
    CHECK(stat("d//", &up) == 0 && S_ISDIR(up.st_mode), "d//");
    CHECK(stat(".//d/./", &up) == 0 && S_ISDIR(up.st_mode), ".//d/./");
    CHECK_ERR(symlink("t", "d/"), EEXIST);
    CHECK_ERR(symlink("t", "new/"), ENOENT);
    CHECK_ERR(symlinkat("", AT_FDCWD, "empty"), ENOENT);
    CHECK_ERR(symlink("x", "t"), EEXIST);
    // A relative target resolves from the link's directory; an absolute one from /.
    CHECK_SYS(symlink("../t", "d/up"));
    CHECK(get("d/up", buf, sizeof buf) == 1 && buf[0] == 'T', "relative target");
    CHECK_SYS(symlink("/tmp/files-symlink/t", "abs"));
    CHECK(get("abs", buf, sizeof buf) == 1, "absolute target");
    CHECK_SYS(symlink("d/../t", "dotdot"));
    CHECK(get("dotdot", buf, sizeof buf) == 1, "a target with ..");
    CHECK_SYS(symlink("ld/../t", "through"));
    CHECK(get("through", buf, sizeof buf) == 1, "`..` after a link to a directory is the directory's parent");
    CHECK_SYS(symlink("missing", "dangling"));
    CHECK_ERR(open("dangling", O_RDONLY), ENOENT);
    CHECK_ERR(open("lt/x", O_RDONLY), ENOTDIR);
}

static void test_truncate_and_fallocate(void) {
    ENTER("truncate");
    CHECK_SYS(put("f", "0123456789", 0644));
    CHECK_SYS(truncate("f", 20));
    char buf[32];
    CHECK(get("f", buf, sizeof buf) == 20 && memcmp(buf, "0123456789\0\0\0\0\0\0\0\0\0\0", 20) == 0, "extended with zeros");
    int fd = open("f", O_RDWR);
    CHECK_SYS(ftruncate(fd, 5));
    CHECK(get("f", buf, sizeof buf) == 5 && strcmp(buf, "01234") == 0, "shrunk: %s", buf);
    CHECK_SYS(ftruncate(fd, 10));
    CHECK(get("f", buf, sizeof buf) == 10 && memcmp(buf, "01234\0\0\0\0\0", 10) == 0, "what shrinking cut reads as zeros");
    CHECK_ERR(truncate("f", -1), EINVAL);
    CHECK_ERR(ftruncate(fd, -1), EINVAL);
    CHECK_SYS(mkdir("d", 0755));
    CHECK_ERR(truncate("d", 0), EISDIR);
    CHECK_ERR(truncate("missing", 0), ENOENT);
    int ro = open("f", O_RDONLY);
    CHECK_ERR(ftruncate(ro, 0), EINVAL);
    int p[2];
    CHECK_SYS(pipe(p));
    CHECK_ERR(ftruncate(p[1], 0), EINVAL);
    // fallocate: tmpfs allocates, keeps the size, punches holes.
    struct stat st;
    CHECK_SYS(fallocate(fd, 0, 0, 8192));
    CHECK(fstat(fd, &st) == 0 && st.st_size == 8192, "fallocate extends: %ld", (long)st.st_size);
    CHECK(pread(fd, buf, 5, 0) == 5 && memcmp(buf, "01234", 5) == 0, "and keeps the data");
    CHECK_SYS(fallocate(fd, FALLOC_FL_KEEP_SIZE, 8192, 8192));
    CHECK(fstat(fd, &st) == 0 && st.st_size == 8192, "FALLOC_FL_KEEP_SIZE: %ld", (long)st.st_size);
    CHECK_SYS(fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 0, 4096));
    CHECK(fstat(fd, &st) == 0 && st.st_size == 8192 && pread(fd, buf, 5, 0) == 5 && memcmp(buf, "\0\0\0\0\0", 5) == 0, "a punched hole reads as zeros");
    CHECK_ERR(fallocate(fd, FALLOC_FL_PUNCH_HOLE, 0, 4096), EOPNOTSUPP);
    CHECK_ERR(fallocate(fd, 0, 0, 0), EINVAL);
    CHECK_ERR(fallocate(fd, 0, -1, 10), EINVAL);
    CHECK_ERR(fallocate(ro, 0, 0, 10), EBADF);
    CHECK_ERR(fallocate(p[1], 0, 0, 10), ESPIPE);
    int dir = open("d", O_RDONLY);
    CHECK_ERR(fallocate(dir, 0, 0, 10), EBADF);
}

static void test_chmod_and_chown(void) {
    ENTER("chmod");
    int fd = open("f", O_RDWR | O_CREAT, 0644);
    CHECK_SYS(fchmod(fd, 0600));
    CHECK(mode_of("f") == (S_IFREG | 0600), "fchmod: %o", mode_of("f"));
    CHECK_SYS(fchmodat(AT_FDCWD, "f", 04755, 0));
    CHECK(mode_of("f") == (S_IFREG | 04755), "setuid kept for root: %o", mode_of("f"));
    CHECK_SYS(chmod("f", 0170777));
    CHECK(mode_of("f") == (S_IFREG | 0777), "the type bits of the mode are ignored: %o", mode_of("f"));
    CHECK_ERR(chmod("missing", 0644), ENOENT);
    int path = open("f", O_PATH);
    CHECK_ERR(fchmod(path, 0644), EBADF);
    CHECK_SYS(symlink("f", "l"));
    // glibc's fchmodat(AT_SYMLINK_NOFOLLOW) goes through O_PATH and /proc/self/fd: a link is refused.
    CHECK_ERR(fchmodat(AT_FDCWD, "l", 0600, AT_SYMLINK_NOFOLLOW), EOPNOTSUPP);
    CHECK_SYS(fchmodat(AT_FDCWD, "f", 0640, AT_SYMLINK_NOFOLLOW));
    CHECK(mode_of("f") == (S_IFREG | 0640), "through /proc/self/fd: %o", mode_of("f"));
    CHECK_SYS(chmod("l", 0604));
    CHECK(mode_of("f") == (S_IFREG | 0604) && (mode_of("l") & 0777) == 0777, "chmod follows the link");
    // chown.
    struct stat st;
    CHECK_SYS(fchown(fd, 1000, 1001));
    CHECK(fstat(fd, &st) == 0 && st.st_uid == 1000 && st.st_gid == 1001, "fchown: %d:%d", st.st_uid, st.st_gid);
    CHECK_SYS(fchownat(AT_FDCWD, "f", -1, 2000, 0));
    CHECK(fstat(fd, &st) == 0 && st.st_uid == 1000 && st.st_gid == 2000, "-1 keeps the owner: %d:%d", st.st_uid, st.st_gid);
    CHECK_SYS(fchmod(fd, 06755));
    CHECK_SYS(fchown(fd, 0, 0));
    CHECK(mode_of("f") == (S_IFREG | 0755), "chown clears setuid and setgid: %o", mode_of("f"));
    CHECK_SYS(fchmod(fd, 02745));
    CHECK_SYS(fchown(fd, 5, 5));
    CHECK(mode_of("f") == (S_IFREG | 02745), "setgid without group execute is mandatory locking, kept: %o", mode_of("f"));
    CHECK_SYS(fchownat(AT_FDCWD, "l", 7, 7, AT_SYMLINK_NOFOLLOW));
    CHECK(lstat("l", &st) == 0 && st.st_uid == 7 && stat("l", &st) == 0 && st.st_uid == 5, "lchown changes the link only");
    CHECK_SYS(mkdir("d", 02775));
    CHECK(mode_of("d") == (S_IFDIR | 0755), "mkdir drops setgid (and umask 022 applies): %o", mode_of("d"));
    CHECK_SYS(chmod("d", 02775));
    CHECK_SYS(chown("d", 0, 3000));
    CHECK(mode_of("d") == (S_IFDIR | 02775), "a directory keeps setgid: %o", mode_of("d"));
    CHECK_SYS(close(open("d/child", O_CREAT | O_WRONLY, 0644)));
    CHECK_SYS(mkdir("d/sub", 0755));
    CHECK(stat("d/child", &st) == 0 && st.st_gid == 3000, "a setgid directory gives its group: %d", st.st_gid);
    CHECK(stat("d/sub", &st) == 0 && st.st_gid == 3000 && (st.st_mode & S_ISGID), "and its setgid to subdirectories: %o", st.st_mode);
    CHECK_ERR(chown("missing", 0, 0), ENOENT);
}

static void test_utimensat(void) {
    ENTER("utimes");
    CHECK_SYS(put("f", "x", 0644));
    struct timespec set[2] = {{1000000000, 5}, {1100000000, 7}};
    CHECK_SYS(utimensat(AT_FDCWD, "f", set, 0));
    struct stat st;
    CHECK(stat("f", &st) == 0 && st.st_atim.tv_sec == 1000000000 && st.st_atim.tv_nsec == 5, "atime %ld.%09ld", (long)st.st_atim.tv_sec, st.st_atim.tv_nsec);
    CHECK(st.st_mtim.tv_sec == 1100000000 && st.st_mtim.tv_nsec == 7, "mtime %ld.%09ld", (long)st.st_mtim.tv_sec, st.st_mtim.tv_nsec);
    struct timespec before, after;
    clock_gettime(CLOCK_REALTIME, &before);
    CHECK(ns_of(st.st_ctim) > ns_of(st.st_mtim) && st.st_ctim.tv_sec >= before.tv_sec - 5, "setting times sets ctime to now");
    struct timespec omit_now[2] = {{0, UTIME_OMIT}, {0, UTIME_NOW}};
    CHECK_SYS(utimensat(AT_FDCWD, "f", omit_now, 0));
    clock_gettime(CLOCK_REALTIME, &after);
    CHECK(stat("f", &st) == 0 && st.st_atim.tv_sec == 1000000000 && st.st_atim.tv_nsec == 5, "UTIME_OMIT kept atime");
    CHECK(st.st_mtim.tv_sec >= before.tv_sec - 1 && ns_of(st.st_mtim) <= ns_of(after), "UTIME_NOW: mtime %ld, now %ld", (long)st.st_mtim.tv_sec, (long)after.tv_sec);
    CHECK_SYS(utimensat(AT_FDCWD, "f", set, 0));
    CHECK_SYS(utimensat(AT_FDCWD, "f", NULL, 0));
    CHECK(stat("f", &st) == 0 && st.st_atim.tv_sec >= before.tv_sec - 1 && st.st_mtim.tv_sec >= before.tv_sec - 1, "NULL sets both to now");
    // A write moves mtime and ctime forward; a read leaves mtime.
    CHECK_SYS(utimensat(AT_FDCWD, "f", set, 0));
    int fd = open("f", O_RDWR);
    char c;
    CHECK(read(fd, &c, 1) == 1, "read");
    CHECK(fstat(fd, &st) == 0 && st.st_mtim.tv_sec == 1100000000, "a read leaves mtime");
    CHECK(write(fd, "y", 1) == 1, "write");
    CHECK(fstat(fd, &st) == 0 && st.st_mtim.tv_sec >= before.tv_sec - 1, "a write sets mtime to now: %ld", (long)st.st_mtim.tv_sec);
    CHECK_SYS(futimens(fd, set));
    CHECK(fstat(fd, &st) == 0 && st.st_mtim.tv_sec == 1100000000, "futimens");
    // Directories: creating an entry moves the directory's mtime.
    CHECK_SYS(mkdir("d", 0755));
    CHECK_SYS(utimensat(AT_FDCWD, "d", set, 0));
    CHECK_SYS(put("d/new", "", 0644));
    CHECK(stat("d", &st) == 0 && st.st_mtim.tv_sec >= before.tv_sec - 1, "a new entry sets the directory's mtime");
    CHECK_SYS(symlink("f", "l"));
    CHECK_SYS(utimensat(AT_FDCWD, "l", set, AT_SYMLINK_NOFOLLOW));
    CHECK(lstat("l", &st) == 0 && st.st_mtim.tv_sec == 1100000000, "the link's own times");
    struct timespec bad[2] = {{0, 1000000000}, {0, 0}};
    CHECK_ERR(utimensat(AT_FDCWD, "f", bad, 0), EINVAL);
    CHECK_ERR(utimensat(AT_FDCWD, "f", set, 0x1), EINVAL);
    CHECK_ERR(utimensat(AT_FDCWD, "missing", set, 0), ENOENT);
}

static void test_working_directory(void) {
    ENTER("cwd");
    CHECK_SYS(mkdir("d", 0755));
    char buf[256];
    CHECK_SYS(chdir("d"));
    CHECK(getcwd(buf, sizeof buf) && strcmp(buf, "/tmp/files-cwd/d") == 0, "getcwd %s", buf);
    CHECK(syscall(SYS_getcwd, buf, sizeof buf) == 17, "the system call counts the NUL");
    CHECK_SYS(chdir(".."));
    CHECK(getcwd(buf, sizeof buf) && strcmp(buf, "/tmp/files-cwd") == 0, "getcwd %s", buf);
    int fd = open("d", O_RDONLY | O_DIRECTORY);
    CHECK_SYS(fchdir(fd));
    CHECK(getcwd(buf, sizeof buf) && strcmp(buf, "/tmp/files-cwd/d") == 0, "after fchdir %s", buf);
    int pfd = open("/tmp", O_PATH | O_DIRECTORY);
    CHECK_SYS(fchdir(pfd));
    CHECK(getcwd(buf, sizeof buf) && strcmp(buf, "/tmp") == 0, "fchdir of an O_PATH directory: %s", buf);
    CHECK_SYS(chdir("/tmp/files-cwd"));
    CHECK_SYS(put("f", "", 0644));
    int ffd = open("f", O_RDONLY);
    CHECK_ERR(fchdir(ffd), ENOTDIR);
    CHECK_ERR(chdir("f"), ENOTDIR);
    CHECK_ERR(chdir("missing"), ENOENT);
    CHECK_ERR(chdir(""), ENOENT);
    CHECK_ERR(syscall(SYS_getcwd, buf, 3), ERANGE);
    CHECK(getcwd(buf, 0) == NULL && errno == EINVAL, "getcwd with size 0: %s", strerrorname_np(errno));
    CHECK_SYS(symlink("d", "ld"));
    CHECK_SYS(chdir("ld"));
    CHECK(getcwd(buf, sizeof buf) && strcmp(buf, "/tmp/files-cwd/d") == 0, "through a link the real path: %s", buf);
    ssize_t n = readlink("/proc/self/cwd", buf, sizeof buf - 1);
    CHECK(n == 16 && memcmp(buf, "/tmp/files-cwd/d", 16) == 0, "/proc/self/cwd: %zd", n);
    CHECK_SYS(chdir("/"));
    CHECK(getcwd(buf, sizeof buf) && strcmp(buf, "/") == 0, "getcwd %s", buf);
    CHECK_SYS(mkdir("/tmp/files-cwd/gone", 0755));
    CHECK_SYS(chdir("/tmp/files-cwd/gone"));
    CHECK_SYS(rmdir("/tmp/files-cwd/gone"));
    CHECK_ERR(syscall(SYS_getcwd, buf, sizeof buf), ENOENT);
    CHECK_ERR(open("new", O_CREAT | O_WRONLY, 0644), ENOENT);
    CHECK(stat(".", &(struct stat){0}) == 0, "a removed working directory still stats");
}

static void test_umask(void) {
    ENTER("umask");
    CHECK(umask(027) == 022, "Linux starts init with umask 022");
    CHECK(umask(027) == 027, "umask returns the previous mask");
    CHECK_SYS(mkdir("d", 0777));
    CHECK(mode_of("d") == (S_IFDIR | 0750), "mkdir: %o", mode_of("d"));
    CHECK_SYS(mkfifo("p", 0666));
    CHECK(mode_of("p") == (S_IFIFO | 0640), "mkfifo: %o", mode_of("p"));
    CHECK_SYS(symlink("x", "l"));
    CHECK((mode_of("l") & 0777) == 0777, "links are 0777 whatever the mask");
    CHECK(umask(01777) == 027 && umask(0) == 0777, "only the permission bits are kept");
    umask(077);
    char buf[4096];
    CHECK(get("/proc/self/status", buf, sizeof buf) > 0 && strstr(buf, "\nUmask:\t0077\n"), "/proc/self/status Umask");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(umask(0));
    int status;
    waitpid(pid, &status, 0);
    CHECK(WEXITSTATUS(status) == 077, "a child inherits the mask: %o", WEXITSTATUS(status));
}

// ---- fcntl, ioctl, locks ---------------------------------------------------------------------------

static void test_fcntl_descriptors(void) {
    ENTER("fcntl");
    int fd = open("f", O_RDWR | O_CREAT, 0644);
    CHECK(fcntl(fd, F_DUPFD, 20) == 20 && fcntl(20, F_GETFD) == 0, "F_DUPFD");
    CHECK(fcntl(fd, F_DUPFD_CLOEXEC, 20) == 21 && fcntl(21, F_GETFD) == FD_CLOEXEC, "F_DUPFD_CLOEXEC");
    CHECK(fcntl(fd, F_DUPFD, 0) == fd + 1, "the lowest free descriptor");
    CHECK_SYS(fcntl(20, F_SETFD, FD_CLOEXEC));
    CHECK(fcntl(20, F_GETFD) == FD_CLOEXEC && fcntl(fd, F_GETFD) == 0, "FD_CLOEXEC is per descriptor");
    CHECK((fcntl(fd, F_GETFL) & (O_ACCMODE | O_APPEND | O_NONBLOCK)) == O_RDWR, "F_GETFL %#x", fcntl(fd, F_GETFL));
    CHECK_SYS(fcntl(fd, F_SETFL, O_APPEND | O_NONBLOCK | O_WRONLY));
    CHECK((fcntl(fd, F_GETFL) & (O_ACCMODE | O_APPEND | O_NONBLOCK)) == (O_RDWR | O_APPEND | O_NONBLOCK), "F_SETFL keeps the access mode: %#x", fcntl(fd, F_GETFL));
    CHECK(fcntl(20, F_GETFL) & O_APPEND, "the status flags are shared by duplicates");
    CHECK(lseek(20, 7, SEEK_SET) == 7 && lseek(fd, 0, SEEK_CUR) == 7, "and so is the offset");
    CHECK_SYS(fcntl(fd, F_SETFL, 0));
    CHECK_ERR(fcntl(99, F_GETFD), EBADF);
    CHECK_ERR(fcntl(fd, 9999), EINVAL);
    CHECK_ERR(fcntl(fd, F_DUPFD, -1), EINVAL);
    CHECK_ERR(dup3(fd, fd, 0), EINVAL);
    CHECK_ERR(dup3(fd, 30, O_APPEND), EINVAL);
    CHECK(dup2(fd, fd) == fd, "dup2 onto itself");
    CHECK_ERR(dup2(99, 30), EBADF);
    CHECK_ERR(dup2(fd, -1), EBADF);
    int p = open("f", O_PATH);
    CHECK(fcntl(p, F_GETFL) == (O_PATH | O_LARGEFILE), "O_PATH F_GETFL %#x", fcntl(p, F_GETFL));
    CHECK(fcntl(p, F_DUPFD, 0) >= 0, "an O_PATH descriptor can be duplicated");
    CHECK(fcntl(fd, F_GETOWN) == 0, "F_GETOWN");
}

static int lock(int fd, int cmd, short type, off_t start, off_t len) {
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    return fcntl(fd, cmd, &fl);
}

static struct flock query(int fd, int cmd, short type, off_t start, off_t len) {
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    if (fcntl(fd, cmd, &fl) != 0) fl.l_type = -1;
    return fl;
}

// wait_until_sleeping: until /proc says PID sleeps (state S), for at most 2 s, then 20 ms more.
static void wait_until_sleeping(pid_t pid) {
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/%d/stat", pid);
    for (int i = 0; i < 200; i++) {
        if (get(path, buf, sizeof buf) > 0 && strrchr(buf, ')') && strrchr(buf, ')')[2] == 'S') break;
        usleep(10000);
    }
    usleep(20000);
}

static void test_record_locks(void) {
    ENTER("locks");
    int fd = open("f", O_RDWR | O_CREAT, 0644);
    char block[100] = {0};
    CHECK(write(fd, block, 100) == 100, "write");
    CHECK_SYS(lock(fd, F_SETLK, F_WRLCK, 0, 10));
    CHECK_SYS(lock(fd, F_SETLK, F_RDLCK, 50, 10));
    CHECK(query(fd, F_GETLK, F_WRLCK, 0, 10).l_type == F_UNLCK, "a process's own locks never conflict");
    int to_child[2], to_parent[2];
    CHECK_SYS(pipe(to_child));
    CHECK_SYS(pipe(to_parent));
    pid_t parent = getpid();
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int cfd = open("f", O_RDWR);
        struct flock fl = query(cfd, F_GETLK, F_WRLCK, 0, 10);
        int bad = fl.l_type != F_WRLCK || fl.l_pid != parent || fl.l_start != 0 || fl.l_len != 10;
        bad |= (lock(cfd, F_SETLK, F_WRLCK, 5, 1) == 0 || errno != EAGAIN) << 1;
        bad |= (lock(cfd, F_SETLK, F_WRLCK, 10, 10) != 0) << 2;
        bad |= (lock(cfd, F_SETLK, F_RDLCK, 50, 10) != 0) << 3;          // read locks share
        bad |= (lock(cfd, F_SETLK, F_WRLCK, 55, 1) == 0 || errno != EAGAIN) << 4;
        fl = query(cfd, F_GETLK, F_WRLCK, 0, 0);                         // the whole file: the first conflict
        bad |= (fl.l_type != F_WRLCK || fl.l_start != 0) << 5;
        char c = 'r';
        if (write(to_parent[1], &c, 1) != 1) bad |= 1 << 6;
        // Blocks until the parent unlocks, then tells it so.
        if (lock(cfd, F_SETLKW, F_WRLCK, 0, 10) != 0) bad |= 1 << 7;
        c = 'L';
        if (write(to_parent[1], &c, 1) != 1) bad |= 1 << 8;
        if (read(to_child[0], &c, 1) != 1) bad |= 1 << 9;
        _exit(bad);
    }
    char c;
    CHECK(read(to_parent[0], &c, 1) == 1 && c == 'r', "the child's checks ran");
    struct flock fl = query(fd, F_GETLK, F_WRLCK, 10, 10);
    CHECK(fl.l_type == F_WRLCK && fl.l_pid == pid, "the child's lock seen from here: type %d pid match %d", fl.l_type, fl.l_pid == pid);
    usleep(100000);
    CHECK_SYS(lock(fd, F_SETLK, F_UNLCK, 0, 10));
    CHECK(read(to_parent[0], &c, 1) == 1 && c == 'L', "the waiting child got the lock after the unlock");
    CHECK_ERR(lock(fd, F_SETLK, F_WRLCK, 0, 10), EAGAIN);
    CHECK(write(to_child[1], "x", 1) == 1, "release the child");
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the child's checks: failed bits %#x", WEXITSTATUS(status));
    CHECK_SYS(lock(fd, F_SETLK, F_WRLCK, 0, 10));
    // Closing any descriptor of the file drops all of the process's locks on it.
    close(open("f", O_RDONLY));
    fflush(stdout);
    pid = fork();
    if (pid == 0) _exit(query(open("f", O_RDWR), F_GETLK, F_WRLCK, 0, 0).l_type == F_UNLCK ? 0 : 1);
    waitpid(pid, &status, 0);
    CHECK(status == 0, "close released the locks");
    // Bad requests.
    CHECK_ERR(lock(fd, F_SETLK, 77, 0, 1), EINVAL);
    int ro = open("f", O_RDONLY);
    CHECK_ERR(lock(ro, F_SETLK, F_WRLCK, 0, 1), EBADF);
    CHECK_ERR(lock(fd, F_SETLK, F_WRLCK, -5, 1), EINVAL);
    // Deadlock: this process holds [0,1) and waits for [1,2) held by a child waiting for [0,1).
    CHECK_SYS(lock(fd, F_SETLK, F_WRLCK, 0, 1));
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        int cfd = open("f", O_RDWR);
        lock(cfd, F_SETLK, F_WRLCK, 1, 1);
        if (write(to_parent[1], "h", 1) != 1) _exit(1);
        _exit(lock(cfd, F_SETLKW, F_WRLCK, 0, 1) == 0 ? 0 : 2);
    }
    CHECK(read(to_parent[0], &c, 1) == 1, "child ready");
    wait_until_sleeping(pid);
    CHECK_ERR(lock(fd, F_SETLKW, F_WRLCK, 1, 1), EDEADLK);
    CHECK_SYS(lock(fd, F_SETLK, F_UNLCK, 0, 1));
    waitpid(pid, &status, 0);
    CHECK(status == 0, "the child got its lock: %#x", status);
}

static void test_ofd_locks(void) {
    ENTER("ofd");
    int a = open("f", O_RDWR | O_CREAT, 0644);
    int b = open("f", O_RDWR);
    CHECK_SYS(lock(a, F_OFD_SETLK, F_WRLCK, 0, 10));
    CHECK_ERR(lock(b, F_OFD_SETLK, F_WRLCK, 5, 1), EAGAIN);
    struct flock fl = query(b, F_OFD_GETLK, F_RDLCK, 0, 100);
    CHECK(fl.l_type == F_WRLCK && fl.l_pid == -1 && fl.l_start == 0 && fl.l_len == 10, "F_OFD_GETLK: type %d pid %d", fl.l_type, fl.l_pid);
    int dup_a = dup(a);
    CHECK_SYS(lock(dup_a, F_OFD_SETLK, F_WRLCK, 0, 10));
    struct flock withpid = {.l_type = F_WRLCK, .l_whence = SEEK_SET, .l_start = 20, .l_len = 1, .l_pid = 1};
    CHECK_ERR(fcntl(a, F_OFD_SETLK, &withpid), EINVAL);
    CHECK_ERR(lock(b, F_SETLK, F_WRLCK, 5, 1), EAGAIN); // a process lock meets the OFD lock too
    close(b); // no effect on a's lock (it belongs to a's open file description)
    b = open("f", O_RDWR);
    CHECK_ERR(lock(b, F_OFD_SETLK, F_WRLCK, 5, 1), EAGAIN);
    close(dup_a);
    CHECK_ERR(lock(b, F_OFD_SETLK, F_WRLCK, 5, 1), EAGAIN);
    close(a);
    CHECK_SYS(lock(b, F_OFD_SETLK, F_WRLCK, 5, 1));
    // Inherited across fork: the child's descriptor is the same description.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(lock(b, F_OFD_SETLK, F_WRLCK, 0, 10) == 0 ? 0 : 1);
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "a forked child shares the description's OFD lock");
    int c = open("f", O_RDWR);
    CHECK_ERR(lock(c, F_OFD_SETLK, F_WRLCK, 0, 1), EAGAIN); // the child's lock outlives the child
}

static void test_ioctl(void) {
    ENTER("ioctl");
    CHECK_SYS(put("f", "0123456789", 0644));
    int fd = open("f", O_RDONLY);
    struct termios t;
    CHECK_ERR(ioctl(fd, TCGETS, &t), ENOTTY);
    int n = -1;
    CHECK(ioctl(fd, FIONREAD, &n) == 0 && n == 10, "FIONREAD of a file: %d", n);
    CHECK(lseek(fd, 3, SEEK_SET) == 3 && ioctl(fd, FIONREAD, &n) == 0 && n == 7, "FIONREAD counts from the offset: %d", n);
    int p[2];
    CHECK_SYS(pipe(p));
    CHECK(write(p[1], "1234567", 7) == 7 && ioctl(p[0], FIONREAD, &n) == 0 && n == 7, "FIONREAD of a pipe: %d", n);
    CHECK_SYS(ioctl(fd, FIOCLEX));
    CHECK(fcntl(fd, F_GETFD) == FD_CLOEXEC, "FIOCLEX");
    CHECK_SYS(ioctl(fd, FIONCLEX));
    CHECK(fcntl(fd, F_GETFD) == 0, "FIONCLEX");
    int on = 1;
    CHECK_SYS(ioctl(p[0], FIONBIO, &on));
    CHECK(fcntl(p[0], F_GETFL) & O_NONBLOCK, "FIONBIO");
    CHECK_ERR(ioctl(99, FIONREAD, &n), EBADF);
    int null = open("/dev/null", O_RDWR);
    CHECK_ERR(ioctl(null, TCGETS, &t), ENOTTY);
    CHECK_ERR(ioctl(fd, 0x12345678, &n), ENOTTY);
    int dir = open(".", O_RDONLY);
    CHECK_ERR(ioctl(dir, FIONREAD, &n), ENOTTY);
}

static void test_flock(void) {
    ENTER("flock");
    int a = open("f", O_RDWR | O_CREAT, 0644);
    int b = open("f", O_RDWR);
    CHECK_SYS(flock(a, LOCK_EX));
    CHECK_ERR(flock(b, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    CHECK_ERR(flock(b, LOCK_SH | LOCK_NB), EWOULDBLOCK);
    int a2 = dup(a);
    CHECK_SYS(flock(a2, LOCK_EX | LOCK_NB));
    CHECK_SYS(flock(a, LOCK_UN));
    CHECK_SYS(flock(b, LOCK_SH | LOCK_NB));
    CHECK_SYS(flock(a, LOCK_SH | LOCK_NB));
    CHECK_ERR(flock(a, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    CHECK_SYS(flock(b, LOCK_UN));
    CHECK_SYS(flock(a, LOCK_EX | LOCK_NB));
    // A forked child's descriptor is the same description: its unlock is the parent's.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) _exit(flock(a, LOCK_UN) == 0 ? 0 : 1);
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "child unlock");
    CHECK_SYS(flock(b, LOCK_EX | LOCK_NB));
    // Independent of record locks.
    struct flock fl = {.l_type = F_WRLCK, .l_whence = SEEK_SET};
    CHECK_SYS(fcntl(a, F_SETLK, &fl));
    CHECK_ERR(flock(a, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    CHECK_SYS(flock(b, LOCK_UN));
    CHECK_SYS(flock(a, LOCK_EX | LOCK_NB)); // the record lock is no flock lock
    CHECK_SYS(flock(a, LOCK_UN));
    // A blocking lock waits for a closing holder.
    int ready[2];
    CHECK_SYS(pipe(ready));
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        int c = open("f", O_RDWR);
        flock(c, LOCK_EX);
        if (write(ready[1], "x", 1) != 1) _exit(1);
        usleep(150000);
        _exit(0); // exit closes c and drops the lock
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1, "child holds the lock");
    CHECK_SYS(flock(a, LOCK_UN));
    CHECK_ERR(flock(a, LOCK_EX | LOCK_NB), EWOULDBLOCK);
    CHECK_SYS(flock(a, LOCK_EX));
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child status %#x", status);
    CHECK_ERR(flock(a, 0), EINVAL);
    CHECK_ERR(flock(a, LOCK_SH | LOCK_EX), EINVAL);
    CHECK_ERR(flock(99, LOCK_SH), EBADF);
    int p = open("f", O_PATH);
    CHECK_ERR(flock(p, LOCK_SH), EBADF);
}

static void test_sync_family(void) {
    ENTER("sync");
    int fd = open("f", O_RDWR | O_CREAT, 0644);
    CHECK(write(fd, "x", 1) == 1, "write");
    CHECK_SYS(fsync(fd));
    CHECK_SYS(fdatasync(fd));
    sync();
    CHECK_SYS(syncfs(fd));
    CHECK_SYS(sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE));
    CHECK_ERR(sync_file_range(fd, 0, 0, 0x10), EINVAL);
    int dir = open(".", O_RDONLY);
    CHECK_SYS(fsync(dir));
    int p[2];
    CHECK_SYS(pipe(p));
    CHECK_ERR(fsync(p[1]), EINVAL);
    CHECK_ERR(fdatasync(p[1]), EINVAL);
    CHECK_ERR(fsync(99), EBADF);
    int null = open("/dev/null", O_RDWR);
    CHECK_ERR(fsync(null), EINVAL);
    int ro = open("f", O_RDONLY);
    CHECK_SYS(fsync(ro));
}

// Extended attributes of a tmpfs file that has none, as Linux 6.1's tmpfs answers by the name's
// namespace: it has handlers for "security.", "trusted." and the POSIX ACLs (which find nothing:
// ENODATA) and none for "user." (EOPNOTSUPP; tmpfs keeps user attributes only from Linux 6.6),
// and "user." names are refused before that on a symbolic link; list is empty. The name is read
// first (ERANGE for an empty one or one of 256 bytes, EFAULT for a bad pointer, a name that ends
// just before an unmapped page read whole), after the file is found.
static void test_xattr_without_attributes(void) {
    const char *path = "/tmp/xattr-file", *link = "/tmp/xattr-link";
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0644);
    CHECK(fd >= 0, "create");
    CHECK_SYS(symlink(path, link));
    char value[64];
    CHECK_ERR(getxattr(path, "security.selinux", value, sizeof value), ENODATA);
    CHECK_ERR(lgetxattr(path, "system.posix_acl_access", value, sizeof value), ENODATA);
    CHECK_ERR(fgetxattr(fd, "trusted.overlay", value, sizeof value), ENODATA);
    CHECK_ERR(getxattr(path, "user.comment", value, sizeof value), EOPNOTSUPP);
    CHECK_ERR(getxattr(path, "nonamespace", value, sizeof value), EOPNOTSUPP);
    CHECK_ERR(getxattr(link, "user.comment", value, sizeof value), EOPNOTSUPP);
    CHECK_ERR(lgetxattr(link, "user.comment", value, sizeof value), ENODATA);
    CHECK_ERR(lgetxattr(link, "security.selinux", value, sizeof value), ENODATA);
    CHECK(listxattr(path, value, sizeof value) == 0, "list: empty");
    CHECK(flistxattr(fd, NULL, 0) == 0, "list size: 0");
    CHECK(llistxattr(link, NULL, 0) == 0, "list of the link: empty");
    CHECK_ERR(setxattr(path, "user.comment", "x", 1, 0), EOPNOTSUPP);
    CHECK_ERR(fsetxattr(fd, "user.comment", "x", 1, XATTR_CREATE), EOPNOTSUPP);
    CHECK_ERR(lsetxattr(link, "user.comment", "x", 1, 0), EPERM);
    CHECK_ERR(setxattr(path, "user.comment", "x", 1, 4), EINVAL);
    CHECK_ERR(removexattr(path, "user.comment"), EOPNOTSUPP);
    CHECK_ERR(removexattr(path, "security.selinux"), ENODATA);
    CHECK_ERR(lremovexattr(link, "user.comment"), EPERM);
    CHECK_ERR(getxattr(path, "", value, sizeof value), ERANGE);
    char longname[300];
    memset(longname, 'a', sizeof longname);
    memcpy(longname, "security.", 9);
    longname[256] = 0;
    CHECK_ERR(getxattr(path, longname, value, sizeof value), ERANGE);
    longname[255] = 0;
    CHECK_ERR(getxattr(path, longname, value, sizeof value), ENODATA);
    CHECK_ERR(getxattr(path, (const char *)8, value, sizeof value), EFAULT);
    // A name whose terminator is the last byte of a page followed by an unmapped one.
    long page = sysconf(_SC_PAGESIZE);
    char *two = mmap(NULL, 2 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(two != MAP_FAILED, "mmap");
    CHECK_SYS(munmap(two + page, page));
    char *name = two + page - sizeof "security.edge";
    memcpy(name, "security.edge", sizeof "security.edge");
    CHECK_ERR(getxattr(path, name, value, sizeof value), ENODATA);
    two[page - 1] = 'x';
    CHECK_ERR(getxattr(path, two + page - 2, value, sizeof value), EFAULT);
    CHECK_ERR(fgetxattr(1000, "security.selinux", value, sizeof value), EBADF);
    CHECK_ERR(getxattr("/tmp/no-such-file", (const char *)8, value, sizeof value), ENOENT);
    munmap(two, page);
    close(fd);
    unlink(link);
    unlink(path);
}

static void test_statfs(void) {
    struct statfs s, t;
    CHECK_SYS(statfs("/", &s));
    printf("    statfs(/): f_type %#lx\n", (unsigned long)s.f_type);
    CHECK(s.f_type == TMPFS_MAGIC || s.f_type == RAMFS_MAGIC, "/ is rootfs (tmpfs or ramfs): %#lx", (unsigned long)s.f_type);
    CHECK(s.f_bsize == 4096 && s.f_namelen == 255, "bsize %ld namelen %ld", (long)s.f_bsize, (long)s.f_namelen);
    CHECK(statfs("/proc", &s) == 0 && s.f_type == PROC_SUPER_MAGIC, "/proc: %#lx", (unsigned long)s.f_type);
    CHECK(statfs("/proc/self/status", &s) == 0 && s.f_type == PROC_SUPER_MAGIC, "/proc/self/status: %#lx", (unsigned long)s.f_type);
    CHECK(statfs("/tmp", &s) == 0 && s.f_type == TMPFS_MAGIC, "/tmp: %#lx", (unsigned long)s.f_type);
    CHECK(s.f_blocks > 0 && s.f_bfree <= s.f_blocks && s.f_bavail <= s.f_bfree, "/tmp blocks %ld free %ld", (long)s.f_blocks, (long)s.f_bfree);
    CHECK(statfs("/sys", &s) == 0 && s.f_type == SYSFS_MAGIC, "/sys: %#lx", (unsigned long)s.f_type);
    CHECK_SYS(statfs("/dev", &s));
    printf("    statfs(/dev): f_type %#lx\n", (unsigned long)s.f_type);
    int fd = open("/tmp/files-statfs", O_CREAT | O_RDWR, 0644);
    CHECK_SYS(fstatfs(fd, &t));
    CHECK_SYS(statfs("/tmp", &s));
    CHECK(t.f_type == TMPFS_MAGIC && t.f_fsid.__val[0] == s.f_fsid.__val[0] && t.f_blocks == s.f_blocks, "fstatfs of a /tmp file is /tmp's");
    // Writing a megabyte into /tmp takes blocks from it.
    char block[4096] = {1};
    for (int i = 0; i < 256; i++) CHECK(write(fd, block, sizeof block) == sizeof block, "write");
    CHECK_SYS(fstatfs(fd, &t));
    CHECK(s.f_bfree - t.f_bfree >= 256, "1 MiB written: %ld blocks fewer free", (long)(s.f_bfree - t.f_bfree));
    CHECK_ERR(statfs("/missing", &s), ENOENT);
    CHECK_ERR(fstatfs(99, &s), EBADF);
}

// ---- copying between descriptors -------------------------------------------------------------------

static void test_sendfile_copy_splice(void) {
    ENTER("copy");
    static char pattern[10000], got[10000];
    for (int i = 0; i < 10000; i++) pattern[i] = (char)('a' + i % 26 + i / 2600);
    int src = open("src", O_RDWR | O_CREAT, 0644);
    CHECK(write(src, pattern, sizeof pattern) == sizeof pattern && lseek(src, 0, SEEK_SET) == 0, "write");
    int dst = open("dst", O_RDWR | O_CREAT, 0644);
    off_t off = 100;
    CHECK(sendfile(dst, src, &off, 1000) == 1000 && off == 1100, "sendfile with an offset: off %ld", (long)off);
    CHECK(lseek(src, 0, SEEK_CUR) == 0, "the source offset did not move");
    CHECK(pread(dst, got, 1000, 0) == 1000 && memcmp(got, pattern + 100, 1000) == 0, "copied");
    CHECK(sendfile(dst, src, NULL, 20000) == 10000 && lseek(src, 0, SEEK_CUR) == 10000, "to the end: a short count");
    CHECK(sendfile(dst, src, NULL, 100) == 0, "at the end: 0");
    int p[2];
    CHECK_SYS(pipe(p));
    off = 5000;
    CHECK(sendfile(p[1], src, &off, 100) == 100 && read(p[0], got, 100) == 100 && memcmp(got, pattern + 5000, 100) == 0, "sendfile into a pipe");
    CHECK(write(p[1], "x", 1) == 1, "write");
    CHECK_ERR(sendfile(dst, p[0], NULL, 1), EINVAL);
    int ro = open("dst", O_RDONLY);
    CHECK_ERR(sendfile(ro, src, &off, 1), EBADF);
    // copy_file_range.
    int dst2 = open("dst2", O_RDWR | O_CREAT, 0644);
    loff_t in = 0, outo = 0;
    ssize_t total = 0, n;
    while ((n = copy_file_range(src, &in, dst2, &outo, sizeof pattern - total, 0)) > 0) total += n;
    CHECK(total == 10000 && in == 10000 && outo == 10000, "copy_file_range: %zd", total);
    CHECK(pread(dst2, got, 10000, 0) == 10000 && memcmp(got, pattern, 10000) == 0, "the same bytes");
    in = 0;
    CHECK_ERR(copy_file_range(src, &in, dst2, &outo, 10, 1), EINVAL);
    in = 0, outo = 5;
    CHECK_ERR(copy_file_range(src, &in, src, &outo, 10, 0), EINVAL);
    CHECK_ERR(copy_file_range(p[0], NULL, dst2, NULL, 1, 0), EINVAL);
    CHECK(copy_file_range(src, &(loff_t){20000}, dst2, &(loff_t){0}, 10, 0) == 0, "past the end copies nothing");
    // splice and tee.
    char drain[4096];
    CHECK(read(p[0], drain, sizeof drain) == 1, "drain");
    loff_t soff = 0;
    CHECK(splice(src, &soff, p[1], NULL, 4096, 0) == 4096 && soff == 4096, "splice file to pipe");
    int q[2];
    CHECK_SYS(pipe(q));
    CHECK(tee(p[0], q[1], 4096, 0) == 4096, "tee");
    loff_t doff = 0;
    int dst3 = open("dst3", O_RDWR | O_CREAT, 0644);
    CHECK(splice(p[0], NULL, dst3, &doff, 4096, 0) == 4096 && doff == 4096, "splice pipe to file");
    CHECK(read(q[0], got, 4096) == 4096 && memcmp(got, pattern, 4096) == 0, "tee's copy");
    CHECK(pread(dst3, got, 4096, 0) == 4096 && memcmp(got, pattern, 4096) == 0, "splice's copy");
    CHECK_ERR(splice(src, NULL, dst3, NULL, 10, 0), EINVAL);
    CHECK_ERR(splice(src, NULL, p[1], &doff, 10, 0), ESPIPE);
    CHECK_ERR(tee(src, q[1], 10, 0), EINVAL);
    CHECK_ERR(tee(p[0], p[1], 10, 0), EINVAL);
    CHECK_ERR(splice(p[0], NULL, q[1], NULL, 10, SPLICE_F_NONBLOCK), EAGAIN);
}

static void test_memfd_as_a_file(void) {
    int fd = memfd_create("files-memfd", 0);
    CHECK_SYS(fd);
    struct stat st;
    CHECK(fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (st.st_mode & 07777) == 0777 && st.st_size == 0 && st.st_nlink == 0, "fstat mode %o nlink %ld", st.st_mode, (long)st.st_nlink);
    CHECK(write(fd, "memory", 6) == 6 && lseek(fd, 0, SEEK_SET) == 0, "write");
    char buf[64];
    CHECK(read(fd, buf, sizeof buf) == 6 && memcmp(buf, "memory", 6) == 0, "read back");
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    CHECK(strcmp(buf, "/memfd:files-memfd (deleted)") == 0, "the link says %s", buf);
    int again = open(path, O_RDWR);
    CHECK_SYS(again);
    CHECK(lseek(again, 0, SEEK_CUR) == 0 && read(again, buf, 6) == 6 && memcmp(buf, "memory", 6) == 0, "reopened through /proc: its own offset");
    CHECK(pwrite(again, "M", 1, 0) == 1 && pread(fd, buf, 1, 0) == 1 && buf[0] == 'M', "the same file");
    CHECK_SYS(ftruncate(fd, 10000));
    CHECK(fstat(again, &st) == 0 && st.st_size == 10000, "size %ld", (long)st.st_size);
    int cl = memfd_create("x", MFD_CLOEXEC);
    CHECK(fcntl(cl, F_GETFD) == FD_CLOEXEC, "MFD_CLOEXEC");
    struct statfs sf;
    CHECK(fstatfs(fd, &sf) == 0 && sf.f_type == TMPFS_MAGIC, "a memfd is on tmpfs: %#lx", (unsigned long)sf.f_type);
}

static void test_proc_fd_links(void) {
    ENTER("fdlinks");
    char buf[128], path[64];
    int f = open("file", O_RDWR | O_CREAT, 0644);
    snprintf(path, sizeof path, "/proc/self/fd/%d", f);
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    CHECK(strcmp(buf, "/tmp/files-fdlinks/file") == 0, "file: %s", buf);
    CHECK_SYS(unlink("file"));
    n = readlink(path, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    CHECK(strcmp(buf, "/tmp/files-fdlinks/file (deleted)") == 0, "unlinked: %s", buf);
    int p[2];
    CHECK_SYS(pipe(p));
    char other[128];
    snprintf(path, sizeof path, "/proc/self/fd/%d", p[0]);
    n = readlink(path, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    snprintf(path, sizeof path, "/proc/self/fd/%d", p[1]);
    ssize_t m = readlink(path, other, sizeof other - 1);
    other[m > 0 ? m : 0] = 0;
    CHECK(strncmp(buf, "pipe:[", 6) == 0 && buf[n - 1] == ']' && strcmp(buf, other) == 0, "pipe: %s and %s", buf, other);
    int null = open("/dev/null", O_RDONLY);
    snprintf(path, sizeof path, "/proc/self/fd/%d", null);
    n = readlink(path, buf, sizeof buf - 1);
    CHECK(n == 9 && memcmp(buf, "/dev/null", 9) == 0, "/dev/null");
    int dir = open("/tmp", O_RDONLY | O_DIRECTORY);
    snprintf(path, sizeof path, "/proc/self/fd/%d", dir);
    n = readlink(path, buf, sizeof buf - 1);
    CHECK(n == 4 && memcmp(buf, "/tmp", 4) == 0, "a directory");
    // The directory lists exactly the open descriptors (and its own).
    DIR *d = opendir("/proc/self/fd");
    CHECK(d != NULL, "opendir: %s", strerrorname_np(errno));
    int listed[64] = {0}, count = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        if (e->d_name[0] == '.') continue;
        int fd = atoi(e->d_name);
        CHECK(e->d_type == DT_LNK, "fd %d type %d", fd, e->d_type);
        if (fd < 64) listed[fd] = 1;
        count++;
    }
    int open_count = 0;
    for (int fd = 0; fd < 64; fd++) {
        int is_open = fcntl(fd, F_GETFD) >= 0;
        open_count += is_open;
        CHECK(listed[fd] == is_open, "fd %d: listed %d, open %d", fd, listed[fd], is_open);
    }
    CHECK(count == open_count, "%d listed, %d open", count, open_count);
    closedir(d);
    // Opening the link opens the file anew.
    CHECK_SYS(put("g", "through proc", 0644));
    int g = open("g", O_RDONLY);
    snprintf(path, sizeof path, "/proc/self/fd/%d", g);
    CHECK(get(path, buf, sizeof buf) == 12 && strcmp(buf, "through proc") == 0, "read through the link");
    int w = open(path, O_WRONLY | O_APPEND);
    CHECK(w >= 0 && write(w, "!", 1) == 1, "reopen for writing a read-only descriptor's file");
    CHECK_ERR(readlink("/proc/self/fd/99", buf, sizeof buf), ENOENT);
    snprintf(path, sizeof path, "/proc/%d/fd/%d", getpid(), g);
    CHECK(readlink(path, buf, sizeof buf) == 20, "/proc/PID/fd");
}

// ---- executing -------------------------------------------------------------------------------------

static void test_shebang_scripts(void) {
    ENTER("script");
    char out[256];
    CHECK_SYS(put("s", "#!/busybox sh\necho script:$0:$1\n", 0755));
    char *argv_s[] = {"s", "arg", NULL};
    int st = run_child("/tmp/files-script/s", argv_s, out, sizeof out);
    CHECK(st == 0 && strcmp(out, "script:/tmp/files-script/s:arg\n") == 0, "status %#x, output %s", st, out);
    // The interpreter's argv: its path, the optional argument, the script's path, the rest.
    CHECK_SYS(put("e", "#!/busybox echo\n", 0755));
    char *argv_e[] = {"ignored", "one", "two", NULL};
    st = run_child("/tmp/files-script/e", argv_e, out, sizeof out);
    CHECK(st == 0 && strcmp(out, "/tmp/files-script/e one two\n") == 0, "status %#x, output %s", st, out);
    CHECK_SYS(put("w", "#!  /busybox   echo  \t\n", 0755));
    st = run_child("/tmp/files-script/w", argv_e, out, sizeof out);
    CHECK(st == 0 && strcmp(out, "/tmp/files-script/w one two\n") == 0, "blanks around: status %#x, output %s", st, out);
    CHECK_SYS(put("two", "#!/busybox echo a b\n", 0755));
    st = run_child("/tmp/files-script/two", argv_e, out, sizeof out);
    CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 127, "the rest of the line is one argument (busybox has no applet 'echo a b'): status %#x", st);
    // A script may name another script as its interpreter.
    CHECK_SYS(put("nested", "#!/tmp/files-script/s\n", 0755));
    char *argv_n[] = {"nested", "x", NULL};
    st = run_child("/tmp/files-script/nested", argv_n, out, sizeof out);
    CHECK(st == 0 && strcmp(out, "script:/tmp/files-script/s:/tmp/files-script/nested\n") == 0, "status %#x, output %s", st, out);
    CHECK_SYS(put("missing", "#!/nonexistent\n", 0755));
    CHECK_SYS(put("noexec", "#!/busybox sh\n", 0644));
    CHECK_SYS(put("text", "echo plain text\n", 0755));
    CHECK_SYS(put("empty", "#!\n", 0755));
    CHECK_SYS(put("nothing", "", 0755));
    CHECK_SYS(mkdir("dir", 0755));
    struct {
        const char *path;
        int err;
    } refused[] = {{"/tmp/files-script/missing", ENOENT}, {"/tmp/files-script/noexec", EACCES}, {"/tmp/files-script/text", ENOEXEC},
                   {"/tmp/files-script/empty", ENOEXEC},  {"/tmp/files-script/nothing", ENOEXEC}, {"/tmp/files-script/dir", EACCES},
                   {"/tmp/files-script/absent", ENOENT},  {"/tmp/files-script/s/x", ENOTDIR}};
    for (unsigned i = 0; i < sizeof refused / sizeof refused[0]; i++) {
        st = run_child(refused[i].path, argv_s, out, sizeof out);
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 100 + refused[i].err, "%s: status %#x (want errno %s)", refused[i].path, st, strerrorname_np(refused[i].err));
    }
}

// A program's file and writers exclude each other (ETXTBSY), as Linux 6.1's i_writecount: a
// file open for writing cannot be run, and a running program's file cannot be opened for writing
// or truncated, until the program ends; reading it is fine.
static void copy_file(const char *from, const char *to, int keep_open_fd[1]) {
    int in = open(from, O_RDONLY);
    int out = open(to, O_WRONLY | O_CREAT | O_TRUNC, 0755);
    CHECK(in >= 0 && out >= 0, "open %s and %s", from, to);
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0) CHECK(write(out, buf, n) == n, "write");
    close(in);
    if (keep_open_fd) {
        keep_open_fd[0] = out;
    } else {
        close(out);
    }
}

static void test_text_busy(void) {
    const char *copy = "/tmp/busybox-copy";
    int writer;
    copy_file("/busybox", copy, &writer);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        execl(copy, "true", (char *)NULL);
        _exit(errno == ETXTBSY ? 42 : 1);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 42, "exec of a file open for writing: ETXTBSY (%#x)", status);
    close(writer);
    // Now run it: `cat` blocks on a pipe; the close-on-exec end tells when the exec happened.
    int in[2], sync[2];
    CHECK_SYS(pipe(in));
    CHECK_SYS(pipe2(sync, O_CLOEXEC));
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        dup2(in[0], 0);
        close(in[0]);
        close(in[1]);
        close(sync[0]);
        execl(copy, "cat", (char *)NULL);
        _exit(1);
    }
    close(in[0]);
    close(sync[1]);
    char c;
    CHECK(read(sync[0], &c, 1) == 0, "the child ran its program");
    close(sync[0]);
    CHECK_ERR(open(copy, O_WRONLY), ETXTBSY);
    CHECK_ERR(open(copy, O_RDWR), ETXTBSY);
    CHECK_ERR(open(copy, O_RDONLY | O_TRUNC), ETXTBSY);
    CHECK_ERR(truncate(copy, 0), ETXTBSY);
    int reader = open(copy, O_RDONLY);
    CHECK(reader >= 0, "reading it is fine");
    close(reader);
    close(in[1]);
    waitpid(pid, &status, 0);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "cat ended: %#x", status);
    int fd = open(copy, O_WRONLY);
    CHECK(fd >= 0, "writable again once it ended: %s", strerror(errno));
    close(fd);
    CHECK_SYS(unlink(copy));
}

static void test_execveat(void) {
    char out[256];
    int fd = open("/busybox", O_RDONLY | O_CLOEXEC);
    CHECK_SYS(fd);
    char *argv[] = {"busybox", "echo", "via-fd", NULL};
    int st = run_childat(fd, "", argv, AT_EMPTY_PATH, out, sizeof out);
    CHECK(st == 0 && strcmp(out, "via-fd\n") == 0, "AT_EMPTY_PATH: status %#x output %s", st, out);
    int path = open("/busybox", O_PATH);
    st = run_childat(path, "", argv, AT_EMPTY_PATH, out, sizeof out);
    CHECK(st == 0 && strcmp(out, "via-fd\n") == 0, "an O_PATH descriptor: status %#x output %s", st, out);
    int root = open("/", O_RDONLY | O_DIRECTORY);
    st = run_childat(root, "busybox", argv, 0, out, sizeof out);
    CHECK(st == 0 && strcmp(out, "via-fd\n") == 0, "relative to a directory: status %#x", st);
    st = run_childat(fd, "", argv, 0, out, sizeof out);
    CHECK(WEXITSTATUS(st) == 100 + ENOENT, "an empty path without AT_EMPTY_PATH: %#x", st);
    st = run_childat(fd, "x", argv, AT_EMPTY_PATH, out, sizeof out);
    CHECK(WEXITSTATUS(st) == 100 + ENOTDIR, "a path relative to a file: %#x", st);
    st = run_childat(fd, "", argv, 0x4000000 | AT_EMPTY_PATH, out, sizeof out);
    CHECK(WEXITSTATUS(st) == 100 + EINVAL, "unknown flags: %#x", st);
    // A script opened close-on-exec has no path its interpreter could open.
    CHECK_SYS(put("/tmp/files-execveat", "#!/busybox sh\necho x\n", 0755));
    int script = open("/tmp/files-execveat", O_RDONLY | O_CLOEXEC);
    st = run_childat(script, "", argv, AT_EMPTY_PATH, out, sizeof out);
    CHECK(WEXITSTATUS(st) == 100 + ENOENT, "a close-on-exec script: %#x", st);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1);
        fexecve(fd, argv, (char *[]){NULL});
        _exit(100 + errno);
    }
    waitpid(pid, &st, 0);
    CHECK(st == 0, "fexecve: %#x", st);
}

static void test_rlimit_nofile(void) {
    struct rlimit rl;
    CHECK_SYS(getrlimit(RLIMIT_NOFILE, &rl));
    CHECK(rl.rlim_cur == 1024 && rl.rlim_max == 4096, "Linux's default: %ld/%ld", (long)rl.rlim_cur, (long)rl.rlim_max);
    rl.rlim_cur = rl.rlim_max = 16;
    CHECK_SYS(setrlimit(RLIMIT_NOFILE, &rl));
    int last = -1, fd;
    while ((fd = open("/dev/null", O_RDONLY)) >= 0) {
        CHECK(fd == last + 1 || last == -1, "the lowest free descriptor: %d after %d", fd, last);
        last = fd;
    }
    CHECK(errno == EMFILE && last == 15, "stopped at %d with %s", last, strerrorname_np(errno));
    CHECK_ERR(dup(0), EMFILE);
    int p[2];
    CHECK_ERR(pipe(p), EMFILE);
    CHECK_ERR(fcntl(0, F_DUPFD, 3), EMFILE);
    CHECK_ERR(fcntl(0, F_DUPFD, 16), EINVAL);
    CHECK_ERR(dup2(0, 16), EBADF);
    CHECK(dup2(0, 15) == 15, "dup2 onto an open descriptor below the limit");
    CHECK_SYS(close(15));
    CHECK(dup(0) == 15, "a freed one is reused");
    rl.rlim_cur = 32, rl.rlim_max = 16;
    CHECK_ERR(setrlimit(RLIMIT_NOFILE, &rl), EINVAL);
    rl.rlim_cur = rl.rlim_max = 1 << 30;
    CHECK_ERR(setrlimit(RLIMIT_NOFILE, &rl), EPERM); // above fs.nr_open (1048576)
    rl.rlim_cur = rl.rlim_max = 8;
    CHECK_SYS(setrlimit(RLIMIT_NOFILE, &rl));
    CHECK(fcntl(15, F_GETFD) >= 0, "lowering the limit keeps higher open descriptors");
    CHECK_ERR(dup(0), EMFILE);
}

// ---- devices, /tmp ---------------------------------------------------------------------------------

static void test_dev_nodes(void) {
    struct {
        const char *path;
        unsigned major, minor;
    } devs[] = {{"/dev/null", 1, 3},   {"/dev/zero", 1, 5}, {"/dev/full", 1, 7},    {"/dev/random", 1, 8},
                {"/dev/urandom", 1, 9}, {"/dev/tty", 5, 0},  {"/dev/console", 5, 1}};
    for (unsigned i = 0; i < sizeof devs / sizeof devs[0]; i++) {
        struct stat st;
        CHECK(stat(devs[i].path, &st) == 0, "%s: %s", devs[i].path, strerrorname_np(errno));
        CHECK(S_ISCHR(st.st_mode) && major(st.st_rdev) == devs[i].major && minor(st.st_rdev) == devs[i].minor, "%s: mode %o rdev %u:%u", devs[i].path, st.st_mode, major(st.st_rdev), minor(st.st_rdev));
    }
    char buf[4096];
    int null = open("/dev/null", O_RDWR);
    CHECK(read(null, buf, sizeof buf) == 0 && write(null, buf, 5) == 5 && lseek(null, 100, SEEK_SET) == 0, "/dev/null");
    int zero = open("/dev/zero", O_RDWR);
    memset(buf, 1, sizeof buf);
    CHECK(read(zero, buf, sizeof buf) == sizeof buf && buf[0] == 0 && buf[4095] == 0 && write(zero, buf, 10) == 10, "/dev/zero");
    char *m = mmap(NULL, 8192, PROT_READ | PROT_WRITE, MAP_PRIVATE, zero, 0);
    CHECK(m != MAP_FAILED && m[100] == 0, "a private mapping of /dev/zero");
    m[0] = 5;
    char *s = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, zero, 0);
    CHECK(s != MAP_FAILED, "a shared mapping of /dev/zero");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        s[0] = 'c';
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    CHECK(s[0] == 'c', "a shared /dev/zero mapping is shared memory with a child");
    int full = open("/dev/full", O_RDWR);
    CHECK_ERR(write(full, "x", 1), ENOSPC);
    memset(buf, 1, 16);
    CHECK(read(full, buf, 16) == 16 && buf[15] == 0, "/dev/full reads zeros");
    int ur = open("/dev/urandom", O_RDWR);
    char a[64] = {0}, b[64] = {0}, zeros[64] = {0};
    CHECK(read(ur, a, 64) == 64 && read(ur, b, 64) == 64 && memcmp(a, b, 64) != 0 && memcmp(a, zeros, 64) != 0, "/dev/urandom");
    int r = open("/dev/random", O_RDONLY);
    CHECK(read(r, a, 16) == 16, "/dev/random");
    CHECK(write(ur, "seed", 4) == 4, "writing to /dev/urandom mixes in");
    CHECK(getrandom(a, 32, 0) == 32 && getrandom(a, 32, GRND_NONBLOCK) == 32, "getrandom");
    CHECK_ERR(open("/dev/tty", O_RDWR), ENXIO); // no controlling terminal
    int con = open("/dev/console", O_WRONLY | O_NOCTTY);
    CHECK_SYS(con);
    CHECK_ERR(open("/dev/missing", O_RDONLY), ENOENT);
}

static void test_tmp(void) {
    struct stat st;
    CHECK(stat("/tmp", &st) == 0 && st.st_mode == (S_IFDIR | 01777), "/tmp: %o", st.st_mode);
    CHECK_SYS(mkdir("/tmp/files-tmp", 0755));
    char name[] = "/tmp/files-tmp/XXXXXX";
    int fd = mkstemp(name);
    CHECK_SYS(fd);
    CHECK(fstat(fd, &st) == 0 && (st.st_mode & 07777) == 0600, "mkstemp: %o", st.st_mode);
    char dname[] = "/tmp/files-tmp/dXXXXXX";
    CHECK(mkdtemp(dname) != NULL && mode_of(dname) == (S_IFDIR | 0700), "mkdtemp");
    int t = open("/tmp", O_TMPFILE | O_RDWR, 0600);
    CHECK_SYS(t);
    CHECK(fstat(t, &st) == 0 && st.st_nlink == 0 && S_ISREG(st.st_mode), "O_TMPFILE: nlink %ld", (long)st.st_nlink);
    CHECK_ERR(open("/tmp", O_TMPFILE | O_RDONLY, 0600), EINVAL);
    CHECK_ERR(open("/tmp/files-tmp/missing", O_TMPFILE | O_RDWR, 0600), ENOENT);
    // A file of 4 MiB in /tmp, written and read back.
    static char block[1 << 16];
    int big = open("/tmp/files-tmp/big", O_RDWR | O_CREAT, 0644);
    for (int i = 0; i < 64; i++) {
        memset(block, i, sizeof block);
        CHECK(write(big, block, sizeof block) == sizeof block, "write %d", i);
    }
    for (int i = 63; i >= 0; i--) {
        CHECK(pread(big, block, sizeof block, (off_t)i << 16) == sizeof block && block[0] == i && block[sizeof block - 1] == i, "read %d", i);
    }
    CHECK(fstat(big, &st) == 0 && st.st_size == 64 << 16 && st.st_blocks >= (64 << 16) / 512, "size %ld blocks %ld", (long)st.st_size, (long)st.st_blocks);
}

// ---- /proc and /sys --------------------------------------------------------------------------------

static void test_proc_self(void) {
    char buf[8192], path[64];
    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    CHECK(strcmp(buf, self_path) == 0, "/proc/self/exe: %s", buf);
    n = readlink("/proc/self", buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    CHECK(atoi(buf) == getpid(), "/proc/self names this process");
    snprintf(path, sizeof path, "/proc/%d/exe", getpid());
    CHECK(readlink(path, buf, sizeof buf) == (ssize_t)strlen(self_path), "/proc/PID/exe");
    CHECK_SYS(chdir("/tmp"));
    n = readlink("/proc/self/cwd", buf, sizeof buf - 1);
    CHECK(n == 4 && memcmp(buf, "/tmp", 4) == 0, "/proc/self/cwd");
    // cmdline: the arguments, each ended by a NUL.
    char want[1024];
    size_t len = 0;
    for (int i = 0; i < self_argc; i++) {
        size_t l = strlen(self_argv[i]) + 1;
        memcpy(want + len, self_argv[i], l);
        len += l;
    }
    n = get("/proc/self/cmdline", buf, sizeof buf);
    CHECK(n == (ssize_t)len && memcmp(buf, want, len) == 0, "cmdline: %zd bytes, want %zu", n, len);
    snprintf(path, sizeof path, "/proc/%d/cmdline", getpid());
    CHECK(get(path, buf, sizeof buf) == (ssize_t)len && memcmp(buf, want, len) == 0, "/proc/PID/cmdline");
    n = get("/proc/self/environ", buf, sizeof buf);
    CHECK(n == (ssize_t)start_environ_len && memcmp(buf, start_environ, n) == 0, "environ: %zd bytes, want %zu", n, start_environ_len);
    // status: the keys Linux has, in its order, and the values that must agree.
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigprocmask(SIG_BLOCK, &set, NULL);
    signal(SIGUSR2, SIG_IGN);
    CHECK(get("/proc/self/status", buf, sizeof buf) > 0, "status");
    static const char *const keys[] = {"Name", "Umask", "State", "Tgid", "Pid", "PPid", "TracerPid", "Uid", "Gid", "FDSize", "Groups",
                                       "VmPeak", "VmSize", "VmRSS", "Threads", "SigQ", "SigPnd", "ShdPnd", "SigBlk", "SigIgn",
                                       "SigCgt", "CapInh", "CapPrm", "CapEff", "CapBnd", "Cpus_allowed_list",
                                       "voluntary_ctxt_switches", "nonvoluntary_ctxt_switches", NULL};
    const char *missing = keys_in_order(buf, keys);
    CHECK(missing == NULL, "status has no %s: line (in Linux's order)", missing);
    const char *name = strrchr(self_path, '/') + 1;
    char line[128];
    snprintf(line, sizeof line, "Name:\t%s\n", name);
    CHECK(strncmp(buf, line, strlen(line)) == 0, "the first line: %.30s", buf);
    CHECK(strstr(buf, "\nState:\tR (running)\n"), "State");
    snprintf(line, sizeof line, "\nPid:\t%d\nPPid:\t%d\n", getpid(), getppid());
    CHECK(strstr(buf, line), "Pid and PPid");
    snprintf(line, sizeof line, "\nTgid:\t%d\n", getpid());
    CHECK(strstr(buf, line), "Tgid");
    CHECK(strstr(buf, "\nUid:\t0\t0\t0\t0\n") && strstr(buf, "\nGid:\t0\t0\t0\t0\n"), "Uid and Gid");
    CHECK(strstr(buf, "\nThreads:\t1\n"), "Threads");
    CHECK(strstr(buf, "\nSigBlk:\t0000000000000200\n"), "SigBlk has SIGUSR1");
    CHECK(strstr(buf, "\nSigIgn:\t0000000000000800\n"), "SigIgn has SIGUSR2");
    CHECK(strstr(buf, "\nCapEff:\t000001ffffffffff\n"), "root's capabilities (Linux 6.1: 41)");
    // stat: 52 fields; pid, (comm), state, ppid, ..., num_threads (20th).
    n = get("/proc/self/stat", buf, sizeof buf);
    CHECK(n > 0 && buf[n - 1] == '\n', "stat ends with a newline");
    snprintf(line, sizeof line, "%d (%.15s) R %d ", getpid(), name, getppid());
    CHECK(strncmp(buf, line, strlen(line)) == 0, "stat begins %.40s", buf);
    int fields = 2;
    for (char *p = strrchr(buf, ')') + 1; *p; p++) fields += *p == ' ';
    CHECK(fields == 52, "%d fields", fields);
    char *after = strrchr(buf, ')') + 2;
    int field = 3;
    long threads = 0;
    for (char *tok = strtok(after, " "); tok; tok = strtok(NULL, " "), field++)
        if (field == 20) threads = atol(tok);
    CHECK(threads == 1, "num_threads %ld", threads);
}

static void test_proc_self_maps(void) {
    // A file mapping at offset 4096 and an anonymous one with 2 of its 4 pages touched.
    int fd = open("/tmp/files-maps", O_RDWR | O_CREAT, 0644);
    CHECK_SYS(ftruncate(fd, 3 * 4096));
    char *file = mmap(NULL, 8192, PROT_READ, MAP_SHARED, fd, 4096);
    char *anon = mmap(NULL, 4 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(file != MAP_FAILED && anon != MAP_FAILED, "mmap");
    anon[0] = anon[4096] = 1;
    struct stat exe, f;
    CHECK(stat(self_path, &exe) == 0 && fstat(fd, &f) == 0, "stat");
    static char buf[65536];
    CHECK(get("/proc/self/maps", buf, sizeof buf) > 0, "maps");
    int exe_lines = 0, file_ok = 0, anon_ok = 0, stack = 0, heap = 0;
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n")) {
        unsigned long start, end, off, ino;
        unsigned maj, min;
        char perms[8];
        int pathat = 0;
        CHECK(sscanf(l, "%lx-%lx %4s %lx %x:%x %lu %n", &start, &end, perms, &off, &maj, &min, &ino, &pathat) == 7, "format: %s", l);
        const char *p = pathat ? l + pathat : "";
        if (strcmp(p, self_path) == 0) {
            exe_lines++;
            CHECK(ino == exe.st_ino && maj == major(exe.st_dev) && min == minor(exe.st_dev), "the executable's dev and inode: %s", l);
            if (off == 0) CHECK(perms[0] == 'r' && perms[3] == 'p', "the first mapping of the executable: %s", l);
        } else if (strcmp(p, "/tmp/files-maps") == 0) {
            file_ok = start == (unsigned long)file && end == start + 8192 && off == 4096 && strcmp(perms, "r--s") == 0 && ino == f.st_ino;
        } else if (start == (unsigned long)anon) {
            anon_ok = end == start + 4 * 4096 && strcmp(perms, "rw-p") == 0 && off == 0 && maj == 0 && min == 0 && ino == 0 && *p == 0;
        }
        stack += strcmp(p, "[stack]") == 0;
        heap += strcmp(p, "[heap]") == 0;
        // A path starts at column 73 (Linux pads the fields before it to 25 + 6 * 8 - 1 characters).
        if (*p) CHECK(pathat == 73, "path column %d: %s", pathat, l);
    }
    CHECK(exe_lines >= 2, "the executable's mappings: %d", exe_lines);
    CHECK(file_ok, "the file mapping's line");
    CHECK(anon_ok, "the anonymous mapping's line");
    CHECK(stack == 1 && heap == 1, "[stack] %d [heap] %d", stack, heap);
    // smaps: the anonymous mapping's block.
    CHECK(get("/proc/self/smaps", buf, sizeof buf) > 0, "smaps");
    char head[64];
    snprintf(head, sizeof head, "%lx-", (unsigned long)anon);
    char *block = strstr(buf, head);
    CHECK(block, "the anonymous mapping in smaps");
    char *next = strstr(block + 1, "VmFlags:");
    CHECK(next, "VmFlags");
    next[0] = 0;
    // Each line is "%-16s%8lu kB" (the key with its colon, padded).
    static const struct {
        const char *key;
        unsigned long kb;
    } want[] = {{"Size:", 16}, {"KernelPageSize:", 4}, {"MMUPageSize:", 4}, {"Rss:", 8}, {"Private_Dirty:", 8}, {"Anonymous:", 8}, {"Swap:", 0}};
    for (unsigned i = 0; i < sizeof want / sizeof want[0]; i++) {
        char line[64];
        snprintf(line, sizeof line, "\n%-16s%8lu kB\n", want[i].key, want[i].kb);
        CHECK(strstr(block, line), "no line%s in %s", line, block);
    }
    // smaps_rollup: one header line, Linux 6.1's keys in order.
    CHECK(get("/proc/self/smaps_rollup", buf, sizeof buf) > 0, "smaps_rollup");
    unsigned long lo, hi;
    int at = 0;
    CHECK(sscanf(buf, "%lx-%lx ---p 00000000 00:00 0 %n", &lo, &hi, &at) == 2 && at == 73 && strncmp(buf + at, "[rollup]\n", 9) == 0, "header: %.90s", buf);
    CHECK(lo <= (unsigned long)anon && hi >= (unsigned long)anon + 4 * 4096, "the rollup's range covers the mappings");
    static const char *const rollup[] = {"Rss", "Pss", "Pss_Dirty", "Pss_Anon", "Pss_File", "Pss_Shmem", "Shared_Clean", "Shared_Dirty",
                                         "Private_Clean", "Private_Dirty", "Referenced", "Anonymous", "LazyFree", "AnonHugePages",
                                         "ShmemPmdMapped", "FilePmdMapped", "Shared_Hugetlb", "Private_Hugetlb", "Swap", "SwapPss",
                                         "Locked", NULL};
    const char *missing = keys_in_order(strchr(buf, '\n') + 1, rollup);
    CHECK(missing == NULL, "smaps_rollup has no %s", missing);
    CHECK(lines_with(buf, "") == 22, "22 lines: %d", lines_with(buf, ""));
    // pagemap: present bit (63) for the touched pages only.
    int pm = open("/proc/self/pagemap", O_RDONLY);
    uint64_t e[4];
    CHECK(pread(pm, e, sizeof e, (off_t)((uintptr_t)anon / 4096) * 8) == sizeof e, "pagemap read");
    CHECK((e[0] >> 63) == 1 && (e[1] >> 63) == 1 && (e[2] >> 63) == 0 && (e[3] >> 63) == 0, "present bits %d%d%d%d", (int)(e[0] >> 63), (int)(e[1] >> 63), (int)(e[2] >> 63), (int)(e[3] >> 63));
    CHECK((e[0] & ((1ULL << 55) - 1)) != 0, "root sees the frame number");
    CHECK(((e[2] >> 55) & 0xff) == 0, "an untouched page has no flag bits");
    // auxv: pairs of words ending with AT_NULL; AT_PAGESZ and AT_ENTRY as getauxval says.
    unsigned long av[128];
    ssize_t n = get("/proc/self/auxv", (char *)av, sizeof av);
    int found = 0, ended = 0;
    for (int i = 0; i + 1 < n / 8; i += 2) {
        if (av[i] == AT_NULL) {
            ended = (i + 2) * 8 == n;
            break;
        }
        if (av[i] == AT_PAGESZ) found += av[i + 1] == 4096;
        if (av[i] == AT_ENTRY) found += av[i + 1] == getauxval(AT_ENTRY);
    }
    CHECK(found == 2 && ended, "auxv: %zd bytes, found %d, ended %d", n, found, ended);
}

static void test_proc_system_files(void) {
    static char buf[65536];
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    CHECK(get("/proc/meminfo", buf, sizeof buf) > 0, "meminfo");
    static const char *const mem[] = {"MemTotal", "MemFree", "MemAvailable", "Buffers", "Cached", "SwapCached", "Active", "Inactive",
                                      "SwapTotal", "SwapFree", "Dirty", "AnonPages", "Mapped", "Shmem", "Slab", "PageTables",
                                      "CommitLimit", "Committed_AS", "VmallocTotal", "HugePages_Total", "Hugepagesize", NULL};
    CHECK(keys_in_order(buf, mem) == NULL, "meminfo has no %s (in Linux's order)", keys_in_order(buf, mem));
    unsigned long total = 0, mfree = 0;
    CHECK(sscanf(buf, "MemTotal: %lu kB\nMemFree: %lu kB\n", &total, &mfree) == 2, "the first lines: %.60s", buf);
    CHECK(total > 256 * 1024 && total <= 512 * 1024 && mfree < total, "MemTotal %lu kB (512 MiB machine), MemFree %lu kB", total, mfree);
    CHECK(get("/proc/cpuinfo", buf, sizeof buf) > 0, "cpuinfo");
    static const char *const cpu[] = {"processor", "BogoMIPS", "Features", "CPU implementer", "CPU architecture", "CPU variant", "CPU part", "CPU revision", NULL};
    // The keys are padded with tabs: "processor\t: 0".
    const char *at = buf;
    for (int i = 0; cpu[i]; i++) {
        char *k = strstr(at, cpu[i]);
        CHECK(k && (k == buf || k[-1] == '\n'), "cpuinfo key %s", cpu[i]);
        const char *colon = k + strlen(cpu[i]) + strspn(k + strlen(cpu[i]), "\t");
        CHECK(colon[0] == ':' && colon[1] == ' ', "cpuinfo key %s: padded with tabs, then \": \"", cpu[i]);
        at = k;
    }
    CHECK(lines_with(buf, "processor\t: ") == cpus, "one block per CPU: %d, %ld online", lines_with(buf, "processor\t: "), cpus);
    CHECK(strncmp(buf, "processor\t: 0\n", 14) == 0, "starts with processor 0");
    CHECK(lines_with(buf, "CPU architecture: 8") == cpus, "architecture 8");
    // uptime and loadavg: their formats.
    CHECK(get("/proc/uptime", buf, sizeof buf) > 0, "uptime");
    unsigned long a, b, c, d;
    int end = 0;
    CHECK(sscanf(buf, "%lu.%2lu %lu.%2lu\n%n", &a, &b, &c, &d, &end) == 4 && end == (int)strlen(buf) && buf[end - 1] == '\n', "uptime: %s", buf);
    CHECK(strchr(buf, '.')[3] == ' ' && a + b > 0, "two decimals: %s", buf);
    CHECK(get("/proc/loadavg", buf, sizeof buf) > 0, "loadavg");
    unsigned running, all, last;
    unsigned long l[6];
    end = 0;
    CHECK(sscanf(buf, "%lu.%2lu %lu.%2lu %lu.%2lu %u/%u %u\n%n", &l[0], &l[1], &l[2], &l[3], &l[4], &l[5], &running, &all, &last, &end) == 9 && end == (int)strlen(buf), "loadavg: %s", buf);
    CHECK(running >= 1 && running <= all && last > 0, "loadavg: %s", buf);
    CHECK(get("/proc/stat", buf, sizeof buf) > 0, "stat");
    CHECK(strncmp(buf, "cpu  ", 5) == 0 && lines_with(buf, "cpu") == cpus + 1, "cpu lines: %d", lines_with(buf, "cpu"));
    static const char *const stat_keys[] = {"intr", "ctxt", "btime", "processes", "procs_running", "procs_blocked", "softirq", NULL};
    for (int i = 0; stat_keys[i]; i++) {
        char k[32];
        snprintf(k, sizeof k, "%s ", stat_keys[i]);
        CHECK(lines_with(buf, k) == 1, "/proc/stat: %s", stat_keys[i]);
    }
    unsigned long long user, nice, sys, idle;
    CHECK(sscanf(buf, "cpu  %llu %llu %llu %llu", &user, &nice, &sys, &idle) == 4 && user + sys + idle > 0, "cpu times");
    // mounts: the file systems parity-init (or this kernel) mounts.
    CHECK(get("/proc/mounts", buf, sizeof buf) > 0, "mounts");
    static const char *const want_mounts[][2] = {{"/", NULL}, {"/proc", "proc"}, {"/sys", "sysfs"}, {"/dev", "devtmpfs"}, {"/tmp", "tmpfs"}};
    for (unsigned i = 0; i < 5; i++) {
        int seen = 0;
        char copy[sizeof buf];
        strcpy(copy, buf);
        char *save;
        for (char *line = strtok_r(copy, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
            char dev[64], dir[64], type[32], opts[256];
            int f1, f2;
            CHECK(sscanf(line, "%63s %63s %31s %255s %d %d", dev, dir, type, opts, &f1, &f2) == 6 && f1 == 0 && f2 == 0, "mounts line: %s", line);
            seen += strcmp(dir, want_mounts[i][0]) == 0 && (!want_mounts[i][1] || strcmp(type, want_mounts[i][1]) == 0) && strncmp(opts, "rw", 2) == 0;
        }
        CHECK(seen >= 1, "%s (%s) is not in /proc/mounts", want_mounts[i][0], want_mounts[i][1] ? want_mounts[i][1] : "any");
    }
    CHECK(readlink("/proc/mounts", buf, sizeof buf) == 11 && memcmp(buf, "self/mounts", 11) == 0, "/proc/mounts is a link to self/mounts");
    CHECK(get("/proc/filesystems", buf, sizeof buf) > 0, "filesystems");
    CHECK(strstr(buf, "nodev\tproc\n") && strstr(buf, "nodev\ttmpfs\n") && strstr(buf, "nodev\tsysfs\n") && strstr(buf, "nodev\tdevtmpfs\n"), "filesystems: %s", buf);
}

static void test_proc_sys_and_sys(void) {
    char buf[256];
    CHECK(get("/proc/sys/vm/mmap_min_addr", buf, sizeof buf) > 0, "mmap_min_addr");
    printf("    vm.mmap_min_addr %s", buf);
    CHECK(strcmp(buf, "4096\n") == 0, "mmap_min_addr %s (Debian's CONFIG_DEFAULT_MMAP_MIN_ADDR)", buf);
    CHECK(get("/proc/sys/vm/max_map_count", buf, sizeof buf) > 0 && strcmp(buf, "65530\n") == 0, "max_map_count %s", buf);
    CHECK(get("/proc/sys/vm/overcommit_memory", buf, sizeof buf) > 0 && strcmp(buf, "0\n") == 0, "overcommit_memory %s", buf);
    CHECK(get("/proc/sys/kernel/pid_max", buf, sizeof buf) > 0 && strcmp(buf, "32768\n") == 0, "pid_max %s", buf);
    char id[64], again[64];
    CHECK(get("/proc/sys/kernel/random/boot_id", id, sizeof id) == 37 && id[36] == '\n', "boot_id: %s", id);
    for (int i = 0; i < 36; i++) {
        int dash = i == 8 || i == 13 || i == 18 || i == 23;
        CHECK(dash ? id[i] == '-' : strchr("0123456789abcdef", id[i]) != NULL, "boot_id: %s", id);
    }
    CHECK(id[14] == '4' && strchr("89ab", id[19]), "a version-4 UUID: %s", id);
    CHECK(get("/proc/sys/kernel/random/boot_id", again, sizeof again) == 37 && strcmp(id, again) == 0, "boot_id stays");
    CHECK_ERR(open("/proc/sys/kernel/pid_max", O_RDONLY | O_DIRECTORY), ENOTDIR);
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    char want[32];
    if (cpus == 1)
        snprintf(want, sizeof want, "0\n");
    else
        snprintf(want, sizeof want, "0-%ld\n", cpus - 1);
    CHECK(get("/sys/devices/system/cpu/online", buf, sizeof buf) > 0 && strcmp(buf, want) == 0, "online %s (want %s)", buf, want);
    CHECK(get("/sys/devices/system/cpu/possible", buf, sizeof buf) > 0 && strcmp(buf, want) == 0, "possible %s (want %s)", buf, want);
    CHECK(get("/sys/kernel/mm/transparent_hugepage/hpage_pmd_size", buf, sizeof buf) > 0 && strcmp(buf, "2097152\n") == 0, "hpage_pmd_size %s", buf);
    CHECK(sysconf(_SC_NPROCESSORS_CONF) == cpus, "glibc's configured count (from /sys) %ld", sysconf(_SC_NPROCESSORS_CONF));
}

static void test_kernel_log(void) {
    int size = klogctl(10 /* SYSLOG_ACTION_SIZE_BUFFER */, NULL, 0);
    CHECK(size > 0, "the log buffer's size: %d (%s)", size, strerrorname_np(errno));
    int kmsg = open("/dev/kmsg", O_WRONLY);
    CHECK_SYS(kmsg);
    const char *msg = "<5>files-test: a line for the kernel log\n";
    CHECK(write(kmsg, msg, strlen(msg)) == (ssize_t)strlen(msg), "write to /dev/kmsg");
    char *log = malloc(size + 1);
    int n = klogctl(3 /* SYSLOG_ACTION_READ_ALL */, log, size);
    CHECK(n > 0, "READ_ALL: %d", n);
    log[n] = 0;
    // Written without a facility, the line is LOG_USER's (1 << 3) at level 5.
    char *line = strstr(log, "files-test: a line for the kernel log");
    CHECK(line, "the line is in the log");
    char *start = line;
    while (start > log && start[-1] != '\n') start--;
    CHECK(strncmp(start, "<13>[", 5) == 0 && line[-2] == ']' && line[-1] == ' ', "syslog's prefix: %.*s", (int)(line - start), start);
    // /dev/kmsg: one record per read, "PRIO,SEQ,USEC,FLAGS;TEXT".
    int rd = open("/dev/kmsg", O_RDONLY | O_NONBLOCK);
    CHECK_SYS(rd);
    char rec[8192];
    int found = 0, records = 0;
    ssize_t r;
    while ((r = read(rd, rec, sizeof rec - 1)) != 0) {
        if (r < 0 && errno == EPIPE) continue; // overwritten records
        if (r < 0) break;
        rec[r] = 0;
        records++;
        unsigned prio;
        unsigned long long seq, usec;
        char flags;
        int at = 0;
        if (sscanf(rec, "%u,%llu,%llu,%c%n", &prio, &seq, &usec, &flags, &at) == 4 && strstr(rec, ";files-test: a line for the kernel log\n"))
            found = prio == 13 && flags == '-' && rec[at] == ';';
    }
    CHECK(errno == EAGAIN && records > 1, "read to the end: %d records, %s", records, strerrorname_np(errno));
    CHECK(found, "the record's header");
    CHECK(klogctl(9 /* SYSLOG_ACTION_SIZE_UNREAD */, NULL, 0) >= 0, "SIZE_UNREAD");
    CHECK_ERR(klogctl(99, NULL, 0), EINVAL);
    CHECK_ERR(klogctl(3, NULL, 10), EINVAL);
}

/* After a process dropped its ids and ran a program, the program's auxiliary vector holds the
 * new ids (Linux's create_elf_tables from the credentials), not root's. */
static void test_exec_auxv_ids(void) {
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setresgid(2000, 2000, 2000) != 0 || setresuid(1000, 1000, 1000) != 0) _exit(2);
        char *args[] = {(char *)self_path, "--auxv-ids", NULL};
        execv(self_path, args);
        _exit(3);
    }
    int st = 0;
    CHECK(waitpid(pid, &st, 0) == pid && WIFEXITED(st) && WEXITSTATUS(st) == 0,
          "the program saw uid 1000 and gid 2000 in its auxiliary vector (status %#x)", st);
}

int main(int argc, char **argv) {
    if (argc == 2 && strcmp(argv[1], "--auxv-ids") == 0) {
        unsigned long ids[] = {getauxval(AT_UID), getauxval(AT_EUID), getauxval(AT_GID), getauxval(AT_EGID)};
        return ids[0] == 1000 && ids[1] == 1000 && ids[2] == 2000 && ids[3] == 2000 && getauxval(AT_SECURE) == 0 ? 0 : 1;
    }
    if (argc >= 1 && argv[0][0] == '/') self_path = argv[0];
    self_argc = argc;
    self_argv = argv;
    extern char **environ;
    start_environ = malloc(8192);
    for (char **e = environ; *e && start_environ_len + strlen(*e) + 1 < 8192; e++) {
        memcpy(start_environ + start_environ_len, *e, strlen(*e) + 1);
        start_environ_len += strlen(*e) + 1;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct test_case cases[] = {
        {"open_flags", test_open_flags},
        {"permission_order", test_permission_order},
        {"openat2", test_openat2},
        {"close_and_close_range", test_close_and_close_range},
        {"read_write_family", test_read_write_family},
        {"lseek", test_lseek},
        {"readdir", test_readdir},
        {"stat_family", test_stat_family},
        {"access", test_access},
        {"readlink", test_readlink},
        {"mkdir_and_rmdir", test_mkdir_and_rmdir},
        {"mknod_fifo", test_mknod_fifo},
        {"unlink", test_unlink},
        {"rename", test_rename},
        {"link", test_link},
        {"symlink_resolution", test_symlink_resolution},
        {"truncate_and_fallocate", test_truncate_and_fallocate},
        {"chmod_and_chown", test_chmod_and_chown},
        {"utimensat", test_utimensat},
        {"working_directory", test_working_directory},
        {"umask", test_umask},
        {"fcntl_descriptors", test_fcntl_descriptors},
        {"record_locks", test_record_locks},
        {"ofd_locks", test_ofd_locks},
        {"ioctl", test_ioctl},
        {"flock", test_flock},
        {"sync_family", test_sync_family},
        {"statfs", test_statfs},
        {"xattr_without_attributes", test_xattr_without_attributes},
        {"sendfile_copy_splice", test_sendfile_copy_splice},
        {"memfd_as_a_file", test_memfd_as_a_file},
        {"proc_fd_links", test_proc_fd_links},
        {"shebang_scripts", test_shebang_scripts},
        {"execveat", test_execveat},
        {"text_busy", test_text_busy},
        {"exec_auxv_ids", test_exec_auxv_ids},
        {"rlimit_nofile", test_rlimit_nofile},
        {"dev_nodes", test_dev_nodes},
        {"tmp", test_tmp},
        {"proc_self", test_proc_self},
        {"proc_self_maps", test_proc_self_maps},
        {"proc_system_files", test_proc_system_files},
        {"proc_sys_and_sys", test_proc_sys_and_sys},
        {"kernel_log", test_kernel_log},
    };
    return run_cases_apart(cases, sizeof cases / sizeof cases[0], argc, argv, 15);
}
