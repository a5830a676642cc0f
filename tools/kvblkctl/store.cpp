// SPDX-License-Identifier: MIT
/*
 * store.cpp - `kvblkctl store`: the kvblk store (include/kvblk/kvstore.h) from the shell.
 *   create DRIVE... --class SIZE[:WEIGHT]...   make a store
 *   info   DRIVE...                            its layout, objects, drives; live counters
 *   check  DRIVE... [--data] [--repair]        an fsck: read-only unless --repair
 *   ls     DRIVE... [--limit N]                its keys
 *   stats  DRIVE                               the live counters of the process serving it
 * Everything goes through the store's public C API.
 */
#include "common.hpp"

#include <kvblk/kvstore.h>

#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

namespace kvblkctl {

namespace {

struct StoreOpts {
	std::vector<std::string> drives;
	std::vector<std::string> classes;
	std::string file_size, journal;
	uint32_t max_key = 0, max_meta = 0;
	bool force = false, data = false, repair = false, degraded = false;
	uint64_t limit = 0;
	std::string backend = "auto";
};

/* "4M", "4MiB", "32k", "1G", "4096": bytes; false when it is none of them. */
bool parse_size(const std::string &s, uint64_t *out)
{
	char *end = nullptr;
	errno = 0;
	const unsigned long long v = strtoull(s.c_str(), &end, 0);
	if (errno || end == s.c_str() || s[0] == '-')
		return false;
	std::string unit(end);
	for (char &c : unit)
		c = char(std::tolower(static_cast<unsigned char>(c)));
	uint64_t mul = 1;
	if (unit.empty() || unit == "b")
		mul = 1;
	else if (unit == "k" || unit == "kib" || unit == "kb")
		mul = 1ull << 10;
	else if (unit == "m" || unit == "mib" || unit == "mb")
		mul = 1ull << 20;
	else if (unit == "g" || unit == "gib" || unit == "gb")
		mul = 1ull << 30;
	else if (unit == "t" || unit == "tib" || unit == "tb")
		mul = 1ull << 40;
	else
		return false;
	if (v && mul > UINT64_MAX / v)
		return false;
	*out = v * mul;
	return true;
}

std::string uuid_str(const uint8_t *u)
{
	char s[40];
	std::snprintf(s, sizeof(s), "%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1],
		      u[2], u[3], u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
	return s;
}

const char *state_name(uint32_t s)
{
	switch (s) {
	case KVBLK_KVSTORE_DRIVE_OK:
		return "ok";
	case KVBLK_KVSTORE_DRIVE_FAILED:
		return "failed";
	case KVBLK_KVSTORE_DRIVE_MISSING:
		return "missing";
	default:
		return "unknown";
	}
}

/* A key as text: printable ASCII as is, anything else as \xNN. */
std::string printable(const void *k, uint32_t n)
{
	std::string out;
	const auto *p = static_cast<const unsigned char *>(k);
	for (uint32_t i = 0; i < n; i++) {
		if (p[i] >= 0x20 && p[i] < 0x7f && p[i] != '\\') {
			out += char(p[i]);
		} else {
			char b[8];
			std::snprintf(b, sizeof(b), "\\x%02x", p[i]);
			out += b;
		}
	}
	return out;
}

std::vector<const char *> cstrs(const std::vector<std::string> &v)
{
	std::vector<const char *> out;
	for (const auto &s : v)
		out.push_back(s.c_str());
	return out;
}

struct Closer {
	kvblk_kvstore *s = nullptr;
	~Closer() { kvblk_kvstore_close(s); }
};

int open_store(const StoreOpts &o, uint32_t flags, const char *cmd, kvblk_kvstore **s)
{
	kvblk_kvstore_open_opts oo;
	kvblk_kvstore_open_opts_init(&oo, sizeof(oo));
	oo.flags = flags | (o.degraded ? KVBLK_KVSTORE_OPEN_DEGRADED : 0);
	const int b = kvblk_backend_from_name(o.backend.c_str());
	if (b < 0)
		return fail(cmd, "unknown backend '" + o.backend + "'");
	oo.backend = uint32_t(b);
	auto p = cstrs(o.drives);
	const int ret = kvblk_kvstore_open(p.data(), uint32_t(p.size()), &oo, s);
	if (ret) {
		std::string hint;
		if (ret == -EBUSY)
			hint = " (a running process serves it: `kvblkctl store stats` shows its live counters)";
		return fail(cmd, std::string(kvblk_kvstore_last_error()) + hint);
	}
	return 0;
}

int run_create(const Globals &g, const StoreOpts &o)
{
	const char *cmd = "store create";
	kvblk_kvstore_create_opts c;
	kvblk_kvstore_create_opts_init(&c, sizeof(c));
	for (const auto &spec : o.classes) {
		const auto colon = spec.find(':');
		uint64_t slot = 0;
		if (!parse_size(spec.substr(0, colon), &slot))
			return fail(cmd, "--class " + spec + ": the slot size is not a size (4M, 32MiB, 262144)");
		uint32_t weight = 1;
		if (colon != std::string::npos) {
			char *end = nullptr;
			const unsigned long w = strtoul(spec.c_str() + colon + 1, &end, 10);
			if (*end || w == 0 || w > UINT32_MAX)
				return fail(cmd, "--class " + spec + ": the weight is not a positive integer");
			weight = uint32_t(w);
		}
		if (c.nr_classes >= KVBLK_KVSTORE_MAX_CLASSES)
			return fail(cmd, "at most " + std::to_string(KVBLK_KVSTORE_MAX_CLASSES) + " classes");
		c.classes[c.nr_classes++] = kvblk_kvstore_class{slot, weight, 0};
	}
	if (!o.file_size.empty() && !parse_size(o.file_size, &c.file_bytes))
		return fail(cmd, "--file-size " + o.file_size + " is not a size");
	if (!o.journal.empty() && !parse_size(o.journal, &c.journal_bytes))
		return fail(cmd, "--journal " + o.journal + " is not a size");
	c.max_key_bytes = o.max_key;
	c.max_meta_bytes = o.max_meta;
	c.flags = o.force ? KVBLK_KVSTORE_CREATE_FORCE : 0;
	kvblk_kvstore_open_opts oo;
	kvblk_kvstore_open_opts_init(&oo, sizeof(oo));
	const int b = kvblk_backend_from_name(o.backend.c_str());
	if (b < 0)
		return fail(cmd, "unknown backend '" + o.backend + "'");
	oo.backend = uint32_t(b);
	auto p = cstrs(o.drives);
	Closer st;
	if (kvblk_kvstore_create(p.data(), uint32_t(p.size()), &c, &oo, &st.s))
		return fail(cmd, kvblk_kvstore_last_error());
	kvblk_kvstore_info info{};
	info.info_size = sizeof(info);
	kvblk_kvstore_get_info(st.s, &info);
	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["uuid"] = uuid_str(info.uuid);
		doc["drives"] = o.drives;
		auto &cl = doc["classes"] = nlohmann::ordered_json::array();
		for (uint32_t i = 0; i < info.nr_classes; i++)
			cl.push_back({{"slot_bytes", info.classes[i].slot_bytes}, {"slots", info.classes[i].slots}});
		print_json(doc);
	} else {
		std::printf("created store %s over %zu drive(s)\n", uuid_str(info.uuid).c_str(), o.drives.size());
		for (uint32_t i = 0; i < info.nr_classes; i++)
			std::printf("  class %u: %llu slots of %s\n", i, (unsigned long long)info.classes[i].slots,
				    human_bytes(info.classes[i].slot_bytes).c_str());
	}
	return 0;
}

int print_live(const Globals &g, const StoreOpts &o, const char *cmd)
{
	kvblk_kvstore_stats st{};
	st.stats_size = sizeof(st);
	std::vector<kvblk_kvstore_drive_info> dr(KVBLK_KVSTORE_MAX_DRIVES);
	for (auto &d : dr)
		d.info_size = sizeof(d);
	const int n = kvblk_kvstore_peek_stats(o.drives[0].c_str(), &st, dr.data(), uint32_t(dr.size()));
	if (n < 0)
		return fail(cmd, kvblk_kvstore_last_error());
	kvblk_kvstore_identity id{};
	id.identity_size = sizeof(id);
	kvblk_kvstore_identify(o.drives[0].c_str(), &id);
	const std::pair<const char *, uint64_t> rows[] = {
		{"gets", st.gets}, {"hits", st.hits}, {"misses", st.misses}, {"checksum_failures", st.checksum_failures},
		{"get_errors", st.get_errors}, {"puts", st.puts}, {"put_errors", st.put_errors}, {"exists", st.exists},
		{"deletes", st.deletes}, {"evictions", st.evictions}, {"evictions_dropped", st.evictions_dropped},
		{"bytes_read", st.bytes_read}, {"bytes_written", st.bytes_written},
		{"journal_commits", st.journal_commits}, {"checkpoints", st.checkpoints}, {"flushes", st.flushes},
		{"degraded", st.degraded}};
	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["uuid"] = uuid_str(id.store_uuid);
		doc["pid"] = id.live_pid;
		auto &c = doc["counters"];
		for (const auto &[k, v] : rows)
			c[k] = v;
		auto &ds = doc["drives"] = nlohmann::ordered_json::array();
		for (int i = 0; i < n; i++)
			ds.push_back({{"index", dr[i].index}, {"uuid", uuid_str(dr[i].uuid)}, {"state", state_name(dr[i].state)},
				      {"bytes_read", dr[i].bytes_read}, {"bytes_written", dr[i].bytes_written},
				      {"read_errors", dr[i].read_errors}, {"write_errors", dr[i].write_errors}});
		print_json(doc);
		return 0;
	}
	std::printf("store %s, open by pid %d\n", uuid_str(id.store_uuid).c_str(), id.live_pid);
	for (const auto &[k, v] : rows)
		std::printf("  %-20s %llu\n", k, (unsigned long long)v);
	for (int i = 0; i < n; i++)
		std::printf("  drive %u %s: %s read, %s written, %llu read errors, %llu write errors\n", dr[i].index,
			    state_name(dr[i].state), human_bytes(dr[i].bytes_read).c_str(),
			    human_bytes(dr[i].bytes_written).c_str(), (unsigned long long)dr[i].read_errors,
			    (unsigned long long)dr[i].write_errors);
	return 0;
}

int run_info(const Globals &g, const StoreOpts &o)
{
	const char *cmd = "store info";
	kvblk_kvstore_identity id{};
	id.identity_size = sizeof(id);
	if (kvblk_kvstore_identify(o.drives[0].c_str(), &id))
		return fail(cmd, kvblk_kvstore_last_error());
	if (id.live_pid)
		return print_live(g, o, cmd);
	Closer st;
	if (int r = open_store(o, KVBLK_KVSTORE_OPEN_RDONLY, cmd, &st.s))
		return r;
	kvblk_kvstore_info info{};
	info.info_size = sizeof(info);
	kvblk_kvstore_get_info(st.s, &info);
	std::vector<kvblk_kvstore_drive_info> dr(info.drives);
	for (uint32_t i = 0; i < info.drives; i++) {
		dr[i].info_size = sizeof(dr[i]);
		kvblk_kvstore_get_drive_info(st.s, i, &dr[i]);
	}
	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["uuid"] = uuid_str(info.uuid);
		doc["format_version"] = info.format_version;
		doc["objects"] = info.objects;
		doc["bytes_stored"] = info.bytes_stored;
		doc["max_key_bytes"] = info.max_key_bytes;
		doc["max_meta_bytes"] = info.max_meta_bytes;
		doc["journal_bytes"] = info.journal_bytes;
		auto &cl = doc["classes"] = nlohmann::ordered_json::array();
		for (uint32_t i = 0; i < info.nr_classes; i++)
			cl.push_back({{"slot_bytes", info.classes[i].slot_bytes}, {"slots", info.classes[i].slots},
				      {"slots_free", info.classes[i].slots_free}, {"objects", info.classes[i].objects}});
		auto &ds = doc["drives"] = nlohmann::ordered_json::array();
		for (const auto &d : dr)
			ds.push_back({{"index", d.index}, {"uuid", uuid_str(d.uuid)}, {"path", d.path},
				      {"state", state_name(d.state)}, {"bytes", d.bytes}, {"objects", d.objects},
				      {"slots", d.slots}, {"slots_free", d.slots_free}});
		print_json(doc);
		return 0;
	}
	std::printf("store %s (format %u), %llu objects, %s stored\n", uuid_str(info.uuid).c_str(), info.format_version,
		    (unsigned long long)info.objects, human_bytes(info.bytes_stored).c_str());
	std::printf("  keys up to %u bytes, metadata up to %u bytes, journal %s per drive\n", info.max_key_bytes,
		    info.max_meta_bytes, human_bytes(info.journal_bytes).c_str());
	for (uint32_t i = 0; i < info.nr_classes; i++)
		std::printf("  class %u: %s slots: %llu, %llu free, %llu objects\n", i,
			    human_bytes(info.classes[i].slot_bytes).c_str(), (unsigned long long)info.classes[i].slots,
			    (unsigned long long)info.classes[i].slots_free, (unsigned long long)info.classes[i].objects);
	for (const auto &d : dr)
		std::printf("  drive %u %s %s: %s, %llu objects, %llu of %llu slots free\n", d.index, state_name(d.state),
			    d.path[0] ? d.path : "-", human_bytes(d.bytes).c_str(), (unsigned long long)d.objects,
			    (unsigned long long)d.slots_free, (unsigned long long)d.slots);
	return 0;
}

