// SPDX-License-Identifier: MIT
/* libkvblk's public header and kvblk.ko's uapi header in one file, <linux/kvblk.h> first: no name collides (built, never run). */
#include <linux/kvblk.h>
#include <kvblk/kvblk.h>

static_assert(KVBLK_MEM_KIND_MAX == 4, "one enum kvblk_mem_kind for both headers");
static_assert(sizeof(struct kvblk_io_desc) == KVBLK_DESC_SIZE_VER1, "the kernel's descriptor");
