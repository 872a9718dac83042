// Trainer: turns an input pipeline's batches into model updates on the
// parameter servers, with several batches in flight so that neither the
// compute nor the network waits on the other (docs/architecture.md "Trainer").
//
//   pull thread:    pipeline.Next() -> ModelBatch -> wait for a credit ->
//                   pull the batch's unique keys per table (and the dense
//                   variables every dense_refresh_steps) -> compute queue
//   calling thread: Model::Step (forward + backward) -> push queue
//   push thread:    push summed sparse gradients per unique key and the
//                   dense gradients; when every push of batch i is
//                   acknowledged: return its credit and acknowledge its
//                   records to UnitProgress (so a re-leased work unit
//                   resumes exactly after what the PS has).
// Every table and dense variable of a step travels in one PullBatch and one
// PushBatch (one round trip per PS shard, all shards at once), not one call
// per table: a step's PS time is then one network round trip, not 30.
//
// Staleness: there are staleness + 1 credits, so batch i is pulled only when
// at most `staleness` earlier batches are not yet acknowledged by the PS.
// staleness 0 is synchronous training: every pull sees every earlier push.
//
// Gradient accumulation: with accumulation_steps k, one optimizer step is k
// consecutive micro-batches computed against the same dense variables (and
// rows no push of theirs has touched yet); their gradients, each weighted
// by its share of the examples, are pushed once -- the update one batch of
// all k micro-batches' examples would make. Credits, staleness, max_steps,
// dense_refresh_steps and the learning-rate schedule count optimizer steps.
//
// Where time goes is measured, not guessed: TrainerStats splits the calling
// thread's wall time into input wait, PS wait (for pulled rows) and compute,
// and counts the push thread's time separately.
//
// Thread-compatible: one Train/Evaluate at a time; stats() from any thread.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "features/feature_spec.h"
#include "ps/client/ps_client.h"
#include "ps/options.h"
#include "trainer/input/pipeline.h"
#include "trainer/lr_schedule.h"
#include "trainer/model/model.h"
#include "trainer/model/model_batch.h"
#include "trainer/model/model_spec.h"
#include "trainer/model/quality_metrics.h"
#include "trainer/row_cache.h"

namespace brook::trainer {

// PS options of embedding tables that a job spec's `tables:` section sets
// (ps::TableOptions has their meaning); an unset field keeps the default.
struct TableSettings {
  std::optional<uint64_t> memory_budget_bytes;
  std::optional<uint32_t> admission_min_count;
  std::optional<uint64_t> max_pending_keys;
  std::optional<int64_t> ttl_steps;
  std::optional<double> ttl_seconds;
  std::optional<float> gradient_clip;
  std::optional<ps::BadGradientPolicy> bad_gradient;
  std::optional<ps::InitializerOptions> initializer;
  std::optional<ps::WirePrecision> wire;

  bool empty() const { return *this == TableSettings{}; }
  friend bool operator==(const TableSettings&, const TableSettings&) = default;
};

// A job spec's `cache:`: hot embedding rows kept by the trainer between
// pulls (trainer/row_cache.h). rows == 0: off.
struct RowCacheOptions {
  int64_t rows = 0;  // per table
  // A cached row is pulled again this many optimizer steps after its pull;
  // 2 leaves a trainer at most one step behind its own updates (BENCHMARKS.md).
  int64_t refresh_steps = 2;