int run_check(const Globals &g, const StoreOpts &o)
{
	const char *cmd = "store check";
	Closer st;
	const uint32_t flags = o.repair ? KVBLK_KVSTORE_OPEN_RECOVER : KVBLK_KVSTORE_OPEN_RDONLY;
	if (int r = open_store(o, flags, cmd, &st.s))
		return r;
	kvblk_kvstore_check_report rep{};
	rep.report_size = sizeof(rep);
	const uint32_t cf = (o.data || o.repair ? KVBLK_KVSTORE_CHECK_DATA : 0) | (o.repair ? KVBLK_KVSTORE_CHECK_REPAIR : 0);
	const int bad = kvblk_kvstore_check(st.s, cf, &rep);
	if (bad < 0)
		return fail(cmd, kvblk_kvstore_last_error());
	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["objects"] = rep.objects;
		doc["bad_objects"] = rep.bad_objects;
		doc["bytes_checked"] = rep.bytes_checked;
		doc["repaired"] = rep.repaired;
		doc["superblocks_bad"] = rep.superblocks_bad;
		doc["checkpoints_bad"] = rep.checkpoints_bad;
		doc["journal_tail_discarded"] = rep.journal_tail_discarded;
		doc["first_problem"] = rep.first_problem;
		doc["clean"] = rep.bad_objects == 0 && !rep.first_problem[0];
		print_json(doc);
	} else {
		std::printf("%llu objects checked%s: %llu bad%s\n", (unsigned long long)rep.objects,
			    cf & KVBLK_KVSTORE_CHECK_DATA ? " with their data" : " (index only; --data reads them)",
			    (unsigned long long)rep.bad_objects,
			    o.repair ? (", " + std::to_string(rep.repaired) + " dropped").c_str() : "");
		if (rep.superblocks_bad)
			std::printf("  %u damaged superblock copies (the other copy serves)\n", rep.superblocks_bad);
		if (rep.checkpoints_bad)
			std::printf("  %u damaged checkpoints (the other one and the journal served)\n", rep.checkpoints_bad);
		if (rep.journal_tail_discarded)
			std::printf("  %llu incomplete journal commits discarded (a crash during a put)\n",
				    (unsigned long long)rep.journal_tail_discarded);
		if (rep.first_problem[0])
			std::printf("  first problem: %s\n", rep.first_problem);
	}
	return rep.bad_objects && !o.repair ? 1 : 0;
}

