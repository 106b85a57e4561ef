/*
 * grow-heap.c — an ordinary program that runs out of memory: it keeps a
 * growing list of buffers, each half again the size of the last, until
 * malloc fails, then reports it and exits 1, as such programs do.  It knows
 * nothing of gpumemprof: `make demo` runs it under the preload with an
 * address-space limit and reads the bundle the preload wrote.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(void)
{
    char *held[64];
    int n = 0;
    size_t size = 4u << 20;
    for (;;) {
        char *p = malloc(size);
        if (!p) {
            fprintf(stderr, "grow-heap: malloc(%zu) failed: %s\n", size, strerror(errno));
            break;
        }
        memset(p, 1, size); /* really use it */
        held[n++] = p;
        if (n == 3) { /* keep the last two; give the oldest back */
            free(held[0]);
            held[0] = held[1];
            held[1] = held[2];
            n = 2;
        }
        size += size / 2;
    }
    while (n)
        free(held[--n]);
    return 1;
}
