/*
 * report.c — the page `gmp-inspect plot ... -o FILE.html` writes: one
 * self-contained HTML file that answers before it draws.  For a bundle,
 * show's answer first (show --json's document, show_json.c: what happened,
 * who held the memory, where it failed, how the process ended, the
 * exception, the likely causes with their evidence, the Python stack),
 * then the chart (draw/chart.c) at the window's full width, its marks
 * with hover text.  For a file of readings, its title and the chart.  No
 * script, no style or font from elsewhere, no address but the SVG
 * namespace: it opens the same offline, from a CI artefact or a mail.
 */
#include "answer.h"
#include "draw.h"
#include "verbs.h"

#include <jansson.h>
#include <string.h>

/* The page's look: the answer in a readable column, the chart as wide as
 * the window (the SVG scales by its viewBox). */
static const char style[] =
    "body{font-family:sans-serif;margin:16px 24px;color:#222;background:#fff;line-height:1.4}"
    "h1{font-size:1.25em;margin:0 0 8px;overflow-wrap:anywhere}"
    "h2{font-size:1.05em;margin:18px 0 6px}"
    ".answer{max-width:70em}"
    ".headline{font-size:1.1em;font-weight:bold;margin:6px 0 12px}"
    "dl{display:grid;grid-template-columns:max-content 1fr;gap:4px 16px;margin:0}"
    "dt{font-weight:bold}dd{margin:0;overflow-wrap:anywhere}"
    "ol{margin:0;padding-left:1.6em}li{margin:2px 0}"
    ".evidence{color:#555}"
    "code{font-family:monospace,monospace}" /* the pair keeps the text's size */
    "svg{display:block;width:100%;height:auto;margin-top:8px}";

static void text(FILE *f, const char *s)
{
    plot_xml_text(f, s ? s : "");
}

static void head(FILE *f, const char *title)
{
    fputs("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
          "<meta name=\"viewport\" content=\"width=device-width\"><title>", f);
    text(f, title);
    fprintf(f, "</title>\n<style>%s</style></head>\n<body>\n<h1>", style);
    text(f, title);
    fputs("</h1>\n", f);
}

/* one row of the answer's list, where the document has a value */
static void row(FILE *f, const char *label, const char *value)
{
    if (!value || !*value)
        return;
    fputs("<dt>", f);
    text(f, label);
    fputs("</dt><dd>", f);
    text(f, value);
    fputs("</dd>\n", f);
}

static void answer(FILE *f, bundle *b)
{
    json_t *doc = show_json(b);
    fputs("<section class=\"answer\">\n<p class=\"headline\">", f);
    text(f, jstr(doc, "what_happened"));
    fputs("</p>\n<dl>\n", f);
    row(f, "Held by", jstr(doc, "held_by"));
    row(f, "Failed at", jstr(doc, "failed_at"));
    row(f, "Outcome", jstr(doc, "outcome"));
    const char *type = jstr(doc, "exception_type"), *message = jstr(doc, "exception_message");
    if (type && message && !strcmp(type, message))
        message = NULL; /* MemoryError's message is its name */
    char exception[1200];
    snprintf(exception, sizeof exception, "%s%s%s", type ? type : "", type && message ? ": " : "",
             message ? message : "");
    row(f, "Exception", exception);
    row(f, "When", jstr(doc, "when"));
    fputs("</dl>\n", f);
    size_t i;
    json_t *v;
    json_t *causes = json_object_get(doc, "likely_causes");
    if (json_array_size(causes)) {
        fputs("<h2>Likely causes</h2>\n<ol class=\"causes\">\n", f);
        json_array_foreach(causes, i, v) {
            fputs("<li>", f);
            text(f, jstr(v, "cause"));
            if (jstr(v, "evidence")) {
                fputs("<br><span class=\"evidence\">", f);
                text(f, jstr(v, "evidence"));
                fputs("</span>", f);
            }
            fputs("</li>\n", f);
        }
        fputs("</ol>\n", f);
    }
    json_t *stack = json_object_get(doc, "python_stack");
    if (json_array_size(stack)) {
        fputs("<h2>Python stack, innermost first</h2>\n<ol class=\"stack\">\n", f);
        json_array_foreach(stack, i, v) {
            fputs("<li><code>", f);
            text(f, jstr(v, "place"));
            fputs("</code>", f);
            if (jstr(v, "function")) {
                fputs(" in <code>", f);
                text(f, jstr(v, "function"));
                fputs("</code>", f);
            }
            fputs("</li>\n", f);
        }
        fputs("</ol>\n", f);
    }
    fputs("</section>\n<h2>Memory over time</h2>\n", f);
    json_decref(doc);
}

void report_page(FILE *f, plot *p, const char *chart_title, const char *page_title, bundle *b)
{
    head(f, page_title);
    if (b)
        answer(f, b);
    plot_svg(f, p, chart_title, b);
    fputs("</body></html>\n", f);
}
