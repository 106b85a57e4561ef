/*
 * leak_report.c — `gmp-inspect show` of a leak report (GMP_LEAK_CHECK's
 * leak_report_* directory): what the process never freed, per device, the
 * sites that allocated it (symbolised as in a bundle) and the largest
 * allocations, like compute-sanitizer's leak summary.
 */
#include "answer.h"

#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#define LARGEST_SHOWN 10

int show_leak_report(const char *path)
{
    int dirfd = open(path, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0)
        return -1;
    if (faccessat(dirfd, "leaks.json", F_OK, AT_SYMLINK_NOFOLLOW) != 0) {
        close(dirfd);
        return -1; /* not a leak report: show reads it as a bundle */
    }
    char err[600] = "leaks.json cannot be read";
    bundle report = {.dirfd = dirfd}; /* its files read through it, each once */
    json_t *manifest = load_json_at(dirfd, "manifest.json", SMALL_FILE_MAX, err, sizeof err);
    json_t *leaks = bundle_json(&report, "leaks.json");
    int64_t pid = 0, count = 0, bytes = 0;
    if (!manifest || !leaks || jint(leaks, "live_count", &count) ||
        jint(leaks, "live_bytes", &bytes)) {
        fprintf(stderr, "gmp-inspect show: %s: ", path);
        print_clean(stderr, manifest && leaks ? "leaks.json lacks its totals" : err, 600);
        fputc('\n', stderr);
        json_decref(manifest);
        bundle_close(&report);
        return EXIT_INVALID;
    }
    jint(manifest, "pid", &pid);
    char total[32];
    fmt_bytes((uint64_t)bytes, total, sizeof total);
    printf("Leak report       ");
    print_clean(stdout, jstr(manifest, "bundle_name") ? jstr(manifest, "bundle_name") : path,
                300);
    printf("\nWhat happened:    process %lld exited with %lld GPU allocation(s) never freed "
           "(%s)\n",
           (long long)pid, (long long)count, total);
    printf("%-18s", "When:");
    print_clean(stdout, jstr(manifest, "created_at_utc") ? jstr(manifest, "created_at_utc") : "?",
                40);
    putchar('\n');
    print_live_file(&report, "leaks.json", "Leaked:", "allocation(s)",
                    "Where the leaked bytes were allocated:");
    json_t *list = json_object_get(leaks, "allocations");
    if (json_array_size(list))
        printf("Largest leaked allocations:\n");
    size_t i;
    json_t *a;
    json_array_foreach(list, i, a) {
        int64_t size = 0, dev = -1;
        if (i >= LARGEST_SHOWN)
            break;
        jint(a, "size", &size);
        jint(a, "device", &dev);
        char amount[32];
        fmt_bytes((uint64_t)size, amount, sizeof amount);
        printf("  %10s  ", amount);
        print_clean(stdout, jstr(a, "api") ? jstr(a, "api") : "?", 40);
        printf("  %s:%lld  ", jstr(a, "backend") && dev >= 0 ? jstr(a, "backend") : "host",
               (long long)dev);
        print_clean(stdout, jstr(a, "address") ? jstr(a, "address") : "", 24);
        putchar('\n');
    }
    json_decref(manifest);
    bundle_close(&report); /* and its directory */
    return EXIT_OK;
}
