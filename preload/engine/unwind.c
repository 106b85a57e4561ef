/*
 * unwind.c — the return addresses of the calling thread, fast: a cached
 * unwinder for x86-64, backtrace() elsewhere.
 *
 * Interpreting each frame's DWARF call-frame information anew (what glibc's
 * backtrace() does) costs about 1.5 us for a 16-frame stack: most of what
 * a device allocation cost with stacks on.  Yet the rule that finds a
 * frame's caller is a property of the return address alone: the frame's
 * size at that call site (its CFA is the stack pointer plus a constant),
 * or, in a function with a frame pointer (and in every function that uses
 * alloca or a VLA, whose size varies), the frame pointer plus 16.  So the
 * first stack through a return address is walked by its call-frame
 * information (cfi.c, every read checked), and each frame's rule is
 * learned from what that walk saw: the CFA, and where the caller's frame
 * pointer (%rbp) was kept.  Later stacks through known addresses are
 * walked with the rules alone: a table lookup and a load or two per frame,
 * the lookup skipped where the thread's last walk passed the same address
 * at the same depth.
 *
 * It never reads where it should not: the slow walk reads only what the
 * kernel said can be read, and every read of the fast walk lies between
 * this frame and the highest frame a slow walk reached on this thread
 * (the stack it read itself).  An address whose rule varied (a frame
 * pointer used as a plain register in one call and not another), an
 * address not yet seen, or a full table: the slow path.  A frame-pointer
 * walk alone would skip the callers of every function built without one
 * (Debian builds without); the rules do not.
 */
#include "preload.h"

#include <dlfcn.h>
#include <execinfo.h>

#if defined(__x86_64__)

/* A return address's rule, one word: how to find the caller's CFA (kind,
 * bits 0-2; the frame's size, CFA minus stack pointer, bits 32-63) and,
 * apart, where the caller's %rbp is (bits 3-4; its offset below the CFA,
 * bytes / 8, bits 8-15).  Only a frame-pointer frame needs %rbp to be
 * known, so a doubt about it costs %rbp alone, not the rule.  0: not known
 * yet. */
enum rule_kind {
    RULE_SP = 1,    /* CFA = stack pointer + size */
    RULE_FP = 2,    /* CFA = %rbp + 16, the caller's %rbp at CFA - 16: a frame
                     * pointer's frame whose size varied (alloca, a VLA) */
    RULE_LAST = 3,  /* the unwinder went no further: the stack ends here */
    RULE_NEVER = 4, /* the frame's size varied: always the slow path */
};
enum rbp_rule {
    RBP_PASSES = 0, /* the frame leaves %rbp alone: the caller's is the same */
    RBP_SAVED = 1,  /* the caller's %rbp at CFA - offset */
    RBP_UNSURE = 2, /* not seen clearly yet (a later sighting may tell) */
    RBP_LOST = 3,   /* sightings disagreed: not known, for good */
};
#define RULE(kind, rbp, offset, size)                                                      \
    ((uint64_t)(kind) | (uint64_t)(rbp) << 3 | (uint64_t)(offset) / 8 << 8 |               \
     (uint64_t)(size) << 32)
/* An RULE_SP frame that keeps a frame pointer: should its size vary, it
 * becomes RULE_FP rather than NEVER. */
#define RULE_FP_CAPABLE ((uint64_t)1 << 5)
#define RULE_KIND(r) ((unsigned)((r) & 7))
#define RULE_RBP(r) ((unsigned)(((r) >> 3) & 3))
#define RULE_OFFSET(r) ((uintptr_t)(((r) >> 8) & 0xff) * 8)
#define RULE_SIZE(r) ((uintptr_t)((r) >> 32))
#define RULE_WITHOUT_RBP(r) ((r) & ~(uint64_t)0xff18)

#define TABLE_SLOTS 16384 /* return addresses; 256 KiB, untouched pages free */
#define MAX_PROBES 16
#define MAX_FRAMES 64     /* a walk's frames (the callers asked for fewer) */

typedef struct rule_slot {
    uint64_t pc;   /* atomic: 0 free */
    uint64_t rule; /* atomic: 0 not yet known */
} rule_slot;

static rule_slot *rules; /* atomic pointer */
static int rules_state;  /* atomic: gmp_lazy_table's */
/* Bumped whenever a known rule changes (a later sighting disagreed): what
 * a thread kept of its last walk is then no longer trusted. */
static uint64_t rules_changed; /* atomic */

