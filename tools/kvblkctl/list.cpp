// SPDX-License-Identifier: MIT
/*
 * list.cpp - `kvblkctl list`: is kvblk.ko loaded (and its version), which
 * namespaces are attached, which libkvblk backends can work on this machine.
 */
#include "common.hpp"
#include "sysfs.hpp"

#include <liburing.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <memory>
#include <vector>

namespace kvblkctl {

namespace {

struct Backend {
	std::string name;
	bool available;
	std::string why;
};

/* io_uring works iff a ring can be set up (kernel, seccomp, sysctl). */
Backend probe_uring()
{
	struct io_uring ring;
	int ret = io_uring_queue_init(2, &ring, 0);
	if (ret < 0)
		return { "uring", false, "io_uring_queue_init: " + errstr(ret) };
	io_uring_queue_exit(&ring);
	return { "uring", true, "io_uring_queue_init succeeded" };
}

Backend probe_uring_cmd()
{
	std::vector<std::string> ng;
	std::error_code ec;
	for (std::filesystem::directory_iterator it(dev_root(), ec), end;
	     !ec && it != end; it.increment(ec)) {
		std::string n = it->path().filename().string();
		if (n.rfind("ng", 0) == 0)
			ng.push_back(n);
	}
	if (ng.empty())
		return { "uring_cmd", false, "no NVMe generic device " + dev_root() + "/ng*" };
	std::sort(ng.begin(), ng.end());
	std::string list;
	for (auto &n : ng)
		list += (list.empty() ? "" : " ") + dev_root() + "/" + n;
	return { "uring_cmd", true, list };
}

std::vector<Backend> probe_backends()
{
	std::vector<Backend> b;
	std::string kdev = dev_root() + "/kvblk";
	if (path_exists(kdev))
		b.push_back({ "kmod", true, kdev });
	else
		b.push_back({ "kmod", false, "no " + kdev + " (kvblk.ko not loaded)" });
	b.push_back(probe_uring());
	b.push_back(probe_uring_cmd());
	b.push_back({ "psync", true, "always" });
	b.push_back({ "threadpool", true, "always" });
	return b;
}

struct Ns {
	std::string name;
	std::uint64_t attached = 0, nsid = 0, lba_size = 0;
	std::string pci_dev;
};

int run_list(const Globals &g)
{
	bool loaded = is_dir(module_dir());
	std::string version = "unknown";
	if (loaded) {
		std::string v;
		if (read_text(module_dir() + "/version", v) == 0) {
			while (!v.empty() && (v.back() == '\n' || v.back() == ' '))
				v.pop_back();
			if (!v.empty())
				version = v;
		}
	}
	std::vector<Ns> nss;
	for (const auto &d : list_dirs(kvblk_dir())) {
		Ns ns;
		ns.name = d;
		std::string dir = kvblk_dir() + "/" + d;
		read_u64(dir + "/attached", ns.attached);
		read_u64(dir + "/nsid", ns.nsid);
		read_u64(dir + "/lba_size", ns.lba_size);
		if (read_text(dir + "/pci_dev", ns.pci_dev) == 0)
			while (!ns.pci_dev.empty() && ns.pci_dev.back() == '\n')
				ns.pci_dev.pop_back();
		nss.push_back(ns);
	}
	auto backends = probe_backends();

	if (g.output == Output::json) {
		auto doc = json_doc();
		doc["module"] = { { "loaded", loaded },
				  { "version", loaded ? version : "" } };
		doc["namespaces"] = nlohmann::ordered_json::array();
		for (const auto &ns : nss)
			doc["namespaces"].push_back({ { "name", ns.name },
						      { "attached", ns.attached },
						      { "nsid", ns.nsid },
						      { "lba_size", ns.lba_size },
						      { "pci_dev", ns.pci_dev } });
		doc["backends"] = nlohmann::ordered_json::array();
		for (const auto &b : backends)
			doc["backends"].push_back({ { "name", b.name },
						    { "available", b.available },
						    { "reason", b.why } });
		print_json(doc);
		return 0;
	}
	std::printf("module      %s\n",
		    loaded ? ("loaded, version " + version).c_str() : "not loaded");
	if (nss.empty())
		std::printf("namespaces  none attached\n");
	for (std::size_t i = 0; i < nss.size(); i++)
		std::printf("%s %-10s nsid %llu, lba %llu, %llu context(s) attached%s%s\n",
			    i ? "           " : "namespaces ", nss[i].name.c_str(),
			    static_cast<unsigned long long>(nss[i].nsid),
			    static_cast<unsigned long long>(nss[i].lba_size),
			    static_cast<unsigned long long>(nss[i].attached),
			    nss[i].pci_dev.empty() ? "" : ", pci ",
			    nss[i].pci_dev.c_str());
	std::string avail;
	for (const auto &b : backends)
		if (b.available)
			avail += (avail.empty() ? "" : " ") + b.name;
	std::printf("backends    %s\n", avail.c_str());
	if (g.verbose)
		for (const auto &b : backends)
			std::printf("  %-10s %-3s %s\n", b.name.c_str(),
				    b.available ? "yes" : "no", b.why.c_str());
	return 0;
}

} // namespace

void register_list(CLI::App &app, Globals &g, Handler &h)
{
	auto *sub = app.add_subcommand(
		"list", "Module state and version, attached namespaces, backends available here");
	sub->callback([&g, &h] { h = [&g] { return run_list(g); }; });
}

} // namespace kvblkctl
