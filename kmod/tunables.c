// SPDX-License-Identifier: GPL-2.0
/*
 * tunables.c - module parameters and per-namespace tunables.
 *
 * The module parameters are the defaults a namespace object takes when it
 * is created (first attach); /sys/kernel/kvblk/<disk>/{max_cmd_bytes,
 * max_inflight,max_descs} change one namespace. Both are range-checked the
 * same way and refuse a bad value with -EINVAL:
 *
 *   max_cmd_bytes  4096 .. 8 MiB, a multiple of 4096, fixed when a
 *                  context attaches: the block-layer engines' command size
 *                  (the block layer splits further), the PRP engine's
 *                  capped at the controller's limit.
 *   max_inflight   1 .. 65536 NVMe commands in flight per LOAD_MANY call,
 *                  read at every call.
 *   max_descs      1 .. 65536 descriptors per LOAD_MANY call, read at every
 *                  call.
 */
#include <linux/kernel.h>
#include <linux/moduleparam.h>
#include <linux/sysfs.h>

#include "kvblk.h"

enum kvblk_tunable {
	KVBLK_TUN_MAX_CMD_BYTES,
	KVBLK_TUN_MAX_INFLIGHT,
	KVBLK_TUN_MAX_DESCS,
};

struct kvblk_tunable_range {
	u32 min;
	u32 max;
	u32 align;
};

static const struct kvblk_tunable_range kvblk_ranges[] = {
	[KVBLK_TUN_MAX_CMD_BYTES] = { KVBLK_MAX_CMD_BYTES_MIN,
				      KVBLK_MAX_CMD_BYTES_MAX,
				      KVBLK_CTRL_PAGE_SIZE },
	[KVBLK_TUN_MAX_INFLIGHT]  = { KVBLK_MAX_INFLIGHT_MIN,
				      KVBLK_MAX_INFLIGHT_MAX, 1 },
	[KVBLK_TUN_MAX_DESCS]	  = { KVBLK_MAX_DESCS_MIN,
				      KVBLK_MAX_DESCS_MAX, 1 },
};

static int kvblk_tunable_parse(enum kvblk_tunable t, const char *s, u32 *val)
{
	const struct kvblk_tunable_range *r = &kvblk_ranges[t];
	u32 v;

	if (kstrtou32(s, 0, &v))
		return -EINVAL;
	if (v < r->min || v > r->max || v % r->align)
		return -EINVAL;
	*val = v;
	return 0;
}

/* Module parameters. */

unsigned int g_max_cmd_bytes = KVBLK_MAX_CMD_BYTES_DEF;
unsigned int g_max_inflight = KVBLK_MAX_INFLIGHT_DEF;
unsigned int g_max_descs = KVBLK_MAX_DESCS_DEF;

static int kvblk_param_set(const char *val, const struct kernel_param *kp,
			   enum kvblk_tunable t)
{
	u32 v;
	int ret;

	ret = kvblk_tunable_parse(t, val, &v);
	if (ret)
		return ret;
	WRITE_ONCE(*(unsigned int *)kp->arg, v);
	return 0;
}

static int kvblk_param_set_max_cmd_bytes(const char *val,
					 const struct kernel_param *kp)
{
	return kvblk_param_set(val, kp, KVBLK_TUN_MAX_CMD_BYTES);
}

static int kvblk_param_set_max_inflight(const char *val,
					const struct kernel_param *kp)
{
	return kvblk_param_set(val, kp, KVBLK_TUN_MAX_INFLIGHT);
}

static int kvblk_param_set_max_descs(const char *val,
				     const struct kernel_param *kp)
{
	return kvblk_param_set(val, kp, KVBLK_TUN_MAX_DESCS);
}

static const struct kernel_param_ops kvblk_max_cmd_bytes_ops = {
	.set = kvblk_param_set_max_cmd_bytes,
	.get = param_get_uint,
};

