/* SPDX-License-Identifier: MIT */
/*
 * Compiled as C (C11, -pedantic): the public header is valid C, and its structs have the
 * same layout in C as in C++ (c_header_test.cpp compares).
 */
#include <kvblk/kvblk.h>

#include <stddef.h>

#include "c_header.h"

void kvblk_c_get_layout(struct kvblk_c_layout *out)
{
	out->open_opts = sizeof(struct kvblk_open_opts);
	out->dev_info = sizeof(struct kvblk_dev_info);
	out->desc = sizeof(struct kvblk_desc);
	out->result = sizeof(struct kvblk_result);
	out->batch_info = sizeof(struct kvblk_batch_info);
	out->stats = sizeof(struct kvblk_stats);
	out->off_opts_create_bytes = offsetof(struct kvblk_open_opts, create_bytes);
	out->off_info_reason = offsetof(struct kvblk_dev_info, backend_reason);
	out->off_desc_tag = offsetof(struct kvblk_desc, tag);
	out->off_result_tag = offsetof(struct kvblk_result, tag);
	out->off_batch_elapsed = offsetof(struct kvblk_batch_info, elapsed_ns);
	out->off_stats_cmd_hist = offsetof(struct kvblk_stats, cmd_lat_hist);
}

int kvblk_c_smoke(const char *missing_path)
{
	struct kvblk_open_opts o;
	kvblk_dev *dev = NULL;
	int rc;

	if (!KVBLK_CHECK_VERSION())
		return -1000;
	kvblk_open_opts_init(&o, sizeof(o));
	if (o.opts_size != sizeof(o) || o.backend != KVBLK_BACKEND_AUTO)
		return -1001;
	o.backend = KVBLK_BACKEND_PSYNC;
	rc = kvblk_open(missing_path, &o, &dev);
	if (dev != NULL)
		return -1002;
	return rc;
}