  bool enabled() const { return rows > 0; }
  friend bool operator==(const RowCacheOptions&, const RowCacheOptions&) = default;
};

struct TrainerOptions {
  // Batches whose pushes may be outstanding while a later batch is pulled.
  int staleness = 2;
  // Pull the dense variables every this many steps (1: every step).
  int dense_refresh_steps = 1;
  // Stop after this many steps (0: when the pipeline ends).
  int64_t max_steps = 0;
  // The step number of the first batch (a resumed job continues its count);
  // each later Train call continues from first_step + stats().steps.
  int64_t first_step = 0;
  // Embedding tables the trainer creates on the PS: optimizer and
  // initializer of the deep tables (dim > 1); dim-1 (wide) tables start at
  // zero with the same optimizer. Budget per table per PS.
  ps::OptimizerOptions embedding_optimizer = [] {
    ps::OptimizerOptions o;
    o.kind = ps::OptimizerKind::kAdagrad;
    o.learning_rate = 0.05f;
    return o;
  }();
  ps::InitializerOptions embedding_init = [] {
    ps::InitializerOptions i;
    i.kind = ps::InitializerKind::kUniform;
    i.low = -0.05f;
    i.high = 0.05f;
    return i;
  }();
  // Per-table overrides of embedding_optimizer, by the model's table name
  // (e.g. "C1_wide"), as a job spec's optimizer.tables gives them.
  std::map<std::string, ps::OptimizerOptions> table_optimizers;
  uint64_t table_memory_budget_bytes = 1ull << 30;
  // A job spec's `tables:`: settings of every table (their initializer, like
  // embedding_init, for deep tables only), then per-table ones by the
  // model's table name, which win (an initializer there applies whatever the
  // table's dim).
  TableSettings table_defaults;
  std::map<std::string, TableSettings> table_settings;
  uint64_t seed = 1;
  // Micro-batches per optimizer step (>= 1).
  int accumulation_steps = 1;
  // Multiplier of every base learning rate, by optimizer step, sent with
  // each push (the optimizers run on the PS).
  LrSchedule lr_schedule;
  // The optimizer of the dense variables (their initializers come from the
  // model's DenseVariableSpec).
  ps::OptimizerOptions dense_optimizer = [] {
    ps::OptimizerOptions o;
    o.kind = ps::OptimizerKind::kAdam;
    o.learning_rate = 0.001f;
    return o;
  }();
  // Training pulls serve fresh-enough rows from a cache (evaluation never does).
  RowCacheOptions cache;
};

// The options the trainer creates table `t` with on the PS.
ps::TableOptions TableOptionsFor(const TableSpec& t, const TrainerOptions& o);

struct TrainerStats {
  int64_t steps = 0;          // optimizer steps whose pushes were acknowledged
  int64_t micro_batches = 0;  // batches computed (steps x accumulation_steps)
  // Steps pulled whose pushes are not all acknowledged yet (<= staleness + 1).
  int64_t in_flight_steps = 0;
  // Times a PS answered that it lost the job's tables and they were declared
  // again (a restart without the WAL, or a rollback from before they existed).
  int64_t tables_redeclared = 0;
  int64_t examples = 0;
  float learning_rate_scale = 1;  // of the last push
  // Progressive AUC (each prediction made before its example's update) over
  // the last 64K-128K training examples; NaN before both classes were seen
  // or for an mse model.
  double train_auc = std::numeric_limits<double>::quiet_NaN();
  // Exact AUC of the last Evaluate(); NaN before one.
  double eval_auc = std::numeric_limits<double>::quiet_NaN();
  double loss_sum = 0;             // sum of per-example losses over training
  double last_loss = 0;            // mean loss of the last batch
  double wall_seconds = 0;         // Train() so far
  double input_wait_seconds = 0;   // pull thread blocked on the pipeline
  double ps_wait_seconds = 0;      // calling thread waiting for pulled rows
  double compute_seconds = 0;      // Model::Step
  double pull_seconds = 0;         // pull thread in PS pulls
  double push_seconds = 0;         // push thread in PS pushes
  double credit_wait_seconds = 0;  // pull thread waiting for the staleness bound
  // Payload bytes of this Trainer's embedding pulls (keys + rows, training and
  // evaluation) and pushes (keys + gradients), in their wire precision
  // (ps::PsTraffic).
  uint64_t ps_pull_bytes = 0;
  uint64_t ps_push_bytes = 0;
  // Training pulls' unique rows served by the row cache / pulled from the PS
  // (both 0 without a cache).
  int64_t cache_hits = 0;
  int64_t cache_misses = 0;
  // The backend's device (GPU memory, utilization); nullopt on the CPU.
  std::optional<DeviceStats> device;
};

// Where a Train call's steps go in a PS push stream (ps::PushStream): the
// stream of the work unit's epoch being trained, and the number of its first
// step there (the steps earlier holders of the unit committed). Every holder
// forms the same steps from the same records, so the PS applies a step that
// a dead holder pushed but never committed only once. id 0: no stream.
//
// job_step_base: the job's step of the unit's step 0 (under a chief: the
// steps the job's other unit-epochs committed, moved on by the chief's
// answers while the unit trains). When set, step i of the unit is job step
// *job_step_base + i for the learning-rate schedule, dropout and the push's
// step, so every holder of a step gives it the same number; unset, a Train
// call continues this Trainer's own count (TrainerOptions::first_step).
struct TrainStream {
  uint64_t id = 0;
  uint64_t first_step = 0;
  const std::atomic<int64_t>* job_step_base = nullptr;  // borrowed
};

// Reads past the first `steps` optimizer steps of `pipeline` (what earlier
// holders of its work unit committed), tracking and acking them in
// `progress` as Train does, so that its mark and step count are theirs and
// the next batch is the first of step `steps`: a holder that resumes a
// shuffled unit reads it from its start (the shuffle order depends on every
// record read) and skips. A last, partial step counts as one, as Train
// pushes it. Stops early, OK, if the data ends first.
absl::Status SkipSteps(input::Pipeline* pipeline, input::UnitProgress* progress, uint64_t steps,
                       int accumulation_steps);

struct EvalResult {
  int64_t examples = 0;
  double auc = 0;
  double logloss = 0;      // mean
  double accuracy = 0;     // threshold 0.5
  double calibration = 0;  // mean prediction / mean label
  double mean_loss = 0;    // the model's loss (logloss or mse)
};

class Trainer {
 public:
  // `ps` and `backend` must outlive the trainer.
  static absl::StatusOr<std::unique_ptr<Trainer>> Create(ps::PsClient* ps, const ModelSpec& spec,
                                                         const input::FeatureSpec& features,
                                                         const TrainerOptions& options,
                                                         Backend* backend);
  ~Trainer();

