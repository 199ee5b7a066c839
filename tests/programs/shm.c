// shm-test: System V shared memory as Linux 6.1 gives it to an unmodified static glibc program:
// shmget (keys, IPC_PRIVATE, IPC_CREAT/IPC_EXCL, sizes), shmat (anywhere, at an address,
// SHM_RND, SHM_RDONLY with SIGSEGV on a write, SHM_REMAP), shmdt, shmctl IPC_STAT (segsz,
// nattch, pids, mode), IPC_SET and IPC_RMID while attached (the segment lives until the last
// detach), attachments across fork and exit, segments that outlive their creator until removed,
// permissions for another user, /proc/sysvipc/shm and the "/SYSV<key> (deleted)" mappings.
// Each case runs in a child process of its own (check.h's run_cases_apart) and removes what it
// made; it prints "ok - NAME" or "FAIL - NAME"; the last line is "N passed, N failed"; the output
// is Linux 6.1's (tests/linux-parity/shm-test.out). Built by scripts/lib.sh (build_linux_programs).
#define _GNU_SOURCE
#include <fcntl.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/shm.h>

#include "check.h"

#define PAGE 4096UL

static sigjmp_buf fault_jump;
static volatile int fault_sig, fault_code;

static void on_fault(int sig, siginfo_t *si, void *ctx) {
    (void)ctx;
    fault_sig = sig;
    fault_code = si->si_code;
    siglongjmp(fault_jump, 1);
}

static int write_faults(volatile char *p) {
    struct sigaction sa = {.sa_sigaction = on_fault, .sa_flags = SA_SIGINFO};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    fault_sig = 0;
    if (sigsetjmp(fault_jump, 1) == 0) {
        *p = 1;
        return 0;
    }
    return fault_sig;
}

static struct shmid_ds stat_of(int id) {
    struct shmid_ds ds;
    memset(&ds, 0xff, sizeof ds);
    if (shmctl(id, IPC_STAT, &ds) != 0) ds.shm_segsz = 0;
    return ds;
}

// map_line: the /proc/self/maps line of the mapping at ADDR, or "".
static const char *map_line(const void *addr) {
    static char buf[1 << 16];
    int fd = open("/proc/self/maps", O_RDONLY);
    size_t got = 0;
    ssize_t n;
    while (fd >= 0 && got < sizeof buf - 1 && (n = read(fd, buf + got, sizeof buf - 1 - got)) > 0) got += n;
    buf[got] = 0;
    close(fd);
    for (char *l = strtok(buf, "\n"); l; l = strtok(NULL, "\n"))
        if (strtoul(l, NULL, 16) == (uintptr_t)addr) return l;
    return "";
}

