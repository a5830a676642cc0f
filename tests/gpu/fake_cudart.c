/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for libcudart, for tests only (never installed): the dozen CUDA runtime
 * entry points that libkvblk and gpu_check resolve, over host memory. "Device memory" is
 * mmap'd host memory handed out by cudaMalloc; cudaMemcpyAsync refuses host sources that
 * were not page-locked with cudaHostRegister and destinations that are not device memory,
 * so that a test through it checks that the staged path copies from its pinned bounce
 * buffers into the registered device range. Point KVBLK_CUDART at this library.
 * Signatures follow NVIDIA's CUDA Runtime API reference; error numbers: 1 invalid value,
 * 2 memory allocation, 101 invalid device.
 */
#include <pthread.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#define MAX_RANGES 256

struct range {
	uintptr_t start;
	size_t len;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct range device_ranges[MAX_RANGES];
static struct range pinned_ranges[MAX_RANGES];

struct fake_attrs {
	int type;
	int device;
	void *device_pointer;
	void *host_pointer;
};

static int add_range(struct range *t, void *p, size_t len)
{
	int i;

	for (i = 0; i < MAX_RANGES; i++) {
		if (!t[i].start) {
			t[i].start = (uintptr_t)p;
			t[i].len = len;
			return 0;
		}
	}
	return 2;
}

static int drop_range(struct range *t, void *p, size_t *len)
{
	int i;

	for (i = 0; i < MAX_RANGES; i++) {
		if (t[i].start && t[i].start == (uintptr_t)p) {
			if (len)
				*len = t[i].len;
			t[i].start = 0;
			return 0;
		}
	}
	return 1;
}

/* 1 if [p, p+len) lies inside one range of @t. */
static int inside(const struct range *t, const void *p, size_t len)
{
	uintptr_t a = (uintptr_t)p;
	int i;

	for (i = 0; i < MAX_RANGES; i++)
		if (t[i].start && a >= t[i].start && a + len <= t[i].start + t[i].len)
			return 1;
	return 0;
}

int cudaGetDeviceCount(int *count)
{
	const char *n = getenv("FAKE_CUDART_DEVICES");

	*count = n ? atoi(n) : 1;
	return 0;
}

int cudaGetDevice(int *device)
{
	*device = 0;
	return 0;
}

int cudaSetDevice(int device)
{
	return device == 0 ? 0 : 101;
}

int cudaRuntimeGetVersion(int *version)
{
	*version = 0;
	return 0;
}

const char *cudaGetErrorString(int err)
{
	switch (err) {
	case 0:
		return "no error";
	case 1:
		return "invalid argument (fake cudart)";
	case 2:
		return "out of memory (fake cudart)";
	case 101:
		return "invalid device ordinal (fake cudart)";
	default:
		return "unknown error (fake cudart)";
	}
}

int cudaMalloc(void **p, size_t size)
{
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int rc;

	if (m == MAP_FAILED)
		return 2;
	pthread_mutex_lock(&lock);
	rc = add_range(device_ranges, m, size);
	pthread_mutex_unlock(&lock);
	if (rc) {
		munmap(m, size);
		return rc;
	}
	*p = m;
	return 0;
}

int cudaFree(void *p)
{
	size_t len = 0;
	int rc;

	pthread_mutex_lock(&lock);
	rc = drop_range(device_ranges, p, &len);
	pthread_mutex_unlock(&lock);
	if (!rc)
		munmap(p, len);
	return rc;
}

int cudaPointerGetAttributes(struct fake_attrs *a, const void *p)
{
	pthread_mutex_lock(&lock);
	memset(a, 0, sizeof(*a));
	if (inside(device_ranges, p, 1)) {
		a->type = 2;
		a->device_pointer = (void *)p;
	} else if (inside(pinned_ranges, p, 1)) {
		a->type = 1;
		a->host_pointer = (void *)p;
	}
	pthread_mutex_unlock(&lock);
	return 0;
}

int cudaHostRegister(void *p, size_t size, unsigned int flags)
{
	int rc;

	(void)flags;
	pthread_mutex_lock(&lock);
	rc = add_range(pinned_ranges, p, size);
	pthread_mutex_unlock(&lock);
	return rc;
}

int cudaHostUnregister(void *p)
{
	int rc;

	pthread_mutex_lock(&lock);
	rc = drop_range(pinned_ranges, p, NULL);
	pthread_mutex_unlock(&lock);
	return rc;
}

int cudaStreamCreateWithFlags(void **stream, unsigned int flags)
{
	(void)flags;
	*stream = malloc(1);
	return *stream ? 0 : 2;
}

int cudaStreamDestroy(void *stream)
{
	free(stream);
	return 0;
}

int cudaStreamQuery(void *stream)
{
	(void)stream;
	return 0;
}

int cudaStreamSynchronize(void *stream)
{
	(void)stream;
	return 0;
}

int cudaDeviceSynchronize(void)
{
	return 0;
}

/* Host-to-device from pinned memory only (what the staged path must do). */
int cudaMemcpyAsync(void *dst, const void *src, size_t n, int kind, void *stream)
{
	int ok;

	(void)stream;
	pthread_mutex_lock(&lock);
	ok = (kind == 1 || kind == 4) && inside(device_ranges, dst, n) && inside(pinned_ranges, src, n);
	pthread_mutex_unlock(&lock);
	if (!ok)
		return 1;
	memcpy(dst, src, n);
	return 0;
}

int cudaMemcpy(void *dst, const void *src, size_t n, int kind)
{
	(void)kind;
	memcpy(dst, src, n);
	return 0;
}

int cudaMemset(void *p, int value, size_t n)
{
	int ok;

	pthread_mutex_lock(&lock);
	ok = inside(device_ranges, p, n);
	pthread_mutex_unlock(&lock);
	if (!ok)
		return 1;
	memset(p, value, n);
	return 0;
}
