// `brook data gen --out DIR`: writes Criteo-shaped synthetic CTR data drawn
// from a known model (datatools/synthetic.h), with ground_truth.json (the
// Bayes-optimal AUC and logloss) and feature_spec.yaml beside the shards.
// Every flag can also come from BROOK_DATA_GEN_<FLAG> (e.g.
// BROOK_DATA_GEN_TRAIN=1e7), so a Kubernetes Job sets them as env vars.
// Progress goes to stderr (cli/progress.h).
#include <cmath>
#include <cstdint>
#include <iostream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "common/usable_cpus.h"
#include "datatools/synthetic.h"
#include "storage/tfrecord.h"

namespace brook::cli {
namespace {

struct GenFlags {
  std::string out;
  std::string train = "1000000";
  std::string test = "100000";
  int shards = 1;
  int test_shards = 0;
  uint64_t seed = 1;
  std::string cardinality_max = "1000000";
  std::string cardinalities;
  double zipf = 1.1;
  int rank = 4;
  int num_dense = 13;
  int num_categorical = 26;
  double base_ctr = 0.25;
  double logit_std = 1.4;
  std::string compression = "NONE";
  int compression_level = 6;
  int threads = 0;
};

// A non-negative integer, also written as "1e6" or "2.5e7": example counts
// and cardinalities are easier to read that way.
absl::StatusOr<uint64_t> ParseCount(const std::string& flag, const std::string& text) {
  uint64_t v = 0;
  if (absl::SimpleAtoi(text, &v)) return v;
  double d = 0;
  if (absl::SimpleAtod(text, &d) && d >= 0 && d < 1.8e19 && std::floor(d) == d) {
    return static_cast<uint64_t>(d);
  }
  return absl::InvalidArgumentError(absl::StrCat(
      flag, ": expected a non-negative integer (e.g. 1000000 or 1e6), got '", text, "'"));
}

absl::StatusOr<datatools::SyntheticOptions> ToOptions(const GenFlags& f) {
  datatools::SyntheticOptions o;
  o.output_dir = f.out;
  auto train = ParseCount("--train", f.train);
  if (!train.ok()) return train.status();
  auto test = ParseCount("--test", f.test);
  if (!test.ok()) return test.status();
  auto cap = ParseCount("--cardinality-max", f.cardinality_max);
  if (!cap.ok()) return cap.status();
  // Out-of-range values fail Validate() below with the field named.
  o.train_examples = static_cast<int64_t>(std::min<uint64_t>(*train, INT64_MAX));
  o.test_examples = static_cast<int64_t>(std::min<uint64_t>(*test, INT64_MAX));
  o.max_cardinality = *cap;
  if (!f.cardinalities.empty()) {
    for (absl::string_view part : absl::StrSplit(f.cardinalities, ',')) {
      auto c = ParseCount("--cardinalities", std::string(part));
      if (!c.ok()) return c.status();
      o.cardinalities.push_back(*c);
    }
  }
  o.shards = f.shards;
  o.test_shards = f.test_shards;
  o.seed = f.seed;
  o.zipf_exponent = f.zipf;
  o.interaction_rank = f.rank;
  o.num_dense = f.num_dense;
  o.num_categorical = f.num_categorical;
  o.base_ctr = f.base_ctr;
  o.logit_std = f.logit_std;
  auto c = storage::ParseCompression(f.compression);
  if (!c.ok()) return c.status();
  o.compression = *c;
  o.compression_level = f.compression_level;
  o.threads = f.threads > 0 ? f.threads : UsableCpus();
  if (auto s = o.Validate(); !s.ok()) return s;
  return o;
}

void PrintSplit(const char* name, const datatools::SplitSummary& s, const char* auc_note) {
  std::cout << absl::StrFormat(
      "  %-5s %d examples in %d files, base rate %.4f, Bayes AUC %.6f%s, Bayes logloss %.6f\n",
      name, s.examples, s.files.size(), s.base_rate, s.bayes_auc, auc_note, s.bayes_logloss);
}

int RunGen(const GenFlags& flags) {
  auto options = ToOptions(flags);
  if (!options.ok()) {
    std::cerr << "brook data gen: " << options.status().message() << "\n";
    return kExitUsage;
  }
  ProgressOptions po;
  po.label = "brook data gen";
  po.unit = "examples";
  po.total = options->train_examples + options->test_examples;
  ProgressPrinter progress(po);
  options->progress = progress.items();
  progress.Start();
  auto result = datatools::GenerateSynthetic(*options);
  progress.Finish();
  if (!result.ok()) {
    std::cerr << "brook data gen: " << result.status().message() << "\n";
    return result.status().code() == absl::StatusCode::kInvalidArgument ? kExitUsage : kExitFailed;
  }
  const datatools::SyntheticResult& r = *result;
  std::cout << absl::StrFormat(
      "brook data gen: %d train + %d test examples (%d dense, %d "
      "categorical, seed %d) in %s\n",
      r.train.examples, r.test.examples, options->num_dense, options->num_categorical,
      options->seed, options->output_dir);
  PrintSplit("train", r.train, " (histogram)");
  PrintSplit("test", r.test, "");
  const int threads =
      std::min<int>(options->threads, static_cast<int>(r.train.files.size() + r.test.files.size()));
  std::cout << absl::StrFormat(
      "  rate  %.0f examples/s (%.2f s wall, %d thread%s); %.0f examples per CPU-second\n",
      r.examples_per_second, r.seconds, threads, threads == 1 ? "" : "s",
      r.cpu_seconds > 0 ? static_cast<double>(r.train.examples + r.test.examples) / r.cpu_seconds
                        : 0.0);
  std::cout << "  ground truth " << r.ground_truth_path << "\n"
            << "  feature spec " << r.feature_spec_path << "\n";
  return kExitOk;
}

}  // namespace

void RegisterDataGen(CLI::App& data, int* exit_code) {
  auto f = std::make_shared<GenFlags>();
  CLI::App* cmd = data.add_subcommand(
      "gen", "Generate Criteo-shaped synthetic CTR data from a known ground-truth model");
  cmd->add_option("--out", f->out, "Output directory (created if missing)")
      ->required()
      ->envname("BROOK_DATA_GEN_OUT");
  cmd->add_option("--train", f->train, "Train examples (e.g. 1000000 or 1e6)")
      ->envname("BROOK_DATA_GEN_TRAIN");
  cmd->add_option("--test", f->test, "Test examples")->envname("BROOK_DATA_GEN_TEST");
  cmd->add_option("--shards", f->shards, "Train files")->envname("BROOK_DATA_GEN_SHARDS");
  cmd->add_option("--test-shards", f->test_shards, "Test files (0: same as --shards)")
      ->envname("BROOK_DATA_GEN_TEST_SHARDS");
  cmd->add_option("--seed", f->seed, "Seed of the model and the examples")
      ->envname("BROOK_DATA_GEN_SEED");
  cmd->add_option("--cardinality-max", f->cardinality_max,
                  "Largest feature cardinality; Criteo's spread is scaled to it (up to 1e12)")
      ->envname("BROOK_DATA_GEN_CARDINALITY_MAX");
  cmd->add_option("--cardinalities", f->cardinalities,
                  "Comma-separated cardinality per categorical feature (overrides "
                  "--cardinality-max)")
      ->envname("BROOK_DATA_GEN_CARDINALITIES");
  cmd->add_option("--zipf", f->zipf, "Zipf exponent of the id frequencies (> 0)")
      ->envname("BROOK_DATA_GEN_ZIPF");
  cmd->add_option("--rank", f->rank, "Rank of the pairwise interactions (0-64)")
      ->envname("BROOK_DATA_GEN_RANK");
  cmd->add_option("--num-dense", f->num_dense, "Dense features I1..In")
      ->envname("BROOK_DATA_GEN_NUM_DENSE");
  cmd->add_option("--num-categorical", f->num_categorical, "Categorical features C1..Cn")
      ->envname("BROOK_DATA_GEN_NUM_CATEGORICAL");
  cmd->add_option("--base-ctr", f->base_ctr, "Target mean CTR")->envname("BROOK_DATA_GEN_BASE_CTR");
  cmd->add_option("--logit-std", f->logit_std,
                  "Spread of the true logit; larger is easier (1.4: Bayes AUC ~0.8)")
      ->envname("BROOK_DATA_GEN_LOGIT_STD");
  cmd->add_option("--compression", f->compression, "NONE, GZIP or ZLIB")
      ->envname("BROOK_DATA_GEN_COMPRESSION");
  cmd->add_option("--compression-level", f->compression_level,
                  "zlib level 0-9 for GZIP/ZLIB (1 is ~3x faster than the default 6)")
      ->envname("BROOK_DATA_GEN_COMPRESSION_LEVEL");
  cmd->add_option("--threads", f->threads, "Shards written in parallel (0: one per core)")
      ->envname("BROOK_DATA_GEN_THREADS");
  cmd->callback([f, exit_code] { *exit_code = RunGen(*f); });
}

}  // namespace brook::cli
