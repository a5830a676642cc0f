// SPDX-License-Identifier: GPL-2.0
/*
 * ns.c - per-disk objects: one per disk with an attached context, shared by
 * every context attached to it, to one of its partitions or to a file on a
 * file system on it, whatever their engines.
 *
 * /sys/kernel/kvblk/<disk>/      info and tunables (tunables.c)
 * /sys/kernel/kvblk/<disk>/stats counters (stats.c)
 *
 * The object lives while at least one context is attached; once a PRP
 * context attaches it owns the dma_pools of PRP lists for the namespace's
 * PCI function, until the object goes.
 */
#include <linux/blkdev.h>
#include <linux/device.h>
#include <linux/dmapool.h>
#include <linux/list.h>
#include <linux/slab.h>
#include <linux/sysfs.h>

#include "kvblk.h"

static LIST_HEAD(kvblk_ns_list);
static DEFINE_MUTEX(kvblk_ns_lock);
static struct kobject *kvblk_root;	/* /sys/kernel/kvblk */

#define to_kvblk_ns(k) container_of(k, struct kvblk_ns, kobj)

static ssize_t nsid_show(struct kobject *kobj, struct kobj_attribute *attr,
			 char *buf)
{
	return sysfs_emit(buf, "%u\n", to_kvblk_ns(kobj)->info.nsid);
}

/* The disk's logical block size now (a Format NVM may have changed it). */
static ssize_t lba_size_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	return sysfs_emit(buf, "%u\n",
			  queue_logical_block_size(to_kvblk_ns(kobj)->info.q));
}

static ssize_t hw_max_cmd_bytes_show(struct kobject *kobj,
				     struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", to_kvblk_ns(kobj)->info.hw_max_bytes);
}

static ssize_t nr_hw_queues_show(struct kobject *kobj,
				 struct kobj_attribute *attr, char *buf)
{
	return sysfs_emit(buf, "%u\n", to_kvblk_ns(kobj)->info.nr_hw_queues);
}

static ssize_t pci_dev_show(struct kobject *kobj, struct kobj_attribute *attr,
			    char *buf)
{
	struct device *dev = READ_ONCE(to_kvblk_ns(kobj)->info.dma_dev);

	return sysfs_emit(buf, "%s\n", dev ? dev_name(dev) : "none");
}

static ssize_t dev_show(struct kobject *kobj, struct kobj_attribute *attr,
			char *buf)
{
	dev_t devt = to_kvblk_ns(kobj)->info.devt;

	return sysfs_emit(buf, "%u:%u\n", MAJOR(devt), MINOR(devt));
}

static const char *const kvblk_engine_names[KVBLK_ENGINE_NR] = {
	[KVBLK_ENGINE_PRP] = "prp",
	[KVBLK_ENGINE_BIO] = "bio",
	[KVBLK_ENGINE_FILE] = "file",
};

/*
 * The engines of the targets attached now, e.g. "prp", "bio file", or
 * "prp bio" for a namespace attached without an engine flag (the
 * block-layer engine, and the PRP engine for memory without struct pages).
 */
static ssize_t engine_show(struct kobject *kobj, struct kobj_attribute *attr,
			   char *buf)
{
	struct kvblk_ns *ns = to_kvblk_ns(kobj);
	ssize_t len = 0;
	unsigned int i;

	for (i = 0; i < KVBLK_ENGINE_NR; i++)
		if (kvblk_engine_names[i] && READ_ONCE(ns->engine_users[i]))
			len += sysfs_emit_at(buf, len, "%s%s", len ? " " : "",
					     kvblk_engine_names[i]);
	return len + sysfs_emit_at(buf, len, "\n");
}

static ssize_t attached_show(struct kobject *kobj, struct kobj_attribute *attr,
			     char *buf)
{
	/*
	 * No kvblk_ns_lock here: kvblk_ns_put() removes this directory under
	 * that lock, and kobject_del() waits for readers of it to finish.
	 */
	return sysfs_emit(buf, "%u\n", READ_ONCE(to_kvblk_ns(kobj)->users));
}

