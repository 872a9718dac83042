#include "trainer/trainer.h"

#include <chrono>
#include <cstring>
#include <iostream>
#include <optional>
#include <thread>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "trainer/internal/stage_sync.h"
#include "trainer/model/quality_metrics.h"

namespace brook::trainer {
namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

// The optimizer step of the `steps_started`th step a Train call pulls: the
// job's (TrainStream), or this trainer's own count, continued across Train
// calls from `own_first_step`.
int64_t StepNumber(const TrainStream& stream, int64_t own_first_step, int64_t steps_started) {
  if (stream.job_step_base != nullptr) {
    return stream.job_step_base->load(std::memory_order_relaxed) +
           static_cast<int64_t>(stream.first_step) + steps_started;
  }
  return own_first_step + steps_started;
}

// A batch of only provenance (records discarded at an epoch's end): nothing
// to train, but its records are settled once earlier batches are.
absl::Status SettleProvenanceOnly(input::UnitProgress* progress,
                                  const input::BatchProvenance& provenance) {
  if (progress == nullptr) return absl::OkStatus();
  RETURN_IF_ERROR(progress->Track(provenance));
  return progress->Ack(provenance.sequence);
}

}  // namespace

ps::TableOptions TableOptionsFor(const TableSpec& t, const TrainerOptions& o) {
  ps::TableOptions table;
  table.name = t.name;
  table.dim = t.dim;
  table.seed = o.seed ^ std::hash<std::string>{}(t.name);
  auto per_table = o.table_optimizers.find(t.name);
  table.optimizer =
      per_table == o.table_optimizers.end() ? o.embedding_optimizer : per_table->second;
  table.initializer = o.embedding_init;
  // Wide (dim-1) weights start at zero, as a linear model's do.
  if (t.dim == 1) table.initializer.kind = ps::InitializerKind::kZeros;
  table.memory_budget_bytes = o.table_memory_budget_bytes;
  auto apply = [&table](const TableSettings& s) {
    if (s.memory_budget_bytes) table.memory_budget_bytes = *s.memory_budget_bytes;
    if (s.admission_min_count) table.admission_min_count = *s.admission_min_count;
    if (s.max_pending_keys) table.max_pending_keys = *s.max_pending_keys;
    if (s.ttl_steps) table.ttl_steps = *s.ttl_steps;
    if (s.ttl_seconds) table.ttl_seconds = *s.ttl_seconds;
    if (s.gradient_clip) table.gradient_clip = *s.gradient_clip;
    if (s.bad_gradient) table.bad_gradient = *s.bad_gradient;
    if (s.wire) table.wire = *s.wire;
  };
  apply(o.table_defaults);
  if (o.table_defaults.initializer && t.dim > 1) table.initializer = *o.table_defaults.initializer;
  if (auto it = o.table_settings.find(t.name); it != o.table_settings.end()) {
    apply(it->second);
    if (it->second.initializer) table.initializer = *it->second.initializer;
  }
  return table;
}

// Everything one batch carries through the threads.
struct Trainer::InFlight {
  ModelBatch batch;
  input::BatchProvenance provenance;
  std::vector<std::vector<float>> rows;  // per table
  // Shared by the batches between two refreshes.
  std::shared_ptr<const DenseValues> params;
  StepResult result;
  int64_t step = 0;  // the optimizer step this micro-batch belongs to
};

// The push side of one optimizer step: collects its micro-batches and makes
// the PushBatch parts. One micro-batch (no accumulation) is pushed straight
// from its own gradients; k of them are summed, each weighted by its
// examples / the step's examples, since every gradient is d(mean loss):
// sum_j (n_j / N) g_j is d(mean loss over all N examples). Keys of several
// micro-batches are concatenated: the client sums duplicate keys' rows.
class Trainer::Accumulator {
 public:
  Accumulator(const ModelLayout& layout, const std::vector<DenseVariableSpec>& vars)
      : layout_(layout), vars_(vars) {}

  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  int64_t step() const { return items_.front()->step; }
  const std::vector<std::unique_ptr<InFlight>>& items() const { return items_; }

