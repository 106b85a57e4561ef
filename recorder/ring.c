/*
 * ring.c — the lock-free event ring (see ring.h for the layout).
 *
 * Writers: take a sequence number with one fetch-add, then claim the slot
 * with a CAS on its stamp (seqlock style: odd while writing).  A writer that
 * finds the slot busy or already holding a newer sequence drops its event and
 * counts it: it never waits.  Readers copy a slot between two loads of its
 * stamp and keep it only when both equal "seq, whole"; so a snapshot is in
 * sequence order, never torn, never duplicated — also when read by another
 * process, or after the writer was killed half-way through a slot.
 * Payload words are accessed with relaxed atomics so that the racy read the
 * seqlock relies on is defined behaviour (and quiet under TSan).
 */
#include "ring.h"
#include "redact.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

_Static_assert(sizeof(gmp_ring_slot) == 64, "ring slots are one cache line");
_Static_assert(sizeof(gmp_event) == 64, "events have no padding");
_Static_assert(sizeof(gmp_ring_header) <= GMP_RING_HEADER_SIZE,
               "ring header fits its reserved space");
_Static_assert(sizeof(gmp_ring_python_record) % 8 == 0, "records keep 8-byte alignment");
_Static_assert(sizeof(gmp_ring_stack_record) % 8 == 0 && sizeof(gmp_ring_module_record) % 8 == 0,
               "site records keep the regions after them aligned");

static uint64_t next_pow2(uint64_t v)
{
    uint64_t p = 1;
    while (p < v)
        p <<= 1;
    return p;
}

static size_t ring_bytes(uint64_t slot_count, uint64_t stack_records, uint64_t module_records,
                         uint64_t python_records)
{
    return GMP_RING_HEADER_SIZE + (size_t)slot_count * sizeof(gmp_ring_slot) +
           (size_t)stack_records * sizeof(gmp_ring_stack_record) +
           (size_t)module_records * sizeof(gmp_ring_module_record) +
           (size_t)python_records * sizeof(gmp_ring_python_record);
}

/* The regions after the header, as the header (checked) lays them out. */
static void place_regions(gmp_ring *ring, const gmp_ring_header *h)
{
    char *at = (char *)ring->hdr + GMP_RING_HEADER_SIZE;
    ring->slots = (gmp_ring_slot *)at;
    at += h->slot_count * sizeof(gmp_ring_slot);
    ring->stacks = (gmp_ring_stack_record *)at;
    at += (size_t)h->stack_records * sizeof(gmp_ring_stack_record);
    ring->modules = (gmp_ring_module_record *)at;
    at += (size_t)h->module_records * sizeof(gmp_ring_module_record);
    ring->python = (gmp_ring_python_record *)at;
    ring->mask = h->slot_count - 1;
    ring->capacity = h->capacity;
    ring->stack_records = h->stack_records;
    ring->module_records = h->module_records;
    ring->python_records = h->python_records;
    ring->map_len =
        ring_bytes(h->slot_count, h->stack_records, h->module_records, h->python_records);
}

/* pid's program and its arguments (cmdline: /proc/PID/cmdline's n bytes
 * already read, or NULL to read them) joined by spaces, secrets masked,
 * into the header's sizes; 0, or -1 when either cannot be read (both left
 * as they were). */
static int read_command(int pid, const char *cmdline_text, ssize_t n, char exe[1024],
                        char cmdline[1024])
{
    char path[64], e[1024], text[1024];
    gmp_proc_path(path, sizeof path, pid, "exe");
    ssize_t got = readlink(path, e, sizeof e - 1);
    if (got <= 0)
        return -1;
    e[got] = '\0';
    if (cmdline_text) {
        n = n < (ssize_t)sizeof text - 1 ? n : (ssize_t)sizeof text - 1;
        if (n > 0)
            memcpy(text, cmdline_text, (size_t)n);
    } else {
        n = gmp_read_proc_file(pid, "cmdline", text, sizeof text);
    }
    if (n <= 0)
        return -1;
    text[n] = '\0';
    gmp_redact_args(text, (size_t)n);
    for (ssize_t i = 0; i + 1 < n; i++)
        if (text[i] == '\0')
            text[i] = ' ';
    memcpy(exe, e, sizeof e);
    memcpy(cmdline, text, sizeof text);
    return 0;
}

/* A site region's size in a ring for process pid (0: this one): none in a
 * proxy, which gmp-run writes and which records no sites (its file 144 KB,
 * not 356, to make, allocate and remove). */
static uint32_t site_records(int pid, uint32_t records)
{
    return pid ? 0 : records;
}

