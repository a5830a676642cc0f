// SPDX-License-Identifier: MIT
// libkvblk.so as a program links it: every public symbol exported at its node (KVBLK_0.1, KVBLK_0.2,
// KVBLK_0.3; kvblk_load_many/kvblk_store_many at both KVBLK_0.1 and, the default, KVBLK_0.3),
// nothing of the C++ internals exported, and the C header compiled as C against it.
#include <kvblk/kvblk.h>

#include "c_header.h"

#include <gtest/gtest.h>

#include <cerrno>
#include <dlfcn.h>
#include <string>

namespace {

const char *const kPublic[] = {
	"kvblk_version",	 "kvblk_check_version",	  "kvblk_last_error",	  "kvblk_backend_name",
	"kvblk_backend_from_name", "kvblk_open_opts_init", "kvblk_open",	  "kvblk_close",
	"kvblk_get_info",	 "kvblk_register_buffer", "kvblk_unregister_buffer", "kvblk_load_many",
	"kvblk_store_many",	 "kvblk_get_stats",	  "kvblk_reset_stats",
};

/* Added in 0.2 (GPU destinations). */
const char *const kPublic02[] = {"kvblk_register_dmabuf", "kvblk_set_staging", "kvblk_path_name"};

/* Added in 0.3 (the asynchronous API, several targets). */
const char *const kPublic03[] = {"kvblk_submit_opts_init", "kvblk_submit",	   "kvblk_reap",
				 "kvblk_wait",		   "kvblk_cancel",	   "kvblk_event_fd",
				 "kvblk_add_target",	   "kvblk_add_target_fd", "kvblk_remove_target",
				 "kvblk_get_target_info", "kvblk_flush",	   "kvblk_check_buffer"};

/* Two versions: 40-byte descriptors @KVBLK_0.1, 48-byte ones @@KVBLK_0.3 (the default). */
const char *const kTwoVersions[] = {"kvblk_load_many", "kvblk_store_many"};

struct Handle {
	void *h = dlopen(KVBLK_SHARED_LIBRARY, RTLD_NOW | RTLD_LOCAL);
	~Handle()
	{
		if (h)
			dlclose(h);
	}
};

TEST(AbiTest, public_symbols_are_versioned_kvblk_0_1)
{
	Handle lib;
	ASSERT_NE(lib.h, nullptr) << dlerror();
	for (const char *name : kPublic) {
		EXPECT_NE(dlvsym(lib.h, name, "KVBLK_0.1"), nullptr) << name;
		EXPECT_NE(dlsym(lib.h, name), nullptr) << name;
	}
}

TEST(AbiTest, symbols_of_0_2_are_versioned_kvblk_0_2)
{
	Handle lib;
	ASSERT_NE(lib.h, nullptr) << dlerror();
	for (const char *name : kPublic02) {
		EXPECT_NE(dlvsym(lib.h, name, "KVBLK_0.2"), nullptr) << name;
		EXPECT_EQ(dlvsym(lib.h, name, "KVBLK_0.1"), nullptr) << name;
	}
}

TEST(AbiTest, symbols_of_0_3_are_versioned_kvblk_0_3)
{
	Handle lib;
	ASSERT_NE(lib.h, nullptr) << dlerror();
	for (const char *name : kPublic03) {
		EXPECT_NE(dlvsym(lib.h, name, "KVBLK_0.3"), nullptr) << name;
		EXPECT_EQ(dlvsym(lib.h, name, "KVBLK_0.2"), nullptr) << name;
	}
}

TEST(AbiTest, load_and_store_many_have_a_0_1_and_a_default_0_3_version)
{
	Handle lib;
	ASSERT_NE(lib.h, nullptr) << dlerror();
	for (const char *name : kTwoVersions) {
		void *old = dlvsym(lib.h, name, "KVBLK_0.1");
		void *now = dlvsym(lib.h, name, "KVBLK_0.3");
		ASSERT_NE(old, nullptr) << name;
		ASSERT_NE(now, nullptr) << name;
		EXPECT_NE(old, now) << name << ": the 0.1 version must read 40-byte descriptors";
		EXPECT_EQ(dlsym(lib.h, name), now) << name << ": the default is 0.3";
	}
	/* The compat wrappers' own names stay internal. */
	EXPECT_EQ(dlsym(lib.h, "kvblk_load_many_v0_1"), nullptr);
	EXPECT_EQ(dlsym(lib.h, "kvblk_load_many_v0_3"), nullptr);
}

TEST(AbiTest, internals_are_not_exported)
{
	Handle lib;
	ASSERT_NE(lib.h, nullptr) << dlerror();
	/* kvblk::detail::fail(int, char const*, ...) and the seam pointer. */
	EXPECT_EQ(dlsym(lib.h, "_ZN5kvblk6detail4failEiPKcz"), nullptr);
	EXPECT_EQ(dlsym(lib.h, "_ZN5kvblk7testing8internal7g_seamsE"), nullptr);
}

TEST(AbiTest, linked_program_uses_the_shared_library)
{
	Dl_info where{};
	ASSERT_NE(dladdr(reinterpret_cast<void *>(&kvblk_open), &where), 0);
	EXPECT_NE(std::string(where.dli_fname).find("libkvblk.so"), std::string::npos) << where.dli_fname;
	EXPECT_EQ(KVBLK_CHECK_VERSION(), 1);
	EXPECT_STREQ(kvblk_version(), "0.4.0");
}

TEST(AbiTest, c_caller_through_the_shared_library)
{
	EXPECT_EQ(kvblk_c_smoke("/var/tmp/kvblk-abi-no-such-file"), -ENOENT);
}

} // namespace