  void Add(std::unique_ptr<InFlight> item) { items_.push_back(std::move(item)); }

  // The parts of the step's PushBatch; valid until the next Add or Clear.
  void MakeParts(std::vector<ps::TablePush>* tables, std::vector<ps::DensePush>* dense) {
    tables->clear();
    dense->clear();
    if (items_.size() == 1) {
      const InFlight& f = *items_.front();
      for (size_t t = 0; t < f.batch.tables.size(); ++t) {
        // Tables that share keys (a wide table beside its deep one) each get
        // their own gradients; every table is pushed.
        tables->push_back(
            {layout_.tables[t].name, f.batch.tables[t].unique_keys, f.result.table_grads[t]});
      }
      for (size_t v = 0; v < vars_.size(); ++v) {
        dense->push_back({vars_[v].name, f.result.dense_grads[v]});
      }
      return;
    }
    double total = 0;
    for (const auto& f : items_) total += static_cast<double>(f->batch.batch_size);
    const size_t num_tables = layout_.tables.size();
    keys_.resize(num_tables);
    grads_.resize(num_tables);
    dense_grads_.resize(vars_.size());
    for (size_t t = 0; t < num_tables; ++t) {
      keys_[t].clear();
      grads_[t].clear();
      for (const auto& f : items_) {
        const float w = static_cast<float>(f->batch.batch_size / total);
        keys_[t].insert(keys_[t].end(), f->batch.tables[t].unique_keys.begin(),
                        f->batch.tables[t].unique_keys.end());
        for (float g : f->result.table_grads[t]) grads_[t].push_back(w * g);
      }
      tables->push_back({layout_.tables[t].name, keys_[t], grads_[t]});
    }
    for (size_t v = 0; v < vars_.size(); ++v) {
      std::vector<float>& sum = dense_grads_[v];
      sum.assign(static_cast<size_t>(vars_[v].num_floats()), 0.0f);
      for (const auto& f : items_) {
        const float w = static_cast<float>(f->batch.batch_size / total);
        const std::vector<float>& g = f->result.dense_grads[v];
        for (size_t i = 0; i < sum.size(); ++i) sum[i] += w * g[i];
      }
      dense->push_back({vars_[v].name, sum});
    }
  }

  void Clear() { items_.clear(); }

 private:
  const ModelLayout& layout_;
  const std::vector<DenseVariableSpec>& vars_;
  std::vector<std::unique_ptr<InFlight>> items_;
  std::vector<std::vector<uint64_t>> keys_;
  std::vector<std::vector<float>> grads_, dense_grads_;
};

Trainer::Trainer(ps::PsClient* ps, const ModelSpec& spec, const TrainerOptions& options,
                 ModelBatchBuilder builder, std::unique_ptr<Model> model)
    : ps_(ps),
      traffic_base_(ps->Traffic()),
      spec_(spec),
      options_(options),
      builder_(std::move(builder)),
      model_(std::move(model)) {}

Trainer::~Trainer() = default;

