// SPDX-License-Identifier: GPL-2.0
/*
 * ioctl.c - ioctl dispatch, GET_FEATURES and the struct size rules.
 */
#include <linux/fs.h>
#include <linux/uaccess.h>

#include "kvblk.h"

/**
 * kvblk_copy_in() - copy an extensible ioctl struct from userspace.
 * @dst: kernel copy, @ksize bytes.
 * @ksize: size of the struct this kernel knows.
 * @uarg: user pointer; its first __u32 is the caller's size.
 * @min_size: smallest size accepted (the first version of the struct).
 * @usize: out: the caller's size.
 *
 * Bytes past @ksize that the caller sent must be zero. Like clone3() and
 * openat2(), a size above PAGE_SIZE is refused before any of it is read.
 *
 * Return: 0; -EFAULT @uarg not readable; -EINVAL size below @min_size;
 * -E2BIG size above PAGE_SIZE, or a non-zero byte past @ksize.
 */
int kvblk_copy_in(void *dst, size_t ksize, const void __user *uarg,
		  size_t min_size, u32 *usize)
{
	u32 size;
	int ret;

	if (get_user(size, (const u32 __user *)uarg))
		return -EFAULT;
	if (size < min_size)
		return -EINVAL;
	if (size > PAGE_SIZE)
		return -E2BIG;
	ret = copy_struct_from_user(dst, ksize, uarg, size);
	if (ret)
		return ret;
	*usize = size;
	return 0;
}

/**
 * kvblk_copy_out() - write an ioctl struct back, up to the caller's size.
 * @uarg: user pointer.
 * @src: kernel copy, @ksize bytes.
 * @ksize: size of the struct this kernel knows.
 * @usize: the caller's size.
 *
 * Return: 0 or -EFAULT.
 */
int kvblk_copy_out(void __user *uarg, const void *src, size_t ksize, u32 usize)
{
	if (copy_to_user(uarg, src, min_t(size_t, ksize, usize)))
		return -EFAULT;
	return 0;
}

static long kvblk_ioctl_get_features(void __user *uarg)
{
	u64 feat = KVBLK_FEAT_PRP_ENGINE | KVBLK_FEAT_BIO_ENGINE |
		   KVBLK_FEAT_FILE_ENGINE | KVBLK_FEAT_TARGETS |
		   kvblk_mem_features();

	if (IS_ENABLED(CONFIG_MMU_NOTIFIER))
		feat |= KVBLK_FEAT_MM_GUARD;
	if (kvblk_uring_cmd_supported())
		feat |= KVBLK_FEAT_URING_CMD;

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
