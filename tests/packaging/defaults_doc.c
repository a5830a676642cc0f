// SPDX-License-Identifier: MIT
// Prints the rows of docs/defaults.md's table of process-wide defaults from the library's own
// table (kvblk_get_default_info()), so the document cannot drift from it:
// tests/packaging/defaults-doc-test.sh compares, and `defaults_doc` alone prints what to paste.
#include <kvblk/kvblk.h>

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

static const char *size_text(uint64_t v, const char *unit, char *buf, size_t len)
{
	static const char *const names[] = {"auto", "uring", "threadpool", "psync", "kmod", "uring_cmd"};
	if (strcmp(unit, "backend") == 0)
		return v < sizeof(names) / sizeof(names[0]) ? names[v] : "?";
	if (strcmp(unit, "bytes") == 0 && v >= 1024) {
		if (v % (1u << 30) == 0)
			snprintf(buf, len, "%" PRIu64 "G", v >> 30);
		else if (v % (1u << 20) == 0)
			snprintf(buf, len, "%" PRIu64 "M", v >> 20);
		else if (v % 1024 == 0)
			snprintf(buf, len, "%" PRIu64 "K", v >> 10);
		else
			snprintf(buf, len, "%" PRIu64, v);
		return buf;
	}
	snprintf(buf, len, "%" PRIu64, v);
	return buf;
}

int main(void)
{
	for (uint32_t i = 0;; i++) {
		struct kvblk_default_info d;
		memset(&d, 0, sizeof(d));
		d.info_size = sizeof(d);
		int ret = kvblk_get_default_info(i, &d);
		if (ret == -ENOENT)
			break;
		if (ret < 0) {
			fprintf(stderr, "defaults_doc: %s\n", kvblk_last_error());
			return 1;
		}
		char b[32], lo[32], hi[32], range[96];
		if (strcmp(d.unit, "backend") == 0)
			snprintf(range, sizeof(range), "auto, uring, threadpool, psync, kmod, uring_cmd");
		else
			snprintf(range, sizeof(range), "%s..%s %s", size_text(d.min, d.unit, lo, sizeof(lo)),
				 size_text(d.max, d.unit, hi, sizeof(hi)), d.unit);
		printf("| `%s` | `%s` | %s | %s | %s |\n", d.env, d.name, size_text(d.builtin, d.unit, b, sizeof(b)),
		       range, d.doc);
	}
	return 0;
}
