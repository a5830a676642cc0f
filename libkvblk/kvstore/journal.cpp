// SPDX-License-Identifier: MIT
// The journal and the checkpoints of one drive (docs/kvstore-format.md, sections 5, 6, 8):
// commits written after the records they carry are durable-ordered behind the data, the
// checkpoint that lets the ring be reused, and the replay at open.
#include "store.hpp"

#include "crc32c.hpp"

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace kvblk::kvstore {
namespace {

using ull = unsigned long long;

constexpr uint64_t kReadChunk = 4u << 20;

uint64_t round_up(uint64_t x, uint64_t a)
{
	return (x + a - 1) / a * a;
}

/* Write one sealed commit (or PAD) of @nblocks at logical @pos, plus the zero end marker. */
int write_commit(Store &s, Drive &d, uint64_t pos, const uint8_t *commit, uint32_t nblocks)
{
	const uint64_t J = d.sb.journal_bytes;
	const uint64_t phys = pos % J;
	const uint64_t bytes = uint64_t(nblocks) * kBlock;
	if (phys + bytes + kBlock <= J) {
		/* The usual case: commit and marker in one write. */
		AlignedBuf b(bytes + kBlock);
		memcpy(b.p, commit, bytes);
		return write_meta(s, d, d.sb.journal_offset + phys, b.p, bytes + kBlock);
	}
	int ret = write_meta(s, d, d.sb.journal_offset + phys, commit, bytes);
	if (ret)
		return ret;
	AlignedBuf zero(kBlock);
	return write_meta(s, d, d.sb.journal_offset + (phys + bytes) % J, zero.p, kBlock);
}

/* Room in the ring for @bytes more (and the marker), writing checkpoints until there is. */
int make_room(Store &s, Drive &d, uint64_t bytes)
{
	const uint64_t J = d.sb.journal_bytes;
	for (int tries = 0; tries < 3; tries++) {
		if (d.jnl.tail + bytes + kBlock - d.jnl.live_start() <= J)
			return 0;
		if (int ret = write_checkpoint(s, d))
			return ret;
	}
	return fail(-ENOSPC, "drive %u: the journal ring (%llu bytes) cannot hold a commit group of %llu bytes",
		    d.index, ull(J), ull(bytes));
}

/* The commits of a group: [first record, end) and their payload bytes. */
struct Cut {
	size_t from, to;
	uint32_t payload;
};

std::vector<Cut> cut_commits(const std::vector<Record> &recs)
{
	std::vector<Cut> cuts;
	Cut c{0, 0, 0};
	for (size_t i = 0; i < recs.size(); i++) {
		const size_t n = record_bytes(recs[i].key.size(), recs[i].meta.size());
		if (c.to > c.from && kCommitHeader + c.payload + n > kMaxCommitBytes) {
			cuts.push_back(c);
			c = Cut{i, i, 0};
		}
		c.to = i + 1;
		c.payload += uint32_t(n);
	}
	cuts.push_back(c);
	return cuts;
}

/* The ring bytes a group of @cuts takes from the tail on, PADs included. */
uint64_t group_bytes(const Drive &d, const std::vector<Cut> &cuts)
{
	const uint64_t J = d.sb.journal_bytes;
	uint64_t pos = d.jnl.tail;
	for (const Cut &c : cuts) {
		const uint64_t bytes = round_up(kCommitHeader + c.payload, kBlock);
		if (pos % J + bytes > J)
			pos += J - pos % J;
		pos += bytes;
	}
	return pos - d.jnl.tail;
}

/* Seal and write one commit (or PAD: @nrec 0 and @payload 0 over @bytes) at the tail. */
int emit(Store &s, Drive &d, uint8_t *buf, uint32_t nrec, uint32_t payload, uint64_t bytes)
{
	CommitHeader h;
	h.store_uuid = s.geo.store_uuid;
	h.drive_index = d.index;
	h.nr_blocks = uint32_t(bytes / kBlock);
	h.seq = d.jnl.next_seq;
	h.pos = d.jnl.tail;
	h.nr_records = nrec;
	h.payload_bytes = payload;
	memset(buf + kCommitHeader + payload, 0, bytes - kCommitHeader - payload);
	seal_commit(h, buf);
	if (int ret = write_commit(s, d, d.jnl.tail, buf, h.nr_blocks))
		return ret;
	d.jnl.next_seq++;
	d.jnl.tail += bytes;
	return 0;
}

} // namespace

int commit_records(Store &s, Drive &d, const std::vector<Record> &recs)
{
	if (recs.empty())
		return 0;
	const uint64_t J = d.sb.journal_bytes;
	const std::vector<Cut> cuts = cut_commits(recs);
	/*
	 * Room for the whole group first: a checkpoint written in the middle of a group would claim
	 * to cover commits whose records the index does not hold yet (they are published after the
	 * group is durable). Callers keep a group within a quarter of the ring (group_limit()).
	 */
	const uint64_t need = group_bytes(d, cuts);
	if (need > J / 2)
		return fail(-E2BIG, "drive %u: a commit group of %llu bytes is over half the journal ring (%llu)",
			    d.index, ull(need), ull(J));
	if (int ret = make_room(s, d, need))
		return ret;
	AlignedBuf buf(kMaxCommitBytes);
	for (size_t k = 0; k < cuts.size(); k++) {
		const Cut &c = cuts[k];
		const uint64_t bytes = round_up(kCommitHeader + c.payload, kBlock);
		const uint64_t phys = d.jnl.tail % J;
		if (phys + bytes > J) {
			/* A commit never wraps: a PAD to the ring's end, durable before what follows it
			 * (a torn PAD under a landed commit would read as damage). */
			AlignedBuf pad(J - phys);
			if (int ret = emit(s, d, pad.p, 0, 0, J - phys))
				return ret;
			if (int ret = flush_drive(s, d))
				return ret;
		}
		uint32_t payload = 0;
		for (size_t i = c.from; i < c.to; i++)
			payload += uint32_t(encode_record(recs[i], buf.p + kCommitHeader + payload));
		if (int ret = emit(s, d, buf.p, uint32_t(c.to - c.from), payload, bytes))
			return ret;
		/* Each commit durable before the next is written: only the last can be torn. */
		if (int ret = flush_drive(s, d))
			return ret;
	}
	s.ctr->journal_commits.fetch_add(1, std::memory_order_relaxed);
	return 0;
}

uint64_t group_limit(const Drive &d) noexcept
{
	/* An eighth of the ring in records: with its commit headers and a PAD of at most one
	 * commit it stays under the half commit_records() takes. */
	return d.sb.journal_bytes / 8;
}

bool checkpoint_due(const Drive &d) noexcept
{
	return d.jnl.tail - d.jnl.ckpt_pos[d.jnl.newest] >= d.sb.journal_bytes / 4;
}

int write_checkpoint(Store &s, Drive &d)
{
	CkptHeader h;
	std::vector<Record> recs;
	{
		std::lock_guard<std::mutex> lk(s.index_mu);
		recs.reserve(d.objects);
		for (const auto &[k, o] : s.index) {
			if (o->drive != d.index)
				continue;
			Record r;
			r.type = kRecPut;
			r.cls = o->cls;
			r.crc = o->crc;
			r.slot = o->slot;
			r.length = o->length;
			r.gen = o->gen;
			r.key = o->key;
			r.meta = o->meta;
			recs.push_back(std::move(r));
		}
		for (const auto &[k, t] : s.tombs) {
			if (t.second != d.index)
				continue;
			Record r;
			r.type = kRecTomb;
			r.gen = t.first;
			r.key = k;
			recs.push_back(std::move(r));
		}
		for (uint32_t c = 0; c < s.geo.nr_classes; c++)
			h.hwm[c] = d.alloc[c].hwm;
		h.gen = s.next_gen - 1;
	}
	h.store_uuid = s.geo.store_uuid;
	h.drive_index = d.index;
	h.nr_classes = s.geo.nr_classes;
	h.seq = d.jnl.next_seq - 1;
	h.pos = d.jnl.tail;
	uint64_t payload = 0;
	for (const Record &r : recs)
		payload += record_bytes(r.key.size(), r.meta.size());
	if (kBlock + payload > d.sb.ckpt_bytes)
		return fail(-EUCLEAN, "drive %u: a checkpoint of %zu objects (%llu bytes) does not fit its area of %llu",
			    d.index, recs.size(), ull(payload), ull(d.sb.ckpt_bytes));
	AlignedBuf buf(kBlock + payload);
	uint8_t *p = buf.p + kBlock;
	for (const Record &r : recs)
		p += encode_record(r, p);
	h.nr_records = recs.size();
	h.payload_bytes = payload;
	h.payload_crc = crc32c(0, buf.p + kBlock, payload);
	encode_ckpt_header(h, buf.p);
	const int area = d.jnl.ckpt_valid[d.jnl.newest] ? 1 - d.jnl.newest : 0;
	const uint64_t off = d.sb.ckpt_offset + uint64_t(area) * d.sb.ckpt_bytes;
	/* The area being replaced is invalid while it is written: only the newest one counts. */
	d.jnl.ckpt_valid[area] = false;
	if (int ret = write_meta(s, d, off, buf.p, buf.len))
		return ret;
	if (int ret = flush_drive(s, d))
		return ret;
	d.jnl.ckpt_valid[area] = true;
	d.jnl.ckpt_seq[area] = h.seq;
	d.jnl.ckpt_pos[area] = h.pos;
	d.jnl.newest = area;
	s.ctr->checkpoints.fetch_add(1, std::memory_order_relaxed);
	return 0;
}

namespace {

/* Whether any block of the ring holds a valid commit header of a seq above @seq. */
int later_commit_exists(Store &s, Drive &d, uint64_t seq, bool *found, uint64_t *max_seq)
{
	const uint64_t J = d.sb.journal_bytes;
	AlignedBuf buf(kReadChunk);
	*found = false;
	for (uint64_t off = 0; off < J; off += kReadChunk) {
		const uint64_t n = std::min(kReadChunk, J - off);
		if (int ret = read_meta(s, d, d.sb.journal_offset + off, buf.p, n))
			return ret;
		for (uint64_t b = 0; b < n; b += kBlock) {
			CommitHeader h;
			if (classify_header(buf.p + b, s.geo.store_uuid, d.index, &h) != HeaderKind::valid)
				continue;
			*max_seq = std::max(*max_seq, h.seq);
			if (h.seq <= seq || *found || off + b + uint64_t(h.nr_blocks) * kBlock > J)
				continue;
			/* A later commit proves damage only when the whole of it checks out. */
			AlignedBuf whole(uint64_t(h.nr_blocks) * kBlock);
			if (int ret = read_meta(s, d, d.sb.journal_offset + off + b, whole.p, whole.len))
				return ret;
			if (commit_crc_ok(whole.p, h.nr_blocks))
				*found = true;
		}
	}
	return 0;
}

/* Decode the records of a checked commit or checkpoint payload; -EUCLEAN on a bad one. */
int each_record(const Store &s, const Drive &d, const uint8_t *p, uint64_t bytes, uint64_t count, uint64_t seq,
		const std::function<void(Record &, uint64_t)> &apply)
{
	uint64_t off = 0;
	Record r;
	for (uint64_t i = 0; i < count; i++) {
		size_t used;
		if (decode_record(p + off, bytes - off, s.geo.max_key, s.geo.max_meta, &r, &used))
			return -EUCLEAN;
		if (r.cls >= s.geo.nr_classes || r.slot >= d.sb.classes[r.cls].nr_slots ||
		    (r.type == kRecPut && (r.length == 0 || r.length > s.geo.classes[r.cls].slot_bytes)))
			return -EUCLEAN;
		apply(r, seq);
		off += used;
	}
	return 0;
}

} // namespace

int replay_drive(Store &s, Drive &d, bool recover, ReplayReport *rep,
		 const std::function<void(Record &, uint64_t seq)> &apply)
{
	const uint64_t J = d.sb.journal_bytes;
	/* 1. The checkpoints: the valid one with the higher seq. */
	CkptHeader hdr[2];
	bool valid[2] = {false, false};
	AlignedBuf blk(kBlock);
	for (int a = 0; a < 2; a++) {
		if (int ret = read_meta(s, d, d.sb.ckpt_offset + uint64_t(a) * d.sb.ckpt_bytes, blk.p, kBlock))
			return ret;
		valid[a] = decode_ckpt_header(blk.p, s.geo.store_uuid, d.index, &hdr[a]) &&
			   hdr[a].payload_bytes <= d.sb.ckpt_bytes - kBlock && hdr[a].nr_classes == s.geo.nr_classes;
	}
	AlignedBuf payload;
	int use = -1;
	for (int pass = 0; pass < 2 && use < 0; pass++) {
		int cand = -1;
		for (int a = 0; a < 2; a++)
			if (valid[a] && (cand < 0 || hdr[a].seq > hdr[cand].seq))
				cand = a;
		if (cand < 0)
			break;
		payload = AlignedBuf(hdr[cand].payload_bytes);
		if (hdr[cand].payload_bytes &&
		    read_meta(s, d, d.sb.ckpt_offset + uint64_t(cand) * d.sb.ckpt_bytes + kBlock, payload.p,
			      payload.len))
			return -EIO;
		if (crc32c(0, payload.p, hdr[cand].payload_bytes) == hdr[cand].payload_crc) {
			use = cand;
		} else {
			valid[cand] = false;
			rep->checkpoints_bad++;
		}
	}
	for (int a = 0; a < 2; a++)
		if (!valid[a])
			rep->checkpoints_bad += 0; /* counted above when its payload failed */
	if (use < 0) {
		rep->damaged = true;
		rep->damage = "no valid checkpoint in either area";
		return fail(-EUCLEAN, "drive %u (%s): no valid checkpoint in either area", d.index, d.path.c_str());
	}
	const CkptHeader &ck = hdr[use];
	for (uint32_t c = 0; c < s.geo.nr_classes; c++) {
		if (ck.hwm[c] > d.sb.classes[c].nr_slots)
			return fail(-EUCLEAN, "drive %u: checkpoint class %u high-water mark %llu past its %llu slots",
				    d.index, c, ull(ck.hwm[c]), ull(d.sb.classes[c].nr_slots));
		d.alloc[c].hwm = std::max(d.alloc[c].hwm, ck.hwm[c]);
	}
	{
		std::lock_guard<std::mutex> lk(s.index_mu);
		s.next_gen = std::max(s.next_gen, ck.gen + 1);
	}
	if (each_record(s, d, payload.p, ck.payload_bytes, ck.nr_records, ck.seq, apply))
		return fail(-EUCLEAN, "drive %u (%s): checkpoint %d holds a record out of range", d.index,
			    d.path.c_str(), use);
	for (int a = 0; a < 2; a++) {
		d.jnl.ckpt_valid[a] = valid[a] && (a == use || hdr[a].seq < ck.seq);
		d.jnl.ckpt_seq[a] = hdr[a].seq;
		d.jnl.ckpt_pos[a] = hdr[a].pos;
	}
	d.jnl.newest = use;
	rep->max_seq_seen = ck.seq;

	/* 2. The journal after it. */
	uint64_t pos = ck.pos, expect = ck.seq + 1;
	AlignedBuf chunk(kReadChunk);
	uint64_t chunk_start = UINT64_MAX, chunk_len = 0; /* physical range held in chunk */
	for (;;) {
		const uint64_t phys = pos % J;
		if (chunk_start == UINT64_MAX || phys < chunk_start || phys + kBlock > chunk_start + chunk_len) {
			chunk_start = phys;
			chunk_len = std::min(kReadChunk, J - phys);
			if (int ret = read_meta(s, d, d.sb.journal_offset + phys, chunk.p, chunk_len))
				return ret;
		}
		const uint8_t *b = chunk.p + (phys - chunk_start);
		CommitHeader h;
		const HeaderKind k = classify_header(b, s.geo.store_uuid, d.index, &h);
		bool bad = false;
		if (k == HeaderKind::zero || k == HeaderKind::foreign || (k == HeaderKind::valid && h.seq < expect))
			break; /* the end: never written, another store's, or an older lap's */
		if (k != HeaderKind::valid || h.seq != expect || h.pos != pos ||
		    phys + uint64_t(h.nr_blocks) * kBlock > J) {
			bad = true;
		} else {
			const uint64_t bytes = uint64_t(h.nr_blocks) * kBlock;
			const uint8_t *c = b;
			AlignedBuf whole;
			if (phys + bytes > chunk_start + chunk_len) {
				whole = AlignedBuf(bytes);
				if (int ret = read_meta(s, d, d.sb.journal_offset + phys, whole.p, bytes))
					return ret;
				c = whole.p;
			}
			if (!commit_crc_ok(c, h.nr_blocks)) {
				bad = true;
			} else {
				if (each_record(s, d, c + kCommitHeader, h.payload_bytes, h.nr_records, h.seq, apply))
					return fail(-EUCLEAN, "drive %u (%s): journal commit %llu holds a record out of "
							      "range", d.index, d.path.c_str(), ull(h.seq));
				rep->commits++;
				rep->max_seq_seen = h.seq;
				pos += bytes;
				expect++;
				continue;
			}
		}
		if (bad) {
			bool later = false;
			uint64_t max_seq = rep->max_seq_seen;
			if (int ret = later_commit_exists(s, d, expect, &later, &max_seq))
				return ret;
			rep->max_seq_seen = std::max(rep->max_seq_seen, max_seq);
			if (!later) {
				rep->tail_discarded++;
				break;
			}
			char msg[200];
			snprintf(msg, sizeof(msg), "journal commit %llu at position %llu is damaged and later commits "
				 "follow it", ull(expect), ull(pos));
			rep->damaged = true;
			rep->damage = msg;
			if (!recover)
				return fail(-EUCLEAN, "drive %u (%s): %s (open with KVBLK_KVSTORE_OPEN_RECOVER, or "
						      "`kvblkctl store check --repair`, to keep what precedes it)",
					    d.index, d.path.c_str(), msg);
			/* Recovery: keep what precedes; new commits get seqs above every one seen. */
			expect = max_seq + 1;
			break;
		}
	}
	d.jnl.tail = pos;
	d.jnl.next_seq = expect;
	return 0;
}

} // namespace kvblk::kvstore