/* The thread's last walk by rules, frame by frame: a program allocates
 * from the same few call paths, and the table's slots for its frames lie
 * a line apart each, read cold when the allocation wrote more than the
 * caches hold (a 2 MiB block); these lie in a few lines together.  Not
 * used by a walk that interrupts another on the same thread (a signal
 * handler's), which could see an entry half written. */
#define MEMO_FRAMES 32
static __thread rule_slot memo[MEMO_FRAMES] __attribute__((tls_model("initial-exec")));
static __thread uint64_t memo_generation __attribute__((tls_model("initial-exec")));
static __thread int memo_busy __attribute__((tls_model("initial-exec")));
/* The highest stack pointer a slow walk reached on this thread: the fast
 * walk reads nothing above it. */
static __thread uintptr_t stack_top_seen __attribute__((tls_model("initial-exec")));

static inline uint32_t slot_of(uint64_t pc)
{
    return (uint32_t)((pc * 0x9E3779B97F4A7C15ull) >> 50) & (TABLE_SLOTS - 1);
}

static uint64_t rule_of(const rule_slot *t, uint64_t pc)
{
    for (uint32_t i = slot_of(pc), probe = 0; probe < MAX_PROBES;
         probe++, i = (i + 1) & (TABLE_SLOTS - 1)) {
        uint64_t at = __atomic_load_n(&t[i].pc, __ATOMIC_ACQUIRE);
        if (at == pc)
            return __atomic_load_n(&t[i].rule, __ATOMIC_ACQUIRE);
        if (!at)
            return 0;
    }
    return 0;
}

/* What two sightings of one return address agree on: the same CFA rule
 * (else NEVER, which stays), with %rbp where they both saw it clearly, or
 * where one did, or lost for good when they disagree. */
static uint64_t merged(uint64_t known, uint64_t seen)
{
    if (!known || known == seen)
        return seen;
    if (RULE_KIND(known) == RULE_NEVER)
        return known;
    if (RULE_WITHOUT_RBP(known) != RULE_WITHOUT_RBP(seen))
        return (RULE_KIND(known) == RULE_FP || (known & RULE_FP_CAPABLE)) &&
                       (seen & RULE_FP_CAPABLE)
                   ? RULE(RULE_FP, RBP_SAVED, 16, 0)
                   : RULE_NEVER;
    if (RULE_RBP(seen) == RBP_UNSURE || RULE_RBP(known) == RBP_LOST)
        return known;
    if (RULE_RBP(known) == RBP_UNSURE)
        return seen;
    return RULE_WITHOUT_RBP(known) | (uint64_t)RBP_LOST << 3;
}

/* Record pc's rule, merged with what is known. */
static void learn(rule_slot *t, uint64_t pc, uint64_t rule)
{
    for (uint32_t i = slot_of(pc), probe = 0; probe < MAX_PROBES;
         probe++, i = (i + 1) & (TABLE_SLOTS - 1)) {
        uint64_t at = __atomic_load_n(&t[i].pc, __ATOMIC_ACQUIRE);
        if (!at && !__atomic_compare_exchange_n(&t[i].pc, &at, pc, 0, __ATOMIC_ACQ_REL,
                                                 __ATOMIC_ACQUIRE) &&
            at != pc)
            continue; /* another address took the slot */
        if (at && at != pc)
            continue;
        uint64_t known = __atomic_load_n(&t[i].rule, __ATOMIC_ACQUIRE);
        while (merged(known, rule) != known &&
               !__atomic_compare_exchange_n(&t[i].rule, &known, merged(known, rule), 0,
                                            __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE))
            ;
        if (known && merged(known, rule) != known)
            __atomic_fetch_add(&rules_changed, 1, __ATOMIC_RELEASE);
        return;
    }
}

/* A word of this thread's stack, maybe in a frame's part that ASan poisons
 * (a saved register beside an instrumented frame's locals). */
__attribute__((no_sanitize_address)) static inline uintptr_t word_at(uintptr_t address)
{
    return *(const uintptr_t *)address;
}

/* pc's rule as frame `depth` of a walk: from the thread's last walk when
 * it passed there too (use_memo), else from the table, then kept when
 * known (one not known yet is learned by the slow path, in the table). */
static inline uint64_t rule_at(const rule_slot *t, uint64_t pc, uint32_t depth, int use_memo)
{
    if (!use_memo || depth >= MEMO_FRAMES)
        return rule_of(t, pc);
    if (memo[depth].pc == pc)
        return memo[depth].rule;
    uint64_t rule = rule_of(t, pc);
    if (rule) {
        memo[depth].pc = pc;
        memo[depth].rule = rule;
    }
    return rule;
}

