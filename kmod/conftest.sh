#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# conftest.sh - compile-time feature tests for kvblk.ko.
#
# Usage: conftest.sh KDIR OUT MK
#   KDIR  kernel build directory (/lib/modules/<ver>/build)
#   OUT   header to write (kmod/conftest.h)
#   MK    make fragment to write (kmod/conftest.mk, included by kmod/Kbuild)
# Each is rewritten only when its content changes.
#
# Every test is a tiny C file compiled against KDIR with the kernel's own
# flags (one kbuild run builds all probes; -k keeps going past failures).
# A probe that compiles defines KVBLK_HAVE_<NAME> in OUT. Symbol tests look
# the export up in KDIR/Module.symvers. No test looks at version numbers:
# distribution kernels backport, so only the interface itself is asked.
#
# The optional parts of kvblk.ko (one source file each) are decided here too,
# from the probes and the kernel's configuration (KDIR/include/config/
# auto.conf): KVBLK_WITH_<PART> is defined in OUT (kvblk.h declares the
# part's functions, or static inline stubs without it) and set to y in MK
# (kmod/Kbuild adds the part's object file), both from the same answer.

set -eu

KDIR=${1:?usage: conftest.sh KDIR OUT MK}
OUT=${2:?usage: conftest.sh KDIR OUT MK}
MK=${3:?usage: conftest.sh KDIR OUT MK}

[ -f "$KDIR/Makefile" ] || {
	echo "conftest.sh: no kernel build tree at $KDIR (install the kernel headers)" >&2
	exit 1
}
# The configured kernel's options (kbuild refuses external modules without it).
[ -f "$KDIR/include/config/auto.conf" ] || {
	echo "conftest.sh: $KDIR has no include/config/auto.conf (not a configured build tree)" >&2
	exit 1
}

