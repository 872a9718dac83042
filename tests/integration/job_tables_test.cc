// A job spec's `tables:` section reaches the PS: real `brook ps`, `chief`
// and `trainer` processes train a job whose tables have their own memory
// budgets and admission, and the PS's /metrics show each table created
// with them (issue 24).
#include <map>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "tests/integration/chief_cluster_fixture.h"

namespace brook {
namespace {

// Series `family{table="..."}` of a /metrics page by the table's model name
// (the part after the job's "<job id>/" prefix).
std::map<std::string, double> ByTable(const std::string& page, const std::string& family) {
  std::map<std::string, double> out;
  const std::string head = family + "{table=\"";
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, head)) continue;
    const size_t end = line.find("\"}", head.size());
    if (end == absl::string_view::npos) continue;
    std::string table(line.substr(head.size(), end - head.size()));
    table = table.substr(table.rfind('/') + 1);
    double v = 0;
    if (absl::SimpleAtod(line.substr(line.rfind(' ') + 1), &v)) out[table] = v;
  }
  return out;
}

TEST_F(ChiefE2eTest, TablesSectionOfTheJobSpecReachesThePsTables) {
  StartPs(1);
  StartChief();
  StartTrainer("t0");
  // Without checkpoint and export, so the ended job's tables stay on the PS
  // for `retention` seconds.
  std::string yaml;
  for (absl::string_view line : absl::StrSplit(JobYaml("tables", 0, 1, 512, 0, 1), '\n')) {
    if (absl::StartsWith(line, "checkpoint:") || absl::StartsWith(line, "export:")) continue;
    absl::StrAppend(&yaml, line, "\n");
  }
  yaml +=
      "tables:\n"
      "  default: {memory_budget: 64MiB, ttl_seconds: 86400}\n"
      "  workclass: {memory_budget: 32MiB, admission_min_count: 65535}\n";
  auto submit = Cli({"submit", WriteJob("tables.yaml", yaml)});
  ASSERT_EQ(submit.exit_code, 0) << submit.output;
  auto watch = Cli({"status", "tables", "--watch", "--interval", "0.5"}, 300);
  ASSERT_EQ(watch.exit_code, 0) << watch.output;

  std::string error;
  auto page = testing::HttpGet(metrics_["ps-0"], "/metrics", 5000, &error);
  ASSERT_TRUE(page.has_value()) << error;
  const auto budgets = ByTable(page->body, "brook_ps_table_memory_budget_bytes");
  ASSERT_GE(budgets.size(), 8u) << page->body;
  for (const auto& [table, bytes] : budgets) {
    EXPECT_EQ(bytes, table == "workclass" ? 32 << 20 : 64 << 20) << table;
  }
  // workclass admits a key after 65535 pushes: it trained no row, its keys
  // wait; the other tables hold rows.
  const auto rows = ByTable(page->body, "brook_ps_table_rows");
  const auto pending = ByTable(page->body, "brook_ps_table_pending_keys");
  EXPECT_EQ(rows.at("workclass"), 0);
  EXPECT_GT(pending.at("workclass"), 0);
  EXPECT_GT(rows.at("education"), 0);
  EXPECT_EQ(pending.at("education"), 0);
}

}  // namespace
}  // namespace brook
