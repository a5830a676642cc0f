// SPDX-License-Identifier: GPL-2.0
/*
 * kvblk_uring_test - IORING_OP_URING_CMD on /dev/kvblk (KVBLK_FEAT_URING_CMD).
 *
 * Against the VM's emulated namespace ($KVBLK_TEST_DEVICE, default
 * /dev/nvme0n1), kvblk.ko loaded:
 *   feature_bit       the bit matches what the module answers: -ENOTTY for
 *                     another cmd_op, -EINVAL for flags (else -EOPNOTSUPP);
 *                     an IOPOLL ring -EOPNOTSUPP; another process -EBADFD
 *   many_in_flight    32 SQEs on one ring, each a batch of 8 objects, PRP and
 *                     block-layer engines: every CQE's res = nr_descs, every
 *                     result 0/length, bytes equal pread(O_DIRECT), canaries
 *   bad_descriptor    a rejected batch's CQE, bad_index and results equal the
 *                     ioctl's for the same batch; nothing read or submitted
 *   teardown_*        a child that sees commands of its batches in flight
 *                     kills itself (SIGKILL), or closes its ring and
 *                     /dev/kvblk fds and lives on: module references and
 *                     FOLL_PIN pages back to their baselines; the same
 *                     with per-object batches (7.2), whose records' buffers
 *                     the child gives back as it reaps them
 *   per_object_*      KVBLK_URING_F_PER_OBJECT: without
 *                     KVBLK_FEAT_URING_PER_OBJECT (6.1, 6.12) the flag is
 *                     -EOPNOTSUPP; with it (7.2) a plain SQE with the flag,
 *                     or a multishot one without, is -EINVAL; a batch of N
 *                     descriptors (several commands each) posts exactly N
 *                     CQEs with IORING_CQE_F_MORE, each record's index,
 *                     tag, status and bytes equal to the results array and
 *                     its object's bytes already equal to pread(O_DIRECT)
 *                     when its CQE arrives, then one final CQE; with 5
 *                     buffers for N records exactly 5 come, the final CQE
 *                     and the results complete; on the blkdebug variant a
 *                     descriptor over the bad LBA gets its own error record
 *
 * KVBLK_VM_BAD_BYTE_OFFSET (blkdebug variant): the device byte offset of
 * an LBA that fails every read; random descriptors avoid it.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <liburing.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <linux/kvblk.h>

/* The 6.1 harness has unused parameters of its own. */
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wunused-parameter"
#include "kselftest_harness.h"
#pragma GCC diagnostic pop

#include "kvblk_utils.h"

#ifndef IORING_URING_CMD_MULTISHOT	/* 6.1's uapi header predates it */
#define IORING_URING_CMD_MULTISHOT	(1U << 1)
#endif

#define NR_BATCHES	32
#define NR_OBJS		8
#define BUF_BYTES	(32ULL << 20)
#define TD_BUF_BYTES	(64ULL << 20)
#define CANARY		0x5a

static uint64_t rnd_state = 0x9e3779b97f4a7c15ULL;

static uint64_t rnd(void)
{
	rnd_state ^= rnd_state << 13;
	rnd_state ^= rnd_state >> 7;
	rnd_state ^= rnd_state << 17;
	return rnd_state;
}

static long long settle(long long (*fn)(void), long long want, unsigned int ms)
{
	uint64_t end = now_ms() + ms;
	long long v;

	while ((v = fn()) != want && now_ms() < end)
		usleep(20000);
	return v;
}

static __u64 features(void)
{
	__u64 f = 0;
	int kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);

	if (kfd >= 0) {
		if (ioctl(kfd, KVBLK_IOC_GET_FEATURES, &f))
			f = 0;
		close(kfd);
	}
	return f;
}

struct kctx {
	int kfd;
	struct kvblk_attach a;
	__u32 buf_id;
	unsigned char *mem;
	size_t len;
};

