// SPDX-License-Identifier: MIT
// Encoders and checking decoders of the on-disk structures (docs/kvstore-format.md, sections
// 3-6). Every decoder checks the structure's CRC and every field that sizes or places
// something, so that a damaged block is refused here and never used.
#include "format.hpp"

#include "crc32c.hpp"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <sys/random.h>

namespace kvblk::kvstore {
namespace {

constexpr char kSbMagic[8] = {'K', 'V', 'B', 'L', 'K', 'K', 'V', 'S'};
constexpr char kJnlMagic[8] = {'K', 'V', 'B', 'L', 'K', 'J', 'N', 'L'};
constexpr char kCkpMagic[8] = {'K', 'V', 'B', 'L', 'K', 'C', 'K', 'P'};

/* Superblock field offsets (section 3). */
enum : size_t {
	kSbVersion = 8,
	kSbCrc = 12,
	kSbCompat = 16,
	kSbRoCompat = 20,
	kSbIncompat = 24,
	kSbDriveIndex = 28,
	kSbDriveCount = 32,
	kSbNrClasses = 36,
	kSbStoreUuid = 40,
	kSbDriveUuid = 56,
	kSbCreated = 72,
	kSbDriveBytes = 80,
	kSbCkptOffset = 88,
	kSbCkptBytes = 96,
	kSbJournalOffset = 104,
	kSbJournalBytes = 112,
	kSbMaxKey = 120,
	kSbMaxMeta = 124,
	kSbClasses = 128,
	kSbMembers = 512,
};

/* CRC of @len bytes at @p with the 4 bytes at @crc_off taken as zero. */
uint32_t crc_without(const uint8_t *p, size_t len, size_t crc_off) noexcept
{
	static const uint8_t zero[4] = {};
	uint32_t c = crc32c(0, p, crc_off);
	c = crc32c(c, zero, 4);
	return crc32c(c, p + crc_off + 4, len - crc_off - 4);
}

bool all_zero(const uint8_t *p, size_t len) noexcept
{
	return std::all_of(p, p + len, [](uint8_t b) { return b == 0; });
}

} // namespace

void encode_superblock(const Superblock &sb, uint8_t *b) noexcept
{
	memset(b, 0, kBlock);
	memcpy(b, kSbMagic, 8);
	put_u32(b + kSbVersion, sb.version);
	put_u32(b + kSbCompat, sb.compat);
	put_u32(b + kSbRoCompat, sb.ro_compat);
	put_u32(b + kSbIncompat, sb.incompat);
	put_u32(b + kSbDriveIndex, sb.drive_index);
	put_u32(b + kSbDriveCount, sb.drive_count);
	put_u32(b + kSbNrClasses, sb.nr_classes);
	memcpy(b + kSbStoreUuid, sb.store_uuid.data(), 16);
	memcpy(b + kSbDriveUuid, sb.drive_uuid.data(), 16);
	put_u64(b + kSbCreated, sb.created_ns);
	put_u64(b + kSbDriveBytes, sb.drive_bytes);
	put_u64(b + kSbCkptOffset, sb.ckpt_offset);
	put_u64(b + kSbCkptBytes, sb.ckpt_bytes);
	put_u64(b + kSbJournalOffset, sb.journal_offset);
	put_u64(b + kSbJournalBytes, sb.journal_bytes);
	put_u32(b + kSbMaxKey, sb.max_key);
	put_u32(b + kSbMaxMeta, sb.max_meta);
	for (uint32_t c = 0; c < sb.nr_classes; c++) {
		uint8_t *p = b + kSbClasses + 24 * c;
		put_u64(p, sb.classes[c].slot_bytes);
		put_u64(p + 8, sb.classes[c].nr_slots);
		put_u64(p + 16, sb.classes[c].offset);
	}
	for (uint32_t d = 0; d < sb.drive_count; d++)
		memcpy(b + kSbMembers + 16 * d, sb.members[d].data(), 16);
	put_u32(b + kSbCrc, crc_without(b, kBlock, kSbCrc));
}

int decode_superblock(const uint8_t *b, Superblock *sb, bool *ro_only, std::string *why)
{
	char msg[200];
	*ro_only = false;
	if (memcmp(b, kSbMagic, 8) != 0) {
		*why = "no kvblk store magic";
		return -EMEDIUMTYPE;
	}
	if (get_u32(b + kSbCrc) != crc_without(b, kBlock, kSbCrc)) {
		*why = "superblock CRC mismatch";
		return -EUCLEAN;
	}
	Superblock s;
	s.version = get_u32(b + kSbVersion);
	s.compat = get_u32(b + kSbCompat);
	s.ro_compat = get_u32(b + kSbRoCompat);
	s.incompat = get_u32(b + kSbIncompat);
	if (s.version > KVBLK_KVSTORE_FORMAT_VERSION || (s.incompat & ~kKnownIncompat)) {
		snprintf(msg, sizeof(msg), "format version %u, incompatible features 0x%x (this library: version %u, "
			 "features 0x%x)", s.version, s.incompat, KVBLK_KVSTORE_FORMAT_VERSION, kKnownIncompat);
		*why = msg;
		return -EPROTONOSUPPORT;
	}
	if (s.version == 0) {
		*why = "format version 0";
		return -EUCLEAN;
	}
	*ro_only = (s.ro_compat & ~kKnownRoCompat) != 0;
	s.drive_index = get_u32(b + kSbDriveIndex);
	s.drive_count = get_u32(b + kSbDriveCount);
	s.nr_classes = get_u32(b + kSbNrClasses);
	memcpy(s.store_uuid.data(), b + kSbStoreUuid, 16);
	memcpy(s.drive_uuid.data(), b + kSbDriveUuid, 16);
	s.created_ns = get_u64(b + kSbCreated);
	s.drive_bytes = get_u64(b + kSbDriveBytes);
	s.ckpt_offset = get_u64(b + kSbCkptOffset);
	s.ckpt_bytes = get_u64(b + kSbCkptBytes);
	s.journal_offset = get_u64(b + kSbJournalOffset);
	s.journal_bytes = get_u64(b + kSbJournalBytes);
	s.max_key = get_u32(b + kSbMaxKey);
	s.max_meta = get_u32(b + kSbMaxMeta);
	const char *bad = nullptr;
	if (s.drive_count == 0 || s.drive_count > KVBLK_KVSTORE_MAX_DRIVES || s.drive_index >= s.drive_count)
		bad = "drive index or count";
	else if (s.nr_classes == 0 || s.nr_classes > KVBLK_KVSTORE_MAX_CLASSES)
		bad = "number of classes";
	else if (s.max_key == 0 || s.max_key > KVBLK_KVSTORE_MAX_KEY || s.max_meta > KVBLK_KVSTORE_MAX_META)
		bad = "key or metadata limit";
	else if (s.ckpt_offset != kMetaStart || s.ckpt_bytes % kBlock || s.ckpt_bytes < kBlock ||
		 s.journal_offset != s.ckpt_offset + 2 * s.ckpt_bytes || s.journal_bytes % kBlock ||
		 s.journal_bytes < kMinJournalBytes || s.journal_offset + s.journal_bytes > s.drive_bytes)
		bad = "metadata areas";
	if (!bad) {
		uint64_t end = s.journal_offset + s.journal_bytes;
		for (uint32_t c = 0; c < s.nr_classes && !bad; c++) {
			const uint8_t *p = b + kSbClasses + 24 * c;
			ClassGeom &g = s.classes[c];
			g.slot_bytes = get_u64(p);
			g.nr_slots = get_u64(p + 8);
			g.offset = get_u64(p + 16);
			uint64_t bytes;
			if (g.slot_bytes == 0 || g.slot_bytes % KVBLK_KVSTORE_SLOT_ALIGN || g.nr_slots == 0 ||
			    g.offset < end || g.offset % kBlock ||
			    __builtin_mul_overflow(g.slot_bytes, g.nr_slots, &bytes) ||
			    __builtin_add_overflow(g.offset, bytes, &end) || end > s.drive_bytes ||
			    (c && g.slot_bytes <= s.classes[c - 1].slot_bytes))
				bad = "class table";
		}
	}
	if (!bad && s.ckpt_bytes < kBlock + max_record_bytes(s.max_key, s.max_meta)) /* at least one record */
		bad = "checkpoint area size";
	if (bad) {
		snprintf(msg, sizeof(msg), "superblock field out of range: %s", bad);
		*why = msg;
		return -EUCLEAN;
	}
	for (uint32_t d = 0; d < s.drive_count; d++)
		memcpy(s.members[d].data(), b + kSbMembers + 16 * d, 16);
	if (s.members[s.drive_index] != s.drive_uuid) {
		*why = "superblock's member table does not list its own drive";
		return -EUCLEAN;
	}
	*sb = s;
	return 0;
}

size_t encode_record(const Record &r, uint8_t *p) noexcept
{
	const size_t n = record_bytes(r.key.size(), r.meta.size());
	memset(p, 0, n);
	p[0] = r.type;
	p[1] = r.cls;
	put_u16(p + 2, uint16_t(r.key.size()));
	put_u16(p + 4, uint16_t(r.meta.size()));
	put_u32(p + 8, r.crc);
	put_u64(p + 16, r.slot);
	put_u64(p + 24, r.length);
	put_u64(p + 32, r.gen);
	memcpy(p + kRecordHeader, r.key.data(), r.key.size());
	memcpy(p + kRecordHeader + r.key.size(), r.meta.data(), r.meta.size());
	return n;
}

int decode_record(const uint8_t *p, size_t avail, uint32_t max_key, uint32_t max_meta, Record *r, size_t *used)
{
	if (avail < kRecordHeader)
		return -EUCLEAN;
	const uint16_t klen = get_u16(p + 2), mlen = get_u16(p + 4);
	if ((p[0] != kRecPut && p[0] != kRecDel && p[0] != kRecTomb) || get_u16(p + 6) || get_u32(p + 12) || klen == 0 ||
	    klen > max_key || mlen > max_meta)
		return -EUCLEAN;
	const size_t n = record_bytes(klen, mlen);
	if (n > avail)
		return -EUCLEAN;
	r->type = p[0];
	r->cls = p[1];
	r->crc = get_u32(p + 8);
	r->slot = get_u64(p + 16);
	r->length = get_u64(p + 24);
	r->gen = get_u64(p + 32);
	r->key.assign(reinterpret_cast<const char *>(p + kRecordHeader), klen);
	r->meta.assign(reinterpret_cast<const char *>(p + kRecordHeader + klen), mlen);
	*used = n;
	return 0;
}

void seal_commit(const CommitHeader &h, uint8_t *c) noexcept
{
	memset(c, 0, kCommitHeader);
	memcpy(c, kJnlMagic, 8);
	memcpy(c + 16, h.store_uuid.data(), 16);
	put_u32(c + 32, h.drive_index);
	put_u32(c + 36, h.nr_blocks);
	put_u64(c + 40, h.seq);
	put_u64(c + 48, h.pos);
	put_u32(c + 56, h.nr_records);
	put_u32(c + 60, h.payload_bytes);
	/* Header CRC over [0, 64) without bytes 8..16 (both CRC fields), then the commit CRC. */
	uint32_t hc = crc32c(0, c, 8);
	hc = crc32c(hc, c + 16, kCommitHeader - 16);
	put_u32(c + 8, hc);
	put_u32(c + 12, crc_without(c, size_t(h.nr_blocks) * kBlock, 12));
}

HeaderKind classify_header(const uint8_t *b, const Uuid &uuid, uint32_t drive, CommitHeader *h) noexcept
{
	const bool magic = memcmp(b, kJnlMagic, 8) == 0;
	const bool ours = memcmp(b + 16, uuid.data(), 16) == 0;
	if (!magic && !ours)
		return all_zero(b, kBlock) ? HeaderKind::zero : HeaderKind::other;
	uint32_t hc = crc32c(0, b, 8);
	hc = crc32c(hc, b + 16, kCommitHeader - 16);
	if (!magic || get_u32(b + 8) != hc)
		return (magic || ours) ? HeaderKind::damaged : HeaderKind::other;
	CommitHeader x;
	memcpy(x.store_uuid.data(), b + 16, 16);
	x.drive_index = get_u32(b + 32);
	x.nr_blocks = get_u32(b + 36);
	x.seq = get_u64(b + 40);
	x.pos = get_u64(b + 48);
	x.nr_records = get_u32(b + 56);
	x.payload_bytes = get_u32(b + 60);
	if (!ours || x.drive_index != drive)
		return HeaderKind::foreign;
	if (x.nr_blocks == 0 || uint64_t(x.payload_bytes) + kCommitHeader > uint64_t(x.nr_blocks) * kBlock)
		return HeaderKind::damaged;
	*h = x;
	return HeaderKind::valid;
}

bool commit_crc_ok(const uint8_t *c, uint32_t nr_blocks) noexcept
{
	return get_u32(c + 12) == crc_without(c, size_t(nr_blocks) * kBlock, 12);
}

void encode_ckpt_header(const CkptHeader &h, uint8_t *b) noexcept
{
	memset(b, 0, kBlock);
	memcpy(b, kCkpMagic, 8);
	put_u32(b + 12, h.payload_crc);
	memcpy(b + 16, h.store_uuid.data(), 16);
	put_u32(b + 32, h.drive_index);
	put_u32(b + 36, h.nr_classes);
	put_u64(b + 40, h.seq);
	put_u64(b + 48, h.pos);
	put_u64(b + 56, h.gen);
	put_u64(b + 64, h.nr_records);
	put_u64(b + 72, h.payload_bytes);
	for (uint32_t c = 0; c < KVBLK_KVSTORE_MAX_CLASSES; c++)
		put_u64(b + 80 + 8 * c, h.hwm[c]);
	put_u32(b + 8, crc_without(b, kBlock, 8));
}

bool decode_ckpt_header(const uint8_t *b, const Uuid &uuid, uint32_t drive, CkptHeader *h) noexcept
{
	if (memcmp(b, kCkpMagic, 8) != 0 || get_u32(b + 8) != crc_without(b, kBlock, 8))
		return false;
	CkptHeader x;
	memcpy(x.store_uuid.data(), b + 16, 16);
	x.payload_crc = get_u32(b + 12);
	x.drive_index = get_u32(b + 32);
	x.nr_classes = get_u32(b + 36);
	x.seq = get_u64(b + 40);
	x.pos = get_u64(b + 48);
	x.gen = get_u64(b + 56);
	x.nr_records = get_u64(b + 64);
	x.payload_bytes = get_u64(b + 72);
	for (uint32_t c = 0; c < KVBLK_KVSTORE_MAX_CLASSES; c++)
		x.hwm[c] = get_u64(b + 80 + 8 * c);
	if (x.store_uuid != uuid || x.drive_index != drive || x.pos % kBlock)
		return false;
	*h = x;
	return true;
}

std::string uuid_text(const Uuid &u)
{
	char s[37];
	snprintf(s, sizeof(s), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
		 u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
	return s;
}

Uuid new_uuid()
{
	Uuid u{};
	size_t got = 0;
	while (got < u.size()) {
		const ssize_t n = getrandom(u.data() + got, u.size() - got, 0);
		if (n > 0)
			got += size_t(n);
	}
	u[6] = uint8_t((u[6] & 0x0f) | 0x40);
	u[8] = uint8_t((u[8] & 0x3f) | 0x80);
	return u;
}

} // namespace kvblk::kvstore
