/*
 * torch_blocks.c — PyTorch's own largest live blocks for `show`, when the
 * bundle has PyTorch's snapshot (GMP_TORCH_HISTORY=1): torch_blocks.json,
 * which the Python site wrote beside torch_snapshot.pickle, each block
 * with the innermost of its Python frames.  The sites we recorded
 * ourselves are sites.c's.
 */
#include "answer.h"

#include <string.h>

/* torch_blocks.json (GMP_TORCH_HISTORY=1): PyTorch's largest live blocks at
 * its OOM, each with the innermost Python frame that made it. */
void print_torch_blocks(bundle *b)
{
    json_t *doc = bundle_json(b, "torch_blocks.json");
    json_t *blocks = json_object_get(doc, "largest_blocks");
    size_t i;
    json_t *blk;
    json_array_foreach(blocks, i, blk) {
        if (i == 5)
            break;
        int64_t size = 0, device = 0;
        jint(blk, "size", &size);
        jint(blk, "device", &device);
        char bytes[32];
        fmt_bytes((uint64_t)(size > 0 ? size : 0), bytes, sizeof bytes);
        printf("%-18s%10s on cuda:%lld  ", i ? "" : "PyTorch's blocks:", bytes, (long long)device);
        json_t *f = json_array_get(json_object_get(blk, "python_frames"), 0);
        const char *file = jstr(f, "filename"), *fn = jstr(f, "name");
        int64_t line = 0;
        jint(f, "line", &line);
        if (file) {
            const char *slash = strrchr(file, '/');
            print_clean(stdout, slash ? slash + 1 : file, 200);
            printf(":%lld", (long long)line);
            if (fn) {
                fputs(" in ", stdout);
                print_clean(stdout, fn, 200);
            }
        } else {
            fputs("(no Python frame)", stdout);
        }
        putchar('\n');
    }
    if (json_array_size(blocks))
        printf("%-18s(the largest live, from torch_snapshot.pickle: open it in memory_viz)\n", "");
}
