// Warm start only when asked (issue 23): a job with `init_from` starts from
// another job's export (its tables and dense variables loaded into the new
// job's namespace before any step trains), one without it starts cold, and
// a `tables:` filter takes only those. Real `brook ps`, `chief` and
// `trainer` processes.
#include <cmath>
#include <map>
#include <regex>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "chief/export/model_export.h"
#include "ps/parameter_server.h"
#include "tests/integration/chief_cluster_fixture.h"

namespace brook {
namespace {

// Every table's weights by key and every dense variable of an export, by
// the model's names (slots left out: a job that trains changes them).
struct Weights {
  std::map<std::string, std::map<uint64_t, std::vector<float>>> rows;
  std::map<std::string, std::vector<float>> dense;
};

Weights LoadWeights(const std::string& dir) {
  Weights out;
  absl::StatusOr<chief::LoadedExport> loaded = chief::ReadExport(dir);
  EXPECT_TRUE(loaded.ok()) << loaded.status();
  if (!loaded.ok()) return out;
  ps::ParameterServer ps{ps::ParameterServerOptions{}};
  EXPECT_TRUE(ps.Restore(absl::StrCat(dir, "/tables")).ok());
  for (const chief::ExportedTable& t : loaded->manifest.tables) {
    auto& rows = out.rows[t.name];
    EXPECT_TRUE(ps.ScanTable(t.ps_name, [&](uint64_t key, absl::Span<const float> w,
                                            absl::Span<const float>) {
                    rows[key].assign(w.begin(), w.end());
                  }).ok());
  }
  for (const chief::ExportedDense& d : loaded->manifest.dense) {
    int64_t n = 1;
    for (int64_t s : d.shape) n *= s;
    std::vector<float>& v = out.dense[d.name];
    v.resize(static_cast<size_t>(n));
    EXPECT_TRUE(ps.PullDense(d.ps_name, absl::MakeSpan(v)).ok()) << d.ps_name;
  }
  return out;
}

// Largest |a - b| over the rows (keys of `a`; a key `b` lacks counts as its
// whole weight) of `table`, or over a dense variable.
double MaxDiff(const Weights& a, const Weights& b, const std::string& table) {
  double d = 0;
  if (a.dense.contains(table)) {
    const std::vector<float>& x = a.dense.at(table);
    const std::vector<float>& y = b.dense.at(table);
    for (size_t i = 0; i < x.size(); ++i) d = std::max(d, std::fabs(double{x[i]} - y[i]));
    return d;
  }
  const auto& rows_b = b.rows.at(table);
  for (const auto& [key, w] : a.rows.at(table)) {
    auto it = rows_b.find(key);
    for (size_t i = 0; i < w.size(); ++i) {
      d = std::max(d, std::fabs(double{w[i]} - (it == rows_b.end() ? 0.0 : it->second[i])));
    }
  }
  return d;
}

class InitFromTest : public ChiefE2eTest {
 protected:
  // `lr` for every optimizer; a tiny one trains (almost) nothing, so what
  // a job ends with is what it started from.
  std::string Spec(const std::string& name, const std::string& lr, const std::string& extra) {
    std::string yaml = JobYaml(name, 0, 1, 512, 20000, 1, extra);
    return absl::StrReplaceAll(
        yaml, {{"learning_rate: 0.1,", absl::StrCat("learning_rate: ", lr, ",")},
               {"learning_rate: 0.003}", absl::StrCat("learning_rate: ", lr, "}")}});
  }
  std::string Run(const std::string& name, const std::string& yaml) {
    auto submit = Cli({"submit", WriteJob(name + ".yaml", yaml)});
    EXPECT_EQ(submit.exit_code, 0) << submit.output;
    std::smatch m;
    EXPECT_TRUE(
        std::regex_search(submit.output, m, std::regex("[a-z0-9-]+-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}")))
        << submit.output;
    const std::string id = m.str();
    EXPECT_TRUE(WaitFor(
        id, [](const v1::JobStatus& j) { return j.state() == "SUCCEEDED"; }, 240s))
        << Job(id, true).DebugString();
    return id;
  }
  static std::string Events(const v1::JobStatus& j) {
    std::string all;
    for (const auto& e : j.events()) absl::StrAppend(&all, e.text(), "\n");
    return all;
  }
};

TEST_F(InitFromTest, AJobStartsFromAnExportOnlyWhenAskedAndTakesOnlyTheListedTables) {
  StartPs(2);
  StartChief();
  StartTrainer("t0");
  // A: trained for real.
  const std::string a = Run("a", Spec("a", "0.1", ""));
  const std::string a_export = Job(a).export_dir();
  ASSERT_FALSE(a_export.empty());
  const Weights wa = LoadWeights(a_export);
  ASSERT_TRUE(wa.rows.contains("education"));
  ASSERT_FALSE(wa.dense.empty());

  // B: A's export, then (almost) no training: B ends with A's weights.
  const std::string frozen = "1e-30";
  const std::string b = Run("b", Spec("b", frozen, absl::StrCat("init_from: ", a_export, "\n")));
  const v1::JobStatus jb = Job(b, true);
  EXPECT_NE(Events(jb).find("init_from: loaded"), std::string::npos) << Events(jb);
  EXPECT_NE(Events(jb).find(a), std::string::npos) << Events(jb);
  const Weights wb = LoadWeights(jb.export_dir());
  for (const auto& [table, rows] : wa.rows) EXPECT_LT(MaxDiff(wa, wb, table), 1e-6) << table;
  for (const auto& [name, v] : wa.dense) EXPECT_LT(MaxDiff(wa, wb, name), 1e-6) << name;

  // C: B's spec without init_from starts cold: its weights are not A's, and
  // its eval is far worse than B's (which is A's).
  const std::string c = Run("c", Spec("c", frozen, ""));
  const v1::JobStatus jc = Job(c, true);
  EXPECT_EQ(Events(jc).find("init_from"), std::string::npos) << Events(jc);
  const Weights wc = LoadWeights(jc.export_dir());
  EXPECT_GT(MaxDiff(wa, wc, "education"), 1e-3);
  EXPECT_GT(jb.eval().auc(), jc.eval().auc() + 0.1)
      << "warm " << jb.eval().auc() << " cold " << jc.eval().auc();
  EXPECT_GT(jb.eval().auc(), 0.85);

  // D: only the education tables come from A; the rest starts as C's did
  // (same spec and seed: the same initial values).
  const std::string d = Run("d", Spec("d", frozen,
                                      absl::StrCat("init_from: {path: ", a_export,
                                                   ", tables: [education, education_wide]}\n")));
  const v1::JobStatus jd = Job(d, true);
  EXPECT_NE(Events(jd).find("loaded 2 tables"), std::string::npos) << Events(jd);
  const Weights wd = LoadWeights(jd.export_dir());
  EXPECT_LT(MaxDiff(wa, wd, "education"), 1e-6);
  EXPECT_LT(MaxDiff(wa, wd, "education_wide"), 1e-6);
  EXPECT_LT(MaxDiff(wc, wd, "occupation"), 1e-6);
  EXPECT_GT(MaxDiff(wa, wd, "occupation"), 1e-3);
  for (const auto& [name, v] : wc.dense) EXPECT_LT(MaxDiff(wc, wd, name), 1e-6) << name;

  // Bad sources are refused at submit, naming the field.
  auto bad = Cli({"submit", WriteJob("bad.yaml", Spec("e", frozen,
                                                      absl::StrCat("init_from: {path: ", a_export,
                                                                   ", tables: [nope]}\n")))});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.output.find("init_from.tables[0]"), std::string::npos) << bad.output;
  auto missing =
      Cli({"submit", WriteJob("missing.yaml", Spec("e", frozen, "init_from: /no/such/export\n"))});
  EXPECT_NE(missing.exit_code, 0);
  EXPECT_NE(missing.output.find("init_from"), std::string::npos) << missing.output;
}

}  // namespace
}  // namespace brook
