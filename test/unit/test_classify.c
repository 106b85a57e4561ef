/*
 * test_classify.c — OOM classification: the Python recorder's cases (seed
 * 000), the extra types, return codes per backend, and errors that are not
 * out-of-memory staying not OOM.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include "gpumemprof.h"
#include "util.h"

#include <errno.h>
#include <string.h>

static void expect_exc(const char *type, const char *module, const char *msg,
                       int is_oom, const char *reason)
{
    gmp_classification c = gmp_classify_exception(type, module, msg);
    if (c.is_oom != is_oom || (reason && strcmp(c.reason, reason)))
        fail_msg("(%s, %s, %s): got is_oom=%d reason=%s, want %d %s", type, module, msg,
                 c.is_oom, c.reason, is_oom, reason ? reason : "");
}

static void test_seed_cases(void **state)
{
    (void)state;
    /* torch's CUDA OOM, by type and module */
    expect_exc("OutOfMemoryError", "torch.cuda",
               "CUDA out of memory. Tried to allocate 20.00 MiB", 1,
               "torch.cuda.OutOfMemoryError");
    expect_exc("torch.cuda.OutOfMemoryError", NULL, NULL, 1, "torch.cuda.OutOfMemoryError");
    expect_exc("torch.OutOfMemoryError", NULL, NULL, 1, "torch.cuda.OutOfMemoryError");
    /* TensorFlow's ResourceExhaustedError */
    expect_exc("ResourceExhaustedError", "tensorflow.python.framework.errors_impl",
               "OOM when allocating tensor with shape[1024,1024]", 1,
               "tensorflow.ResourceExhaustedError");
    /* a RuntimeError carrying the CUDA message: matched by the message */
    expect_exc("RuntimeError", "builtins",
               "CUDA out of memory. Tried to allocate 2.00 GiB (GPU 0; 15.78 GiB total)", 1,
               "message_pattern:cuda out of memory");
    expect_exc("RuntimeError", NULL, "HIP out of memory. Tried to allocate 1 GiB", 1,
               "message_pattern:hip out of memory");
    expect_exc(NULL, NULL, "cuMemAlloc: out of memory", 1, "message_pattern:out of memory");
    expect_exc("Error", NULL, "Resource exhausted: OOM", 1,
               "message_pattern:resource exhausted");
    expect_exc("X", NULL, "Failed to allocate 123 bytes", 1,
               "message_pattern:failed to allocate");
    expect_exc("X", NULL, "cudnn: Allocation failed", 1, "message_pattern:allocation failed");
    /* not OOM */
    expect_exc("ValueError", "builtins", "invalid literal for int() with base 10", 0, NULL);
    expect_exc("RuntimeError", "builtins", "CUDA error: device-side assert triggered", 0, NULL);
    /* an OutOfMemoryError is torch's, CuPy's or Java's; another's needs words */
    expect_exc("OutOfMemoryError", "acme.pool", "", 0, NULL);
    expect_exc(NULL, NULL, NULL, 0, NULL);
}

static void test_extra_types(void **state)
{
    (void)state;
    expect_exc("MemoryError", "builtins", "Unable to allocate 7.28 TiB for an array", 1,
               "MemoryError");
    expect_exc("std::bad_alloc", NULL, "std::bad_alloc", 1, "std::bad_alloc");
    expect_exc("XlaRuntimeError", "jaxlib.xla_extension",
               "RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.",
               1, "RESOURCE_EXHAUSTED");
    expect_exc("_ArrayMemoryError", "numpy._core._exceptions",
               "Unable to allocate 72.8 TiB for an array with shape (10000000000000,) and data "
               "type float64", 1, "MemoryError");
    expect_exc("OutOfMemoryError", "cupy.cuda.memory",
               "Out of memory allocating 1,073,741,824,000 bytes (allocated so far: 0 bytes).", 1,
               "cupy.OutOfMemoryError");
    expect_exc("OutOfMemoryError", "java.lang", "Java heap space", 1,
               "java.lang.OutOfMemoryError");
    /* an OutOfMemoryError of a library we do not know is judged by its words */
    expect_exc("OutOfMemoryError", "acme", "the widget pool is empty", 0, "not_oom");
}

