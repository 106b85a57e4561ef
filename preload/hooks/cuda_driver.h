/*
 * cuda_driver.h — what dlsym.c and cupti.c need of the driver family.
 */
#ifndef GMP_CUDA_DRIVER_H
#define GMP_CUDA_DRIVER_H

#include "gpu_family.h"
#include "gpu_types.h"

/* The driver family (libcuda): the current device is cuCtxGetDevice's. */
GMP_HIDDEN extern gmp_gpu_family gmp_cuda_driver;

/* Where cuMemCreate puts its memory, from its properties' location (a
 * CUmemLocation, laid out as gmp_cu_mem_location; NULL: no properties): a
 * device index, GMP_ON_HOST for host and host-NUMA memory, else the
 * current device.  Its row of the driver table asks it, for the interposer
 * and for CUPTI alike. */
GMP_HIDDEN int gmp_cu_location_where(const void *location);

/* >= 0 when dlsym of `name` is routed (one of our exported driver names). */
GMP_HIDDEN int gmp_cuda_routed_name(const char *name);

/* For dlsym: `real` is what the real dlsym returned for the routed `name`;
 * our wrapper calling exactly it, or `real` itself when it is one of our
 * own hooks or every wrapper of that name already calls another function. */
GMP_HIDDEN void *gmp_cuda_route_by_name(const char *name, void *real);

#endif
