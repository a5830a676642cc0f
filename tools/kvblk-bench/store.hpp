// SPDX-License-Identifier: MIT
//
// kvblk-bench store: the test pattern, and creating, reusing and checking a
// store of N objects of S bytes laid out back to back from byte 0 of a
// regular file or block device.
//
// Pattern (version 1): the 8-byte little-endian word at byte offset o
// (o a multiple of 8) of object i is splitmix64((i << 40) ^ o). Any byte of
// any object can be generated or checked without state, so a store is
// verified object by object, batch by batch, in any order. Objects of a
// store lie back to back (all one size, or mixed sizes), or one per file.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvblk_bench {

inline constexpr int kPatternVersion = 1;
inline constexpr const char *kPatternName = "splitmix64(object<<40 ^ offset)";

// splitmix64 finaliser used as a hash: a bijection on 64-bit words.
constexpr uint64_t splitmix64(uint64_t x) noexcept
{
	uint64_t z = x + 0x9e3779b97f4a7c15ULL;
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
	return z ^ (z >> 31);
}

// The pattern word at byte offset @offset (multiple of 8) of object @object.
constexpr uint64_t pattern_word(uint64_t object, uint64_t offset) noexcept
{
	return splitmix64((object << 40) ^ offset);
}

// Fill @len bytes at @buf with the pattern of object @object starting at
// byte @offset of that object. @offset and @len must be multiples of 8.
void fill_pattern(void *buf, uint64_t object, uint64_t offset, size_t len) noexcept;

// Outcome of checking a range against the pattern.
struct Mismatch {
	uint64_t bytes = 0;	  // bytes that differ
	uint64_t first_offset = 0; // offset in the object of the first differing byte
	uint8_t expected = 0;	  // its expected and actual values
	uint8_t actual = 0;
};

// Check @len bytes at @buf against the pattern of object @object from byte
// @offset of the object (both multiples of 8). Returns the differing bytes
// counted one by one (a single flipped byte gives 1).
Mismatch verify_pattern(const void *buf, uint64_t object, uint64_t offset, size_t len) noexcept;

// ------------------------------------------------------------------ store

struct Workload;

struct StoreSpec {
	// Where the objects lie and how big they are: one store file or block
	// device (wl->paths[0], objects at wl->offset), or one file per object.
	const Workload *wl = nullptr;
	uint32_t batch_objects = 16; // objects per kvblk_store_many() while writing
	uint64_t cmd_bytes = 0;	 // max_cmd_bytes for writing (0: library default)
	enum class Mode {
		reuse_or_create, // reuse a matching store, otherwise (re)write it
		keep,		 // use what is there; fail if it does not match
		recreate,	 // always (re)write
	} mode = Mode::reuse_or_create;
	bool allow_device_write = false; // --i-know-this-overwrites
	bool progress = false;		 // progress bar on stderr
};

struct StoreState {
	bool is_blockdev = false;
	bool created = false;		// written by this run
	std::string reason;		// why it was reused or (re)written
	uint64_t capacity = 0;		// file or device size in bytes
	double write_gbps = 0;		// when created
	double write_seconds = 0;
};

// Make sure the store holds the workload's objects: reuse it when the
// sidecar (regular files only: <path>.meta, or <dir>/kvblk-chunks.meta for
// one file per object) matches and a sample of objects carries the pattern;
// otherwise write it: a store with kvblk_store_many() (uring backend), chunk
// files with plain writes. Returns 0 or -errno with @err describing the failure.
int prepare_store(const StoreSpec &spec, StoreState &state, std::string &err);

// Path of the sidecar file describing a regular-file store.
std::string meta_path(const std::string &store_path);

// Directory of the chunk files of a chunk workload whose store option is @store_path.
std::string chunk_dir(const std::string &store_path);

} // namespace kvblk_bench