static struct kobj_attribute kvblk_attr_nsid = __ATTR_RO(nsid);
static struct kobj_attribute kvblk_attr_lba_size = __ATTR_RO(lba_size);
static struct kobj_attribute kvblk_attr_hw_max_cmd_bytes = __ATTR_RO(hw_max_cmd_bytes);
static struct kobj_attribute kvblk_attr_nr_hw_queues = __ATTR_RO(nr_hw_queues);
static struct kobj_attribute kvblk_attr_pci_dev = __ATTR_RO(pci_dev);
static struct kobj_attribute kvblk_attr_dev = __ATTR_RO(dev);
static struct kobj_attribute kvblk_attr_engine = __ATTR_RO(engine);
static struct kobj_attribute kvblk_attr_attached = __ATTR_RO(attached);

static struct attribute *kvblk_info_attrs[] = {
	&kvblk_attr_nsid.attr,
	&kvblk_attr_lba_size.attr,
	&kvblk_attr_hw_max_cmd_bytes.attr,
	&kvblk_attr_nr_hw_queues.attr,
	&kvblk_attr_pci_dev.attr,
	&kvblk_attr_dev.attr,
	&kvblk_attr_engine.attr,
	&kvblk_attr_attached.attr,
	NULL,
};

static const struct attribute_group kvblk_info_group = {
	.attrs = kvblk_info_attrs,
};

static const struct attribute_group *kvblk_ns_groups[] = {
	&kvblk_info_group,
	&kvblk_tunables_group,
	&kvblk_stats_group,
	NULL,
};

static void kvblk_ns_release(struct kobject *kobj)
{
	struct kvblk_ns *ns = to_kvblk_ns(kobj);

	kvblk_stats_free(&ns->stats);
	kfree(ns);
}

static struct kobj_type kvblk_ns_ktype = {
	.release	= kvblk_ns_release,
	.sysfs_ops	= &kobj_sysfs_ops,
	.default_groups	= kvblk_ns_groups,
};

/*
 * The PRP engine's state: the NVMe PCI function and its PRP list pools.
 * Called under kvblk_ns_lock by the first PRP attach of the disk.
 */
static int kvblk_ns_prp_init(struct kvblk_ns *ns, const struct kvblk_ns_info *info)
{
	int ret;

	/*
	 * A namespace whose PCI function was removed serves no PRP context
	 * again; nor does a function the nvme driver is no longer bound to
	 * (the removal's notification, which takes kvblk_ns_lock, comes after
	 * the driver is unbound: it finds this object if this one saw the
	 * driver).
	 */
	if (ns->dead || !READ_ONCE(info->dma_dev->driver))
		return -ENODEV;
	if (ns->prp_pools.page)
		return 0;
	ret = kvblk_prp_pools_create(&ns->prp_pools, info->dma_dev, ns->name);
	if (ret)
		return ret;
	ns->info.nsid = info->nsid;
	WRITE_ONCE(ns->info.dma_dev, get_device(info->dma_dev));
	return 0;
}

static void kvblk_ns_prp_exit(struct kvblk_ns *ns)
{
	if (!ns->info.dma_dev)
		return;
	/* Gone already if the PCI function was removed (kvblk_ns_killed()). */
	mutex_lock(&ns->dma_lock);
	kvblk_prp_pools_destroy(&ns->prp_pools);
	mutex_unlock(&ns->dma_lock);
	put_device(ns->info.dma_dev);
}

/* Is @name the directory of a live object? Under kvblk_ns_lock. */
static bool kvblk_ns_name_taken(const char *name)
{
	struct kvblk_ns *ns;

	list_for_each_entry(ns, &kvblk_ns_list, node)
		if (!strcmp(ns->name, name))
			return true;
	return false;
}

static struct kvblk_ns *kvblk_ns_create(const struct kvblk_ns_info *info)
{
	struct kvblk_ns *ns;
	int ret;