static void test_return_codes(void **state)
{
    (void)state;
    gmp_classification c = gmp_classify_result(GMP_BACKEND_CUDA, GMP_API_CUDA_MALLOC, 2);
    assert_true(c.is_oom);
    assert_string_equal(c.reason, "cudaErrorMemoryAllocation");
    c = gmp_classify_result(GMP_BACKEND_CUDA, GMP_API_CU_MEM_ALLOC, 2);
    assert_true(c.is_oom);
    assert_string_equal(c.reason, "CUDA_ERROR_OUT_OF_MEMORY");
    c = gmp_classify_result(GMP_BACKEND_ROCM, GMP_API_HIP_MALLOC, 2);
    assert_true(c.is_oom);
    assert_string_equal(c.reason, "hipErrorOutOfMemory");
    c = gmp_classify_result(GMP_BACKEND_CPU, GMP_API_MALLOC, ENOMEM);
    assert_true(c.is_oom);
    assert_string_equal(c.reason, "ENOMEM");
    /* other errors and success are not OOM */
    assert_false(gmp_classify_result(GMP_BACKEND_CUDA, GMP_API_CUDA_MALLOC, 1).is_oom);
    assert_false(gmp_classify_result(GMP_BACKEND_CUDA, GMP_API_CUDA_MALLOC, 0).is_oom);
    assert_false(gmp_classify_result(GMP_BACKEND_ROCM, GMP_API_HIP_MALLOC, 1).is_oom);
    assert_false(gmp_classify_result(GMP_BACKEND_CPU, GMP_API_MALLOC, EINVAL).is_oom);
    assert_false(gmp_classify_result((gmp_backend)99, GMP_API_UNKNOWN, 2).is_oom);
}

/* A stderr line alone: only when it is about memory. */
/* Each API's owner, which names the driver's error and a bundle's
 * exception module: cudaX is the runtime's, cuX the driver's, hipX HIP's. */
static void test_api_owners(void **state)
{
    (void)state;
    for (unsigned api = 0; api < GMP_API_COUNT; api++) {
        const char *name = gmp_api_name(api), *owner = gmp_api_library(api);
        const char *want = !strncmp(name, "cuda", 4) ? "libcudart"
                           : !strncmp(name, "cu", 2)  ? "libcuda"
                           : !strncmp(name, "hip", 3) ? "libamdhip64"
                           : api == GMP_API_UNKNOWN || api == GMP_API_USER ? ""
                                                                            : "libc";
        if (strcmp(owner, want))
            fail_msg("%s belongs to '%s', not '%s'", name, want, owner);
    }
    assert_string_equal(gmp_api_library(GMP_API_COUNT + 7), "");
    assert_string_equal(gmp_classify_result(GMP_BACKEND_CUDA, GMP_API_CU_MEM_CREATE, 2).reason,
                        "CUDA_ERROR_OUT_OF_MEMORY");
    assert_string_equal(gmp_classify_result(GMP_BACKEND_CUDA, GMP_API_CUDA_MALLOC_ASYNC, 2).reason,
                        "cudaErrorMemoryAllocation");
}

