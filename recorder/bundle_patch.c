/*
 * bundle_patch.c — fills in the exception of a bundle already written
 * (and the context and custom metadata, when the program itself reports
 * the exception), says how its process ended once it has (the outcome),
 * and adds a file to one (the Python traceback a framework printed after
 * it) or puts a longer text in a file's place (that traceback, carried
 * on); each change decides the bundle's kind again (verdict.h).  A process
 * killed by a signal it never sees (SIGKILL) cannot say how it ended:
 * whoever writes its death up afterwards (gmp-run, recover) says it in the
 * bundles it wrote while it ran (gmp_bundle_patch_ended).
 *
 * A framework's own message ("torch.OutOfMemoryError: CUDA out of memory.
 * Tried to allocate ...") often reaches stderr just after the failing call
 * whose bundle was written: its type, module and message then replace those
 * fields in metadata.json, which is rewritten under a hidden name and
 * renamed over the old one, so a reader sees either file whole.  The file is
 * ours, written by jsonw.c: its top-level keys are walked as text (strings
 * and nesting skipped whole, so a key inside the program's metadata is never
 * taken for one); nothing else in it changes.  Uses only the caller's
 * buffer and the stack (gmp_bundle_attach, for bindings, allocates its own).
 * A bundle and its dump directory are reopened by path the way they were
 * first opened (gmp_dir_open_safely): a symlink another user planted on the
 * way since then is refused, not followed.
 */
#include "bundle.h"
#include "json_text.h"
#include "verdict.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define TMP_NAME ".metadata.json.tmp"
#define MANIFEST_TMP_NAME ".manifest.json.tmp"
#define PUT_TMP_NAME ".put.tmp"

/* name in dirfd replaced by data whole: written under tmp, renamed over. */
static int replace_file(int dirfd, const char *tmp, const char *name, const char *data,
                        size_t len)
{
    unlinkat(dirfd, tmp, 0);
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0)
        return -1;
    int ok = gmp_write_all(fd, data, len) == 0;
    close(fd);
    if (ok && renameat(dirfd, tmp, dirfd, name) == 0)
        return 0;
    unlinkat(dirfd, tmp, 0);
    return -1;
}

typedef struct field_patch {
    const char *key;
    const char *json; /* the new value, encoded; NULL leaves the key as it is */
    size_t start, end;
} field_patch;

/* doc (len bytes and a NUL, in cap) with its "kind" decided again from
 * the facts it now holds (an outcome of exit 0 makes a failure survived);
 * its new length.  A bundle written before it had a kind keeps none: its
 * readers decide. */
static size_t decide_kind_again(char *doc, size_t len, size_t cap)
{
    size_t start, end;
    if (gmp_json_value_span(doc, "kind", &start, &end) < 0)
        return len;
    gmp_verdict_facts f;
    gmp_verdict_fact_text text;
    gmp_verdict_facts_from_text(doc, &f, &text);
    const char *name = gmp_verdict_name(gmp_verdict_decide(&f));
    size_t quoted = strlen(name) + 2;
    if (len - (end - start) + quoted >= cap)
        return len;
    memmove(doc + start + quoted, doc + end, len - end + 1);
    doc[start] = '"';
    memcpy(doc + start + 1, name, quoted - 2);
    doc[start + quoted - 1] = '"';
    return len - (end - start) + quoted;
}

/* metadata.json of bundle with the top-level values of p[0..n) replaced;
 * every key named must be there.  0, or -1 with the file untouched. */
