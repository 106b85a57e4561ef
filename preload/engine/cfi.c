/*
 * cfi.c — one step of a stack walk: a frame's caller, found by the call-
 * frame information (DWARF CFI, .eh_frame) of its return address, with
 * every read of the stack checked first.  unwind.c's slow path walks by it.
 *
 * libgcc's unwinder reads wherever the stack leads it: a return address
 * with no call-frame information has its code read (a signal trampoline
 * is looked for there), a frame found through %rbp is read at whatever
 * %rbp holds.  Where the words above a frame are not frames — greenlet
 * (gevent, eventlet) starts each greenlet's first call under another's
 * stale words, and other coroutine libraries that move stacks do the same
 * — that is a read of address 1, or of a stale pointer, and the program
 * dies of our walk.  Here an address with no call-frame information ends
 * the walk unread, and a word of the stack is read only in a page the
 * kernel has said can be read (page_readable: an error, not a fault),
 * from the walk's start up, a page at a time as the walk needs it.
 *
 * The FDE of an address is found in its object's .eh_frame_hdr table
 * (eh_frame_hdr.c), else by libgcc's _Unwind_Find_FDE (frames registered
 * by JITs), and checked to cover the address; its CFA program is run here
 * up to the address.  Followed: the CFA as a register (%rsp or %rbp) plus
 * an offset, or as a small expression of them (GCC's stack-realigning
 * frames); %rbp and the return address saved at an offset or an
 * expression of the CFA.  Anything else (a signal frame, a rule of another
 * register) stops the walk: a stack cut short, never a read of an address
 * not checked.
 */
#include "preload.h"

#if defined(__x86_64__)

#include <errno.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DWARF_RBP 6 /* DWARF register numbers */
#define DWARF_RSP 7

/* DWARF pointer encodings (DW_EH_PE_*) */
enum {
    PE_OMIT = 0xff,
    PE_FORMAT = 0x0f,
    PE_ABSPTR = 0x00,
    PE_ULEB128 = 0x01,
    PE_UDATA2 = 0x02,
    PE_UDATA4 = 0x03,
    PE_UDATA8 = 0x04,
    PE_SLEB128 = 0x09,
    PE_SDATA2 = 0x0a,
    PE_SDATA4 = 0x0b,
    PE_SDATA8 = 0x0c,
    PE_APPLICATION = 0x70,
    PE_PCREL = 0x10,
    PE_TEXTREL = 0x20,
    PE_DATAREL = 0x30,
    PE_FUNCREL = 0x40,
    PE_ALIGNED = 0x50,
};

/* ---- checked reads ----------------------------------------------------- */

#define PAGE 4096
#define SPAN_LIMIT ((uintptr_t)1 << 20)

/* Whether the page at page can be read, asked of the kernel: it copies a
 * signal set from there before it looks at `how`, so an address it cannot
 * read is EFAULT and one it can is EINVAL (the bad `how`), nothing changed.
 * (A system call every process may make, unlike process_vm_readv, which a
 * seccomp filter may refuse.) */
static int page_readable(uintptr_t page)
{
    return syscall(SYS_rt_sigprocmask, -1, (void *)page, (void *)0, (size_t)8) < 0 &&
           errno == EINVAL;
}

/* Raises span->hi, a page at a time, past want_end; 0 when a page on the
 * way cannot be read. */
static int probe(gmp_stack_span *span, uintptr_t want_end)
{
    int saved = errno;
    int ok = 1;
    while (ok && span->hi < want_end) {
        uintptr_t page = span->hi & ~(uintptr_t)(PAGE - 1);
        if ((ok = page_readable(page)))
            span->hi = page + PAGE;
    }
    errno = saved;
    return ok;
}

/* A word of the stack at address into *out; 0 where it may not be read:
 * below the walk's start, unaligned, or not readable. */