/* The walk by rules, from the frame of pc (stack pointer sp, %rbp rbp);
 * 1 with *n frames when it reached the end or max, 0 for the slow path. */
__attribute__((no_sanitize_address)) static int walk_by_rules(const rule_slot *t, uintptr_t pc,
                                                            uintptr_t sp, uintptr_t rbp,
                                                            uintptr_t top, uint64_t *out,
                                                            uint32_t max, uint32_t *n,
                                                            int use_memo)
{
    int rbp_known = 1;
    for (*n = 0;;) {
        out[(*n)++] = pc;
        if (*n == max)
            return 1;
        uint64_t rule = rule_at(t, pc, *n - 1, use_memo);
        uintptr_t cfa;
        switch (RULE_KIND(rule)) {
        case RULE_LAST:
            return 1;
        case RULE_FP:
            if (!rbp_known)
                return 0;
            cfa = rbp + 16;
            break;
        case RULE_SP:
            cfa = sp + RULE_SIZE(rule);
            break;
        default:
            return 0; /* not known yet, or NEVER */
        }
        if (cfa <= sp || cfa > top || (cfa & 7))
            return 0;
        if (RULE_KIND(rule) == RULE_FP)
            rbp = word_at(cfa - 16);
        else if (RULE_RBP(rule) == RBP_SAVED)
            rbp = word_at(cfa - RULE_OFFSET(rule));
        if (RULE_RBP(rule) == RBP_SAVED)
            rbp_known = 1;
        else if (RULE_RBP(rule) != RBP_PASSES)
            rbp_known = 0;
        pc = word_at(cfa - 8);
        sp = cfa;
        if (!pc)
            return 0;
    }
}

/* ---- the slow path: the call-frame information, and what it teaches -- */

static gmp_find_fde_fn find_fde; /* atomic: libgcc's _Unwind_Find_FDE */

/* libgcc's lookup of an address's FDE, loaded the first time (a dlopen:
 * it maps and allocates); NULL when libgcc cannot be loaded. */
static gmp_find_fde_fn libgcc_finder(void)
{
    gmp_find_fde_fn f = __atomic_load_n(&find_fde, __ATOMIC_ACQUIRE);
    if (GMP_UNLIKELY(!f)) {
        GMP_IN_HOOK_SCOPE(); /* dlopen allocates */
        void *h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h)
            return NULL;
        /* racing threads find and store the same; the handle stays open */
        *(void **)&f = gmp_dlsym_real(h, "_Unwind_Find_FDE");
        if (f)
            __atomic_store_n(&find_fde, f, __ATOMIC_RELEASE);
    }
    return f;
}

/* An address's FDE: from its object's table (eh_frame_hdr.c), which maps
 * and allocates nothing, so a stack is walked where the address space is
 * spent; else from libgcc, which also knows the frames JITs registered
 * (loaded on first need, and only then). */
static const void *find_fde_anywhere(void *pc, gmp_eh_bases *bases)
{
    const void *fde = gmp_fde_in_tables(pc, bases);
    if (fde)
        return fde;
    gmp_find_fde_fn libgcc = libgcc_finder();
    return libgcc ? libgcc(pc, bases) : NULL;
}

/* What the walk saw of each frame: its return address, its stack pointer
 * at that address (the CFA of the frame it called) and its %rbp there. */
typedef struct slow_walk {
    int capped;
    uint32_t n;
    uintptr_t pc[MAX_FRAMES + 1], sp[MAX_FRAMES + 1], rbp[MAX_FRAMES + 1];
    uint8_t rbp_known[MAX_FRAMES + 1];
} slow_walk;

/* Frame i's rule, from it and its caller as the walk saw them. */
__attribute__((no_sanitize_address)) static uint64_t rule_from(const slow_walk *w, uint32_t i)
{
    uintptr_t sp = w->sp[i], cfa = w->sp[i + 1], size = cfa - sp;
    if (cfa <= sp || (size & 7) || size >= ((uintptr_t)1 << 31))
        return RULE_NEVER;
    if (!w->rbp_known[i] || !w->rbp_known[i + 1])
        return RULE(RULE_SP, RBP_UNSURE, 0, size);
    uintptr_t rbp = w->rbp[i], caller_rbp = w->rbp[i + 1];
    if (rbp + 16 == cfa && word_at(cfa - 16) == caller_rbp)
        return RULE(RULE_SP, RBP_SAVED, 16, size) | RULE_FP_CAPABLE;
    if (rbp == caller_rbp)
        return RULE(RULE_SP, RBP_PASSES, 0, size);
    /* kept in the frame (pushed, or stored where the compiler chose): the
     * one slot that holds the caller's value, when it is an address (a
     * small number is in many slots by chance); else not known */
    uintptr_t found = 0;
    for (uintptr_t off = 16; off <= 512 && off <= size; off += 8)
        if (word_at(cfa - off) == caller_rbp)
            found = found ? UINTPTR_MAX : off;
    if (caller_rbp >= 65536 && found && found != UINTPTR_MAX)
        return RULE(RULE_SP, RBP_SAVED, found, size);
    return RULE(RULE_SP, RBP_UNSURE, 0, size);
}

