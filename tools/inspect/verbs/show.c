/*
 * show.c — `gmp-inspect show BUNDLE...`: in plain words what kind of bundle
 * it is (kind.c), the likely causes (diagnose.c), the Python stack
 * (python_stack.c), what failed, when, in which process, with the
 * exception, context, custom metadata, bytes in use and the events up to
 * the failure (event_lines.c).  Works on bundles from the Python recorder
 * too.
 */
#include "answer.h"
#include "draw.h"
#include "verbs.h"

#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define SHOW_LAST_EVENTS 10

static void print_field(const char *label, const char *value)
{
    if (!value || !*value)
        return;
    printf("%-18s", label);
    print_clean(stdout, value, 2000);
    putchar('\n');
}

/* Where the failure is sited, as `show --json`'s failed_at; where no call
 * failed, the innermost frame of the program's own in the Python exception,
 * or where the runtime's own words say it ran out. */
static void print_failure_site(bundle *b)
{
    char site[600];
    int found = name_failure_site(b, site, sizeof site);
    if (found >= 0) {
        printf("%-18s", "Failed at:");
        print_clean(stdout, site, 600);
        puts(found == SITE_LIBRARY ? "  (no frame of the program's own)" : "");
    }
}

static void print_failed_request(bundle *b)
{
    json_t *md = b->metadata;
    const bundle_failure *f = bundle_failure_of(b);
    if (!f) {
        print_failure_site(b);
        return;
    }
    int64_t device = f->device, code = f->code;
    uint64_t size = f->size;
    const char *api = f->api;
    char sz[32] = "?";
    if (f->has_size)
        fmt_bytes(size, sz, sizeof sz);
    printf("%-18s%s of %s", "Failed request:", api ? api : "an allocation", sz);
    if (device >= 0)
        printf(" on device %lld", (long long)device);
    else
        printf(" of host memory");
    char name[160];
    if (!f->has_code)
        printf(" failed");
    else if (result_code_name(api, code, name, sizeof name))
        printf(" failed with %s (code %lld)", name, (long long)code);
    else
        printf(" failed with code %lld", (long long)code);
    int64_t stated = framework_whole_request(md, size);
    if (stated > 0) {
        char whole[32];
        fmt_bytes((uint64_t)stated, whole, sizeof whole);
        printf(", one piece of the %s its message says was asked for", whole);
    }
    putchar('\n');
    int64_t in_use = f->in_use;
    if (f->has_in_use && in_use >= 0) {
        char amount[32];
        fmt_bytes((uint64_t)in_use, amount, sizeof amount);
        /* the host's count is the malloc family's: an interpreter's own
         * arenas (CPython's, V8's) come from mmap, and the RSS says those */
        printf("%-18s%s %s\n", "In use then:", amount,
               device >= 0 ? "on that device" : "of host memory through malloc");
    }
    print_failure_site(b);
}

/* What was in use when the bundle was written: at exit, after the program
 * let go of its memory, that is not what was in use at the failure. */
static void print_in_use(json_t *md)
{
    json_t *arr = json_object_get(md, "bytes_in_use");
    if (!json_is_array(arr) || !json_array_size(arr))
        return;
    const char *confirmed = jstr(md, "confirmed_by");
    int at_exit = confirmed && !strcmp(confirmed, "exit");
    printf("%-18s", at_exit ? "In use at exit:" : "In use at dump:");
    size_t i;
    json_t *u;
    json_array_foreach(arr, i, u) {
        int64_t bytes = 0, dev = -1;
        jint(u, "bytes", &bytes);
        jint(u, "device", &dev);
        const char *backend = jstr(u, "backend");
        char b[32];
        fmt_bytes((uint64_t)bytes, b, sizeof b);
        printf("%s", i ? "; " : "");
        if (dev >= 0) {
            print_clean(stdout, backend ? backend : "?", 16);
            printf(" device %lld", (long long)dev);
        } else { /* a GPU runtime's host memory is pinned (cudaHostAlloc) */
            printf("%s", backend && strcmp(backend, "cpu") ? "pinned host" : "host");
        }
        printf(" %s", b);
    }
    puts(at_exit ? " (written at exit, after the program let go of memory)" : "");
}