static void test_create_attach_detach(void) {
    int id = shmget(IPC_PRIVATE, 10000, IPC_CREAT | 0600);
    CHECK_SYS(id);
    struct shmid_ds ds = stat_of(id);
    CHECK(ds.shm_segsz == 10000 && ds.shm_nattch == 0, "segsz %zu nattch %lu", ds.shm_segsz, (unsigned long)ds.shm_nattch);
    CHECK((ds.shm_perm.mode & 0777) == 0600 && ds.shm_perm.uid == 0 && ds.shm_perm.cuid == 0 && ds.shm_perm.__key == IPC_PRIVATE, "mode %o", ds.shm_perm.mode);
    CHECK(ds.shm_cpid == getpid() && ds.shm_lpid == 0 && ds.shm_atime == 0 && ds.shm_dtime == 0 && ds.shm_ctime > 0, "pids and times");
    char *a = shmat(id, NULL, 0);
    CHECK(a != (char *)-1, "shmat: %s", strerrorname_np(errno));
    CHECK(((uintptr_t)a & (PAGE - 1)) == 0, "page aligned");
    CHECK(a[0] == 0 && a[9999] == 0 && a[12287] == 0, "zero-filled, to the end of the last page");
    ds = stat_of(id);
    CHECK(ds.shm_nattch == 1 && ds.shm_lpid == getpid() && ds.shm_atime > 0, "nattch %lu", (unsigned long)ds.shm_nattch);
    strcpy(a, "shared");
    char *b = shmat(id, NULL, 0);
    CHECK(b != (char *)-1 && b != a && strcmp(b, "shared") == 0, "a second attachment sees the same memory");
    CHECK(stat_of(id).shm_nattch == 2, "nattch 2");
    const char *line = map_line(a);
    unsigned long s, e, off, ino;
    char perms[8], path[64] = "";
    CHECK(sscanf(line, "%lx-%lx %4s %lx %*x:%*x %lu %63[^\n]", &s, &e, perms, &off, &ino, path) == 6, "maps: %s", line);
    CHECK(e - s == 3 * PAGE && strcmp(perms, "rw-s") == 0 && off == 0 && (int)ino == id, "maps: %s", line);
    CHECK(strcmp(path, "/SYSV00000000 (deleted)") == 0, "its name: %s", path);
    CHECK_SYS(shmdt(a));
    CHECK(stat_of(id).shm_nattch == 1 && stat_of(id).shm_dtime > 0, "detached one");
    CHECK_ERR(shmdt(a), EINVAL);
    CHECK_ERR(shmdt(b + 1), EINVAL);
    CHECK_SYS(shmdt(b));
    CHECK(stat_of(id).shm_nattch == 0, "none left");
    CHECK(stat_of(id).shm_segsz == 10000, "a detached segment stays until removed");
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
    CHECK_ERR(shmctl(id, IPC_STAT, &ds), EINVAL);
    CHECK_ERR(shmat(id, NULL, 0), EINVAL);
    CHECK_ERR(shmget(IPC_PRIVATE, 0, IPC_CREAT | 0600), EINVAL);
    CHECK_ERR(shmat(-1, NULL, 0), EINVAL);
    CHECK_ERR(shmctl(-1, IPC_STAT, &ds), EINVAL);
    int other = shmget(IPC_PRIVATE, PAGE, 0600);
    CHECK_ERR(shmctl(other, 77, &ds), EINVAL);
    CHECK_SYS(shmctl(other, IPC_RMID, NULL));
}

static void test_between_processes(void) {
    int id = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0600);
    volatile int *m = shmat(id, NULL, 0);
    CHECK(m != (void *)-1, "shmat");
    int p[2];
    CHECK_SYS(pipe(p));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        // Attachments are inherited; the child's writes are the parent's.
        m[0] = 42;
        char c;
        if (read(p[0], &c, 1) != 1) _exit(2);
        _exit(m[1] == 43 ? 0 : 1);
    }
    for (int i = 0; i < 1000 && m[0] != 42; i++) usleep(1000);
    CHECK(m[0] == 42, "the child's write");
    CHECK(stat_of(id).shm_nattch == 2, "fork added an attachment: %lu", (unsigned long)stat_of(id).shm_nattch);
    m[1] = 43;
    CHECK(write(p[1], "x", 1) == 1, "go");
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "the child saw the parent's write: %#x", status);
    CHECK(stat_of(id).shm_nattch == 1, "exit detached: %lu", (unsigned long)stat_of(id).shm_nattch);
    // A separate attach in an unrelated child (by id), and exec detaching.
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        shmdt((void *)m);
        int *n = shmat(id, NULL, 0);
        if (n == (void *)-1) _exit(1);
        n[2] = 44;
        char *argv[] = {"/busybox", "true", NULL};
        execv(argv[0], argv);
        _exit(3);
    }
    waitpid(pid, &status, 0);
    CHECK(status == 0 && m[2] == 44, "status %#x", status);
    CHECK(stat_of(id).shm_nattch == 1, "exec detached");
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
}

