/*
 * facts.c — what a bundle records, decoded once into typed fields: the
 * failed request (bundle_failure_of), which show, triage, diff, diagnose,
 * the sites, the Python stack, the chart and the torch export all read.
 * The document stays the reader's for what no field holds.
 */
#include "read.h"

#include <string.h>

const bundle_failure *bundle_failure_of(bundle *b)
{
    if (!b->failure_read) {
        b->failure_read = 1;
        bundle_failure *f = &b->failure;
        memset(f, 0, sizeof *f);
        json_t *doc = json_object_get(b->metadata, "failed_request");
        if (json_is_object(doc)) {
            f->doc = doc;
            f->api = jstr(doc, "api");
            f->has_size = !ju64(doc, "size", &f->size);
            f->device = -1;
            f->has_device = !jint(doc, "device", &f->device);
            f->has_code = !jint(doc, "code", &f->code);
            f->has_in_use = !jint(doc, "bytes_in_use", &f->in_use);
            f->has_stack_id = !jint(doc, "stack_id", &f->stack_id);
            f->stack = json_object_get(doc, "stack");
            f->timestamp = json_object_get(doc, "timestamp");
        }
    }
    return b->failure.doc ? &b->failure : NULL;
}