tmp=$(mktemp -d "${TMPDIR:-/tmp}/kvblk-conftest.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM

probe() {
	# probe NAME <<EOF ... EOF: the body, a file-scope C snippet
	{
		echo '#include <linux/module.h>'
		cat
	} >"$tmp/probe_$1.c"
}

# Always compiles: if it does not, the probe build itself is broken (wrong
# KDIR, missing compiler, bad flags) and every other result would be a lie.
probe CANARY <<'EOF'
int kvblk_probe(int x);
int kvblk_probe(int x)
{
	return x;
}
EOF

# enum rq_end_io_ret exists (6.0 and later; rq_end_io_fn returned void
# before). Asked apart from the callback's arity (RQ_END_IO_IOB).
probe RQ_END_IO_RET <<'EOF'
#include <linux/blk-mq.h>
enum rq_end_io_ret kvblk_probe(void);
enum rq_end_io_ret kvblk_probe(void)
{
	return RQ_END_IO_FREE;
}
EOF

# rq_end_io_fn takes a third argument, const struct io_comp_batch *.
probe RQ_END_IO_IOB <<'EOF'
#include <linux/blk-mq.h>
static enum rq_end_io_ret kvblk_probe_end_io(struct request *rq, blk_status_t s,
					     const struct io_comp_batch *iob)
{
	return RQ_END_IO_FREE;
}
void kvblk_probe(struct request *rq);
void kvblk_probe(struct request *rq)
{
	rq->end_io = kvblk_probe_end_io;
}
EOF

# blk_execute_rq_nowait(rq, at_head): end_io is set on the request.
probe BLK_EXECUTE_RQ_NOWAIT_2 <<'EOF'
#include <linux/blk-mq.h>
void kvblk_probe(struct request *rq);
void kvblk_probe(struct request *rq)
{
	blk_execute_rq_nowait(rq, false);
}
EOF

# struct user_struct::locked_vm (RLIMIT_MEMLOCK accounting like io_uring).
probe USER_LOCKED_VM <<'EOF'
#include <linux/sched/user.h>
long kvblk_probe(struct user_struct *u);
long kvblk_probe(struct user_struct *u)
{
	return atomic_long_read(&u->locked_vm);
}
EOF


# <linux/blk-integrity.h> (blk_get_integrity moved there).
probe BLK_INTEGRITY_H <<'EOF'
#include <linux/blk-integrity.h>
bool kvblk_probe(struct gendisk *disk);
bool kvblk_probe(struct gendisk *disk)
{
	return blk_get_integrity(disk) != NULL;
}
EOF

# Per-LBA metadata bytes the block layer knows of (an integrity profile or
# separate metadata without one): in queue_limits, named metadata_size ...
probe LIMITS_INTEGRITY_METADATA_SIZE <<'EOF'
#include <linux/blkdev.h>
unsigned int kvblk_probe(struct request_queue *q);
unsigned int kvblk_probe(struct request_queue *q)
{
	return q->limits.integrity.metadata_size;
}
EOF

# ... or tuple_size ...
probe LIMITS_INTEGRITY_TUPLE_SIZE <<'EOF'
#include <linux/blkdev.h>
unsigned int kvblk_probe(struct request_queue *q);
unsigned int kvblk_probe(struct request_queue *q)
{
	return q->limits.integrity.tuple_size;
}
EOF

# ... or in struct request_queue itself (CONFIG_BLK_DEV_INTEGRITY only).
probe QUEUE_INTEGRITY_TUPLE_SIZE <<'EOF'
#include <linux/blkdev.h>
unsigned int kvblk_probe(struct request_queue *q);
unsigned int kvblk_probe(struct request_queue *q)
{
	return q->integrity.tuple_size;
}
EOF

# gendisk::state with GD_DEAD (del_gendisk() marks a removed disk).
probe GD_DEAD <<'EOF'
#include <linux/blkdev.h>
bool kvblk_probe(struct gendisk *disk);
bool kvblk_probe(struct gendisk *disk)
{
	return test_bit(GD_DEAD, &disk->state);
}
EOF

# bdev_nr_sectors().
probe BDEV_NR_SECTORS <<'EOF'
#include <linux/blkdev.h>
sector_t kvblk_probe(struct block_device *bdev);
sector_t kvblk_probe(struct block_device *bdev)
{
	return bdev_nr_sectors(bdev);
}
EOF

# pin_user_pages_fast() with FOLL_LONGTERM.
probe PIN_USER_PAGES_LONGTERM <<'EOF'
#include <linux/mm.h>
int kvblk_probe(unsigned long a, struct page **p);
int kvblk_probe(unsigned long a, struct page **p)
{
	return pin_user_pages_fast(a, 1, FOLL_WRITE | FOLL_LONGTERM, p);
}
EOF

# pin_user_pages() takes a vmas array (5 arguments: up to 6.4; 6.5 dropped
# it). Either form is called with mmap_lock held (mem_host.c).
probe PIN_USER_PAGES_VMAS <<'EOF'
#include <linux/mm.h>
long kvblk_probe(unsigned long a, struct page **p);
long kvblk_probe(unsigned long a, struct page **p)
{
	return pin_user_pages(a, 1, FOLL_WRITE | FOLL_LONGTERM, p, NULL);
}
EOF

# is_swiotlb_force_bounce() (linux/swiotlb.h): every DMA of the device goes
# through swiotlb bounce buffers (swiotlb=force, confidential VMs).
probe SWIOTLB_FORCE_BOUNCE <<'EOF'
#include <linux/swiotlb.h>
bool kvblk_probe(struct device *dev);
bool kvblk_probe(struct device *dev)
{
	return is_swiotlb_force_bounce(dev);
}
EOF

# FOLL_PCI_P2PDMA: GUP admits PCI P2PDMA pages (the user-space P2PDMA
# series: FOLL flag, p2pmem/allocate mmap; not in 6.1).
probe FOLL_PCI_P2PDMA <<'EOF'
#include <linux/mm.h>
unsigned int kvblk_probe(void);
unsigned int kvblk_probe(void)
{
	return FOLL_PCI_P2PDMA;
}
EOF

# page_pgmap(): a ZONE_DEVICE page's dev_pagemap (7.x; before, page->pgmap),
# which tells two P2PDMA providers' pages apart.
probe PAGE_PGMAP <<'EOF'
#include <linux/mm.h>
#include <linux/memremap.h>
struct dev_pagemap *kvblk_probe(struct page *page);
struct dev_pagemap *kvblk_probe(struct page *page)
{
	return page_pgmap(page);
}
EOF

# dma_max_mapping_size() (swiotlb-aware segment limit).
probe DMA_MAX_MAPPING_SIZE <<'EOF'
#include <linux/dma-mapping.h>
size_t kvblk_probe(struct device *dev);
size_t kvblk_probe(struct device *dev)
{
	return dma_max_mapping_size(dev);
}
EOF

# kiocb_start_write()/kiocb_end_write(): freeze protection of an
# asynchronous write (file engine stores); compat.h open-codes them where a
# kernel lacks the helpers.
probe KIOCB_START_WRITE <<'EOF'
#include <linux/fs.h>
void kvblk_probe(struct kiocb *iocb);
void kvblk_probe(struct kiocb *iocb)
{
	kiocb_start_write(iocb);
	kiocb_end_write(iocb);
}
EOF

# dma-buf dynamic importer (mem_dmabuf.c): dynamic attach, pin and map with
# the reservation lock held (the convention of every kernel that has
# dma_buf_pin; 7.2 asserts the lock for every map), fence wait by usage.
probe DMA_BUF_IMPORTER <<'EOF'
#include <linux/dma-buf.h>
#include <linux/dma-resv.h>
long kvblk_probe(struct dma_buf_attachment *a);
long kvblk_probe(struct dma_buf_attachment *a)
{
	struct sg_table *sgt;
	long ret;

	dma_resv_lock(a->dmabuf->resv, NULL);
	ret = dma_buf_pin(a);
	sgt = dma_buf_map_attachment(a, DMA_BIDIRECTIONAL);
	ret += dma_resv_wait_timeout(a->dmabuf->resv, DMA_RESV_USAGE_KERNEL,
				     true, MAX_SCHEDULE_TIMEOUT);
	dma_buf_unmap_attachment(a, sgt, DMA_BIDIRECTIONAL);
	dma_buf_unpin(a);
	dma_resv_unlock(a->dmabuf->resv);
	return ret + (long)dma_buf_dynamic_attach;
}
EOF

# The importer's notification is dma_buf_attach_ops.invalidate_mappings
# (7.2) ...
probe DMA_BUF_OPS_INVALIDATE_MAPPINGS <<'EOF'
#include <linux/dma-buf.h>
static void kvblk_probe_cb(struct dma_buf_attachment *a)
{
}
const struct dma_buf_attach_ops kvblk_probe_ops = {
	.invalidate_mappings = kvblk_probe_cb,
};
EOF

# ... or .move_notify (6.1, 6.12; required there by dma_buf_dynamic_attach).
probe DMA_BUF_OPS_MOVE_NOTIFY <<'EOF'
#include <linux/dma-buf.h>
static void kvblk_probe_cb(struct dma_buf_attachment *a)
{
}
const struct dma_buf_attach_ops kvblk_probe_ops = {
	.move_notify = kvblk_probe_cb,
};
EOF

# The exporter's call is dma_buf_invalidate_mappings() (7.2), else
# dma_buf_move_notify() (the test exporter, tests/kmod-exporters).
probe DMA_BUF_INVALIDATE_MAPPINGS <<'EOF'
#include <linux/dma-buf.h>
void kvblk_probe(struct dma_buf *d);
void kvblk_probe(struct dma_buf *d)
{
	dma_buf_invalidate_mappings(d);
}
EOF

# ---- io_uring command (uring.c) ----
# <linux/io_uring/cmd.h> declares struct io_uring_cmd (6.12, 7.2); before,
# <linux/io_uring.h> did (6.1).
probe IO_URING_CMD_H <<'EOF'
#include <linux/io_uring/cmd.h>
u32 kvblk_probe(struct io_uring_cmd *c);
u32 kvblk_probe(struct io_uring_cmd *c)
{
	return c->cmd_op;
}
EOF

# The SQE's command area is io_uring_cmd::cmd (6.1) ...
probe URING_CMD_CMD <<'EOF'
#include <linux/io_uring.h>
const void *kvblk_probe(struct io_uring_cmd *c);
const void *kvblk_probe(struct io_uring_cmd *c)
{
	return c->cmd;
}
EOF

# ... or io_uring_cmd::sqe->cmd (6.12, 7.2).
probe URING_CMD_SQE <<'EOF'
#include <linux/io_uring/cmd.h>
const void *kvblk_probe(struct io_uring_cmd *c);
const void *kvblk_probe(struct io_uring_cmd *c)
{
	return c->sqe->cmd;
}
EOF

# io_uring_cmd_done(cmd, ret, res2, issue_flags) (6.1 stable, 6.12) ...
probe URING_CMD_DONE_RES2 <<'EOF'
#if __has_include(<linux/io_uring/cmd.h>)
#include <linux/io_uring/cmd.h>
#else
#include <linux/io_uring.h>
#endif
void kvblk_probe(struct io_uring_cmd *c, unsigned int f);
void kvblk_probe(struct io_uring_cmd *c, unsigned int f)
{
	io_uring_cmd_done(c, 0, 0, f);
}
EOF

# ... or io_uring_cmd_done(cmd, ret, issue_flags) (7.2).
probe URING_CMD_DONE_3 <<'EOF'
#include <linux/io_uring/cmd.h>
void kvblk_probe(struct io_uring_cmd *c, unsigned int f);
void kvblk_probe(struct io_uring_cmd *c, unsigned int f)
{
	io_uring_cmd_done(c, 0, f);
}
EOF

# io_uring_cmd_complete_in_task() takes a callback of
# (struct io_uring_cmd *, unsigned int issue_flags) (6.1, 6.12) ...
probe URING_CMD_TW_CMD <<'EOF'
#if __has_include(<linux/io_uring/cmd.h>)
#include <linux/io_uring/cmd.h>
#else
#include <linux/io_uring.h>
#endif
static void kvblk_probe_cb(struct io_uring_cmd *c, unsigned int f)
{
}
void kvblk_probe(struct io_uring_cmd *c);
void kvblk_probe(struct io_uring_cmd *c)
{
	io_uring_cmd_complete_in_task(c, kvblk_probe_cb);
}
EOF

# ... or of (struct io_tw_req, io_tw_token_t) with io_uring_cmd_from_tw()
# and IO_URING_CMD_TASK_WORK_ISSUE_FLAGS (7.2).
probe URING_CMD_TW_REQ <<'EOF'
#include <linux/io_uring/cmd.h>
static void kvblk_probe_cb(struct io_tw_req tw_req, io_tw_token_t tw)
{
	struct io_uring_cmd *c = io_uring_cmd_from_tw(tw_req);

	io_uring_cmd_done(c, tw.cancel, IO_URING_CMD_TASK_WORK_ISSUE_FLAGS);
}
void kvblk_probe(struct io_uring_cmd *c);
void kvblk_probe(struct io_uring_cmd *c)
{
	io_uring_cmd_complete_in_task(c, kvblk_probe_cb);
}
EOF

# Multishot commands with provided buffers: io_uring_cmd_buffer_select()
# and io_uring_mshot_cmd_post_cqe() taking its struct io_br_sel, with
# IORING_URING_CMD_MULTISHOT (7.2; 6.1 and 6.12 have no way for a command
# to post more than one CQE). uring.c then offers one CQE per object
# (KVBLK_URING_F_PER_OBJECT) and GET_FEATURES reports
# KVBLK_FEAT_URING_PER_OBJECT; without it the flag is -EOPNOTSUPP.
probe URING_CMD_MSHOT <<'EOF'
#include <linux/io_uring/cmd.h>
bool kvblk_probe(struct io_uring_cmd *c, unsigned int f);
bool kvblk_probe(struct io_uring_cmd *c, unsigned int f)
{
	size_t len = 0;
	struct io_br_sel sel = io_uring_cmd_buffer_select(c, 0, &len, f);

	if (!(c->flags & IORING_URING_CMD_MULTISHOT) || !sel.addr)
		return false;
	sel.val = len;
	return io_uring_mshot_cmd_post_cqe(c, &sel, f);
}
EOF

objs=
for f in "$tmp"/probe_*.c; do
	objs="$objs $(basename "$f" .c).o"
done
{
	echo "obj-m := $objs"
	echo "ccflags-y := -Werror"
} >"$tmp/Kbuild"

# shellcheck disable=SC2086
make -k -s -C "$KDIR" M="$tmp" $objs >"$tmp/build.log" 2>&1 || true

if [ ! -f "$tmp/probe_CANARY.o" ]; then
	echo "conftest.sh: the always-true probe did not compile against $KDIR;" >&2
	echo "conftest.sh: the probe build is broken. Its log:" >&2
	cat "$tmp/build.log" >&2
	exit 1
fi

# ---- optional parts: KVBLK_WITH_<PART>, one source file each ----
have() {	# have NAME: probe NAME compiled
	[ -f "$tmp/probe_$1.o" ]
}
kconfig() {	# kconfig CONFIG_X: the option is =y or =m (IS_ENABLED())
	grep -q "^$1=[ym]\$" "$KDIR/include/config/auto.conf"
}
with=
part() {	# part NAME: NAME is built
	with="$with $1"
}

# DMABUF, mem_dmabuf.c (KVBLK_MEM_DMABUF): dma-buf support, the dynamic
# importer interface and one of the two names of the importer's
# notification, .invalidate_mappings (7.2) or .move_notify (6.1, 6.12).
if kconfig CONFIG_DMA_SHARED_BUFFER && have DMA_BUF_IMPORTER &&
   { have DMA_BUF_OPS_INVALIDATE_MAPPINGS || have DMA_BUF_OPS_MOVE_NOTIFY; }; then
	part DMABUF
fi

# P2PDMA, mem_p2pdma.c (KVBLK_MEM_P2PDMA): PCI P2PDMA and GUP that admits
# its pages (FOLL_PCI_P2PDMA).
if kconfig CONFIG_PCI_P2PDMA && have FOLL_PCI_P2PDMA; then
	part P2PDMA
fi

# URING_CMD, uring.c (IORING_OP_URING_CMD on /dev/kvblk): io_uring, a way
# to reach the SQE's command area (io_uring_cmd::cmd on 6.1, ::sqe->cmd on
# 6.12 and 7.2), one of the two io_uring_cmd_done() forms and one of the
# two task-work callback forms. Without it file_operations.uring_cmd stays
# unset (io_uring answers -EOPNOTSUPP) and GET_FEATURES lacks
# KVBLK_FEAT_URING_CMD. Its one CQE per object needs URING_CMD_MSHOT too
# (KVBLK_HAVE_URING_CMD_MSHOT in uring.c, not a part of its own).
if kconfig CONFIG_IO_URING &&
   { have URING_CMD_CMD || have URING_CMD_SQE; } &&
   { have URING_CMD_DONE_RES2 || have URING_CMD_DONE_3; } &&
   { have URING_CMD_TW_CMD || have URING_CMD_TW_REQ; }; then
	part URING_CMD
fi

{
	echo "/* SPDX""-License-Identifier: GPL-2.0 */"
	echo "/* Generated by conftest.sh for $KDIR; do not edit. */"
	echo "#ifndef KVBLK_CONFTEST_H"
	echo "#define KVBLK_CONFTEST_H"
	for f in "$tmp"/probe_*.c; do
		name=$(basename "$f" .c)
		name=${name#probe_}
		if have "$name"; then
			echo "#define KVBLK_HAVE_$name 1"
		else
			echo "/* #undef KVBLK_HAVE_$name */"
		fi
	done
	# Exported symbols (the module links against them).
	for sym in nvme_init_request; do
		uc=$(echo "$sym" | tr a-z A-Z)
		if [ ! -f "$KDIR/Module.symvers" ] ||
		   grep -q "[[:space:]]$sym[[:space:]]" "$KDIR/Module.symvers"; then
			echo "#define KVBLK_HAVE_SYM_$uc 1"
		else
			echo "/* #undef KVBLK_HAVE_SYM_$uc */"
		fi
	done
	echo "/* Optional parts (conftest.mk: kmod/Kbuild builds their files). */"
	for p in DMABUF P2PDMA URING_CMD; do
		case " $with " in
		*" $p "*) echo "#define KVBLK_WITH_$p 1" ;;
		*) echo "/* #undef KVBLK_WITH_$p */" ;;
		esac
	done
	echo "#endif /* KVBLK_CONFTEST_H */"
} >"$tmp/conftest.h"

{
	echo "# SPDX""-License-Identifier: GPL-2.0"
	echo "# Generated by conftest.sh for $KDIR; do not edit."
	echo "# Optional parts of kvblk.ko (kmod/Kbuild): y built, empty left out."
	for p in DMABUF P2PDMA URING_CMD; do
		case " $with " in
		*" $p "*) echo "KVBLK_WITH_$p := y" ;;
		*) echo "KVBLK_WITH_$p :=" ;;
		esac
	done
} >"$tmp/conftest.mk"

if [ -n "${KVBLK_CONFTEST_LOG:-}" ]; then
	cp "$tmp/build.log" "$KVBLK_CONFTEST_LOG"
fi

if ! cmp -s "$tmp/conftest.h" "$OUT" 2>/dev/null; then
	cp "$tmp/conftest.h" "$OUT"
fi
if ! cmp -s "$tmp/conftest.mk" "$MK" 2>/dev/null; then
	cp "$tmp/conftest.mk" "$MK"
fi