static void test_oom_lines(void **state)
{
    (void)state;
    static const struct { const char *line, *want; } cases[] = {
        {"torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
         "cuda out of memory"},
        {"W bfc_allocator.cc:479] Allocator (GPU_0_bfc) ran out of memory trying to allocate "
         "20.00GiB", "out of memory"},
        {"RESOURCE_EXHAUSTED: Out of memory while trying to allocate 17179869184 bytes.",
         "out of memory"},
        {"OOM when allocating tensor with shape[8192,8192]", "oom when allocating"},
        {"E xla: failed to allocate 17.18G (17179869184 bytes) from device", "failed to allocate"},
        {"Failed to allocate request for 1.20GiB (1288490188B) on device ordinal 0",
         "failed to allocate"},
        {"numpy.core._exceptions._ArrayMemoryError: Unable to allocate 72.8 TiB for an array",
         "unable to allocate"},
        {"MemoryError", "MemoryError"},
        {"terminate called after throwing an instance of 'std::bad_alloc'", "std::bad_alloc"},
        {"tensorflow.python.framework.errors_impl.ResourceExhaustedError: see above",
         "ResourceExhaustedError"},
        {"fork: Cannot allocate memory", "cannot allocate memory"},
        /* the frameworks' own words, as they print them */
        {"numpy._core._exceptions._ArrayMemoryError: Unable to allocate 72.8 TiB for an array "
         "with shape (10000000000000,) and data type float64", "unable to allocate"},
        {"RuntimeError: [enforce fail at alloc_cpu.cpp:117] data. DefaultCPUAllocator: not "
         "enough memory: you tried to allocate 80000000000000 bytes.", "you tried to allocate"},
        {"RuntimeError: [enforce fail at alloc_cpu.cpp:73] . DefaultCPUAllocator: can't "
         "allocate memory: you tried to allocate 80000000000000 bytes. Error code 12 (Cannot "
         "allocate memory)", "cannot allocate memory"},
        {"cupy.cuda.memory.OutOfMemoryError: Out of memory allocating 1,073,741,824,000 bytes "
         "(allocated so far: 0 bytes).", "out of memory"},
        {"jaxlib.xla_extension.XlaRuntimeError: RESOURCE_EXHAUSTED: Out of memory while "
         "trying to allocate 17179869184 bytes.", "out of memory"},
        {"tensorflow.python.framework.errors_impl.ResourceExhaustedError: OOM when allocating "
         "tensor with shape[100000,100000] and type float on /job:localhost/replica:0/task:0/"
         "device:GPU:0 by allocator GPU_0_bfc", "oom when allocating"},
        {"  what():  std::bad_alloc", "std::bad_alloc"},
        {"Exception in thread \"main\" java.lang.OutOfMemoryError: Java heap space",
         "java.lang.outofmemoryerror"},
        {"fatal error: runtime: out of memory", "out of memory"},
        {"memory allocation of 1099511627776 bytes failed", "memory allocation of"},
        {"hipErrorOutOfMemory: HIP out of memory", "hip out of memory"},
        {"RuntimeError: unable to allocate shared memory(shm) for file "
         "</torch_18429_4104630655_0>: No space left on device (28)",
         "unable to allocate shared memory"},
        /* the device's words where the line's second "out of memory" follows them */
        {"retrying after out of memory: CUDA out of memory. Tried to allocate 20 MiB",
         "cuda out of memory"},
        {"pool out of memory, then: HIP out of memory", "hip out of memory"},
        {"cuda: out of memory", "out of memory"},
        /* not about memory */
        {"google.api_core.exceptions.ResourceExhausted: 429 Resource exhausted: Quota exceeded",
         NULL},
        {"grpc: StatusCode.RESOURCE_EXHAUSTED: too many requests", NULL},
        {"scheduler: failed to allocate resources for job 12", NULL},
        {"port allocation failed", NULL},
        {"memory allocation of resources to the pool failed", NULL},
        {"you tried to allocate a slot twice", NULL},
        {"    raise MemoryError", NULL},
        /* TensorFlow's warning in jobs that run on */
        {"2021-11-05 09:30:48.424570: W tensorflow/core/common_runtime/bfc_allocator.cc:271] "
         "Allocator (GPU_0_bfc) ran out of memory trying to allocate 2.55GiB with "
         "freed_by_count=0. The caller indicates that this is not a failure, but may mean that "
         "there could be performance gains if more memory were available.", NULL},
        {"W tensorflow/core/common_runtime/bfc_allocator.cc:217] Ran out of memory trying to "
         "allocate 1.17GiB. The caller indicates that this is not a failure, but may mean that "
         "there could be performance gains if more memory is available.", NULL},
        {"warning: something else entirely", NULL},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const char *got = gmp_classify_oom_line(cases[i].line);
        if (cases[i].want ? !got || strcmp(got, cases[i].want) : got != NULL)
            fail_msg("'%s': want %s, got %s", cases[i].line, cases[i].want ? cases[i].want : "none",
                     got ? got : "none");
    }
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_oom_lines),
        cmocka_unit_test(test_seed_cases),
        cmocka_unit_test(test_extra_types),
        cmocka_unit_test(test_return_codes),
        cmocka_unit_test(test_api_owners),
    };
    return cmocka_run_group_tests_name("classify", tests, NULL, NULL);
}
