// A loaded model export, ready to score tf.train.Examples: the export's
// checkpoint restored into an in-process PS (rows in memory, or past a
// memory limit in RocksDB), its feature spec's parser and its model. What
// `brook serve` answers requests with; one per loaded version.
//
//   ASSIGN_OR_RETURN(std::unique_ptr<Servable> s, Servable::Load(dir, 3, {}));
//   std::vector<float> scores;
//   RETURN_IF_ERROR(s->Score(examples, &scores));  // one per example
//
// Scores are computed exactly as `brook predict` computes them (the same
// restore, pulls, model and CPU kernels, forward only), so they match its
// scores to float rounding.
//
// Thread-safe: Score and the row/dense updates of a follower may run
// concurrently; each Score borrows one of a pool of per-thread scorers
// (model, backend, buffers), so concurrent scores never share buffers.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "chief/export/model_export.h"
#include "features/feature_spec.h"
#include "ps/client/ps_client.h"
#include "trainer/model/model_spec.h"

namespace brook::ps {
class ParameterServer;
class LocalPsClient;
}  // namespace brook::ps

namespace brook::serving {

struct ServableOptions {
  // Bytes of rows held in memory; past it rows live in RocksDB under
  // data_dir (required then). 0: every row in memory.
  uint64_t memory_limit_bytes = 0;
  // The RocksDB tier's directory for this version: created, and removed
  // when the Servable is destroyed. Only with memory_limit_bytes.
  std::string data_dir;
  // A feature the spec names that an example lacks: false (serving's
  // default) refuses the example naming the feature; true fills the spec's
  // default as training did (on_missing of the trained spec).
  bool fill_missing = false;
};

// What one version holds (for /metrics and the status page).
struct ServableStats {
  uint64_t rows_in_memory = 0;
  uint64_t rows_in_rocksdb = 0;
  uint64_t bytes_in_memory = 0;  // the tables', their arenas' overhead included
  // Of bytes_in_memory: the rows' own, as --memory-limit counts them (header,
  // weights, index entry; no optimizer slots).
  uint64_t row_bytes_in_memory = 0;
  uint64_t memory_limit_bytes = 0;  // 0: none
};

class Servable {
 public:
  // Reads the export at `dir` (chief::ReadExport: NOT_FOUND / DATA_LOSS /
  // INVALID_ARGUMENT naming the file), restores its checkpoint and pulls
  // its dense variables. `version` is what requests and metrics call it.
  static absl::StatusOr<std::unique_ptr<Servable>> Load(const std::string& dir, int64_t version,
                                                        const ServableOptions& options);
  ~Servable();
  Servable(const Servable&) = delete;
  Servable& operator=(const Servable&) = delete;

  int64_t version() const { return version_; }
  const std::string& dir() const { return loaded_.dir; }
  const chief::LoadedExport& loaded() const { return loaded_; }
  // The features a request must carry: the trained spec, on_missing as
  // served (error unless fill_missing). The label is never required.
  const input::FeatureSpec& features() const { return features_; }

  // Scores `examples` (serialized tf.train.Example) in one model step:
  // out[i] is example i's probability (logloss models) or output (mse).
  // The first example that does not parse (a missing feature, a wrong
  // type, bytes that are no Example) stops it before the model step:
  // INVALID_ARGUMENT with the parser's message, its index in *bad_example
  // when given (a batch drops that request and scores the rest), else
  // "example I: " before the message.
  absl::Status Score(absl::Span<const std::string_view> examples, std::vector<float>* out,
                     size_t* bad_example = nullptr) const;

  // The served weights, for a follower (ps_follower.h): the in-process PS
  // of this version, under the job's table names (no prefix). Rows written
  // through it serve at once; dense variables after RefreshDense().
  ps::PsClient* weights() const { return job_ps_.get(); }
  absl::Status RefreshDense() const;

  // The model's embedding tables and dense variables (job names, no prefix).
  const std::vector<trainer::TableSpec>& Tables() const { return tables_; }
  const trainer::TableSpec* FindTable(std::string_view name) const;
  // name -> floats, model order.
  const std::vector<std::pair<std::string, int64_t>>& DenseSizes() const { return dense_sizes_; }
  // -1 when the model has no such variable.
  int64_t DenseSize(std::string_view name) const;
  // Declares the model's tables and dense variables on `job_ps` as its
  // trainers did (Trainer::Setup): where they exist with those options
  // nothing changes, and the client learns where the dense variables live.
  absl::Status DeclareOn(ps::PsClient* job_ps) const;
  // Only tells `job_ps` where the model's dense variables live
  // (PsClient::LocateDense), creating nothing: a follower's client, before
  // PullDense, on a training cluster whose tables may have other options.
  absl::Status LocateDenseOn(ps::PsClient* job_ps) const;
  // A follower's writes (job names): rows serve at once; dense values once
  // RefreshDense() runs. ParameterServer::AssignRows / AssignDense errors.
  absl::Status AssignRows(std::string_view table, absl::Span<const uint64_t> keys,
                          absl::Span<const float> weights) const;
  absl::Status AssignDense(std::string_view name, absl::Span<const float> values) const;
  // Removes rows (they then read their initial values, as on the PS).
  absl::Status EraseRows(std::string_view table, absl::Span<const uint64_t> keys) const;

  ServableStats Stats() const;

 private:
  struct Scorer;
  class ScorerLease;
  Servable() = default;
  absl::StatusOr<std::unique_ptr<Scorer>> NewScorer() const;

  int64_t version_ = 0;
  ServableOptions options_;
  chief::LoadedExport loaded_;
  input::FeatureSpec features_;
  std::unique_ptr<ps::ParameterServer> ps_;
  std::unique_ptr<ps::LocalPsClient> local_;
  std::unique_ptr<ps::PsClient> job_ps_;  // PrefixedPsClient over local_
  std::vector<trainer::TableSpec> tables_;
  std::vector<std::pair<std::string, int64_t>> dense_sizes_;
  std::vector<std::pair<std::string, std::vector<int64_t>>> dense_specs_;  // name, shape
  // The dense variables, model order; replaced whole by RefreshDense.
  mutable std::mutex dense_mu_;
  mutable std::shared_ptr<const std::vector<std::vector<float>>> dense_;
  // Scorers not in use; a Score with none free makes one.
  mutable std::mutex pool_mu_;
  mutable std::vector<std::unique_ptr<Scorer>> free_;
};

}  // namespace brook::serving