/* Each device as the collectors saw it: free of total, ours, others'. */
static void print_devices(bundle *b)
{
    size_t n;
    const bundle_device *devices = bundle_devices_of(b, &n);
    for (size_t i = 0; i < n; i++) {
        const bundle_device *d = &devices[i];
        int64_t dev = d->has_device ? d->device : -1, free_b = d->has_free ? d->free : -1,
                total = d->has_total ? d->total : 0, mine = d->has_mine ? d->mine : 0,
                others = d->has_others ? d->others : 0,
                nothers = d->has_others_count ? d->others_count : -1;
        const char *backend = d->backend, *name = d->name, *src = d->others_source;
        char fr[32], tot[32], m[32], o[32];
        fmt_bytes((uint64_t)(free_b > 0 ? free_b : 0), fr, sizeof fr);
        fmt_bytes((uint64_t)total, tot, sizeof tot);
        fmt_bytes((uint64_t)mine, m, sizeof m);
        fmt_bytes((uint64_t)others, o, sizeof o);
        printf("%-18s", i ? "" : "Devices:");
        print_clean(stdout, backend ? backend : "?", 16);
        printf(":%lld", (long long)dev);
        if (name) {
            printf(" (");
            print_clean(stdout, name, 96);
            putchar(')');
        }
        if (free_b >= 0)
            printf(" %s free of %s;", fr, tot);
        else
            printf(" %s;", tot);
        printf(" this process %s, other processes %s", m, o);
        if (src && !strcmp(src, "driver") && nothers >= 0)
            printf(" (%lld process(es), from the driver)", (long long)nothers);
        else
            printf(" (estimated: the device's use less ours)");
        putchar('\n');
    }
}

/* The host: this process, its cgroup limit, the machine. */
static void print_host(bundle *bd)
{
    const bundle_host_state *h = bundle_host_state_of(bd);
    if (!h)
        return;
    int64_t rss = h->has_rss ? h->rss : -1, hwm = h->has_hwm ? h->hwm : -1,
            cur = h->has_cgroup_current ? h->cgroup_current : -1,
            max = h->has_cgroup_max ? h->cgroup_max : -1,
            avail = h->has_available ? h->available : -1,
            total = h->has_mem_total ? h->mem_total : -1,
            kills = h->has_cgroup_kills ? h->cgroup_kills : -1,
            kills_before = h->has_cgroup_kills_at_start ? h->cgroup_kills_at_start : -1;
    char a[32], b[32];
    printf("%-18s", "Host:");
    /* a bundle recovered from a ring reads the host once the process is
     * gone: its cgroup no longer holds what the process held */
    const char *confirmed = jstr(bd->metadata, "confirmed_by");
    if (confirmed && !strcmp(confirmed, "recovered"))
        printf("after it died: ");
    if (rss >= 0) {
        fmt_bytes((uint64_t)rss, a, sizeof a);
        fmt_bytes((uint64_t)(hwm > 0 ? hwm : rss), b, sizeof b);
        printf("RSS %s (peak %s); ", a, b);
    }
    if (cur >= 0) {
        fmt_bytes((uint64_t)cur, a, sizeof a);
        printf("cgroup %s", a);
        if (max >= 0) {
            fmt_bytes((uint64_t)max, b, sizeof b);
            printf(" of %s limit", b);
            const char *up = h->cgroup_limit_path;
            if (up) { /* an ancestor's: a Slurm job's or step's */
                printf(" (set on ");
                print_clean(stdout, up, 200);
                putchar(')');
            }
        } else {
            printf(" (no limit)");
        }
        /* the counter is the cgroup's since it was made, not this process's */
        if (kills_before >= 0 && kills > kills_before)
            printf(", %lld OOM kill(s) in it while the process ran",
                   (long long)(kills - kills_before));
        else if (kills > 0 && kills_before < 0)
            printf(", %lld OOM kill(s) in it since it was made", (long long)kills);
        printf("; ");
    }
    if (avail >= 0 && total > 0) {
        fmt_bytes((uint64_t)avail, a, sizeof a);
        fmt_bytes((uint64_t)total, b, sizeof b);
        printf("machine %s available of %s", a, b);
    }
    putchar('\n');
}