  // Declares the model's tables and dense variables on the PS (idempotent:
  // a restarted trainer re-declares the same ones).
  absl::Status Setup();
  // Trains on every batch of `pipeline` (or max_steps). `progress`, when
  // given, is told of every batch whose pushes were all acknowledged; it
  // covers one epoch (as a chief's lease does), so a pipeline that runs into
  // another epoch stops with its INVALID_ARGUMENT. Each step's batches are
  // acked together (UnitProgress::AckStep). With a `stream`, step i of this
  // call is pushed as step stream.first_step + i of it.
  absl::Status Train(input::Pipeline* pipeline, input::UnitProgress* progress = nullptr,
                     TrainStream stream = {});
  // Makes Train stop taking batches at the next step boundary; what is in
  // flight is pushed and acknowledged as usual, so Train returns OK with
  // the progress it made (stopped() tells). Sticky; any thread.
  void Stop() { stop_requested_.store(true); }
  bool stopped() const { return stop_requested_.load(); }
  // Forward only over every batch of `pipeline`: exact metrics. `on_batch`,
  // if set, sees each batch's labels and predictions (one per row, stream
  // order) on the calling thread; its error ends Evaluate with that error.
  using EvalBatchFn = std::function<absl::Status(absl::Span<const float> labels,
                                                 absl::Span<const float> predictions)>;
  absl::StatusOr<EvalResult> Evaluate(input::Pipeline* pipeline,
                                      const EvalBatchFn& on_batch = nullptr);

  TrainerStats stats() const;
  const Model& model() const { return *model_; }

