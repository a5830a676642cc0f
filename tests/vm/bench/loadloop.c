/* SPDX-License-Identifier: MIT */
/*
 * kvblk_loadloop: load the first BYTES of DEVICE over and over with one libkvblk
 * backend, nothing else.
 *
 * usage: kvblk_loadloop DEVICE BACKEND BYTES OBJECT_BYTES BATCH QD CMD SECONDS
 *                       [WORKERS [CHECK [MODE]]]
 *
 * The driver of make vmbench-cpu's libkvblk legs (guest-cpu-bench.sh) and of the load path
 * alone in make vmbench (guest-bench.sh): it neither writes nor verifies in its loop, so a
 * window of the guest's CPU time, or perf record around it, sees the load path and almost
 * nothing of its own (it replaced loadloop.py, whose interpreter was 19% of the samples of
 * the pipeline leg at one CPU).
 *
 * One registered buffer of K x BATCH x OBJECT_BYTES (K = 1, or the layers of MODE pipe:K),
 * aligned to 2 MiB and madvise(MADV_HUGEPAGE)d, as kmod_bench -H and fio's f4/f5 points
 * (--iomem_align=2m) are: transparent huge pages where the kernel has them, so that no leg
 * pays for 4 KiB pages that another does not (from 6.11 io_uring coalesces such a fixed
 * buffer into one bio_vec per huge page); every batch's descriptors are built before the first call; objects of OBJECT_BYTES at
 * consecutive offsets, BATCH per call, wrapping at BYTES. After one warm-up call, calls back
 * to back for SECONDS (the run ends earlier only on SIGTERM or an error).
 *   WORKERS  kvblk_open_opts.workers (threadpool threads, uring rings); 0: the default.
 *   CHECK    1: the warm-up call's objects are compared with pread(2) of DEVICE (exit 1
 *            when one differs).
 *   MODE     "sync" (default): one blocking kvblk_load_many() per batch. "pipe:K": an
 *            engine's layer pipeline: K batches outstanding through kvblk_submit(), each into
 *            its own part of the buffer; the thread sleeps in poll(2) on kvblk_event_fd(),
 *            takes what completed with kvblk_reap() and submits each completed layer again.
 * Prints GB/s (10^9 bytes) after the window. Exit: 0, 1 on any error (kvblk_last_error()).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <kvblk/kvblk.h>
#include <poll.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench_buf.h"

struct loop {
	kvblk_dev *dev;
	unsigned char *mem;
	struct kvblk_desc *descs;	/* [slot][batch index][object], built up front */
	uint64_t obj;
	uint32_t batch, nbatches, slots;
};

static int die(const char *what, int rc)
{
	fprintf(stderr, "kvblk_loadloop: %s: %d (%s): %s\n", what, rc, strerror(rc < 0 ? -rc : rc),
		kvblk_last_error());
	exit(1);
}

static struct kvblk_desc *batch_of(const struct loop *l, uint32_t slot, uint64_t n)
{
	return l->descs + ((uint64_t)slot * l->nbatches + n % l->nbatches) * l->batch;
}

/* Loads in SECS with one blocking call per batch; returns the bytes, *dt the window. */
static uint64_t run_sync(const struct loop *l, double secs, double *dt)
{
	struct kvblk_result *res = calloc(l->batch, sizeof(*res));
	uint64_t done = 0, n = 1;	/* batch 0 was the warm-up */
	double t0 = bench_now(), t;
	int rc;

	if (!res)
		die("calloc", -ENOMEM);
	do {
		rc = kvblk_load_many(l->dev, batch_of(l, 0, n++), l->batch, res, NULL);
		if (rc != (int)l->batch)
			die("kvblk_load_many", rc);
		done += l->batch * l->obj;
		t = bench_now();
	} while (t - t0 < secs);
	*dt = t - t0;
	free(res);
	return done;
}

