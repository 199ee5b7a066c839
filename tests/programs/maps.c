/* maps.c: prints the program's own /proc/self/maps after making a few mappings, and checks the
 * listing. The same static binary runs on this kernel and on Linux (scripts/bench draws both
 * layouts side by side, docs/images/address-space.svg; scripts/test runs it here).
 *
 *   maps-test [fill]
 *
 * Mappings made first: 64 KiB of read-write data (touched), a 1 MiB PROT_NONE reservation, one
 * shared page, 64 KiB of brk heap, and one page of generated code: mapped read-execute, made
 * writable, a function written into it, made read-execute again and called (it returns 42).
 * With `fill`, first every free page from 64 KiB up to the next 4 GiB boundary above the text
 * is reserved with PROT_NONE hints (the userland demo's fill scenario, userland/src/layout.rs):
 * on Linux the code then lands above 4 GiB, on this kernel still in the code window.
 *
 * Output: "maps: ..." facts (the text, the code page, the code window where the kernel has one),
 * the listing between "--- /proc/self/maps" and "--- end", then the cases and the summary. */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "check.h"

/* This kernel's SYS_CODE_WINDOW and WINDOW_GET (ext-abi/src/lib.rs); Linux answers ENOSYS. */
#define SYS_CODE_WINDOW 1001
#define WINDOW_GET 0
struct code_window { uint64_t base, size, used, placed_outside, strict; };

extern char __executable_start, etext;
static char listing[1 << 20];
static size_t listing_len;
static uint64_t code, window_base, window_size;
static int have_window;

/* Reserves [lo, hi) with PROT_NONE where the kernel honours the hint, splitting a refused block
 * into 16 and trying again down to `grain` (the demo's fill_piece). */