	ns = kzalloc(sizeof(*ns), GFP_KERNEL);
	if (!ns)
		return ERR_PTR(-ENOMEM);
	ns->info = *info;
	ns->info.dma_dev = NULL;	/* kvblk_ns_prp_init() */
	ns->info.nsid = 0;
	strscpy(ns->name, info->disk->disk_name, sizeof(ns->name));
	/*
	 * A disk of the same name while another context still holds the
	 * removed disk that had it: a directory of its own, <disk>@<diskseq>,
	 * instead of -EBUSY and the kernel's "cannot create duplicate
	 * filename" stack dump (review L6).
	 */
	if (kvblk_ns_name_taken(ns->name))
		snprintf(ns->name, sizeof(ns->name), "%s@%llu",
			 info->disk->disk_name, info->disk->diskseq);
	ns->max_cmd_bytes = READ_ONCE(g_max_cmd_bytes);
	ns->max_inflight = READ_ONCE(g_max_inflight);
	ns->max_descs = READ_ONCE(g_max_descs);
	atomic_set(&ns->prp_batches, 0);
	init_waitqueue_head(&ns->prp_wq);
	mutex_init(&ns->dma_lock);
	INIT_LIST_HEAD(&ns->dead_node);

	ret = kvblk_stats_init(&ns->stats);
	if (ret) {
		kfree(ns);
		return ERR_PTR(ret);
	}
	ret = kobject_init_and_add(&ns->kobj, &kvblk_ns_ktype, kvblk_root, "%s",
				   ns->name);
	if (ret) {
		/* A stale disk of the same name is still attached. */
		kobject_put(&ns->kobj);		/* frees ns and its stats */
		return ERR_PTR(ret == -EEXIST ? -EBUSY : ret);
	}
	return ns;
}

/**
 * kvblk_ns_get() - the object of a disk; created on the first attach.
 * @info: identity and limits found by attach; with the PRP engine in
 *        @engines, info->dma_dev and info->nsid are the namespace's and
 *        info->dma_dev is referenced by the object (its PRP pools).
 * @engines: the attaching target's engines, 1 << enum kvblk_engine each
 *        (kvblk_engine_mask()): each is counted for sysfs (engine).
 *
 * Return: the object with one more user, or ERR_PTR(-ENOMEM), or
 * ERR_PTR(-EBUSY) when a different disk of the same name is still attached,
 * or ERR_PTR(-ENODEV) with the PRP engine when the namespace's PCI function
 * is being removed (or its nvme driver unbound).
 */
struct kvblk_ns *kvblk_ns_get(const struct kvblk_ns_info *info, u32 engines)
{
	struct kvblk_ns *ns;
	bool found = false;
	unsigned int i;
	int ret = 0;

	mutex_lock(&kvblk_ns_lock);
	list_for_each_entry(ns, &kvblk_ns_list, node) {
		if (ns->info.disk == info->disk) {
			found = true;
			break;
		}
	}
	if (!found) {
		ns = kvblk_ns_create(info);
		if (IS_ERR(ns))
			goto out_unlock;
	}
	if (engines & BIT(KVBLK_ENGINE_PRP))
		ret = kvblk_ns_prp_init(ns, info);
	if (ret) {
		if (!found) {
			kobject_del(&ns->kobj);
			kobject_put(&ns->kobj);
		}
		ns = ERR_PTR(ret);
		goto out_unlock;
	}
	if (!found)
		list_add(&ns->node, &kvblk_ns_list);
	WRITE_ONCE(ns->users, ns->users + 1);
	for (i = 0; i < KVBLK_ENGINE_NR; i++)
		if (engines & BIT(i))
			WRITE_ONCE(ns->engine_users[i], ns->engine_users[i] + 1);
out_unlock:
	mutex_unlock(&kvblk_ns_lock);
	return ns;
}

/**
 * kvblk_ns_put() - one user less; the last one removes the object.
 * @ns: the object.
 * @engines: the engines given to kvblk_ns_get().
 *
 * Context: process context. No batch of any user is in flight.
 */
