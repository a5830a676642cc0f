// SPDX-License-Identifier: GPL-2.0
/*
 * main.c - kvblk.ko module init/exit and the /dev/kvblk misc device.
 *
 * kvblk turns one ioctl carrying many object descriptors into many NVMe Read
 * commands in flight at once, through the stock nvme driver's queues, with
 * DMA straight into registered memory. See include/uapi/linux/kvblk.h for
 * the contract and kmod/README.md for sysfs, tracepoints and parameters.
 */
#include <linux/fs.h>
#include <linux/miscdevice.h>
#include <linux/module.h>

#include "kvblk.h"

/* Releases of batches whose caller left; drained at module exit. */
struct workqueue_struct *kvblk_wq;

static int kvblk_open(struct inode *inode, struct file *file)
{
	struct kvblk_ctx *ctx;

	ctx = kvblk_ctx_alloc();
	if (!ctx)
		return -ENOMEM;
	file->private_data = ctx;
	return 0;
}

static int kvblk_release(struct inode *inode, struct file *file)
{
	/* In-flight batches hold their own references: this never waits. */
	kvblk_ctx_put(file->private_data);
	return 0;
}

static const struct file_operations kvblk_fops = {
	.owner		= THIS_MODULE,
	.open		= kvblk_open,
	.release	= kvblk_release,
	.unlocked_ioctl	= kvblk_ioctl,
	.compat_ioctl	= compat_ptr_ioctl,
	.uring_cmd	= kvblk_uring_cmd,	/* NULL without KVBLK_WITH_URING_CMD */
};

static struct miscdevice kvblk_misc = {
	.minor	= MISC_DYNAMIC_MINOR,
	.name	= "kvblk",
	.fops	= &kvblk_fops,
};

static int __init kvblk_init(void)
{
	int ret;

	kvblk_wq = alloc_workqueue("kvblk", WQ_UNBOUND, 0);
	if (!kvblk_wq)
		return -ENOMEM;

	ret = kvblk_ns_init();
	if (ret)
		goto out_destroy_wq;

	ret = kvblk_removal_init();
	if (ret)
		goto out_ns_exit;

	ret = misc_register(&kvblk_misc);
	if (ret)
		goto out_removal_exit;

	pr_info("loaded: /dev/kvblk, engines bio (default), file, prp, max_cmd_bytes=%u max_inflight=%u max_descs=%u\n",
		g_max_cmd_bytes, g_max_inflight, g_max_descs);
	return 0;

out_removal_exit:
	kvblk_removal_exit();
out_ns_exit:
	kvblk_ns_exit();
out_destroy_wq:
	destroy_workqueue(kvblk_wq);
	return ret;
}

static void __exit kvblk_exit(void)
{
	misc_deregister(&kvblk_misc);
	/* Waits for releases that dropped the last module reference. */
	destroy_workqueue(kvblk_wq);
	kvblk_removal_exit();
	kvblk_ns_exit();
}

module_init(kvblk_init);
module_exit(kvblk_exit);

MODULE_DESCRIPTION("kvblk: batched multi-object NVMe reads into registered memory");
MODULE_AUTHOR("kvblk authors");
MODULE_LICENSE("GPL");
MODULE_VERSION("0.4.0");
