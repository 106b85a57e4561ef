/*
 * validate.c — `gmp-inspect validate BUNDLE...`: is each bundle whole and
 * does it carry the schema's fields with the right types?  One line per
 * problem, so CI logs say exactly what is wrong.  Bundles written by the
 * Python OOM flight recorder have the same schema and validate the same way.
 * Exit 0 all valid, 1 any invalid, 2 usage.
 */
#include "answer.h"
#include "verbs.h"

#include <fcntl.h>
#include <stdarg.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define SUPPORTED_SCHEMA 2

typedef struct report {
    const char *bundle;
    int problems;
} report;

static void problem(report *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(report *r, const char *fmt, ...)
{
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    print_clean(stdout, r->bundle, 300); /* a directory's name: anyone's */
    fputs(": ", stdout);
    print_clean(stdout, msg, 900);
    putchar('\n');
    r->problems++;
}

enum kind { K_STRING, K_STRING_OR_NULL, K_INT, K_OBJECT, K_OBJECT_OR_NULL, K_ARRAY };

static const char *kind_name(enum kind k)
{
    switch (k) {
    case K_STRING: return "a string";
    case K_STRING_OR_NULL: return "a string or null";
    case K_INT: return "an integer";
    case K_OBJECT: return "an object";
    case K_OBJECT_OR_NULL: return "an object or null";
    default: return "an array";
    }
}

static int kind_ok(json_t *v, enum kind k)
{
    switch (k) {
    case K_STRING: return json_is_string(v);
    case K_STRING_OR_NULL: return json_is_string(v) || json_is_null(v);
    case K_INT: return (json_is_integer(v) && json_integer_value(v) >= 0) || json_is_wide_size(v, NULL);
    case K_OBJECT: return json_is_object(v);
    case K_OBJECT_OR_NULL: return json_is_object(v) || json_is_null(v);
    default: return json_is_array(v);
    }
}

typedef struct field {
    const char *name;
    enum kind kind;
} field;

static void check_fields(report *r, const char *file, json_t *obj,
                         const field *fields, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        json_t *v = json_object_get(obj, fields[i].name);
        if (!v)
            problem(r, "%s: missing field \"%s\"", file, fields[i].name);
        else if (!kind_ok(v, fields[i].kind))
            problem(r, "%s: field \"%s\" must be %s", file, fields[i].name,
                    kind_name(fields[i].kind));
    }
}

static const field manifest_fields[] = {
    {"schema_version", K_INT}, {"bundle_name", K_STRING},
    {"created_at_utc", K_STRING}, {"reason", K_STRING},
    {"backend", K_STRING}, {"event_count", K_INT}, {"files", K_ARRAY},
};
static const field metadata_fields[] = {
    {"reason", K_STRING}, {"exception_type", K_STRING_OR_NULL},
    {"exception_module", K_STRING_OR_NULL}, {"exception_message", K_STRING_OR_NULL},
    {"context", K_STRING_OR_NULL}, {"backend", K_STRING},
    {"captured_event_count", K_INT}, {"custom_metadata", K_OBJECT_OR_NULL},
};
static const field environment_fields[] = {
    {"pid", K_INT}, {"cwd", K_STRING_OR_NULL}, {"system", K_OBJECT},
};
static const field allocations_fields[] = {
    {"live_count", K_INT}, {"live_bytes", K_INT}, {"by_device", K_ARRAY},
    {"by_api", K_ARRAY}, {"allocations", K_ARRAY},
};
/* An event's time and bytes as a reader can use them: a time since 1970
 * and before the year 5000 (a value past it would stretch a drawing's axis
 * forever), a count not negative; the first event that is not so. */
static void check_event_values(report *r, const event_list *events)
{
    size_t i;
    json_t *ev;
    event_foreach(events, i, ev) {
        json_t *t = json_object_get(ev, "timestamp"), *use = json_object_get(ev, "bytes_in_use");
        double secs = json_is_number(t) ? json_number_value(t) : 0;
        const char *bad = t && (!json_is_number(t) || !(secs >= 0 && secs <= 1e11))
                              ? "timestamp is not a time since 1970 before the year 5000"
                          : use && !json_is_wide_size(use, NULL) &&
                                  !(json_is_integer(use) && json_integer_value(use) >= 0)
                              ? "bytes_in_use is not a count of bytes"
                              : NULL;
        if (bad) {
            problem(r, "events.json: event %zu's %s", i, bad);
            json_decref(ev);
            return;
        }
    }
}

static const char *const required_files[] = {"manifest.json", "events.json",
                                             "metadata.json", "environment.json"};

#define COUNT(a) (sizeof(a) / sizeof *(a))

static int is_iso_utc(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    for (size_t i = 0; shape[i]; i++) {
        if (shape[i] == 'd' ? (s[i] < '0' || s[i] > '9') : s[i] != shape[i])
            return 0;
    }
    return 1;
}

static int safe_member_name(const char *s)
{
    return *s && strcmp(s, ".") && strcmp(s, "..") && !strchr(s, '/') &&
           strlen(s) < 256;
}

/* Every listed file must be a readable regular file (and valid JSON when it
 * is .json); events.json, when listed, is indexed into events (1 when it is). */