static void print_custom(json_t *md)
{
    json_t *cm = json_object_get(md, "custom_metadata");
    size_t ours = json_object_get(cm, "jupyter_cells") != NULL; /* the sites' names say it */
    if (!json_is_object(cm) || json_object_size(cm) <= ours)
        return;
    printf("%-18s", "Custom metadata:");
    const char *key;
    json_t *val;
    int first = 1;
    json_object_foreach(cm, key, val) {
        if (!strcmp(key, "jupyter_cells"))
            continue;
        char *txt = json_is_string(val) && !json_is_wide_size(val, NULL)
                        ? NULL
                        : json_text_exact(val, JSON_ENCODE_ANY | JSON_COMPACT |
                                                       JSON_REAL_PRECISION(15));
        printf("%s", first ? "" : ", ");
        print_clean(stdout, key, 60);
        putchar('=');
        print_clean(stdout, txt ? txt : json_string_value(val), 200);
        free(txt);
        first = 0;
    }
    putchar('\n');
}

/* How the bundle knew the failure was final, in words, the bundle's own
 * word after them for a script's grep. */
static void print_confirmed_by(const char *how)
{
    static const struct { const char *how, *words; } said[] = {
        {"second_failure", "a second failure as large, with no success between"},
        {"another_failure", "the program went on to fail at another line"},
        {"exit", "the process exited with the failure unresolved"},
        {"timeout", "no success within GMP_OOM_CONFIRM_MS"},
        {"first", "written at the first failure (GMP_OOM_POLICY=first)"},
        {"message", "the program's own out-of-memory words"},
        {"signal", "a fatal signal after the failure"},
        {"recovered", "written from its ring after it died"},
        {"exception", "the program reported the exception it caught"},
        {"framework", "the framework reported its own out-of-memory"},
        {"watchdog", "the pressure watchdog"},
    };
    if (!how)
        return;
    for (size_t i = 0; i < sizeof said / sizeof *said; i++)
        if (!strcmp(how, said[i].how)) {
            printf("%-18s%s (%s)\n", "Confirmed by:", said[i].words, how);
            return;
        }
    print_field("Confirmed by:", how);
}

/* The process, from environment.json when readable. */
static void print_process(bundle *b)
{
    json_t *env = b->environment;
    int64_t pid = -1;
    if (!env || jint(env, "pid", &pid) < 0)
        jint(b->manifest, "pid", &pid);
    printf("%-18s", "Process:");
    if (pid >= 0)
        printf("pid %lld", (long long)pid);
    json_t *proc = json_object_get(env, "process");
    json_t *cmd = json_object_get(proc, "cmdline");
    if (json_is_array(cmd) && json_array_size(cmd)) {
        printf(" (");
        size_t i;
        json_t *a;
        json_array_foreach(cmd, i, a) {
            if (i >= 8) {
                printf(" ...");
                break;
            }
            printf("%s", i ? " " : "");
            print_clean(stdout, json_is_string(a) ? json_string_value(a) : "?", 80);
        }
        putchar(')');
    } else if (jstr(proc, "command")) { /* a ring's: the arguments joined, cut at 1 KiB */
        printf(" (");
        print_clean(stdout, jstr(proc, "command"), 300);
        putchar(')');
    }
    const char *host = jstr(json_object_get(env, "system"), "hostname");
    if (host) {
        printf(" on ");
        print_clean(stdout, host, 80);
    }
    putchar('\n');
    json_t *slurm = json_object_get(proc, "slurm");
    if (jstr(slurm, "job_id")) { /* which task of which job, to find its log */
        const char *const parts[][2] = {{"job ", "job_id"}, {", step ", "step_id"},
                                        {", task ", "task_id"}, {" on node ", "node"}};
        printf("%-18s", "Slurm:");
        for (size_t k = 0; k < sizeof parts / sizeof *parts; k++)
            if (jstr(slurm, parts[k][1])) {
                fputs(parts[k][0], stdout);
                print_clean(stdout, jstr(slurm, parts[k][1]), 64);
            }
        putchar('\n');
    }
}