__attribute__((no_sanitize_address)) static int read_word(gmp_stack_span *span, uintptr_t address,
                                                          uintptr_t *out)
{
    if ((address & 7) || address < span->lo || address - span->lo > SPAN_LIMIT - 8)
        return 0;
    if (address + 8 > span->hi && !probe(span, address + 8))
        return 0;
    *out = *(const uintptr_t *)address;
    return 1;
}

/* ---- reading .eh_frame ------------------------------------------------- */

typedef struct reader {
    const uint8_t *p, *end;
    int bad;
} reader;

static uint64_t uleb(reader *r)
{
    uint64_t v = 0;
    for (unsigned shift = 0; r->p < r->end; shift += 7) {
        uint8_t b = *r->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80))
            return v;
    }
    r->bad = 1;
    return 0;
}

static int64_t sleb(reader *r)
{
    uint64_t v = 0;
    unsigned shift = 0;
    while (r->p < r->end) {
        uint8_t b = *r->p++;
        if (shift < 64)
            v |= (uint64_t)(b & 0x7f) << shift;
        shift += 7;
        if (!(b & 0x80)) {
            if (shift < 64 && (b & 0x40))
                v |= ~(uint64_t)0 << shift;
            return (int64_t)v;
        }
    }
    r->bad = 1;
    return 0;
}

static uint64_t fixed(reader *r, unsigned bytes)
{
    if ((size_t)(r->end - r->p) < bytes) {
        r->bad = 1;
        r->p = r->end;
        return 0;
    }
    uint64_t v = 0;
    memcpy(&v, r->p, bytes); /* little-endian */
    r->p += bytes;
    return v;
}

/* A pointer in encoding enc (its value; an indirect one is not followed:
 * only a personality routine is, and it is skipped). */
static uint64_t encoded(reader *r, uint8_t enc, const gmp_eh_bases *bases)
{
    if (enc == PE_OMIT)
        return 0;
    uintptr_t here = (uintptr_t)r->p;
    if ((enc & PE_APPLICATION) == PE_ALIGNED) {
        r->p = (const uint8_t *)((here + 7) & ~(uintptr_t)7);
        return fixed(r, 8);
    }
    uint64_t v;
    switch (enc & PE_FORMAT) {
    case PE_ABSPTR: case PE_UDATA8: case PE_SDATA8: v = fixed(r, 8); break;
    case PE_ULEB128: v = uleb(r); break;
    case PE_SLEB128: v = (uint64_t)sleb(r); break;
    case PE_UDATA2: v = fixed(r, 2); break;
    case PE_SDATA2: v = (uint64_t)(int64_t)(int16_t)fixed(r, 2); break;
    case PE_UDATA4: v = fixed(r, 4); break;
    case PE_SDATA4: v = (uint64_t)(int64_t)(int32_t)fixed(r, 4); break;
    default: r->bad = 1; return 0;
    }
    if (!v)
        return 0;
    switch (enc & PE_APPLICATION) {
    case 0: break;
    case PE_PCREL: v += here; break;
    case PE_TEXTREL: v += (uintptr_t)bases->tbase; break;
    case PE_DATAREL: v += (uintptr_t)bases->dbase; break;
    case PE_FUNCREL: v += (uintptr_t)bases->func; break;
    default: r->bad = 1;
    }
    return v;
}

/* One length-prefixed entry (CIE or FDE): its body after the length. */
static int entry(const uint8_t *at, reader *body)
{
    uint32_t len32;
    memcpy(&len32, at, 4);
    if (len32 == 0 || len32 == 0xffffffffu) /* the end, or a 64-bit entry: not in .eh_frame */
        return 0;
    body->p = at + 4;
    body->end = at + 4 + len32;
    body->bad = 0;
    return 1;
}

/* ---- the CFA program --------------------------------------------------- */

/* How a register of the caller is found. */
enum rule_how { HOW_SAME = 0, HOW_UNDEFINED, HOW_OFFSET, HOW_VAL_OFFSET, HOW_EXPRESSION,
                HOW_VAL_EXPRESSION, HOW_OTHER };