static int check_files(report *r, int dirfd, json_t *files, event_list *events)
{
    int indexed = 0;
    size_t i;
    json_t *v;
    json_array_foreach(files, i, v) {
        const char *name = json_string_value(v);
        if (!name) {
            problem(r, "manifest.json: files[%zu] is not a string", i);
            continue;
        }
        if (!safe_member_name(name)) {
            problem(r, "manifest.json: files[%zu] is not a plain file name", i);
            continue;
        }
        size_t len = strlen(name);
        if (len > 5 && !strcmp(name + len - 5, ".json")) {
            char err[600];
            if (!strcmp(name, "events.json")) {
                if (indexed)
                    continue;
                if (events_load_at(dirfd, events, NULL, err, sizeof err) < 0)
                    problem(r, "%s", err);
                else
                    indexed = 1;
                continue;
            }
            json_t *doc = load_json_at(dirfd, name, SMALL_FILE_MAX, err, sizeof err);
            if (!doc)
                problem(r, "%s", err);
            json_decref(doc);
            continue;
        }
        int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK);
        struct stat st;
        if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode))
            problem(r, "%s: listed but missing, unreadable, a symlink or not a regular file",
                    name);
        if (fd >= 0)
            close(fd);
    }
    for (size_t k = 0; k < COUNT(required_files); k++) {
        int listed = 0;
        json_array_foreach(files, i, v) {
            if (json_is_string(v) && !strcmp(json_string_value(v), required_files[k]))
                listed = 1;
        }
        if (!listed)
            problem(r, "manifest.json: files does not list %s", required_files[k]);
    }
    return indexed;
}

static int validate_one(const char *path)
{
    bundle b;
    char err[1024];
    report r = {path, 0};
    if (bundle_open(&b, path, 1, 0, err, sizeof err) < 0) {
        print_clean(stdout, err, 1000); /* "NAME: why", named once */
        putchar('\n');
        return 1;
    }
    r.bundle = b.name;
    check_fields(&r, "manifest.json", b.manifest, manifest_fields, COUNT(manifest_fields));
    check_fields(&r, "metadata.json", b.metadata, metadata_fields, COUNT(metadata_fields));
    check_fields(&r, "environment.json", b.environment, environment_fields,
                 COUNT(environment_fields));

    int64_t schema = 0, event_count = -1, captured = -1;
    if (!jint(b.manifest, "schema_version", &schema) && schema > SUPPORTED_SCHEMA)
        problem(&r, "manifest.json: schema_version %lld is newer than this tool reads (%d)",
                (long long)schema, SUPPORTED_SCHEMA);
    const char *name = jstr(b.manifest, "bundle_name");
    if (name && strcmp(name, b.name))
        problem(&r, "manifest.json: bundle_name \"%s\" differs from the directory name",
                name);
    const char *created = jstr(b.manifest, "created_at_utc");
    if (created && !is_iso_utc(created))
        problem(&r, "manifest.json: created_at_utc is not an ISO-8601 UTC time");
    jint(b.manifest, "event_count", &event_count);
    jint(b.metadata, "captured_event_count", &captured);

    json_t *files = json_object_get(b.manifest, "files");
    event_list events;
    if (json_is_array(files) && check_files(&r, b.dirfd, files, &events)) {
        size_t n = events.n;
        if (event_count >= 0 && (uint64_t)event_count != n)
            problem(&r, "manifest.json: event_count is %lld but events.json holds %zu",
                    (long long)event_count, n);
        if (captured >= 0 && (uint64_t)captured != n)
            problem(&r, "metadata.json: captured_event_count is %lld but events.json holds %zu",
                    (long long)captured, n);
        if (events.first_non_object != SIZE_MAX)
            problem(&r, "events.json: event %zu is not an object", events.first_non_object);
        check_event_values(&r, &events);
        events_free(&events);
    }
    size_t i;
    json_t *v;
    json_array_foreach(json_is_array(files) ? files : NULL, i, v) {
        if (!json_is_string(v) || strcmp(json_string_value(v), "allocations.json"))
            continue;
        json_t *held = load_json_at(b.dirfd, "allocations.json", SMALL_FILE_MAX, NULL, 0);
        if (held) /* unreadable: check_files said so */
            check_fields(&r, "allocations.json", held, allocations_fields,
                         COUNT(allocations_fields));
        json_decref(held);
    }
    bundle_close(&b);
    if (!r.problems)
        printf("%s: valid\n", r.bundle);
    return r.problems ? 1 : 0;
}

static void usage(FILE *f)
{
    fputs("usage: gmp-inspect validate BUNDLE...\n"
          "Check that each bundle is whole: the required files present and\n"
          "readable (no symlinks), the schema's fields with the right types,\n"
          "event counts matching.  One line per problem.\n"
          "Exit status: 0 all valid, 1 some invalid, 2 usage error.\n",
          f);
}

int cmd_validate(int argc, char **argv)
{
    verb_args a = {.verb = "validate", .usage = usage};
    for (int c; (c = verb_option(&a, argc, argv)) != -1;)
        return VERB_EXIT(c);
    if (verb_operands(&a, argc, 1, argc) < 0)
        return EXIT_USAGE;
    inspect_raw_json = 1; /* the bundle as written is what is judged */
    int invalid = 0;
    for (int i = optind; i < argc; i++)
        invalid |= validate_one(argv[i]);
    return invalid ? EXIT_INVALID : EXIT_OK;
}
