// SPDX-License-Identifier: GPL-2.0
/*
 * ioctl.c - ioctl dispatch and GET_FEATURES.
 */
#include <linux/fs.h>
#include <linux/uaccess.h>

#include "kvblk.h"

static long kvblk_ioctl_get_features(void __user *uarg)
{
	u64 feat = KVBLK_FEAT_PRP_ENGINE | KVBLK_FEAT_BIO_ENGINE |
		   KVBLK_FEAT_FILE_ENGINE | KVBLK_FEAT_TARGETS | KVBLK_FEAT_STORE |
		   kvblk_mem_features();

	if (IS_ENABLED(CONFIG_MMU_NOTIFIER))
		feat |= KVBLK_FEAT_MM_GUARD;
	if (kvblk_uring_cmd_supported())
		feat |= KVBLK_FEAT_URING_CMD;
	if (kvblk_uring_per_object_supported())
		feat |= KVBLK_FEAT_URING_PER_OBJECT;

	return put_user(feat, (u64 __user *)uarg) ? -EFAULT : 0;
}

/*
 * An ioctl number matches on its type, number and direction; its size bits
 * are ignored. Structs grow through their @size field (kvblk_copy_in()), so a
 * program built against a newer header, whose numbers encode a larger size,
 * still reaches this kernel and gets the @size rules of the uapi header.
 */
#define KVBLK_IOC_KEY(cmd)	((cmd) & ~(_IOC_SIZEMASK << _IOC_SIZESHIFT))

/**
 * kvblk_ioctl() - unlocked_ioctl of /dev/kvblk.
 * @file: the context's file.
 * @cmd: KVBLK_IOC_*.
 * @arg: user pointer to the command's struct.
 *
 * Return: per command, see include/uapi/linux/kvblk.h; -ENOTTY unknown @cmd;
 * -EBADFD the caller's address space is not the one that opened the
 * context (kvblk_ctx_owner()), checked before anything else.
 */
long kvblk_ioctl(struct file *file, unsigned int cmd, unsigned long arg)
{
	struct kvblk_ctx *ctx = file->private_data;
	void __user *uarg = (void __user *)arg;

	if (!kvblk_ctx_owner(ctx))
		return -EBADFD;

	switch (KVBLK_IOC_KEY(cmd)) {
	case KVBLK_IOC_KEY(KVBLK_IOC_GET_FEATURES):
		return kvblk_ioctl_get_features(uarg);
	case KVBLK_IOC_KEY(KVBLK_IOC_ATTACH):
		return kvblk_ioctl_attach(ctx, uarg);
	case KVBLK_IOC_KEY(KVBLK_IOC_REGISTER_BUFFER):
		return kvblk_ioctl_register(ctx, uarg);
	case KVBLK_IOC_KEY(KVBLK_IOC_UNREGISTER_BUFFER):
		return kvblk_ioctl_unregister(ctx, uarg);
	case KVBLK_IOC_KEY(KVBLK_IOC_LOAD_MANY):
		return kvblk_ioctl_load_many(ctx, uarg);
	case KVBLK_IOC_KEY(KVBLK_IOC_CHECK_BUFFER):
		return kvblk_ioctl_check_buffer(ctx, uarg);
	default:
		return -ENOTTY;
	}
}
