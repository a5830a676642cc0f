/* SPDX-License-Identifier: GPL-2.0 */
/*
 * trace.h - kvblk tracepoints (events/kvblk/ in tracefs).
 *
 * dev is the whole disk's dev_t (for a file: the disk of its file system);
 * batch a module-wide batch sequence number; tag the caller's
 * kvblk_io_desc.tag, so that every command (an NVMe Read, a bio, a direct-I/O
 * read) can be attributed to the object that caused it; slba the disk LBA
 * (partition start included; for a file the file offset in logical
 * blocks); hwq the blk-mq hardware queue (NVMe submission/completion queue
 * pair) the command went to, for the PRP engine (0 for the block-layer
 * engines: the block layer picks the queue after kvblk).
 */
#undef TRACE_SYSTEM
#define TRACE_SYSTEM kvblk

#if !defined(_KVBLK_TRACE_H) || defined(TRACE_HEADER_MULTI_READ)
#define _KVBLK_TRACE_H

#include <linux/kdev_t.h>
#include <linux/tracepoint.h>

TRACE_EVENT(kvblk_batch_start,
	TP_PROTO(dev_t dev, u64 batch, u32 nr_descs, u64 nr_cmds, u64 bytes),
	TP_ARGS(dev, batch, nr_descs, nr_cmds, bytes),
	TP_STRUCT__entry(
		__field(dev_t, dev)
		__field(u64, batch)
		__field(u32, nr_descs)
		__field(u64, nr_cmds)
		__field(u64, bytes)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->batch = batch;
		__entry->nr_descs = nr_descs;
		__entry->nr_cmds = nr_cmds;
		__entry->bytes = bytes;
	),
	TP_printk("dev=%u:%u batch=%llu descs=%u cmds=%llu bytes=%llu",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->batch,
		  __entry->nr_descs, __entry->nr_cmds, __entry->bytes)
);

TRACE_EVENT(kvblk_batch_end,
	TP_PROTO(dev_t dev, u64 batch, u32 nr_descs, u32 nr_ok, u64 nr_cmds,
		 u64 elapsed_ns, int ret),
	TP_ARGS(dev, batch, nr_descs, nr_ok, nr_cmds, elapsed_ns, ret),
	TP_STRUCT__entry(
		__field(dev_t, dev)
		__field(u64, batch)
		__field(u32, nr_descs)
		__field(u32, nr_ok)
		__field(u64, nr_cmds)
		__field(u64, elapsed_ns)
		__field(int, ret)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->batch = batch;
		__entry->nr_descs = nr_descs;
		__entry->nr_ok = nr_ok;
		__entry->nr_cmds = nr_cmds;
		__entry->elapsed_ns = elapsed_ns;
		__entry->ret = ret;
	),
	TP_printk("dev=%u:%u batch=%llu descs=%u ok=%u cmds=%llu elapsed_ns=%llu ret=%d",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->batch,
		  __entry->nr_descs, __entry->nr_ok, __entry->nr_cmds,
		  __entry->elapsed_ns, __entry->ret)
);

TRACE_EVENT(kvblk_cmd_submit,
	TP_PROTO(dev_t dev, u64 batch, u64 tag, u32 obj, u64 slba, u32 bytes,
		 u32 hwq),
	TP_ARGS(dev, batch, tag, obj, slba, bytes, hwq),
	TP_STRUCT__entry(
		__field(dev_t, dev)
		__field(u64, batch)
		__field(u64, tag)
		__field(u32, obj)
		__field(u64, slba)
		__field(u32, bytes)
		__field(u32, hwq)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->batch = batch;
		__entry->tag = tag;
		__entry->obj = obj;
		__entry->slba = slba;
		__entry->bytes = bytes;
		__entry->hwq = hwq;
	),
	TP_printk("dev=%u:%u batch=%llu tag=0x%llx obj=%u slba=%llu bytes=%u hwq=%u",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->batch,
		  __entry->tag, __entry->obj, __entry->slba, __entry->bytes,
		  __entry->hwq)
);

TRACE_EVENT(kvblk_cmd_complete,
	TP_PROTO(dev_t dev, u64 batch, u64 tag, u32 obj, u64 slba, u32 bytes,
		 u32 hwq, int status, u64 lat_ns),
	TP_ARGS(dev, batch, tag, obj, slba, bytes, hwq, status, lat_ns),
	TP_STRUCT__entry(
		__field(dev_t, dev)
		__field(u64, batch)
		__field(u64, tag)
		__field(u32, obj)
		__field(u64, slba)
		__field(u32, bytes)
		__field(u32, hwq)
		__field(int, status)
		__field(u64, lat_ns)
	),
	TP_fast_assign(
		__entry->dev = dev;
		__entry->batch = batch;
		__entry->tag = tag;
		__entry->obj = obj;
		__entry->slba = slba;
		__entry->bytes = bytes;
		__entry->hwq = hwq;
		__entry->status = status;
		__entry->lat_ns = lat_ns;
	),
	TP_printk("dev=%u:%u batch=%llu tag=0x%llx obj=%u slba=%llu bytes=%u hwq=%u status=%d lat_ns=%llu",
		  MAJOR(__entry->dev), MINOR(__entry->dev), __entry->batch,
		  __entry->tag, __entry->obj, __entry->slba, __entry->bytes,
		  __entry->hwq, __entry->status, __entry->lat_ns)
);

#endif /* _KVBLK_TRACE_H */

#undef TRACE_INCLUDE_PATH
#define TRACE_INCLUDE_PATH .
#undef TRACE_INCLUDE_FILE
#define TRACE_INCLUDE_FILE trace
#include <trace/define_trace.h>
