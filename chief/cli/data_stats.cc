// `brook data stats FILE|DIR...`: per-feature statistics of TFRecord files of
// tf.train.Example, an inferred data schema (--schema-out), and validation of
// new data against a saved schema (--check), which exits 1 on any anomaly:
//   brook data stats data/adult/train-*.tfrecord --schema-out adult.schema.yaml
//   brook data stats data/adult_test/ --check adult.schema.yaml
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "chief/cli/commands.h"
#include "datatools/data_schema.h"
#include "datatools/data_stats.h"

namespace brook::cli {
namespace {

struct StatsFlags {
  std::vector<std::string> inputs;
  std::string compression = "auto";
  std::string schema_out;
  std::string check;
  bool json = false;
  int top_k = 10;
  double presence_margin = 0.02;
  double range_slack = 0.0;
  bool fail_on_new_features = false;
  bool skip_corrupt = false;
  int64_t max_examples = 0;
};

int StatsFail(int code, const std::string& message) {
  std::cerr << "brook data stats: " << message << "\n";
  return code;
}

// A directory stands for the TFRecord files in it (names containing
// ".tfrecord"), so the output of `brook data convert` can be named by its
// directory without picking up feature_spec.yaml.
absl::StatusOr<std::vector<std::string>> ExpandInputs(const std::vector<std::string>& inputs) {
  std::vector<std::string> files;
  for (const std::string& in : inputs) {
    std::error_code ec;
    if (!std::filesystem::is_directory(in, ec)) {
      files.push_back(in);
      continue;
    }
    std::vector<std::string> found;
    for (const auto& entry : std::filesystem::directory_iterator(in, ec)) {
      const std::string name = entry.path().filename().string();
      if (entry.is_regular_file() && name.find(".tfrecord") != std::string::npos &&
          !name.ends_with(".tmp")) {
        found.push_back(entry.path().string());
      }
    }
    if (ec) return absl::InvalidArgumentError(absl::StrCat(in, ": ", ec.message()));
    if (found.empty()) {
      return absl::NotFoundError(absl::StrCat(in, ": no *.tfrecord* files in this directory"));
    }
    std::sort(found.begin(), found.end());
    files.insert(files.end(), found.begin(), found.end());
  }
  return files;
}

bool IsUsageError(const absl::Status& s) {
  return s.code() == absl::StatusCode::kNotFound ||
         s.code() == absl::StatusCode::kInvalidArgument ||
         s.code() == absl::StatusCode::kPermissionDenied;
}

std::string Dump(const nlohmann::json& j) {
  // Values were made valid UTF-8 already; replace is a second guard so a
  // stray byte can never turn into an exception here.
  return j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace);
}

int RunStats(const StatsFlags& f) {
  if (f.inputs.empty()) return StatsFail(kExitUsage, "no input files");
  if (f.top_k < 1) return StatsFail(kExitUsage, "--top-k must be at least 1");
  if (f.presence_margin < 0 || f.range_slack < 0) {
    return StatsFail(kExitUsage, "--presence-margin and --range-slack must be >= 0");
  }
  datatools::StatsOptions options;
  options.top_k = f.top_k;
  options.skip_corrupt = f.skip_corrupt;
  options.max_examples = f.max_examples;
  if (f.compression != "auto") {
    auto c = storage::ParseCompression(f.compression);
    if (!c.ok()) return StatsFail(kExitUsage, absl::StrCat("--compression: ", c.status().message()));
    options.compression = *c;
  }
  // Load the schema before reading any data: a typo in its path should not
  // cost a pass over a large dataset.
  std::optional<datatools::DataSchema> schema;
  if (!f.check.empty()) {
    auto s = datatools::DataSchema::FromYamlFile(f.check);
    if (!s.ok()) return StatsFail(kExitUsage, std::string(s.status().message()));
    schema = *std::move(s);
  }
  auto files = ExpandInputs(f.inputs);
  if (!files.ok()) return StatsFail(kExitUsage, std::string(files.status().message()));
  auto stats = datatools::ComputeStats(*files, options);
  if (!stats.ok()) {
    return StatsFail(IsUsageError(stats.status()) ? kExitUsage : kExitFailed, std::string(stats.status().message()));
  }

  if (!f.schema_out.empty()) {
    std::ofstream out(f.schema_out, std::ios::trunc);
    out << datatools::InferSchema(*stats).ToYaml();
    out.close();
    if (!out) return StatsFail(kExitFailed, absl::StrCat(f.schema_out, ": cannot write the schema"));
  }

  if (!schema) {
    if (f.json) {
      std::cout << Dump(datatools::StatsToJson(*stats)) << "\n";
    } else {
      std::cout << datatools::FormatStatsTable(*stats);
      if (!f.schema_out.empty()) std::cout << "schema written to " << f.schema_out << "\n";
    }
    return kExitOk;
  }

  datatools::CheckOptions check;
  check.presence_margin = f.presence_margin;
  check.range_slack = f.range_slack;
  check.new_features_are_errors = f.fail_on_new_features;
  const std::vector<datatools::Anomaly> anomalies = datatools::CheckStats(*stats, *schema, check);
  const bool failed = datatools::HasErrors(anomalies);
  if (f.json) {
    nlohmann::json j;
    j["ok"] = !failed;
    j["schema"] = f.check;
    j["anomalies"] = datatools::AnomaliesToJson(anomalies);
    j["stats"] = datatools::StatsToJson(*stats);
    std::cout << Dump(j) << "\n";
  } else {
    const auto errors = std::count_if(anomalies.begin(), anomalies.end(),
                                      [](const datatools::Anomaly& a) { return !a.warning; });
    std::cout << "checked " << stats->examples << " examples in " << files->size()
              << " file(s) against " << f.check << ": " << errors << " anomal"
              << (errors == 1 ? "y" : "ies") << ", " << anomalies.size() - errors
              << " warning(s)\n";
    for (const datatools::Anomaly& a : anomalies) {
      std::cout << "  " << (a.warning ? "warning " : "ANOMALY ") << datatools::AnomalyKindName(a.kind)
                << " " << (a.feature.empty() ? "" : datatools::PrintableValue(a.feature, 64) + ": ")
                << a.message << "\n";
    }
  }
  return failed ? kExitFailed : kExitOk;
}

}  // namespace

