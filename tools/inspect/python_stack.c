/*
 * python_stack.c — the Python stack of the thread that failed, for `show`,
 * from the bundle's python_traceback.txt.
 */
#include "inspect.h"

#include <stdlib.h>
#include <string.h>

/* python_traceback.txt: faulthandler's words at the failure (innermost
 * frame first, `File "f.py", line 4 in fn`), or the traceback Python
 * printed (outermost first, `File "f.py", line 4, in fn`, its source lines
 * between).  Shown innermost first, one line a frame: "f.py:4 in fn", for
 * the first stack in the file (the thread that failed). */
#define PYTHON_FRAMES_SHOWN 12
#define PYTHON_FRAMES_READ 256
void print_python_stack(bundle *b)
{
    size_t len;
    char *text = read_file_at(b->dirfd, "python_traceback.txt", 1u << 20, &len, NULL, 0);
    if (!text)
        return;
    struct { const char *file, *fn; long line; } frames[PYTHON_FRAMES_READ];
    size_t n = 0, stacks = 0, dropped = 0;
    int outermost_first = 0;
    for (char *line = text, *next; line && *line; line = next) {
        next = strchr(line, '\n');
        if (next)
            *next++ = '\0';
        if (strstr(line, "most recent call")) {
            if (++stacks > 1)
                break; /* another thread's stack */
            outermost_first = strstr(line, "most recent call last") != NULL;
        }
        char *file = strstr(line, "File \"");
        char *end = file ? strstr(file + 6, "\", line ") : NULL;
        if (!file || !end)
            continue;
        *end = '\0';
        char *rest = end + 7, *in = strstr(rest, " in ");
        if (n == PYTHON_FRAMES_READ) {
            /* the innermost are the ones worth keeping */
            if (!outermost_first) {
                dropped++;
                continue;
            }
            memmove(frames, frames + 1, sizeof frames - sizeof *frames);
            n--;
            dropped++;
        }
        frames[n].file = file + 6;
        frames[n].line = strtol(rest, NULL, 10);
        frames[n].fn = in ? in + 4 : NULL;
        n++;
    }
    for (size_t k = 0; k < n && k < PYTHON_FRAMES_SHOWN; k++) {
        size_t i = outermost_first ? n - 1 - k : k;
        printf("%-18s", k ? "" : "Python stack:");
        print_clean(stdout, frames[i].file, 300);
        printf(":%ld", frames[i].line);
        if (frames[i].fn) {
            fputs(" in ", stdout);
            print_clean(stdout, frames[i].fn, 200);
        }
        puts(k ? "" : "  (innermost first)");
    }
    if (n > PYTHON_FRAMES_SHOWN || dropped)
        printf("%-18s... %zu outer frame(s) more in python_traceback.txt\n", "",
               n - (n > PYTHON_FRAMES_SHOWN ? PYTHON_FRAMES_SHOWN : n) + dropped);
    free(text);
}