typedef struct rule {
    uint8_t how;
    int64_t offset;            /* HOW_OFFSET, HOW_VAL_OFFSET: from the CFA */
    const uint8_t *expr, *end; /* HOW_*EXPRESSION */
} rule;

/* The row of the table at one address: the CFA and the two registers a
 * walk needs, %rbp and the return address. */
typedef struct row {
    int cfa_reg; /* -1: the CFA is cfa_expr */
    int64_t cfa_offset;
    const uint8_t *cfa_expr, *cfa_expr_end;
    rule rbp, ra;
} row;

typedef struct cie_info {
    uint64_t code_align;
    int64_t data_align;
    uint64_t ra_reg;
    uint8_t fde_enc;
    int has_z, signal_frame;
    reader program; /* its initial instructions */
} cie_info;

#define STATE_DEPTH 8

static rule *rule_of_reg(row *r, uint64_t reg, uint64_t ra_reg, rule *scratch)
{
    if (reg == DWARF_RBP)
        return &r->rbp;
    if (reg == ra_reg)
        return &r->ra;
    return scratch; /* another register: not needed */
}

/* DW_CFA_restore: reg's rule as the CIE left it; 0 inside the CIE. */
static int restore_rule(row *r, const row *initial, uint64_t reg, uint64_t ra_reg)
{
    if (!initial)
        return 0;
    if (reg == DWARF_RBP)
        r->rbp = initial->rbp;
    else if (reg == ra_reg)
        r->ra = initial->ra;
    return 1;
}

/* Runs the CFA program in prog from location loc while it lies before pc;
 * initial: the row after the CIE's program (DW_CFA_restore goes back to it),
 * NULL while running that one.  0 on an instruction not followed. */
