// SPDX-License-Identifier: MIT
// A gate that threads wait at (an I/O thread from the completion seam, a backend's call in a
// test wrapper) until the test opens it: the way the unit tests hold a batch in flight
// without timing.
#pragma once

#include "libkvblk/testing.hpp"

#include <chrono>
#include <condition_variable>
#include <mutex>

namespace kvblk_test {

class Gate {
public:
	void wait()
	{
		std::unique_lock<std::mutex> lk(mu_);
		arrived_++;
		cv_.notify_all();
		cv_.wait(lk, [&] { return open_; });
	}
	void open()
	{
		std::lock_guard<std::mutex> g(mu_);
		open_ = true;
		cv_.notify_all();
	}
	/* Wait until @n threads arrived at the gate (10 s at most: false then). */
	bool wait_arrived(int n = 1)
	{
		std::unique_lock<std::mutex> lk(mu_);
		return cv_.wait_for(lk, std::chrono::seconds(10), [&] { return arrived_ >= n; });
	}

private:
	std::mutex mu_;
	std::condition_variable cv_;
	bool open_ = false;
	int arrived_ = 0;
};

/* Opens a Gate when it goes out of scope (declared after the device: opens before close). */
struct GateOpener {
	Gate &g;
	~GateOpener() { g.open(); }
};

/* Seams that hold the first command of the object at file offset @offset at @gate. */
inline kvblk::testing::Seams gate_seams(Gate &gate, uint64_t offset)
{
	kvblk::testing::Seams s;
	s.on_complete = [&gate, offset](const kvblk::testing::CommandInfo &c, int64_t res) {
		if (c.obj_offset == offset && c.attempt == 0 && c.cmd_offset == 0)
			gate.wait();
		return res;
	};
	return s;
}

} // namespace kvblk_test
