/*
 * worker_bundle.c — the bundle of the pool worker whose error a process
 * raised again.  The main process of a PyTorch DataLoader, a Pool or a
 * ProcessPoolExecutor dies of a MemoryError that one of its workers hit
 * and handed over; the worker's own bundle, written beside it, has the
 * failed request, what was held and by which line.  show names it.
 *
 * It is a bundle of the same directory and host, written within a minute
 * of this one, whose failure a pool's worker loop caught (caught_by) before
 * this one was written: one
 * by a child of this process (environment.json's ppid), the nearest in
 * time where there are several; else, where the workers are another
 * process's children (a forkserver's), the one such bundle there is.
 */
#include "answer.h"

#include <dirent.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NEAR_SECONDS 60

/* When a bundle was written, by its directory's name
 * ("oom_dump_20261204T095103Z_..."); 0 when the name says nothing. */
static time_t written_by_name(const char *name)
{
    static const char prefix[] = "oom_dump_";
    struct tm tm;
    memset(&tm, 0, sizeof tm);
    if (strncmp(name, prefix, sizeof prefix - 1))
        return 0;
    const char *end = strptime(name + sizeof prefix - 1, "%Y%m%dT%H%M%SZ", &tm);
    return end && *end == '_' ? timegm(&tm) : 0;
}

static long long manifest_number(bundle *b, const char *key)
{
    json_t *v = json_object_get(b->manifest, key);
    return json_is_integer(v) ? (long long)json_integer_value(v) : -1;
}

/* A worker's failure, caught by its pool's loop before `written` (in
 * seconds; a second of slack for the clocks' grain). */
static int caught_before(bundle *w, double written)
{
    const bundle_failure *f = bundle_failure_of(w);
    return json_is_string(json_object_get(w->metadata, "caught_by")) && f &&
           json_is_number(f->timestamp) && json_number_value(f->timestamp) <= written + 1;
}

int worker_bundle_of(bundle *b, char *out, size_t cap)
{
    if (!runtime_words_relay_worker(runtime_words_of(b)))
        return -1;
    time_t at = written_by_name(b->name);
    long long pid = manifest_number(b, "pid"), written_ns = manifest_number(b, "created_at_ns");
    const char *host = bundle_host(b);
    char dir[sizeof b->path];
    snprintf(dir, sizeof dir, "%s", b->path);
    char *slash = strrchr(dir, '/');
    if (slash)
        slash[slash == dir] = '\0'; /* "/oom_dump_...": the root */
    else
        snprintf(dir, sizeof dir, ".");
    DIR *d = at && pid > 0 && written_ns > 0 ? opendir(dir) : NULL;
    if (!d)
        return -1;
    /* the child's nearest in time, else the one other worker's */
    char child[sizeof b->path] = "", other[sizeof b->path] = "";
    long child_off = NEAR_SECONDS + 1;
    int others = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;) {
        time_t then = written_by_name(e->d_name);
        long off = labs((long)(then - at));
        if (!then || off > NEAR_SECONDS || !strcmp(e->d_name, b->name))
            continue;
        char path[sizeof b->path], err[256];
        if (snprintf(path, sizeof path, "%.3800s/%.255s", dir, e->d_name) >= (int)sizeof path)
            continue;
        bundle w;
        if (bundle_open(&w, path, 1, 0, err, sizeof err) < 0)
            continue;
        const char *its_host = bundle_host(&w);
        json_t *process = json_object_get(w.environment, "process");
        json_t *ppid = json_object_get(process, "ppid");
        if (caught_before(&w, (double)written_ns / 1e9) &&
            (!host || !its_host || !strcmp(host, its_host))) {
            if (json_is_integer(ppid) && json_integer_value(ppid) == pid) {
                if (off < child_off) {
                    child_off = off;
                    snprintf(child, sizeof child, "%s", path);
                }
            } else if (others++ == 0) {
                snprintf(other, sizeof other, "%s", path);
            }
        }
        bundle_close(&w);
    }
    closedir(d);
    const char *found = child[0] ? child : others == 1 ? other : NULL;
    if (!found)
        return -1;
    snprintf(out, cap, "%s", found);
    return 0;
}
