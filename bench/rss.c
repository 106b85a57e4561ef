/*
 * rss.c — the memory the preload adds to a process, apart from its ring:
 * makes 1,000 small allocations and one of 2 MiB (an event: the ring
 * exists), then prints VmRSS and the ring mapping's Rss in KiB
 * ("rss KIB ring KIB").  Run with and without the preload.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static long field_kb(const char *file, const char *key, const char *after)
{
    FILE *f = fopen(file, "r");
    char line[512];
    long v = 0;
    int armed = after == NULL;
    while (f && fgets(line, sizeof line, f)) {
        if (after && strstr(line, after))
            armed = 1;
        if (armed && !strncmp(line, key, strlen(key))) {
            v = atol(line + strlen(key));
            if (after)
                break;
        }
    }
    if (f)
        fclose(f);
    return v;
}

int main(void)
{
    static void *keep[1000];
    for (int i = 0; i < 1000; i++)
        keep[i] = malloc(64);
    void *big = malloc(2 << 20);
    memset(big, 1, 2 << 20);
    printf("rss %ld ring %ld\n", field_kb("/proc/self/status", "VmRSS:", NULL),
           field_kb("/proc/self/smaps", "Rss:", ".gmr"));
    return keep[0] && big ? 0 : 1;
}
