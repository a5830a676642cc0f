// SPDX-License-Identifier: MIT
#include "p2pdma_dest.hpp"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <fmt/format.h>

#include <kvblk/kvblk.h>

namespace kvblk_bench {

std::unique_ptr<P2pdmaWindow> P2pdmaWindow::create(const std::string &file, uint64_t bytes, std::string *err)
{
	const uint64_t page = uint64_t(sysconf(_SC_PAGESIZE));
	bytes = (bytes + page - 1) / page * page;
	const int fd = open(file.c_str(), O_RDWR | O_CLOEXEC);
	if (fd < 0) {
		*err = fmt::format("open {}: {} (a p2pmem/allocate file of a P2PDMA provider: "
				   "/sys/bus/pci/devices/*/p2pmem/allocate)", file, std::strerror(errno));
		return nullptr;
	}
	void *p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p == MAP_FAILED) {
		*err = fmt::format("mmap {} bytes of {}: {} (is the provider's pool that large? see "
				   "p2pmem/available)", bytes, file, std::strerror(errno));
		close(fd);
		return nullptr;
	}
	std::unique_ptr<P2pdmaWindow> w(new P2pdmaWindow());
	w->mem_ = static_cast<uint8_t *>(p);
	w->bytes_ = bytes;
	w->fd_ = fd;
	w->file_ = file;
	return w;
}

P2pdmaWindow::~P2pdmaWindow()
{
	if (mem_)
		munmap(mem_, bytes_);
	if (fd_ >= 0)
		close(fd_);
}

int P2pdmaWindow::kind() const noexcept
{
	return KVBLK_MEM_P2PDMA;
}

std::string P2pdmaWindow::describe() const
{
	return fmt::format("P2PDMA memory ({}, {:.3f} GB window), read back through the mapping for verification",
			   file_, double(bytes_) / 1e9);
}

int P2pdmaWindow::to_host(void *dst, uint64_t off, uint64_t len, std::string *) const
{
	std::memcpy(dst, mem_ + off, len);
	return 0;
}

int P2pdmaWindow::from_host(const void *src, uint64_t off, uint64_t len, std::string *) const
{
	std::memcpy(mem_ + off, src, len);
	return 0;
}

} // namespace kvblk_bench
