/* SPDX-License-Identifier: GPL-2.0 */
/*
 * trace.h - kvblk tracepoints (events/kvblk/ in tracefs).
 *
 * dev is the whole disk's dev_t (for a file: the disk of its file system;
 * for the batch events the first descriptor's target's, for the command
 * events their own target's);
 * batch a module-wide batch sequence number; dir the batch's direction
 * (load: device -> memory, store: memory -> device, KVBLK_LOAD_F_STORE);
 * tgt the command's target (kvblk_attach.target) and engine the engine
 * that served its object (enum kvblk_engine: prp, bio, file); tag the
 * caller's kvblk_io_desc.tag, so that every command (an NVMe Read, a bio,
 * a direct-I/O read or write) can be attributed to the object that caused
 * it; slba the disk LBA (partition start included; for a file the file
 * offset in logical blocks); hwq the blk-mq hardware queue (NVMe
 * submission/completion queue pair) the command went to, for the PRP
 * engine (0 for the block-layer engines: the block layer picks the queue
 * after kvblk). kvblk_batch_end's engines is the bit mask of the engines
 * that served the batch and tgts the number of targets it named, as
 * kvblk_load_many.engines and .nr_targets report them.
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM kvblk

#if !defined(_KVBLK_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KVBLK_TRACE_H

#include <linux/kdev_t.h>
#include <linux/tracepoint.h>

#include "engine.h"
#include "kvblk.h"

/* The enum's values, not its names, in the events' format files. */
TRACE_DEFINE_ENUM(KVBLK_ENGINE_PRP);
TRACE_DEFINE_ENUM(KVBLK_ENGINE_BIO);
TRACE_DEFINE_ENUM(KVBLK_ENGINE_FILE);

#define kvblk_show_dir(store)						\
	__print_symbolic(store, { 0, "load" }, { 1, "store" })

#define kvblk_show_engine(engine)					\
	__print_symbolic(engine,					\
			 { KVBLK_ENGINE_PRP, "prp" },			\
			 { KVBLK_ENGINE_BIO, "bio" },			\
			 { KVBLK_ENGINE_FILE, "file" })

#define kvblk_show_engines(mask)					\
	__print_flags(mask, "|",					\
		      { 1U << KVBLK_ENGINE_PRP, "prp" },		\
		      { 1U << KVBLK_ENGINE_BIO, "bio" },		\
		      { 1U << KVBLK_ENGINE_FILE, "file" })

TRACE_EVENT(kvblk_batch_start,
	TP_PROTO(const struct kvblk_batch *b, u64 nr_cmds, u64 bytes),
	TP_ARGS(b, nr_cmds, bytes),
	TP_STRUCT__entry(
		__field(dev_t, dev)
		__field(u64, batch)
		__field(u8, store)
		__field(u32, nr_descs)
		__field(u64, nr_cmds)
		__field(u64, bytes)
	),
	TP_fast_assign(
		__entry->dev = b->ns->info.devt;
		__entry->batch = b->id;
		__entry->store = b->store;
		__entry->nr_descs = b->nr_objs;
		__entry->nr_cmds = nr_cmds;
		__entry->bytes = bytes;
	),
	TP_printk("dev=%u:%u batch=%llu dir=%s descs=%u cmds=%llu bytes=%llu",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->batch,
		  kvblk_show_dir(__entry->store), __entry->nr_descs,
		  __entry->nr_cmds, __entry->bytes)
);

