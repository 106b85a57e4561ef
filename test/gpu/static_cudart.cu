/*
 * static_cudart.cu — built by nvcc with its default, static cudart: it
 * reaches the driver only through dlopen, dlsym and cuGetProcAddress.
 * Allocates 256 MiB until cudaMalloc fails; prints what it held and the
 * error; exits 3 on cudaErrorMemoryAllocation, 4 on any other error.
 */
#include <cuda_runtime.h>
#include <stdio.h>

int main(void)
{
    void *p = NULL;
    size_t held = 0;
    cudaError_t e;
    while ((e = cudaMalloc(&p, (size_t)256 << 20)) == cudaSuccess)
        held += (size_t)256 << 20;
    printf("held %zu error %d %s\n", held, (int)e, cudaGetErrorName(e));
    return e == cudaErrorMemoryAllocation ? 3 : 4;
}
