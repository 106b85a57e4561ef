/*
 * event_list.c — events.json without its whole document in memory.  A DOM of
 * every event costs jansson about nine times the file (an object, a hash
 * table and a value per field), so a large bundle took gigabytes.  Instead
 * the file's text is kept as read and only where each event starts is
 * indexed: one offset per event.  A reader parses one event at a time
 * (event_at) and lets it go, so memory stays within a few times the file.
 *
 * Indexing parses every event once with jansson, so a malformed one is
 * refused when the bundle is opened, as before, with its line and column.
 * events.json is an array of events, or an object whose "events" member is
 * that array (the Python recorder's layout); the other members of such an
 * object are parsed to be checked and dropped.
 */
#include "read.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define PARSE_FLAGS (JSON_DECODE_ANY | JSON_DISABLE_EOF_CHECK | JSON_ALLOW_NUL)

typedef struct cursor {
    const char *text;
    size_t len, pos;
    event_list *list;
    const char *failed_api; /* the failed request, to find its event */
    uint64_t failed_size; /* with has_failed_size */
    int has_failed_size;
    json_t *failed_time; /* its event's timestamp (newer bundles): that event alone */
    size_t last_oom;
    char *err;
    size_t err_cap;
} cursor;

static void skip_space(cursor *c)
{
    while (c->pos < c->len && (c->text[c->pos] == ' ' || c->text[c->pos] == '\t' ||
                               c->text[c->pos] == '\n' || c->text[c->pos] == '\r'))
        c->pos++;
}

/* "invalid JSON at line L column C: why", counted over the whole file. */
static int invalid(cursor *c, size_t at, const char *why)
{
    int line = 1, column = 1;
    for (size_t i = 0; i < at && i < c->len; i++) {
        if (c->text[i] == '\n') {
            line++;
            column = 1;
        } else if (((unsigned char)c->text[i] & 0xc0) != 0x80) { /* characters, not bytes */
            column++;
        }
    }
    snprintf(c->err, c->err_cap, "invalid JSON at line %d column %d: %s", line, column, why);
    return -1;
}

static int out_of_memory(cursor *c)
{
    char size[32];
    fmt_bytes(c->len, size, sizeof size);
    snprintf(c->err, c->err_cap, "too large to read in the memory this process may use (%s)",
             size);
    return -1;
}

/* One JSON value at the cursor, parsed and stepped over; returned when keep
 * is set (a new reference), else released. */
static int parse_value(cursor *c, json_t **keep)
{
    json_error_t jerr;
    errno = 0;
    json_t *v = json_loadb(c->text + c->pos, c->len - c->pos, PARSE_FLAGS, &jerr);
    if (!v) {
        if (json_error_code(&jerr) == json_error_out_of_memory || (!jerr.text[0] && errno == ENOMEM))
            return out_of_memory(c);
        return invalid(c, c->pos + (size_t)(jerr.position > 0 ? jerr.position : 0), jerr.text);
    }
    c->pos += (size_t)jerr.position;
    if (keep)
        *keep = v;
    else
        json_decref(v);
    return 0;
}

static int add_offset(cursor *c)
{
    event_list *l = c->list;
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 1024;
        uint32_t *at = realloc(l->at, cap * sizeof *at);
        if (!at)
            return out_of_memory(c);
        l->at = at;
        l->cap = cap;
    }
    l->at[l->n++] = (uint32_t)c->pos;
    return 0;
}

/* After an array element or object member: 1 at a ',' (another follows),
 * 0 at the closing bracket, -1 (said) at anything else; steps over it. */
static int after_member(cursor *c, char close)
{
    skip_space(c);
    char at = c->pos < c->len ? c->text[c->pos] : '\0';
    if (at != ',' && at != close) {
        char why[32];
        snprintf(why, sizeof why, "',' or '%c' expected", close);
        return invalid(c, c->pos, why);
    }
    c->pos++;
    return at == ',';
}

/* What indexing keeps of event i: whether it is an object, and whether it
 * is the failure: the "oom" event of the failed request's API and time
 * when the bundle gives the time (a retry of the same size that confirmed
 * it comes later, an earlier episode's failure before it); else the last
 * "oom" event of its API and size, or of any kind when none matches. */
static void note_event(cursor *c, json_t *ev, size_t i)
{
    event_list *l = c->list;
    if (!json_is_object(ev)) {
        if (l->first_non_object == SIZE_MAX)
            l->first_non_object = i;
        return;
    }
    const char *type = jstr(ev, "event_type"), *api = jstr(ev, "api");
    if (!type || strcmp(type, "oom"))
        return;
    c->last_oom = i;
    uint64_t size;
    if (!c->failed_api || !api || strcmp(api, c->failed_api))
        return;
    if (c->failed_time) {
        if (json_equal(json_object_get(ev, "timestamp"), c->failed_time))
            l->failure = i;
    } else if (c->has_failed_size && !ju64(ev, "size", &size) && size == c->failed_size) {
        l->failure = i;
    }
}

