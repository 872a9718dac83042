// Model export: what a finished job leaves behind, and scoring it.
//
// An export is a directory:
//
//   <dir>/tables/shard-<i>-of-<n>/   a PS checkpoint of the shards the job
//                                    trained on (ps::PsClient::Checkpoint with
//                                    the job's table prefix): the job's
//                                    embedding tables AND dense variables, and
//                                    no other job's
//   <dir>/manifest.json              written last, atomically
//
// Self-contained and relocatable: no path inside names the export's own
// location (the parts' paths are relative to <dir>, and each part's MANIFEST
// finds its files beside it), so a copied or moved export (cp -a, mv, tar)
// reads itself, whatever became of the original. manifest.json pins each
// part's MANIFEST by size and CRC32C, and each MANIFEST pins its files: a
// restore reads nothing that does not match (DATA_LOSS naming the file).
// Data file paths stay absolute: they name the data the model was trained
// and evaluated on, outside the export.
//
// A directory without manifest.json is NOT an export (a writer died before
// finishing, or is still writing): ReadExport refuses it, and WriteExport
// redoes it. manifest.json ("brook-export/1") records the job id and table
// prefix, the job spec (canonical JSON, embedded as an object) and its hash,
// every train and eval data file with its size and XXH64, the code version,
// the step, the end-of-job eval metrics, the checkpoint (shards, rows, bytes)
// and the model's tables and dense variables (names, PS names, dims), so a
// reader knows what is inside without opening the checkpoint.
//
//   ASSIGN_OR_RETURN(ExportManifest m, WriteExport(ps, spec, request));
//   ASSIGN_OR_RETURN(trainer::EvalResult r, ScoreExport(dir,
//   {"test.tfrecord"}));
//
// The spec given to WriteExport must be the one trained, standardize moments
// included (MomentsAccumulator::Apply): scoring uses exactly it.
//
// Functions here are thread-compatible: concurrent calls on different
// directories are safe.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "chief/job/job_spec.h"
#include "ps/client/ps_client.h"
#include "tensorflow/feature.pb.h"
#include "trainer/trainer.h"

namespace brook::chief {

inline constexpr char kExportFormat[] = "brook-export/1";
inline constexpr char kExportManifestName[] = "manifest.json";
inline constexpr char kExportTablesDir[] = "tables";

struct ExportRequest {
  std::string dir;                          // created if absent; must not hold a complete export
  std::string job_id;                       // required
  std::string table_prefix;                 // TablePrefix(job_id) on shared PS nodes; may be ""
  int64_t step = 0;                         // the optimizer steps the exported weights saw
  std::optional<trainer::EvalResult> eval;  // the end-of-job evaluation, if any
  std::vector<std::string> train_files;     // data the model was trained on
  std::vector<std::string> eval_files;      // data `eval` was measured on
};

// One data file as recorded: its path (absolute), size and content hash.
struct ExportedFile {
  std::string path;
  uint64_t bytes = 0;
  std::string xxh64;  // 16 hex digits of brook::Hash64 of the whole file
};

// A checkpoint part's MANIFEST as the PS wrote it.
struct ExportedPartManifest {
  std::string path;  // relative to the export dir, "tables/shard-.../MANIFEST"
  uint64_t bytes = 0;
  uint32_t crc32c = 0;  // of the whole file
};

struct ExportedTable {
  std::string name;     // the model's name, e.g. "education"
  std::string ps_name;  // table_prefix + name, as in the checkpoint
  int dim = 0;
};

struct ExportedDense {
  std::string name;  // e.g. "deep/w0"
  std::string ps_name;
  std::vector<int64_t> shape;
};

struct ExportManifest {
  std::string format = kExportFormat;
  std::string job_id;
  std::string table_prefix;
  std::string spec_json;  // JobSpec::CanonicalJson() of the trained spec
  std::string spec_hash;  // JobSpec::SpecHash()
  int64_t step = 0;
  int64_t created_unix_micros = 0;
  std::string version;  // brook::Version()
  std::string commit;   // brook::GitCommit()
  std::optional<trainer::EvalResult> eval;
  std::vector<ExportedFile> train_files, eval_files;
  std::vector<ExportedTable> tables;
  std::vector<ExportedDense> dense;
  // The checkpoint under tables/: its parts (relative to the export dir, by
  // shard) and totals over them.
  std::vector<std::string> checkpoint_parts;
  int32_t checkpoint_shards = 0;
  uint64_t checkpoint_rows = 0;
  uint64_t checkpoint_bytes = 0;
  // One per part ("checkpoint.manifests"); empty in exports written before
  // it existed (their parts are then read unpinned).
  std::vector<ExportedPartManifest> checkpoint_manifests;

