// Runs the real `brook bench ps` with tiny settings and checks its plumbing:
// exit 0 and a positive rate for every figure it measured. Not a timing test.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::RunCommand;

TEST(BenchPs, TinyRunReportsPositiveRates) {
  testing::TempDir work;
  auto r = RunCommand(
      {BrookBinary(), "bench",      "ps",        "--rows",    "20000",       "--dims", "16",
       "--threads",   "1",          "--seconds", "0.2",       "--tier-rows", "41000",  "--tier-dim",
       "8",           "--work-dir", work.path(), "--helpers", "1",           "--json"},
      180);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("allocator: "), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("[goal >= 70%]"), std::string::npos) << r.output;
  // The JSON is the last thing printed: from the last line that is just "{".
  size_t start = r.output.rfind("\n{\n");
  ASSERT_NE(start, std::string::npos) << r.output;
  size_t end = r.output.rfind('}');
  ASSERT_NE(end, std::string::npos);
  auto json = nlohmann::json::parse(r.output.substr(start + 1, end - start), nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.output;
  ASSERT_TRUE(json.contains("runs"));
  ASSERT_EQ(json["runs"].size(), 1u) << json.dump(2);
  const auto& run = json["runs"][0];
  EXPECT_EQ(run["dim"], 16);
  EXPECT_EQ(run["threads"], 1);
  // The PS under (b) runs the helpers asked for, and says so.
  EXPECT_EQ(run["helpers"], 1);
  EXPECT_NE(r.output.find("(b) PS helper threads: 1"), std::string::npos) << r.output;
  // The text names the allocator the JSON reports: brook's own tuning unless
  // the environment chose one (common/malloc_tuning.h).
  const std::string allocator = json["allocator"];
  EXPECT_NE(r.output.find("allocator: " + allocator), std::string::npos) << r.output;
  // The serial bound is in (0, 1) of the bare rate: 1 / (1/a + 1/bare) < bare.
  for (const char* key : {"grpc_pull_serial_bound_vs_bare", "grpc_push_serial_bound_vs_bare"}) {
    ASSERT_TRUE(run.contains(key)) << key;
    EXPECT_GT(run[key].get<double>(), 0.0) << key;
    EXPECT_LT(run[key].get<double>(), 1.0) << key;
  }
  EXPECT_NE(r.output.find("bound if the PS's pull adds to the transport"), std::string::npos)
      << r.output;
  // Each ratio is the median of alternating slice pairs (bench/paired_rate.h),
  // printed and reported with its lowest and highest pair around it.
  EXPECT_EQ(run["slice_pairs"], 8);
  EXPECT_NE(r.output.find("alternate in 8 slice pairs"), std::string::npos) << r.output;
  const bool spread_printed = r.output.find("MISS; pairs ") != std::string::npos ||
                              r.output.find("PASS; pairs ") != std::string::npos;
  EXPECT_TRUE(spread_printed) << r.output;
  for (const char* ratio : {"inproc_pull_vs_gather", "inproc_push_vs_scatter", "grpc_pull_vs_bare",
                            "grpc_push_vs_bare"}) {
    const std::string low = absl::StrCat(ratio, "_low"), high = absl::StrCat(ratio, "_high");
    ASSERT_TRUE(run.contains(ratio) && run.contains(low) && run.contains(high)) << ratio;
    EXPECT_GT(run[low].get<double>(), 0.0) << ratio;
    EXPECT_LE(run[low].get<double>(), run[ratio].get<double>()) << ratio;
    EXPECT_GE(run[high].get<double>(), run[ratio].get<double>()) << ratio;
  }
  for (const char* key :
       {"inproc_pull_mrows_s", "gather_mrows_s", "inproc_push_mrows_s", "scatter_mrows_s",
        "grpc_pull_mrows_s", "grpc_pull_gb_s", "bare_grpc_pull_mrows_s", "grpc_push_mrows_s",
        "bare_grpc_push_mrows_s"}) {
    ASSERT_TRUE(run.contains(key)) << key;
    EXPECT_GT(run[key].get<double>(), 0.0) << key;
  }
  // Every figure says how many cores the process kept busy and its CPU per
  // row: a busy process uses some CPU, and never more than the machine has.
  const double cores = json["cores"].get<double>();
  ASSERT_GE(cores, 1.0);
  for (const char* figure : {"inproc_pull", "gather", "inproc_push", "scatter", "grpc_pull",
                             "bare_grpc_pull", "grpc_push", "bare_grpc_push"}) {
    const std::string busy = absl::StrCat(figure, "_cores");
    const std::string per_row = absl::StrCat(figure, "_cpu_ns_per_row");
    ASSERT_TRUE(run.contains(busy)) << busy;
    ASSERT_TRUE(run.contains(per_row)) << per_row;
    EXPECT_GT(run[busy].get<double>(), 0.0) << busy;
    EXPECT_LE(run[busy].get<double>(), cores * 1.05) << busy;  // the CPU clock vs the wall clock
    EXPECT_GT(run[per_row].get<double>(), 0.0) << per_row;
  }
  EXPECT_NE(r.output.find("CPU per row: pull"), std::string::npos) << r.output;
  const auto& tier = json["tier"];
  for (const char* key : {"tier_pull_mrows_s", "tier_push_mrows_s", "bare_multiget_mrows_s",
                          "bare_writebatch_mrows_s", "push_wal_off_mrows_s", "push_wal_on_mrows_s",
                          "push_wal_fsync_mrows_s", "checkpoint_gb_s", "restore_gb_s",
                          "churn_data_dir_first100_tables_s", "churn_data_dir_last100_tables_s",
                          "churn_data_dir_drops_s", "churn_memory_first100_tables_s",
                          "churn_memory_last100_tables_s", "churn_memory_drops_s"}) {
    ASSERT_TRUE(tier.contains(key)) << key << " " << json.dump(2);
    EXPECT_GT(tier[key].get<double>(), 0.0) << key;
  }
  EXPECT_NE(r.output.find("of bare MultiGet [goal >= 50%]"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("table churn, 600 tables"), std::string::npos) << r.output;
  const std::string redis = json["redis"];
  if (redis == "ran") {
    for (const char* key : {"redis_mget_mrows_s", "redis_mset_mrows_s"}) {
      ASSERT_TRUE(run.contains(key)) << key;
      EXPECT_GT(run[key].get<double>(), 0.0) << key;
    }
  } else {
    EXPECT_EQ(redis, "skipped") << r.output;
    EXPECT_NE(r.output.find("Redis: SKIPPED"), std::string::npos) << r.output;
  }
}

TEST(BenchPs, BadFlagsAreUsageErrors) {
  auto r = RunCommand({BrookBinary(), "bench", "ps", "--rows", "100", "--batch", "4096"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = RunCommand({BrookBinary(), "bench", "ps", "--rows", "20000", "--dims", "8", "--threads", "1",
                  "--seconds", "0.1", "--no-redis", "--tier-rows", "5000"},
                 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--tier-rows"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace brook
