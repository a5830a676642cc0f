/* SPDX-License-Identifier: MIT */
/* What c_kvstore_header.c (built as C11 with -pedantic) reports to the C++ tests. */
#ifndef KVBLK_TEST_C_KVSTORE_HEADER_H
#define KVBLK_TEST_C_KVSTORE_HEADER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* sizeof and the offset of a late field of every struct of <kvblk/kvstore.h>, as C sees them. */
struct kvblk_c_kvstore_layout {
	size_t cls, create_opts, open_opts, op, result, submit_opts, key;
	size_t drive_info, class_info, info, stats, identity, check_report;
	size_t off_create_reserved, off_open_max_descs, off_open_reserved, off_op_tag, off_result_drive;
	size_t off_submit_results;
	size_t off_key_gen, off_drive_why_failed, off_info_classes, off_stats_degraded;
	size_t off_identity_superblocks_ok, off_report_first_problem;
};

void kvblk_c_kvstore_get_layout(struct kvblk_c_kvstore_layout *out);

/*
 * From C: the *_init() functions, the CRC32C of "123456789", and kvblk_kvstore_open() of
 * @missing_path: returns kvblk_kvstore_open()'s value, or -1000.. when a step before it is wrong.
 */
int kvblk_c_kvstore_smoke(const char *missing_path);

#ifdef __cplusplus
}
#endif

#endif