static void test_rmid_while_attached(void) {
    int id = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0600);
    char *a = shmat(id, NULL, 0);
    strcpy(a, "still here");
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
    CHECK(strcmp(a, "still here") == 0, "the memory stays while attached");
    struct shmid_ds ds = stat_of(id);
    CHECK(ds.shm_segsz == PAGE && ds.shm_nattch == 1, "IPC_STAT still answers: nattch %lu", (unsigned long)ds.shm_nattch);
    CHECK(ds.shm_perm.mode & SHM_DEST, "SHM_DEST in the mode: %o", ds.shm_perm.mode);
    // Linux lets a process attach a segment marked for removal.
    char *b = shmat(id, NULL, 0);
    CHECK(b != (char *)-1 && strcmp(b, "still here") == 0, "attach after IPC_RMID: %s", strerrorname_np(errno));
    CHECK_SYS(shmdt(b));
    // A child holds it; the parent detaches; the child's copy lives on.
    int p[2];
    CHECK_SYS(pipe(p));
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        char c;
        if (read(p[0], &c, 1) != 1) _exit(2);
        _exit(strcmp(a, "still here") == 0 && stat_of(id).shm_nattch == 1 ? 0 : 1);
    }
    CHECK_SYS(shmdt(a));
    CHECK(write(p[1], "x", 1) == 1, "go");
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "the last attachment kept it: %#x", status);
    struct shmid_ds gone;
    CHECK_ERR(shmctl(id, IPC_STAT, &gone), EINVAL);
}

static void test_ipc_set(void) {
    int id = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0600);
    struct shmid_ds ds = stat_of(id);
    time_t created = ds.shm_ctime;
    ds.shm_perm.mode = 0640 | 0170000; // only the permission bits are taken
    ds.shm_perm.uid = 1000;
    ds.shm_perm.gid = 1001;
    ds.shm_segsz = 1; // ignored
    CHECK_SYS(shmctl(id, IPC_SET, &ds));
    ds = stat_of(id);
    CHECK((ds.shm_perm.mode & 0777) == 0640 && !(ds.shm_perm.mode & 0170000), "mode %o", ds.shm_perm.mode);
    CHECK(ds.shm_perm.uid == 1000 && ds.shm_perm.gid == 1001 && ds.shm_perm.cuid == 0 && ds.shm_perm.cgid == 0, "owner %d:%d, creator %d:%d", ds.shm_perm.uid, ds.shm_perm.gid, ds.shm_perm.cuid, ds.shm_perm.cgid);
    CHECK(ds.shm_segsz == PAGE && ds.shm_ctime >= created, "size kept, ctime %ld", (long)ds.shm_ctime);
    // The new owner may now act on it as uid 1000; others may not.
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setresgid(2000, 2000, 2000) || setresuid(2000, 2000, 2000)) _exit(9);
        int bad = shmat(id, NULL, 0) != (void *)-1 || errno != EACCES;
        struct shmid_ds d;
        bad |= (shmctl(id, IPC_STAT, &d) != -1 || errno != EACCES) << 1;
        bad |= (shmctl(id, IPC_RMID, NULL) != -1 || errno != EPERM) << 2;
        _exit(bad);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "another user: failed checks %#x", WEXITSTATUS(status));
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        if (setresgid(1001, 1001, 1001) || setresuid(1000, 1000, 1000)) _exit(9);
        int bad = shmat(id, NULL, 0) == (void *)-1;
        bad |= (shmat(id, NULL, SHM_RDONLY) == (void *)-1) << 1;
        bad |= (shmctl(id, IPC_RMID, NULL) != 0) << 2;
        _exit(bad);
    }
    waitpid(pid, &status, 0);
    CHECK(status == 0, "the owner: failed checks %#x", WEXITSTATUS(status));
    CHECK_ERR(shmctl(id, IPC_STAT, &ds), EINVAL);
}

