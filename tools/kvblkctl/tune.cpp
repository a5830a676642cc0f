// SPDX-License-Identifier: MIT
/*
 * tune.cpp - `kvblkctl tune get [DEVICE] [NAME]`, `kvblkctl tune set DEVICE
 * NAME VALUE`, and the hidden `kvblkctl docs tunables` that prints
 * docs/tunables.md from the same table (tunables.hpp).
 *
 * DEVICE is a namespace (nvme0n1, /dev/nvme0n1: /sys/kernel/kvblk/<disk>/)
 * or "module": the module parameters, the defaults that namespaces attached
 * later start with (/sys/module/kvblk/parameters/).
 */
#include "common.hpp"
#include "sysfs.hpp"
#include "tunables.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace kvblkctl {

namespace {

constexpr const char *kModuleScope = "module";

std::string tunable_path(const std::string &scope, std::string_view name)
{
	if (scope == kModuleScope)
		return module_dir() + "/parameters/" + std::string(name);
	return kvblk_dir() + "/" + scope + "/" + std::string(name);
}

std::string range_text(const Tunable &t)
{
	std::string s = std::to_string(t.min) + ".." + std::to_string(t.max);
	if (t.align > 1)
		s += ", multiple of " + std::to_string(t.align);
	return s;
}

/* Scope of a DEVICE argument: "module" or the namespace's directory name. */
int resolve_scope(const std::string &cmd, const std::string &device, std::string &scope)
{
	if (device == kModuleScope) {
		if (!is_dir(module_dir()))
			return fail(cmd, "kvblk.ko is not loaded");
		scope = kModuleScope;
		return 0;
	}
	scope = disk_name(device);
	if (!is_dir(kvblk_dir() + "/" + scope)) {
		if (!is_dir(module_dir()))
			return fail(cmd, scope + ": kvblk.ko is not loaded");
		return fail(cmd, scope + ": not attached to kvblk (no " + kvblk_dir() + "/" +
					 scope + ")");
	}
	return 0;
}

struct GetOpts {
	std::string device, name;
};

int run_get(const Globals &g, const GetOpts &o)
{
	std::string device = o.device, name = o.name;
	/* A single argument that names a tunable is NAME, not DEVICE. */
	if (name.empty() && find_tunable(device))
		std::swap(device, name);
	if (!name.empty() && !find_tunable(name)) {
		std::string names;
		for (const auto &t : kTunables)
			names += (names.empty() ? "" : ", ") + std::string(t.name);
		return fail("tune get", "unknown tunable '" + name + "' (known: " + names + ")");
	}
	std::vector<std::string> scopes;
	if (!device.empty()) {
		std::string s;
		if (resolve_scope("tune get", device, s))
			return 1;
		scopes.push_back(s);
	} else {
		if (is_dir(module_dir()))
			scopes.push_back(kModuleScope);
		for (const auto &d : list_dirs(kvblk_dir()))
			scopes.push_back(d);
	}

	struct Row {
		std::string scope;
		const Tunable *t;
		std::optional<std::uint64_t> value;
	};
	std::vector<Row> rows;
	auto add = [&](const std::string &scope) -> int {
		for (const auto &t : kTunables) {
			if (!name.empty() && t.name != name)
				continue;
			Row r{ scope, &t, std::nullopt };
			if (!scope.empty()) {
				std::uint64_t v;
				std::string p = tunable_path(scope, t.name);
				int ret = read_u64(p, v);
				if (ret)
					return fail("tune get", p + ": " + errstr(ret));
				r.value = v;
			}
			rows.push_back(r);
		}
		return 0;
	};
	if (scopes.empty()) {
		/* No module: ranges and defaults only. */
		if (add(""))
			return 1;
	}
	for (const auto &s : scopes)
		if (add(s))
			return 1;

	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["module_loaded"] = is_dir(module_dir());
		doc["tunables"] = nlohmann::ordered_json::array();
		for (const auto &r : rows) {
			nlohmann::ordered_json j;
			j["scope"] = r.scope.empty() ? nlohmann::ordered_json(nullptr)
						     : nlohmann::ordered_json(r.scope);
			j["name"] = r.t->name;
			j["value"] = r.value ? nlohmann::ordered_json(*r.value)
					     : nlohmann::ordered_json(nullptr);
			j["min"] = r.t->min;
			j["max"] = r.t->max;
			j["align"] = r.t->align;
			j["default"] = r.t->def;
			j["unit"] = r.t->unit;
			doc["tunables"].push_back(j);
		}
		print_json(doc);
		return 0;
	}
	if (scopes.empty())
		std::printf("kvblk.ko is not loaded: ranges and defaults only\n");
	std::printf("%-8s %-14s %10s %10s  %-30s %s\n", "scope", "name", "value", "default",
		    "range", "unit");
	for (const auto &r : rows) {
		std::string v = r.value ? std::to_string(*r.value) : "-";
		std::printf("%-8s %-14s %10s %10llu  %-30s %s\n",
			    r.scope.empty() ? "-" : r.scope.c_str(),
			    std::string(r.t->name).c_str(), v.c_str(),
			    static_cast<unsigned long long>(r.t->def), range_text(*r.t).c_str(),
			    std::string(r.t->unit).c_str());
		if (g.verbose)
			std::printf("         %s Applies to %s.\n", std::string(r.t->help).c_str(),
				    std::string(r.t->applies).c_str());
	}
	return 0;
}

struct SetOpts {
	std::string device, name, value;
	bool dry_run = false;
};