void RegisterDataStats(CLI::App& data, int* exit_code) {
  auto f = std::make_shared<StatsFlags>();
  CLI::App* cmd = data.add_subcommand(
      "stats", "Per-feature statistics of TFRecord data; infer a schema or check data against one");
  cmd->add_option("inputs", f->inputs, "TFRecord files, or directories of *.tfrecord* files");
  cmd->add_option("--compression", f->compression,
                  "auto (from the file suffix), NONE, GZIP or ZLIB")
      ->envname("BROOK_DATA_COMPRESSION");
  cmd->add_option("--schema-out", f->schema_out, "Write the inferred data schema (YAML) here")
      ->envname("BROOK_STATS_SCHEMA_OUT");
  cmd->add_option("--check", f->check,
                  "Validate the data against this schema; exit 1 listing each anomaly")
      ->envname("BROOK_STATS_CHECK");
  cmd->add_flag("--json", f->json, "Print JSON instead of a table")->envname("BROOK_STATS_JSON");
  cmd->add_option("--top-k", f->top_k, "Most frequent values kept per feature")
      ->envname("BROOK_STATS_TOP_K");
  cmd->add_option("--presence-margin", f->presence_margin,
                  "--check: how far (absolute fraction) presence may fall below the schema's")
      ->envname("BROOK_STATS_PRESENCE_MARGIN");
  cmd->add_option("--range-slack", f->range_slack,
                  "--check: values may exceed [min, max] by this fraction of max - min")
      ->envname("BROOK_STATS_RANGE_SLACK");
  cmd->add_flag("--fail-on-new-features", f->fail_on_new_features,
                "--check: a feature missing from the schema is an anomaly, not a warning")
      ->envname("BROOK_STATS_FAIL_ON_NEW_FEATURES");
  cmd->add_flag("--skip-corrupt", f->skip_corrupt,
                "Skip corrupt regions of a file instead of stopping")
      ->envname("BROOK_STATS_SKIP_CORRUPT");
  cmd->add_option("--max-examples", f->max_examples, "Stop after this many examples (0: all)")
      ->envname("BROOK_STATS_MAX_EXAMPLES");
  cmd->callback([f, exit_code] { *exit_code = RunStats(*f); });
}

}  // namespace brook::cli