int run_ls(const Globals &g, const StoreOpts &o)
{
	const char *cmd = "store ls";
	Closer st;
	if (int r = open_store(o, KVBLK_KVSTORE_OPEN_RDONLY, cmd, &st.s))
		return r;
	uint64_t cursor = 0, shown = 0;
	std::vector<kvblk_kvstore_key> keys(256);
	std::vector<char> buf(256 * KVBLK_KVSTORE_MAX_KEY);
	nlohmann::ordered_json arr = nlohmann::ordered_json::array();
	do {
		const int n = kvblk_kvstore_list(st.s, &cursor, keys.data(), uint32_t(keys.size()), buf.data(), buf.size());
		if (n < 0)
			return fail(cmd, kvblk_kvstore_last_error());
		for (int i = 0; i < n && (!o.limit || shown < o.limit); i++, shown++) {
			const std::string k = printable(keys[i].key, keys[i].key_len);
			if (g.output == Output::json)
				arr.push_back({{"key", k}, {"length", keys[i].length}, {"drive", keys[i].drive},
					       {"gen", keys[i].gen}});
			else
				std::printf("%s\t%llu\tdrive %u\tgen %llu\n", k.c_str(), (unsigned long long)keys[i].length,
					    keys[i].drive, (unsigned long long)keys[i].gen);
		}
	} while (cursor && (!o.limit || shown < o.limit));
	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["keys"] = arr;
		print_json(doc);
	}
	return 0;
}

} // namespace

