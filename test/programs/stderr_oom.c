/*
 * stderr_oom.c — a program that tells of an OOM only on stderr, through
 * stdio (which writes through glibc's internal write, past a write hook).
 * Usage: stderr_oom HOW
 *   fprintf    TensorFlow's BFC allocator's line, formatted (fprintf)
 *   fortified  the same through __fprintf_chk (what _FORTIFY_SOURCE calls)
 *   fputs      a PyTorch OutOfMemoryError line
 *   fwrite     an XLA "failed to allocate" line
 *   perror     perror after ENOMEM: "cudaHostAlloc: Cannot allocate memory"
 *   rate       a cloud API's rate limit: "resource exhausted", not memory
 *   twice      two OOM lines 11 s apart (past the 10 s in which a line
 *              adds to the bundle just written)
 * Prints "done" on stdout; exit 0.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

int __fprintf_chk(FILE *stream, int flag, const char *format, ...);

#define BFC "W external/tsl/bfc_allocator.cc:479] Allocator (GPU_0_bfc) ran out of memory " \
            "trying to allocate %.2fGiB (rounded to %lu) requested by op MatMul\n"

int main(int argc, char **argv)
{
    const char *how = argc > 1 ? argv[1] : "";
    if (!strcmp(how, "fprintf"))
        fprintf(stderr, BFC, 20.0, 21474836480ul);
    else if (!strcmp(how, "fortified"))
        __fprintf_chk(stderr, 1, BFC, 20.0, 21474836480ul);
    else if (!strcmp(how, "fputs"))
        fputs("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 20.00 GiB\n",
              stderr);
    else if (!strcmp(how, "fwrite")) {
        const char *line = "E xla/stream_executor: failed to allocate 17.18G (17179869184 "
                           "bytes) from device\n";
        fwrite(line, 1, strlen(line), stderr);
    } else if (!strcmp(how, "perror")) {
        errno = ENOMEM;
        perror("cudaHostAlloc");
    } else if (!strcmp(how, "rate"))
        fputs("google.api_core.exceptions.ResourceExhausted: 429 Resource exhausted: "
              "Quota exceeded for aiplatform.googleapis.com\n", stderr);
    else if (!strcmp(how, "twice")) {
        fputs("RuntimeError: CUDA out of memory. Tried to allocate 2.00 GiB\n", stderr);
        sleep(11);
        fputs("RuntimeError: CUDA out of memory. Tried to allocate 1.00 GiB\n", stderr);
    } else
        return 2;
    puts("done");
    return 0;
}