/* The array at the cursor ('[' already seen): each element indexed. */
static int index_array(cursor *c)
{
    c->list->n = 0;
    c->list->first_non_object = c->list->failure = c->last_oom = SIZE_MAX;
    skip_space(c);
    if (c->pos < c->len && c->text[c->pos] == ']') {
        c->pos++;
        return 0;
    }
    for (;;) {
        skip_space(c);
        json_t *ev;
        if (add_offset(c) < 0 || parse_value(c, &ev) < 0)
            return -1;
        note_event(c, ev, c->list->n - 1);
        json_decref(ev);
        int more = after_member(c, ']');
        if (more <= 0)
            return more;
    }
}

/* The object at the cursor ('{' already seen): its "events" array indexed
 * (the last one, as a JSON reader would keep), the rest checked. */
static int index_object(cursor *c, int *found)
{
    skip_space(c);
    if (c->pos < c->len && c->text[c->pos] == '}') {
        c->pos++;
        return 0;
    }
    for (;;) {
        skip_space(c);
        json_t *key = NULL;
        if (c->pos >= c->len || c->text[c->pos] != '"')
            return invalid(c, c->pos, "string or '}' expected");
        if (parse_value(c, &key) < 0)
            return -1;
        int is_events = !strcmp(json_string_value(key), "events") &&
                        json_string_length(key) == 6;
        json_decref(key);
        skip_space(c);
        if (c->pos >= c->len || c->text[c->pos] != ':')
            return invalid(c, c->pos, "':' expected");
        c->pos++;
        skip_space(c);
        if (is_events && c->pos < c->len && c->text[c->pos] == '[') {
            c->pos++;
            if (index_array(c) < 0)
                return -1;
            *found = 1;
        } else {
            if (parse_value(c, NULL) < 0)
                return -1;
            if (is_events) {
                *found = 0;
                c->list->n = 0;
            }
        }
        int more = after_member(c, '}');
        if (more <= 0)
            return more;
    }
}

int events_load_at(int dirfd, event_list *l, json_t *failed_request, char *err,
                   size_t err_cap)
{
    memset(l, 0, sizeof *l);
    l->first_non_object = l->failure = SIZE_MAX;
    char why[600];
    size_t len;
    char *text = read_file_at(dirfd, "events.json", EVENTS_FILE_MAX, &len, why, sizeof why);
    if (!text) {
        snprintf(err, err_cap, "%s", why);
        return -1;
    }
    text = json_text_widen_integers(text, &len);
    l->text = text;
    l->len = len;
    json_t *failed_time = json_object_get(failed_request, "timestamp");
    cursor c = {.text = text,
                .len = len,
                .list = l,
                .failed_api = jstr(failed_request, "api"),
                .failed_time = json_is_number(failed_time) ? failed_time : NULL,
                .last_oom = SIZE_MAX,
                .err = why,
                .err_cap = sizeof why};
    c.has_failed_size = ju64(failed_request, "size", &c.failed_size) == 0;
    int found = 0, rc = 0;
    skip_space(&c);
    if (c.pos < len && text[c.pos] == '[') {
        c.pos++;
        rc = index_array(&c);
        found = 1;
    } else if (c.pos < len && text[c.pos] == '{') {
        c.pos++;
        rc = index_object(&c, &found);
    } else {
        rc = invalid(&c, c.pos, "'[' or '{' expected near the start");
    }
    /* with the time given and no event of it (it fell out of the ring),
     * another failure is not called the failed request */
    if (l->failure == SIZE_MAX && !c.failed_time)
        l->failure = c.last_oom;
    if (rc == 0) {
        skip_space(&c);
        if (c.pos < len)
            rc = invalid(&c, c.pos, "end of file expected");
        else if (!found) {
            snprintf(why, sizeof why, "holds no event array");
            rc = -1;
        }
    }
    if (rc < 0) {
        snprintf(err, err_cap, "events.json: %s", why);
        events_free(l);
        return -1;
    }
    return 0;
}

json_t *event_at(const event_list *l, size_t i)
{
    if (i >= l->n)
        return NULL;
    json_error_t jerr;
    json_t *ev = json_loadb(l->text + l->at[i], l->len - l->at[i], PARSE_FLAGS, &jerr);
    if (ev && !inspect_raw_json)
        json_clean_strings(ev);
    return ev;
}

