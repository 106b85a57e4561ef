/*
 * show_json.c — `gmp-inspect show --json`: show's answer as one JSON
 * document per bundle, for a script or CI to read without parsing prose:
 * the kind (verdict.h) and whether it is a death of memory, the headline,
 * who held the memory, where it failed, how the process ended, the likely
 * causes with their evidence, the Python stack, and the facts they rest on
 * as the bundle wrote them (reason, exception, failed request, pid, time).
 * The HTML report (report.c) is this document, drawn.  The words are
 * the text show prints, from the same functions.
 */
#include "answer.h"
#include "verbs.h"

#include <stdlib.h>
#include <string.h>

/* What fn writes to a FILE, as a JSON string (a headline, a line). */
static json_t *written(void (*fn)(FILE *f, bundle *b, void *arg), bundle *b, void *arg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        return json_null();
    fn(f, b, arg);
    fclose(f);
    while (len && (text[len - 1] == '\n' || text[len - 1] == ' '))
        text[--len] = '\0';
    json_t *s = len ? json_stringn(text, len) : json_null();
    free(text);
    return s ? s : json_null();
}

typedef struct headline_args {
    const char *reason, *backend;
} headline_args;

static void headline(FILE *f, bundle *b, void *arg)
{
    const headline_args *h = arg;
    what_happened(f, b, h->reason, h->backend);
}

static void holder(FILE *f, bundle *b, void *arg)
{
    (void)arg;
    print_held_by(f, b, 0);
}

static void add_cause(const char *what, const char *evidence, void *arg)
{
    json_t *c = json_object();
    json_object_set_new(c, "cause", json_string(what));
    json_object_set_new(c, "evidence", evidence[0] ? json_string(evidence) : json_null());
    json_array_append_new(arg, c);
}

static json_t *text_or_null(const char *s)
{
    json_t *v = s ? json_string(s) : NULL;
    return v ? v : json_null();
}

/* metadata's value under key, copied; null where absent */
static json_t *copied(json_t *md, const char *key)
{
    json_t *v = json_object_get(md, key);
    return v ? json_deep_copy(v) : json_null();
}

/* innermost first: {"file", "line", "function", "place"}; empty without one */
static json_t *python_frames(bundle *b)
{
    json_t *frames = json_array();
    python_stack st;
    if (python_stack_read(b, &st) < 0)
        return frames;
    for (size_t k = 0; k < st.n; k++) {
        json_t *fr = json_object();
        json_object_set_new(fr, "file", text_or_null(st.frames[k].file));
        json_object_set_new(fr, "line", json_integer(st.frames[k].line));
        json_object_set_new(fr, "function", text_or_null(st.frames[k].fn));
        char place[400]; /* "x.py:10", a notebook cell's "In [2], line 10" */
        python_frame_place(b, st.frames[k].file, st.frames[k].line, place, sizeof place);
        json_object_set_new(fr, "place", json_string(place));
        json_array_append_new(frames, fr);
    }
    free(st.text);
    return frames;
}

json_t *show_json(bundle *b)
{
    json_t *md = b->metadata;
    headline_args h = {jstr(md, "reason") ? jstr(md, "reason") : jstr(b->manifest, "reason"),
                       jstr(md, "backend") ? jstr(md, "backend") : jstr(b->manifest, "backend")};
    gmp_verdict kind = bundle_kind_of(b);
    json_t *doc = json_object();
    json_object_set_new(doc, "bundle", text_or_null(b->name));
    json_object_set_new(doc, "kind", text_or_null(gmp_verdict_name(kind)));
    json_object_set_new(doc, "death_of_memory",
                        json_boolean(gmp_verdict_is_death_of_memory(kind)));
    json_object_set_new(doc, "what_happened", written(headline, b, &h));
    json_object_set_new(doc, "held_by", written(holder, b, NULL));
    char site[1024], outcome[200];
    json_object_set_new(doc, "failed_at",
                        name_failure_site(b, site, sizeof site) >= 0 ? json_string(site)
                                                                     : json_null());
    json_object_set_new(doc, "outcome", text_or_null(outcome_words(b, outcome, sizeof outcome)));
    char worker[sizeof b->path];
    json_object_set_new(doc, "worker_bundle",
                        text_or_null(worker_bundle_of(b, worker, sizeof worker) == 0 ? worker
                                                                                     : NULL));
    json_t *causes = json_array();
    diagnose_each(b, add_cause, causes);
    json_object_set_new(doc, "likely_causes", causes);
    json_object_set_new(doc, "python_stack", python_frames(b));
    json_object_set_new(doc, "when", text_or_null(jstr(b->manifest, "created_at_utc")));
    json_object_set_new(doc, "pid", copied(b->manifest, "pid"));
    json_object_set_new(doc, "reason", text_or_null(h.reason));
    json_object_set_new(doc, "backend", text_or_null(h.backend));
    json_object_set_new(doc, "exception_type", copied(md, "exception_type"));
    json_object_set_new(doc, "exception_message", copied(md, "exception_message"));
    json_object_set_new(doc, "failed_request", copied(md, "failed_request"));
    json_object_set_new(doc, "confirmed_by", copied(md, "confirmed_by"));
    return doc;
}
