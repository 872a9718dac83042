// `brook data stats FILE|DIR...`: per-feature statistics of TFRecord files of
// tf.train.Example, an inferred data schema (--schema-out), and validation of
// new data against a saved schema (--check), which exits 1 on any anomaly:
//   brook data stats data/adult/train-*.tfrecord --schema-out adult.schema.yaml
//   brook data stats data/adult_test/ --check adult.schema.yaml
// and `brook data spec FILE|DIR... --out F`: the feature spec the trainer
// reads, inferred from the same statistics (also `data stats
// --feature-spec-out F`), with the label guessed unless --label names it.
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
#include "cli/commands.h"
#include "cli/progress.h"
#include "datatools/data_schema.h"
#include "datatools/data_stats.h"
#include "datatools/spec_inference.h"
#include "features/feature_spec.h"

namespace brook::cli {
namespace {

struct StatsFlags {
  std::vector<std::string> inputs;
  std::string compression = "auto";
  std::string schema_out;
  std::string feature_spec_out;
  std::string label;
  std::string check;
  bool json = false;
  int top_k = 10;
  double presence_margin = 0.02;
  double range_slack = 0.0;
  bool fail_on_new_features = false;
  bool skip_corrupt = false;
  int64_t max_examples = 0;
};

int StatsFail(int code, const std::string& message, std::string_view command = "stats") {
  std::cerr << "brook data " << command << ": " << message << "\n";
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

// Reads the statistics of `files` with a progress line on stderr.
absl::StatusOr<datatools::DatasetStats> StatsWithProgress(const std::vector<std::string>& files,
                                                          datatools::StatsOptions options,
                                                          std::string_view command) {
  ProgressOptions po;
  po.label = "brook data " + std::string(command);
  po.unit = "examples";
  po.total = options.max_examples;
  bool all_plain = true;
  for (const std::string& path : files) {
    const auto c = options.compression.value_or(storage::CompressionFromPath(path));
    std::error_code ec;
    const auto size = std::filesystem::file_size(path, ec);
    all_plain = all_plain && c == storage::Compression::kNone;
    po.bytes_total += ec ? 0 : static_cast<int64_t>(size);
  }
  if (!all_plain) po.bytes_total = 0;  // compressed offsets do not measure the files
  ProgressPrinter progress(po);
  options.progress_examples = progress.items();
  options.progress_bytes = progress.bytes();
  progress.Start();
  auto stats = datatools::ComputeStats(files, options);
  progress.Finish();
  return stats;
}

// Infers the feature spec, writes it to `path` and says on stderr what it
// guessed. An exit code.
int WriteFeatureSpec(const datatools::DatasetStats& stats, const std::string& label,
                     const std::string& path, std::string_view command) {
  datatools::SpecInferenceOptions options;
  options.label = label;
  auto inferred = datatools::InferFeatureSpec(stats, options);
  if (!inferred.ok())
    return StatsFail(kExitFailed, std::string(inferred.status().message()), command);
  const std::string yaml = datatools::InferredSpecYaml(*inferred, stats);
  // What we write must be what the trainer reads.
  auto reread = input::FeatureSpec::FromYaml(yaml);
  if (!reread.ok()) {
    return StatsFail(kExitFailed,
                     absl::StrCat("internal error: the inferred spec does not parse: ",
                                  reread.status().message()),
                     command);
  }
  std::ofstream out(path, std::ios::trunc);
  out << yaml;
  out.close();
  if (!out)
    return StatsFail(kExitFailed, absl::StrCat(path, ": cannot write the feature spec"), command);
  const input::FeatureSpec& spec = inferred->spec;
  int fixed = 0;
  for (const auto& f : spec.features) fixed += f.kind == input::FeatureKind::kFixed ? 1 : 0;
  std::cerr << "brook data " << command << ": wrote " << path << ": label \"" << spec.label_name
            << "\", " << spec.features.size() << " features (" << fixed << " fixed-length numbers, "
            << spec.features.size() - fixed << " id lists) from " << stats.examples
            << " examples\n";
  if (inferred->label_guessed) {
    std::cerr << "brook data " << command << ": the label \"" << spec.label_name
              << "\" is a GUESS (" << inferred->label_reason << "); confirm it in " << path
              << " or rerun with --label NAME\n";
  }
  for (const std::string& n : inferred->notes) {
    std::cerr << "brook data " << command << ": note: " << n << "\n";
  }
  return kExitOk;
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
    if (!c.ok())
      return StatsFail(kExitUsage, absl::StrCat("--compression: ", c.status().message()));
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
  auto stats = StatsWithProgress(*files, options, "stats");
  if (!stats.ok()) {
    return StatsFail(IsUsageError(stats.status()) ? kExitUsage : kExitFailed,
                     std::string(stats.status().message()));
  }
  if (!f.feature_spec_out.empty()) {
    const int rc = WriteFeatureSpec(*stats, f.label, f.feature_spec_out, "stats");
    if (rc != kExitOk) return rc;
  }

  if (!f.schema_out.empty()) {
    std::ofstream out(f.schema_out, std::ios::trunc);
    out << datatools::InferSchema(*stats).ToYaml();
    out.close();
    if (!out)
      return StatsFail(kExitFailed, absl::StrCat(f.schema_out, ": cannot write the schema"));
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
      std::cout << "  " << (a.warning ? "warning " : "ANOMALY ")
                << datatools::AnomalyKindName(a.kind) << " "
                << (a.feature.empty() ? "" : datatools::PrintableValue(a.feature, 64) + ": ")
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
  cmd->add_option("--feature-spec-out", f->feature_spec_out,
                  "Also write a feature spec inferred from the data here (as `brook data spec`)")
      ->envname("BROOK_STATS_FEATURE_SPEC_OUT");
  cmd->add_option("--label", f->label,
                  "--feature-spec-out: the label feature (default: guessed, and said so)");
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

namespace {

struct SpecFlags {
  std::vector<std::string> inputs;
  std::string out;
  std::string label;
  std::string compression = "auto";
  int64_t max_examples = 0;
};

int RunSpec(const SpecFlags& f) {
  if (f.inputs.empty()) return StatsFail(kExitUsage, "no input files", "spec");
  datatools::StatsOptions options;
  options.top_k = 1;
  options.max_examples = f.max_examples;
  if (f.compression != "auto") {
    auto c = storage::ParseCompression(f.compression);
    if (!c.ok()) {
      return StatsFail(kExitUsage, absl::StrCat("--compression: ", c.status().message()), "spec");
    }
    options.compression = *c;
  }
  auto files = ExpandInputs(f.inputs);
  if (!files.ok()) return StatsFail(kExitUsage, std::string(files.status().message()), "spec");
  auto stats = StatsWithProgress(*files, options, "spec");
  if (!stats.ok()) {
    return StatsFail(IsUsageError(stats.status()) ? kExitUsage : kExitFailed,
                     std::string(stats.status().message()), "spec");
  }
  return WriteFeatureSpec(*stats, f.label, f.out, "spec");
}

}  // namespace

void RegisterDataSpec(CLI::App& data, int* exit_code) {
  auto f = std::make_shared<SpecFlags>();
  CLI::App* cmd = data.add_subcommand(
      "spec",
      "Infer the feature spec (for `brook trainer --spec` and a job's `features:`) from TFRecord "
      "data: types, fixed or varlen, and a guess of the label to confirm");
  cmd->footer(
      "int64 and bytes features become varlen id lists, floats fixed-length numbers. The label "
      "is the --label feature, else a one-value number named like a label (label, click, "
      "target, y, ...), else a one-value feature holding only 0 and 1; a guess is marked in the "
      "file and printed on stderr. Exit 1 when the data is not TFRecord (the error names the "
      "file and byte offset) or no label can be guessed.");
  cmd->add_option("inputs", f->inputs, "TFRecord files, or directories of *.tfrecord* files")
      ->required();
  cmd->add_option("--out", f->out, "Write the feature spec (YAML) here")->required();
  cmd->add_option("--label", f->label, "The label feature (default: guessed, and said so)");
  cmd->add_option("--compression", f->compression,
                  "auto (from the file suffix), NONE, GZIP or ZLIB")
      ->envname("BROOK_DATA_COMPRESSION");
  cmd->add_option("--max-examples", f->max_examples, "Read at most this many examples (0: all)");
  cmd->callback([f, exit_code] { *exit_code = RunSpec(*f); });
}

}  // namespace brook::cli
