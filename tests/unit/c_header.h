/* SPDX-License-Identifier: MIT */
/* What c_header.c (built as C) reports to the C++ tests. */
#ifndef KVBLK_TEST_C_HEADER_H
#define KVBLK_TEST_C_HEADER_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

struct kvblk_c_layout {
	size_t open_opts, dev_info, desc, result, batch_info, stats;
	size_t off_opts_create_bytes, off_info_reason, off_desc_tag, off_result_tag;
	size_t off_batch_elapsed, off_stats_cmd_hist;
};

/* sizeof/offsetof of the public structs as C sees them. */
void kvblk_c_get_layout(struct kvblk_c_layout *out);

/* From C: check the version, init options, open @missing_path; returns kvblk_open's value. */
int kvblk_c_smoke(const char *missing_path);

#ifdef __cplusplus
}
#endif

#endif