/* The run the process was a rank of, from its launcher's variables:
 * "torchrun run 7f3a (restart 1), rank 1 of 3 (local 1) on node 0,
 * rendezvous 10.0.0.5:29500", or, for torch.multiprocessing.spawn's
 * processes, "rank 1 (torch.multiprocessing.spawn's process index),
 * launcher pid 4242"; and where the run's other records went. */
static void print_run(bundle *b)
{
    const bundle_run *r = bundle_run_of(b);
    if (!r->run_id && !r->master_addr && !r->world_size && !(r->rank && r->launcher))
        return; /* a process of its own */
    json_t *ranks = json_object_get(json_object_get(b->environment, "process"), "rank");
    int spawned = json_is_integer(json_object_get(ranks, "torch_spawn_index")) &&
                  !jstr(json_object_get(b->environment, "environment"), "RANK");
    char line[600];
    size_t n = 0;
#define SAY(...) (n += n < sizeof line ? (size_t)snprintf(line + n, sizeof line - n, __VA_ARGS__) : 0)
    if (r->run_id) { /* "none": torchrun's id where no --rdzv-id was given */
        SAY("torchrun run%s%.64s", strcmp(r->run_id, "none") ? " " : "",
            strcmp(r->run_id, "none") ? r->run_id : "");
        if (r->restart && strcmp(r->restart, "0"))
            SAY(" (restart %.16s)", r->restart);
    }
    if (r->rank) {
        SAY("%srank %.16s", n ? ", " : "", r->rank);
        if (r->world_size)
            SAY(" of %.16s", r->world_size);
        if (r->local_rank)
            SAY(" (local %.16s)", r->local_rank);
        if (spawned)
            SAY(" (torch.multiprocessing.spawn's process index)");
    }
    if (r->node)
        SAY("%snode %.16s", n ? " on " : "", r->node);
    if (r->master_addr)
        SAY("%srendezvous %.128s%s%.16s", n ? ", " : "", r->master_addr,
            r->master_port ? ":" : "", r->master_port ? r->master_port : "");
    else if (!r->run_id && !r->job && r->launcher)
        SAY("%slauncher pid %.*s", n ? ", " : "", (int)strcspn(r->launcher, ":"), r->launcher);
#undef SAY
    printf("%-18s", "Run:");
    print_clean(stdout, line, sizeof line);
    putchar('\n');
    if (r->error_file) {
        printf("%-18s", "Run's error file:");
        print_clean(stdout, r->error_file, 1000);
        puts(" (torchrun's: the first failure's traceback)");
    }
    if (r->nccl_dump) {
        printf("%-18s", "NCCL trace:");
        print_clean(stdout, r->nccl_dump, 1000);
        if (r->rank)
            print_clean(stdout, r->rank, 16);
        puts(" (PyTorch's NCCL flight recorder, where it dumps)");
    }
}

/* The variables that shape memory, from environment.json. */
static void print_environment(bundle *b)
{
    static const char *const prefixes[] = {"CUDA_", "HIP_", "PYTORCH_", "TF_", "XLA_", "NCCL_",
                                           "JAX_", "MALLOC_", "OMP_NUM_THREADS", "RANK",
                                           "LOCAL_RANK", "WORLD_SIZE"};
    json_t *env = json_object_get(b->environment, "environment");
    const char *key;
    json_t *val;
    int shown = 0;
    json_object_foreach(env, key, val) {
        int wanted = 0;
        for (size_t i = 0; i < sizeof prefixes / sizeof *prefixes && !wanted; i++)
            wanted = !strncmp(key, prefixes[i], strlen(prefixes[i]));
        if (!wanted || !json_is_string(val))
            continue;
        printf(shown++ ? ", " : "%-18s", "Environment:");
        print_clean(stdout, key, 80);
        putchar('=');
        print_clean(stdout, json_string_value(val), 200);
    }
    if (shown)
        putchar('\n');
}

