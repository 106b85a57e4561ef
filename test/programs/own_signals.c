/*
 * own_signals.c — a program that handles SIGSEGV itself, as the JVM's
 * implicit null checks, V8's WebAssembly bounds checks and Go's runtime do:
 * its handler jumps back past each fault, and the program goes on.  It also
 * fails one allocation, checked, and survives it.  Usage:
 *   own_signals before SIZE   install the handler, then malloc(SIZE) fails
 *   own_signals after SIZE    malloc(SIZE) fails, then install the handler
 * Then three faults, each caught; then whether SIGSEGV's and SIGBUS's
 * handlers are still the program's own (as the JVM's -Xcheck:jni asks);
 * exit 0.  Under the preload it must print the same, exit the same, and
 * leave no crash bundle: none of these signals would have ended it.
 */
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static sigjmp_buf resume;
static volatile sig_atomic_t faults;

static void on_fault(int sig, siginfo_t *info, void *context)
{
    (void)sig;
    (void)info;
    (void)context;
    faults++;
    siglongjmp(resume, 1);
}

static void install(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fault;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
}

static int still_mine(int sig)
{
    struct sigaction now;
    return sigaction(sig, NULL, &now) == 0 && (now.sa_flags & SA_SIGINFO) &&
           now.sa_sigaction == on_fault;
}

static void fail_an_allocation(const char *size)
{
    void *volatile p = malloc(strtoull(size, NULL, 10));
    printf("malloc %s\n", p ? "succeeded" : "failed, checked");
    free(p);
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    int before = !strcmp(argv[1], "before");
    if (before)
        install();
    fail_an_allocation(argv[2]);
    if (!before)
        install();
    for (int i = 0; i < 3; i++) {
        if (sigsetjmp(resume, 1) == 0) {
            volatile int *nothing = NULL;
            (void)*nothing;
        }
    }
    printf("caught %d faults\n", (int)faults);
    printf("handlers %s\n", still_mine(SIGSEGV) && still_mine(SIGBUS) ? "intact" : "replaced");
    return 0;
}