absl::StatusOr<std::unique_ptr<Trainer>> Trainer::Create(ps::PsClient* ps, const ModelSpec& spec,
                                                         const input::FeatureSpec& features,
                                                         const TrainerOptions& options,
                                                         Backend* backend) {
  if (options.staleness < 0 || options.dense_refresh_steps < 1) {
    return absl::InvalidArgumentError("trainer: need staleness >= 0 and dense_refresh_steps >= 1");
  }
  if (options.accumulation_steps < 1 || options.accumulation_steps > 1024) {
    return absl::InvalidArgumentError(absl::StrCat(
        "trainer: accumulation_steps ", options.accumulation_steps, " must be in [1, 1024]"));
  }
  RETURN_IF_ERROR(options.lr_schedule.Validate());
  ASSIGN_OR_RETURN(ModelBatchBuilder builder, ModelBatchBuilder::Create(spec, features));
  if (options.cache.enabled() && options.cache.refresh_steps < 1) {
    return absl::InvalidArgumentError(absl::StrCat("trainer: cache refresh_steps ",
                                                   options.cache.refresh_steps, " must be >= 1"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Model> model, Model::Create(spec, backend));
  std::unique_ptr<Trainer> t(new Trainer(ps, spec, options, std::move(builder), std::move(model)));
  t->backend_ = backend;
  if (options.cache.enabled()) {
    for (const TableSpec& table : t->model_->layout().tables) {
      t->caches_.push_back(
          std::make_unique<RowCache>(table.dim, options.cache.rows, options.cache.refresh_steps));
    }
  }
  return t;
}

absl::Status Trainer::Setup() {
  for (const TableSpec& t : model_->layout().tables) {
    RETURN_IF_ERROR(ps_->CreateTable(TableOptionsFor(t, options_)));
  }
  std::vector<ps::DenseOptions> dense;
  for (const DenseVariableSpec& v : model_->dense_variables()) {
    ps::DenseOptions d;
    d.name = v.name;
    d.shape = v.shape;
    d.seed = options_.seed ^ std::hash<std::string>{}(v.name);
    d.initializer = v.init;
    d.optimizer = options_.dense_optimizer;
    dense.push_back(std::move(d));
  }
  if (!dense.empty()) RETURN_IF_ERROR(ps_->CreateDense(dense));
  return absl::OkStatus();
}

absl::Status Trainer::Pull(const ModelBatch& batch, std::vector<std::vector<float>>* rows,
                           std::vector<std::vector<float>>* params) {
  const ModelLayout& layout = model_->layout();
  std::vector<ps::TablePull> tables;
  rows->resize(batch.tables.size());
  for (size_t t = 0; t < batch.tables.size(); ++t) {
    const TableKeys& keys = batch.tables[t];
    (*rows)[t].resize(keys.unique_keys.size() * static_cast<size_t>(keys.dim));
    tables.push_back({layout.tables[t].name, keys.unique_keys, absl::MakeSpan((*rows)[t])});
  }
  std::vector<ps::DensePull> dense;
  if (params != nullptr) {
    const auto& vars = model_->dense_variables();
    params->resize(vars.size());
    for (size_t v = 0; v < vars.size(); ++v) {
      (*params)[v].resize(static_cast<size_t>(vars[v].num_floats()));
      dense.push_back({vars[v].name, absl::MakeSpan((*params)[v])});
    }
  }
  absl::Status pulled = ps_->PullBatch(tables, dense);
  if (RedeclareLostTables(pulled)) pulled = ps_->PullBatch(tables, dense);
  return pulled;
}

absl::Status Trainer::PullThroughCache(const ModelBatch& batch, int64_t step,
                                       std::vector<std::vector<float>>* rows,
                                       std::vector<std::vector<float>>* params) {
  const size_t n = batch.tables.size();
  rows->resize(n);
  std::vector<std::vector<uint32_t>> missing(n);
  std::vector<std::vector<uint64_t>> missing_keys(n);
  std::vector<std::vector<float>> missing_rows(n);
  ModelBatch misses;  // only the tables' keys the cache lacks
  misses.tables.resize(n);
  int64_t hits = 0, pulled = 0;
  for (size_t t = 0; t < n; ++t) {
    const TableKeys& keys = batch.tables[t];
    (*rows)[t].resize(keys.unique_keys.size() * static_cast<size_t>(keys.dim));
    caches_[t]->Lookup(keys.unique_keys, step, absl::MakeSpan((*rows)[t]), &missing[t]);
    misses.tables[t].dim = keys.dim;
    for (uint32_t i : missing[t]) misses.tables[t].unique_keys.push_back(keys.unique_keys[i]);
    hits += static_cast<int64_t>(keys.unique_keys.size() - missing[t].size());
    pulled += static_cast<int64_t>(missing[t].size());
  }
  RETURN_IF_ERROR(Pull(misses, &missing_rows, params));
  for (size_t t = 0; t < n; ++t) {
    const size_t dim = static_cast<size_t>(batch.tables[t].dim);
    for (size_t j = 0; j < missing[t].size(); ++j) {
      std::memcpy((*rows)[t].data() + missing[t][j] * dim, missing_rows[t].data() + j * dim,
                  dim * sizeof(float));
    }
    caches_[t]->Insert(misses.tables[t].unique_keys, missing_rows[t], step);
  }
  cache_hits_.fetch_add(hits, std::memory_order_relaxed);
  cache_misses_.fetch_add(pulled, std::memory_order_relaxed);
  return absl::OkStatus();
}

bool Trainer::RedeclareLostTables(const absl::Status& status) {
  // A PS that restarted empty, or rolled back to a restart point from before
  // the job's tables existed, answers NOT_FOUND naming one (the chief logs
  // what the job lost). Declaring them again (idempotent where they exist;
  // initial values are a function of seed and key) lets training go on.
  // Not for a trainer told to stop: its job may have ended and its tables
  // been dropped on purpose.
  if (!absl::IsNotFound(status) || stop_requested_.load(std::memory_order_relaxed)) return false;
  if (!absl::StrContains(status.message(), "no table '") &&
      !absl::StrContains(status.message(), "no dense variable '")) {
    return false;
  }
  absl::Status declared = Setup();
  std::cerr << "brook trainer: " << status.message()
            << (declared.ok() ? ": the PS lost the job's tables; declared them again"
                              : absl::StrCat(": declaring them again failed: ", declared.message()))
            << "\n";
  if (declared.ok()) tables_redeclared_.fetch_add(1, std::memory_order_relaxed);
  return declared.ok();
}

absl::Status SkipSteps(input::Pipeline* pipeline, input::UnitProgress* progress, uint64_t steps,
                       int accumulation_steps) {
  std::vector<uint64_t> sequences;
  uint64_t skipped = 0;
  while (skipped < steps) {
    ASSIGN_OR_RETURN(std::optional<input::Batch> batch, pipeline->Next());
    if (!batch.has_value()) break;
    RETURN_IF_ERROR(progress->Track(batch->provenance));
    if (batch->data.num_rows == 0) {
      RETURN_IF_ERROR(progress->Ack(batch->provenance.sequence));
      continue;
    }
    sequences.push_back(batch->provenance.sequence);
    if (sequences.size() == static_cast<size_t>(accumulation_steps)) {
      RETURN_IF_ERROR(progress->AckStep(sequences));
      sequences.clear();
      ++skipped;
    }
  }
  if (!sequences.empty()) RETURN_IF_ERROR(progress->AckStep(sequences));
  return absl::OkStatus();
}

// One Train call's state, shared by its pull, compute and push threads.
struct Trainer::TrainRun {
  TrainRun(input::Pipeline* pipeline, input::UnitProgress* progress, TrainStream stream,
           const TrainerOptions& options)
      : pipeline(pipeline),
        progress(progress),
        stream(stream),
        accumulation_steps(options.accumulation_steps),
        credits(options.staleness + 1),
        to_push(static_cast<size_t>(options.staleness + 1) * options.accumulation_steps) {}

  // Ends the run early: wakes every thread blocked on a queue, a credit or
  // the pipeline, and each then ends its stage.
  void StopAll() {
    credits.Cancel();
    to_compute.Close();
    to_push.Close();
    pipeline->Cancel();
  }

  input::Pipeline* const pipeline;
  input::UnitProgress* const progress;  // may be null
  const TrainStream stream;
  const int accumulation_steps;
  internal::Credits credits;
  internal::Channel<std::unique_ptr<InFlight>> to_compute{1};
  internal::Channel<std::unique_ptr<InFlight>> to_push;
  internal::FirstError error;
};

// The push thread's step being gathered and its buffers, reused step by step.
struct Trainer::PushState {
  explicit PushState(const Model& model) : acc(model.layout(), model.dense_variables()) {}

  Accumulator acc;
  std::vector<ps::TablePush> tables;
  std::vector<ps::DensePush> dense;
  std::vector<uint64_t> batch_sequences;
  uint64_t steps_pushed = 0;  // by this Train call
};

absl::Status Trainer::Train(input::Pipeline* pipeline, input::UnitProgress* progress,
                            TrainStream stream) {
  const auto wall0 = Clock::now();
  TrainRun run(pipeline, progress, stream, options_);
  std::thread puller([&] { PullStage(&run); });
  std::thread pusher([&] { PushStage(&run); });
  // The calling thread computes.
  ComputeStage(&run);
  puller.join();
  pusher.join();
  AddSeconds(&TrainerStats::wall_seconds, Since(wall0));
  return run.error.Get();
}

void Trainer::PullStage(TrainRun* run) {
  const int k = run->accumulation_steps;
  std::shared_ptr<const DenseValues> params;
  // Optimizer step of the next micro-batch: the job's (TrainStream), or
  // this trainer's own count, continued across Train calls.
  const int64_t own_first_step = options_.first_step + stats().steps;
  int64_t step = StepNumber(run->stream, own_first_step, 0);
  int64_t steps_started = 0;
  int micro = 0;  // its index within the step
  for (;;) {
    if (micro == 0 && options_.max_steps > 0 && steps_started >= options_.max_steps) break;
    if (micro == 0 && stop_requested_.load(std::memory_order_relaxed)) break;
    if (micro == 0) step = StepNumber(run->stream, own_first_step, steps_started);
    std::optional<input::Batch> next = NextInput(run);
    if (!next.has_value()) break;
    if (next->data.num_rows == 0) {
      absl::Status st = SettleProvenanceOnly(run->progress, next->provenance);
      if (!st.ok()) {
        run->error.Set(st);
        break;
      }
      continue;
    }
    auto item = std::make_unique<InFlight>();
    item->step = step;
    item->provenance = std::move(next->provenance);
    absl::Status st = builder_.Build(next->data, &item->batch);
    if (!st.ok()) {
      run->error.Set(st);
      break;
    }
    // Dropout masks differ per micro-batch.
    item->batch.step = static_cast<uint64_t>(step * k + micro);
    const bool first_micro = micro == 0;
    if (first_micro && !AcquireCredit(run)) break;
    // The micro-batches of one step share the dense variables pulled with
    // its first.
    const bool refresh =
        first_micro && (params == nullptr || steps_started % options_.dense_refresh_steps == 0);
    st = PullMicroBatch(run, item.get(), refresh, &params);
    if (!st.ok()) {
      run->error.Set(st);
      break;
    }
    if (first_micro) {
      ++steps_started;
      steps_pulled_.fetch_add(1, std::memory_order_relaxed);
    }
    if (++micro == k) micro = 0;
    if (!run->to_compute.Put(std::move(item))) break;
  }
  run->to_compute.Close();
}

std::optional<input::Batch> Trainer::NextInput(TrainRun* run) {
  const auto t0 = Clock::now();
  absl::StatusOr<std::optional<input::Batch>> next = run->pipeline->Next();
  AddSeconds(&TrainerStats::input_wait_seconds, Since(t0));
  if (!next.ok()) {
    run->error.Set(next.status());
    return std::nullopt;
  }
  return std::move(*next);
}

bool Trainer::AcquireCredit(TrainRun* run) {
  const auto t0 = Clock::now();
  if (!run->credits.Acquire()) return false;
  AddSeconds(&TrainerStats::credit_wait_seconds, Since(t0));
  return true;
}

absl::Status Trainer::PullMicroBatch(TrainRun* run, InFlight* item, bool refresh,
                                     std::shared_ptr<const DenseValues>* params) {
  if (run->progress != nullptr) RETURN_IF_ERROR(run->progress->Track(item->provenance));
  std::shared_ptr<DenseValues> fresh;
  if (refresh) fresh = std::make_shared<DenseValues>();
  const auto t0 = Clock::now();
  absl::Status pulled = caches_.empty()
                            ? Pull(item->batch, &item->rows, fresh.get())
                            : PullThroughCache(item->batch, item->step, &item->rows, fresh.get());
  AddSeconds(&TrainerStats::pull_seconds, Since(t0));
  RETURN_IF_ERROR(pulled);
  if (refresh) *params = std::move(fresh);
  item->params = *params;
  return absl::OkStatus();
}

void Trainer::ComputeStage(TrainRun* run) {
  std::vector<absl::Span<const float>> rows, params;
  int64_t auc_batches = 0;
  for (;;) {
    auto t0 = Clock::now();
    std::optional<std::unique_ptr<InFlight>> item = run->to_compute.Take();
    AddSeconds(&TrainerStats::ps_wait_seconds, Since(t0));
    if (!item.has_value()) break;
    InFlight& f = **item;
    rows.assign(f.rows.begin(), f.rows.end());
    params.assign(f.params->begin(), f.params->end());
    t0 = Clock::now();
    absl::Status st = model_->Step(f.batch, rows, params, /*train=*/true, &f.result);
    AddSeconds(&TrainerStats::compute_seconds, Since(t0));
    if (!st.ok()) {
      run->error.Set(st);
      run->StopAll();
      break;
    }
    std::optional<double> train_auc;
    if (spec_.loss == LossKind::kLogLoss) train_auc = UpdateTrainAuc(f, &auc_batches);
    RecordComputed(f, train_auc);
    if (!run->to_push.Put(std::move(*item))) break;
  }
  run->to_push.Close();
}

std::optional<double> Trainer::UpdateTrainAuc(const InFlight& item, int64_t* batches) {
  constexpr uint64_t kAucWindow = 65536;
  recent_auc_.Add(item.result.predictions, item.batch.labels);
  const bool roll = recent_auc_.positives() + recent_auc_.negatives() >= kAucWindow;
  std::optional<double> train_auc;
  // The estimate costs two histogram passes: every 8th batch, at a roll
  // and while the trainer is young is often enough for a gauge.
  if (roll || ++*batches % 8 == 0 || *batches < 8) {
    StreamingAuc window = previous_auc_;
    window.Merge(recent_auc_);
    train_auc = window.Auc();
  }
  if (roll) {
    previous_auc_ = recent_auc_;
    recent_auc_.Reset();
  }
  return train_auc;
}

void Trainer::RecordComputed(const InFlight& item, std::optional<double> train_auc) {
  const ModelBatch& batch = item.batch;
  std::lock_guard<std::mutex> lock(stats_mu_);
  if (train_auc.has_value()) stats_.train_auc = *train_auc;
  ++stats_.micro_batches;
  stats_.examples += batch.batch_size;
  stats_.loss_sum += item.result.loss_sum;
  stats_.last_loss = batch.batch_size > 0 ? item.result.loss_sum / batch.batch_size : 0;
}

void Trainer::PushStage(TrainRun* run) {
  PushState push(*model_);
  bool ok = true;
  while (std::optional<std::unique_ptr<InFlight>> item = run->to_push.Take()) {
    push.acc.Add(std::move(*item));
    if (static_cast<int>(push.acc.size()) == run->accumulation_steps &&
        !(ok = PushStep(run, &push))) {
      break;
    }
  }
  // A last, partial step (the data ran out mid-step) is pushed too, unless
  // training stopped on an error.
  if (ok && !push.acc.empty() && run->error.Get().ok()) PushStep(run, &push);
}

bool Trainer::PushStep(TrainRun* run, PushState* push) {
  Accumulator& acc = push->acc;
  const int64_t step = acc.step();
  const float scale = options_.lr_schedule.Scale(step);
  acc.MakeParts(&push->tables, &push->dense);
  ps::PushStream push_stream;
  if (run->stream.id != 0) {
    push_stream = {.id = run->stream.id, .step = run->stream.first_step + push->steps_pushed};
  }
  auto t0 = Clock::now();
  absl::Status st = ps_->PushBatch(push->tables, push->dense, step, scale, push_stream);
  // Shards that applied it already acknowledge the retry as a duplicate.
  if (RedeclareLostTables(st)) {
    st = ps_->PushBatch(push->tables, push->dense, step, scale, push_stream);
  }
  AddSeconds(&TrainerStats::push_seconds, Since(t0));
  ++push->steps_pushed;
  if (st.ok() && run->progress != nullptr) {
    push->batch_sequences.clear();
    for (size_t i = 0; i < acc.size(); ++i) {
      push->batch_sequences.push_back(acc.items()[i]->provenance.sequence);
    }
    st = run->progress->AckStep(push->batch_sequences);
  }
  acc.Clear();
  if (!st.ok()) {
    run->error.Set(st);
    run->StopAll();
    return false;
  }
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    ++stats_.steps;
    stats_.learning_rate_scale = scale;
  }
  run->credits.Release();
  return true;
}

void Trainer::AddSeconds(double TrainerStats::*field, double seconds) {
  std::lock_guard<std::mutex> lock(stats_mu_);
  stats_.*field += seconds;
}

absl::StatusOr<EvalResult> Trainer::Evaluate(input::Pipeline* pipeline,
                                             const EvalBatchFn& on_batch) {
  std::vector<float> predictions, labels;
  std::vector<std::vector<float>> rows_storage, params_storage;
  std::vector<absl::Span<const float>> rows, params;
  ModelBatch batch;
  StepResult result;
  double loss_sum = 0;
  bool have_params = false;
  for (;;) {
    ASSIGN_OR_RETURN(std::optional<input::Batch> next, pipeline->Next());
    if (!next.has_value()) break;
    if (next->data.num_rows == 0) continue;  // provenance only
    RETURN_IF_ERROR(builder_.Build(next->data, &batch));
    RETURN_IF_ERROR(Pull(batch, &rows_storage, have_params ? nullptr : &params_storage));
    if (!have_params) params.assign(params_storage.begin(), params_storage.end());
    have_params = true;
    rows.assign(rows_storage.begin(), rows_storage.end());
    RETURN_IF_ERROR(model_->Step(batch, rows, params, /*train=*/false, &result));
    loss_sum += result.loss_sum;
    if (on_batch) RETURN_IF_ERROR(on_batch(batch.labels, result.predictions));
    predictions.insert(predictions.end(), result.predictions.begin(), result.predictions.end());
    labels.insert(labels.end(), batch.labels.begin(), batch.labels.end());
  }
  EvalResult r;
  r.examples = static_cast<int64_t>(predictions.size());
  if (r.examples == 0) return absl::InvalidArgumentError("evaluate: the pipeline gave no examples");
  r.mean_loss = loss_sum / static_cast<double>(r.examples);
  if (spec_.loss == LossKind::kLogLoss) {
    r.auc = Auc(predictions, labels);
    r.logloss = LogLoss(predictions, labels);
    r.accuracy = Accuracy(predictions, labels);
    r.calibration = Calibration(predictions, labels);
    std::lock_guard<std::mutex> lock(stats_mu_);
    stats_.eval_auc = r.auc;
  }
  return r;
}

TrainerStats Trainer::stats() const {
  TrainerStats s;
  {
    std::lock_guard<std::mutex> lock(stats_mu_);
    s = stats_;
    // Under the lock: a step's credit goes back only after it counted
    // itself here, so pulled - steps read together never passes staleness + 1.
    s.in_flight_steps =
        std::max<int64_t>(0, steps_pulled_.load(std::memory_order_relaxed) - s.steps);
  }
  // device_stats() is read outside the lock the steps take to record theirs:
  // a CUDA backend's first call loads NVML (tens of ms), and a metrics scrape
  // must not stall training for it.
  s.tables_redeclared = tables_redeclared_.load(std::memory_order_relaxed);
  const ps::PsTraffic traffic = ps_->Traffic();
  s.ps_pull_bytes = traffic.pull_bytes - traffic_base_.pull_bytes;
  s.ps_push_bytes = traffic.push_bytes - traffic_base_.push_bytes;
  s.cache_hits = cache_hits_.load(std::memory_order_relaxed);
  s.cache_misses = cache_misses_.load(std::memory_order_relaxed);
  if (backend_ != nullptr) s.device = backend_->device_stats();
  return s;
}

}  // namespace brook::trainer