static void show_usage(FILE *f)
{
    fputs("usage: gmp-inspect show BUNDLE|DIR... [--events N] [--json]\n"
          "Say in plain words what failed, when and where: the likely causes, most\n"
          "certain first, with their evidence; the Python stack when there is one;\n"
          "then the failed request, reason, exception, context, custom metadata,\n"
          "bytes in use, and the last N events up to the failure (default 10).\n"
          "Several bundles are shown one after another.  A dump directory: its\n"
          "newest bundle.  --json: the same answer as JSON (kind, death_of_memory,\n"
          "what_happened, held_by, failed_at, outcome, likely_causes [{cause,\n"
          "evidence}], when, pid, reason, backend, exception_type,\n"
          "exception_message, failed_request, confirmed_by); several bundles, an\n"
          "array of them.\n"
          "Exit status: 0, 1 when a bundle cannot be read, 2 usage error.\n",
          f);
}

static int show_one(const char *path, long last);

/* The bundle at path (a dump directory: its newest), opened; -1 said. */
static int open_shown(const char *path, bundle *b)
{
    static char newest[4096];
    if (verb_newest_bundle("show", path, newest, sizeof newest) > 0)
        path = newest;
    char err[1024];
    if (bundle_open(b, path, 0, 1, err, sizeof err) < 0) {
        fprintf(stderr, "gmp-inspect show: ");
        print_clean(stderr, err, 1000);
        fputc('\n', stderr);
        return -1;
    }
    bundle_json(b, "environment.json"); /* optional: a damaged one loses a line only */
    return 0;
}

/* --json: one document per bundle; several, an array of them. */
static int show_json_all(char **paths, int n)
{
    int status = EXIT_OK;
    json_t *all = json_array();
    for (int i = 0; i < n; i++) {
        bundle b;
        if (open_shown(paths[i], &b) < 0) {
            status = EXIT_INVALID;
            continue;
        }
        json_array_append_new(all, show_json(&b));
        bundle_close(&b);
    }
    json_t *doc = n == 1 ? json_array_get(all, 0) : all;
    if (doc && json_dumpf_exact(doc, stdout, JSON_INDENT(2) | JSON_ENSURE_ASCII) == 0)
        putchar('\n');
    json_decref(all);
    return status;
}

int cmd_show(int argc, char **argv)
{
    static const struct option options[] = {{"events", required_argument, NULL, 'e'},
                                            {"json", no_argument, NULL, 'j'},
                                            {0}};
    verb_args a = {.verb = "show", .usage = show_usage, .longopts = options};
    long last = SHOW_LAST_EVENTS;
    int as_json = 0;
    for (int c; (c = verb_option(&a, argc, argv)) != -1;) {
        if (c == 'j') {
            as_json = 1;
            continue;
        }
        if (c != 'e')
            return VERB_EXIT(c);
        char *end;
        last = strtol(optarg, &end, 10);
        if (*end || end == optarg || last < 0)
            return VERB_EXIT(verb_misuse(&a, "--events wants a whole number"));
    }
    if (verb_operands(&a, argc, 1, argc) < 0)
        return EXIT_USAGE;
    if (as_json)
        return show_json_all(argv + optind, argc - optind);
    int status = EXIT_OK, shown = 0;
    for (int i = optind; i < argc; i++) {
        if (shown++)
            puts("\n----------------------------------------------------------------------");
        fflush(stdout);
        if (show_one(argv[i], last) != EXIT_OK)
            status = EXIT_INVALID;
        fflush(stdout);
    }
    return status;
}

