// SPDX-License-Identifier: MIT
// Process-wide defaults (kvblk_get_default() and friends): the table and its built-in values,
// the environment, kvblk_set_default() over it, kvblk_reset_default(), the snapshot each
// kvblk_open() takes, invalid variables named, and the staging pool sized from them.
#include "test_util.hpp"

#include "libkvblk/copy_engine.hpp"

#include <array>
#include <map>

using namespace kvblk_test;
using kvblk::detail::HostCopyEngine;
using kvblk::testing::Seams;

namespace {

/* Every variable of the table: unset for each test, and every set value forgotten. */
constexpr std::array<const char *, 10> kVars = {
	"KVBLK_BACKEND",	 "KVBLK_QUEUE_DEPTH",	  "KVBLK_RINGS",	   "KVBLK_THREADS",
	"KVBLK_MAX_CMD_BYTES",	 "KVBLK_MAX_DESCS",	  "KVBLK_MAX_BATCHES",	   "KVBLK_EAGAIN_RETRIES",
	"KVBLK_STAGING_BUFFERS", "KVBLK_STAGING_BUFFER_BYTES",
};

class DefaultsTest : public StoreTest {
protected:
	void SetUp() override
	{
		StoreTest::SetUp();
		for (const char *v : kVars)
			env_.push_back(std::make_unique<EnvGuard>(v, nullptr));
		ASSERT_EQ(kvblk_reset_default(nullptr), 0);
	}
	void TearDown() override { kvblk_reset_default(nullptr); }

	static uint64_t get(const char *name)
	{
		uint64_t v = 0;
		EXPECT_EQ(kvblk_get_default(name, &v), 0) << name << ": " << kvblk_last_error();
		return v;
	}
	static kvblk_default_info info(uint32_t i)
	{
		kvblk_default_info d{};
		d.info_size = sizeof(d);
		EXPECT_EQ(kvblk_get_default_info(i, &d), 0) << kvblk_last_error();
		return d;
	}
	static kvblk_default_info info(const char *name)
	{
		for (uint32_t i = 0;; i++) {
			kvblk_default_info d{};
			d.info_size = sizeof(d);
			if (kvblk_get_default_info(i, &d) != 0)
				break;
			if (std::string(d.name) == name)
				return d;
		}
		ADD_FAILURE() << "no default " << name;
		return {};
	}
	DevPtr open_null()
	{
		kvblk_dev *d = nullptr;
		EXPECT_EQ(kvblk_open(path_.c_str(), nullptr, &d), 0) << kvblk_last_error();
		return DevPtr(d);
	}
	static bool says(const std::string &part)
	{
		return std::string(kvblk_last_error()).find(part) != std::string::npos;
	}