 private:
  Trainer(ps::PsClient* ps, const ModelSpec& spec, const TrainerOptions& options,
          ModelBatchBuilder builder, std::unique_ptr<Model> model);
  struct InFlight;
  class Accumulator;
  // One Train call's state that its three threads share; PushState is the
  // push thread's own.
  struct TrainRun;
  struct PushState;
  // The dense variables pulled with a step, one vector per variable.
  using DenseValues = std::vector<std::vector<float>>;

  // The stages of Train (see the file comment), each run by one thread:
  // they hand batches on through `run`, and the first to fail records its
  // error there and stops the others.
  void PullStage(TrainRun* run);
  void ComputeStage(TrainRun* run);
  void PushStage(TrainRun* run);
  // Pull stage: the pipeline's next batch, or nullopt at its end or on an
  // error (recorded in run->error); the wait counts as input wait.
  std::optional<input::Batch> NextInput(TrainRun* run);
  // Pull stage: takes a staleness credit; false once the run is stopping.
  bool AcquireCredit(TrainRun* run);
  // Pull stage: tracks the micro-batch's records and pulls its rows, and,
  // when `refresh`, the dense variables into a new *params; every item
  // carries the latest *params.
  absl::Status PullMicroBatch(TrainRun* run, InFlight* item, bool refresh,
                              std::shared_ptr<const DenseValues>* params);
  // Compute stage: adds the micro-batch's predictions to the train AUC
  // window; the window's AUC when the estimate is due. *batches counts this
  // Train call's calls (the estimate's cadence).
  std::optional<double> UpdateTrainAuc(const InFlight& item, int64_t* batches);
  // Compute stage: the micro-batch's examples and loss into stats_.
  void RecordComputed(const InFlight& item, std::optional<double> train_auc);
  // Push stage: pushes the optimizer step in push->acc and, once the PS
  // acknowledged it, acks its records and returns its credit. False (the
  // run stopped, its error recorded) when the push or the ack failed.
  bool PushStep(TrainRun* run, PushState* push);
  // stats_.*field += seconds, under stats_mu_; any thread.
  void AddSeconds(double TrainerStats::*field, double seconds);

  // One PullBatch: every table's rows of `batch` into *rows (one vector per
  // table) and, when params is not null, every dense variable into *params.
  absl::Status Pull(const ModelBatch& batch, std::vector<std::vector<float>>* rows,
                    std::vector<std::vector<float>>* params);
  // Pull stage, with a row cache: the rows of `batch` at optimizer step
  // `step`, only the cache's misses from the PS (and the dense variables
  // when params is not null).
  absl::Status PullThroughCache(const ModelBatch& batch, int64_t step,
                                std::vector<std::vector<float>>* rows,
                                std::vector<std::vector<float>>* params);
  // True when `status` says a PS lost the job's tables and Setup() declared
  // them again: the caller retries its call once.
  bool RedeclareLostTables(const absl::Status& status);

  ps::PsClient* const ps_;
  const ps::PsTraffic traffic_base_;  // ps_->Traffic() when this Trainer was made
  const ModelSpec spec_;
  const TrainerOptions options_;
  ModelBatchBuilder builder_;
  std::unique_ptr<Model> model_;
  Backend* backend_ = nullptr;  // not owned; its device_stats() feed stats()

  // Per table of the layout, when options_.cache is on; the pull stage's.
  std::vector<std::unique_ptr<RowCache>> caches_;
  std::atomic<int64_t> cache_hits_{0}, cache_misses_{0};

  std::atomic<bool> stop_requested_{false};
  std::atomic<int64_t> steps_pulled_{0};       // optimizer steps whose first pull was sent
  std::atomic<int64_t> tables_redeclared_{0};  // RedeclareLostTables
  mutable std::mutex stats_mu_;
  TrainerStats stats_;  // guarded by stats_mu_
  // train_auc's window: the examples since the last roll, and the window
  // before. Compute thread only.
  StreamingAuc recent_auc_{4096}, previous_auc_{4096};
};

}  // namespace brook::trainer
