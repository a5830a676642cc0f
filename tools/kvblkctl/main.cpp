// SPDX-License-Identifier: MIT
/*
 * kvblkctl - inspect and tune kvblk: module state, per-namespace counters,
 * tunables, and the load-vs-recompute figures for a model's KV cache.
 * See docs/kvblkctl.md.
 */
#include "cli.hpp"
#include "common.hpp"

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <iostream>

namespace kvblkctl {

int fail(const std::string &cmd, const std::string &msg)
{
	std::fprintf(stderr, "kvblkctl: %s: %s\n", cmd.c_str(), msg.c_str());
	return 1;
}

std::string errstr(int neg_errno)
{
	return std::strerror(neg_errno < 0 ? -neg_errno : neg_errno);
}

std::string human_bytes(std::uint64_t bytes)
{
	static const char *units[] = { "B", "KiB", "MiB", "GiB", "TiB", "PiB" };
	double v = static_cast<double>(bytes);
	int u = 0;
	while (v >= 1024.0 && u < 5) {
		v /= 1024.0;
		u++;
	}
	char buf[64];
	if (u == 0)
		std::snprintf(buf, sizeof(buf), "%llu B", static_cast<unsigned long long>(bytes));
	else
		std::snprintf(buf, sizeof(buf), "%llu (%.1f %s)",
			      static_cast<unsigned long long>(bytes), v, units[u]);
	return buf;
}

nlohmann::ordered_json json_doc()
{
	nlohmann::ordered_json doc;
	doc["schema_version"] = kSchemaVersion;
	return doc;
}

void print_json(const nlohmann::ordered_json &doc)
{
	std::cout << doc.dump(2) << '\n';
}

} // namespace kvblkctl

int main(int argc, char **argv)
{
	using namespace kvblkctl;

	CLI::App app{ "kvblkctl: inspect and tune kvblk (kvblk.ko counters, tunables, "
		      "load-vs-recompute figures)" };
	app.name("kvblkctl");
	app.require_subcommand(1);
	/* Global options also after the subcommand: kvblkctl stats -o json. */
	app.fallthrough();
	Globals g;
	Handler handler;
	std::map<std::string, Output> outputs{ { "normal", Output::normal },
					       { "json", Output::json } };
	app.add_option("-o,--output", g.output, "Output format: normal or json")
		->transform(CLI::Validator(
			[&outputs](std::string &v) {
				std::string l = v;
				for (char &c : l)
					c = char(std::tolower(static_cast<unsigned char>(c)));
				const auto it = outputs.find(l);
				if (it == outputs.end())
					return "must be normal or json, not '" + v + "'";
				v = std::to_string(int(it->second)); /* what the enum option parses */
				return std::string();
			},
			"normal|json"))
		->option_text("normal|json");
	app.add_flag("-v,--verbose", g.verbose, "More detail (repeatable)");

	register_list(app, g, handler);
	register_info(app, g, handler);
	register_stats(app, g, handler);
	register_tune(app, g, handler);
	register_probe(app, g, handler);
	register_trace(app, g, handler);
	register_crossover(app, g, handler);
	register_store(app, g, handler);

	/* The first word that is not an option must name a subcommand. */
	for (int i = 1; i < argc; i++) {
		const std::string a = argv[i];
		if (a == "-o" || a == "--output") {
			i++;
			continue;
		}
		if (!a.empty() && a[0] == '-')
			continue;
		bool known = false;
		std::string names;
		for (const CLI::App *sub : app.get_subcommands({})) {
			known |= sub->get_name() == a;
			names += (names.empty() ? "" : ", ") + sub->get_name();
		}
		if (!known) {
			std::fprintf(stderr, "kvblkctl: unknown subcommand '%s' (one of %s)\n", a.c_str(), names.c_str());
			return 2;
		}
		break;
	}
	if (auto rc = kvblk_tools::parse_cli(app, argc, argv, [&app](const CLI::ParseError &e) {
		    std::string cmd = "usage";
		    for (auto *sub : app.get_subcommands())
			    cmd = sub->get_name();
		    std::fprintf(stderr, "kvblkctl: %s: %s (see --help)\n", cmd.c_str(), e.what());
		    return 2;
	    }))
		return *rc;
	if (!handler)
		return fail("usage", "no subcommand");
	return handler();
}
