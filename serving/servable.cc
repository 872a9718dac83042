#include "serving/servable.h"

#include <filesystem>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/client/local_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "ps/parameter_server.h"
#include "trainer/backend/cpu_backend.h"
#include "trainer/input/example_parser.h"
#include "trainer/model/model.h"
#include "trainer/model/model_batch.h"
#include "trainer/trainer.h"

namespace brook::serving {

namespace fs = std::filesystem;

// One thread's scoring state. Model::Step reuses backend buffers, so a
// scorer is used by one Score at a time.
struct Servable::Scorer {
  std::unique_ptr<trainer::Backend> backend;
  std::unique_ptr<trainer::Model> model;
  std::unique_ptr<trainer::ModelBatchBuilder> builder;
  std::unique_ptr<input::ExampleParser> parser;
  input::ColumnarBatch columns;
  trainer::ModelBatch batch;
  std::vector<std::vector<float>> rows;
  trainer::StepResult result;
};

// Takes a free scorer (or makes one) and puts it back when done.
class Servable::ScorerLease {
 public:
  explicit ScorerLease(const Servable* s) : servable_(s) {}
  ~ScorerLease() {
    if (scorer_ == nullptr) return;
    std::lock_guard<std::mutex> lock(servable_->pool_mu_);
    servable_->free_.push_back(std::move(scorer_));
  }
  absl::StatusOr<Scorer*> Get() {
    {
      std::lock_guard<std::mutex> lock(servable_->pool_mu_);
      if (!servable_->free_.empty()) {
        scorer_ = std::move(servable_->free_.back());
        servable_->free_.pop_back();
      }
    }
    if (scorer_ == nullptr) {
      ASSIGN_OR_RETURN(scorer_, servable_->NewScorer());
    }
    return scorer_.get();
  }

