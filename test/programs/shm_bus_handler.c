/*
 * shm_bus_handler.c — a program that fills a tmpfs through a shared mapping
 * with a SIGBUS handler of its own, as PyTorch's DataLoader workers have:
 * the handler writes its words (a C string with its NUL, as theirs do),
 * puts the default action back and raises the signal again.  The preload
 * sees only that second signal, sent by the process to itself, without the
 * fault's address.  Usage: shm_bus_handler DIR [raise] (DIR a tmpfs:
 * /dev/shm); exits 0 when DIR had room for 64 MiB.  With raise, it maps
 * the file and raises SIGBUS itself, touching nothing: a SIGBUS that is no
 * full tmpfs's.
 */
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static void on_bus(int sig)
{
    static const char words[] = "ERROR: Unexpected bus error encountered in worker. This might "
                                "be caused by insufficient shared memory (shm).\n";
    (void)!write(2, words, sizeof words);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    if (sigaction(sig, &dfl, NULL) != 0)
        _exit(1);
    raise(sig);
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: shm_bus_handler DIR [raise]\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_bus;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
    char path[4096];
    snprintf(path, sizeof path, "%s/gmp-bus-handler", argv[1]);
    int fd = open(path, O_CREAT | O_RDWR | O_TRUNC, 0600);
    if (fd < 0) {
        perror(path);
        return 1;
    }
    unlink(path); /* "(deleted)" in /proc/self/maps, as a worker's is */
    size_t size = (size_t)64 << 20;
    char *p;
    if (ftruncate(fd, (off_t)size) != 0 ||
        (p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0)) == MAP_FAILED) {
        perror("map");
        return 1;
    }
    if (argc == 3)
        raise(SIGBUS);
    for (size_t at = 0; at < size; at += 4096)
        p[at] = 1;
    return 0;
}
