// SPDX-License-Identifier: MIT
/*
 * info.cpp - `kvblkctl info DEVICE`: what the NVMe controller and namespace
 * say about themselves, through libnvme's admin commands on the namespace's
 * block device: Identify Controller (model, serial, firmware, MDTS),
 * Identify Namespace (LBA formats, the one in use), Get Features Number of
 * Queues (I/O queues allocated), SMART / Health log (Data Units Read and
 * Written: thousands of 512-byte units, so bytes = units x 512000).
 * It needs the right to send admin commands (root, CAP_SYS_ADMIN).
 */
#include "common.hpp"
#include "sysfs.hpp"

/* libnvme 1.3's headers have no extern "C" of their own. */
extern "C" {
#include <nvme/ioctl.h>
#include <nvme/types.h>
}

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <endian.h>
#include <fcntl.h>
#include <unistd.h>

namespace kvblkctl {

namespace {

std::string trimmed(const char *s, std::size_t n)
{
	std::string r(s, strnlen(s, n));
	while (!r.empty() && (r.back() == ' ' || r.back() == '\0'))
		r.pop_back();
	return r;
}

/* NVMe 128-bit little-endian counter, saturated to 64 bits. */
unsigned __int128 le128(const __u8 *p)
{
	unsigned __int128 v = 0;
	for (int i = 15; i >= 0; i--)
		v = (v << 8) | p[i];
	return v;
}

nlohmann::ordered_json u128_json(unsigned __int128 v)
{
	if (v <= UINT64_MAX)
		return static_cast<std::uint64_t>(v);
	/* Beyond 64 bits: a decimal string rather than a rounded number. */
	std::string s;
	while (v) {
		s.insert(s.begin(), static_cast<char>('0' + static_cast<int>(v % 10)));
		v /= 10;
	}
	return s;
}

std::string u128_text(unsigned __int128 v)
{
	auto j = u128_json(v);
	return j.is_string() ? j.get<std::string>() : std::to_string(j.get<std::uint64_t>());
}

/* libnvme 1.3: -1 with errno, or an NVMe status (> 0). */
std::string nvme_err(int ret)
{
	if (ret < 0)
		return errstr(errno);
	char buf[64];
	std::snprintf(buf, sizeof(buf), "NVMe status 0x%x", ret);
	return buf;
}

struct InfoOpts {
	std::string device;
};

int run_info(const Globals &g, const InfoOpts &o)
{
	const char *cmd = "info";
	std::string name = o.device;
	auto slash = name.rfind('/');
	if (slash != std::string::npos)
		name = name.substr(slash + 1);
	std::string path = o.device.find('/') != std::string::npos ? o.device : dev_root() + "/" + name;
	int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return fail(cmd, path + ": " + errstr(errno));

	__u32 nsid = 0;
	int ret = nvme_get_nsid(fd, &nsid);
	if (ret) {
		std::string e = nvme_err(ret);
		::close(fd);
		return fail(cmd, path + ": not an NVMe namespace (get nsid: " + e + ")");
	}
	struct nvme_id_ctrl ctrl;
	struct nvme_id_ns ns;
	struct nvme_smart_log smart;
	std::memset(&ctrl, 0, sizeof(ctrl));
	std::memset(&ns, 0, sizeof(ns));
	std::memset(&smart, 0, sizeof(smart));
	if ((ret = nvme_identify_ctrl(fd, &ctrl))) {
		std::string e = nvme_err(ret);
		::close(fd);
		return fail(cmd, path + ": identify controller: " + e);
	}
	if ((ret = nvme_identify_ns(fd, nsid, &ns))) {
		std::string e = nvme_err(ret);
		::close(fd);
		return fail(cmd, path + ": identify namespace " + std::to_string(nsid) + ": " + e);
	}
	__u32 nq = 0;
	int qret = nvme_get_features_num_queues(fd, NVME_GET_FEATURES_SEL_CURRENT, &nq);
	std::string qerr = qret ? nvme_err(qret) : "";
	int sret = nvme_get_log_smart(fd, NVME_NSID_ALL, true, &smart);
	std::string serr = sret ? nvme_err(sret) : "";
	::close(fd);

	std::string model = trimmed(ctrl.mn, sizeof(ctrl.mn));
	std::string serial = trimmed(ctrl.sn, sizeof(ctrl.sn));
	std::string fw = trimmed(ctrl.fr, sizeof(ctrl.fr));
	/* MDTS is in units of CAP.MPSMIN; Linux's nvme-pci runs at 4 KiB pages. */
	std::uint64_t mdts_bytes = ctrl.mdts ? (4096ULL << ctrl.mdts) : 0;
	unsigned nlbaf = ns.nlbaf + 1u;
	unsigned in_use = ns.flbas & 0xf;
	if (nlbaf > 16)
		in_use |= ((ns.flbas >> 5) & 0x3) << 4;
	std::uint64_t nsze = le64toh(ns.nsze);
	unsigned __int128 dur = le128(smart.data_units_read);
	unsigned __int128 duw = le128(smart.data_units_written);
	std::uint64_t hw_queues = list_dirs(sysfs_root() + "/block/" + disk_name(name) + "/mq").size();

	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["device"] = path;
		doc["model"] = model;
		doc["serial"] = serial;
		doc["firmware"] = fw;
		doc["nsid"] = nsid;
		doc["mdts"] = ctrl.mdts;
		doc["mdts_bytes"] = mdts_bytes;
		doc["nsze_lbas"] = nsze;
		doc["lba_format_in_use"] = in_use;
		doc["lba_formats"] = nlohmann::ordered_json::array();
		for (unsigned i = 0; i < nlbaf && i < 64; i++)
			doc["lba_formats"].push_back({ { "index", i },
						       { "lba_size", 1ULL << ns.lbaf[i].ds },
						       { "metadata_bytes", le16toh(ns.lbaf[i].ms) },
						       { "relative_performance", ns.lbaf[i].rp & 3 },
						       { "in_use", i == in_use } });
		if (!qret)
			doc["io_queues"] = { { "submission", (nq & 0xffff) + 1 },
					     { "completion", (nq >> 16) + 1 } };
		else
			doc["io_queues"] = { { "error", qerr } };
		doc["blk_mq_hw_queues"] = hw_queues;
		if (!sret)
			doc["smart"] = { { "data_units_read", u128_json(dur) },
					 { "data_units_written", u128_json(duw) },
					 { "bytes_read", u128_json(dur * 512000) },
					 { "bytes_written", u128_json(duw * 512000) } };
		else
			doc["smart"] = { { "error", serr } };
		print_json(doc);
		return 0;
	}
	std::printf("device             %s (nsid %u)\n", path.c_str(), nsid);
	std::printf("model              %s\n", model.c_str());
	std::printf("serial             %s\n", serial.c_str());
	std::printf("firmware           %s\n", fw.c_str());
	if (ctrl.mdts)
		std::printf("mdts               %u (%s per command, 4 KiB pages)\n", ctrl.mdts,
			    human_bytes(mdts_bytes).c_str());
	else
		std::printf("mdts               0 (no limit)\n");
	std::printf("capacity           %llu LBAs\n", static_cast<unsigned long long>(nsze));
	for (unsigned i = 0; i < nlbaf && i < 64; i++)
		if (i == in_use || g.verbose)
			std::printf("lba format %-2u      %llu B data + %u B metadata%s\n", i,
				    1ULL << ns.lbaf[i].ds, le16toh(ns.lbaf[i].ms),
				    i == in_use ? " (in use)" : "");
	if (!qret)
		std::printf("io queues          %u submission, %u completion (allocated); "
			    "%llu blk-mq hw queues\n",
			    (nq & 0xffff) + 1, (nq >> 16) + 1,
			    static_cast<unsigned long long>(hw_queues));
	else
		std::printf("io queues          unknown (%s)\n", qerr.c_str());
	if (!sret) {
		std::printf("data units read    %s (%s bytes)\n", u128_text(dur).c_str(),
			    u128_text(dur * 512000).c_str());
		std::printf("data units written %s (%s bytes)\n", u128_text(duw).c_str(),
			    u128_text(duw * 512000).c_str());
	} else {
		std::printf("smart log          unavailable (%s)\n", serr.c_str());
	}
	return 0;
}

} // namespace

void register_info(CLI::App &app, Globals &g, Handler &h)
{
	auto o = std::make_shared<InfoOpts>();
	auto *sub = app.add_subcommand(
		"info", "Controller and namespace identity, LBA format, MDTS, queues, SMART "
			"data units (libnvme; needs admin rights)");
	sub->add_option("device", o->device, "NVMe namespace: nvme0n1 or /dev/nvme0n1")->required();
	sub->callback([&g, &h, o] { h = [&g, o] { return run_info(g, *o); }; });
}

} // namespace kvblkctl