/* The kernel parses with kstrtou32(s, 0): decimal, 0x hex or 0 octal. */
bool parse_value(const std::string &s, std::uint64_t &v)
{
	if (s.empty() || s[0] == '-' || s[0] == '+' || s[0] == ' ')
		return false;
	errno = 0;
	char *end = nullptr;
	unsigned long long x = std::strtoull(s.c_str(), &end, 0);
	if (errno || !end || *end)
		return false;
	v = x;
	return true;
}

int run_set(const Globals &g, const SetOpts &o)
{
	const Tunable *t = find_tunable(o.name);
	if (!t) {
		std::string names;
		for (const auto &x : kTunables)
			names += (names.empty() ? "" : ", ") + std::string(x.name);
		return fail("tune set", "unknown tunable '" + o.name + "' (known: " + names + ")");
	}
	std::uint64_t v;
	if (!parse_value(o.value, v))
		return fail("tune set", o.name + "=" + o.value + " is not a number (range " +
						range_text(*t) + ")");
	if (v < t->min || v > t->max)
		return fail("tune set", o.name + "=" + o.value + " out of range " +
						std::to_string(t->min) + ".." +
						std::to_string(t->max));
	if (v % t->align)
		return fail("tune set", o.name + "=" + o.value + " is not a multiple of " +
						std::to_string(t->align) + " (range " +
						range_text(*t) + ")");
	std::string scope;
	if (resolve_scope("tune set", o.device, scope))
		return 1;
	std::string p = tunable_path(scope, t->name);
	std::uint64_t old = 0;
	/* The old value is for the report only: a read failure is not fatal. */
	bool have_old = read_u64(p, old) == 0;
	int ret;
	if (!o.dry_run) {
		ret = write_text(p, std::to_string(v) + "\n");
		if (ret)
			return fail("tune set", scope + ": " + o.name + "=" + std::to_string(v) +
							": " + errstr(ret));
	}
	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["scope"] = scope;
		doc["name"] = t->name;
		doc["old_value"] = have_old ? nlohmann::ordered_json(old)
					    : nlohmann::ordered_json(nullptr);
		doc["value"] = v;
		doc["dry_run"] = o.dry_run;
		print_json(doc);
	} else {
		std::printf("%s %s: %s -> %llu%s\n", scope.c_str(), std::string(t->name).c_str(),
			    have_old ? std::to_string(old).c_str() : "?",
			    static_cast<unsigned long long>(v),
			    o.dry_run ? " (dry run, not written)" : "");
	}
	return 0;
}

int run_docs_tunables()
{
	std::printf("# kvblk tunables and kvblkctl environment variables\n\n"
		    "Generated by `kvblkctl docs tunables` from `tools/kvblkctl/tunables.hpp`;\n"
		    "do not edit (the ctest `kvblkctl_docs_tunables` compares them).\n\n"
		    "## Tunables\n\n"
		    "Each is a module parameter, `/sys/module/kvblk/parameters/NAME` (the value a\n"
		    "namespace starts with when it is first attached), and a per-namespace file,\n"
		    "`/sys/kernel/kvblk/<disk>/NAME`. kvblk.ko refuses a value out of range with\n"
		    "`EINVAL`; `kvblkctl tune set` refuses it before writing.\n\n"
		    "| name | range | default | unit | takes effect for | meaning |\n"
		    "|---|---|---|---|---|---|\n");
	for (const auto &t : kTunables)
		std::printf("| `%s` | %s | %llu | %s | %s | %s |\n", std::string(t.name).c_str(),
			    range_text(t).c_str(), static_cast<unsigned long long>(t.def),
			    std::string(t.unit).c_str(), std::string(t.applies).c_str(),
			    std::string(t.help).c_str());
	std::printf("\n## Environment variables of kvblkctl\n\n"
		    "| variable | default | meaning |\n|---|---|---|\n");
	for (const auto &e : kEnvVars)
		std::printf("| `%s` | `%s` | %s |\n", std::string(e.name).c_str(),
			    std::string(e.def).c_str(), std::string(e.help).c_str());
	return 0;
}

} // namespace

void register_tune(CLI::App &app, Globals &g, Handler &h)
{
	auto *tune = app.add_subcommand("tune", "Read or change kvblk.ko's tunables");
	tune->require_subcommand(1);

	auto go = std::make_shared<GetOpts>();
	auto *get = tune->add_subcommand(
		"get", "Every tunable (or NAME) with its value, range and default");
	get->add_option("device", go->device,
			"Namespace (nvme0n1, /dev/nvme0n1) or 'module' (the defaults for "
			"namespaces attached later); default: module and every attached namespace");
	get->add_option("name", go->name, "max_cmd_bytes, max_inflight or max_descs; default: all");
	get->callback([&g, &h, go] { h = [&g, go] { return run_get(g, *go); }; });

	auto so = std::make_shared<SetOpts>();
	auto *set = tune->add_subcommand(
		"set", "Change one tunable; values out of range are refused before writing");
	set->add_option("device", so->device, "Namespace (nvme0n1, /dev/nvme0n1) or 'module'")
		->required();
	set->add_option("name", so->name, "max_cmd_bytes, max_inflight or max_descs")->required();
	set->add_option("value", so->value, "New value (decimal, or 0x hex)")->required();
	set->add_flag("--dry-run", so->dry_run, "Check and show, do not write");
	set->callback([&g, &h, so] { h = [&g, so] { return run_set(g, *so); }; });

	auto *docs = app.add_subcommand("docs", "");	/* empty help: hidden */
	docs->group("");
	docs->require_subcommand(1);
	auto *dt = docs->add_subcommand("tunables", "Print docs/tunables.md");
	dt->callback([&h] { h = [] { return run_docs_tunables(); }; });
}

} // namespace kvblkctl