static uint64_t fill_piece(uint64_t lo, uint64_t hi, uint64_t block, uint64_t grain, int *reservations) {
    if (lo >= hi) return 0;
    void *got = mmap((void *)lo, hi - lo, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (got == (void *)lo) {
        (*reservations)++;
        return hi - lo;
    }
    if (got != MAP_FAILED) munmap(got, hi - lo);
    if (hi - lo <= grain) return 0;
    uint64_t sub = block / 16 > grain ? block / 16 : grain, taken = 0;
    for (uint64_t a = lo & ~(sub - 1); a < hi; a += sub)
        taken += fill_piece(a > lo ? a : lo, a + sub < hi ? a + sub : hi, sub, grain, reservations);
    return taken;
}

static void fill(void) {
    const uint64_t top = 256 << 20, gib4 = 4ull << 30;
    uint64_t boundary = ((uint64_t)&__executable_start / gib4 + 1) * gib4, taken = 0;
    int reservations = 0;
    for (uint64_t a = 0; a < boundary; a += top)
        taken += fill_piece(a > 0x10000 ? a : 0x10000, a + top, top, 256 << 10, &reservations);
    printf("maps: fill took %llu MiB below 0x%llx in %d PROT_NONE reservations\n",
           (unsigned long long)(taken >> 20), (unsigned long long)boundary, reservations);
}

static void make_mappings(void) {
    char *data = mmap(NULL, 64 << 10, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (data != MAP_FAILED)
        for (int i = 0; i < 64 << 10; i += 4096) data[i] = 1;
    mmap(NULL, 1 << 20, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    sbrk(64 << 10);
    uint32_t *page = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) return;
    code = (uint64_t)page;
    if (mprotect(page, 4096, PROT_READ | PROT_WRITE) == 0) {
        page[0] = 0x52800540; /* mov w0, #42 */
        page[1] = 0xd65f03c0; /* ret */
        __builtin___clear_cache((char *)page, (char *)(page + 2));
        if (mprotect(page, 4096, PROT_READ | PROT_EXEC) == 0)
            printf("maps: code page 0x%llx returned %d\n", (unsigned long long)code, ((int (*)(void))page)());
    }
}

static void read_listing(void) {
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) {
        /* Linux booted with only an initramfs has no /proc until someone mounts it. */
        mkdir("/proc", 0555);
        if (mount("proc", "/proc", "proc", 0, NULL) == 0) fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    }
    if (fd < 0) {
        printf("maps: open(/proc/self/maps) failed: errno %d\n", errno);
        return;
    }
    ssize_t n;
    /* Small reads, so a listing longer than one read is put together as a reader must. */
    while (listing_len < sizeof listing - 1 && (n = read(fd, listing + listing_len, 700)) > 0) listing_len += n;
    close(fd);
    printf("--- /proc/self/maps\n%.*s--- end\n", (int)listing_len, listing);
}

/* Every line is "start-end perms offset dev inode [name]" as Linux's show_map_vma prints it,
 * ascending and not overlapping. */
static void listing_has_linux_format(void) {
    CHECK(listing_len > 0, "empty listing");
    CHECK(listing[listing_len - 1] == '\n', "the listing does not end with a newline");
    unsigned long long prev_end = 0;
    int lines = 0;
    for (char *line = listing; line < listing + listing_len; line = strchr(line, '\n') + 1) {
        unsigned long long start, end, offset, inode;
        unsigned major, minor;
        char perms[5];
        int name_at = 0, hex_start = 0, hex_end = 0;
        int got = sscanf(line, "%llx-%n%llx%n %4s %llx %x:%x %llu %n", &start, &hex_start, &end, &hex_end, perms,
                         &offset, &major, &minor, &inode, &name_at);
        CHECK(got == 7 && name_at > 0, "line %d does not parse: %.60s", lines, line);
        CHECK(hex_start - 1 >= 8 && hex_end - hex_start >= 8, "line %d: addresses shorter than 8 digits", lines);
        CHECK(start < end && start >= prev_end, "line %d: %llx-%llx after %llx", lines, start, end, prev_end);
        CHECK(start % 4096 == 0 && end % 4096 == 0, "line %d: not page-aligned", lines);
        CHECK((perms[0] == 'r' || perms[0] == '-') && (perms[1] == 'w' || perms[1] == '-') &&
                  (perms[2] == 'x' || perms[2] == '-') && (perms[3] == 'p' || perms[3] == 's'),
              "line %d: perms %s", lines, perms);
        char *eol = strchr(line, '\n');
        if (line + name_at < eol) /* a name starts after the padding, at column 73 or later */
            CHECK(name_at >= 73, "line %d: name at column %d", lines, name_at);
        prev_end = end;
        lines++;
    }
    CHECK(lines >= 6, "only %d lines", lines);
}

/* The line for address `a`, or NULL. */
static const char *line_of(uint64_t a) {
    for (char *line = listing; line < listing + listing_len; line = strchr(line, '\n') + 1) {
        unsigned long long start, end;
        if (sscanf(line, "%llx-%llx", &start, &end) == 2 && start <= a && a < end) return line;
    }
    return NULL;
}

static void areas_are_listed_and_named(void) {
    int on_the_stack = 0;
    const char *text = line_of((uint64_t)&etext - 1), *code_line = line_of(code);
    const char *stack = line_of((uint64_t)&on_the_stack);
    CHECK(code != 0, "the code page could not be made");
    CHECK(text && strncmp(strchr(text, ' ') + 1, "r-xp", 4) == 0, "the text is not listed r-xp");
    CHECK(code_line && strncmp(strchr(code_line, ' ') + 1, "r-xp", 4) == 0, "the code page is not listed r-xp");
    CHECK(stack && strstr(stack, "[stack]") && strstr(stack, "[stack]") < strchr(stack, '\n'), "no [stack] line");
    const char *heap = line_of((uint64_t)sbrk(0) - 1);
    CHECK(heap && strstr(heap, "[heap]") && strstr(heap, "[heap]") < strchr(heap, '\n'), "no [heap] line");
}

static void code_is_in_the_code_window(void) {
    if (!have_window) {
        printf("    (no code window: SYS_CODE_WINDOW answered ENOSYS, as Linux does)\n");
        return;
    }
    CHECK(window_base <= code && code + 4096 <= window_base + window_size, "code 0x%llx outside [0x%llx, +0x%llx)",
          (unsigned long long)code, (unsigned long long)window_base, (unsigned long long)window_size);
    CHECK(window_base <= (uint64_t)&__executable_start && (uint64_t)&etext <= window_base + window_size,
          "the text is outside the window");
}

int main(int argc, char **argv) {
    setvbuf(stdout, NULL, _IONBF, 0);
    int with_fill = argc > 1 && strcmp(argv[1], "fill") == 0;
    printf("maps: text 0x%llx 0x%llx%s\n", (unsigned long long)(uintptr_t)&__executable_start,
           (unsigned long long)(uintptr_t)&etext, with_fill ? " (fill scenario)" : "");
    struct code_window w;
    if (syscall(SYS_CODE_WINDOW, WINDOW_GET, 0, &w) == 0) {
        have_window = 1;
        window_base = w.base;
        window_size = w.size;
        printf("maps: code window 0x%llx 0x%llx\n", (unsigned long long)w.base, (unsigned long long)(w.base + w.size));
    } else {
        printf("maps: code window none\n");
    }
    if (with_fill) fill();
    make_mappings();
    read_listing();
    static const struct test_case cases[] = {
        {"listing_has_linux_format", listing_has_linux_format},
        {"areas_are_listed_and_named", areas_are_listed_and_named},
        {"code_is_in_the_code_window", code_is_in_the_code_window},
    };
    char *none[] = {argv[0]};
    return run_cases(cases, sizeof cases / sizeof cases[0], 1, none, 0, 0);
}