  // The manifest as written (one JSON object, pretty-printed).
  std::string ToJson() const;
  // Parses and checks every field; InvalidArgument naming `path` and the
  // field ("eval.auc", "data.train[2].bytes") for a missing or mistyped one,
  // or for another format.
  static absl::StatusOr<ExportManifest> FromJson(const std::string& json, const std::string& path);
};

struct LoadedExport {
  std::string dir;
  ExportManifest manifest;
  JobSpec spec;  // reparsed from manifest.spec_json; spec.SpecHash() ==
                 // manifest.spec_hash
};

// Writes the export of the job whose tables are on `ps` (the whole PS, NOT a
// PrefixedPsClient: the checkpoint is of whole shards; every PS shard writes
// its part into <dir>/tables on its own filesystem, which must be the one
// `dir` is on for the export to be complete there). Hashes the data files
// first (NOT_FOUND naming a missing one), checks the model's tables and dense
// variables are on the PS under req.table_prefix (FAILED_PRECONDITION
// naming the first that is not), checkpoints, then writes manifest.json.
// ALREADY_EXISTS if `dir` already holds a manifest.json; a directory
// without one (an earlier attempt that died) is written over.
absl::StatusOr<ExportManifest> WriteExport(ps::PsClient* ps, const JobSpec& spec,
                                           const ExportRequest& req);

// Reads and validates <dir>/manifest.json and reparses its spec. NOT_FOUND
// for a missing dir, or a dir without manifest.json ("not a Brook export");
// InvalidArgument naming the file and field for a bad manifest; DATA_LOSS if
// the embedded spec does not match the recorded spec hash, or naming a part
// MANIFEST that is missing or does not match its recorded size and CRC32C
// (the parts' own files are checked when they are restored).
absl::StatusOr<LoadedExport> ReadExport(const std::string& dir);

// A JobSpec from its CanonicalJson() (JSON is YAML: JobSpec::FromYaml with
// no base dir; paths in it are already resolved); the caller compares
// SpecHash() to the recorded hash.
absl::StatusOr<JobSpec> SpecFromCanonicalJson(const std::string& json);

// Re-hashes the recorded data files: NOT_FOUND naming a missing one,
// FAILED_PRECONDITION naming one whose size or hash changed.
absl::Status VerifyDataFiles(const ExportManifest& manifest);

struct ScoreOptions {
  int batch_size = 1024;
  // CPU backend threads (0 = every core). Scores are bit-identical for equal
  // num_threads on one machine.
  int num_threads = 0;
  int parse_threads = 0;  // 0 autotunes
  // Per-example scores (`brook predict --output`): called for every example
  // scored, in stream order (then the files are read one at a time, each in
  // record order), with its label, its score and, when id_feature is set,
  // that feature of its record (IdReader: an error names the record). Its
  // error ends scoring.
  std::function<absl::Status(float label, float score, const tf::Feature* id)> on_example;
  std::string id_feature;
};

// Evaluates the model of `spec` with the weights on `ps` (a PrefixedPsClient
// for a job on shared PS nodes, the live PS or a restored export) over
// `files` in order (no shuffling; compression from spec.data.compression).
// Declares the model's tables and dense variables first (Trainer::Setup:
// idempotent where they exist with the options the trainers used). Errors:
// INVALID_ARGUMENT for no files or no examples, FAILED_PRECONDITION for a
// standardize input without moments, the pipeline's and PS's errors.
absl::StatusOr<trainer::EvalResult> ScoreModel(ps::PsClient* ps, const JobSpec& spec,
                                               const std::vector<std::string>& files,
                                               const ScoreOptions& options = {});

// Restores the export into an in-process one-shard PS and scores it
// (ScoreModel through a PrefixedPsClient with the export's prefix).
// FAILED_PRECONDITION naming a model table missing from the checkpoint.
absl::StatusOr<trainer::EvalResult> ScoreExport(const LoadedExport& loaded,
                                                const std::vector<std::string>& files,
                                                const ScoreOptions& options = {});
// ReadExport(dir), then the above.
absl::StatusOr<trainer::EvalResult> ScoreExport(const std::string& dir,
                                                const std::vector<std::string>& files,
                                                const ScoreOptions& options = {});

}  // namespace brook::chief
