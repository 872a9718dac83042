// The Grafana dashboard shipped with the chart queries only metrics that
// exist: every brook_* / process_* name in its PromQL is listed in
// docs/metrics.md (which the e2e test keeps equal to what nodes export).
#include <regex>
#include <set>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/testing/test_util.h"

namespace brook::metrics {
namespace {

TEST(DashboardTest, EveryQueriedMetricIsDocumented) {
  const std::string docs = testing::ReadFileOrDie(testing::SourceDir() + "/docs/metrics.md");
  const nlohmann::json dash = nlohmann::json::parse(
      testing::ReadFileOrDie(testing::SourceDir() + "/helm/brook/dashboards/brook-overview.json"));
  ASSERT_TRUE(dash.contains("panels"));
  const std::regex name(R"((brook|process)_[a-z0-9_]+)");
  std::set<std::string> queried;
  for (const auto& panel : dash["panels"]) {
    ASSERT_TRUE(panel.contains("targets")) << panel.dump();
    for (const auto& target : panel["targets"]) {
      const std::string expr = target["expr"].get<std::string>();
      for (std::sregex_iterator it(expr.begin(), expr.end(), name), end; it != end; ++it) {
        std::string metric = it->str();
        for (const std::string suffix : {"_bucket", "_sum", "_count"}) {
          if (metric.size() > suffix.size() &&
              metric.compare(metric.size() - suffix.size(), suffix.size(), suffix) == 0 &&
              docs.find("`" + metric + "`") == std::string::npos) {
            metric.resize(metric.size() - suffix.size());
          }
        }
        queried.insert(metric);
      }
    }
  }
  EXPECT_GE(queried.size(), 15u);
  for (const std::string& m : queried) {
    EXPECT_NE(docs.find("`" + m + "`"), std::string::npos) << m << " is not in docs/metrics.md";
  }
}

}  // namespace
}  // namespace brook::metrics
