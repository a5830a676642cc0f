// SPDX-License-Identifier: MIT
//
// Command-line parsing shared by the tools (CLI11).
#pragma once

#include <functional>
#include <optional>

#include <CLI/CLI.hpp>

namespace kvblk_tools {

// Parses @argv into @app. --help and --help-all print the help and give 0;
// a usage error goes to @usage_error, which reports it in the tool's own words
// (one line naming the option) and gives the tool's exit status for it.
// std::nullopt: parsed, run the command.
inline std::optional<int> parse_cli(CLI::App &app, int argc, char **argv,
				    const std::function<int(const CLI::ParseError &)> &usage_error)
{
	try {
		app.parse(argc, argv);
	} catch (const CLI::CallForHelp &e) {
		return app.exit(e);
	} catch (const CLI::CallForAllHelp &e) {
		return app.exit(e);
	} catch (const CLI::ParseError &e) {
		return usage_error(e);
	}
	return std::nullopt;
}

} // namespace kvblk_tools
