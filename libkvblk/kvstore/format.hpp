// SPDX-License-Identifier: MIT
// The store's on-disk format (docs/kvstore-format.md): constants, the decoded forms of the
// superblock, records, journal commit headers and checkpoint headers, and their encoders
// and checking decoders. Nothing here does I/O.
#pragma once

#include <kvblk/kvstore.h>

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace kvblk::kvstore {

inline constexpr uint64_t kBlock = 4096;	  /* metadata block: every metadata I/O is whole blocks */
inline constexpr uint64_t kSbOffset[2] = {0, 64u << 10};
inline constexpr uint64_t kMetaStart = 1u << 20; /* first checkpoint area */
inline constexpr uint64_t kAreaAlign = 1u << 20; /* class areas start 1 MiB aligned */
inline constexpr uint64_t kMaxCommitBytes = 1u << 20;
inline constexpr uint64_t kMinJournalBytes = 4u << 20;
inline constexpr uint64_t kDefaultJournalBytes = 64u << 20;
inline constexpr size_t kRecordHeader = 40;
inline constexpr size_t kCommitHeader = 64;
inline constexpr size_t kCkptHeaderUsed = 80 + 8 * KVBLK_KVSTORE_MAX_CLASSES;

using Uuid = std::array<uint8_t, 16>;

struct ClassGeom {
	uint64_t slot_bytes = 0;
	uint64_t nr_slots = 0;
	uint64_t offset = 0; /* byte offset of slot 0 on the drive */
};

/* struct Superblock - section 3 of the format note. */
struct Superblock {
	uint32_t version = KVBLK_KVSTORE_FORMAT_VERSION;
	uint32_t compat = 0, ro_compat = 0, incompat = 0;
	uint32_t drive_index = 0, drive_count = 0, nr_classes = 0;
	Uuid store_uuid{}, drive_uuid{};
	uint64_t created_ns = 0;
	uint64_t drive_bytes = 0;
	uint64_t ckpt_offset = 0, ckpt_bytes = 0;
	uint64_t journal_offset = 0, journal_bytes = 0;
	uint32_t max_key = 0, max_meta = 0;
	std::array<ClassGeom, KVBLK_KVSTORE_MAX_CLASSES> classes{};
	std::array<Uuid, KVBLK_KVSTORE_MAX_DRIVES> members{};
};

/* Feature bits this library knows (none yet: version 1 sets none). */
inline constexpr uint32_t kKnownCompat = 0, kKnownRoCompat = 0, kKnownIncompat = 0;

/* Fill the 4 KiB @block with @sb and its CRC. */
void encode_superblock(const Superblock &sb, uint8_t *block) noexcept;

/*
 * Decode and check a superblock copy: 0; -EMEDIUMTYPE no magic; -EUCLEAN bad CRC or a field
 * out of range (*why says which); -EPROTONOSUPPORT a newer version or unknown incompat
 * features (unknown ro_compat features: 0 with *ro_only set).
 */
int decode_superblock(const uint8_t *block, Superblock *sb, bool *ro_only, std::string *why);

/*
 * Record types. A TOMB ("tombstone") records a deletion made while a drive of the store was
 * missing: the missing drive may hold an older copy of the key, which the merge of the next
 * full open must drop (docs/kvstore-format.md section 4).
 */
enum : uint8_t { kRecPut = 1, kRecDel = 2, kRecTomb = 3 };

/* struct Record - one index record (section 4). */
struct Record {
	uint8_t type = kRecPut;
	uint8_t cls = 0;
	uint32_t crc = 0;
	uint64_t slot = 0;
	uint64_t length = 0;
	uint64_t gen = 0;
	std::string key;
	std::string meta;
};

/* Bytes a record of these lengths takes (8-byte aligned). */
constexpr size_t record_bytes(size_t key_len, size_t meta_len) noexcept
{
	return (kRecordHeader + key_len + meta_len + 7) & ~size_t(7);
}

/* The largest record of a store. */
constexpr size_t max_record_bytes(uint32_t max_key, uint32_t max_meta) noexcept
{
	return record_bytes(max_key, max_meta);
}

/* Write @r at @dst (record_bytes() of it, padding zeroed); returns the bytes written. */
size_t encode_record(const Record &r, uint8_t *dst) noexcept;

/*
 * Decode the record at @p (at most @avail bytes): 0 with *used its size; -EUCLEAN when it does
 * not fit @avail, has an unknown type or non-zero reserved bytes, or a key/meta over the store's
 * limits (@max_key, @max_meta).
 */
int decode_record(const uint8_t *p, size_t avail, uint32_t max_key, uint32_t max_meta, Record *r,
		  size_t *used);

/* struct CommitHeader - a journal commit's first 64 bytes (section 5). */
struct CommitHeader {
	Uuid store_uuid{};
	uint32_t drive_index = 0;
	uint32_t nr_blocks = 0;
	uint64_t seq = 0;
	uint64_t pos = 0; /* logical journal position */
	uint32_t nr_records = 0;
	uint32_t payload_bytes = 0;
};

/* Write @h at the start of @commit (nr_blocks * 4 KiB, records already in place), with both CRCs. */
void seal_commit(const CommitHeader &h, uint8_t *commit) noexcept;

/* What the block at a journal position is. */
enum class HeaderKind {
	zero,	   /* all zero: never written */
	valid,	   /* a commit header whose own CRC holds (*h filled) */
	foreign,   /* a valid header of another store or drive */
	damaged,   /* looks like ours (magic or store UUID) but its header CRC fails */
	other,	   /* anything else: data of an older lap, garbage */
};

/* Classify the 4 KiB block @block for the store @uuid, drive @drive. */
HeaderKind classify_header(const uint8_t *block, const Uuid &uuid, uint32_t drive, CommitHeader *h) noexcept;

/* Whether the whole commit (nr_blocks * 4 KiB at @commit) matches its commit CRC. */
bool commit_crc_ok(const uint8_t *commit, uint32_t nr_blocks) noexcept;

/* struct CkptHeader - a checkpoint area's header (section 6). */
struct CkptHeader {
	Uuid store_uuid{};
	uint32_t drive_index = 0;
	uint32_t nr_classes = 0;
	uint64_t seq = 0;
	uint64_t pos = 0;
	uint64_t gen = 0;
	uint64_t nr_records = 0;
	uint64_t payload_bytes = 0;
	uint32_t payload_crc = 0;
	std::array<uint64_t, KVBLK_KVSTORE_MAX_CLASSES> hwm{};
};

/* Fill the 4 KiB @block with @h and its header CRC. */
void encode_ckpt_header(const CkptHeader &h, uint8_t *block) noexcept;

/* Decode and check a checkpoint header of store @uuid, drive @drive: true when valid. */
bool decode_ckpt_header(const uint8_t *block, const Uuid &uuid, uint32_t drive, CkptHeader *h) noexcept;

/* Little-endian helpers. */
inline void put_u16(uint8_t *p, uint16_t v) noexcept
{
	p[0] = uint8_t(v);
	p[1] = uint8_t(v >> 8);
}
inline void put_u32(uint8_t *p, uint32_t v) noexcept
{
	for (int i = 0; i < 4; i++)
		p[i] = uint8_t(v >> (8 * i));
}
inline void put_u64(uint8_t *p, uint64_t v) noexcept
{
	for (int i = 0; i < 8; i++)
		p[i] = uint8_t(v >> (8 * i));
}
inline uint16_t get_u16(const uint8_t *p) noexcept
{
	return uint16_t(p[0] | (p[1] << 8));
}
inline uint32_t get_u32(const uint8_t *p) noexcept
{
	uint32_t v = 0;
	for (int i = 3; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}
inline uint64_t get_u64(const uint8_t *p) noexcept
{
	uint64_t v = 0;
	for (int i = 7; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

/* "0b1f...": a UUID as 32 hex digits with the usual dashes. */
std::string uuid_text(const Uuid &u);

/* A random (version 4) UUID from getrandom(2). */
Uuid new_uuid();

} // namespace kvblk::kvstore
