/*
 * failure_snapshot.c — the moment of a failure, kept for its bundle.  A
 * bundle is written later than its failure (a second failure, a timeout,
 * the exit), after the program may have let go: PyTorch releases a whole
 * expandable segment before it raises, a teardown frees everything.  So
 * when a failure opens its episode (episode.c), what the bundle must tell
 * of that moment is taken at once, in one place: the live allocations
 * (allocations.json, written to a memfd), the host (RSS, the cgroup, the
 * machine), and the device that refused as its hook family read it just
 * then (free and total, what this process held, and a wide collector's
 * view of who else held it).  One snapshot per (backend, device), as
 * episodes are; a writer finds the one of its failed request by the
 * request's own time, exactly, and takes it for the length of its dump.
 *
 * No lock: a slot's try-flag (busy) is taken by CAS and never waited for.
 * A writer that finds it taken (another thread is filling or using it)
 * writes the bundle from what is live now, as it would without one.
 */
#include "bundle.h"
#include "collector.h"
#include "preload.h"

#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

struct gmp_failure_snapshot {
    int busy;         /* atomic try-flag over the rest */
    uint64_t time_ns; /* the failure's (its failed request's); 0: none */
    int fd;           /* allocations.json then (a memfd), or -1 */
    off_t size;
    uint64_t stacks[GMP_BUNDLE_STACK_IDS / 64];
    gmp_host_state host;
    gmp_device_state device; /* total 0: no device reading (the host's failure) */
};
typedef gmp_failure_snapshot snapshot_slot;

static snapshot_slot slots[GMP_BACKEND_COUNT][GMP_MAX_DEVICES + 1];

static snapshot_slot *slot_of(gmp_backend backend, int device)
{
    return (unsigned)backend < GMP_BACKEND_COUNT ? &slots[backend][gmp_device_index(device)]
                                                 : NULL;
}

void gmp_failure_snapshot_take(gmp_backend backend, int device, uint64_t failure_ns,
                               const gmp_device_state *device_then)
{
    snapshot_slot *s = slot_of(backend, device);
    if (!s || __atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE))
        return;
    if (s->time_ns && s->fd >= 0)
        close(s->fd); /* the last failure's here: its bundle was written */
    s->time_ns = 0;
    s->fd = -1;
    gmp_dump_request req = {.live_foreach = gmp_device_foreach_live};
    gmp_host_state_read(&s->host);
    s->fd = gmp_bundle_live_snapshot(&req, failure_ns, s->stacks);
    struct stat st;
    s->size = s->fd >= 0 && fstat(s->fd, &st) == 0 ? st.st_size : 0;
    if (device_then)
        s->device = *device_then;
    else
        memset(&s->device, 0, sizeof s->device);
    s->time_ns = failure_ns;
    __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
}

const gmp_failure_snapshot *gmp_failure_snapshot_find(gmp_backend backend,
                                                      const gmp_failed_request *f)
{
    snapshot_slot *s = f->present && f->time_ns ? slot_of(backend, f->device) : NULL;
    if (!s || __atomic_exchange_n(&s->busy, 1, __ATOMIC_ACQUIRE))
        return NULL;
    if (s->time_ns == f->time_ns)
        return s;
    __atomic_store_n(&s->busy, 0, __ATOMIC_RELEASE);
    return NULL;
}

void gmp_failure_snapshot_done(const gmp_failure_snapshot *snap)
{
    if (snap)
        __atomic_store_n((int *)&snap->busy, 0, __ATOMIC_RELEASE);
}

int gmp_failure_snapshot_live(const gmp_failure_snapshot *snap, const uint64_t **stacks)
{
    const snapshot_slot *s = snap;
    struct stat st;
    /* still ours: not a descriptor the program closed and opened again */
    if (!s || s->fd < 0 || fstat(s->fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_nlink != 0 ||
        st.st_size != s->size)
        return -1;
    *stacks = s->stacks;
    return s->fd;
}

const gmp_host_state *gmp_failure_snapshot_host(const gmp_failure_snapshot *snap)
{
    return snap ? &snap->host : NULL;
}

const gmp_device_state *gmp_failure_snapshot_device(const gmp_failure_snapshot *snap)
{
    return snap && snap->device.total ? &snap->device : NULL;
}
