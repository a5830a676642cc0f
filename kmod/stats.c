// SPDX-License-Identifier: GPL-2.0
/*
 * stats.c - per-namespace counters, per CPU, and /sys/kernel/kvblk/<disk>/stats.
 *
 * Every file holds one decimal value, except the two histograms:
 * cmd_latency_us and batch_latency_us print one line per log2 bucket,
 * "<lower bound in us> <count>": bucket 0 counts [0, 1) us, bucket b > 0
 * counts [2^(b-1), 2^b) us; the last bucket also takes everything above.
 * Command latency runs from submission to completion callback; batch
 * latency from the first submission to the last completion.
 */
#include <linux/bitops.h>
#include <linux/math64.h>
#include <linux/percpu.h>
#include <linux/sysfs.h>

#include "kvblk.h"

/**
 * kvblk_stats_init() - allocate the per-CPU counters.
 * @st: counters of one namespace.
 *
 * Return: 0 or -ENOMEM.
 */
int kvblk_stats_init(struct kvblk_stats *st)
{
	st->pcpu = alloc_percpu(struct kvblk_pcpu_stats);
	if (!st->pcpu)
		return -ENOMEM;
	atomic_set(&st->inflight, 0);
	atomic_set(&st->inflight_peak, 0);
	return 0;
}

/**
 * kvblk_stats_free() - free the per-CPU counters.
 * @st: counters of one namespace.
 */
void kvblk_stats_free(struct kvblk_stats *st)
{
	free_percpu(st->pcpu);
	st->pcpu = NULL;
}

/**
 * kvblk_lat_bucket() - log2 histogram bucket of a latency.
 * @ns: latency in nanoseconds.
 *
 * Return: 0 for under 1 us, else fls64(us) capped at the last bucket.
 */
unsigned int kvblk_lat_bucket(u64 ns)
{
	unsigned int b = fls64(div_u64(ns, NSEC_PER_USEC));

	return min_t(unsigned int, b, KVBLK_HIST_BUCKETS - 1);
}

/**
 * kvblk_stats_inflight_inc() - one more command in flight; track the peak.
 * @st: counters of one namespace.
 */
void kvblk_stats_inflight_inc(struct kvblk_stats *st)
{
	int now = atomic_inc_return(&st->inflight);
	int peak = atomic_read(&st->inflight_peak);

	while (now > peak && !atomic_try_cmpxchg(&st->inflight_peak, &peak, now))
		;
}

/*
 * Bytes of command slots the module holds, all contexts together: the slot
 * arrays of batches and those kept by open files (kvblk_ctx.spare_slots),
 * with the bio_vec arrays their slots keep. /sys/kernel/kvblk/slot_bytes.
 */
static atomic_long_t kvblk_slot_bytes = ATOMIC_LONG_INIT(0);

/**
 * kvblk_slot_bytes_add() - count slot memory allocated (@bytes > 0) or freed.
 * @bytes: the size the allocation asked for, negative when it is freed.
 */
void kvblk_slot_bytes_add(long bytes)
{
	atomic_long_add(bytes, &kvblk_slot_bytes);
}

static ssize_t slot_bytes_show(struct kobject *kobj, struct kobj_attribute *attr,
			       char *buf)
{
	return sysfs_emit(buf, "%ld\n", atomic_long_read(&kvblk_slot_bytes));
}

static struct kobj_attribute kvblk_attr_slot_bytes = __ATTR_RO(slot_bytes);

static struct attribute *kvblk_root_attrs[] = {
	&kvblk_attr_slot_bytes.attr,
	NULL,
};

/* The files of /sys/kernel/kvblk itself (ns.c creates the directory). */
const struct attribute_group kvblk_root_group = {
	.attrs	= kvblk_root_attrs,
};

#define to_kvblk_ns(k) container_of(k, struct kvblk_ns, kobj)

static u64 kvblk_stat_sum(const struct kvblk_ns *ns, size_t off)
{
	u64 sum = 0;
	int cpu;

	for_each_possible_cpu(cpu)
		sum += *(u64 *)((char *)per_cpu_ptr(ns->stats.pcpu, cpu) + off);
	return sum;
}

