/* SPDX-License-Identifier: MIT */
/*
 * Compiled as C (C11, -pedantic, warnings as errors): <kvblk/kvstore.h> is valid C, and its
 * structs have the same layout in C as in C++ (kvstore_cxx_test.cpp compares).
 */
#include <kvblk/kvstore.h>

#include <stddef.h>

#include "c_kvstore_header.h"

void kvblk_c_kvstore_get_layout(struct kvblk_c_kvstore_layout *out)
{
	out->cls = sizeof(struct kvblk_kvstore_class);
	out->create_opts = sizeof(struct kvblk_kvstore_create_opts);
	out->open_opts = sizeof(struct kvblk_kvstore_open_opts);
	out->op = sizeof(struct kvblk_kvstore_op);
	out->result = sizeof(struct kvblk_kvstore_result);
	out->submit_opts = sizeof(struct kvblk_kvstore_submit_opts);
	out->key = sizeof(struct kvblk_kvstore_key);
	out->drive_info = sizeof(struct kvblk_kvstore_drive_info);
	out->class_info = sizeof(struct kvblk_kvstore_class_info);
	out->info = sizeof(struct kvblk_kvstore_info);
	out->stats = sizeof(struct kvblk_kvstore_stats);
	out->identity = sizeof(struct kvblk_kvstore_identity);
	out->check_report = sizeof(struct kvblk_kvstore_check_report);
	out->off_create_reserved = offsetof(struct kvblk_kvstore_create_opts, reserved);
	out->off_open_max_descs = offsetof(struct kvblk_kvstore_open_opts, max_descs);
	out->off_open_reserved = offsetof(struct kvblk_kvstore_open_opts, reserved);
	out->off_op_tag = offsetof(struct kvblk_kvstore_op, tag);
	out->off_result_drive = offsetof(struct kvblk_kvstore_result, drive);
	out->off_submit_results = offsetof(struct kvblk_kvstore_submit_opts, results);
	out->off_key_gen = offsetof(struct kvblk_kvstore_key, gen);
	out->off_drive_why_failed = offsetof(struct kvblk_kvstore_drive_info, why_failed);
	out->off_info_classes = offsetof(struct kvblk_kvstore_info, classes);
	out->off_stats_degraded = offsetof(struct kvblk_kvstore_stats, degraded);
	out->off_identity_superblocks_ok = offsetof(struct kvblk_kvstore_identity, superblocks_ok);
	out->off_report_first_problem = offsetof(struct kvblk_kvstore_check_report, first_problem);
}

int kvblk_c_kvstore_smoke(const char *missing_path)
{
	struct kvblk_kvstore_create_opts c;
	struct kvblk_kvstore_open_opts o;
	struct kvblk_kvstore_submit_opts s;
	kvblk_kvstore *store = NULL;
	const char *paths[1];
	int rc;

	kvblk_kvstore_create_opts_init(&c, sizeof(c));
	if (c.opts_size != sizeof(c) || c.nr_classes != 0 || c.classes[0].slot_bytes != 0)
		return -1000;
	kvblk_kvstore_submit_opts_init(&s, sizeof(s));
	if (s.opts_size != sizeof(s) || s.bad_index != -1 || s.results != NULL)
		return -1001;
	if (kvblk_kvstore_crc32c(0, "123456789", 9) != 0xE3069283u)
		return -1002;
	kvblk_kvstore_open_opts_init(&o, sizeof(o));
	if (o.opts_size != sizeof(o) || o.when_full != KVBLK_KVSTORE_EVICT_LRU)
		return -1003;
	o.backend = KVBLK_BACKEND_PSYNC;
	paths[0] = missing_path;
	rc = kvblk_kvstore_open(paths, 1, &o, &store);
	if (store != NULL)
		return -1004;
	return rc;
}
