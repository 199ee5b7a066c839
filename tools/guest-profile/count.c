// Counts guest instructions per translation block from QEMU's `-d in_asm,exec,nochain` log on
// standard input, for scripts/guest-profile.
//
// in_asm prints each block when QEMU translates it ("IN:" then one "0xADDR: ..." line per
// instruction); exec prints a "Trace" line with the block's start address each time a block
// runs (nochain: every time, not only when entered from the main loop). Each run adds the
// block's instruction count to its start address (a block that faults part-way is counted
// whole). A block is known by its start address at its longest translation: with -icount, QEMU
// translates a shorter block where the instruction budget runs out before a timer event, runs
// it once and keeps using the full one, so the last translation is not the one that runs.
// Prints "ADDRESS INSTRUCTIONS" per block start, in hexadecimal and decimal.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLOTS (1 << 22)
static unsigned long key[SLOTS], runs[SLOTS], size[SLOTS];

static unsigned long slot(unsigned long pc) {
    unsigned long h = (pc * 0x9E3779B97F4A7C15UL) >> 42;
    while (key[h] && key[h] != pc) h = (h + 1) & (SLOTS - 1);
    key[h] = pc;
    return h;
}

int main(void) {
    char line[1024];
    unsigned long block = 0, length = 0;
    int listing = 0;
    while (fgets(line, sizeof line, stdin)) {
        if (!strncmp(line, "IN:", 3)) {
            listing = 1;
            block = 0;
            length = 0;
        } else if (listing) {
            if (line[0] == '0' && line[1] == 'x') {
                if (!block) block = strtoul(line, 0, 16);
                length++;
            } else if (line[0] == '\n') {
                listing = 0;
                unsigned long h = slot(block);
                if (block && length > size[h]) size[h] = length;
            }
        } else if (!strncmp(line, "Trace", 5)) {
            char *s = strchr(line, '/');
            if (!s) continue;
            unsigned long h = slot(strtoul(s + 1, 0, 16));
            runs[h] += size[h] ? size[h] : 1;
        }
    }
    for (long i = 0; i < SLOTS; i++)
        if (key[i] && runs[i]) printf("%lx %lu\n", key[i], runs[i]);
    return 0;
}