/* Loads in SECS with LAYERS batches outstanding (after one warm-up round of completions). */
static uint64_t run_pipeline(const struct loop *l, double secs, double *dt)
{
	struct kvblk_submit_opts so;
	struct kvblk_cqe cqes[64];
	struct pollfd pfd = { .events = POLLIN };
	uint64_t ticket, done = 0, nxt = 0;
	double t0 = 0;
	int rc;

	pfd.fd = kvblk_event_fd(l->dev);
	if (pfd.fd < 0)
		die("kvblk_event_fd", pfd.fd);
	kvblk_submit_opts_init(&so, sizeof(so));
	for (uint32_t s = 0; s < l->slots; s++) {
		so.user_data = s;
		rc = kvblk_submit(l->dev, batch_of(l, s, nxt++), l->batch, &so, &ticket);
		if (rc < 0)
			die("kvblk_submit", rc);
	}
	for (;;) {
		int n;

		if (poll(&pfd, 1, 10000) <= 0)
			die("poll on kvblk_event_fd (no completion in 10 s)", -ETIMEDOUT);
		n = kvblk_reap(l->dev, cqes, l->slots < 64 ? l->slots : 64, 0, 0);
		if (n < 0)
			die("kvblk_reap", n);
		for (int i = 0; i < n; i++) {
			const struct kvblk_cqe *c = &cqes[i];

			if (!(c->flags & KVBLK_CQE_BATCH))
				continue;
			if (c->status || c->failed) {
				fprintf(stderr, "kvblk_loadloop: batch %llu: status %d, %u objects failed\n",
					(unsigned long long)c->ticket, c->status, c->failed);
				exit(1);
			}
			if (t0 == 0)	/* the first completion ends the warm-up */
				t0 = bench_now();
			else
				done += l->batch * l->obj;
			so.user_data = c->user_data;
			rc = kvblk_submit(l->dev, batch_of(l, (uint32_t)c->user_data, nxt++), l->batch,
					  &so, &ticket);
			if (rc < 0)
				die("kvblk_submit", rc);
		}
		if (t0 != 0 && bench_now() - t0 >= secs)
			break;
	}
	*dt = bench_now() - t0;
	return done;
}

