// SPDX-License-Identifier: MIT
/*
 * common.hpp - what every kvblkctl subcommand shares: the global options,
 * the error convention and the registration of each area's subcommands.
 *
 * Each area (list.cpp, stats.cpp, ...) has one register_*() function that
 * adds its subcommands to the CLI11 app and binds their handler; a handler
 * returns the process exit status.
 */
#pragma once

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <cstdint>
#include <functional>
#include <string>

namespace kvblkctl {

/** Version of the JSON documents kvblkctl prints ("schema_version"). */
inline constexpr int kSchemaVersion = 1;

enum class Output { normal, json };

struct Globals {
	Output output = Output::normal;
	int verbose = 0;
};

/** Handler of the selected subcommand; returns the exit status. */
using Handler = std::function<int()>;

/**
 * fail() - print "kvblkctl: <cmd>: <msg>" on stderr.
 * Return: exit status 1.
 */
int fail(const std::string &cmd, const std::string &msg);

/** strerror() of a -errno value. */
std::string errstr(int neg_errno);

/** "33554432 (32.0 MiB)"-style human form of a byte count. */
std::string human_bytes(std::uint64_t bytes);

/** Print a JSON document with "schema_version" first. */
void print_json(const nlohmann::ordered_json &doc);

/** A new JSON document holding "schema_version". */
nlohmann::ordered_json json_doc();

void register_list(CLI::App &app, Globals &g, Handler &h);
void register_stats(CLI::App &app, Globals &g, Handler &h);
void register_tune(CLI::App &app, Globals &g, Handler &h);
void register_crossover(CLI::App &app, Globals &g, Handler &h);
void register_info(CLI::App &app, Globals &g, Handler &h);
void register_probe(CLI::App &app, Globals &g, Handler &h);
void register_trace(CLI::App &app, Globals &g, Handler &h);
void register_store(CLI::App &app, Globals &g, Handler &h);

} // namespace kvblkctl
