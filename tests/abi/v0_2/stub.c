/* SPDX-License-Identifier: MIT */
/*
 * A stand-in for the libkvblk.so.0 of version 0.2, built from that version's map
 * (libkvblk.map here) with functions that do nothing: linking a program against it binds
 * the program's references the way a program built in the 0.2 days was bound
 * (kvblk_load_many@KVBLK_0.1, kvblk_set_staging@KVBLK_0.2, ...). At run time the program
 * gets the real library (LD_LIBRARY_PATH), never this one.
 */
#include <kvblk/kvblk.h> /* the 0.2 header, copied verbatim */

const char *kvblk_version(void) { return ""; }
int kvblk_check_version(int major, int minor) { (void)major; (void)minor; return 0; }
const char *kvblk_last_error(void) { return ""; }
const char *kvblk_backend_name(int backend) { (void)backend; return ""; }
int kvblk_backend_from_name(const char *name) { (void)name; return 0; }
void kvblk_open_opts_init(struct kvblk_open_opts *opts, size_t size) { (void)opts; (void)size; }
int kvblk_open(const char *path, const struct kvblk_open_opts *opts, kvblk_dev **out)
{ (void)path; (void)opts; (void)out; return 0; }
void kvblk_close(kvblk_dev *dev) { (void)dev; }
int kvblk_get_info(kvblk_dev *dev, struct kvblk_dev_info *info) { (void)dev; (void)info; return 0; }
int kvblk_register_buffer(kvblk_dev *dev, int kind, void *addr, uint64_t len, uint32_t *id)
{ (void)dev; (void)kind; (void)addr; (void)len; (void)id; return 0; }
int kvblk_register_dmabuf(kvblk_dev *dev, int fd, uint64_t offset, uint64_t len, uint32_t *id)
{ (void)dev; (void)fd; (void)offset; (void)len; (void)id; return 0; }
int kvblk_set_staging(kvblk_dev *dev, uint32_t buffers, uint64_t buffer_bytes)
{ (void)dev; (void)buffers; (void)buffer_bytes; return 0; }
int kvblk_unregister_buffer(kvblk_dev *dev, uint32_t id) { (void)dev; (void)id; return 0; }
const char *kvblk_path_name(int path) { (void)path; return ""; }
int kvblk_load_many(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n, struct kvblk_result *results,
		    struct kvblk_batch_info *info)
{ (void)dev; (void)descs; (void)n; (void)results; (void)info; return 0; }
int kvblk_store_many(kvblk_dev *dev, const struct kvblk_desc *descs, uint32_t n, struct kvblk_result *results,
		     struct kvblk_batch_info *info)
{ (void)dev; (void)descs; (void)n; (void)results; (void)info; return 0; }
int kvblk_get_stats(kvblk_dev *dev, struct kvblk_stats *stats) { (void)dev; (void)stats; return 0; }
int kvblk_reset_stats(kvblk_dev *dev) { (void)dev; return 0; }
