// SPDX-License-Identifier: MIT
// psync: one object at a time, one pread(2)/pwrite(2) of at most max_cmd_bytes at a time.
// Queue depth 1: the baseline of today's loaders.
#include "backend.hpp"
#include "positional_io.hpp"

#include <cerrno>

namespace kvblk::detail {
namespace {

class PsyncBackend final : public Backend {
public:
	explicit PsyncBackend(const BackendConfig &cfg) : cfg_(cfg) {}

	kvblk_backend kind() const noexcept override { return KVBLK_BACKEND_PSYNC; }

	int run(Batch &b) noexcept override
	{
		std::atomic<uint64_t> inflight{0}, peak{0};
		const PositionalIo pio{b.dir, kind(), cfg_.max_cmd_bytes, cfg_.eagain_retries,
				       testing::active(), &inflight, &peak};
		for (uint32_t i = 0; i < b.count; i++) {
			/* kvblk_cancel(): the objects not started yet end here. */
			uint64_t valid = 0;
			const int32_t st =
				b.cancelled() ? -ECANCELED : move_object(pio, b.objects[i], i, &b.counters, &valid);
			b.results[i].status = st;
			b.results[i].bytes = result_bytes(b.objects[i], st, valid);
			b.object_done(i);
		}
		b.counters.inflight_peak = peak.load();
		return 0;
	}

private:
	BackendConfig cfg_;
};

} // namespace

std::unique_ptr<Backend> make_psync_backend(const BackendConfig &cfg, int *err)
{
	*err = 0;
	return std::make_unique<PsyncBackend>(cfg);
}

} // namespace kvblk::detail