/* A context attached to the device (@flags) with @len bytes registered. */
static int kctx_open(struct kctx *c, __u32 flags, size_t len)
{
	struct kvblk_buf_reg r = { .size = sizeof(r), .kind = KVBLK_MEM_HOST };
	int bfd, ret = 0;

	memset(c, 0, sizeof(*c));
	c->a.size = sizeof(c->a);
	c->a.flags = flags;
	c->kfd = open(KVBLK_NODE, O_RDWR | O_CLOEXEC);
	if (c->kfd < 0)
		return -errno;
	bfd = open(test_device(), O_RDONLY | O_CLOEXEC);
	if (bfd < 0)
		return -errno;
	c->a.bdev_fd = bfd;
	if (ioctl(c->kfd, KVBLK_IOC_ATTACH, &c->a))
		ret = -errno;
	close(bfd);
	if (ret)
		return ret;
	c->mem = mmap(NULL, len, PROT_READ | PROT_WRITE,
		      MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
	if (c->mem == MAP_FAILED)
		return -ENOMEM;
	c->len = len;
	r.addr = (uintptr_t)c->mem;
	r.len = len;
	if (ioctl(c->kfd, KVBLK_IOC_REGISTER_BUFFER, &r))
		return -errno;
	c->buf_id = r.buf_id;
	return 0;
}

static void kctx_close(struct kctx *c)
{
	if (c->kfd >= 0)
		close(c->kfd);
	if (c->mem && c->mem != MAP_FAILED)
		munmap(c->mem, c->len);
}

/* One batch: its descriptors, results and header. */
struct batch {
	struct kvblk_io_desc d[NR_OBJS];
	struct kvblk_desc_result res[NR_OBJS];
	struct kvblk_load_many lm;
};

/*
 * The header of a batch of @n descriptors @d, results into @res (@cap
 * entries, all set to 0x77 first).
 */
static void lm_header(struct kvblk_load_many *lm, struct kvblk_io_desc *d,
		      struct kvblk_desc_result *res, __u32 n, __u32 cap)
{
	lm_init(lm, d, res, n);
	memset(res, 0x77, cap * sizeof(*res));
}

static void batch_header(struct batch *b, __u32 n)
{
	lm_header(&b->lm, b->d, b->res, n, NR_OBJS);
}

/* The blkdebug variant's bad byte offset, or -1. */
static long long bad_offset(void)
{
	const char *s = getenv("KVBLK_VM_BAD_BYTE_OFFSET");

	return s && *s ? strtoll(s, NULL, 0) : -1;
}

/*
 * @n objects of random LBA-aligned device offsets and lengths (up to
 * @max_obj) at random aligned places of the buffer window [@win, @win +
 * @win_len), gaps between them; none covers the blkdebug variant's bad LBA.
 */
static void descs_random(struct kvblk_io_desc *d, const struct kctx *c, __u32 n,
			 __u64 win, __u64 win_len, __u64 max_obj)
{
	__u64 lba = c->a.lba_size, align = c->a.buf_align ? c->a.buf_align : 4;
	__u64 slot = win_len / n;
	long long bad = bad_offset();

	if (max_obj > slot)
		max_obj = slot;
	for (__u32 i = 0; i < n; i++) {
		__u64 len = (1 + rnd() % (max_obj / lba)) * lba;
		__u64 room = slot - len, at, off;

		at = win + i * slot + (room ? (rnd() % room) & ~(align - 1) : 0);
		do {
			off = (rnd() % ((c->a.capacity - len) / lba)) * lba;
		} while (bad >= 0 && off <= (__u64)bad && (__u64)bad < off + len);
		d[i] = (struct kvblk_io_desc){
			.offset = off,
			.length = len,
			.buf_offset = at,
			.buf_id = c->buf_id,
			.tag = i,
		};
	}
}

static void batch_random(struct batch *b, const struct kctx *c, __u32 n,
			 __u64 win, __u64 win_len, __u64 max_obj)
{
	descs_random(b->d, c, n, win, win_len, max_obj);
	batch_header(b, n);
}

static void prep_cmd(struct io_uring_sqe *sqe, int kfd, void *lm, __u32 flags,
		     __u32 cmd_op, __u64 user_data)
{
	struct kvblk_uring_cmd cmd = { .load_many = (uintptr_t)lm, .flags = flags };

	io_uring_prep_rw(IORING_OP_URING_CMD, sqe, kfd, NULL, 0, 0);
	sqe->cmd_op = cmd_op;
	memcpy(sqe->cmd, &cmd, sizeof(cmd));
	sqe->user_data = user_data;
}

/* Submit one command and return its CQE's res. */
static int one_cmd(struct io_uring *ring, int kfd, void *lm, __u32 flags,
		   __u32 cmd_op)
{
	struct io_uring_cqe *cqe;
	int ret;

	prep_cmd(io_uring_get_sqe(ring), kfd, lm, flags, cmd_op, 1);
	ret = io_uring_submit(ring);
	if (ret != 1)
		return ret < 0 ? ret : -EIO;
	ret = io_uring_wait_cqe(ring, &cqe);
	if (ret)
		return ret;
	ret = cqe->res;
	io_uring_cqe_seen(ring, cqe);
	return ret;
}

/* Bytes of object @d equal pread(O_DIRECT); canaries elsewhere checked apart. */
static int check_obj(int dfd, const struct kctx *c, const struct kvblk_io_desc *d)
{
	void *ref;
	int ok;

	if (posix_memalign(&ref, 4096, d->length))
		return 0;
	ok = pread(dfd, ref, d->length, d->offset) == (ssize_t)d->length &&
	     !memcmp(ref, c->mem + d->buf_offset, d->length);
	free(ref);
	return ok;
}

/* Every byte of the buffer outside the batches' objects is still CANARY. */
static size_t canaries_hit(const struct kctx *c, const struct batch *bs, int nb)
{
	unsigned char *map = calloc(1, c->len);
	size_t bad = 0;

	if (!map)
		return SIZE_MAX;
	for (int j = 0; j < nb; j++)
		for (__u32 i = 0; i < bs[j].lm.nr_descs; i++)
			memset(map + bs[j].d[i].buf_offset, 1, bs[j].d[i].length);
	for (size_t i = 0; i < c->len; i++)
		if (!map[i] && c->mem[i] != CANARY)
			bad++;
	free(map);
	return bad;
}

TEST(feature_bit)
{
	__u64 f = features();
	struct io_uring_params p = { .flags = IORING_SETUP_IOPOLL };
	struct io_uring ring, ring2;
	struct kctx c;
	struct batch b;
	int ret, status;
	pid_t pid;

	ASSERT_EQ(0, kctx_open(&c, 0, 1 << 20));
	ASSERT_EQ(0, io_uring_queue_init(8, &ring, 0));
	memset(c.mem, CANARY, c.len);
	batch_random(&b, &c, 1, 0, 1 << 20, 64 << 10);

	ret = one_cmd(&ring, c.kfd, &b.lm, 0, KVBLK_IOC_LOAD_MANY + 1);
	if (!(f & KVBLK_FEAT_URING_CMD)) {
		/* No bit: the module answers nothing (io_uring: no uring_cmd). */
		EXPECT_EQ(-EOPNOTSUPP, ret);
		EXPECT_EQ(-EOPNOTSUPP, one_cmd(&ring, c.kfd, &b.lm, 0,
					       KVBLK_URING_CMD_LOAD_MANY));
		io_uring_queue_exit(&ring);
		kctx_close(&c);
		SKIP(return, "GET_FEATURES lacks KVBLK_FEAT_URING_CMD (and uring_cmd is -EOPNOTSUPP)");
	}
	EXPECT_EQ(-ENOTTY, ret);
	EXPECT_EQ(-EINVAL, one_cmd(&ring, c.kfd, &b.lm, ~KVBLK_URING_F_ALL,
				   KVBLK_URING_CMD_LOAD_MANY));
	/* An unreadable header: -EFAULT, as the ioctl. */
	EXPECT_EQ(-EFAULT, one_cmd(&ring, c.kfd, (void *)8, 0, KVBLK_URING_CMD_LOAD_MANY));
	/* Nothing was read by the refused commands. */
	for (size_t i = 0; i < c.len; i++)
		if (c.mem[i] != CANARY) {
			ASSERT_EQ(CANARY, c.mem[i]);
		}
	/* The good one works. */
	EXPECT_EQ(1, one_cmd(&ring, c.kfd, &b.lm, 0, KVBLK_URING_CMD_LOAD_MANY));
	EXPECT_EQ(0, b.res[0].status);

	/*
	 * IOPOLL rings: io_uring refuses commands without polled completion
	 * (6.1, 6.12: -EOPNOTSUPP); where it takes them as they are (7.2),
	 * the batch completes as on any ring.
	 */
	if (!io_uring_queue_init_params(8, &ring2, &p)) {
		b.res[0].status = 77;
		ret = one_cmd(&ring2, c.kfd, &b.lm, 0, KVBLK_URING_CMD_LOAD_MANY);
		TH_LOG("IOPOLL ring: CQE res %d", ret);
		if (ret != -EOPNOTSUPP) {
			EXPECT_EQ(1, ret);
			EXPECT_EQ(0, b.res[0].status);
		}
		io_uring_queue_exit(&ring2);
	}
	io_uring_queue_exit(&ring);

	/* Another address space (a fork()ed child with the inherited fd): -EBADFD. */
	pid = fork();
	ASSERT_LE(0, pid);
	if (pid == 0) {
		struct io_uring r2;

		if (io_uring_queue_init(4, &r2, 0))
			_exit(2);
		_exit(one_cmd(&r2, c.kfd, &b.lm, 0, KVBLK_URING_CMD_LOAD_MANY) ==
		      -EBADFD ? 0 : 1);
	}
	ASSERT_EQ(pid, waitpid(pid, &status, 0));
	EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	kctx_close(&c);
}

/* 32 batches in flight on one ring, for the context's engine @flags. */
static void many_in_flight(struct __test_metadata *_metadata, __u32 flags)
{
	static struct batch bs[NR_BATCHES];
	struct io_uring ring;
	struct kctx c;
	int seen[NR_BATCHES] = { 0 };
	int dfd, bad = 0;

	if (!(features() & KVBLK_FEAT_URING_CMD))
		SKIP(return, "no KVBLK_FEAT_URING_CMD");
	ASSERT_EQ(0, kctx_open(&c, flags, BUF_BYTES));
	dfd = open(test_device(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, dfd);
	ASSERT_EQ(0, io_uring_queue_init(NR_BATCHES * 2, &ring, 0));
	memset(c.mem, CANARY, c.len);

	for (int j = 0; j < NR_BATCHES; j++) {
		batch_random(&bs[j], &c, NR_OBJS, j * (BUF_BYTES / NR_BATCHES),
			     BUF_BYTES / NR_BATCHES, 128 << 10);
		prep_cmd(io_uring_get_sqe(&ring), c.kfd, &bs[j].lm, 0,
			 KVBLK_URING_CMD_LOAD_MANY, j);
	}
	ASSERT_EQ(NR_BATCHES, io_uring_submit(&ring));
	for (int k = 0; k < NR_BATCHES; k++) {
		struct io_uring_cqe *cqe;
		__u64 j;

		ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
		j = cqe->user_data;
		ASSERT_GT((__u64)NR_BATCHES, j);
		EXPECT_EQ(0, seen[j]);
		seen[j]++;
		EXPECT_EQ(NR_OBJS, cqe->res);
		io_uring_cqe_seen(&ring, cqe);
	}
	for (int j = 0; j < NR_BATCHES; j++) {
		struct batch *b = &bs[j];

		EXPECT_EQ((__u32)NR_OBJS, b->lm.nr_ok);
		EXPECT_EQ(-1, b->lm.bad_index);
		EXPECT_EQ(c.a.engine, b->lm.engine);
		EXPECT_LE((__u64)NR_OBJS, b->lm.nr_cmds);
		for (__u32 i = 0; i < NR_OBJS; i++) {
			EXPECT_EQ(0, b->res[i].status);
			EXPECT_EQ(b->d[i].length, b->res[i].bytes);
			if (!check_obj(dfd, &c, &b->d[i]) && bad++ < 5)
				TH_LOG("batch %d object %u (offset %llu, %llu bytes) differs from pread",
				       j, i, (unsigned long long)b->d[i].offset,
				       (unsigned long long)b->d[i].length);
		}
	}
	EXPECT_EQ(0, bad);
	EXPECT_EQ((size_t)0, canaries_hit(&c, bs, NR_BATCHES));
	io_uring_queue_exit(&ring);
	close(dfd);
	kctx_close(&c);
}

TEST(many_in_flight_default_engine)
{
	many_in_flight(_metadata, 0);
}

TEST(many_in_flight_prp_engine)
{
	many_in_flight(_metadata, KVBLK_ATTACH_F_ENGINE_PRP);
}

/*
 * Batch @b (descriptor 3 made bad by @spoil) through the ioctl and through
 * uring_cmd: the same error, bad_index and results; nothing read.
 */
static void same_rejection(struct __test_metadata *_metadata, struct kctx *c,
			   struct io_uring *ring, int want,
			   void (*spoil)(struct kvblk_io_desc *d, const struct kctx *c))
{
	static struct batch bi, bu;
	long ret;

	batch_random(&bi, c, NR_OBJS, 0, 4 << 20, 64 << 10);
	spoil(&bi.d[3], c);
	bu = bi;
	batch_header(&bu, NR_OBJS);
	batch_header(&bi, NR_OBJS);
	memset(c->mem, CANARY, c->len);

	ret = ioctl(c->kfd, KVBLK_IOC_LOAD_MANY, &bi.lm);
	EXPECT_EQ(-1, ret);
	EXPECT_EQ(want, errno);
	EXPECT_EQ(-want, one_cmd(ring, c->kfd, &bu.lm, 0, KVBLK_URING_CMD_LOAD_MANY));
	EXPECT_EQ(3, bi.lm.bad_index);
	EXPECT_EQ(bi.lm.bad_index, bu.lm.bad_index);
	EXPECT_EQ(0U, bu.lm.nr_ok);
	EXPECT_EQ(0ULL, bu.lm.nr_cmds);
	for (int i = 0; i < NR_OBJS; i++) {
		EXPECT_EQ(i == 3 ? -want : -ECANCELED, bu.res[i].status);
		EXPECT_EQ(bi.res[i].status, bu.res[i].status);
		EXPECT_EQ(0ULL, bu.res[i].bytes);
	}
	EXPECT_EQ((size_t)0, canaries_hit(c, &bu, 0));
}

static void spoil_misaligned(struct kvblk_io_desc *d, const struct kctx *c)
{
	d->offset += c->a.lba_size / 2;
}

static void spoil_past_end(struct kvblk_io_desc *d, const struct kctx *c)
{
	d->offset = c->a.capacity - d->length + c->a.lba_size;
}

static void spoil_buf_id(struct kvblk_io_desc *d, const struct kctx *c)
{
	d->buf_id = c->buf_id + 100;
}

static void spoil_overlap(struct kvblk_io_desc *d, const struct kctx *c)
{
	(void)c;
	d->buf_offset = d[-1].buf_offset;
}

TEST(bad_descriptor)
{
	struct io_uring ring;
	struct kctx c;
	char path[PATH_MAX];
	long long batches0 = 0, batches1;
	char *disk;

	if (!(features() & KVBLK_FEAT_URING_CMD))
		SKIP(return, "no KVBLK_FEAT_URING_CMD");
	ASSERT_EQ(0, kctx_open(&c, 0, 4 << 20));
	ASSERT_EQ(0, io_uring_queue_init(8, &ring, 0));
	disk = strrchr(test_device(), '/');
	snprintf(path, sizeof(path), "/sys/kernel/kvblk/%s/stats/batches", disk ? disk + 1 : "");
	batches0 = read_ll(path);
	ASSERT_LE(0, batches0) TH_LOG("cannot read %s", path);

	same_rejection(_metadata, &c, &ring, EINVAL, spoil_misaligned);
	same_rejection(_metadata, &c, &ring, ERANGE, spoil_past_end);
	same_rejection(_metadata, &c, &ring, EINVAL, spoil_buf_id);
	same_rejection(_metadata, &c, &ring, EINVAL, spoil_overlap);
	/* Nothing was submitted: no batch counted. */
	batches1 = read_ll(path);
	EXPECT_EQ(batches0, batches1);
	io_uring_queue_exit(&ring);
	kctx_close(&c);
}

/* ---- One CQE per object (KVBLK_URING_F_PER_OBJECT) ---- */

#define PO_OBJS		32
#define PO_BGID		7
#define PO_BUF_BYTES	64	/* each provided buffer; the record is 32 */
#define PO_RING_ENTRIES	64	/* power of 2, >= PO_OBJS */
#define PO_MEM_BYTES	(16ULL << 20)

struct pbatch {
	struct kvblk_io_desc d[PO_OBJS];
	struct kvblk_desc_result res[PO_OBJS];
	struct kvblk_load_many lm;
};

/*
 * PO_OBJS objects of up to 512 KiB (several commands each on a 128 KiB
 * MDTS) with tags that are not their indexes.
 */
static void pbatch_random(struct pbatch *b, const struct kctx *c)
{
	descs_random(b->d, c, PO_OBJS, 0, c->len, 512 << 10);
	for (__u32 i = 0; i < PO_OBJS; i++)
		b->d[i].tag = 0xc0ffee0000ULL + 7 * i;
	lm_header(&b->lm, b->d, b->res, PO_OBJS, PO_OBJS);
}

/* A provided buffer ring (group PO_BGID) holding @nr buffers. */
struct pbufs {
	struct io_uring_buf_ring *br;
	unsigned char *mem;
	size_t br_len;
};

static int pbufs_setup(struct io_uring *ring, struct pbufs *p, unsigned int nr)
{
	struct io_uring_buf_reg reg = {
		.ring_entries = PO_RING_ENTRIES,
		.bgid = PO_BGID,
	};
	int ret;

	p->br_len = PO_RING_ENTRIES * sizeof(struct io_uring_buf);
	p->br = mmap(NULL, p->br_len, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	p->mem = malloc(PO_RING_ENTRIES * PO_BUF_BYTES);
	if (p->br == MAP_FAILED || !p->mem)
		return -ENOMEM;
	memset(p->mem, 0xee, PO_RING_ENTRIES * PO_BUF_BYTES);
	io_uring_buf_ring_init(p->br);
	reg.ring_addr = (uintptr_t)p->br;
	ret = io_uring_register_buf_ring(ring, &reg, 0);
	if (ret)
		return ret;
	for (unsigned int i = 0; i < nr; i++)
		io_uring_buf_ring_add(p->br, p->mem + i * PO_BUF_BYTES, PO_BUF_BYTES,
				      i, io_uring_buf_ring_mask(PO_RING_ENTRIES), i);
	io_uring_buf_ring_advance(p->br, nr);
	return 0;
}

/* Buffer @bid (its record read) back into the ring. */
static void pbufs_give_back(struct pbufs *p, unsigned int bid)
{
	io_uring_buf_ring_add(p->br, p->mem + bid * PO_BUF_BYTES, PO_BUF_BYTES,
			      bid, io_uring_buf_ring_mask(PO_RING_ENTRIES), 0);
	io_uring_buf_ring_advance(p->br, 1);
}

static void pbufs_free(struct io_uring *ring, struct pbufs *p)
{
	io_uring_unregister_buf_ring(ring, PO_BGID);
	munmap(p->br, p->br_len);
	free(p->mem);
}

/* A multishot (with buffer select) or plain SQE for batch @lm. */
static void prep_po(struct io_uring_sqe *sqe, int kfd, void *lm, __u32 flags,
		    int mshot)
{
	prep_cmd(sqe, kfd, lm, flags, KVBLK_URING_CMD_LOAD_MANY, 0x5eed);
	if (mshot) {
		sqe->uring_cmd_flags = IORING_URING_CMD_MULTISHOT;
		sqe->flags |= IOSQE_BUFFER_SELECT;
		sqe->buf_group = PO_BGID;
	}
}

/* What one per-object batch posted. */
struct po_run {
	int nr_more;			/* CQEs with IORING_CQE_F_MORE */
	int final_res;
	int stray;			/* CQEs after the final one */
	int seen[PO_OBJS];
	struct kvblk_uring_obj rec[PO_OBJS];
};

/*
 * Reap a batch's CQEs up to its final one. Each per-object CQE is checked
 * as it comes: its buffer, its record's index (once), tag and reserved
 * field, and, for a loaded object, its bytes against pread(O_DIRECT) at
 * that moment (before the batch ended).
 */
static void po_reap(struct __test_metadata *_metadata, struct io_uring *ring,
		    const struct pbufs *p, const struct pbatch *b, int dfd,
		    const struct kctx *c, struct po_run *r)
{
	struct io_uring_cqe *cqe;

	memset(r, 0, sizeof(*r));
	for (;;) {
		struct kvblk_uring_obj rec;
		unsigned int bid;

		ASSERT_EQ(0, io_uring_wait_cqe(ring, &cqe));
		EXPECT_EQ(0x5eedULL, cqe->user_data);
		if (!(cqe->flags & IORING_CQE_F_MORE)) {
			r->final_res = cqe->res;
			EXPECT_EQ(0U, cqe->flags & IORING_CQE_F_BUFFER);
			io_uring_cqe_seen(ring, cqe);
			break;
		}
		ASSERT_NE(0U, cqe->flags & IORING_CQE_F_BUFFER);
		ASSERT_EQ(KVBLK_URING_OBJ_SIZE_VER0, cqe->res);
		bid = cqe->flags >> IORING_CQE_BUFFER_SHIFT;
		ASSERT_GT((unsigned int)PO_RING_ENTRIES, bid);
		memcpy(&rec, p->mem + bid * PO_BUF_BYTES, sizeof(rec));
		io_uring_cqe_seen(ring, cqe);
		ASSERT_GT((__u32)PO_OBJS, rec.index);
		EXPECT_EQ(0, r->seen[rec.index]);
		r->seen[rec.index]++;
		r->rec[rec.index] = rec;
		r->nr_more++;
		EXPECT_EQ(b->d[rec.index].tag, rec.tag);
		EXPECT_EQ(0ULL, rec.reserved);
		if (!rec.status) {
			EXPECT_EQ(b->d[rec.index].length, rec.bytes);
			EXPECT_TRUE(check_obj(dfd, c, &b->d[rec.index]))
				TH_LOG("object %u differs from pread at its CQE", rec.index);
		} else {
			EXPECT_EQ(0ULL, rec.bytes);
		}
	}
	/* Nothing after the final CQE. */
	while (!io_uring_peek_cqe(ring, &cqe)) {
		r->stray++;
		io_uring_cqe_seen(ring, cqe);
	}
	EXPECT_EQ(0, r->stray);
}

/* Every record that came equals its entry of the results array. */
static void po_match_results(struct __test_metadata *_metadata,
			     const struct pbatch *b, const struct po_run *r)
{
	for (__u32 i = 0; i < PO_OBJS; i++) {
		if (!r->seen[i])
			continue;
		EXPECT_EQ(b->res[i].status, r->rec[i].status);
		EXPECT_EQ(b->res[i].bytes, r->rec[i].bytes);
	}
}

/*
 * The system's outstanding pins once they stopped moving (unchanged over
 * 600 ms, at most 10 s): what an earlier test released in a worker (io_uring
 * frees a closed ring's resources there) must not count in the baseline.
 */
static long long pins_stable(void)
{
	long long v = pins_outstanding(), last = LLONG_MIN;
	uint64_t end = now_ms() + 10000;

	for (int same = 0; same < 3 && now_ms() < end; ) {
		usleep(200000);
		last = v;
		v = pins_outstanding();
		same = v == last ? same + 1 : 0;
	}
	return v;
}

/*
 * The feature bit and the flag agree: without the bit the flag is
 * -EOPNOTSUPP (whatever the SQE); with it, the flag needs a multishot SQE
 * and a multishot SQE needs the flag (-EINVAL); nothing is read either way.
 */
TEST(per_object_flags)
{
	__u64 f = features();
	long long pins0 = pins_stable();
	struct io_uring ring;
	struct pbufs p;
	struct kctx c;
	struct batch b;

	if (!(f & KVBLK_FEAT_URING_CMD))
		SKIP(return, "no KVBLK_FEAT_URING_CMD (feature_bit checks -EOPNOTSUPP)");
	ASSERT_EQ(0, kctx_open(&c, 0, 1 << 20));
	ASSERT_EQ(0, io_uring_queue_init(8, &ring, 0));
	memset(c.mem, CANARY, c.len);
	batch_random(&b, &c, 4, 0, 1 << 20, 64 << 10);
	/* An unknown flag bit: -EINVAL on every kernel. */
	EXPECT_EQ(-EINVAL, one_cmd(&ring, c.kfd, &b.lm, KVBLK_URING_F_PER_OBJECT << 1,
				   KVBLK_URING_CMD_LOAD_MANY));
	if (!(f & KVBLK_FEAT_URING_PER_OBJECT)) {
		TH_LOG("GET_FEATURES lacks KVBLK_FEAT_URING_PER_OBJECT: the flag must be -EOPNOTSUPP");
		EXPECT_EQ(-EOPNOTSUPP, one_cmd(&ring, c.kfd, &b.lm, KVBLK_URING_F_PER_OBJECT,
					       KVBLK_URING_CMD_LOAD_MANY));
	} else {
		struct io_uring_cqe *cqe;

		TH_LOG("GET_FEATURES has KVBLK_FEAT_URING_PER_OBJECT: checking -EINVAL rules");
		ASSERT_EQ(0, pbufs_setup(&ring, &p, 8));
		/* The flag on a plain SQE. */
		EXPECT_EQ(-EINVAL, one_cmd(&ring, c.kfd, &b.lm, KVBLK_URING_F_PER_OBJECT,
					   KVBLK_URING_CMD_LOAD_MANY));
		/* A multishot SQE without the flag: one CQE, -EINVAL. */
		prep_po(io_uring_get_sqe(&ring), c.kfd, &b.lm, 0, 1);
		ASSERT_EQ(1, io_uring_submit(&ring));
		ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
		EXPECT_EQ(-EINVAL, cqe->res);
		EXPECT_EQ(0U, cqe->flags & (IORING_CQE_F_MORE | IORING_CQE_F_BUFFER));
		io_uring_cqe_seen(&ring, cqe);
		EXPECT_EQ(-EAGAIN, io_uring_peek_cqe(&ring, &cqe));
		pbufs_free(&ring, &p);
	}
	for (size_t i = 0; i < c.len; i++)
		if (c.mem[i] != CANARY) {
			ASSERT_EQ(CANARY, c.mem[i]);
		}
	io_uring_queue_exit(&ring);
	kctx_close(&c);
	EXPECT_EQ(pins0, settle(pins_outstanding, pins0, 10000));
}

/* A per-object batch with @nbufs buffers provided: what po_reap() saw. */
static void po_batch(struct __test_metadata *_metadata, unsigned int nbufs,
		     struct pbatch *b, struct kctx *c, int dfd,
		     struct po_run *r, int media_error)
{
	long long pins0 = pins_stable();
	struct io_uring ring;
	struct pbufs p;

	ASSERT_EQ(0, io_uring_queue_init(PO_OBJS * 2, &ring, 0));
	ASSERT_EQ(0, pbufs_setup(&ring, &p, nbufs));
	memset(c->mem, CANARY, c->len);
	pbatch_random(b, c);
	if (media_error) {
		/* Descriptor 5: three LBAs, the bad one in the middle. */
		b->d[5].offset = (__u64)bad_offset() / c->a.lba_size * c->a.lba_size -
				 c->a.lba_size;
		b->d[5].length = 3 * c->a.lba_size;
	}
	prep_po(io_uring_get_sqe(&ring), c->kfd, &b->lm, KVBLK_URING_F_PER_OBJECT, 1);
	ASSERT_EQ(1, io_uring_submit(&ring));
	po_reap(_metadata, &ring, &p, b, dfd, c, r);
	po_match_results(_metadata, b, r);
	pbufs_free(&ring, &p);
	io_uring_queue_exit(&ring);
	/*
	 * Nothing stays pinned (io_uring unpins the buffer ring when it frees
	 * the ring, in a worker: waited for, so that the next test's baseline
	 * does not include it).
	 */
	EXPECT_EQ(pins0, settle(pins_outstanding, pins0, 10000));
}

/* Every byte of the buffer outside @b's objects is still CANARY. */
static size_t po_canaries_hit(const struct kctx *c, const struct pbatch *b)
{
	unsigned char *map = calloc(1, c->len);
	size_t bad = 0;

	if (!map)
		return SIZE_MAX;
	for (__u32 i = 0; i < PO_OBJS; i++)
		memset(map + b->d[i].buf_offset, 1, b->d[i].length);
	for (size_t i = 0; i < c->len; i++)
		if (!map[i] && c->mem[i] != CANARY)
			bad++;
	free(map);
	return bad;
}

/*
 * Open a context (attach @flags) and the device for a per-object test; 0
 * to skip.
 */
static int po_open(struct __test_metadata *_metadata, struct kctx *c, int *dfd,
		   __u32 flags)
{
	if (!(features() & KVBLK_FEAT_URING_PER_OBJECT))
		return 0;
	ASSERT_EQ(0, kctx_open(c, flags, PO_MEM_BYTES));
	*dfd = open(test_device(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, *dfd);
	return 1;
}

#define PO_SKIP_MSG "GET_FEATURES lacks KVBLK_FEAT_URING_PER_OBJECT (per_object_flags checked -EOPNOTSUPP)"

/*
 * N descriptors, buffers for all: N records, then the final CQE. The PRP
 * engine: objects of several commands (up to the 128 KiB MDTS each; the
 * block-layer engine's bios are larger than these objects), and its
 * mapping synced for each object before that object's CQE.
 */
TEST(per_object_records)
{
	static struct pbatch b;
	struct po_run r;
	struct kctx c;
	int dfd;

	if (!po_open(_metadata, &c, &dfd, KVBLK_ATTACH_F_ENGINE_PRP))
		SKIP(return, PO_SKIP_MSG);
	po_batch(_metadata, PO_RING_ENTRIES, &b, &c, dfd, &r, 0);
	EXPECT_EQ(PO_OBJS, r.nr_more);
	EXPECT_EQ(PO_OBJS, r.final_res);
	EXPECT_EQ((__u32)PO_OBJS, b.lm.nr_ok);
	EXPECT_EQ(-1, b.lm.bad_index);
	EXPECT_LT((__u64)PO_OBJS, b.lm.nr_cmds);	/* some objects were split */
	for (__u32 i = 0; i < PO_OBJS; i++) {
		EXPECT_EQ(1, r.seen[i]);
		EXPECT_EQ(0, b.res[i].status);
		EXPECT_EQ(b.d[i].length, b.res[i].bytes);
	}
	EXPECT_EQ((size_t)0, po_canaries_hit(&c, &b));
	close(dfd);
	kctx_close(&c);
}

/*
 * 5 buffers for PO_OBJS records: exactly 5 per-object CQEs (the stream
 * stops at the first object without a buffer and never resumes), the
 * final CQE and every result complete, every object's bytes exact.
 */
TEST(per_object_few_buffers)
{
	static struct pbatch b;
	struct po_run r;
	struct kctx c;
	int dfd;

	if (!po_open(_metadata, &c, &dfd, 0))
		SKIP(return, PO_SKIP_MSG);
	po_batch(_metadata, 5, &b, &c, dfd, &r, 0);
	EXPECT_EQ(5, r.nr_more);
	EXPECT_EQ(PO_OBJS, r.final_res);
	EXPECT_EQ((__u32)PO_OBJS, b.lm.nr_ok);
	for (__u32 i = 0; i < PO_OBJS; i++) {
		EXPECT_EQ(0, b.res[i].status);
		EXPECT_EQ(b.d[i].length, b.res[i].bytes);
		EXPECT_TRUE(check_obj(dfd, &c, &b.d[i]));
	}
	EXPECT_EQ((size_t)0, po_canaries_hit(&c, &b));
	close(dfd);
	kctx_close(&c);
}

/* blkdebug: the descriptor over the bad LBA gets its own error record. */
TEST(per_object_media_error)
{
	static struct pbatch b;
	struct po_run r;
	struct kctx c;
	int dfd;

	if (bad_offset() < 0)
		SKIP(return, "no injected media error (KVBLK_VM_BAD_BYTE_OFFSET unset: not the blkdebug variant)");
	if (!po_open(_metadata, &c, &dfd, 0))
		SKIP(return, PO_SKIP_MSG);
	po_batch(_metadata, PO_RING_ENTRIES, &b, &c, dfd, &r, 1);
	EXPECT_EQ(PO_OBJS, r.nr_more);
	EXPECT_EQ(PO_OBJS - 1, r.final_res);
	EXPECT_EQ(1, r.seen[5]);
	EXPECT_GT(0, r.rec[5].status);
	EXPECT_NE(-ECANCELED, r.rec[5].status);
	EXPECT_EQ(0ULL, r.rec[5].bytes);
	TH_LOG("descriptor 5 over the bad LBA: record status %d", r.rec[5].status);
	for (__u32 i = 0; i < PO_OBJS; i++) {
		EXPECT_EQ(1, r.seen[i]);
		if (i != 5) {
			EXPECT_EQ(0, r.rec[i].status);
		}
	}
	close(dfd);
	kctx_close(&c);
}

enum teardown { TD_KILL, TD_CLOSE };

static void inflight_path(char *path, size_t len)
{
	const char *disk = strrchr(test_device(), '/');

	snprintf(path, len, "/sys/kernel/kvblk/%s/stats/inflight", disk ? disk + 1 : "");
}

/*
 * A child puts rounds of 32 batches of 8 objects of up to 256 KiB in flight
 * until, right after a submission, it sees commands in flight (at most 50
 * rounds); then it kills itself (TD_KILL), or closes its ring and
 * /dev/kvblk fds and waits (TD_CLOSE). Module references and pinned pages
 * come back to their baselines while (TD_CLOSE) the child still lives.
 * Returns the commands in flight the child saw before its teardown.
 */
static long long teardown_once(struct __test_metadata *_metadata, enum teardown how,
				int per_object)
{
	long long refs0, pins0, v, inflight;
	int pfd[2], qfd[2], status;
	char ch, path[PATH_MAX];
	pid_t pid;

	inflight_path(path, sizeof(path));
	refs0 = module_refcnt();
	pins0 = pins_stable();
	if (refs0 < 0 || pins0 == LLONG_MIN || pipe2(pfd, O_CLOEXEC) ||
	    pipe2(qfd, O_CLOEXEC))
		return LLONG_MIN;
	pid = fork();
	if (pid < 0)
		return LLONG_MIN;
	if (pid == 0) {
		static struct batch bs[NR_BATCHES];
		struct io_uring_cqe *cqe;
		struct io_uring ring;
		struct pbufs p;
		struct kctx c;

		close(pfd[0]);
		close(qfd[1]);
		/* Per object: room for the records' CQEs too. */
		if (kctx_open(&c, 0, TD_BUF_BYTES) ||
		    io_uring_queue_init(NR_BATCHES * 4, &ring, 0) ||
		    (per_object && pbufs_setup(&ring, &p, PO_RING_ENTRIES)))
			_exit(2);
		for (int round = 0; round < 50; round++) {
			for (int j = 0; j < NR_BATCHES; j++) {
				batch_random(&bs[j], &c, NR_OBJS,
					     j * (TD_BUF_BYTES / NR_BATCHES),
					     TD_BUF_BYTES / NR_BATCHES, 256 << 10);
				if (per_object)
					prep_po(io_uring_get_sqe(&ring), c.kfd, &bs[j].lm,
						KVBLK_URING_F_PER_OBJECT, 1);
				else
					prep_cmd(io_uring_get_sqe(&ring), c.kfd, &bs[j].lm,
						 0, KVBLK_URING_CMD_LOAD_MANY, j);
			}
			if (io_uring_submit(&ring) != NR_BATCHES)
				_exit(3);
			inflight = read_ll(path);
			if (inflight > 0)
				break;
			/* Each batch's final CQE; records' buffers go back. */
			for (int j = 0; j < NR_BATCHES; ) {
				if (io_uring_wait_cqe(&ring, &cqe))
					_exit(4);
				if (cqe->flags & IORING_CQE_F_MORE)
					pbufs_give_back(&p, cqe->flags >> IORING_CQE_BUFFER_SHIFT);
				else
					j++;
				io_uring_cqe_seen(&ring, cqe);
			}
		}
		if (how == TD_KILL) {
			if (write(pfd[1], &inflight, sizeof(inflight)) != sizeof(inflight))
				_exit(5);
			raise(SIGKILL);
		}
		/*
		 * Unmaps and closes the ring (nothing else holds it; the close
		 * may wait for the batches), then the context.
		 */
		io_uring_queue_exit(&ring);
		close(c.kfd);
		if (write(pfd[1], &inflight, sizeof(inflight)) != sizeof(inflight))
			_exit(5);
		/* Wait for the parent. */
		if (read(qfd[0], &ch, 1) < 0)
			_exit(6);
		_exit(0);
	}
	close(pfd[1]);
	close(qfd[0]);
	if (read(pfd[0], &inflight, sizeof(inflight)) != sizeof(inflight)) {
		TH_LOG("the child failed before its teardown");
		inflight = LLONG_MIN;
	}
	/* Everything the batches held is released (the child alive for TD_CLOSE). */
	v = settle(module_refcnt, refs0, 20000);
	EXPECT_EQ(refs0, v);
	v = settle(pins_outstanding, pins0, 20000);
	EXPECT_EQ(pins0, v);
	if (how == TD_CLOSE) {
		EXPECT_EQ(0, kill(pid, 0));	/* it was alive throughout */
	}
	close(qfd[1]);
	EXPECT_EQ(pid, waitpid(pid, &status, 0));
	if (how == TD_KILL) {
		EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
	} else {
		EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
	}
	close(pfd[0]);
	EXPECT_EQ(refs0, module_refcnt());
	EXPECT_EQ(pins0, pins_outstanding());
	return inflight;
}

/* Until the teardown found commands in flight (at most 5 tries). */
static void teardown(struct __test_metadata *_metadata, enum teardown how,
		     int per_object)
{
	long long inflight = 0;

	if (!(features() & KVBLK_FEAT_URING_CMD))
		SKIP(return, "no KVBLK_FEAT_URING_CMD");
	if (per_object && !(features() & KVBLK_FEAT_URING_PER_OBJECT))
		SKIP(return, PO_SKIP_MSG);
	for (int i = 0; i < 5 && inflight <= 0 && _metadata->passed; i++) {
		inflight = teardown_once(_metadata, how, per_object);
		ASSERT_NE(LLONG_MIN, inflight);
		TH_LOG("try %d: %lld commands in flight at the teardown", i + 1, inflight);
	}
	if (inflight <= 0)
		SKIP(return, "no command was in flight at the teardown in 5 tries (precondition not met; no fault seen)");
}

/*
 * Up to 5 tries of up to 50 rounds of batches each, and 20 s settles: more
 * than the harness's default 30 s on a debug kernel under emulation (both
 * timed out there, 2026-12-02), so these two run in a fixture with their
 * own limit.
 */
FIXTURE(ring_teardown) {};
FIXTURE_SETUP(ring_teardown) {}
FIXTURE_TEARDOWN(ring_teardown) {}

TEST_F_TIMEOUT(ring_teardown, killed, 300)
{
	teardown(_metadata, TD_KILL, 0);
}

TEST_F_TIMEOUT(ring_teardown, ring_closed, 300)
{
	teardown(_metadata, TD_CLOSE, 0);
}

/* The same with per-object batches (records posted while they run). */
TEST_F_TIMEOUT(ring_teardown, killed_per_object, 300)
{
	teardown(_metadata, TD_KILL, 1);
}

TEST_F_TIMEOUT(ring_teardown, ring_closed_per_object, 300)
{
	teardown(_metadata, TD_CLOSE, 1);
}

/*
 * The command never keeps its ring busy for a whole batch (review-2 N10):
 * issued inline (io_uring_enter(), the ring's lock held) it returns
 * -EAGAIN and io_uring runs it from its worker, so io_uring_submit()
 * returns at once, a NOP submitted right after completes before the
 * batch, and the batch is exact. The disk's max_inflight is 1 meanwhile,
 * and max_cmd_bytes 4 KiB (32 commands per object, 4,096 in all), so that
 * the batch's submission waits for its own commands one by one (an inline
 * issue used to return only after the last but one completed).
 */
#define NB_OBJS		128
#define NB_OBJ		(128 << 10)
#define NB_PARAM	MODULE_DIR "/parameters/max_cmd_bytes"
TEST(issue_never_blocks_the_ring)
{
	struct kvblk_io_desc d[NB_OBJS];
	struct kvblk_desc_result res[NB_OBJS];
	struct kvblk_load_many lm;
	struct io_uring_sqe *sqe;
	struct io_uring_cqe *cqe;
	struct io_uring ring;
	char path[256], old[32], old_cmd[32];
	uint64_t t0, t_sub, t_nop = 0, t_batch = 0;
	struct kctx c;
	int dfd, i, ret;

	if (!(features() & KVBLK_FEAT_URING_CMD))
		SKIP(return, "no KVBLK_FEAT_URING_CMD");
	/* The disk's object takes it when the context attaches. */
	ASSERT_EQ(0, read_text(NB_PARAM, old_cmd, sizeof(old_cmd)));
	ASSERT_EQ(0, write_text(NB_PARAM, "4096"));
	ret = kctx_open(&c, 0, (size_t)NB_OBJS * NB_OBJ);
	ASSERT_EQ(0, write_text(NB_PARAM, old_cmd));
	ASSERT_EQ(0, ret);
	snprintf(path, sizeof(path), "/sys/kernel/kvblk/%s/max_inflight",
		 strrchr(test_device(), '/') + 1);
	ASSERT_EQ(0, read_text(path, old, sizeof(old)));
	ASSERT_EQ(0, write_text(path, "1"));
	ASSERT_EQ(0, io_uring_queue_init(8, &ring, 0));
	memset(d, 0, sizeof(d));
	for (i = 0; i < NB_OBJS; i++)
		d[i] = (struct kvblk_io_desc){
			.offset = (__u64)i * NB_OBJ * 3,
			.length = NB_OBJ,
			.buf_offset = (__u64)i * NB_OBJ,
			.buf_id = c.buf_id,
			.tag = i,
		};
	lm_header(&lm, d, res, NB_OBJS, NB_OBJS);
	memset(c.mem, CANARY, c.len);

	t0 = now_ms();
	prep_cmd(io_uring_get_sqe(&ring), c.kfd, &lm, 0, KVBLK_URING_CMD_LOAD_MANY, 1);
	ret = io_uring_submit(&ring);
	t_sub = now_ms() - t0;
	ASSERT_EQ(1, ret);
	sqe = io_uring_get_sqe(&ring);
	io_uring_prep_nop(sqe);
	sqe->user_data = 2;
	ASSERT_EQ(1, io_uring_submit(&ring));
	for (i = 0; i < 2; i++) {
		ASSERT_EQ(0, io_uring_wait_cqe(&ring, &cqe));
		if (cqe->user_data == 2) {
			t_nop = now_ms() - t0;
		} else {
			t_batch = now_ms() - t0;
			EXPECT_EQ(NB_OBJS, cqe->res);
		}
		io_uring_cqe_seen(&ring, cqe);
	}
	ASSERT_EQ(0, write_text(path, old));
	TH_LOG("io_uring_submit() of the batch: %llu ms; the NOP after it: %llu ms; the batch: %llu ms",
	       (unsigned long long)t_sub, (unsigned long long)t_nop,
	       (unsigned long long)t_batch);
	if (t_batch < 200)
		SKIP(goto out, "the batch took only %llu ms: too short to tell",
		     (unsigned long long)t_batch);
	EXPECT_LT(t_sub * 4, t_batch);
	EXPECT_LT(t_nop * 4, t_batch);
	dfd = open(test_device(), O_RDONLY | O_DIRECT | O_CLOEXEC);
	ASSERT_LE(0, dfd);
	for (i = 0; i < NB_OBJS; i++)
		EXPECT_EQ(1, check_obj(dfd, &c, &d[i])) TH_LOG("object %d", i);
	close(dfd);
out:
	io_uring_queue_exit(&ring);
	kctx_close(&c);
}

TEST_HARNESS_MAIN