static int run_program(reader *prog, const cie_info *cie, const gmp_eh_bases *bases,
                       uintptr_t loc, uintptr_t pc, row *r, const row *initial)
{
    row saved[STATE_DEPTH];
    int depth = 0;
    rule scratch;
    while (prog->p < prog->end && loc < pc && !prog->bad) {
        uint8_t op = *prog->p++;
        uint64_t reg;
        rule *target;
        switch (op & 0xc0) {
        case 0x40: /* advance_loc */
            loc += (op & 0x3f) * cie->code_align;
            continue;
        case 0x80: /* offset */
            target = rule_of_reg(r, op & 0x3f, cie->ra_reg, &scratch);
            target->how = HOW_OFFSET;
            target->offset = (int64_t)uleb(prog) * cie->data_align;
            continue;
        case 0xc0: /* restore */
            if (!restore_rule(r, initial, op & 0x3f, cie->ra_reg))
                return 0;
            continue;
        }
        switch (op) {
        case 0x00: /* nop */
            break;
        case 0x01: /* set_loc */
            loc = encoded(prog, cie->fde_enc, bases);
            break;
        case 0x02: loc += fixed(prog, 1) * cie->code_align; break; /* advance_loc1 */
        case 0x03: loc += fixed(prog, 2) * cie->code_align; break; /* advance_loc2 */
        case 0x04: loc += fixed(prog, 4) * cie->code_align; break; /* advance_loc4 */
        case 0x05: /* offset_extended */
        case 0x11: /* offset_extended_sf */
        case 0x14: /* val_offset */
        case 0x15: /* val_offset_sf */
        case 0x2f: /* GNU_negative_offset_extended */
            reg = uleb(prog);
            target = rule_of_reg(r, reg, cie->ra_reg, &scratch);
            target->how = op == 0x14 || op == 0x15 ? HOW_VAL_OFFSET : HOW_OFFSET;
            if (op == 0x11 || op == 0x15)
                target->offset = sleb(prog) * cie->data_align;
            else if (op == 0x2f)
                target->offset = -(int64_t)uleb(prog) * cie->data_align;
            else
                target->offset = (int64_t)uleb(prog) * cie->data_align;
            break;
        case 0x06: /* restore_extended */
            if (!restore_rule(r, initial, uleb(prog), cie->ra_reg))
                return 0;
            break;
        case 0x07: /* undefined */
        case 0x08: /* same_value */
            rule_of_reg(r, uleb(prog), cie->ra_reg, &scratch)->how =
                op == 0x07 ? HOW_UNDEFINED : HOW_SAME;
            break;
        case 0x09: /* register: the value is in another register */
            reg = uleb(prog);
            rule_of_reg(r, reg, cie->ra_reg, &scratch)->how = uleb(prog) == reg ? HOW_SAME
                                                                                 : HOW_OTHER;
            break;
        case 0x0a: /* remember_state */
            if (depth == STATE_DEPTH)
                return 0;
            saved[depth++] = *r;
            break;
        case 0x0b: /* restore_state (the CFA too, as GCC and LLVM read it: an
                    * epilogue's remembered row is the body's) */
            if (!depth)
                return 0;
            *r = saved[--depth];
            break;
        case 0x0c: /* def_cfa */
            r->cfa_reg = (int)uleb(prog);
            r->cfa_offset = (int64_t)uleb(prog);
            break;
        case 0x12: /* def_cfa_sf */
            r->cfa_reg = (int)uleb(prog);
            r->cfa_offset = sleb(prog) * cie->data_align;
            break;
        case 0x0d: /* def_cfa_register */
            r->cfa_reg = (int)uleb(prog);
            break;
        case 0x0e: /* def_cfa_offset */
            r->cfa_offset = (int64_t)uleb(prog);
            break;
        case 0x13: /* def_cfa_offset_sf */
            r->cfa_offset = sleb(prog) * cie->data_align;
            break;
        case 0x0f: { /* def_cfa_expression */
            uint64_t len = uleb(prog);
            if (len > (uint64_t)(prog->end - prog->p))
                return 0;
            r->cfa_reg = -1;
            r->cfa_expr = prog->p;
            r->cfa_expr_end = prog->p + len;
            prog->p += len;
            break;
        }
        case 0x10:   /* expression */
        case 0x16: { /* val_expression */
            target = rule_of_reg(r, uleb(prog), cie->ra_reg, &scratch);
            uint64_t len = uleb(prog);
            if (len > (uint64_t)(prog->end - prog->p))
                return 0;
            target->how = op == 0x10 ? HOW_EXPRESSION : HOW_VAL_EXPRESSION;
            target->expr = prog->p;
            target->end = prog->p + len;
            prog->p += len;
            break;
        }
        case 0x2e: /* GNU_args_size */
            uleb(prog);
            break;
        default:
            return 0;
        }
    }
    return !prog->bad;
}

/* ---- expressions ------------------------------------------------------- */

/* A DWARF expression of %rsp and %rbp (GCC's realigned frames keep their
 * CFA as *(%rbp - 8)); pushed: what the rule starts from (the CFA for a
 * register's expression).  0 on an operation not followed or a read that
 * may not be made. */
