// Runs the real `brook bench trainer` with tiny settings and checks its
// plumbing: every model gets both ceilings and both trainer figures, the
// time shares are fractions of the step that add up, the bottleneck is the
// slower ceiling, every example was trained and the PS traffic is counted.
// Not a timing test.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::RunCommand;

TEST(BenchTrainer, TinyRunReportsEveryFigureAndNamesTheBottleneck) {
  testing::TempDir work;
  auto r = RunCommand(
      {BrookBinary(), "bench", "trainer", "--examples", "3000", "--batch-size", "256", "--models",
       "wide_deep,dlrm", "--cardinality-max", "5000", "--work-dir", work.path(), "--json"},
      300);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("goal: input + PS wait under 10%"), std::string::npos) << r.output;
  const size_t start = r.output.rfind("\n{\n");
  ASSERT_NE(start, std::string::npos) << r.output;
  auto json = nlohmann::json::parse(r.output.substr(start + 1), nullptr, false);
  ASSERT_FALSE(json.is_discarded()) << r.output;
  EXPECT_EQ(json["backends"], nlohmann::json::array({"cpu"}));
  for (const char* model : {"wide_deep", "dlrm"}) {
    SCOPED_TRACE(model);
    const auto& m = json["models"][model]["devices"]["cpu"];
    const double input = json["models"][model]["input_alone_examples_per_second"].get<double>();
    const double compute = m["compute_alone_examples_per_second"].get<double>();
    EXPECT_GT(input, 0);
    EXPECT_GT(compute, 0);
    EXPECT_EQ(m["ceiling_bottleneck"], input < compute ? "input" : "compute");
    for (const char* path : {"in_process", "grpc"}) {
      SCOPED_TRACE(path);
      const auto& p = m[path];
      EXPECT_GT(p["examples_per_second"].get<double>(), 0);
      EXPECT_EQ(p["examples"].get<int64_t>(), 3000);
      EXPECT_EQ(p["steps"].get<int64_t>(), (3000 + 255) / 256);
      for (const char* share : {"input_wait_share", "ps_wait_share", "compute_share"}) {
        const double v = p[share].get<double>();
        EXPECT_GE(v, 0) << share;
        EXPECT_LE(v, 1.01) << share;
      }
      // PS wait and compute are parts of the compute thread's wall time (input
      // wait is the pull thread's, so it does not add to them).
      EXPECT_LE(p["ps_wait_share"].get<double>() + p["compute_share"].get<double>(), 1.01);
      // Every step pulls and pushes; the CPU has no GPU idle share.
      EXPECT_GT(p["ps_pull_bytes_per_second"].get<double>(), 0);
      EXPECT_GT(p["ps_push_bytes_per_second"].get<double>(), 0);
      EXPECT_TRUE(p["gpu_idle_share"].is_null());
    }
  }
  // The scratch directory is removed.
  EXPECT_TRUE(std::filesystem::is_empty(work.path()));
}

// Several devices run on the same data, in the order given; a list naming one
// twice or with an empty entry is a usage error, and a device that cannot be
// opened fails before any data is generated.
TEST(BenchTrainer, DeviceListsAreCheckedBeforeAnyWork) {
  testing::TempDir work;
  // "cuda" and "cuda:00" are cuda:0: named twice even without a GPU.
  for (const char* bad : {"cpu,cpu", "cpu,", ",cpu", "cuda,cuda:0", "cuda:0,cuda:00", "gpu"}) {
    SCOPED_TRACE(bad);
    auto r = RunCommand(
        {BrookBinary(), "bench", "trainer", "--device", bad, "--work-dir", work.path()}, 60);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find("--device"), std::string::npos) << r.output;
  }
  auto math =
      RunCommand({BrookBinary(), "bench", "trainer", "--device", "cpu", "--gemm-math", "tf32"}, 60);
  EXPECT_EQ(math.exit_code, 2) << math.output;
  EXPECT_NE(math.output.find("the cpu device computes in fp32"), std::string::npos) << math.output;
  // No GPU here says so; on a GPU machine there is no cuda:99.
  auto r = RunCommand(
      {BrookBinary(), "bench", "trainer", "--device", "cpu,cuda:99", "--work-dir", work.path()},
      60);
  EXPECT_NE(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("cuda"), std::string::npos) << r.output;
  EXPECT_EQ(r.output.find("examples/s"), std::string::npos) << r.output;
  EXPECT_TRUE(std::filesystem::is_empty(work.path()));
}

}  // namespace
}  // namespace brook