	std::vector<std::unique_ptr<EnvGuard>> env_;
};

TEST_F(DefaultsTest, table_lists_every_default_with_its_builtin_value)
{
	const std::vector<std::tuple<std::string, std::string, uint64_t, uint64_t, uint64_t>> want = {
		{"backend", "KVBLK_BACKEND", KVBLK_BACKEND_AUTO, 0, KVBLK_BACKEND_MAX - 1},
		{"queue_depth", "KVBLK_QUEUE_DEPTH", KVBLK_DEFAULT_QUEUE_DEPTH, 1, KVBLK_MAX_QUEUE_DEPTH},
		{"rings", "KVBLK_RINGS", KVBLK_DEFAULT_WORKERS, 1, KVBLK_MAX_WORKERS},
		{"threads", "KVBLK_THREADS", KVBLK_DEFAULT_THREADS, 1, KVBLK_MAX_WORKERS},
		{"max_cmd_bytes", "KVBLK_MAX_CMD_BYTES", KVBLK_DEFAULT_MAX_CMD_BYTES, 4096, 1ull << 30},
		{"max_descs", "KVBLK_MAX_DESCS", KVBLK_DEFAULT_MAX_DESCS, 1, KVBLK_MAX_DESCS_LIMIT},
		{"max_batches", "KVBLK_MAX_BATCHES", KVBLK_DEFAULT_MAX_BATCHES, 1, KVBLK_MAX_BATCHES},
		{"eagain_retries", "KVBLK_EAGAIN_RETRIES", KVBLK_DEFAULT_EAGAIN_RETRIES, 1, 65536},
		{"staging_buffers", "KVBLK_STAGING_BUFFERS", KVBLK_DEFAULT_STAGING_BUFFERS, 1, KVBLK_MAX_STAGING_BUFFERS},
		{"staging_buffer_bytes", "KVBLK_STAGING_BUFFER_BYTES", KVBLK_DEFAULT_STAGING_BUFFER_BYTES, 4096,
		 KVBLK_MAX_STAGING_BUFFER_BYTES},
	};
	ASSERT_EQ(want.size(), kVars.size());
	for (uint32_t i = 0; i < want.size(); i++) {
		const kvblk_default_info d = info(i);
		const auto &[name, env, builtin, min, max] = want[i];
		EXPECT_EQ(d.info_size, sizeof(d));
		EXPECT_EQ(d.name, name);
		EXPECT_EQ(d.env, env);
		EXPECT_EQ(d.builtin, builtin) << name;
		EXPECT_EQ(d.min, min) << name;
		EXPECT_EQ(d.max, max) << name;
		EXPECT_EQ(d.value, builtin) << name;
		EXPECT_EQ(d.source, uint32_t(KVBLK_DEFAULT_BUILTIN)) << name;
		EXPECT_EQ(d.error, 0) << name;
		EXPECT_GT(std::strlen(d.unit), 0u) << name;
		EXPECT_GT(std::strlen(d.doc), 10u) << name;
		EXPECT_EQ(get(name.c_str()), builtin) << name;
	}
	kvblk_default_info d{};
	d.info_size = sizeof(d);
	EXPECT_EQ(kvblk_get_default_info(uint32_t(want.size()), &d), -ENOENT);
	d.info_size = sizeof(d) - 8;
	EXPECT_EQ(kvblk_get_default_info(0, &d), -EINVAL);
	EXPECT_TRUE(says("info_size"));
	EXPECT_EQ(kvblk_get_default_info(0, nullptr), -EINVAL);
	/* A newer caller's larger struct gets the rest zeroed. */
	struct {
		kvblk_default_info d;
		uint64_t extra;
	} big;
	std::memset(&big, 0xff, sizeof(big));
	big.d.info_size = sizeof(big);
	ASSERT_EQ(kvblk_get_default_info(1, &big.d), 0);
	EXPECT_STREQ(big.d.name, "queue_depth");
	EXPECT_EQ(big.extra, 0u);
}

TEST_F(DefaultsTest, open_applies_the_builtin_values)
{
	const kvblk_dev_info i = get_info(open_null().get());
	EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_URING));
	EXPECT_EQ(i.queue_depth, KVBLK_DEFAULT_QUEUE_DEPTH);
	EXPECT_EQ(i.workers, KVBLK_DEFAULT_WORKERS);
	EXPECT_EQ(i.max_cmd_bytes, KVBLK_DEFAULT_MAX_CMD_BYTES);
	EXPECT_EQ(i.max_descs, KVBLK_DEFAULT_MAX_DESCS);
	EXPECT_EQ(i.max_batches, KVBLK_DEFAULT_MAX_BATCHES);
}

TEST_F(DefaultsTest, environment_seeds_every_open_that_leaves_an_option_0)
{
	EnvGuard qd("KVBLK_QUEUE_DEPTH", "8");
	EnvGuard rings("KVBLK_RINGS", "2");
	EnvGuard cmd("KVBLK_MAX_CMD_BYTES", "64K");
	EnvGuard descs("KVBLK_MAX_DESCS", "100");
	EnvGuard batches("KVBLK_MAX_BATCHES", " 5 ");
	EXPECT_EQ(get("queue_depth"), 8u);
	EXPECT_EQ(get("max_cmd_bytes"), 64 * KiB);
	EXPECT_EQ(info("max_batches").value, 5u);
	EXPECT_EQ(info("rings").source, uint32_t(KVBLK_DEFAULT_ENV));
	EXPECT_EQ(info("threads").source, uint32_t(KVBLK_DEFAULT_BUILTIN));

	const kvblk_dev_info i = get_info(open_null().get());
	EXPECT_EQ(i.queue_depth, 8u);
	EXPECT_EQ(i.workers, 2u);
	EXPECT_EQ(i.max_cmd_bytes, 64 * KiB);
	EXPECT_EQ(i.max_descs, 100u);
	EXPECT_EQ(i.max_batches, 5u);

	/* An option the caller gives wins. */
	const kvblk_dev_info j = get_info(open_dev(path_, make_opts(KVBLK_BACKEND_URING, 1, 4)).get());
	EXPECT_EQ(j.queue_depth, 4u);
	EXPECT_EQ(j.workers, 1u);
	EXPECT_EQ(j.max_descs, 100u) << "left 0: the default";

	/* The descriptor limit is the default's: 101 descriptors are too many. */
	DevPtr d = open_null();
	std::vector<kvblk_desc> v(101, kvblk_desc{});
	std::vector<kvblk_result> r(101);
	EXPECT_EQ(kvblk_load_many(d.get(), v.data(), 101, r.data(), nullptr), -E2BIG);
	EXPECT_TRUE(says("max_descs 100"));
}

