// SPDX-License-Identifier: MIT
//
// kvblkctl probe: a verdict only from a ceiling that held still.
#include "probe_verdict.hpp"

#include <gtest/gtest.h>

using namespace kvblkctl;

TEST(ProbeVerdict, StableCeilingGivesVerdicts)
{
	/* Ceiling = median 4.0; spread (4.2 - 3.9) / 4.0 = 0.075. */
	ProbeVerdict v = probe_decide({ 3.9, 4.2, 4.0 }, 3.6, 3.4, "");
	EXPECT_TRUE(v.stable);
	EXPECT_DOUBLE_EQ(v.ceiling, 4.0);
	EXPECT_NEAR(v.spread, 0.075, 1e-12);
	EXPECT_NEAR(v.deciding, 0.85, 1e-12);
	EXPECT_EQ(v.verdict, "fast");
	EXPECT_NE(v.reason.find("rounds 3.900, 4.200, 4.000"), std::string::npos) << v.reason;
	EXPECT_EQ(probe_decide({ 4.0, 4.0, 4.0 }, 2.0, 3.9, "").verdict, "ok");	 /* 0.50 */
	EXPECT_EQ(probe_decide({ 4.0, 4.0, 4.0 }, 1.99, 3.9, "").verdict, "slow"); /* 0.4975 */
	EXPECT_EQ(probe_decide({ 4.0, 4.0, 4.0 }, 3.2, 3.9, "").verdict, "fast");  /* 0.80 */
}

TEST(ProbeVerdict, UnstableCeilingGivesNoVerdict)
{
	/* A measured run: the ceiling swung 2.2..5.2 GB/s within one run. */
	ProbeVerdict v = probe_decide({ 2.2, 5.2, 3.1 }, 1.0, 1.0, "");
	EXPECT_FALSE(v.stable);
	EXPECT_EQ(v.verdict, "unstable");
	EXPECT_DOUBLE_EQ(v.ceiling, 3.1);
	EXPECT_NEAR(v.spread, 3.0 / 3.1, 1e-12);
	EXPECT_NE(v.reason.find("rounds 2.200, 5.200, 3.100 GB/s"), std::string::npos) << v.reason;
	EXPECT_NE(v.reason.find("spread 0.97"), std::string::npos) << v.reason;
	EXPECT_EQ(v.reason.find("slow"), std::string::npos) << v.reason;
}

TEST(ProbeVerdict, BoundIsInclusive)
{
	/* Spread exactly 0.20 (5.0 - 4.0) / 5.0 is stable; just above is not. */
	EXPECT_TRUE(probe_decide({ 4.0, 5.0, 5.0 }, 5.0, 5.0, "").stable);
	EXPECT_FALSE(probe_decide({ 3.99, 5.0, 5.0 }, 5.0, 5.0, "").stable);
}

TEST(ProbeVerdict, OneRoundOrNoCeiling)
{
	ProbeVerdict one = probe_decide({ 4.0 }, 4.0, 4.0, "");
	EXPECT_EQ(one.verdict, "unstable");
	EXPECT_NE(one.reason.find("one round only"), std::string::npos) << one.reason;
	ProbeVerdict none = probe_decide({}, 4.0, 4.0, "fio not found");
	EXPECT_EQ(none.verdict, "unknown");
	EXPECT_EQ(none.reason, "no device ceiling: fio not found");
	EXPECT_DOUBLE_EQ(none.ceiling, 0);
}