TRACE_EVENT(kvblk_batch_end,
	TP_PROTO(const struct kvblk_batch *b, u32 nr_ok, u64 elapsed_ns,
		 int ret),
	TP_ARGS(b, nr_ok, elapsed_ns, ret),
	TP_STRUCT__entry(
		__field(dev_t, dev)
		__field(u64, batch)
		__field(u8, store)
		__field(u32, engines)
		__field(u32, nr_tgts)
		__field(u32, nr_descs)
		__field(u32, nr_ok)
		__field(u64, nr_cmds)
		__field(u64, elapsed_ns)
		__field(int, ret)
	),
	TP_fast_assign(
		__entry->dev = b->ns->info.devt;
		__entry->batch = b->id;
		__entry->store = b->store;
		__entry->engines = b->engines;
		__entry->nr_tgts = b->nr_tgts;
		__entry->nr_descs = b->nr_objs;
		__entry->nr_ok = nr_ok;
		__entry->nr_cmds = b->nr_cmds;
		__entry->elapsed_ns = elapsed_ns;
		__entry->ret = ret;
	),
	TP_printk("dev=%u:%u batch=%llu dir=%s engines=%s tgts=%u descs=%u ok=%u cmds=%llu elapsed_ns=%llu ret=%d",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->batch,
		  kvblk_show_dir(__entry->store),
		  kvblk_show_engines(__entry->engines), __entry->nr_tgts,
		  __entry->nr_descs, __entry->nr_ok, __entry->nr_cmds,
		  __entry->elapsed_ns, __entry->ret)
);

/*
 * One class for both command events, so that their fields cannot drift
 * apart (kvblkctl trace pairs them by these fields): kvblk_cmd_submit
 * passes status 0 and lat_ns 0 and does not print them.
 */
DECLARE_EVENT_CLASS(kvblk_cmd,
	TP_PROTO(const struct kvblk_cmd *cmd, u32 hwq, int status, u64 lat_ns),
	TP_ARGS(cmd, hwq, status, lat_ns),
	TP_STRUCT__entry(
		__field(dev_t, dev)
		__field(u64, batch)
		__field(u8, store)
		__field(u8, engine)
		__field(u32, tgt)
		__field(u64, tag)
		__field(u32, obj)
		__field(u64, slba)
		__field(u32, bytes)
		__field(u32, hwq)
		__field(int, status)
		__field(u64, lat_ns)
	),
	TP_fast_assign(
		const struct kvblk_obj *o = &cmd->b->objs[cmd->obj];

		__entry->dev = o->bt->t->ns->info.devt;
		__entry->batch = cmd->b->id;
		__entry->store = cmd->b->store;
		__entry->engine = o->bt->engine->id;
		__entry->tgt = o->bt->t->index;
		__entry->tag = o->tag;
		__entry->obj = cmd->obj;
		__entry->slba = cmd->slba;
		__entry->bytes = cmd->bytes;
		__entry->hwq = hwq;
		__entry->status = status;
		__entry->lat_ns = lat_ns;
	),
	TP_printk("dev=%u:%u batch=%llu dir=%s tgt=%u engine=%s tag=0x%llx obj=%u slba=%llu bytes=%u hwq=%u status=%d lat_ns=%llu",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->batch,
		  kvblk_show_dir(__entry->store), __entry->tgt,
		  kvblk_show_engine(__entry->engine), __entry->tag,
		  __entry->obj, __entry->slba, __entry->bytes, __entry->hwq,
		  __entry->status, __entry->lat_ns)
);

/* Submission: the class's fields, status and lat_ns 0 and not printed. */
DEFINE_EVENT_PRINT(kvblk_cmd, kvblk_cmd_submit,
	TP_PROTO(const struct kvblk_cmd *cmd, u32 hwq, int status, u64 lat_ns),
	TP_ARGS(cmd, hwq, status, lat_ns),
	TP_printk("dev=%u:%u batch=%llu dir=%s tgt=%u engine=%s tag=0x%llx obj=%u slba=%llu bytes=%u hwq=%u",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->batch,
		  kvblk_show_dir(__entry->store), __entry->tgt,
		  kvblk_show_engine(__entry->engine), __entry->tag,
		  __entry->obj, __entry->slba, __entry->bytes, __entry->hwq)
);

/* Completion: @status 0 or -errno, @lat_ns from submission to completion. */
DEFINE_EVENT(kvblk_cmd, kvblk_cmd_complete,
	TP_PROTO(const struct kvblk_cmd *cmd, u32 hwq, int status, u64 lat_ns),
	TP_ARGS(cmd, hwq, status, lat_ns)
);

#endif /* _KVBLK_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
