// SPDX-License-Identifier: GPL-2.0
/*
 * removal.c - removal of an NVMe PCI function that kvblk holds DMA state
 * for: PRP list pools (ns.c) and registered buffers mapped for it
 * (mem_*.c).
 *
 * When the function is removed (sysfs remove, hot plug, DPC) the PCI core
 * first unbinds the nvme driver, which removes the disks and completes or
 * cancels every command, kvblk's too; then device_del() deletes the device:
 * its sysfs directory goes and, with an IOMMU, the IOMMU core releases it
 * (dev->iommu_group cleared). A dma_pool destroyed or a mapping unmapped
 * after that warns (the pool's sysfs file has no directory left) or
 * dereferences the cleared group. So kvblk lets go of everything on the
 * bus notification that the driver was unbound (BUS_NOTIFY_UNBOUND_DRIVER;
 * BUS_NOTIFY_DEL_DEVICE too, should it come without one), while the
 * device still exists: the RDMA core's "disassociate" pattern.
 *
 *  1. Every namespace served on the function is marked dead
 *     (kvblk_ns_kill_dev()): no PRP batch begins on it any more; its
 *     contexts' loads fail with -ENODEV.
 *  2. The batches that began before are waited for (kvblk_ns_drain()):
 *     their commands already completed (in-flight objects failed with
 *     -ENOLINK, or succeeded), only their releases remain.
 *  3. Under the write side of kvblk_dma_rwsem, every buffer mapped for the
 *     function is unmapped (kvblk_mem_ops.unmap) and marked dma_gone:
 *     PRP loads into it fail with -ENODEV, release skips the unmap. The
 *     pages stay pinned until the buffer is unregistered, so block-layer
 *     targets of the same context can still load into host buffers.
 *  4. The namespaces' PRP pools are destroyed (kvblk_ns_killed()).
 *
 * Registration maps under the read side (kvblk_dma_reg_begin() ..
 * kvblk_dma_reg_end()) after checking that its namespace is not dead, and
 * a buffer's release unmaps under it (kvblk_dma_buf_lock()), so no mapping
 * is made or undone for a device that step 3 has passed.
 */
#include <linux/device.h>
#include <linux/list.h>
#include <linux/notifier.h>
#include <linux/pci.h>
#include <linux/rwsem.h>
#include <linux/spinlock.h>

#include "kvblk.h"

static DECLARE_RWSEM(kvblk_dma_rwsem);
/* Buffers mapped for a device (buf->dev): added and removed under the read side. */
static LIST_HEAD(kvblk_dma_bufs);
static DEFINE_SPINLOCK(kvblk_dma_bufs_lock);

/**
 * kvblk_dma_reg_begin() - a registration is about to map memory.
 * @ctx: the registering context.
 * @host: the memory is host memory: mapped only when a target of @ctx
 *        was attached with KVBLK_ATTACH_F_ENGINE_PRP (ctx->map_host).
 * @dma_dev: out: the device to map for (the NVMe PCI function of the
 *           context's first target the PRP engine serves), or NULL when
 *           nothing is to be mapped; then nothing is held.
 *
 * Pair with kvblk_dma_reg_end() when @dma_dev was set and 0 returned.
 *
 * Return: 0, or -ENODEV when that function was removed.
 */
int kvblk_dma_reg_begin(struct kvblk_ctx *ctx, bool host,
			struct device **dma_dev)
{
	struct kvblk_ns *ns;

	mutex_lock(&ctx->lock);
	*dma_dev = !host || ctx->map_host ? ctx->dma_dev : NULL;
	ns = ctx->dma_ns;
	mutex_unlock(&ctx->lock);
	if (!*dma_dev)
		return 0;
	down_read(&kvblk_dma_rwsem);
	if (READ_ONCE(ns->dead)) {
		up_read(&kvblk_dma_rwsem);
		return -ENODEV;
	}
	return 0;
}

/**
 * kvblk_dma_map_begin() - memory is about to be mapped for @dev outside a
 * registration (a P2PDMA window of a batch, bound per call).
 * @dev: the NVMe PCI function.
 *
 * Pair with kvblk_dma_reg_end() when 0 is returned; the new buffer is then
 * on the list the removal unmaps.
 *
 * Return: 0, or -ENODEV when the nvme driver is no longer bound to @dev
 * (its removal's notification has come, or is about to).
 */
int kvblk_dma_map_begin(struct device *dev)
{
	down_read(&kvblk_dma_rwsem);
	/* Cleared before BUS_NOTIFY_UNBOUND_DRIVER, whose teardown needs the write side. */
	if (!READ_ONCE(dev->driver)) {
		up_read(&kvblk_dma_rwsem);
		return -ENODEV;
	}
	return 0;
}

/**
 * kvblk_dma_use_begin() - a CPU sync of @buf's mapping is about to run,
 * after the commands that used it completed.
 * @buf: a buffer mapped for a device.
 *
 * Pair with kvblk_dma_use_end() when true is returned.
 *
 * Return: true with the mapping held until kvblk_dma_use_end(); false
 * when its device's removal unmapped it (nothing is held).
 */