static int evaluate(const uint8_t *p, const uint8_t *end, const gmp_frame *f,
                    gmp_stack_span *span, const uintptr_t *pushed, uintptr_t *out)
{
    uintptr_t stack[8];
    int n = 0;
    if (pushed)
        stack[n++] = *pushed;
    reader r = {p, end, 0};
    while (r.p < r.end && !r.bad) {
        uint8_t op = *r.p++;
        uintptr_t v;
        if (op >= 0x30 && op <= 0x4f) { /* lit0..lit31 */
            v = op - 0x30;
        } else if (op >= 0x70 && op <= 0x8f) { /* breg0..breg31 */
            int64_t offset = sleb(&r);
            if (op - 0x70 == DWARF_RSP)
                v = f->sp + (uintptr_t)offset;
            else if (op - 0x70 == DWARF_RBP && f->rbp_known)
                v = f->rbp + (uintptr_t)offset;
            else
                return 0;
        } else if (op == 0x06) { /* deref */
            if (!n || !read_word(span, stack[n - 1], &stack[n - 1]))
                return 0;
            continue;
        } else if (op == 0x23) { /* plus_uconst */
            if (!n)
                return 0;
            stack[n - 1] += uleb(&r);
            continue;
        } else if (op == 0x22 || op == 0x1c) { /* plus, minus */
            if (n < 2)
                return 0;
            n--;
            stack[n - 1] = op == 0x22 ? stack[n - 1] + stack[n] : stack[n - 1] - stack[n];
            continue;
        } else if (op >= 0x08 && op <= 0x0f) { /* const1u .. const8s */
            static const uint8_t size[] = {1, 1, 2, 2, 4, 4, 8, 8};
            unsigned bytes = size[op - 0x08];
            v = fixed(&r, bytes);
            if (op & 1) /* the signed ones */
                v = bytes == 1 ? (uintptr_t)(int8_t)v : bytes == 2 ? (uintptr_t)(int16_t)v
                                         : bytes == 4 ? (uintptr_t)(int32_t)v : v;
        } else {
            return 0;
        }
        if (n == 8)
            return 0;
        stack[n++] = v;
    }
    if (r.bad || !n)
        return 0;
    *out = stack[n - 1];
    return 1;
}

/* ---- the step ---------------------------------------------------------- */

/* The CIE whose offset back from the FDE's id field is cie_offset; 0
 * where it cannot be read. */
static int read_cie(const uint8_t *fde_id_field, uint32_t cie_offset, const gmp_eh_bases *bases,
                    cie_info *cie)
{
    reader r;
    if (!entry(fde_id_field - cie_offset, &r) || fixed(&r, 4) != 0) /* a CIE's id is 0 */
        return 0;
    uint8_t version = (uint8_t)fixed(&r, 1);
    const char *aug = (const char *)r.p;
    size_t aug_len = strnlen(aug, (size_t)(r.end - r.p));
    if (aug_len == (size_t)(r.end - r.p))
        return 0;
    r.p += aug_len + 1;
    cie->code_align = uleb(&r);
    cie->data_align = sleb(&r);
    cie->ra_reg = version == 1 ? fixed(&r, 1) : uleb(&r);
    cie->fde_enc = PE_ABSPTR;
    cie->signal_frame = 0;
    cie->has_z = aug[0] == 'z';
    if (cie->has_z) {
        uint64_t len = uleb(&r);
        if (len > (uint64_t)(r.end - r.p))
            return 0;
        reader data = {r.p, r.p + len, 0};
        r.p += len;
        for (const char *c = aug + 1; *c; c++) {
            if (*c == 'R')
                cie->fde_enc = (uint8_t)fixed(&data, 1);
            else if (*c == 'L')
                fixed(&data, 1);
            else if (*c == 'P')
                encoded(&data, (uint8_t)(fixed(&data, 1) & 0x7f), bases);
            else if (*c == 'S')
                cie->signal_frame = 1;
            else
                return 0; /* an augmentation not known: its data cannot be skipped */
        }
        if (data.bad)
            return 0;
    } else if (aug[0]) {
        return 0;
    }
    cie->program = r;
    return !r.bad;
}

/* The row of the table at pc (a return address), from its FDE; 0 where
 * there is none, or it is not followed (a signal frame's among them). */