 private:
  const Servable* servable_;
  std::unique_ptr<Scorer> scorer_;
};

absl::StatusOr<std::unique_ptr<Servable>> Servable::Load(const std::string& dir, int64_t version,
                                                         const ServableOptions& options) {
  if (options.memory_limit_bytes > 0 && options.data_dir.empty()) {
    return absl::InvalidArgumentError(
        "a serving memory limit needs a data dir for the rows past it");
  }
  std::unique_ptr<Servable> s(new Servable());
  s->version_ = version;
  s->options_ = options;
  ASSIGN_OR_RETURN(s->loaded_, chief::ReadExport(dir));
  const chief::JobSpec& spec = s->loaded_.spec;
  for (const trainer::DenseInputSpec& d : spec.model.dense) {
    if (d.transform == trainer::DenseTransform::kStandardize && !d.has_moments) {
      return absl::FailedPreconditionError(
          absl::StrCat("export ", dir, ": standardize input '", d.feature, "' has no mean/stddev"));
    }
  }
  s->features_ = spec.features;
  if (!options.fill_missing) s->features_.on_missing = input::MissingPolicy::kError;

  ps::ParameterServerOptions po;
  po.memory_limit_bytes = options.memory_limit_bytes;
  po.change_log_bytes = 0;  // nobody follows a serving copy
  po.weights_only = true;   // no optimizer slots: nothing trains here
  if (options.memory_limit_bytes > 0) {
    std::error_code ec;
    fs::remove_all(options.data_dir, ec);
    po.data_dir = options.data_dir;
    po.wal = false;  // the export is the durable copy; a restart reloads it
  }
  ASSIGN_OR_RETURN(s->ps_, ps::ParameterServer::Open(po));
  s->local_ = std::make_unique<ps::LocalPsClient>(std::vector<ps::ParameterServer*>{s->ps_.get()});
  const std::string tables = (fs::path(s->loaded_.dir) / chief::kExportTablesDir).string();
  RETURN_IF_ERROR(s->local_->Restore(tables).status());
  s->job_ps_ =
      std::make_unique<ps::PrefixedPsClient>(s->local_.get(), s->loaded_.manifest.table_prefix);

  // The model's tables and dense variables exist (restored): this only
  // tells the client where the dense variables live.
  if (absl::Status declared = s->DeclareOn(s->job_ps_.get()); !declared.ok()) {
    if (!absl::IsAlreadyExists(declared)) return declared;
    // The export's spec and its tables disagree (the PS's own advice about
    // earlier runs does not apply to a copy made for this load).
    std::string what(declared.message());
    if (const size_t cut = what.find("): it belongs"); cut != std::string::npos) {
      what.resize(cut + 1);
    }
    return absl::DataLossError(
        absl::StrCat("export ", dir, ": its spec does not describe the tables it holds: ", what));
  }
  // One scorer up front: a model that cannot be built fails the load, not
  // the first request.
  ASSIGN_OR_RETURN(std::unique_ptr<Scorer> first, s->NewScorer());
  s->tables_ = first->model->layout().tables;
  for (const trainer::DenseVariableSpec& v : first->model->dense_variables()) {
    s->dense_sizes_.emplace_back(v.name, v.num_floats());
    s->dense_specs_.emplace_back(v.name, v.shape);
  }
  RETURN_IF_ERROR(s->RefreshDense());
  s->free_.push_back(std::move(first));
  return s;
}

Servable::~Servable() {
  // The PS holds the tier open: close it before removing its files.
  job_ps_.reset();
  local_.reset();
  ps_.reset();
  if (options_.memory_limit_bytes > 0 && !options_.data_dir.empty()) {
    std::error_code ec;
    fs::remove_all(options_.data_dir, ec);
  }
}

absl::StatusOr<std::unique_ptr<Servable::Scorer>> Servable::NewScorer() const {
  auto sc = std::make_unique<Scorer>();
  const chief::JobSpec& spec = loaded_.spec;
  ASSIGN_OR_RETURN(sc->backend, trainer::CreateCpuBackend({.num_threads = 1}));
  ASSIGN_OR_RETURN(sc->model, trainer::Model::Create(spec.model, sc->backend.get()));
  ASSIGN_OR_RETURN(trainer::ModelBatchBuilder builder,
                   trainer::ModelBatchBuilder::Create(spec.model, features_));
  sc->builder = std::make_unique<trainer::ModelBatchBuilder>(std::move(builder));
  ASSIGN_OR_RETURN(input::ExampleParser parser,
                   input::ExampleParser::CreateLabelOptional(features_));
  sc->parser = std::make_unique<input::ExampleParser>(std::move(parser));
  sc->parser->InitBatch(&sc->columns);
  return sc;
}

absl::Status Servable::DeclareOn(ps::PsClient* job_ps) const {
  const chief::JobSpec& spec = loaded_.spec;
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Backend> backend,
                   trainer::CreateCpuBackend({.num_threads = 1}));
  ASSIGN_OR_RETURN(std::unique_ptr<trainer::Trainer> t,
                   trainer::Trainer::Create(job_ps, spec.model, spec.features,
                                            spec.ToTrainerOptions(), backend.get()));
  return t->Setup();
}

absl::Status Servable::LocateDenseOn(ps::PsClient* job_ps) const {
  std::vector<ps::DenseOptions> dense;
  for (const auto& [name, spec] : dense_specs_) {
    ps::DenseOptions d;
    d.name = name;
    d.shape = spec;
    dense.push_back(std::move(d));
  }
  return job_ps->LocateDense(dense);
}

