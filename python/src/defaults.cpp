// SPDX-License-Identifier: MIT
// kvblk._kvblk.default_get/default_set/default_reset/default_info: the C library's table of
// process-wide defaults, unchanged (kvblk/_defaults.py turns backend numbers into names).
#include "defaults.hpp"

#include "errors.hpp"

#include <kvblk/kvblk.h>

#include <cerrno>
#include <cstdint>
#include <string>

namespace py = pybind11;

namespace kvblkpy {
namespace {

uint64_t default_get(const std::string &name)
{
	uint64_t v = 0;
	const int ret = kvblk_get_default(name.c_str(), &v);
	if (ret < 0)
		raise_call_error(ret, "kvblk_get_default", last_error());
	return v;
}

void default_set(const std::string &name, uint64_t value)
{
	const int ret = kvblk_set_default(name.c_str(), value);
	if (ret < 0)
		raise_call_error(ret, "kvblk_set_default", last_error());
}

void default_reset(const py::object &name)
{
	std::string s;
	if (!name.is_none())
		s = name.cast<std::string>();
	const int ret = kvblk_reset_default(name.is_none() ? nullptr : s.c_str());
	if (ret < 0)
		raise_call_error(ret, "kvblk_reset_default", last_error());
}

py::list default_info()
{
	static const char *const kSources[] = {"builtin", "env", "set"};
	py::list out;
	for (uint32_t i = 0;; i++) {
		kvblk_default_info d{};
		d.info_size = sizeof(d);
		const int ret = kvblk_get_default_info(i, &d);
		if (ret == -ENOENT)
			break;
		if (ret < 0)
			raise_call_error(ret, "kvblk_get_default_info", last_error());
		py::dict e;
		e["name"] = d.name;
		e["env"] = d.env;
		e["unit"] = d.unit;
		e["doc"] = d.doc;
		e["builtin"] = d.builtin;
		e["min"] = d.min;
		e["max"] = d.max;
		e["value"] = d.value;
		e["source"] = d.source < 3 ? kSources[d.source] : "unknown";
		e["error"] = -d.error;
		out.append(e);
	}
	return out;
}

} // namespace

void bind_defaults(py::module_ &m)
{
	m.def("default_get", &default_get, py::arg("name"),
	      "kvblk_get_default(): the effective value; raises kvblk.Error on -errno.");
	m.def("default_set", &default_set, py::arg("name"), py::arg("value"), "kvblk_set_default().");
	m.def("default_reset", &default_reset, py::arg("name") = py::none(),
	      "kvblk_reset_default(); None resets every default.");
	m.def("default_info", &default_info,
	      "kvblk_get_default_info() of every default: a list of dicts in table order.");
}

} // namespace kvblkpy
