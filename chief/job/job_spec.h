// A job spec: everything the chief needs to run one training job, read from
// YAML and validated in full before anything runs. The fields, their
// defaults and what each allows are documented in the README ("Job spec");
// in short:
//
//   name: adult-wide-deep            # required; a DNS label
//   priority: 0
//   data: {train: [GLOB, ...], eval: [GLOB, ...], compression: auto, records_per_unit: 0,
//          on_corrupt: fail}
//   features: feature_spec.yaml      # a path, or the feature spec inline (a map)
//   model: {type: wide_deep, ...}    # + sparse: / dense: (trainer/model/model_spec.h),
//   sparse: [...]                    #   or model_file: PATH instead of the three
//   dense: [...]
//   optimizer: {embedding: OPT, dense: OPT, tables: {TABLE: OPT}, schedule: {...}}
//   embedding_init: {type: uniform, low: -0.05, high: 0.05}
//   tables: {default: {memory_budget: 2GiB, wire: bf16, ...}, C1: {admission_min_count: 2, ...}}
//   training: {batch_size: 256, epochs: 1 | steps: N, staleness: 2, ...}
//   trainers: 1
//   checkpoint: {dir: PATH, interval_seconds: 600, interval_steps: 0, keep: 3}
//   export: {dir: PATH}
//   eval: {every_steps: 0}
//   cache: {rows: 1000000, refresh_steps: 2}
//   init_from: {path: EXPORT_OR_CHECKPOINT_DIR, tables: [T, ...]}   # or init_from: DIR
//
// Errors are InvalidArgument naming the field path (e.g.
// "optimizer.embedding.learning_rate"), its YAML line and what is allowed;
// unknown and repeated keys are errors. The embedded feature and model specs
// are checked by their own parsers (input::FeatureSpec, trainer::ModelSpec).
// Relative paths (data globs, features, model_file, checkpoint.dir,
// export.dir) resolve against the spec file's directory.
//
// A JobSpec is a plain value: immutable after parsing, safe to share.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "features/feature_spec.h"
#include "ps/options.h"
#include "storage/tfrecord.h"
#include "trainer/input/data_check.h"
#include "trainer/lr_schedule.h"
#include "trainer/model/model_spec.h"
#include "trainer/trainer.h"

