/*
 * switched_stack.c — a large allocation made on a stack whose frames above
 * the allocating one are not frames, as a coroutine library that moves or
 * copies stacks leaves them: greenlet (gevent, eventlet) runs a new
 * greenlet's first call on a stack above which lie another greenlet's
 * stale words, and its switch function's call-frame information describes
 * a caller that is not there.  An unwinder that trusts what it reads there
 * reads through garbage.
 *
 * switch_and_call (below, with its own call-frame information) calls fn on
 * another stack.  Its CFI says what a normal function's says: the caller's
 * %rbp and return address lie just above the stack pointer; on the other
 * stack those two words are what the program left there (argv[1]):
 *   pc   both are 1: the return address leads nowhere, as under greenlet
 *        (libgcc reads the code at an address with no call-frame
 *        information, looking for a signal trampoline: address 1)
 *   fp   the return address is real, into a function whose caller is
 *        found through %rbp, and the %rbp is 16: the caller's frame
 *        would be read at 16 + 16
 * Either way the program allocates 4 MiB there and touches it; then, back
 * on its own stack, asks for 2^62 bytes, which no host gives, so that a
 * bundle says what held the memory.  It prints "allocated 4194304, then
 * 2^62: refused" and exits 0, as it does bare.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#if defined(__x86_64__)
void switch_and_call(void *top, void (*fn)(void));
void fp_frame(void);
extern char fp_frame_return[];

__asm__(".text\n"
        ".globl switch_and_call\n"
        ".type switch_and_call,@function\n"
        "switch_and_call:\n"
        ".cfi_startproc\n"
        "    push %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "    mov %rsp, %rbp\n" /* the real stack, kept where the CFI does not say */
        "    mov %rdi, %rsp\n"
        "    call *%rsi\n"
        "    mov %rbp, %rsp\n"
        "    pop %rbp\n"
        ".cfi_def_cfa_offset 8\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size switch_and_call, .-switch_and_call\n"
        /* a function whose caller is found through %rbp; fp_frame_return
         * is a return address inside it (never reached: only its words
         * are left on the other stack) */
        ".globl fp_frame\n"
        ".type fp_frame,@function\n"
        "fp_frame:\n"
        ".cfi_startproc\n"
        "    push %rbp\n"
        ".cfi_def_cfa_offset 16\n"
        ".cfi_offset %rbp, -16\n"
        "    mov %rsp, %rbp\n"
        ".cfi_def_cfa_register %rbp\n"
        "    call abort\n"
        ".globl fp_frame_return\n"
        "fp_frame_return:\n"
        "    pop %rbp\n"
        ".cfi_def_cfa %rsp, 8\n"
        "    ret\n"
        ".cfi_endproc\n"
        ".size fp_frame, .-fp_frame\n");

static uint64_t other_stack[8192] __attribute__((aligned(16)));
static void *kept;

static __attribute__((noinline)) void allocate_there(void)
{
    kept = malloc(4u << 20);
    if (kept)
        memset(kept, 1, 4u << 20);
    __asm__ volatile("" ::: "memory");
}

int main(int argc, char **argv)
{
    int fp = argc > 1 && !strcmp(argv[1], "fp");
    uint64_t *top = &other_stack[8000];
    top[0] = fp ? 16 : 1;                             /* the caller's %rbp, as the CFI says */
    top[1] = fp ? (uint64_t)(uintptr_t)fp_frame_return : 1; /* and its return address */
    switch_and_call(top, allocate_there);
    if (!kept)
        return 2;
    void *huge = malloc((size_t)1 << 62);
    printf("allocated %d, then 2^62: %s\n", 4 << 20, huge ? "given" : "refused");
    free(huge);
    free(kept);
    return 0;
}
#else
int main(void)
{
    printf("allocated %d, then 2^62: refused\n", 4 << 20); /* written for x86-64 only */
    return 0;
}
#endif