static int row_at(const void *fde, const gmp_eh_bases *bases, uintptr_t pc, row *out)
{
    reader r;
    if (!entry(fde, &r))
        return 0;
    const uint8_t *id_field = r.p;
    uint32_t cie_offset = (uint32_t)fixed(&r, 4);
    cie_info cie;
    if (!cie_offset || !read_cie(id_field, cie_offset, bases, &cie) || cie.signal_frame)
        return 0;
    uintptr_t start = encoded(&r, cie.fde_enc, bases);
    uintptr_t range = encoded(&r, cie.fde_enc & PE_FORMAT, bases);
    if (pc - 1 < start || pc - 1 - start >= range)
        return 0; /* the FDE before pc's, pc itself in none (eh_frame_hdr.c's table) */
    if (cie.has_z) {
        uint64_t len = uleb(&r);
        if (len > (uint64_t)(r.end - r.p))
            return 0;
        r.p += len; /* the LSDA's address */
    }
    if (r.bad)
        return 0;
    row initial = {.cfa_reg = DWARF_RSP, .cfa_offset = 8, .ra = {.how = HOW_UNDEFINED}};
    reader program = cie.program;
    if (!run_program(&program, &cie, bases, start, UINTPTR_MAX, &initial, NULL))
        return 0;
    *out = initial;
    return run_program(&r, &cie, bases, start, pc, out, &initial);
}

/* A register's value in the caller, where its rule puts it apart from
 * the frame's own (saved, or computed from the CFA); 0 where it is not
 * known. */
static int caller_value(const rule *how, uintptr_t cfa, const gmp_frame *f, gmp_stack_span *span,
                        uintptr_t *out)
{
    uintptr_t address;
    switch (how->how) {
    case HOW_OFFSET:
        return read_word(span, cfa + (uintptr_t)how->offset, out);
    case HOW_VAL_OFFSET:
        *out = cfa + (uintptr_t)how->offset;
        return 1;
    case HOW_EXPRESSION:
        return evaluate(how->expr, how->end, f, span, &cfa, &address) &&
               read_word(span, address, out);
    case HOW_VAL_EXPRESSION:
        return evaluate(how->expr, how->end, f, span, &cfa, out);
    default:
        return 0;
    }
}

int gmp_cfi_step(gmp_find_fde_fn find_fde, gmp_stack_span *span, const gmp_frame *f,
                 gmp_frame *caller)
{
    gmp_eh_bases bases = {0};
    const void *fde;
    {
        GMP_IN_HOOK_SCOPE(); /* libgcc's first lookup in an object may allocate */
        fde = f->pc > 1 ? find_fde((void *)(f->pc - 1), &bases) : NULL;
    }
    row r;
    if (!fde || !row_at(fde, &bases, f->pc, &r))
        return GMP_STEP_UNKNOWN;
    if (r.ra.how == HOW_UNDEFINED)
        return GMP_STEP_END; /* the outermost frame: _start, a thread's start */
    uintptr_t cfa;
    if (r.cfa_reg == DWARF_RSP)
        cfa = f->sp + (uintptr_t)r.cfa_offset;
    else if (r.cfa_reg == DWARF_RBP && f->rbp_known)
        cfa = f->rbp + (uintptr_t)r.cfa_offset;
    else if (r.cfa_reg != -1 || !evaluate(r.cfa_expr, r.cfa_expr_end, f, span, NULL, &cfa))
        return GMP_STEP_UNKNOWN;
    /* a caller's frame lies above its callee's */
    if (cfa <= f->sp || cfa - f->sp >= ((uintptr_t)1 << 31))
        return GMP_STEP_UNKNOWN;
    uintptr_t ra;
    if (!caller_value(&r.ra, cfa, f, span, &ra))
        return GMP_STEP_UNKNOWN;
    if (!ra)
        return GMP_STEP_END;
    caller->pc = ra;
    caller->sp = cfa;
    if (r.rbp.how == HOW_SAME) {
        caller->rbp = f->rbp;
        caller->rbp_known = f->rbp_known;
    } else {
        caller->rbp_known = caller_value(&r.rbp, cfa, f, span, &caller->rbp);
    }
    return GMP_STEP_CALLER;
}

#endif
