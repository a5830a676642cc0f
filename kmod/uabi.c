// SPDX-License-Identifier: GPL-2.0
/*
 * uabi.c - the struct size rules of the ioctls and the uring_cmd: copying an
 * extensible struct in from userspace and back out. Every entry point
 * (ioctl.c, attach.c, buffer.c, batch.c, uring.c) uses these, so they sit
 * below all of them.
 */
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

/**
 * kvblk_copy_out_locked() - kvblk_copy_out() under a lock of the context.
 * @uarg: user pointer, written once before the lock was taken (so that
 *        its page is resident).
 * @src: kernel copy, @ksize bytes.
 * @ksize: size of the struct this kernel knows.
 * @usize: the caller's size.
 *
 * With page faults disabled: a fault on @uarg would wait, with the lock
 * held, for whatever backs the page (a FUSE daemon, a userfaultfd
 * handler), and the context's other threads with it (review L5). The
 * caller undoes its work on -EFAULT.
 *
 * Return: 0 or -EFAULT.
 */
int kvblk_copy_out_locked(void __user *uarg, const void *src, size_t ksize,
			  u32 usize)
{
	if (copy_to_user_nofault(uarg, src, min_t(size_t, ksize, usize)))
		return -EFAULT;
	return 0;
}