static void test_shm_rdonly(void) {
    int id = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0600);
    char *w = shmat(id, NULL, 0);
    strcpy(w, "written");
    char *r = shmat(id, NULL, SHM_RDONLY);
    CHECK(r != (char *)-1 && strcmp(r, "written") == 0, "read-only attachment reads");
    CHECK(strncmp(strchr(map_line(r), ' ') + 1, "r--s", 4) == 0, "maps: %s", map_line(r));
    CHECK(write_faults(r) == SIGSEGV && fault_code == SEGV_ACCERR, "a write: signal %d code %d", fault_sig, fault_code);
    CHECK_ERR(mprotect(r, PAGE, PROT_READ | PROT_WRITE), EACCES);
    CHECK_SYS(shmdt(r));
    CHECK_SYS(shmdt(w));
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
    // A segment whose mode lacks write permission, for a non-root user: only SHM_RDONLY.
    id = shmget(IPC_PRIVATE, PAGE, IPC_CREAT | 0444);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        if (setresuid(1000, 1000, 1000)) _exit(9);
        int bad = shmat(id, NULL, 0) != (void *)-1 || errno != EACCES;
        bad |= (shmat(id, NULL, SHM_RDONLY) == (void *)-1) << 1;
        _exit(bad);
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "0444 for another user: failed checks %#x", WEXITSTATUS(status));
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
}

static void test_attach_at_address(void) {
    int id = shmget(IPC_PRIVATE, 2 * PAGE, IPC_CREAT | 0600);
    // A free, 64 KiB-aligned place.
    char *area = mmap(NULL, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    char *base = (char *)(((uintptr_t)area + 0xffff) & ~0xffffUL);
    CHECK_SYS(munmap(area, 1 << 20));
    char *at = shmat(id, base + PAGE, 0);
    CHECK(at == base + PAGE, "attached where asked (a page-aligned address)");
    CHECK_SYS(shmdt(at));
    CHECK_ERR(shmat(id, base + 5000, 0), EINVAL);
    char *rnd = shmat(id, base + 5000, SHM_RND);
    CHECK(rnd != (char *)-1, "SHM_RND: %s", strerrorname_np(errno));
    CHECK(rnd == base + PAGE, "SHM_RND rounds down to SHMLBA (a page for arm64 programs): by %#lx", (unsigned long)(base + 5000 - rnd));
    CHECK_SYS(shmdt(rnd));
    rnd = shmat(id, base + 0x4000 + 100, SHM_RND);
    CHECK(rnd == base + 0x4000, "16 KiB and a bit round to 16 KiB: %#lx", (unsigned long)(rnd - base));
    CHECK_SYS(shmdt(rnd));
    rnd = shmat(id, (void *)100, SHM_RND);
    CHECK(rnd != (char *)-1, "an address that rounds to 0 is no address: the kernel picks one (%s)", strerrorname_np(errno));
    CHECK_SYS(shmdt(rnd));
    CHECK_ERR(shmat(id, (void *)100, SHM_RND | SHM_REMAP), EINVAL);
    rnd = shmat(id, base + PAGE, 0);
    CHECK_SYS(shmdt(rnd));
    // Over an existing mapping: EINVAL, unless SHM_REMAP.
    char *taken = mmap(base, PAGE, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED, -1, 0);
    CHECK(taken == base, "mmap");
    CHECK_ERR(shmat(id, base, 0), EINVAL);
    CHECK(shmat(id, base, SHM_REMAP) == base, "SHM_REMAP replaces");
    CHECK(strncmp(strchr(map_line(base), ' ') + 1, "rw-s", 4) == 0, "the segment is there: %s", map_line(base));
    CHECK_SYS(shmdt(base));
    CHECK_ERR(shmat(id, NULL, SHM_REMAP), EINVAL);
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
}

static void test_outlives_its_creator(void) {
    key_t key = 0x5eed;
    int old = shmget(key, 0, 0);
    if (old >= 0) shmctl(old, IPC_RMID, NULL);
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        int id = shmget(key, 5000, IPC_CREAT | IPC_EXCL | 0644);
        char *m = shmat(id, NULL, 0);
        if (id < 0 || m == (char *)-1) _exit(1);
        strcpy(m, "left behind");
        _exit(0); // no shmdt, no IPC_RMID
    }
    int status;
    waitpid(pid, &status, 0);
    CHECK(status == 0, "the creator: %#x", status);
    int id = shmget(key, 0, 0);
    CHECK(id >= 0, "found by its key: %s", strerrorname_np(errno));
    struct shmid_ds ds = stat_of(id);
    CHECK(ds.shm_nattch == 0 && ds.shm_cpid == pid && ds.shm_lpid == pid && ds.shm_segsz == 5000 && ds.shm_perm.__key == key, "nattch %lu", (unsigned long)ds.shm_nattch);
    char *m = shmat(id, NULL, SHM_RDONLY);
    CHECK(m != (char *)-1 && strcmp(m, "left behind") == 0, "its contents");
    CHECK(strstr(map_line(m), "/SYSV00005eed"), "the mapping is named by the key: %s", map_line(m));
    CHECK(shmget(key, 4000, 0) == id, "a smaller size finds it");
    CHECK_ERR(shmget(key, 6000, 0), EINVAL);
    CHECK_ERR(shmget(key, 5000, IPC_CREAT | IPC_EXCL | 0644), EEXIST);
    CHECK(shmget(key, 5000, IPC_CREAT | 0644) == id, "IPC_CREAT without IPC_EXCL finds it");
    CHECK_SYS(shmdt(m));
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
    CHECK_ERR(shmget(key, 0, 0), ENOENT);
    // A non-root user without read permission is refused by key.
    id = shmget(key, PAGE, IPC_CREAT | 0600);
    fflush(stdout);
    pid = fork();
    if (pid == 0) {
        if (setresuid(1000, 1000, 1000)) _exit(9);
        // Asking for no permission (flags 0) is always granted; asking to read is not.
        _exit(shmget(key, 0, 0) == id && shmget(key, 0, 0400) == -1 && errno == EACCES ? 0 : 1);
    }
    waitpid(pid, &status, 0);
    CHECK(status == 0, "EACCES by key for another user: %#x", status);
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
}