const trainer::TableSpec* Servable::FindTable(std::string_view name) const {
  for (const trainer::TableSpec& t : tables_) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

int64_t Servable::DenseSize(std::string_view name) const {
  for (const auto& [n, size] : dense_sizes_) {
    if (n == name) return size;
  }
  return -1;
}

absl::Status Servable::AssignRows(std::string_view table, absl::Span<const uint64_t> keys,
                                  absl::Span<const float> weights) const {
  return ps_->AssignRows(absl::StrCat(loaded_.manifest.table_prefix, std::string(table)), keys,
                         weights);
}

absl::Status Servable::EraseRows(std::string_view table, absl::Span<const uint64_t> keys) const {
  return ps_->EraseRows(absl::StrCat(loaded_.manifest.table_prefix, std::string(table)), keys);
}

absl::Status Servable::AssignDense(std::string_view name, absl::Span<const float> values) const {
  return ps_->AssignDense(absl::StrCat(loaded_.manifest.table_prefix, std::string(name)), values);
}

absl::Status Servable::RefreshDense() const {
  auto dense = std::make_shared<std::vector<std::vector<float>>>();
  std::vector<ps::DensePull> pulls;
  dense->resize(dense_sizes_.size());
  for (size_t v = 0; v < dense_sizes_.size(); ++v) {
    (*dense)[v].resize(static_cast<size_t>(dense_sizes_[v].second));
    pulls.push_back({dense_sizes_[v].first, absl::MakeSpan((*dense)[v])});
  }
  if (!pulls.empty()) RETURN_IF_ERROR(job_ps_->PullBatch({}, pulls));
  std::lock_guard<std::mutex> lock(dense_mu_);
  dense_ = std::move(dense);
  return absl::OkStatus();
}

absl::Status Servable::Score(absl::Span<const std::string_view> examples, std::vector<float>* out,
                             size_t* bad_example) const {
  out->clear();
  if (examples.empty()) return absl::OkStatus();
  ScorerLease lease(this);
  ASSIGN_OR_RETURN(Scorer * sc, lease.Get());
  sc->columns.Clear();
  for (size_t i = 0; i < examples.size(); ++i) {
    absl::Status s = sc->parser->Append(examples[i], &sc->columns, nullptr);
    if (s.ok()) continue;
    // The caller's error (the parser says DATA_LOSS for bytes that are no
    // Example). The parser names the spec's on_missing; serving's own
    // policy is the flag.
    std::string why(s.message());
    if (!options_.fill_missing && absl::StrContains(why, "missing")) {
      absl::StrAppend(&why,
                      " (serving refuses examples that lack a feature; brook serve "
                      "--fill-missing fills the spec's default as training did)");
    }
    if (bad_example != nullptr) {
      *bad_example = i;
      return absl::InvalidArgumentError(why);
    }
    return absl::InvalidArgumentError(absl::StrCat("example ", i, ": ", why));
  }
  RETURN_IF_ERROR(sc->builder->Build(sc->columns, &sc->batch));
  const trainer::ModelLayout& layout = sc->model->layout();
  std::vector<ps::TablePull> pulls;
  sc->rows.resize(sc->batch.tables.size());
  for (size_t t = 0; t < sc->batch.tables.size(); ++t) {
    const trainer::TableKeys& keys = sc->batch.tables[t];
    sc->rows[t].resize(keys.unique_keys.size() * static_cast<size_t>(keys.dim));
    pulls.push_back({layout.tables[t].name, keys.unique_keys, absl::MakeSpan(sc->rows[t])});
  }
  RETURN_IF_ERROR(job_ps_->PullBatch(pulls, {}));
  std::shared_ptr<const std::vector<std::vector<float>>> dense;
  {
    std::lock_guard<std::mutex> lock(dense_mu_);
    dense = dense_;
  }
  std::vector<absl::Span<const float>> row_spans(sc->rows.begin(), sc->rows.end());
  std::vector<absl::Span<const float>> param_spans(dense->begin(), dense->end());
  RETURN_IF_ERROR(sc->model->Step(sc->batch, row_spans, param_spans, /*train=*/false, &sc->result));
  *out = sc->result.predictions;
  return absl::OkStatus();
}

ServableStats Servable::Stats() const {
  ServableStats st;
  const ps::ServerStats s = ps_->Stats();
  for (const ps::TableStats& t : s.tables) {
    st.rows_in_memory += t.rows;
    st.rows_in_rocksdb += t.cold_rows;
    st.bytes_in_memory += t.memory_bytes;
  }
  st.row_bytes_in_memory = s.memory_used_bytes;
  st.memory_limit_bytes = s.memory_limit_bytes;
  return st;
}

}  // namespace brook::serving