TEST_F(DefaultsTest, sizes_take_binary_suffixes)
{
	const std::map<std::string, uint64_t> ok = {
		{"4096", 4096}, {"64K", 64 * KiB}, {"64k", 64 * KiB}, {"1M", MiB}, {"1MiB", MiB},
		{"2MB", 2 * MiB}, {"1G", 1ull << 30}, {"1GiB", 1ull << 30},
	};
	for (const auto &[text, value] : ok) {
		EnvGuard e("KVBLK_MAX_CMD_BYTES", text.c_str());
		EXPECT_EQ(get("max_cmd_bytes"), value) << text;
	}
	for (const char *bad : {"2G", "1000", "12Q", "K", "-4096", "0x1000", "4096 4096"}) {
		EnvGuard e("KVBLK_MAX_CMD_BYTES", bad);
		uint64_t v = 7;
		EXPECT_EQ(kvblk_get_default("max_cmd_bytes", &v), -EINVAL) << bad;
		EXPECT_TRUE(says(std::string("KVBLK_MAX_CMD_BYTES=") + bad)) << kvblk_last_error();
		EXPECT_EQ(v, KVBLK_DEFAULT_MAX_CMD_BYTES) << "the built-in value is left in *value";
	}
	/* Counts take no suffix. */
	EnvGuard e("KVBLK_QUEUE_DEPTH", "1K");
	uint64_t v;
	EXPECT_EQ(kvblk_get_default("queue_depth", &v), -EINVAL);
	EXPECT_TRUE(says("KVBLK_QUEUE_DEPTH=1K is not a number")) << kvblk_last_error();
}

TEST_F(DefaultsTest, an_invalid_variable_fails_every_open_and_names_itself)
{
	{
		EnvGuard e("KVBLK_RINGS", "0");
		kvblk_dev *d = nullptr;
		EXPECT_EQ(kvblk_open(path_.c_str(), nullptr, &d), -EINVAL);
		EXPECT_EQ(d, nullptr);
		EXPECT_TRUE(says("kvblk_open: KVBLK_RINGS=0 is out of range 1..64")) << kvblk_last_error();
		const kvblk_default_info i = info("rings");
		EXPECT_EQ(i.error, -EINVAL);
		EXPECT_EQ(i.value, KVBLK_DEFAULT_WORKERS);
		/* Setting the default in the program overrides the bad variable. */
		ASSERT_EQ(kvblk_set_default("rings", 3), 0);
		EXPECT_EQ(get_info(open_null().get()).workers, 3u);
		EXPECT_EQ(info("rings").error, 0);
	}
	{
		EnvGuard e("KVBLK_BACKEND", "fastest");
		uint64_t v;
		EXPECT_EQ(kvblk_get_default("backend", &v), -EINVAL);
		EXPECT_TRUE(says("KVBLK_BACKEND=fastest is not a backend")) << kvblk_last_error();
	}
	/* Empty means unset. */
	EnvGuard e("KVBLK_QUEUE_DEPTH", "");
	EXPECT_EQ(get("queue_depth"), KVBLK_DEFAULT_QUEUE_DEPTH);
	EXPECT_EQ(info("queue_depth").source, uint32_t(KVBLK_DEFAULT_BUILTIN));
}

TEST_F(DefaultsTest, set_wins_over_the_environment_until_reset)
{
	EnvGuard qd("KVBLK_QUEUE_DEPTH", "8");
	ASSERT_EQ(kvblk_set_default("queue_depth", 16), 0) << kvblk_last_error();
	EXPECT_EQ(get("queue_depth"), 16u);
	EXPECT_EQ(info("queue_depth").source, uint32_t(KVBLK_DEFAULT_SET));
	EXPECT_EQ(get_info(open_null().get()).queue_depth, 16u);

	ASSERT_EQ(kvblk_reset_default("queue_depth"), 0);
	EXPECT_EQ(get("queue_depth"), 8u) << "the variable again";
	EXPECT_EQ(get_info(open_null().get()).queue_depth, 8u);

	ASSERT_EQ(kvblk_set_default("max_descs", 9), 0);
	ASSERT_EQ(kvblk_set_default("threads", 3), 0);
	ASSERT_EQ(kvblk_reset_default(nullptr), 0);
	EXPECT_EQ(get("max_descs"), KVBLK_DEFAULT_MAX_DESCS);
	EXPECT_EQ(get("threads"), KVBLK_DEFAULT_THREADS);
}