static void test_proc_sysvipc_shm(void) {
    int id = shmget(0x77, 3 * PAGE + 1, IPC_CREAT | 0640);
    CHECK_SYS(id);
    char *a = shmat(id, NULL, 0);
    a[0] = 1;
    char buf[8192];
    int fd = open("/proc/sysvipc/shm", O_RDONLY);
    CHECK_SYS(fd);
    ssize_t n = read(fd, buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = 0;
    const char *header = "       key      shmid perms                  size  cpid  lpid nattch   uid   gid  cuid  cgid      atime      dtime      ctime                   rss                  swap\n";
    CHECK(strncmp(buf, header, strlen(header)) == 0, "the header line: %.200s", buf);
    int found = 0;
    for (char *l = strtok(buf + strlen(header), "\n"); l; l = strtok(NULL, "\n")) {
        int key, shmid, cpid, lpid;
        unsigned perms, nattch, uid, gid, cuid, cgid;
        unsigned long size, atime, dtime, ctime, rss, swap;
        if (sscanf(l, "%d %d %o %lu %d %d %u %u %u %u %u %lu %lu %lu %lu %lu", &key, &shmid, &perms, &size, &cpid, &lpid, &nattch, &uid, &gid, &cuid, &cgid, &atime, &dtime, &ctime, &rss, &swap) != 16) continue;
        if (shmid != id) continue;
        found = key == 0x77 && perms == 0640 && size == 3 * PAGE + 1 && cpid == getpid() && lpid == getpid() && nattch == 1 && uid == 0 && atime > 0 && dtime == 0 && rss == PAGE && swap == 0;
        CHECK(found, "the line: %s", l);
        CHECK(strlen(l) == strlen(header) - 1, "the line is as wide as the header: %zu", strlen(l));
    }
    CHECK(found, "our segment is listed");
    CHECK_SYS(shmdt(a));
    CHECK_SYS(shmctl(id, IPC_RMID, NULL));
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct test_case cases[] = {
        {"create_attach_detach", test_create_attach_detach},
        {"between_processes", test_between_processes},
        {"rmid_while_attached", test_rmid_while_attached},
        {"ipc_set", test_ipc_set},
        {"shm_rdonly", test_shm_rdonly},
        {"attach_at_address", test_attach_at_address},
        {"outlives_its_creator", test_outlives_its_creator},
        {"proc_sysvipc_shm", test_proc_sysvipc_shm},
    };
    return run_cases_apart(cases, sizeof cases / sizeof cases[0], argc, argv, 15);
}