bool kvblk_dma_use_begin(struct kvblk_buf *buf)
{
	down_read(&kvblk_dma_rwsem);
	if (READ_ONCE(buf->dma_gone)) {
		up_read(&kvblk_dma_rwsem);
		return false;
	}
	return true;
}

/**
 * kvblk_dma_use_end() - the sync of kvblk_dma_use_begin() is done.
 */
void kvblk_dma_use_end(void)
{
	up_read(&kvblk_dma_rwsem);
}

/**
 * kvblk_dma_reg_end() - the registration's mapping is done.
 * @buf: the new buffer (now on the list of mapped buffers), or NULL when
 *       its creation failed.
 */
void kvblk_dma_reg_end(struct kvblk_buf *buf)
{
	if (buf && buf->dev) {
		spin_lock(&kvblk_dma_bufs_lock);
		list_add_tail(&buf->dma_node, &kvblk_dma_bufs);
		spin_unlock(&kvblk_dma_bufs_lock);
	}
	up_read(&kvblk_dma_rwsem);
}

/**
 * kvblk_dma_buf_lock() - the last reference of a buffer is going: its
 * release may unmap (unless buf->dma_gone).
 * @buf: the buffer.
 */
void kvblk_dma_buf_lock(struct kvblk_buf *buf)
{
	if (!buf->dev)
		return;
	down_read(&kvblk_dma_rwsem);
	spin_lock(&kvblk_dma_bufs_lock);
	list_del_init(&buf->dma_node);
	spin_unlock(&kvblk_dma_bufs_lock);
}

/**
 * kvblk_dma_buf_unlock() - the release of kvblk_dma_buf_lock() is done.
 * @buf: the buffer.
 */
void kvblk_dma_buf_unlock(struct kvblk_buf *buf)
{
	if (buf->dev)
		up_read(&kvblk_dma_rwsem);
}

/* Step 3: drop every mapping made for @dev. */
static unsigned int kvblk_dma_unmap_dev(struct device *dev)
{
	struct kvblk_buf *buf;
	unsigned int n = 0;

	down_write(&kvblk_dma_rwsem);
	/* The list changes only under the read side: no lock needed here. */
	list_for_each_entry(buf, &kvblk_dma_bufs, dma_node) {
		if (buf->dev != dev || buf->dma_gone)
			continue;
		WRITE_ONCE(buf->dma_gone, true);
		if (buf->ops->unmap)
			buf->ops->unmap(buf);
		n++;
	}
	up_write(&kvblk_dma_rwsem);
	return n;
}

static void kvblk_removal_teardown(struct device *dev)
{
	struct kvblk_ns *ns, *next;
	LIST_HEAD(dead);
	unsigned int nr_bufs;

	if (!kvblk_ns_kill_dev(dev, &dead)) {
		/*
		 * No namespace, so no registered buffer is mapped for @dev;
		 * but an attach's probe may have its page mapped for it
		 * (kvblk_probe_ext_lba(): mapped and unmapped under the read
		 * side, taken while the driver was bound). Wait for that
		 * unmap: after device_del() it would be review H1's NULL
		 * dereference (review-2 N9a; VM case probe-removal). Probes
		 * after this see dev->driver cleared and map nothing.
		 */
		down_write(&kvblk_dma_rwsem);
		up_write(&kvblk_dma_rwsem);
		return;
	}
	list_for_each_entry(ns, &dead, dead_node)
		kvblk_ns_drain(ns);
	nr_bufs = kvblk_dma_unmap_dev(dev);
	if (nr_bufs)
		pr_info("%s: %u registered buffer(s) unmapped; loads into them through it fail with ENODEV\n",
			dev_name(dev), nr_bufs);
	list_for_each_entry_safe(ns, next, &dead, dead_node) {
		list_del_init(&ns->dead_node);
		kvblk_ns_killed(ns);
	}
}

static int kvblk_pci_notify(struct notifier_block *nb, unsigned long action,
			    void *data)
{
	if (action == BUS_NOTIFY_UNBOUND_DRIVER ||
	    action == BUS_NOTIFY_DEL_DEVICE)
		kvblk_removal_teardown(data);
	return NOTIFY_DONE;
}

/*
 * Ahead of the bus's other watchers (a higher priority runs first): with
 * CONFIG_DMA_API_DEBUG, dma-debug's own notifier (kernel/dma/debug.c,
 * dma_debug_device_change(), registered for the PCI bus at boot) reports
 * every mapping a device still has when BUS_NOTIFY_UNBOUND_DRIVER comes,
 * as a leak of the driver just unbound. kvblk's mappings for the function
 * are gone by the time that check runs.
 */
static struct notifier_block kvblk_pci_nb = {
	.notifier_call = kvblk_pci_notify,
	.priority = 1,
};

/**
 * kvblk_removal_init() - watch the PCI bus for unbinds and removals.
 *
 * Return: 0 or bus_register_notifier()'s error.
 */
int kvblk_removal_init(void)
{
	return bus_register_notifier(&pci_bus_type, &kvblk_pci_nb);
}

/**
 * kvblk_removal_exit() - stop watching (no context is left).
 */
void kvblk_removal_exit(void)
{
	bus_unregister_notifier(&pci_bus_type, &kvblk_pci_nb);
}