#define KVBLK_STAT_ATTR(_name, _field)						\
static ssize_t _name##_show(struct kobject *kobj,				\
			    struct kobj_attribute *attr, char *buf)		\
{										\
	return sysfs_emit(buf, "%llu\n",					\
			  kvblk_stat_sum(to_kvblk_ns(kobj),			\
					 offsetof(struct kvblk_pcpu_stats, _field))); \
}										\
static struct kobj_attribute kvblk_stat_##_name = __ATTR_RO(_name)

KVBLK_STAT_ATTR(batches, batches);
KVBLK_STAT_ATTR(batches_interrupted, batches_interrupted);
KVBLK_STAT_ATTR(objects, objects);
KVBLK_STAT_ATTR(objects_failed, objects_failed);
KVBLK_STAT_ATTR(commands, commands);
KVBLK_STAT_ATTR(bytes, bytes);
KVBLK_STAT_ATTR(bytes_written, bytes_written);
KVBLK_STAT_ATTR(errors_io, errors[KVBLK_ERR_IO]);
KVBLK_STAT_ATTR(errors_media, errors[KVBLK_ERR_MEDIA]);
KVBLK_STAT_ATTR(errors_transport, errors[KVBLK_ERR_TRANSPORT]);
KVBLK_STAT_ATTR(errors_other, errors[KVBLK_ERR_OTHER]);

static ssize_t inflight_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  atomic_read(&to_kvblk_ns(kobj)->stats.inflight));
}

static ssize_t inflight_peak_show(struct kobject *kobj,
				  struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%d\n",
			  atomic_read(&to_kvblk_ns(kobj)->stats.inflight_peak));
}

static ssize_t kvblk_hist_show(const struct kvblk_ns *ns, size_t off, char *buf)
{
	unsigned int b;
	int len = 0;

	for (b = 0; b < KVBLK_HIST_BUCKETS; b++) {
		u64 lo = b ? 1ULL << (b - 1) : 0;

		len += sysfs_emit_at(buf, len, "%llu %llu\n", lo,
				     kvblk_stat_sum(ns, off + b * sizeof(u64)));
	}
	return len;
}

static ssize_t cmd_latency_us_show(struct kobject *kobj,
				   struct kobj_attribute *attr, char *buf)
{
	return kvblk_hist_show(to_kvblk_ns(kobj),
			       offsetof(struct kvblk_pcpu_stats, cmd_lat), buf);
}

static ssize_t batch_latency_us_show(struct kobject *kobj,
				     struct kobj_attribute *attr, char *buf)
{
	return kvblk_hist_show(to_kvblk_ns(kobj),
			       offsetof(struct kvblk_pcpu_stats, batch_lat), buf);
}

static struct kobj_attribute kvblk_stat_inflight = __ATTR_RO(inflight);
static struct kobj_attribute kvblk_stat_inflight_peak = __ATTR_RO(inflight_peak);
static struct kobj_attribute kvblk_stat_cmd_latency_us = __ATTR_RO(cmd_latency_us);
static struct kobj_attribute kvblk_stat_batch_latency_us = __ATTR_RO(batch_latency_us);

static struct attribute *kvblk_stats_attrs[] = {
	&kvblk_stat_batches.attr,
	&kvblk_stat_batches_interrupted.attr,
	&kvblk_stat_objects.attr,
	&kvblk_stat_objects_failed.attr,
	&kvblk_stat_commands.attr,
	&kvblk_stat_bytes.attr,
	&kvblk_stat_bytes_written.attr,
	&kvblk_stat_errors_io.attr,
	&kvblk_stat_errors_media.attr,
	&kvblk_stat_errors_transport.attr,
	&kvblk_stat_errors_other.attr,
	&kvblk_stat_inflight.attr,
	&kvblk_stat_inflight_peak.attr,
	&kvblk_stat_cmd_latency_us.attr,
	&kvblk_stat_batch_latency_us.attr,
	NULL,
};

const struct attribute_group kvblk_stats_group = {
	.name	= "stats",
	.attrs	= kvblk_stats_attrs,
};