static int patch_metadata(const char *bundle, field_patch *p, int n, char *buf, size_t cap)
{
    size_t half = cap / 2;
    char *in = buf, *out = buf + half;
    int dirfd = gmp_dir_open_safely(bundle, 0, 0, NULL, 0);
    if (dirfd < 0)
        return -1;
    int rc = -1;
    int fd = openat(dirfd, "metadata.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t len = -1;
    if (fd >= 0) {
        len = read(fd, in, half - 1);
        close(fd);
    }
    int found = len > 0 && (size_t)len < half - 1;
    if (found)
        in[len] = '\0';
    field_patch *order[8]; /* the keys to replace, in the file's order */
    int used = 0;
    for (int i = 0; found && i < n && used < 8; i++) {
        if (!p[i].json)
            continue;
        found = gmp_json_value_span(in, p[i].key, &p[i].start, &p[i].end) == 0;
        int at = used++;
        for (; at > 0 && order[at - 1]->start > p[i].start; at--)
            order[at] = order[at - 1];
        order[at] = &p[i];
    }
    size_t o = 0, from = 0;
    for (int i = 0; found && i < used; i++) {
        size_t vlen = strlen(order[i]->json), keep = order[i]->start - from;
        if (order[i]->start < from || o + keep + vlen >= half) {
            found = 0;
            break;
        }
        memcpy(out + o, in + from, keep);
        memcpy(out + o + keep, order[i]->json, vlen);
        o += keep + vlen;
        from = order[i]->end;
    }
    if (found && o + ((size_t)len - from) < half) {
        memcpy(out + o, in + from, (size_t)len - from);
        o += (size_t)len - from;
        out[o] = '\0';
        o = decide_kind_again(out, o, half);
        rc = replace_file(dirfd, TMP_NAME, "metadata.json", out, o);
    }
    int saved = errno;
    close(dirfd);
    errno = saved;
    return rc;
}

/* s as a JSON string (null for NULL) in out; NULL when it does not fit. */
static const char *json_string(const char *s, char *out, size_t cap)
{
    gmp_jw w;
    gmp_jw_init(&w, -1, out, cap);
    gmp_jw_str(&w, s);
    return gmp_jw_finish(&w) == 0 ? out : NULL;
}

int gmp_bundle_patch_program(const char *bundle, const char *type, const char *module,
                             const char *message, const char *context, const char *metadata_json,
                             char *buf, size_t cap)
{
    char t[512], m[512], msg[4096], ctx[GMP_CONTEXT_MAX * 2];
    field_patch p[5] = {
        {"exception_type", json_string(type, t, sizeof t), 0, 0},
        {"exception_module", json_string(module, m, sizeof m), 0, 0},
        {"exception_message", json_string(message, msg, sizeof msg), 0, 0},
        {"context", context ? json_string(context, ctx, sizeof ctx) : NULL, 0, 0},
        {"custom_metadata", NULL, 0, 0},
    };
    if (!p[0].json || !p[1].json || !p[2].json || (context && !p[3].json))
        return -1;
    if (metadata_json) {
        if (gmp_json_check_object(metadata_json, strlen(metadata_json), 32) != 0)
            return -1;
        p[4].json = metadata_json;
    }
    return patch_metadata(bundle, p, 5, buf, cap);
}

int gmp_bundle_patch_exception(const char *bundle, const char *type, const char *module,
                               const char *message, char *buf, size_t cap)
{
    return gmp_bundle_patch_program(bundle, type, module, message, NULL, NULL, buf, cap);
}

/* death_bundle: the name of the bundle that tells the death, when another
 * does (a kill written up afterwards) */
static void write_outcome(gmp_jw *w, const gmp_outcome *o, const char *death_bundle)
{
    gmp_jw_obj_begin(w);
    if (o->state == GMP_OUTCOME_EXITED) {
        gmp_jw_kstr(w, "state", "exited");
        gmp_jw_ki64(w, "exit_status", o->code);
    } else if (o->state == GMP_OUTCOME_KILLED) {
        char name[24] = "SIG";
        const char *abbrev = gmp_signal_abbrev(o->code);
        gmp_strlcat(name, abbrev ? abbrev : "?", sizeof name);
        gmp_jw_kstr(w, "state", "killed");
        gmp_jw_kstr(w, "signal", name);
    } else if (o->state == GMP_OUTCOME_GONE) {
        gmp_jw_kstr(w, "state", "gone");
    } else {
        gmp_jw_kstr(w, "state", "running");
    }
    if (death_bundle)
        gmp_jw_kstr(w, "death_bundle", death_bundle);
    gmp_jw_obj_end(w);
}

void gmp_bundle_write_outcome(gmp_jw *w, const gmp_outcome *o)
{
    write_outcome(w, o, NULL);
}

static int patch_outcome(const char *bundle, const gmp_outcome *outcome,
                         const char *death_bundle, char *buf, size_t cap)
{
    char json[512];
    gmp_jw w;
    gmp_jw_init(&w, -1, json, sizeof json);
    write_outcome(&w, outcome, death_bundle);
    if (gmp_jw_finish(&w) != 0)
        return -1;
    field_patch p = {"outcome", json, 0, 0};
    return patch_metadata(bundle, &p, 1, buf, cap);
}

int gmp_bundle_patch_outcome(const char *bundle, const gmp_outcome *outcome, char *buf,
                             size_t cap)
{
    return patch_outcome(bundle, outcome, NULL, buf, cap);
}

int gmp_bundle_patch_outcome_of(const char *bundle, const gmp_outcome *outcome,
                                const char *death_bundle, char *buf, size_t cap)
{
    return patch_outcome(bundle, outcome, death_bundle, buf, cap);
}

int gmp_bundle_add_file(const char *bundle, const char *name, const char *data, size_t len,
                        char *buf, size_t cap)
{
    int dirfd = gmp_dir_open_safely(bundle, 0, 0, NULL, 0);
    if (dirfd < 0)
        return -1;
    int rc = -1;
    int fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd >= 0) { /* never over one the bundle has */
        int ok = gmp_write_all(fd, data, len) == 0;
        close(fd);
        ssize_t n = -1;
        int mfd = ok ? openat(dirfd, "manifest.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC) : -1;
        if (mfd >= 0) {
            n = read(mfd, buf, cap / 2);
            close(mfd);
        }
        /* "files":["manifest.json",... -> "files":["NAME","manifest.json",... */
        char *files = NULL;
        if (n > 0 && (size_t)n < cap / 2) {
            buf[n] = '\0';
            files = strstr(buf, "\"files\":[");
        }
        size_t nl = strlen(name);
        if (files && (size_t)n + nl + 3 < cap / 2) {
            char *out = buf + cap / 2;
            size_t head = (size_t)(files - buf) + 9;
            memcpy(out, buf, head);
            out[head] = '"';
            memcpy(out + head + 1, name, nl);
            int alone = buf[head] == ']'; /* an empty list takes no comma */
            memcpy(out + head + 1 + nl, "\",", alone ? 1 : 2);
            size_t at = head + (alone ? 2 : 3) + nl;
            memcpy(out + at, buf + head, (size_t)n - head);
            rc = replace_file(dirfd, MANIFEST_TMP_NAME, "manifest.json", out,
                              at + (size_t)n - head);
        }
        if (rc < 0)
            unlinkat(dirfd, name, 0); /* listed nowhere: not left behind */
    }
    int saved = errno;
    close(dirfd);
    errno = saved;
    return rc;
}

int gmp_bundle_put_file(const char *bundle, const char *name, const char *data, size_t len,
                        char *buf, size_t cap)
{
    int dirfd = gmp_dir_open_safely(bundle, 0, 0, NULL, 0);
    if (dirfd < 0)
        return -1;
    struct stat st;
    int have = fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0;
    /* the manifest lists it already: the new text goes in under its name */
    int rc = -1;
    if (have && S_ISREG(st.st_mode))
        rc = replace_file(dirfd, PUT_TMP_NAME, name, data, len);
    close(dirfd);
    return have ? rc : gmp_bundle_add_file(bundle, name, data, len, buf, cap);
}

int gmp_bundle_attach(const char *bundle, const char *name, const char *data, size_t len)
{
    /* the name goes into the manifest as it is: letters, digits, . _ - only */
    size_t plain = name ? strspn(name, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                                       "0123456789._-")
                        : 0;
    if (!bundle || !data || !plain || name[plain] || name[0] == '.' || plain > 255) {
        errno = EINVAL;
        return -1;
    }
    size_t cap = 256 * 1024; /* twice the largest manifest */
    char *buf = malloc(cap);
    if (!buf)
        return -1;
    int rc = gmp_bundle_add_file(bundle, name, data, len, buf, cap);
    int saved = errno;
    free(buf);
    errno = saved;
    return rc;
}

typedef struct ended_scan {
    const char *dump_dir;
    char tag[32];     /* "_<pid>_", as the name holds the pid */
    time_t since;     /* the process's start, in seconds */
    const gmp_outcome *outcome;
    const char *death_bundle;
    char *buf;
    size_t cap;
    int patched;         /* or, with no outcome, found */
    uint64_t newest_ns;  /* the newest found's directory's mtime */
} ended_scan;

static int patch_if_running(int dirfd, const char *name, void *arg)
{
    ended_scan *e = arg;
    /* "oom_dump_<stamp>_<pid>_...": the pid right after the stamp */
    const char *stamp_end = !strncmp(name, "oom_dump_", 9) ? strchr(name + 9, '_') : NULL;
    struct stat st;
    if (!stamp_end || strncmp(stamp_end, e->tag, strlen(e->tag)) ||
        fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) < 0 || !S_ISDIR(st.st_mode) ||
        st.st_uid != geteuid() || st.st_mtime < e->since)
        return 0;
    int bfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    int fd = bfd < 0 ? -1 : openat(bfd, "metadata.json", O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    ssize_t n = fd < 0 ? -1 : read(fd, e->buf, e->cap - 1);
    if (fd >= 0)
        close(fd);
    if (bfd >= 0)
        close(bfd);
    if (n <= 0)
        return 0;
    e->buf[n] = '\0';
    char path[GMP_PATH_MAX];
    if (!strstr(e->buf, "\"outcome\":{\"state\":\"running\"}"))
        return 0;
    if (!e->outcome) {
        uint64_t at = (uint64_t)st.st_mtim.tv_sec * 1000000000u + (uint64_t)st.st_mtim.tv_nsec;
        e->newest_ns = at > e->newest_ns ? at : e->newest_ns;
        e->patched++;
    } else if (gmp_strjoin(path, sizeof path, e->dump_dir, "/", name, (char *)NULL) == 0 &&
               patch_outcome(path, e->outcome, e->death_bundle, e->buf, e->cap) == 0) {
        e->patched++;
    }
    return 0;
}

int gmp_bundle_patch_ended(const char *dump_dir, int pid, uint64_t start_ns,
                           const gmp_outcome *outcome, const char *death_bundle,
                           uint64_t *newest_ns)
{
    ended_scan e = {.dump_dir = dump_dir, .since = (time_t)(start_ns / 1000000000u),
                    .outcome = outcome, .death_bundle = death_bundle, .cap = 128 * 1024};
    char num[24];
    gmp_fmt_u64((uint64_t)pid, num);
    gmp_strjoin(e.tag, sizeof e.tag, "_", num, "_", (char *)NULL);
    int dirfd = pid > 0 ? gmp_dir_open_safely(dump_dir, 0, 0, NULL, 0) : -1;
    if (dirfd < 0)
        return -1;
    e.buf = malloc(e.cap);
    if (e.buf)
        gmp_dir_foreach(dirfd, patch_if_running, &e);
    free(e.buf);
    close(dirfd);
    if (newest_ns)
        *newest_ns = e.newest_ns;
    return e.buf ? e.patched : -1;
}