static int show_one(const char *path, long last)
{
    int leak_rc = show_leak_report(path);
    if (leak_rc >= 0)
        return leak_rc;
    bundle b;
    if (open_shown(path, &b) < 0)
        return EXIT_INVALID;
    json_t *md = b.metadata;
    const char *reason = jstr(md, "reason");
    if (!reason)
        reason = jstr(b.manifest, "reason");
    const char *backend = jstr(md, "backend");
    if (!backend)
        backend = jstr(b.manifest, "backend");

    printf("Bundle            ");
    print_clean(stdout, b.name, 300);
    fputs("\nWhat happened:    ", stdout);
    what_happened(stdout, &b, reason, backend);
    putchar('\n');
    print_held_by(stdout, &b, 1);
    char outcome[200];
    if (bundle_kind_of(&b) != GMP_VERDICT_SURVIVED)
        print_field("Outcome:", outcome_words(&b, outcome, sizeof outcome));
    char worker[sizeof b.path]; /* where its worker's error was written up */
    if (worker_bundle_of(&b, worker, sizeof worker) == 0)
        print_field("Worker's bundle:", worker);
    diagnose(&b, isatty(1) && getenv("NO_COLOR") == NULL);
    print_python_stack(&b);
    print_field("When:", jstr(b.manifest, "created_at_utc"));
    print_process(&b);
    print_run(&b);
    print_environment(&b);
    print_failed_request(&b);
    print_confirmed_by(jstr(md, "confirmed_by"));
    const char *etype = jstr(md, "exception_type");
    const char *emod = jstr(md, "exception_module");
    if (etype || emod) {
        char both[512];
        size_t ml = emod ? strlen(emod) : 0;
        if (emod && etype && !strncmp(etype, emod, ml) && etype[ml] == '.')
            emod = NULL; /* older bundles: the type already names its module */
        /* C++'s namespaces join with "::" (std::bad_alloc), the others' with "." */
        const char *join = emod && (!strcmp(emod, "std") || strstr(emod, "::")) ? "::" : ".";
        snprintf(both, sizeof both, "%s%s%s", emod ? emod : "", emod && etype ? join : "",
                 etype ? etype : "");
        print_field("Exception:", both);
    }
    print_field("Message:", jstr(md, "exception_message"));
    print_field("Context:", jstr(md, "context"));
    print_custom(md);
    print_in_use(md);
    print_devices(&b);
    print_host(&b);
    int64_t recovered = 0;
    if (!jint(md, "recovered_episodes", &recovered) && recovered > 0)
        printf("%-18s%lld earlier episode(s) recovered after a failure\n",
               "Recovered:", (long long)recovered);

    print_top_sites(&b);
    print_torch_blocks(&b);
    size_t n = b.events.n;
    printf("%-18s%zu captured", "Events:", n);
    json_t *ring = json_object_get(md, "ring");
    int64_t dropped = 0, torn = 0, total = 0;
    if (json_is_object(ring)) {
        jint(ring, "recorded_total", &total);
        jint(ring, "dropped", &dropped);
        jint(ring, "torn", &torn);
        printf(" of %lld recorded", (long long)total);
        if (dropped || torn)
            printf(" (%lld dropped, %lld torn)", (long long)dropped, (long long)torn);
    }
    putchar('\n');
    /* the events that led to the failure, not a teardown's frees after it */
    size_t until = events_until_failure(&b.events);
    if (until && last) {
        size_t from = until > (size_t)last ? until - (size_t)last : 0;
        if (until < n)
            printf("Last %zu event(s) up to the failure, newest last:\n", until - from);
        else
            printf("Last %zu event(s), newest last:\n", until - from);
        for (size_t i = from; i < until; i++) {
            json_t *ev = event_at(&b.events, i);
            print_event(ev, i == b.events.failure);
            json_decref(ev);
        }
        if (until < n)
            printf("  ... %zu more after it (gmp-inspect events shows them all)\n", n - until);
    }
    bundle_close(&b);
    return EXIT_OK;
}