int main(int argc, char **argv)
{
	struct kvblk_open_opts o;
	struct loop l = { 0 };
	const char *dev, *backend, *mode = "sync";
	uint64_t total, objects, len, done;
	struct bench_buf bb = { 0 };
	uint32_t qd, buf, workers = 0;
	double secs, dt;
	int check = 0, rc, b;

	if (argc < 9) {
		fprintf(stderr, "usage: %s DEVICE BACKEND BYTES OBJECT_BYTES BATCH QD CMD SECONDS "
			"[WORKERS [CHECK [MODE]]]\n", argv[0]);
		return 2;
	}
	dev = argv[1];
	backend = argv[2];
	total = strtoull(argv[3], NULL, 0);
	l.obj = strtoull(argv[4], NULL, 0);
	l.batch = (uint32_t)strtoul(argv[5], NULL, 0);
	qd = (uint32_t)strtoul(argv[6], NULL, 0);
	secs = strtod(argv[8], NULL);
	if (argc > 9)
		workers = (uint32_t)strtoul(argv[9], NULL, 0);
	if (argc > 10)
		check = !strcmp(argv[10], "1");
	if (argc > 11)
		mode = argv[11];
	l.slots = 1;
	if (!strncmp(mode, "pipe:", 5)) {
		l.slots = (uint32_t)strtoul(mode + 5, NULL, 0);
		if (l.slots < 1 || l.slots > 64) {
			fprintf(stderr, "kvblk_loadloop: MODE %s: want pipe:K, 1 <= K <= 64\n", mode);
			return 2;
		}
	} else if (strcmp(mode, "sync")) {
		fprintf(stderr, "kvblk_loadloop: MODE %s: want sync or pipe:K\n", mode);
		return 2;
	}
	if (!l.obj || !l.batch || !qd || total < l.obj) {
		fprintf(stderr, "kvblk_loadloop: want OBJECT_BYTES, BATCH, QD > 0 and BYTES >= OBJECT_BYTES\n");
		return 2;
	}
	b = kvblk_backend_from_name(backend);
	if (b < 0)
		die(backend, b);

	kvblk_open_opts_init(&o, sizeof(o));
	o.backend = (uint32_t)b;
	o.queue_depth = qd;
	o.max_cmd_bytes = strtoull(argv[7], NULL, 0);
	o.workers = workers;
	rc = kvblk_open(dev, &o, &l.dev);
	if (rc < 0)
		die("kvblk_open", rc);
	/*
	 * Private anonymous memory, as an application's buffers, touched before registration
	 * (shared memory would make the per-command pinning of the unregistered paths slower).
	 */
	len = (uint64_t)l.slots * l.batch * l.obj;
	rc = bench_buf_alloc(&bb, len, "kvblk_loadloop");
	if (rc < 0)
		die("mmap", rc);
	l.mem = bb.mem;
	rc = kvblk_register_buffer(l.dev, KVBLK_MEM_HOST, l.mem, len, &buf);
	if (rc < 0)
		die("kvblk_register_buffer", rc);

	objects = total / l.obj;
	l.nbatches = objects / l.batch ? (uint32_t)(objects / l.batch) : 1;
	l.descs = calloc((size_t)l.slots * l.nbatches * l.batch, sizeof(*l.descs));
	if (!l.descs)
		die("calloc", -ENOMEM);
	for (uint32_t s = 0; s < l.slots; s++)
		for (uint32_t j = 0; j < l.nbatches; j++)
			for (uint32_t k = 0; k < l.batch; k++)
				batch_of(&l, s, j)[k] = (struct kvblk_desc){
					.offset = (((uint64_t)j * l.batch + k) % objects) * l.obj,
					.length = l.obj,
					.addr = ((uint64_t)s * l.batch + k) * l.obj,
					.buf_id = buf,
					.tag = k,
				};

	/* Warm-up (page tables, kernel allocations), and the data check. */
	{
		struct kvblk_result *res = calloc(l.batch, sizeof(*res));
		unsigned char *want = malloc(l.obj);
		int fd = check ? open(dev, O_RDONLY) : -1;

		if (!res || !want)
			die("calloc", -ENOMEM);
		rc = kvblk_load_many(l.dev, batch_of(&l, 0, 0), l.batch, res, NULL);
		if (rc != (int)l.batch)
			die("kvblk_load_many (warm-up)", rc);
		if (check && fd < 0)
			die(dev, -errno);
		for (uint32_t k = 0; check && k < l.batch; k++) {
			uint64_t off = batch_of(&l, 0, 0)[k].offset;

			if (pread(fd, want, l.obj, (off_t)off) != (ssize_t)l.obj ||
			    memcmp(want, l.mem + (uint64_t)k * l.obj, l.obj)) {
				fprintf(stderr, "kvblk_loadloop: %s: object at %llu differs from pread\n",
					backend, (unsigned long long)off);
				return 1;
			}
		}
		if (fd >= 0)
			close(fd);
		free(want);
		free(res);
	}

	if (!strcmp(mode, "sync")) {
		done = run_sync(&l, secs, &dt);
		printf("%s: %.3f GB/s (%llu MiB in %.2f s)\n", backend, done / dt / 1e9,
		       (unsigned long long)(done >> 20), dt);
	} else {
		done = run_pipeline(&l, secs, &dt);
		printf("%s pipe:%u: %.3f GB/s (%llu MiB in %.2f s)\n", backend, l.slots,
		       done / dt / 1e9, (unsigned long long)(done >> 20), dt);
	}
	kvblk_close(l.dev);
	free(l.descs);
	bench_buf_free(&bb);
	return 0;
}
