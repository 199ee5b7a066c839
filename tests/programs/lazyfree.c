// lazyfree: MADV_FREE reclaimed lazily under memory pressure, as Linux does it: after the call
// the pages stay mapped and readable with their contents; a write cancels the free of the page
// written; when memory runs short the kernel reclaims the pages still free, and a later read of
// one sees zero. Run it with a small memory (scripts/test: -m 128M) so that touching a little
// more than the free memory forces the reclaim. The same binary passes on Linux 6.1.
// Built by scripts/lib.sh (build_linux_programs) with aarch64-linux-gnu-gcc -static.
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysinfo.h>
#include <sys/wait.h>
#include <unistd.h>

#include "check.h"

#define PAGE 4096UL
#define MIB (1UL << 20)

static char value(size_t page) { return (char)(1 + page % 250); }

static void test_free_is_lazy_and_reclaimed_under_pressure(void) {
    size_t len = 32 * MIB, pages = len / PAGE, written = 64;
    char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(a != MAP_FAILED, "mmap");
    for (size_t i = 0; i < pages; i++) a[i * PAGE] = value(i);
    CHECK(madvise(a, len, MADV_FREE) == 0, "MADV_FREE");
    // No pressure yet: every page is still there, with its contents.
    size_t kept = 0;
    for (size_t i = 0; i < pages; i++) kept += a[i * PAGE] == value(i);
    CHECK(kept == pages, "%zu of %zu pages readable after MADV_FREE", kept, pages);
    // A write cancels the free of its page.
    for (size_t i = 0; i < written; i++) a[i * PAGE] = (char)0xaa;
    // Pressure: touch more than the free memory (but less than it plus what was freed).
    struct sysinfo si;
    CHECK(sysinfo(&si) == 0, "sysinfo");
    size_t free_now = (size_t)si.freeram * si.mem_unit, want = free_now + 16 * MIB;
    CHECK(want < free_now + len - 8 * MIB, "free memory %zu MiB", free_now / MIB);
    enum { CHUNKS = 64 }; // up to 256 MiB: enough pressure for -m 128M
    char *chunk[CHUNKS];
    size_t n = 0, size = 4 * MIB;
    for (size_t done = 0; done < want && n < CHUNKS; done += size, n++) {
        chunk[n] = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(chunk[n] != MAP_FAILED, "pressure mmap %zu", n);
        madvise(chunk[n], size, MADV_NOHUGEPAGE);
        for (size_t off = 0; off < size; off += PAGE) chunk[n][off] = (char)(n + 1);
    }
    for (size_t c = 0; c < n; c++)
        for (size_t off = 0; off < size; off += PAGE) CHECK(chunk[c][off] == (char)(c + 1), "pressure page lost");
    // (Released first: a read of a reclaimed page needs a frame here, where Linux maps its zero
    // page.)
    for (size_t c = 0; c < n; c++) munmap(chunk[c], size);
    // The written pages kept their data; the others read their value or, reclaimed, zero.
    size_t zero = 0, other = 0;
    for (size_t i = 0; i < pages; i++) {
        char c = a[i * PAGE];
        if (i < written) {
            CHECK(c == (char)0xaa, "written page %zu lost its data (%d)", i, c);
        } else if (c == 0) {
            zero++;
        } else if (c != value(i)) {
            other++;
        }
    }
    CHECK(other == 0, "%zu freed pages hold something else", other);
    CHECK(zero > 0, "no freed page was reclaimed under pressure");
    munmap(a, len);
}

// Reclaim is not per process: memory pressure in one process takes the pages another process
// freed lazily, as Linux's reclaim takes them from any process's memory.
static void test_another_process_s_free_pages_are_reclaimed(void) {
    size_t len = 48 * MIB, pages = len / PAGE;
    int ready[2], go[2];
    CHECK(pipe(ready) == 0 && pipe(go) == 0, "pipe");
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        char *a = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (a == MAP_FAILED) _exit(2);
        madvise(a, len, MADV_NOHUGEPAGE);
        for (size_t i = 0; i < pages; i++) a[i * PAGE] = value(i);
        if (madvise(a, len, MADV_FREE) != 0) _exit(3);
        char c = 1;
        if (write(ready[1], &c, 1) != 1 || read(go[0], &c, 1) != 1) _exit(4);
        size_t zero = 0, other = 0;
        for (size_t i = 0; i < pages; i++) {
            char v = a[i * PAGE];
            zero += v == 0;
            other += v != 0 && v != value(i);
        }
        _exit(other ? 5 : zero ? 0 : 6);
    }
    char c;
    CHECK(read(ready[0], &c, 1) == 1, "the child did not get ready");
    // Pressure here, in the parent: more than the free memory, less than it plus the child's.
    struct sysinfo si;
    CHECK(sysinfo(&si) == 0, "sysinfo");
    size_t free_now = (size_t)si.freeram * si.mem_unit, want = free_now + 16 * MIB;
    CHECK(want < free_now + len - 8 * MIB, "free memory %zu MiB", free_now / MIB);
    size_t size = 4 * MIB, n = 0;
    enum { CHUNKS = 64 };
    char *chunk[CHUNKS];
    for (size_t done = 0; done < want && n < CHUNKS; done += size, n++) {
        chunk[n] = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        CHECK(chunk[n] != MAP_FAILED, "pressure mmap %zu", n);
        madvise(chunk[n], size, MADV_NOHUGEPAGE);
        for (size_t off = 0; off < size; off += PAGE) chunk[n][off] = (char)(n + 1);
    }
    for (size_t k = 0; k < n; k++) munmap(chunk[k], size);
    CHECK(write(go[1], &c, 1) == 1, "write");
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the child's freed pages: status %#x (5: changed, 6: none reclaimed)", status);
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IOLBF, 0);
    static const struct test_case cases[] = {
        {"free_is_lazy_and_reclaimed_under_pressure", test_free_is_lazy_and_reclaimed_under_pressure},
        {"another_process_s_free_pages_are_reclaimed", test_another_process_s_free_pages_are_reclaimed},
    };
    return run_cases(cases, sizeof cases / sizeof cases[0], argc, argv, 0, 0);
}