namespace brook::chief {

struct JobDataSpec {
  std::vector<std::string> train;  // globs, resolved; at least one
  std::vector<std::string> eval;   // globs, resolved; may be empty
  // nullopt ("auto"): from each file name (".gz" GZIP, ".zlib" ZLIB).
  std::optional<storage::Compression> compression;
  // Records per work unit the chief leases; 0 = one unit per whole file.
  int64_t records_per_unit = 0;
  // `on_corrupt: skip`: corrupt TFRecord framing and records that do not
  // parse as tf.train.Example (or break the feature spec's policy) are
  // skipped and counted (the job's status, events and metrics) instead of
  // failing the job.
  bool skip_corrupt = false;
};

// Appended to a data error that on_corrupt: skip would have skipped.
inline constexpr char kOnCorruptHint[] =
    "to skip and count corrupt or unparsable records instead, set data.on_corrupt: skip in the "
    "job spec (brook trainer: --on-corrupt skip)";

// Why a chief refuses training.steps (and `brook submit --dry-run` with it):
// several asynchronous trainers have no work-unit end a step count maps to.
// `brook trainer --job` runs such specs standalone.
inline constexpr char kChiefRefusesSteps[] =
    "training.steps: a chief runs jobs bounded by training.epochs (with several asynchronous "
    "trainers no work-unit end maps to a step count); give epochs instead, or run the spec "
    "standalone with `brook trainer --job`";

struct JobTrainingSpec {
  int batch_size = 256;
  // Exactly one of epochs (passes over data.train) and steps (optimizer
  // steps) is set in the YAML; the other is 0 here.
  int epochs = 0;
  int64_t steps = 0;
  int staleness = 2;
  int accumulation_steps = 1;
  int dense_refresh_steps = 1;
  uint64_t seed = 1;
  int64_t shuffle_buffer = 10000;  // records; 0 = no shuffling
  // How long a trainer retries a PS that is unreachable, timing out, or
  // out of disk space (it refuses pushes until space returns) before the
  // job fails naming that PS. Minutes: a PS pod's restart or a disk being
  // cleaned up is waited out; a PS gone for good still ends the job.
  static constexpr int64_t kDefaultRetrySeconds = 300;
  int64_t retry_seconds = kDefaultRetrySeconds;
};

struct JobCheckpointSpec {
  std::string dir;                 // "" = the job is not checkpointed (the section is absent)
  int64_t interval_seconds = 600;  // 0 = not on a timer
  int64_t interval_steps = 0;      // 0 = not by steps
  int keep = 3;                    // newest checkpoints kept
};

// `init_from`: a warm start from a finished job's export or checkpoint.
struct JobInitFromSpec {
  std::string path;  // resolved; "" = start from the initializers (the field is absent)
  // Model table / dense variable names to take; empty = every one of the
  // model's that the source holds.
  std::vector<std::string> tables;
  // YAML lines of `path` and of each of `tables` (0 when unknown, e.g. a
  // spec read back from its canonical JSON), for the submit-time checks of
  // the source (chief/export/init_from.h). Not part of the spec's JSON.
  int path_line = 0;
  std::vector<int> table_lines;
};

struct JobSpec {
  std::string name;
  int priority = 0;  // higher runs first
  JobDataSpec data;
  input::FeatureSpec features;
  std::string features_file;  // resolved path, or "" when inline
  trainer::ModelSpec model;
  std::string model_file;  // resolved path, or "" when inline
  ps::OptimizerOptions embedding_optimizer = trainer::TrainerOptions{}.embedding_optimizer;
  ps::OptimizerOptions dense_optimizer = trainer::TrainerOptions{}.dense_optimizer;
  // Per-table overrides of embedding_optimizer, by table name (the model's
  // tables, including "<T>_wide" and "<feature>_bucket").
  std::map<std::string, ps::OptimizerOptions> table_optimizers;
  trainer::LrSchedule lr_schedule;
  ps::InitializerOptions embedding_init = trainer::TrainerOptions{}.embedding_init;
  // `tables`: PS options of the model's embedding tables, for every table
  // (`default`) and by table name (wins). Unset fields keep the PS defaults.
  trainer::TableSettings table_defaults;
  std::map<std::string, trainer::TableSettings> table_settings;
  JobTrainingSpec training;
  int trainers = 1;
  JobCheckpointSpec checkpoint;
  std::string export_dir;        // "" = no export (the section is absent)
  int64_t eval_every_steps = 0;  // 0 = evaluate only at the end
  // `cache`: trainers serve rows pulled within refresh_steps steps from a
  // cache of `rows` rows per table (trainer/row_cache.h); absent: off.
  trainer::RowCacheOptions cache;
  JobInitFromSpec init_from;
  // Seconds a finished job's tables stay on the PS nodes before the chief
  // drops them: after a cancel or failure, or a success with neither export
  // nor checkpoint. A success with either drops them once written.
  static constexpr int64_t kDefaultRetentionSeconds = 600;
  int64_t retention_seconds = kDefaultRetentionSeconds;

  // Parses and validates `yaml`; relative paths resolve against `base_dir`
  // ("" leaves them relative). NotFound if a referenced file (features,
  // model_file) cannot be opened; InvalidArgument for everything else.
  static absl::StatusOr<JobSpec> FromYaml(const std::string& yaml, const std::string& base_dir);
  // The same, with base_dir = the file's (absolute) directory; errors are
  // prefixed with `path`.
  static absl::StatusOr<JobSpec> FromYamlFile(const std::string& path);

  // What a trainer of this job runs with (per-table optimizers included).
  trainer::TrainerOptions ToTrainerOptions() const;
  // table_optimizers[table] if given, else embedding_optimizer.
  const ps::OptimizerOptions& OptimizerForTable(const std::string& table) const;

  // The spec normalized: every field with its default filled in, paths
  // resolved, keys sorted, one line. Equal specs give equal text whatever
  // their YAML's key order, comments or layout.
  std::string CanonicalJson() const;
  // 16 hex digits: brook::Hash64 (XXH64) of CanonicalJson(). Recorded in
  // checkpoint and export manifests.
  std::string SpecHash() const;

  struct GlobMatches {
    std::string field;    // "data.train[0]"
    std::string pattern;  // resolved glob
    std::vector<std::string> files;
  };
  // Expands every data glob now (the spec itself only checks their shape).
  // InvalidArgument naming the field and pattern if one matches no file.
  absl::StatusOr<std::vector<GlobMatches>> CheckData() const;
  // Opens every matched file as TFRecord and parses the first records of
  // the first file of each glob under the feature spec (input::CheckData):
  // InvalidArgument for data that does not fit; warnings for what will be
  // filled with defaults or skipped.
  absl::StatusOr<input::DataCheckResult> CheckDataContents(
      const std::vector<GlobMatches>& matches) const;
};

}  // namespace brook::chief
