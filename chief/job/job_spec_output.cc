// What a parsed JobSpec gives the rest of Brook: trainer options, the
// canonical JSON form and its hash, and the data check of `--dry-run`.
#include <glob.h>

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "chief/job/job_spec.h"
#include "common/hash.h"

namespace brook::chief {
namespace {

using Json = nlohmann::json;  // std::map objects: keys come out sorted

std::string S(std::string_view v) { return std::string(v); }

// A float as the double with the shortest decimal that reads back as it, so
// 0.05f prints as 0.05, not 0.05000000074505806.
double F(float f) {
  char buf[32];
  for (int precision = 1; precision <= 9; ++precision) {
    std::snprintf(buf, sizeof(buf), "%.*g", precision, static_cast<double>(f));
    if (std::strtof(buf, nullptr) == f) break;
  }
  return std::strtod(buf, nullptr);
}

// Only the hyper-parameters of the optimizer's type, as the YAML takes them.
Json OptimizerJson(const ps::OptimizerOptions& o) {
  Json j = {{"type", std::string(ps::OptimizerKindName(o.kind))},
            {"learning_rate", F(o.learning_rate)}};
  switch (o.kind) {
    case ps::OptimizerKind::kSgd:
      break;
    case ps::OptimizerKind::kAdagrad:
      j["initial_accumulator"] = F(o.initial_accumulator);
      j["epsilon"] = F(o.epsilon);
      break;
    case ps::OptimizerKind::kAdam:
      j["beta1"] = F(o.beta1);
      j["beta2"] = F(o.beta2);
      j["epsilon"] = F(o.epsilon);
      break;
    case ps::OptimizerKind::kFtrl:
      j["initial_accumulator"] = F(o.initial_accumulator);
      j["l1"] = F(o.l1);
      j["l2"] = F(o.l2);
      j["l2_shrinkage"] = F(o.l2_shrinkage);
      j["lr_power"] = F(o.lr_power);
      break;
  }
  return j;
}

Json InitializerJson(const ps::InitializerOptions& o) {
  switch (o.kind) {
    case ps::InitializerKind::kZeros:
      return {{"type", "zeros"}};
    case ps::InitializerKind::kConstant:
      return {{"type", "constant"}, {"value", F(o.value)}};
    case ps::InitializerKind::kUniform:
      return {{"type", "uniform"}, {"low", F(o.low)}, {"high", F(o.high)}};
    case ps::InitializerKind::kTruncatedNormal:
      return {{"type", "truncated_normal"}, {"mean", F(o.mean)}, {"stddev", F(o.stddev)}};
  }
  return {};
}

Json FeaturesJson(const input::FeatureSpec& f) {
  Json features = Json::array();
  for (const input::FeatureSpecEntry& e : f.features) {
    Json j = {{"name", e.name}, {"type", S(input::FeatureTypeName(e.type))}};
    if (e.kind == input::FeatureKind::kFixed) {
      j["kind"] = "fixed";
      j["length"] = e.length;
      j["default"] = e.default_value;
    } else {
      j["kind"] = "varlen";
      j["max_length"] = e.max_length;
    }
    features.push_back(std::move(j));
  }
  return {{"label", {{"name", f.label_name}, {"type", S(input::FeatureTypeName(f.label_type))}}},
          {"on_missing", f.on_missing == input::MissingPolicy::kError ? "error" : "default"},
          {"on_type_mismatch",
           f.on_type_mismatch == input::MismatchPolicy::kDefault ? "default" : "error"},
          {"features", std::move(features)}};
}

std::string TransformName(trainer::DenseTransform t) {
  switch (t) {
    case trainer::DenseTransform::kNone:
      return "none";
    case trainer::DenseTransform::kLog1p:
      return "log1p";
    case trainer::DenseTransform::kStandardize:
      return "standardize";
    case trainer::DenseTransform::kBucketize:
      return "bucketize";
  }
  return "unknown";
}

// The model with every default resolved (table names, dims), so that two
// specs that train the same model hash the same.
Json ModelJson(const trainer::ModelSpec& m) {
  // Only the keys the type takes, so the text parses back (JSON is YAML)
  // into the same spec: lr has no embeddings, tower or dropout.
  const bool lr = m.type == trainer::ModelType::kLr;
  Json model = {{"type", S(trainer::ModelTypeName(m.type))},
                {"loss", S(trainer::LossName(m.loss))},
                {"seed", m.seed}};
  if (!lr) {
    model["embedding_dim"] = m.embedding_dim;
    model["activation"] = S(trainer::ActivationName(m.activation));
    model["dropout"] = F(m.dropout);
  }
  if (m.type == trainer::ModelType::kDlrm) {
    model["bottom"] = m.bottom;
    model["top"] = m.top;
  } else if (m.type != trainer::ModelType::kLr) {
    model["hidden"] = m.hidden;
  }
  Json sparse = Json::array();
  for (const trainer::SparseInputSpec& s : m.sparse) {
    Json j = {{"feature", s.feature},
              {"table", s.table.empty() ? s.feature : s.table},
              {"combiner", S(trainer::CombinerName(s.combiner))}};
    if (!lr) j["dim"] = m.SparseDim(s);
    sparse.push_back(std::move(j));
  }
  Json dense = Json::array();
  for (const trainer::DenseInputSpec& d : m.dense) {
    Json j = {{"feature", d.feature}, {"transform", TransformName(d.transform)}};
    if (d.transform == trainer::DenseTransform::kStandardize && d.has_moments) {
      j["mean"] = d.mean;
      j["stddev"] = d.stddev;
    }
    if (d.transform == trainer::DenseTransform::kBucketize) {
      j["boundaries"] = d.boundaries;
      if (!lr) j["dim"] = m.BucketDim(d);
    }
    dense.push_back(std::move(j));
  }
  return {{"model", std::move(model)}, {"sparse", std::move(sparse)}, {"dense", std::move(dense)}};
}

// Only the fields a `tables` entry sets (the section is omitted when empty).
Json TableSettingsJson(const trainer::TableSettings& t) {
  Json j = Json::object();
  if (t.memory_budget_bytes) j["memory_budget"] = *t.memory_budget_bytes;
  if (t.admission_min_count) j["admission_min_count"] = *t.admission_min_count;
  if (t.max_pending_keys) j["max_pending_keys"] = *t.max_pending_keys;
  if (t.ttl_steps) j["ttl_steps"] = *t.ttl_steps;
  if (t.ttl_seconds) j["ttl_seconds"] = *t.ttl_seconds;
  if (t.gradient_clip) j["gradient_clip"] = F(*t.gradient_clip);
  if (t.bad_gradient) {
    j["bad_gradient"] = *t.bad_gradient == ps::BadGradientPolicy::kZero ? "zero" : "reject";
  }
  if (t.initializer) j["initializer"] = InitializerJson(*t.initializer);
  if (t.wire) j["wire"] = S(ps::WirePrecisionName(*t.wire));
  return j;
}

Json ToJson(const JobSpec& s) {
  Json tables = Json::object();
  for (const auto& [name, o] : s.table_optimizers) tables[name] = OptimizerJson(o);
  Json schedule = {{"warmup_steps", s.lr_schedule.warmup_steps},
                   {"decay", S(trainer::LrDecayName(s.lr_schedule.decay))}};
  if (s.lr_schedule.decay != trainer::LrDecay::kConstant) {
    schedule["decay_steps"] = s.lr_schedule.decay_steps;
    schedule["min_scale"] = s.lr_schedule.min_scale;
  }
  if (s.lr_schedule.decay == trainer::LrDecay::kExponential) {
    schedule["decay_rate"] = s.lr_schedule.decay_rate;
  }
  Json training = {{"batch_size", s.training.batch_size},
                   {"staleness", s.training.staleness},
                   {"accumulation_steps", s.training.accumulation_steps},
                   {"dense_refresh_steps", s.training.dense_refresh_steps},
                   {"seed", s.training.seed},
                   {"shuffle_buffer", s.training.shuffle_buffer}};
  Json data = {
      {"train", s.data.train},
      {"eval", s.data.eval},
      {"compression", s.data.compression.has_value()
                          ? absl::AsciiStrToLower(S(storage::CompressionName(*s.data.compression)))
                          : std::string("auto")},
      {"records_per_unit", s.data.records_per_unit}};
  // Only when set, as retry_seconds below: the hash of a spec written
  // before the field existed stays what it was.
  if (s.data.skip_corrupt) data["on_corrupt"] = "skip";
  // Only when set, as `retention`: the hash of a spec written before the
  // field existed (recorded in its exports) stays what it was.
  if (s.training.retry_seconds != JobTrainingSpec::kDefaultRetrySeconds) {
    training["retry_seconds"] = s.training.retry_seconds;
  }
  if (s.training.steps > 0) {
    training["steps"] = s.training.steps;
  } else {
    training["epochs"] = s.training.epochs;
  }
  Json j = {
      {"name", s.name},
      {"priority", s.priority},
      {"data", std::move(data)},
      {"features", FeaturesJson(s.features)},
      {"optimizer",
       {{"embedding", OptimizerJson(s.embedding_optimizer)},
        {"dense", OptimizerJson(s.dense_optimizer)},
        {"tables", std::move(tables)},
        {"schedule", std::move(schedule)}}},
      {"embedding_init", InitializerJson(s.embedding_init)},
      {"training", std::move(training)},
      {"trainers", s.trainers},
      {"eval", {{"every_steps", s.eval_every_steps}}},
  };
  // Only when set: specs (and their hashes, in exports) written before the
  // field existed stay as they were.
  if (s.retention_seconds != JobSpec::kDefaultRetentionSeconds)
    j["retention"] = s.retention_seconds;
  if (!s.table_defaults.empty() || !s.table_settings.empty()) {
    Json table_settings = Json::object();
    if (!s.table_defaults.empty()) table_settings["default"] = TableSettingsJson(s.table_defaults);
    for (const auto& [name, t] : s.table_settings) table_settings[name] = TableSettingsJson(t);
    j["tables"] = std::move(table_settings);
  }
  // Where the feature and model specs came from does not change the job;
  // only their content is hashed.
  const Json model = ModelJson(s.model);
  for (auto it = model.begin(); it != model.end(); ++it) j[it.key()] = it.value();
  if (!s.checkpoint.dir.empty()) {
    j["checkpoint"] = {{"dir", s.checkpoint.dir},
                       {"interval_seconds", s.checkpoint.interval_seconds},
                       {"interval_steps", s.checkpoint.interval_steps},
                       {"keep", s.checkpoint.keep}};
  }
  if (!s.export_dir.empty()) j["export"] = {{"dir", s.export_dir}};
  // Only when set, like retention: a spec without it hashes as before.
  if (s.cache.enabled()) {
    j["cache"] = {{"rows", s.cache.rows}, {"refresh_steps", s.cache.refresh_steps}};
  }
  // Only when set, like retention: a spec without it hashes as before.
  if (!s.init_from.path.empty()) {
    Json init = {{"path", s.init_from.path}};
    if (!s.init_from.tables.empty()) init["tables"] = s.init_from.tables;
    j["init_from"] = std::move(init);
  }
  return j;
}

}  // namespace

trainer::TrainerOptions JobSpec::ToTrainerOptions() const {
  trainer::TrainerOptions o;
  o.staleness = training.staleness;
  o.dense_refresh_steps = training.dense_refresh_steps;
  o.max_steps = training.steps;  // 0 in epochs mode: until the data ends
  o.embedding_optimizer = embedding_optimizer;
  o.table_optimizers = table_optimizers;
  o.embedding_init = embedding_init;
  o.table_defaults = table_defaults;
  o.table_settings = table_settings;
  o.seed = training.seed;
  o.accumulation_steps = training.accumulation_steps;
  o.lr_schedule = lr_schedule;
  o.dense_optimizer = dense_optimizer;
  o.cache = cache;
  return o;
}

const ps::OptimizerOptions& JobSpec::OptimizerForTable(const std::string& table) const {
  auto it = table_optimizers.find(table);
  return it == table_optimizers.end() ? embedding_optimizer : it->second;
}

std::string JobSpec::CanonicalJson() const { return ToJson(*this).dump(); }

std::string JobSpec::SpecHash() const {
  char buf[17];
  std::snprintf(buf, sizeof(buf), "%016llx",
                static_cast<unsigned long long>(Hash64(CanonicalJson())));
  return buf;
}

absl::StatusOr<std::vector<JobSpec::GlobMatches>> JobSpec::CheckData() const {
  std::vector<GlobMatches> out;
  for (const auto* list : {&data.train, &data.eval}) {
    const std::string field = list == &data.train ? "data.train" : "data.eval";
    for (size_t i = 0; i < list->size(); ++i) {
      GlobMatches m{absl::StrCat(field, "[", i, "]"), (*list)[i], {}};
      glob_t g{};
      // No GLOB_ERR: a directory that does not exist is simply no match.
      const int rc = ::glob(m.pattern.c_str(), 0, nullptr, &g);
      if (rc == 0) {
        for (size_t k = 0; k < g.gl_pathc; ++k) m.files.emplace_back(g.gl_pathv[k]);
      }
      ::globfree(&g);
      if (rc != 0 && rc != GLOB_NOMATCH) {
        return absl::InvalidArgumentError(
            absl::StrCat(m.field, ": cannot expand \"", m.pattern, "\" (glob error ", rc, ")"));
      }
      if (m.files.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(m.field, ": \"", m.pattern, "\" matches no file"));
      }
      out.push_back(std::move(m));
    }
  }
  return out;
}

absl::StatusOr<input::DataCheckResult> JobSpec::CheckDataContents(
    const std::vector<GlobMatches>& matches) const {
  std::vector<input::DataCheckList> lists;
  for (const GlobMatches& m : matches) {
    lists.push_back({absl::StrCat(m.field, " \"", m.pattern, "\""), m.files});
  }
  return input::CheckData(features, lists,
                          {.compression = data.compression, .skip_corrupt = data.skip_corrupt});
}

}  // namespace brook::chief
