// SPDX-License-Identifier: MIT
// The CUDA copy engine of the staged path: bounce buffers page-locked with cudaHostRegister
// (ordinary anonymous memory, so O_DIRECT, io_uring fixed buffers and kvblk.ko can still
// pin it), one non-blocking stream per lane, cudaMemcpyAsync(cudaMemcpyDefault) into the
// device address. Streams live on the device of the first buffer checked; every call makes
// that device current for itself and gives the caller's current device back.
#include "copy_engine.hpp"
#include "cuda_runtime.hpp"

#include <cerrno>

namespace kvblk::detail {
namespace {

class CudaCopyEngine final : public CopyEngine {
public:
	explicit CudaCopyEngine(const CudaRuntime &rt) : rt_(rt) {}
	~CudaCopyEngine() override { close_lanes(); }

	std::string name() const override
	{
		return "cuda (" + rt_.library + (device_ >= 0 ? ", device " + std::to_string(device_) : "") + ")";
	}

	int check_device_range(uint64_t addr, uint64_t len, std::string *why) noexcept override
	{
		cuda_pointer_attributes a{};
		cuda_error_t e = rt_.pointer_get_attributes(&a, reinterpret_cast<const void *>(uintptr_t(addr)));
		if (e != kCudaSuccess) {
			*why = "cudaPointerGetAttributes: " + cuda_error_text(rt_, e);
			return -EINVAL;
		}
		cuda_pointer_attributes last{};
		e = rt_.pointer_get_attributes(&last, reinterpret_cast<const void *>(uintptr_t(addr + len - 1)));
		if (a.type != kCudaMemoryTypeDevice && a.type != kCudaMemoryTypeManaged) {
			*why = std::string("address is not CUDA device memory (cudaPointerGetAttributes: ") +
			       (a.type == kCudaMemoryTypeHost ? "pinned host memory" : "not known to CUDA") +
			       "); register host memory as KVBLK_MEM_HOST";
			return -EINVAL;
		}
		if (e != kCudaSuccess || last.type != a.type || last.device != a.device) {
			*why = "the range's last byte is not in the same CUDA allocation's device memory";
			return -EINVAL;
		}
		if (device_ < 0)
			device_ = a.device;
		return 0;
	}

	int pin_host(void *p, size_t len, std::string *why) noexcept override
	{
		const cuda_error_t e = rt_.host_register(p, len, kCudaHostRegisterDefault);
		if (e != kCudaSuccess) {
			*why = "cudaHostRegister of " + std::to_string(len) + " bytes: " + cuda_error_text(rt_, e);
			return -ENOMEM;
		}
		return 0;
	}

	void unpin_host(void *p) noexcept override { (void)rt_.host_unregister(p); }

	int open_lanes(uint32_t n, std::string *why) noexcept override
	{
		close_lanes();
		DeviceScope scope(*this);
		for (uint32_t i = 0; i < n; i++) {
			cuda_stream_t s = nullptr;
			const cuda_error_t e = rt_.stream_create_with_flags(&s, kCudaStreamNonBlocking);
			if (e != kCudaSuccess) {
				*why = "cudaStreamCreateWithFlags: " + cuda_error_text(rt_, e);
				close_lanes();
				return -ENOMEM;
			}
			streams_.push_back(s);
		}
		return 0;
	}

	void close_lanes() noexcept override
	{
		if (streams_.empty())
			return;
		DeviceScope scope(*this);
		for (cuda_stream_t s : streams_) {
			(void)rt_.stream_synchronize(s);
			(void)rt_.stream_destroy(s);
		}
		streams_.clear();
	}

	int copy_to_device(uint32_t lane, uint64_t dst, const void *src, size_t len,
			   std::string *why) noexcept override
	{
		DeviceScope scope(*this);
		const cuda_error_t e = rt_.memcpy_async(reinterpret_cast<void *>(uintptr_t(dst)), src, len,
							kCudaMemcpyDefault, streams_.at(lane));
		if (e != kCudaSuccess) {
			*why = "cudaMemcpyAsync: " + cuda_error_text(rt_, e);
			return -EIO;
		}
		return 0;
	}

	int lane_done(uint32_t lane, std::string *why) noexcept override
	{
		DeviceScope scope(*this);
		const cuda_error_t e = rt_.stream_query(streams_.at(lane));
		if (e == kCudaSuccess)
			return 1;
		if (e == kCudaErrorNotReady)
			return 0;
		*why = "cudaStreamQuery: " + cuda_error_text(rt_, e);
		return -EIO;
	}

	int lane_wait(uint32_t lane, std::string *why) noexcept override
	{
		DeviceScope scope(*this);
		const cuda_error_t e = rt_.stream_synchronize(streams_.at(lane));
		if (e != kCudaSuccess) {
			*why = "cudaStreamSynchronize: " + cuda_error_text(rt_, e);
			return -EIO;
		}
		return 0;
	}

private:
	/* Make the engine's device current; give the caller's back at scope end. */
	class DeviceScope {
	public:
		explicit DeviceScope(const CudaCopyEngine &e) : rt_(e.rt_)
		{
			if (e.device_ < 0 || rt_.get_device(&saved_) != kCudaSuccess)
				return;
			if (saved_ != e.device_ && rt_.set_device(e.device_) == kCudaSuccess)
				restore_ = true;
		}
		~DeviceScope()
		{
			if (restore_)
				(void)rt_.set_device(saved_);
		}
		DeviceScope(const DeviceScope &) = delete;
		DeviceScope &operator=(const DeviceScope &) = delete;

	private:
		const CudaRuntime &rt_;
		int saved_ = -1;
		bool restore_ = false;
	};

	const CudaRuntime &rt_;
	int device_ = -1;
	std::vector<cuda_stream_t> streams_;
};

} // namespace

std::unique_ptr<CopyEngine> make_cuda_copy_engine(int *err, std::string *why)
{
	const CudaRuntime *rt = cuda_runtime(why);
	if (!rt) {
		*err = -EOPNOTSUPP;
		return nullptr;
	}
	int count = 0;
	const cuda_error_t e = rt->get_device_count(&count);
	if (e != kCudaSuccess || count == 0) {
		*why = "CUDA runtime " + rt->library + " found no GPU: " +
		       (e != kCudaSuccess ? "cudaGetDeviceCount: " + cuda_error_text(*rt, e) : "0 devices");
		*err = -ENODEV;
		return nullptr;
	}
	*err = 0;
	return std::make_unique<CudaCopyEngine>(*rt);
}

} // namespace kvblk::detail
