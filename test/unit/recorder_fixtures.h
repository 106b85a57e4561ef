/*
 * recorder_fixtures.h — what the recorder's unit tests start from: a
 * recorder writing into a scratch directory, a few device allocations
 * recorded, and the request of a failed cudaMalloc.
 */
#ifndef GMP_TEST_RECORDER_FIXTURES_H
#define GMP_TEST_RECORDER_FIXTURES_H

#include "gpumemprof.h"
#include "bundle.h"

#include <stdio.h>

static inline gmp_recorder *make_recorder(const char *scratch, uint32_t buffer, uint32_t max_dumps)
{
    gmp_config cfg;
    gmp_config_defaults(&cfg);
    snprintf(cfg.dump_dir, sizeof cfg.dump_dir, "%s/dumps", scratch);
    snprintf(cfg.run_dir, sizeof cfg.run_dir, "%s/run", scratch);
    snprintf(cfg.context, sizeof cfg.context, "unit-test");
    snprintf(cfg.metadata_json, sizeof cfg.metadata_json,
             "{\"batch_size\":32,\"model_name\":\"resnet50\"}");
    cfg.buffer_size = buffer;
    cfg.max_dumps = max_dumps;
    return gmp_recorder_create(&cfg);
}

static inline void record_allocs(gmp_recorder *rec, int n)
{
    uint64_t in_use = 0;
    for (int i = 0; i < n; i++) {
        in_use += 1 << 20;
        gmp_event ev = {.type = GMP_EV_ALLOC, .backend = GMP_BACKEND_CUDA, .device = 0,
                        .api = GMP_API_CUDA_MALLOC, .address = 0x7f0000000000ull + (uint64_t)i,
                        .size = 1 << 20, .in_use = in_use};
        assert_int_equal(gmp_record(rec, &ev), 0);
    }
}

static const gmp_dump_request cuda_oom = {
    .reason = "cudaErrorMemoryAllocation",
    .exception_type = "cudaErrorMemoryAllocation",
    .exception_module = "libcudart",
    .exception_message = "cudaMalloc could not allocate 2 GiB on device 0",
    .backend = GMP_BACKEND_CUDA,
    .confirmed_by = "second_failure",
    .failed = {.present = 1, .api = GMP_API_CUDA_MALLOC, .size = 2ull << 30, .device = 0,
               .code = 2},
    .recovered_episodes = 1,
};

#endif