/* The UTF-8 character at t (valid: jansson checked it) as \\u escapes, as
 * JSON_ENSURE_ASCII writes it: no byte a terminal could take for a control
 * (U+009B is one); returns its length in bytes. */
static size_t put_escaped_utf8(const unsigned char *t, size_t left, FILE *out)
{
    size_t n = t[0] >= 0xf0 ? 4 : t[0] >= 0xe0 ? 3 : 2;
    if (n > left)
        n = left;
    uint32_t cp = t[0] & (0x7f >> n);
    for (size_t k = 1; k < n; k++)
        cp = (cp << 6) | (t[k] & 0x3f);
    if (cp >= 0x10000) {
        cp -= 0x10000;
        fprintf(out, "\\u%04x\\u%04x", 0xd800 + (cp >> 10), 0xdc00 + (cp & 0x3ff));
    } else {
        fprintf(out, "\\u%04x", cp);
    }
    return n;
}

int event_print_raw(const event_list *l, size_t i, FILE *out)
{
    if (i >= l->n)
        return -1;
    /* every event was parsed when indexed: its text is valid JSON, whose
     * end is where its brackets close (or, a scalar, the next ',' or ']') */
    const char *t = l->text;
    int depth = 0, in_string = 0;
    for (size_t p = l->at[i]; p < l->len; p++) {
        char c = t[p];
        if (in_string) {
            if ((unsigned char)c >= 0x80) {
                p += put_escaped_utf8((const unsigned char *)t + p, l->len - p, out) - 1;
                continue;
            }
            if (c == '\\' && p + 1 < l->len) {
                putc(c, out);
                c = t[++p];
            } else if (c == '"') {
                in_string = 0;
            }
        } else if (c == ' ' || c == '\t' || c == '\n' || c == '\r') {
            continue;
        } else if (c == '"') {
            size_t digits, end = json_wide_size_end(t, l->len, p, &digits);
            if (end) { /* a size past int64, as it was written */
                fwrite(t + digits, 1, end - 1 - digits, out);
                p = end - 1;
                if (depth == 0)
                    break;
                continue;
            }
            in_string = 1;
        } else if (c == '{' || c == '[') {
            depth++;
        } else if (c == '}' || c == ']' || c == ',') {
            if (depth == 0)
                break; /* past a scalar event */
            if (c != ',')
                depth--;
        } else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t end = json_widened_integer_end(t, l->len, p);
            if (end) {
                fwrite(t + p, 1, end - p, out);
                p = end + 1; /* past its ".0" */
                if (depth == 0)
                    break;
                continue;
            }
        }
        putc(c, out);
        if (depth == 0 && !in_string && (c == '}' || c == ']' || c == '"'))
            break; /* the event's own end */
    }
    return ferror(out) ? -1 : 0;
}

size_t events_until_failure(const event_list *l)
{
    return l->failure < l->n ? l->failure + 1 : l->n;
}

void events_free(event_list *l)
{
    free(l->text);
    free(l->at);
    memset(l, 0, sizeof *l);
}

/* "host", or "cuda:0": the memory an event is of. */
void event_where(json_t *ev, char *out, size_t cap)
{
    const char *backend = jstr(ev, "backend");
    int64_t dev = -1;
    jint(ev, "device_id", &dev);
    if (!backend || !strcmp(backend, "cpu") || dev < 0)
        snprintf(out, cap, "host");
    else
        snprintf(out, cap, "%.16s:%lld", backend, (long long)dev);
}

void event_record_of(json_t *ev, event_record *r)
{
    memset(r, 0, sizeof *r);
    const char *type = jstr(ev, "event_type"), *hex = jstr(ev, "address");
    r->type = GMP_EV_NONE;
    for (unsigned t = GMP_EV_NONE + 1; type && t < GMP_EV_TYPE_COUNT; t++)
        if (!strcmp(type, gmp_event_type_name(t)))
            r->type = (gmp_event_type)t;
    r->type_name = type;
    r->backend = jstr(ev, "backend");
    r->api = jstr(ev, "api");
    r->device = -1;
    jint(ev, "device_id", &r->device);
    r->address = hex ? strtoull(hex, NULL, 16) : 0;
    r->has_size = !jint(ev, "size", &r->size);
    r->has_in_use = !jint(ev, "bytes_in_use", &r->in_use);
    jint(ev, "stack_id", &r->stack_id);
    r->has_size_real = !jreal(ev, "size", &r->size_real);
    r->has_in_use_real = !jreal(ev, "bytes_in_use", &r->in_use_real);
    json_t *t = json_object_get(ev, "timestamp");
    r->has_time = json_is_number(t);
    r->time = r->has_time ? json_number_value(t) : 0;
}
