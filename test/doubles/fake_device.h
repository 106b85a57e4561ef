/*
 * fake_device.h — the device memory of the GPU test doubles: each device
 * has a capacity (GMP_FAKE_DEVICE_BYTES, default 1 GiB; GMP_FAKE_DEVICE_COUNT
 * devices, default 2), an allocation that does not fit fails with code 2
 * (the OOM code of cudart, the driver and HIP alike) and leaves the output
 * alone, frees give memory back.  Addresses are fake: never dereference.
 * GMP_FAKE_OTHER_BYTES is memory other processes hold on every device
 * (gone from free memory); GMP_FAKE_MAX_BLOCK the largest contiguous block
 * (a larger request fails even with free memory to spare: fragmentation).
 * An address just freed is handed out again for a request of the same
 * rounded size, newest first, as the CUDA driver does (a free then an
 * allocation of the same size gives the same pointer back).
 * Included by one double each (static state per library).
 */
#ifndef FAKE_DEVICE_H
#define FAKE_DEVICE_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#define EXPORT __attribute__((visibility("default")))
#define FAKE_MAX_LIVE 65536
#define FAKE_MAX_DEVICES 8

enum { FAKE_OK = 0, FAKE_INVALID_VALUE = 1, FAKE_OUT_OF_MEMORY = 2 };

static pthread_mutex_t fake_lock = PTHREAD_MUTEX_INITIALIZER;
static struct { uintptr_t ptr; size_t size; int device; } fake_live[FAKE_MAX_LIVE];
static size_t fake_used[FAKE_MAX_DEVICES];
static uintptr_t fake_next_address = 0x7f0000000000;
#define FAKE_MAX_FREED 64
static struct { uintptr_t ptr, span; } fake_freed[FAKE_MAX_FREED];
static int fake_freed_count;

/* The address range an allocation of size takes, a 1 MiB gap included. */
static inline uintptr_t fake_span(size_t size)
{
    return ((size + 0xfffff) & ~(uintptr_t)0xfffff) + 0x100000;
}

/* Under fake_lock: a freed range of exactly span, else a new one. */
static inline uintptr_t fake_address(uintptr_t span)
{
    for (int k = fake_freed_count - 1; k >= 0; k--) {
        if (fake_freed[k].span == span) {
            uintptr_t at = fake_freed[k].ptr;
            fake_freed[k] = fake_freed[--fake_freed_count];
            return at;
        }
    }
    uintptr_t at = fake_next_address;
    fake_next_address += span;
    return at;
}

static inline size_t fake_capacity(void)
{
    const char *s = getenv("GMP_FAKE_DEVICE_BYTES");
    return s ? strtoull(s, NULL, 10) : (size_t)1 << 30;
}

static inline size_t fake_env_bytes(const char *name, size_t otherwise)
{
    const char *s = getenv(name);
    return s && *s ? strtoull(s, NULL, 10) : otherwise;
}

static inline int fake_device_count(void)
{
    const char *s = getenv("GMP_FAKE_DEVICE_COUNT");
    int n = s ? atoi(s) : 2;
    return n < 1 ? 1 : n > FAKE_MAX_DEVICES ? FAKE_MAX_DEVICES : n;
}

/* A new live allocation of `size` on `device` at *out, or OUT_OF_MEMORY. */
static inline int fake_alloc(int device, uintptr_t *out, size_t size)
{
    if (!out || device < 0 || device >= FAKE_MAX_DEVICES)
        return FAKE_INVALID_VALUE;
    size_t other = fake_env_bytes("GMP_FAKE_OTHER_BYTES", 0);
    pthread_mutex_lock(&fake_lock);
    size_t room = fake_capacity() - fake_used[device];
    if (size > (room > other ? room - other : 0) ||
        size > fake_env_bytes("GMP_FAKE_MAX_BLOCK", (size_t)-1)) {
        pthread_mutex_unlock(&fake_lock);
        return FAKE_OUT_OF_MEMORY;
    }
    for (int i = 0; i < FAKE_MAX_LIVE; i++) {
        if (!fake_live[i].ptr) {
            fake_live[i].ptr = fake_address(fake_span(size));
            fake_live[i].size = size;
            fake_live[i].device = device;
            fake_used[device] += size;
            *out = fake_live[i].ptr;
            pthread_mutex_unlock(&fake_lock);
            return FAKE_OK;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return FAKE_OUT_OF_MEMORY;
}

static inline int fake_free(uintptr_t p)
{
    if (!p)
        return FAKE_OK;
    pthread_mutex_lock(&fake_lock);
    for (int i = 0; i < FAKE_MAX_LIVE; i++) {
        if (fake_live[i].ptr == p) {
            fake_used[fake_live[i].device] -= fake_live[i].size;
            if (fake_freed_count < FAKE_MAX_FREED) {
                fake_freed[fake_freed_count].ptr = p;
                fake_freed[fake_freed_count++].span = fake_span(fake_live[i].size);
            }
            fake_live[i].ptr = 0;
            pthread_mutex_unlock(&fake_lock);
            return FAKE_OK;
        }
    }
    pthread_mutex_unlock(&fake_lock);
    return FAKE_INVALID_VALUE;
}

static inline size_t fake_free_bytes(int device)
{
    size_t other = fake_env_bytes("GMP_FAKE_OTHER_BYTES", 0);
    pthread_mutex_lock(&fake_lock);
    size_t n = fake_capacity() - fake_used[device];
    pthread_mutex_unlock(&fake_lock);
    return n > other ? n - other : 0;
}

#endif
