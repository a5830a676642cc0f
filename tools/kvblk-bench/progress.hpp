// SPDX-License-Identifier: MIT
//
// One-line progress bar on stderr: label, bar, bytes, percent, GB/s.
// Drawn only when enabled (the caller passes isatty(stderr) && !quiet);
// redrawn at most every 100 ms; erased by finish() so that what follows
// (the table) starts on a clean line.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include "util.hpp"

namespace kvblk_bench {

class Progress {
public:
	Progress(bool enabled, std::string label, uint64_t total_bytes)
		: enabled_(enabled && total_bytes > 0), label_(std::move(label)), total_(total_bytes),
		  start_ns_(now_ns())
	{
		if (enabled_)
			draw(0, true);
	}
	Progress(const Progress &) = delete;
	Progress &operator=(const Progress &) = delete;
	~Progress() { finish(); }

	// @done_bytes: bytes moved so far (monotonic). @busy_ns: time that
	// counts for the rate (0: wall time since construction).
	void update(uint64_t done_bytes, uint64_t busy_ns = 0)
	{
		if (!enabled_)
			return;
		uint64_t now = now_ns();
		if (done_bytes < total_ && now - last_draw_ns_ < 100000000ull)
			return;
		busy_ns_ = busy_ns;
		draw(done_bytes, false);
		last_draw_ns_ = now;
	}

	void finish()
	{
		if (!enabled_)
			return;
		std::fputs("\r\x1b[K", stderr);
		std::fflush(stderr);
		enabled_ = false;
	}

private:
	void draw(uint64_t done, bool first)
	{
		constexpr int kWidth = 30;
		double frac = total_ ? double(done) / double(total_) : 1.0;
		if (frac > 1.0)
			frac = 1.0;
		int fill = int(frac * kWidth + 0.5);
		char bar[kWidth + 1];
		for (int i = 0; i < kWidth; i++)
			bar[i] = i < fill ? '#' : '.';
		bar[kWidth] = '\0';
		uint64_t ns = busy_ns_ ? busy_ns_ : now_ns() - start_ns_;
		double gbps = (!first && ns) ? double(done) / double(ns) : 0.0; // bytes/ns == GB/s
		std::fprintf(stderr, "\r\x1b[K%-28s [%s] %7.2f/%.2f GB %3.0f%% %6.2f GB/s", label_.c_str(), bar,
			     double(done) / kGB, double(total_) / kGB, frac * 100.0, gbps);
		std::fflush(stderr);
	}

	bool enabled_;
	std::string label_;
	uint64_t total_;
	uint64_t start_ns_;
	uint64_t last_draw_ns_ = 0;
	uint64_t busy_ns_ = 0;
};

} // namespace kvblk_bench