static const struct kernel_param_ops kvblk_max_inflight_ops = {
	.set = kvblk_param_set_max_inflight,
	.get = param_get_uint,
};

static const struct kernel_param_ops kvblk_max_descs_ops = {
	.set = kvblk_param_set_max_descs,
	.get = param_get_uint,
};

module_param_cb(max_cmd_bytes, &kvblk_max_cmd_bytes_ops, &g_max_cmd_bytes, 0644);
MODULE_PARM_DESC(max_cmd_bytes,
		 "Largest NVMe command in bytes for new namespaces, 4096..8388608, multiple of 4096, capped by the controller (MDTS). Default: 1048576");
module_param_cb(max_inflight, &kvblk_max_inflight_ops, &g_max_inflight, 0644);
MODULE_PARM_DESC(max_inflight,
		 "NVMe commands in flight per LOAD_MANY call for new namespaces, 1..65536. Default: 256");
module_param_cb(max_descs, &kvblk_max_descs_ops, &g_max_descs, 0644);
MODULE_PARM_DESC(max_descs,
		 "Descriptors per LOAD_MANY call for new namespaces, 1..65536. Default: 4096");

/* Per-namespace sysfs files. */

#define to_kvblk_ns(k) container_of(k, struct kvblk_ns, kobj)

/* A per-namespace tunable file: which tunable, and its u32 in struct kvblk_ns. */
struct kvblk_tunable_attr {
	struct kobj_attribute attr;
	enum kvblk_tunable id;
	size_t off;
};

static u32 *kvblk_tunable_field(struct kobject *kobj, struct kobj_attribute *attr)
{
	const struct kvblk_tunable_attr *t = container_of(attr, struct kvblk_tunable_attr, attr);

	return (u32 *)((char *)to_kvblk_ns(kobj) + t->off);
}

static ssize_t kvblk_tunable_show(struct kobject *kobj, struct kobj_attribute *attr,
				  char *buf)
{
	return sysfs_emit(buf, "%u\n", READ_ONCE(*kvblk_tunable_field(kobj, attr)));
}

static ssize_t kvblk_tunable_store(struct kobject *kobj, struct kobj_attribute *attr,
				   const char *buf, size_t count)
{
	const struct kvblk_tunable_attr *t = container_of(attr, struct kvblk_tunable_attr, attr);
	u32 v;
	int ret = kvblk_tunable_parse(t->id, buf, &v);

	if (ret)
		return ret;
	WRITE_ONCE(*kvblk_tunable_field(kobj, attr), v);
	return count;
}

static struct kvblk_tunable_attr kvblk_tun_max_cmd_bytes = {
	.attr = __ATTR(max_cmd_bytes, 0644, kvblk_tunable_show, kvblk_tunable_store),
	.id = KVBLK_TUN_MAX_CMD_BYTES,
	.off = offsetof(struct kvblk_ns, max_cmd_bytes),
};

static struct kvblk_tunable_attr kvblk_tun_max_inflight = {
	.attr = __ATTR(max_inflight, 0644, kvblk_tunable_show, kvblk_tunable_store),
	.id = KVBLK_TUN_MAX_INFLIGHT,
	.off = offsetof(struct kvblk_ns, max_inflight),
};

static struct kvblk_tunable_attr kvblk_tun_max_descs = {
	.attr = __ATTR(max_descs, 0644, kvblk_tunable_show, kvblk_tunable_store),
	.id = KVBLK_TUN_MAX_DESCS,
	.off = offsetof(struct kvblk_ns, max_descs),
};

static struct attribute *kvblk_tunables_attrs[] = {
	&kvblk_tun_max_cmd_bytes.attr.attr,
	&kvblk_tun_max_inflight.attr.attr,
	&kvblk_tun_max_descs.attr.attr,
	NULL,
};

const struct attribute_group kvblk_tunables_group = {
	.attrs = kvblk_tunables_attrs,
};
