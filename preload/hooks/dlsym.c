/*
 * dlsym.c — the exported dlsym.
 *
 * Static cudart (nvcc's default), the private cudart copies inside cuBLAS,
 * cuDNN and NCCL, PyTorch and XLA never call an exported cuMemAlloc: they
 * dlopen libcuda and look its functions up, by dlsym or through
 * cuGetProcAddress (itself found by dlsym).  So dlsym is where the driver is
 * reached.  The lookup is always done by the real dlsym (found with dlvsym);
 * only the exact names cuda_driver.c routes get our wrapper instead of the
 * driver's function, whatever handle the caller passed.  The allocation
 * functions libc.c hooks are routed too, when looked up through a
 * library's own handle (ctypes.CDLL("libc.so.6").malloc): such a lookup
 * starts past the preload.  Never for RTLD_NEXT (an allocator that wraps
 * the next malloc wants that one) or RTLD_DEFAULT (which finds ours).
 *
 * RTLD_NEXT depends on who calls: glibc reads the return address.  So the
 * entry is a few instructions of assembly that ask C whether the name is
 * routed; if not, they jump (not call) to the real dlsym, which then sees
 * the caller's own return address and searches after the caller, exactly as
 * without us.  For a routed name looked up with RTLD_NEXT we search the
 * objects loaded after the caller ourselves.  Architectures other than
 * x86-64 and AArch64 get no dlsym hook: the exported driver hooks remain.
 */
#include "cuda_driver.h"
#include "preload.h"

#include <dlfcn.h>
#include <link.h>
#include <string.h>

typedef void *(*dlsym_fn)(void *, const char *);
static dlsym_fn real_dlsym; /* atomic */

static dlsym_fn find_real_dlsym(void)
{
    dlsym_fn fn = __atomic_load_n(&real_dlsym, __ATOMIC_ACQUIRE);
    if (GMP_LIKELY(fn != NULL))
        return fn;
    /* glibc 2.34 moved dlsym into libc (GLIBC_2.34); older ones have the
     * architecture's first version.  A racing thread finds the same. */
    static const char *const versions[] = {"GLIBC_2.34", "GLIBC_2.2.5", "GLIBC_2.17", NULL};
    for (const char *const *v = versions; !fn && *v; v++)
        fn = (dlsym_fn)dlvsym(RTLD_NEXT, "dlsym", *v);
    __atomic_store_n(&real_dlsym, fn, __ATOMIC_RELEASE);
    return fn;
}

void *gmp_dlsym_real(void *handle, const char *name)
{
    dlsym_fn fn = find_real_dlsym();
    return fn ? fn(handle, name) : NULL;
}

#if defined(__x86_64__) || defined(__aarch64__)

/* The lookup as glibc would do it for RTLD_NEXT from `caller`: the first
 * object loaded after the caller's that defines `name` itself. */
static void *lookup_next(const void *caller, const char *name)
{
    Dl_info info;
    struct link_map *self = NULL, *owner = NULL;
    if (!dladdr1(caller, &info, (void **)&self, RTLD_DL_LINKMAP) || !self)
        return NULL;
    for (struct link_map *m = self->l_next; m; m = m->l_next) {
        void *p = gmp_dlsym_real(m, name); /* a link_map is a valid handle */
        if (p && dladdr1(p, &info, (void **)&owner, RTLD_DL_LINKMAP) && owner == m)
            return p;
    }
    return NULL;
}

/* Called by the entry with the caller's arguments: the real dlsym when the
 * lookup is not ours to route (the entry jumps to it), else NULL. */
GMP_HIDDEN __attribute__((used)) void *gmp_dlsym_forward_to(void *handle, const char *name);
/* An allocation function looked up through a library's own handle? */
static int libc_lookup(void *handle, const char *name)
{
    return handle != RTLD_NEXT && handle != RTLD_DEFAULT && strchr("mfcrpav", name[0]) &&
           gmp_libc_routed_name(name);
}

void *gmp_dlsym_forward_to(void *handle, const char *name)
{
    dlsym_fn fn = find_real_dlsym();
    if (!fn)
        return NULL; /* no real dlsym: gmp_dlsym_route says "not found" */
    if (!name || __atomic_load_n(&gmp_pl.state, __ATOMIC_ACQUIRE) == GMP_PL_DISABLED)
        return (void *)fn;
    if (name[0] == 'J' && !strcmp(name, "JNI_CreateJavaVM")) /* java's launcher, JNI's embedders */
        __atomic_store_n(&gmp_jvm_started, 1, __ATOMIC_RELAXED);
    int cuda = name[0] == 'c' && name[1] == 'u' && gmp_cuda_routed_name(name) >= 0;
    return cuda || libc_lookup(handle, name) ? NULL : (void *)fn;
}

/* A routed name: look it up as the caller asked, then swap in our wrapper. */
GMP_HIDDEN __attribute__((used)) void *gmp_dlsym_route(void *handle, const char *name,
                                                     const void *caller);
void *gmp_dlsym_route(void *handle, const char *name, const void *caller)
{
    if (!find_real_dlsym())
        return NULL;
    GMP_IN_HOOK_SCOPE();
    void *p = handle == RTLD_NEXT ? lookup_next(caller, name) : gmp_dlsym_real(handle, name);
    if (libc_lookup(handle, name))
        return gmp_libc_route(name, p);
    return p ? gmp_cuda_route_by_name(name, p) : NULL;
}

#if defined(__x86_64__)
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, @function\n"
        ".p2align 4\n"
        "dlsym:\n"
        ".cfi_startproc\n"
#ifdef __CET__
        "endbr64\n"
#endif
        "pushq %rdi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "pushq %rsi\n"
        ".cfi_adjust_cfa_offset 8\n"
        "subq $8, %rsp\n" /* the call below needs a 16-byte aligned stack */
        ".cfi_adjust_cfa_offset 8\n"
        "call gmp_dlsym_forward_to\n"
        "addq $8, %rsp\n"
        ".cfi_adjust_cfa_offset -8\n"
        "popq %rsi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "popq %rdi\n"
        ".cfi_adjust_cfa_offset -8\n"
        "testq %rax, %rax\n"
        "jz 1f\n"
        "jmp *%rax\n"           /* the real dlsym sees our caller's return address */
        "1: movq (%rsp), %rdx\n" /* the caller, for RTLD_NEXT */
        "jmp gmp_dlsym_route\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#else
__asm__(".text\n"
        ".globl dlsym\n"
        ".type dlsym, %function\n"
        ".p2align 2\n"
        "dlsym:\n"
        ".cfi_startproc\n"
#ifdef __ARM_FEATURE_BTI_DEFAULT
        "bti c\n"
#endif
        "stp x29, x30, [sp, #-32]!\n"
        ".cfi_def_cfa_offset 32\n"
        ".cfi_offset 29, -32\n"
        ".cfi_offset 30, -24\n"
        "mov x29, sp\n"
        "stp x0, x1, [sp, #16]\n"
        "bl gmp_dlsym_forward_to\n"
        "mov x16, x0\n"
        "ldp x0, x1, [sp, #16]\n"
        "ldp x29, x30, [sp], #32\n"
        ".cfi_restore 29\n"
        ".cfi_restore 30\n"
        ".cfi_def_cfa_offset 0\n"
        "cbz x16, 1f\n"
        "br x16\n"      /* x30 still holds our caller's return address */
        "1: mov x2, x30\n"
        "b gmp_dlsym_route\n"
        ".cfi_endproc\n"
        ".size dlsym, .-dlsym\n");
#endif

#endif
