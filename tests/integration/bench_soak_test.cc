// `brook bench soak --minutes 2`: a local cluster under a full push/pull load
// and a training job at once holds its throughput, keeps every process's RSS
// flat after the warm-up and makes no error (the verdict of bench/soak.h,
// whose criteria are unit-tested in tests/unit/bench/soak_test.cc).
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>

#include "tests/testing/test_util.h"

namespace brook {
namespace {

TEST(BenchSoakTest, TwoMinutesOfLoadAndTrainingHoldThroughputAndMemoryWithoutErrors) {
  testing::TempDir dir;
  const testing::CommandResult r =
      testing::RunCommand({testing::BrookBinary(), "bench", "soak", "--minutes", "2", "--work-dir",
                           dir.Join("soak"), "--sample-seconds", "5", "--output", "json"},
                          /*timeout_seconds=*/400);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  // The JSON summary is the one stdout line that is an object (stderr, mixed
  // in here, has the progress lines).
  std::string summary;
  for (size_t at = 0; at < r.output.size();) {
    const size_t end = std::min(r.output.find('\n', at), r.output.size());
    if (r.output[at] == '{') summary = r.output.substr(at, end - at);
    at = end + 1;
  }
  ASSERT_FALSE(summary.empty()) << r.output;
  const nlohmann::json j = nlohmann::json::parse(summary);
  EXPECT_TRUE(j["pass"].get<bool>()) << j.dump(2);
  EXPECT_EQ(j["errors"].get<uint64_t>(), 0u);
  ASSERT_GE(j["samples"].size(), 20u) << j.dump(2);
  EXPECT_GT(j["load_rows_per_second"]["late"].get<double>(), 0);
  EXPECT_GT(j["train_examples_per_second"]["late"].get<double>(), 0);
  // Every node was sampled: 2 PS, the chief, a trainer.
  for (const char* node : {"ps-0", "ps-1", "chief", "trainer-0"}) {
    EXPECT_TRUE(j["rss_bytes"].contains(node)) << node;
    EXPECT_GT(j["rss_bytes"][node]["late_max"].get<double>(), 0) << node;
  }
}

}  // namespace
}  // namespace brook