void kvblk_ns_put(struct kvblk_ns *ns, u32 engines)
{
	unsigned int i;

	mutex_lock(&kvblk_ns_lock);
	for (i = 0; i < KVBLK_ENGINE_NR; i++)
		if (engines & BIT(i))
			WRITE_ONCE(ns->engine_users[i], ns->engine_users[i] - 1);
	WRITE_ONCE(ns->users, ns->users - 1);
	if (ns->users) {
		mutex_unlock(&kvblk_ns_lock);
		return;
	}
	list_del(&ns->node);
	/*
	 * Remove the sysfs directory before a concurrent first attach of the
	 * same disk can create its successor under the same name.
	 */
	kobject_del(&ns->kobj);
	mutex_unlock(&kvblk_ns_lock);

	kvblk_ns_prp_exit(ns);
	kobject_put(&ns->kobj);
}

/**
 * kvblk_ns_prp_batch_end() - a batch that entered the namespace through
 * the PRP engine (kvblk_prp_enter()) has no command in flight any more.
 * @ns: the namespace.
 *
 * Context: any.
 */
void kvblk_ns_prp_batch_end(struct kvblk_ns *ns)
{
	if (atomic_dec_and_test(&ns->prp_batches))
		wake_up_all(&ns->prp_wq);
}

/**
 * kvblk_ns_kill_dev() - mark dead every namespace served on a PCI function.
 * @dev: the NVMe PCI function being removed (or unbound from nvme).
 * @dead: out: the objects marked now, each with a reference, linked by
 *        their dead_node; hand each to kvblk_ns_drain() and then
 *        kvblk_ns_killed().
 *
 * From now on no PRP batch begins on them (-ENODEV).
 *
 * Return: how many were marked.
 */
unsigned int kvblk_ns_kill_dev(struct device *dev, struct list_head *dead)
{
	struct kvblk_ns *ns;
	unsigned int n = 0;

	mutex_lock(&kvblk_ns_lock);
	list_for_each_entry(ns, &kvblk_ns_list, node) {
		if (ns->info.dma_dev != dev || ns->dead)
			continue;
		WRITE_ONCE(ns->dead, true);
		kobject_get(&ns->kobj);
		list_add_tail(&ns->dead_node, dead);
		n++;
	}
	mutex_unlock(&kvblk_ns_lock);
	return n;
}

/**
 * kvblk_ns_drain() - wait until no PRP batch of a dead namespace is left.
 * @ns: an object of kvblk_ns_kill_dev().
 *
 * The nvme driver completed or cancelled every command before it let go of
 * the function, so only the submitters' and the workqueue's releases are
 * waited for: no PRP list of the pools is held when this returns.
 *
 * Context: process context; sleeps.
 */
void kvblk_ns_drain(struct kvblk_ns *ns)
{
	/* Pairs with kvblk_prp_enter(): the count, then ->dead. */
	smp_mb();
	wait_event(ns->prp_wq, !atomic_read(&ns->prp_batches));
}

/**
 * kvblk_ns_killed() - free a drained dead namespace's PRP pools.
 * @ns: an object of kvblk_ns_kill_dev(), drained; its reference is dropped.
 */
void kvblk_ns_killed(struct kvblk_ns *ns)
{
	mutex_lock(&ns->dma_lock);
	kvblk_prp_pools_destroy(&ns->prp_pools);
	mutex_unlock(&ns->dma_lock);
	pr_info("%s: NVMe PCI function %s removed: PRP lists and DMA mappings released; its contexts' loads fail with ENODEV\n",
		ns->name, dev_name(ns->info.dma_dev));
	kobject_put(&ns->kobj);
}

/**
 * kvblk_ns_init() - create /sys/kernel/kvblk and its files.
 *
 * Return: 0, -ENOMEM, or sysfs_create_group()'s error.
 */
int kvblk_ns_init(void)
{
	int ret;

	kvblk_root = kobject_create_and_add("kvblk", kernel_kobj);
	if (!kvblk_root)
		return -ENOMEM;
	ret = sysfs_create_group(kvblk_root, &kvblk_root_group);
	if (ret) {
		kobject_put(kvblk_root);
		kvblk_root = NULL;
	}
	return ret;
}

/**
 * kvblk_ns_exit() - remove /sys/kernel/kvblk (no namespace is attached).
 */
void kvblk_ns_exit(void)
{
	WARN_ON(!list_empty(&kvblk_ns_list));
	kobject_put(kvblk_root);
}