/* The walk by call-frame information from the frame of pc (stack pointer
 * sp, %rbp rbp), and the rules it teaches. */
static uint32_t slow_path(rule_slot *t, uintptr_t pc, uintptr_t sp, uintptr_t rbp,
                          uint64_t *out, uint32_t max)
{
    gmp_stack_span span = {sp, sp};
    slow_walk w = {.n = 0};
    gmp_frame f = {.pc = pc, .sp = sp, .rbp = rbp, .rbp_known = 1};
    for (;;) {
        w.pc[w.n] = f.pc;
        w.sp[w.n] = f.sp;
        w.rbp[w.n] = f.rbp;
        w.rbp_known[w.n] = (uint8_t)f.rbp_known;
        if ((w.capped = ++w.n == max + 1))
            break;
        gmp_frame caller;
        /* a return address below the first page is a stale word, not code */
        if (gmp_cfi_step(find_fde_anywhere, &span, &f, &caller) != GMP_STEP_CALLER ||
            caller.pc < 4096)
            break;
        f = caller;
    }
    uint32_t n = w.n < max ? w.n : max;
    for (uint32_t i = 0; i < n; i++)
        out[i] = w.pc[i];
    if (!t)
        return n;
    for (uint32_t i = 0; i + 1 < w.n; i++)
        learn(t, w.pc[i], rule_from(&w, i));
    if (!w.capped) /* the stack, or what could be read of it, ends */
        learn(t, w.pc[w.n - 1], RULE(RULE_LAST, RBP_PASSES, 0, 0));
    if (w.sp[w.n - 1] > stack_top_seen)
        stack_top_seen = w.sp[w.n - 1];
    return n;
}

__attribute__((noinline)) uint32_t gmp_unwind(uint64_t *out, uint32_t max)
{
    if (max > MAX_FRAMES)
        max = MAX_FRAMES;
    if (!max)
        return 0;
    /* this function keeps a frame pointer (it asks for its frame's address):
     * its CFA is %rbp + 16, the return address below that, the caller's
     * %rbp below that */
    const uintptr_t *fp = __builtin_frame_address(0);
    uintptr_t anchor = (uintptr_t)(fp + 2), top = stack_top_seen;
    rule_slot *t = gmp_lazy_table((void **)&rules, &rules_state, sizeof(rule_slot) * TABLE_SLOTS);
    uint32_t n = 0;
    int use_memo = !memo_busy;
    if (use_memo) {
        memo_busy = 1;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        uint64_t generation = __atomic_load_n(&rules_changed, __ATOMIC_ACQUIRE);
        if (GMP_UNLIKELY(generation != memo_generation)) {
            for (int i = 0; i < MEMO_FRAMES; i++)
                memo[i].pc = 0;
            memo_generation = generation;
        }
    }
    int walked = t && anchor < top && top - anchor < ((uintptr_t)1 << 28) &&
                 walk_by_rules(t, fp[1], anchor, fp[0], top, out, max, &n, use_memo);
    if (use_memo) {
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        memo_busy = 0;
    }
    return walked ? n : slow_path(t, fp[1], anchor, fp[0], out, max);
}

#else /* another architecture: glibc's unwinder, every time */

__attribute__((noinline)) uint32_t gmp_unwind(uint64_t *out, uint32_t max)
{
    enum { CAP = 64 };
    void *frames[CAP + 1];
    int n;
    {
        GMP_IN_HOOK_SCOPE(); /* the unwinder's first load allocates */
        n = backtrace(frames, (int)(max < CAP ? max : CAP) + 1);
    }
    uint32_t depth = 0;
    for (int i = 1; i < n; i++) /* frames[0] is here */
        out[depth++] = (uintptr_t)frames[i];
    return depth;
}

#endif