TEST_F(DefaultsTest, set_checks_range_and_name)
{
	EXPECT_EQ(kvblk_set_default("queue_depth", 0), -EINVAL);
	EXPECT_TRUE(says("queue_depth 0 is out of range 1..4096")) << kvblk_last_error();
	EXPECT_EQ(kvblk_set_default("queue_depth", KVBLK_MAX_QUEUE_DEPTH + 1), -EINVAL);
	EXPECT_EQ(kvblk_set_default("max_cmd_bytes", 4095), -EINVAL);
	EXPECT_EQ(kvblk_set_default("backend", KVBLK_BACKEND_MAX), -EINVAL);
	EXPECT_TRUE(says("not an enum kvblk_backend")) << kvblk_last_error();
	EXPECT_EQ(get("queue_depth"), KVBLK_DEFAULT_QUEUE_DEPTH) << "nothing changed";
	EXPECT_EQ(kvblk_set_default("queue_dpth", 8), -ENOENT);
	EXPECT_TRUE(says("no default is called \"queue_dpth\"")) << kvblk_last_error();
	EXPECT_EQ(kvblk_set_default(nullptr, 8), -EINVAL);
	uint64_t v;
	EXPECT_EQ(kvblk_get_default("nope", &v), -ENOENT);
	EXPECT_EQ(kvblk_get_default(nullptr, &v), -EINVAL);
	EXPECT_EQ(kvblk_get_default("rings", nullptr), -EINVAL);
	EXPECT_EQ(kvblk_reset_default("nope"), -ENOENT);
}

TEST_F(DefaultsTest, backend_default_replaces_auto_only)
{
	ASSERT_EQ(kvblk_set_default("backend", KVBLK_BACKEND_THREADPOOL), 0);
	ASSERT_EQ(kvblk_set_default("threads", 3), 0);
	const kvblk_dev_info i = get_info(open_null().get());
	EXPECT_EQ(i.backend, uint32_t(KVBLK_BACKEND_THREADPOOL));
	EXPECT_EQ(i.workers, 3u) << "threads, not rings, for the thread pool";
	EXPECT_STREQ(i.backend_reason, "threadpool: kvblk_set_default(\"backend\")");
	/* An explicit backend wins; the set default wins over KVBLK_BACKEND. */
	EXPECT_EQ(get_info(open_dev(path_, make_opts(KVBLK_BACKEND_PSYNC)).get()).backend,
		  uint32_t(KVBLK_BACKEND_PSYNC));
	EnvGuard e("KVBLK_BACKEND", "psync");
	EXPECT_EQ(get_info(open_null().get()).backend, uint32_t(KVBLK_BACKEND_THREADPOOL));
	ASSERT_EQ(kvblk_reset_default("backend"), 0);
	const kvblk_dev_info j = get_info(open_null().get());
	EXPECT_EQ(j.backend, uint32_t(KVBLK_BACKEND_PSYNC));
	EXPECT_STREQ(j.backend_reason, "psync: KVBLK_BACKEND=psync");
}

TEST_F(DefaultsTest, an_open_keeps_the_defaults_it_started_with)
{
	ASSERT_EQ(kvblk_set_default("queue_depth", 16), 0);
	ASSERT_EQ(kvblk_set_default("max_batches", 3), 0);
	DevPtr a = open_null();
	ASSERT_EQ(kvblk_set_default("queue_depth", 32), 0);
	ASSERT_EQ(kvblk_set_default("max_batches", 7), 0);
	DevPtr b = open_null();
	EXPECT_EQ(get_info(a.get()).queue_depth, 16u);
	EXPECT_EQ(get_info(a.get()).max_batches, 3u);
	EXPECT_EQ(get_info(b.get()).queue_depth, 32u);
	EXPECT_EQ(get_info(b.get()).max_batches, 7u);
}

TEST_F(DefaultsTest, staging_pool_takes_the_defaults_of_its_open)
{
	Seams s;
	s.make_copy_engine = [] { return std::make_unique<HostCopyEngine>(HostCopyEngine::Options{}); };
	SeamGuard g(s);
	EnvGuard bufs("KVBLK_STAGING_BUFFERS", "3");
	EnvGuard bytes("KVBLK_STAGING_BUFFER_BYTES", "64K");
	DevPtr d = open_null();
	AlignedBuf devmem(1 * MiB);
	uint32_t id = KVBLK_BUF_NONE;
	ASSERT_EQ(kvblk_register_buffer(d.get(), KVBLK_MEM_CUDA, devmem.data(), 1 * MiB, &id), 0)
		<< kvblk_last_error();
	EXPECT_EQ(get_stats(d.get()).staging_pool_bytes, 3 * 64 * KiB);
	/* kvblk_set_staging()'s 0 arguments are the same defaults. */
	ASSERT_EQ(kvblk_set_staging(d.get(), 1, 16 * KiB), 0);
	EXPECT_EQ(get_stats(d.get()).staging_pool_bytes, 16 * KiB);
	ASSERT_EQ(kvblk_set_staging(d.get(), 0, 0), 0);
	EXPECT_EQ(get_stats(d.get()).staging_pool_bytes, 3 * 64 * KiB);
}

} // namespace
