#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# conftest.sh - compile-time feature tests for kvblk.ko.
#
# Usage: conftest.sh KDIR OUT
#   KDIR  kernel build directory (/lib/modules/<ver>/build)
#   OUT   header to write (kmod/conftest.h); rewritten only when it changes
#
# Every test is a tiny C file compiled against KDIR with the kernel's own
# flags (one kbuild run builds all probes; -k keeps going past failures).
# A probe that compiles defines KVBLK_HAVE_<NAME> in OUT. Symbol tests look
# the export up in KDIR/Module.symvers. No test looks at version numbers:
# distribution kernels backport, so only the interface itself is asked.

set -eu

KDIR=${1:?usage: conftest.sh KDIR OUT}
OUT=${2:?usage: conftest.sh KDIR OUT}

[ -f "$KDIR/Makefile" ] || {
	echo "conftest.sh: no kernel build tree at $KDIR (install the kernel headers)" >&2
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

# dma_max_mapping_size() (swiotlb-aware segment limit).
probe DMA_MAX_MAPPING_SIZE <<'EOF'
#include <linux/dma-mapping.h>
size_t kvblk_probe(struct device *dev);
size_t kvblk_probe(struct device *dev)
{
	return dma_max_mapping_size(dev);
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

{
	echo "/* SPDX""-License-Identifier: GPL-2.0 */"
	echo "/* Generated by conftest.sh for $KDIR; do not edit. */"
	echo "#ifndef KVBLK_CONFTEST_H"
	echo "#define KVBLK_CONFTEST_H"
	for f in "$tmp"/probe_*.c; do
		name=$(basename "$f" .c)
		name=${name#probe_}
		if [ -f "$tmp/probe_$name.o" ]; then
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
	echo "#endif /* KVBLK_CONFTEST_H */"
} >"$tmp/conftest.h"

if [ -n "${KVBLK_CONFTEST_LOG:-}" ]; then
	cp "$tmp/build.log" "$KVBLK_CONFTEST_LOG"
fi

if ! cmp -s "$tmp/conftest.h" "$OUT" 2>/dev/null; then
	cp "$tmp/conftest.h" "$OUT"
fi