/* The header of a ring for process pid (0: this one). */
static void fill_header(gmp_ring_header *h, uint32_t capacity, uint64_t slots, int pid)
{
    memcpy(h->magic, GMP_RING_MAGIC, 8);
    h->version = GMP_RING_VERSION;
    h->header_size = GMP_RING_HEADER_SIZE;
    h->slot_size = sizeof(gmp_ring_slot);
    h->capacity = capacity;
    h->slot_count = slots;
    h->stack_records = site_records(pid, GMP_RING_STACK_RECORDS);
    h->module_records = site_records(pid, GMP_RING_MODULE_RECORDS);
    h->python_records = site_records(pid, GMP_RING_PYTHON_RECORDS);
    h->pid = (int32_t)(pid ? pid : getpid());
    h->ppid = (int32_t)(pid ? gmp_proc_parent(pid) : getppid());
    h->uid = (uint32_t)getuid();
    h->start_time_ns = gmp_now_realtime_ns();
    h->proc_start_ticks = gmp_proc_start_ticks(pid);
    h->oom_kills_at_start =
        gmp_cgroup_oom_file_of(pid, h->cgroup_oom_file, sizeof h->cgroup_oom_file) == 0
            ? gmp_cgroup_oom_kills(h->cgroup_oom_file)
            : UINT64_MAX;
    read_command(pid, NULL, 0, h->exe, h->cmdline); /* a gone process's: empty */
    if (!pid) /* a proxy's process has its own environment */
        gmp_job_place_here(&h->place);
    gmp_run_vars_of(pid, h->run_vars, sizeof h->run_vars);
}

static int map_ring_file(const char *dir, size_t len, gmp_ring *ring, int of_pid)
{
    char pid[24], now[24];
    gmp_fmt_u64((uint64_t)(of_pid ? of_pid : getpid()), pid);
    gmp_fmt_u64(gmp_now_realtime_ns(), now);
    if (gmp_strjoin(ring->path, sizeof ring->path, dir, "/ring_", pid, "_", now, ".gmr",
                    (char *)NULL) < 0) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(ring->path, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                  0600);
    if (fd < 0)
        return -1;
    int err = posix_fallocate(fd, 0, (off_t)len);
    if (err) {
        close(fd);
        unlink(ring->path);
        errno = err;
        return -1;
    }
    void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int saved = errno;
    close(fd);
    /* a fault on a page not yet in the page cache reads ahead 32 more,
     * each zeroed and cached, of a ring that may never hold an event there
     * (gmp-run watching 60 processes took 59-61 ms of CPU, 44-52 without) */
    if (p != MAP_FAILED)
        madvise(p, len, MADV_RANDOM);
    if (p == MAP_FAILED) {
        unlink(ring->path);
        errno = saved;
        return -1;
    }
    ring->hdr = p;
    ring->is_file = 1;
    return 0;
}

static int create_for(gmp_ring *ring, const char *dir, uint32_t capacity, int pid);

int gmp_ring_create(gmp_ring *ring, const char *dir, uint32_t capacity)
{
    return create_for(ring, dir, capacity, 0);
}

int gmp_ring_create_proxy(gmp_ring *ring, const char *dir, uint32_t capacity, int pid)
{
    if (pid <= 0 || !dir || create_for(ring, dir, capacity, pid) < 0)
        return -1;
    if (!ring->is_file) { /* a proxy no one else can see is no proxy */
        gmp_ring_close(ring, 0);
        return -1;
    }
    ring->hdr->flags |= GMP_RING_FLAG_PROXY;
    return 0;
}

void gmp_ring_cgroup_moved(gmp_ring *ring, const char *oom_file)
{
    gmp_ring_header *h = ring->hdr;
    if (!strncmp(oom_file, h->cgroup_oom_file, sizeof h->cgroup_oom_file))
        return;
    h->oom_kills_at_start = gmp_cgroup_oom_kills(oom_file);
    gmp_strlcpy(h->cgroup_oom_file, oom_file, sizeof h->cgroup_oom_file);
}

void gmp_ring_proxy_refresh(gmp_ring *ring, const char *cmdline, ssize_t n)
{
    gmp_ring_header *h = ring->hdr;
    read_command(h->pid, cmdline, n, h->exe, h->cmdline); /* gone, or going: what it was stays */
}

void gmp_ring_config_fill(gmp_ring_config_copy *c, const gmp_config *cfg, uint32_t capacity)
{
    c->buffer_size = capacity;
    c->max_dumps = cfg->max_dumps;
    c->max_total_mb = cfg->max_total_mb;
    gmp_strlcpy(c->dump_dir, cfg->dump_dir, sizeof c->dump_dir);
    gmp_strlcpy(c->context, cfg->context, sizeof c->context);
}