void register_store(CLI::App &app, Globals &g, Handler &h)
{
	auto o = std::make_shared<StoreOpts>();
	auto *store = app.add_subcommand("store", "The kvblk store: create, info, check, ls, stats");
	store->require_subcommand(1);
	auto drives = [&](CLI::App *sub) {
		sub->add_option("drives", o->drives, "The store's drives (block devices or files), any order")
			->required();
		sub->add_option("--backend", o->backend, "libkvblk backend (auto, uring, kmod, psync, threadpool)");
	};
	auto *create = store->add_subcommand("create", "Make a store over one or more drives (writes their start)");
	drives(create);
	create->add_option("--class", o->classes,
			   "Slot size class SIZE[:WEIGHT] (repeatable; e.g. --class 256K:1 --class 4M:4 --class 32M:4); "
			   "default one class of 4 MiB")
		->type_name("SIZE[:WEIGHT]");
	create->add_option("--file-size", o->file_size, "Create missing drive files of this size (preallocated)");
	create->add_option("--journal", o->journal, "Journal ring per drive (default 64M, or 1/64 of a small drive)");
	create->add_option("--max-key", o->max_key, "Longest key in bytes (default 512)")
		->check(CLI::Range(1u, KVBLK_KVSTORE_MAX_KEY));
	create->add_option("--max-meta", o->max_meta, "Longest metadata per object in bytes (default 128)")
		->check(CLI::Range(0u, KVBLK_KVSTORE_MAX_META));
	create->add_flag("--force", o->force, "Overwrite drives that hold a kvblk store");
	create->callback([&g, &h, o] { h = [&g, o] { return run_create(g, *o); }; });

	auto *info = store->add_subcommand("info", "Layout, objects and drives (live counters when a process serves it)");
	drives(info);
	info->add_flag("--degraded", o->degraded, "Open although drives are missing");
	info->callback([&g, &h, o] { h = [&g, o] { return run_info(g, *o); }; });

	auto *check = store->add_subcommand("check", "Check the index (and with --data every object's CRC32C); "
						   "exit 1 when something is bad");
	drives(check);
	check->add_flag("--data", o->data, "Read every object and check its CRC32C");
	check->add_flag("--repair", o->repair, "Open a damaged store, drop what fails its checks (writes)");
	check->add_flag("--degraded", o->degraded, "Open although drives are missing");
	check->callback([&g, &h, o] { h = [&g, o] { return run_check(g, *o); }; });

	auto *ls = store->add_subcommand("ls", "List the keys: key, length, drive, generation");
	drives(ls);
	ls->add_option("--limit", o->limit, "Show at most this many");
	ls->add_flag("--degraded", o->degraded, "Open although drives are missing");
	ls->callback([&g, &h, o] { h = [&g, o] { return run_ls(g, *o); }; });

	auto *stats = store->add_subcommand("stats", "Live counters of the process that has the store open");
	drives(stats);
	stats->callback([&g, &h, o] { h = [&g, o] { return print_live(g, *o, "store stats"); }; });
}

} // namespace kvblkctl