static int create_for(gmp_ring *ring, const char *dir, uint32_t capacity, int pid)
{
    memset(ring, 0, sizeof *ring);
    if (capacity < GMP_RING_MIN_EVENTS)
        capacity = GMP_RING_MIN_EVENTS;
    if (capacity > GMP_RING_MAX_EVENTS)
        capacity = GMP_RING_MAX_EVENTS;
    uint64_t slots = next_pow2(capacity);
    size_t len = ring_bytes(slots, site_records(pid, GMP_RING_STACK_RECORDS),
                            site_records(pid, GMP_RING_MODULE_RECORDS),
                            site_records(pid, GMP_RING_PYTHON_RECORDS));

    if (!dir || map_ring_file(dir, len, ring, pid) < 0) {
        ring->path[0] = '\0';
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE,
                       MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return -1;
        ring->hdr = p;
        ring->is_file = 0;
    }
    fill_header(ring->hdr, capacity, slots, pid);
    place_regions(ring, ring->hdr);
    return 0;
}

static int fail(char *why, size_t cap, const char *msg)
{
    if (why && cap)
        gmp_strlcpy(why, msg, cap);
    return -1;
}

static int attach(gmp_ring *ring, const char *path, int writable, char *why, size_t why_cap);

int gmp_ring_attach(gmp_ring *ring, const char *path, char *why, size_t why_cap)
{
    return attach(ring, path, 0, why, why_cap);
}

int gmp_ring_attach_writable(gmp_ring *ring, const char *path, char *why, size_t why_cap)
{
    return attach(ring, path, 1, why, why_cap);
}

static int attach(gmp_ring *ring, const char *path, int writable, char *why, size_t why_cap)
{
    memset(ring, 0, sizeof *ring);
    /* O_NONBLOCK: a FIFO named as a ring is refused below, not waited on */
    int fd = open(path, (writable ? O_RDWR : O_RDONLY) | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0)
        return fail(why, why_cap, gmp_strerror(errno));
    struct stat st;
    if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        return fail(why, why_cap, "not a regular file");
    }
    if ((uint64_t)st.st_size < GMP_RING_HEADER_SIZE) {
        close(fd);
        return fail(why, why_cap, "too short for a ring header");
    }
    gmp_ring_header h;
    if (pread(fd, &h, sizeof h, 0) != (ssize_t)sizeof h) {
        close(fd);
        return fail(why, why_cap, "cannot read the ring header");
    }
    if (memcmp(h.magic, GMP_RING_MAGIC, 8) != 0) {
        close(fd);
        return fail(why, why_cap, "not a gpumemprof ring (bad magic)");
    }
    if (h.version != GMP_RING_VERSION || h.header_size != GMP_RING_HEADER_SIZE ||
        h.slot_size != sizeof(gmp_ring_slot)) {
        close(fd);
        return fail(why, why_cap, "unsupported ring version or layout");
    }
    if (h.slot_count == 0 || (h.slot_count & (h.slot_count - 1)) ||
        h.slot_count > GMP_RING_MAX_EVENTS || h.capacity == 0 ||
        h.capacity > h.slot_count || h.stack_records > GMP_RING_STACK_RECORDS ||
        h.module_records > GMP_RING_MODULE_RECORDS || h.python_records > GMP_RING_PYTHON_RECORDS ||
        (uint64_t)st.st_size <
            ring_bytes(h.slot_count, h.stack_records, h.module_records, h.python_records)) {
        close(fd);
        return fail(why, why_cap, "ring header does not match the file size");
    }
    void *p = mmap(NULL,
                   ring_bytes(h.slot_count, h.stack_records, h.module_records, h.python_records),
                   writable ? PROT_READ | PROT_WRITE : PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    if (p == MAP_FAILED)
        return fail(why, why_cap, gmp_strerror(errno));
    ring->hdr = p;
    place_regions(ring, &h); /* the copy checked, not the file that may change */
    ring->attached = 1;
    gmp_ring_guard(p, ring->map_len);
    ring->is_file = 1;
    gmp_strlcpy(ring->path, path, sizeof ring->path);
    return 0;
}

void gmp_ring_close(gmp_ring *ring, int remove_file)
{
    if (!ring->hdr)
        return;
    if (remove_file && ring->is_file && ring->path[0])
        unlink(ring->path);
    if (ring->attached)
        gmp_ring_unguard(ring->hdr);
    munmap(ring->hdr, ring->map_len);
    ring->hdr = NULL;
}

static void pack(const gmp_event *ev, uint64_t w[7])
{
    w[0] = ev->time_ns;
    w[1] = ev->address;
    w[2] = ev->size;
    w[3] = ev->in_use;
    w[4] = (uint64_t)ev->thread_id | ((uint64_t)(uint32_t)ev->result << 32);
    w[5] = (uint64_t)ev->stack_id | ((uint64_t)(uint16_t)ev->device << 32) |
           ((uint64_t)ev->api << 48);
    w[6] = (uint64_t)ev->type | ((uint64_t)ev->backend << 8) |
           ((uint64_t)ev->flags << 16);
}

static void unpack(const uint64_t w[7], uint64_t seq, gmp_event *ev)
{
    ev->time_ns = w[0];
    ev->seq = seq;
    ev->address = w[1];
    ev->size = w[2];
    ev->in_use = w[3];
    ev->thread_id = (uint32_t)w[4];
    ev->result = (int32_t)(uint32_t)(w[4] >> 32);
    ev->stack_id = (uint32_t)w[5];
    ev->device = (int16_t)(uint16_t)(w[5] >> 32);
    ev->api = (uint16_t)(w[5] >> 48);
    ev->type = (uint8_t)w[6];
    ev->backend = (uint8_t)(w[6] >> 8);
    ev->flags = (uint16_t)(w[6] >> 16);
    ev->reserved = 0;
}

uint64_t gmp_ring_push(gmp_ring *ring, const gmp_event *ev)
{
    gmp_ring_header *h = ring->hdr;
    uint64_t seq = __atomic_fetch_add(&h->head, 1, __ATOMIC_RELAXED);
    gmp_ring_slot *slot = &ring->slots[seq & ring->mask];
    uint64_t whole = (seq + 1) << 1;
    /* The slot's stamp is taken by compare-and-swap from what the last lap
     * left there (0 before the first), not read first: a read of a page
     * of the file not yet touched maps it read-only, and the write then
     * faults again, two page faults where one does.  Busy, or a writer
     * that lapped us already owns it: never wait. */
    uint64_t cur = seq > ring->mask ? (seq - ring->mask) << 1 : 0;
    while (!__atomic_compare_exchange_n(&slot->stamp, &cur, whole | 1, 0, __ATOMIC_ACQ_REL,
                                        __ATOMIC_RELAXED)) {
        if ((cur & 1) || cur >= whole) {
            __atomic_fetch_add(&h->dropped, 1, __ATOMIC_RELAXED);
            return UINT64_MAX;
        }
    }
    __atomic_thread_fence(__ATOMIC_RELEASE);
    uint64_t w[7];
    pack(ev, w);
    for (int i = 0; i < 7; i++)
        __atomic_store_n(&slot->word[i], w[i], __ATOMIC_RELAXED);
    __atomic_store_n(&slot->stamp, whole, __ATOMIC_RELEASE);
    return seq;
}

size_t gmp_ring_foreach(const gmp_ring *ring, uint64_t limit,
                        gmp_ring_visit_fn fn, void *arg, uint64_t *torn)
{
    const gmp_ring_header *h = ring->hdr;
    uint64_t head = __atomic_load_n(&h->head, __ATOMIC_ACQUIRE);
    uint64_t keep = limit < ring->capacity ? limit : ring->capacity;
    uint64_t first = head > keep ? head - keep : 0;
    size_t n = 0;
    uint64_t skipped = 0;
    for (uint64_t seq = first; seq < head; seq++) {
        const gmp_ring_slot *slot = &ring->slots[seq & ring->mask];
        uint64_t whole = (seq + 1) << 1;
        uint64_t s1 = __atomic_load_n(&slot->stamp, __ATOMIC_ACQUIRE);
        if (s1 != whole) {
            skipped++;
            continue;
        }
        uint64_t w[7];
        for (int i = 0; i < 7; i++)
            w[i] = __atomic_load_n(&slot->word[i], __ATOMIC_RELAXED);
        __atomic_thread_fence(__ATOMIC_ACQUIRE);
        if (__atomic_load_n(&slot->stamp, __ATOMIC_RELAXED) != s1) {
            skipped++;
            continue;
        }
        gmp_event ev;
        unpack(w, seq, &ev);
        n++;
        if (fn(&ev, arg))
            break;
    }
    if (torn)
        *torn = skipped;
    return n;
}

struct copy_state {
    gmp_event *out;
    size_t max, n;
};

static int copy_one(const gmp_event *ev, void *arg)
{
    struct copy_state *st = arg;
    st->out[st->n++] = *ev;
    return st->n >= st->max;
}

size_t gmp_ring_snapshot(const gmp_ring *ring, gmp_event *out, size_t max,
                         uint64_t *torn)
{
    if (!max)
        return 0;
    struct copy_state st = {out, max, 0};
    gmp_ring_foreach(ring, max, copy_one, &st, torn);
    return st.n;
}
