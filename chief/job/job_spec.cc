// Parsing and validation of a job spec (job_spec.h). Each section has its own
// reader; the embedded feature and model specs go to their own parsers.
#include "chief/job/job_spec.h"

#include <algorithm>
#include <exception>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <string_view>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/local_path.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"
#include "yaml-cpp/yaml.h"

namespace brook::chief {
namespace {

using yaml::Describe;
using yaml::FieldError;
using yaml::LineOf;
using yaml::MapReader;

// What errors about the whole document name.
constexpr std::string_view kJobSpec = "job spec";

constexpr float kNoMax = std::numeric_limits<float>::max();

// The sections of a job spec that are not the model spec's own (model,
// sparse, dense): ModelSpec::FromYaml reads the whole document and must be
// told to leave these alone.
constexpr std::string_view kJobSections[] = {
    "name",           "priority",  "data",     "features",   "model_file", "optimizer",
    "embedding_init", "training",  "trainers", "checkpoint", "export",     "eval",
    "retention",      "init_from", "tables",   "cache"};

// The 1-based line of the first byte sequence that is not UTF-8 (RFC 3629:
// no overlong forms, no surrogates, nothing past U+10FFFF), or 0 if the text
// is valid.
int InvalidUtf8Line(std::string_view text) {
  int line = 1;
  for (size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      if (b == '\n') ++line;
      ++i;
      continue;
    }
    size_t n = 0;
    unsigned char lo = 0x80, hi = 0xBF;  // bounds of the second byte
    if (b >= 0xC2 && b <= 0xDF) {
      n = 1;
    } else if (b >= 0xE0 && b <= 0xEF) {
      n = 2;
      if (b == 0xE0) lo = 0xA0;
      if (b == 0xED) hi = 0x9F;
    } else if (b >= 0xF0 && b <= 0xF4) {
      n = 3;
      if (b == 0xF0) lo = 0x90;
      if (b == 0xF4) hi = 0x8F;
    } else {
      return line;
    }
    if (i + n >= text.size()) return line;
    for (size_t k = 1; k <= n; ++k) {
      const auto c = static_cast<unsigned char>(text[i + k]);
      if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) return line;
    }
    i += n + 1;
  }
  return 0;
}

std::string Resolve(const std::string& base_dir, const std::string& path) {
  if (base_dir.empty() || path.empty() || path[0] == '/' || path.find("://") != std::string::npos) {
    return path;
  }
  return (std::filesystem::path(base_dir) / path).lexically_normal().string();
}

// The job name becomes part of table names and Kubernetes object names, so
// it is an RFC 1123 DNS label.
bool IsDnsLabel(const std::string& s) {
  if (s.empty() || s.size() > 63 || s.front() == '-' || s.back() == '-') return false;
  for (char c : s) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-')) return false;
  }
  return true;
}

absl::Status Prefixed(const absl::Status& s, std::string_view prefix) {
  return absl::Status(s.code(), absl::StrCat(std::string(prefix), s.message()));
}

absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open ", std::string(what), " ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat("error reading ", std::string(what), " ", path));
  }
  return text.str();
}

// The text of the block under `key` (a top-level key), with every other
// line blanked and the key itself replaced by spaces, so that the embedded
// parser reports the job spec's own lines and columns.
std::string SectionText(const std::string& yaml, const YAML::Node& key, const YAML::Node& value) {
  std::vector<std::string> lines;
  std::stringstream in(yaml);
  for (std::string l; std::getline(in, l);) lines.push_back(l);
  const size_t first = static_cast<size_t>(value.Mark().line);
  const size_t column = static_cast<size_t>(value.Mark().column);
  const size_t key_column = static_cast<size_t>(key.Mark().column);
  std::string out(first, '\n');
  if (first >= lines.size()) return out;
  out += std::string(column, ' ') + lines[first].substr(std::min(column, lines[first].size()));
  out += '\n';
  for (size_t i = first + 1; i < lines.size(); ++i) {
    const std::string& l = lines[i];
    const size_t indent = l.find_first_not_of(' ');
    // The section ends at the next line that is neither blank, a comment,
    // nor indented deeper than its key.
    if (indent != std::string::npos && l[indent] != '#' && indent <= key_column) break;
    out += l + '\n';
  }
  return out;
}

YAML::Node KeyNode(const YAML::Node& map, const std::string& key) {
  for (const auto& pair : map) {
    if (pair.first.IsScalar() && pair.first.Scalar() == key) return pair.first;
  }
  return YAML::Node();
}

absl::Status ReadGlobs(const MapReader& r, const std::string& key, const std::string& base_dir,
                       bool required, std::vector<std::string>* out) {
  const YAML::Node v = r.Get(key);
  const std::string what =
      "a glob of TFRecord files or a list of them, e.g. [\"train-*.tfrecord\"]";
  if (v.IsScalar()) {
    if (v.Scalar().empty()) return r.Error(key, absl::StrCat("must be ", what));
    if (std::string why = NotLocalPathReason(v.Scalar()); !why.empty()) return r.Error(key, why);
    out->push_back(Resolve(base_dir, v.Scalar()));
  } else if (v.IsSequence()) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (!v[i].IsScalar() || v[i].Scalar().empty()) {
        return FieldError(absl::StrCat(r.Path(key), "[", i, "]"), LineOf(v[i]),
                          absl::StrCat("must be a non-empty glob, got ", Describe(v[i])));
      }
      if (std::string why = NotLocalPathReason(v[i].Scalar()); !why.empty()) {
        return FieldError(absl::StrCat(r.Path(key), "[", i, "]"), LineOf(v[i]), why);
      }
      out->push_back(Resolve(base_dir, v[i].Scalar()));
    }
  } else if (!v.IsNull()) {
    return r.Error(key, absl::StrCat("must be ", what, ", got ", Describe(v)));
  }
  if (required && out->empty())
    return r.Error(key, absl::StrCat("must name at least one glob: ", what));
  return absl::OkStatus();
}

absl::Status ReadData(const YAML::Node& node, const std::string& base_dir, JobDataSpec* out) {
  MapReader r(node, "data");
  RETURN_IF_ERROR(r.Check({"train", "eval", "compression", "records_per_unit", "on_corrupt"},
                          "{train: [\"train-*.tfrecord\"], eval: [\"test-*.tfrecord\"]}"));
  if (!r.Has("train")) return r.Missing("train", "a list of TFRecord globs to train on");
  RETURN_IF_ERROR(ReadGlobs(r, "train", base_dir, /*required=*/true, &out->train));
  if (r.Has("eval")) RETURN_IF_ERROR(ReadGlobs(r, "eval", base_dir, false, &out->eval));
  enum class C { kAuto, kNone, kGzip, kZlib } c = C::kAuto;
  RETURN_IF_ERROR(r.Choice<C>(
      "compression",
      {{"auto", C::kAuto}, {"none", C::kNone}, {"gzip", C::kGzip}, {"zlib", C::kZlib}}, &c));
  if (c == C::kNone) out->compression = storage::Compression::kNone;
  if (c == C::kGzip) out->compression = storage::Compression::kGzip;
  if (c == C::kZlib) out->compression = storage::Compression::kZlib;
  RETURN_IF_ERROR(
      r.Choice<bool>("on_corrupt", {{"fail", false}, {"skip", true}}, &out->skip_corrupt));
  return r.Int("records_per_unit", int64_t{0}, int64_t{1} << 40, &out->records_per_unit);
}

absl::Status ReadOptimizer(const YAML::Node& node, const std::string& path,
                           ps::OptimizerOptions* out) {
  MapReader r(node, path);
  RETURN_IF_ERROR(r.Check({"type", "learning_rate", "initial_accumulator", "beta1", "beta2",
                           "epsilon", "l1", "l2", "l2_shrinkage", "lr_power"},
                          "{type: adagrad, learning_rate: 0.05}"));
  if (!r.Has("type")) return r.Missing("type", "one of sgd, adagrad, adam, ftrl");
  ps::OptimizerOptions o;  // the hyper-parameters not given keep TF's defaults
  RETURN_IF_ERROR(r.Choice<ps::OptimizerKind>("type",
                                              {{"sgd", ps::OptimizerKind::kSgd},
                                               {"adagrad", ps::OptimizerKind::kAdagrad},
                                               {"adam", ps::OptimizerKind::kAdam},
                                               {"ftrl", ps::OptimizerKind::kFtrl}},
                                              &o.kind));
  std::vector<std::string> applies;
  switch (o.kind) {
    case ps::OptimizerKind::kSgd:
      applies = {"type", "learning_rate"};
      break;
    case ps::OptimizerKind::kAdagrad:
      applies = {"type", "learning_rate", "initial_accumulator", "epsilon"};
      break;
    case ps::OptimizerKind::kAdam:
      applies = {"type", "learning_rate", "beta1", "beta2", "epsilon"};
      break;
    case ps::OptimizerKind::kFtrl:
      applies = {"type",         "learning_rate", "initial_accumulator", "l1", "l2",
                 "l2_shrinkage", "lr_power"};
      break;
  }
  for (const auto& pair : node) {
    const std::string k = pair.first.Scalar();
    if (std::find(applies.begin(), applies.end(), k) == applies.end()) {
      return r.Error(k, absl::StrCat("does not apply to type: ", r.Get("type").Scalar(), " (",
                                     absl::StrJoin(applies, ", "), " do)"));
    }
  }
  if (!r.Has("learning_rate")) return r.Missing("learning_rate", "a number > 0");
  RETURN_IF_ERROR(r.Float("learning_rate", 0, kNoMax, true, &o.learning_rate));
  RETURN_IF_ERROR(r.Float("initial_accumulator", 0, kNoMax, false, &o.initial_accumulator));
  RETURN_IF_ERROR(r.Float("epsilon", 0, kNoMax, o.kind == ps::OptimizerKind::kAdam, &o.epsilon));
  for (const char* beta : {"beta1", "beta2"}) {
    float* b = std::string_view(beta) == "beta1" ? &o.beta1 : &o.beta2;
    RETURN_IF_ERROR(r.Float(beta, 0, 1, false, b));
    if (*b >= 1) return r.Error(beta, "must be in [0, 1), got 1");
  }
  RETURN_IF_ERROR(r.Float("l1", 0, kNoMax, false, &o.l1));
  RETURN_IF_ERROR(r.Float("l2", 0, kNoMax, false, &o.l2));
  RETURN_IF_ERROR(r.Float("l2_shrinkage", 0, kNoMax, false, &o.l2_shrinkage));
  RETURN_IF_ERROR(r.Float("lr_power", -kNoMax, 0, false, &o.lr_power));
  // Belt and braces: the PS's own definition of a valid optimizer (e.g.
  // Adagrad with initial_accumulator 0 and epsilon 0 divides by zero).
  ps::TableOptions t;
  t.name = path;
  t.dim = 1;
  t.optimizer = o;
  if (absl::Status s = t.Validate(); !s.ok())
    return FieldError(path, r.line(), std::string(s.message()));
  *out = o;
  return absl::OkStatus();
}

absl::Status ReadSchedule(const YAML::Node& node, trainer::LrSchedule* out) {
  MapReader r(node, "optimizer.schedule");
  RETURN_IF_ERROR(r.Check({"warmup_steps", "decay", "decay_steps", "decay_rate", "min_scale"},
                          "{warmup_steps: 1000, decay: cosine, decay_steps: 100000}"));
  trainer::LrSchedule s;
  RETURN_IF_ERROR(r.Int("warmup_steps", int64_t{0}, int64_t{1} << 40, &s.warmup_steps));
  RETURN_IF_ERROR(r.Choice<trainer::LrDecay>("decay",
                                             {{"constant", trainer::LrDecay::kConstant},
                                              {"linear", trainer::LrDecay::kLinear},
                                              {"cosine", trainer::LrDecay::kCosine},
                                              {"exponential", trainer::LrDecay::kExponential}},
                                             &s.decay));
  for (const char* k : {"decay_steps", "min_scale", "decay_rate"}) {
    const bool applies = std::string_view(k) == "decay_rate"
                             ? s.decay == trainer::LrDecay::kExponential
                             : s.decay != trainer::LrDecay::kConstant;
    if (r.Has(k) && !applies) {
      return r.Error(
          k, absl::StrCat("does not apply to decay: ", std::string(trainer::LrDecayName(s.decay))));
    }
  }
  if (s.decay != trainer::LrDecay::kConstant && !r.Has("decay_steps")) {
    return r.Missing("decay_steps", "an integer > 0 (the steps of the decay)");
  }
  RETURN_IF_ERROR(r.Int("decay_steps", int64_t{1}, int64_t{1} << 40, &s.decay_steps));
  RETURN_IF_ERROR(r.Double("decay_rate", 0, 1, true, &s.decay_rate));
  RETURN_IF_ERROR(r.Double("min_scale", 0, 1, false, &s.min_scale));
  if (absl::Status v = s.Validate(); !v.ok())
    return FieldError("optimizer.schedule", r.line(), std::string(v.message()));
  *out = s;
  return absl::OkStatus();
}

absl::Status ReadOptimizers(const YAML::Node& node, JobSpec* spec,
                            std::map<std::string, int>* table_lines) {
  MapReader r(node, "optimizer");
  RETURN_IF_ERROR(r.Check({"embedding", "dense", "tables", "schedule"},
                          "{embedding: {type: adagrad, learning_rate: 0.05}}"));
  if (r.Has("embedding")) {
    RETURN_IF_ERROR(
        ReadOptimizer(r.Get("embedding"), r.Path("embedding"), &spec->embedding_optimizer));
  }
  if (r.Has("dense")) {
    RETURN_IF_ERROR(ReadOptimizer(r.Get("dense"), r.Path("dense"), &spec->dense_optimizer));
  }
  if (r.Has("schedule")) RETURN_IF_ERROR(ReadSchedule(r.Get("schedule"), &spec->lr_schedule));
  if (!r.Has("tables")) return absl::OkStatus();
  const YAML::Node tables = r.Get("tables");
  if (tables.IsNull()) return absl::OkStatus();
  if (!tables.IsMap()) {
    return r.Error("tables",
                   "must be a map from table name to optimizer, e.g. "
                   "{C1: {type: ftrl, learning_rate: 0.1}}");
  }
  for (const auto& pair : tables) {
    const YAML::Node key = pair.first;
    if (!key.IsScalar())
      return FieldError(r.Path("tables"), LineOf(key), "keys must be table names");
    const std::string path = absl::StrCat(r.Path("tables"), ".", key.Scalar());
    if (!table_lines->emplace(key.Scalar(), LineOf(key)).second) {
      return FieldError(path, LineOf(key), "given twice");
    }
    RETURN_IF_ERROR(ReadOptimizer(pair.second, path, &spec->table_optimizers[key.Scalar()]));
  }
  return absl::OkStatus();
}

absl::Status ReadInitializer(const YAML::Node& node, ps::InitializerOptions* out,
                             const std::string& path = "embedding_init") {
  MapReader r(node, path);
  RETURN_IF_ERROR(r.Check({"type", "value", "low", "high", "mean", "stddev"},
                          "{type: uniform, low: -0.05, high: 0.05}"));
  if (!r.Has("type")) return r.Missing("type", "one of zeros, constant, uniform, truncated_normal");
  ps::InitializerOptions o;
  RETURN_IF_ERROR(
      r.Choice<ps::InitializerKind>("type",
                                    {{"zeros", ps::InitializerKind::kZeros},
                                     {"constant", ps::InitializerKind::kConstant},
                                     {"uniform", ps::InitializerKind::kUniform},
                                     {"truncated_normal", ps::InitializerKind::kTruncatedNormal}},
                                    &o.kind));
  std::vector<std::string> applies = {"type"};
  if (o.kind == ps::InitializerKind::kConstant) applies = {"type", "value"};
  if (o.kind == ps::InitializerKind::kUniform) applies = {"type", "low", "high"};
  if (o.kind == ps::InitializerKind::kTruncatedNormal) applies = {"type", "mean", "stddev"};
  for (const auto& pair : node) {
    const std::string k = pair.first.Scalar();
    if (std::find(applies.begin(), applies.end(), k) == applies.end()) {
      return r.Error(k, absl::StrCat("does not apply to type: ", r.Get("type").Scalar()));
    }
  }
  RETURN_IF_ERROR(r.Float("value", -kNoMax, kNoMax, false, &o.value));
  RETURN_IF_ERROR(r.Float("low", -kNoMax, kNoMax, false, &o.low));
  RETURN_IF_ERROR(r.Float("high", -kNoMax, kNoMax, false, &o.high));
  if (!(o.low < o.high)) {
    return r.Error("high", absl::StrCat("must be > low (low ", o.low, ", high ", o.high, ")"));
  }
  RETURN_IF_ERROR(r.Float("mean", -kNoMax, kNoMax, false, &o.mean));
  RETURN_IF_ERROR(r.Float("stddev", 0, kNoMax, true, &o.stddev));
  *out = o;
  return absl::OkStatus();
}

absl::Status ReadTraining(const YAML::Node& node, JobTrainingSpec* out) {
  MapReader r(node, "training");
  RETURN_IF_ERROR(r.Check({"batch_size", "epochs", "steps", "staleness", "accumulation_steps",
                           "dense_refresh_steps", "seed", "shuffle_buffer", "retry_seconds"},
                          "{batch_size: 256, epochs: 1}"));
  if (r.Has("epochs") == r.Has("steps")) {
    return FieldError("training.epochs", r.Has("steps") ? r.KeyLine("steps") : r.line(),
                      "give exactly one of training.epochs (passes over data.train) and "
                      "training.steps (optimizer steps)");
  }
  RETURN_IF_ERROR(r.Int("batch_size", 1, 1 << 20, &out->batch_size));
  RETURN_IF_ERROR(r.Int("epochs", 1, 1000000, &out->epochs));
  RETURN_IF_ERROR(r.Int("steps", int64_t{1}, int64_t{1} << 40, &out->steps));
  RETURN_IF_ERROR(r.Int("staleness", 0, 1024, &out->staleness));
  RETURN_IF_ERROR(r.Int("accumulation_steps", 1, 1024, &out->accumulation_steps));
  RETURN_IF_ERROR(r.Int("dense_refresh_steps", 1, 1000000, &out->dense_refresh_steps));
  RETURN_IF_ERROR(r.Uint("seed", &out->seed));
  RETURN_IF_ERROR(r.Int("shuffle_buffer", int64_t{0}, int64_t{1} << 28, &out->shuffle_buffer));
  return r.Int("retry_seconds", int64_t{1}, int64_t{7} * 24 * 3600, &out->retry_seconds);
}

absl::Status ReadCheckpoint(const YAML::Node& node, const std::string& base_dir,
                            JobCheckpointSpec* out) {
  MapReader r(node, "checkpoint");
  RETURN_IF_ERROR(r.Check({"dir", "interval_seconds", "interval_steps", "keep"},
                          "{dir: /ckpt/my-job, interval_seconds: 600}"));
  if (!r.Has("dir")) return r.Missing("dir", "the directory checkpoints are written under");
  RETURN_IF_ERROR(r.String("dir", &out->dir));
  if (std::string why = NotLocalPathReason(out->dir); !why.empty()) return r.Error("dir", why);
  out->dir = Resolve(base_dir, out->dir);
  RETURN_IF_ERROR(r.Int("interval_seconds", int64_t{0}, int64_t{1} << 32, &out->interval_seconds));
  RETURN_IF_ERROR(r.Int("interval_steps", int64_t{0}, int64_t{1} << 40, &out->interval_steps));
  return r.Int("keep", 1, 1000, &out->keep);
}

// `init_from: DIR` or `init_from: {path: DIR, tables: [T, ...]}`. Whether
// the source exists and holds the tables is checked at submit
// (chief/export/init_from.h): the spec itself names no file it must read.
absl::Status ReadInitFrom(const MapReader& root, const std::string& base_dir,
                          JobInitFromSpec* out) {
  const YAML::Node node = root.Get("init_from");
  if (node.IsScalar()) {
    RETURN_IF_ERROR(root.String("init_from", &out->path));
    if (std::string why = NotLocalPathReason(out->path); !why.empty()) {
      return root.Error("init_from", why);
    }
    out->path = Resolve(base_dir, out->path);
    out->path_line = root.KeyLine("init_from");
    return absl::OkStatus();
  }
  MapReader r(node, "init_from");
  RETURN_IF_ERROR(
      r.Check({"path", "tables"}, "{path: /models/my-job/my-job-20240101-000000-abcdef}"));
  if (!r.Has("path")) {
    return r.Missing("path", "the export or checkpoint directory of the job to start from");
  }
  RETURN_IF_ERROR(r.String("path", &out->path));
  if (std::string why = NotLocalPathReason(out->path); !why.empty()) return r.Error("path", why);
  out->path = Resolve(base_dir, out->path);
  out->path_line = r.KeyLine("path");
  if (!r.Has("tables")) return absl::OkStatus();
  const YAML::Node tables = r.Get("tables");
  if (!tables.IsSequence() || tables.size() == 0) {
    return r.Error("tables", absl::StrCat("must be a non-empty list of the model's table and dense "
                                          "variable names, got ",
                                          Describe(tables)));
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    const std::string path = absl::StrCat("init_from.tables[", i, "]");
    if (!tables[i].IsScalar() || tables[i].Scalar().empty()) {
      return FieldError(
          path, LineOf(tables[i]),
          absl::StrCat("must be a table or dense variable name, got ", Describe(tables[i])));
    }
    const std::string& name = tables[i].Scalar();
    if (std::find(out->tables.begin(), out->tables.end(), name) != out->tables.end()) {
      return FieldError(path, LineOf(tables[i]), absl::StrCat("\"", name, "\" is listed twice"));
    }
    out->tables.push_back(name);
    out->table_lines.push_back(LineOf(tables[i]));
  }
  return absl::OkStatus();
}

absl::Status ReadFeatures(const MapReader& root, const std::string& yaml,
                          const std::string& base_dir, JobSpec* spec) {
  if (!root.Has("features")) {
    return root.Missing("features",
                        "a feature spec file (features: feature_spec.yaml) or the "
                        "feature spec inline (features: {label: ..., features: [...]})");
  }
  const YAML::Node v = root.Get("features");
  if (v.IsScalar()) {
    if (std::string why = NotLocalPathReason(v.Scalar()); !why.empty()) {
      return root.Error("features", why);
    }
    spec->features_file = Resolve(base_dir, v.Scalar());
    absl::StatusOr<input::FeatureSpec> f = input::FeatureSpec::FromYamlFile(spec->features_file);
    if (!f.ok()) return Prefixed(f.status(), "features: ");
    spec->features = *std::move(f);
    return absl::OkStatus();
  }
  if (!v.IsMap()) {
    return root.Error("features",
                      absl::StrCat("must be a path or a feature spec map, got ", Describe(v)));
  }
  // A flow-style document ({name: x, features: {...}}) has no block of its
  // own to cut out; re-emitting the node loses the job spec's line numbers
  // but not the checks.
  const std::string text = root.node().Style() == YAML::EmitterStyle::Flow
                               ? YAML::Dump(v)
                               : SectionText(yaml, KeyNode(root.node(), "features"), v);
  absl::StatusOr<input::FeatureSpec> f = input::FeatureSpec::FromYaml(text);
  if (!f.ok()) return Prefixed(f.status(), "features: ");
  spec->features = *std::move(f);
  return absl::OkStatus();
}

absl::Status ReadModel(const MapReader& root, const std::string& yaml, const std::string& base_dir,
                       JobSpec* spec) {
  if (root.Has("model_file")) {
    for (const char* k : {"model", "sparse", "dense"}) {
      if (root.Has(k)) {
        return root.Error(k, "give either model_file or the model/sparse/dense sections, not both");
      }
    }
    RETURN_IF_ERROR(root.String("model_file", &spec->model_file));
    if (std::string why = NotLocalPathReason(spec->model_file); !why.empty()) {
      return root.Error("model_file", why);
    }
    spec->model_file = Resolve(base_dir, spec->model_file);
    absl::StatusOr<std::string> text = ReadFile(spec->model_file, "model spec");
    if (!text.ok()) return Prefixed(text.status(), "model_file: ");
    absl::StatusOr<trainer::ModelSpec> m = trainer::ModelSpec::FromYaml(*text, spec->features);
    if (!m.ok()) return Prefixed(m.status(), absl::StrCat("model_file ", spec->model_file, ": "));
    spec->model = *std::move(m);
    return absl::OkStatus();
  }
  if (!root.Has("model")) {
    return root.Missing("model",
                        "the model sections inline (model: {type: ...}, sparse: [...], "
                        "dense: [...], as in examples/adult/wide_deep.yaml) or "
                        "model_file: PATH");
  }
  absl::StatusOr<trainer::ModelSpec> m =
      trainer::ModelSpec::FromYaml(yaml, spec->features, kJobSections);
  if (!m.ok()) return m.status();  // its messages name the model field and line
  spec->model = *std::move(m);
  return absl::OkStatus();
}

// One entry of `tables` (ps::TableOptions has the meaning of each field).
absl::Status ReadTableSettings(const YAML::Node& node, const std::string& path,
                               trainer::TableSettings* out) {
  MapReader r(node, path);
  RETURN_IF_ERROR(r.Check({"memory_budget", "admission_min_count", "max_pending_keys", "ttl_steps",
                           "ttl_seconds", "gradient_clip", "bad_gradient", "initializer", "wire"},
                          "{memory_budget: 512MiB, admission_min_count: 2, ttl_seconds: 86400}"));
  if (r.Has("memory_budget")) {
    const YAML::Node v = r.Get("memory_budget");
    absl::StatusOr<uint64_t> bytes = v.IsScalar()
                                         ? ps::ParseByteSize(v.Scalar())
                                         : absl::InvalidArgumentError(absl::StrCat(
                                               Describe(v), " is not a size such as 512MiB"));
    if (!bytes.ok()) return r.Error("memory_budget", std::string(bytes.status().message()));
    if (*bytes == 0) return r.Error("memory_budget", "must be > 0 bytes");
    out->memory_budget_bytes = *bytes;
  }
  int64_t v = 0;
  if (r.Has("admission_min_count")) {
    RETURN_IF_ERROR(r.Int("admission_min_count", 0, ps::kMaxAdmissionMinCount, &v));
    out->admission_min_count = static_cast<uint32_t>(v);
  }
  if (r.Has("max_pending_keys")) {
    RETURN_IF_ERROR(r.Int("max_pending_keys", 1, int64_t{1} << 40, &v));
    out->max_pending_keys = static_cast<uint64_t>(v);
  }
  if (r.Has("ttl_steps")) {
    RETURN_IF_ERROR(r.Int("ttl_steps", 0, int64_t{1} << 40, &v));
    out->ttl_steps = v;
  }
  double d = 0;
  if (r.Has("ttl_seconds")) {
    RETURN_IF_ERROR(r.Double("ttl_seconds", 0, 1e12, false, &d));
    out->ttl_seconds = d;
  }
  float f = 0;
  if (r.Has("gradient_clip")) {
    RETURN_IF_ERROR(r.Float("gradient_clip", 0, kNoMax, false, &f));
    out->gradient_clip = f;
  }
  ps::BadGradientPolicy policy = ps::BadGradientPolicy::kReject;
  if (r.Has("bad_gradient")) {
    RETURN_IF_ERROR(r.Choice<ps::BadGradientPolicy>(
        "bad_gradient",
        {{"reject", ps::BadGradientPolicy::kReject}, {"zero", ps::BadGradientPolicy::kZero}},
        &policy));
    out->bad_gradient = policy;
  }
  if (r.Has("initializer")) {
    ps::InitializerOptions init;
    RETURN_IF_ERROR(ReadInitializer(r.Get("initializer"), &init, r.Path("initializer")));
    out->initializer = init;
  }
  ps::WirePrecision wire = ps::WirePrecision::kFp32;
  if (r.Has("wire")) {
    RETURN_IF_ERROR(r.Choice<ps::WirePrecision>("wire",
                                                {{"fp32", ps::WirePrecision::kFp32},
                                                 {"bf16", ps::WirePrecision::kBf16},
                                                 {"fp16", ps::WirePrecision::kFp16}},
                                                &wire));
    out->wire = wire;
  }
  return absl::OkStatus();
}

// `tables`: {default: SETTINGS, TABLE: SETTINGS, ...}; `lines` gets each
// key's line.
absl::Status ReadTables(const MapReader& root, JobSpec* spec, std::map<std::string, int>* lines) {
  const YAML::Node tables = root.Get("tables");
  if (tables.IsNull()) return absl::OkStatus();
  if (!tables.IsMap()) {
    return root.Error("tables",
                      "must be a map from a table name (or default) to its options, e.g. "
                      "{default: {memory_budget: 2GiB}, C1: {admission_min_count: 2}}");
  }
  for (const auto& pair : tables) {
    const YAML::Node key = pair.first;
    if (!key.IsScalar()) return FieldError("tables", LineOf(key), "keys must be table names");
    const std::string path = absl::StrCat("tables.", key.Scalar());
    if (!lines->emplace(key.Scalar(), LineOf(key)).second) {
      return FieldError(path, LineOf(key), "given twice");
    }
    trainer::TableSettings* out =
        key.Scalar() == "default" ? &spec->table_defaults : &spec->table_settings[key.Scalar()];
    RETURN_IF_ERROR(ReadTableSettings(pair.second, path, out));
  }
  if (spec->table_defaults.initializer && root.Has("embedding_init")) {
    return FieldError("tables.default.initializer", lines->at("default"),
                      absl::StrCat("embedding_init (line ", root.KeyLine("embedding_init"),
                                   ") sets it too; give one of them"));
  }
  return absl::OkStatus();
}

// `tables` must name tables the model has, and every table's options must
// be ones the PS accepts (a budget holds at least one row of the table).
absl::Status CheckTableSettings(const JobSpec& spec, const std::map<std::string, int>& lines) {
  if (lines.empty()) return absl::OkStatus();
  const std::vector<trainer::TableSpec>& tables = spec.model.Layout().tables;
  std::vector<std::string> names;
  for (const trainer::TableSpec& t : tables) names.push_back(t.name);
  for (const auto& [name, settings] : spec.table_settings) {
    if (std::find(names.begin(), names.end(), name) == names.end()) {
      return FieldError(absl::StrCat("tables.", name), lines.at(name),
                        absl::StrCat("the model has no table \"", name, "\"; its tables: ",
                                     absl::StrJoin(names, ", "), " (or default, for all of them)"));
    }
  }
  const trainer::TrainerOptions options = spec.ToTrainerOptions();
  for (const trainer::TableSpec& t : tables) {
    const absl::Status s = trainer::TableOptionsFor(t, options).Validate();
    if (s.ok()) continue;
    const std::string key = spec.table_settings.count(t.name) > 0 ? t.name : "default";
    const auto line = lines.find(key);
    // ps::TableOptions names its own fields; say the spec's instead.
    std::string field = absl::StrCat("tables.", key);
    std::string message(s.message());
    for (const auto& [ps_field, spec_field] :
         std::initializer_list<std::pair<const char*, const char*>>{
             {"memory_budget_bytes", "memory_budget"},
             {"admission_min_count", "admission_min_count"},
             {"max_pending_keys", "max_pending_keys"},
             {"ttl_steps", "ttl_steps"},
             {"ttl_seconds", "ttl_seconds"},
             {"gradient_clip", "gradient_clip"}}) {
      const std::string needle = absl::StrCat(": ", ps_field, " ");
      const size_t at = message.find(needle);
      if (at == std::string::npos) continue;
      absl::StrAppend(&field, ".", spec_field);
      message =
          absl::StrCat(message.substr(at + needle.size()), " (for ", message.substr(0, at), ")");
      break;
    }
    return FieldError(field, line == lines.end() ? 0 : line->second, message);
  }
  return absl::OkStatus();
}

// Per-table optimizers must name tables the model has, or a typo would
// silently train that table with the default optimizer.
absl::Status CheckTables(const JobSpec& spec, const std::map<std::string, int>& lines) {
  if (spec.table_optimizers.empty()) return absl::OkStatus();
  std::vector<std::string> names;
  for (const trainer::TableSpec& t : spec.model.Layout().tables) names.push_back(t.name);
  for (const auto& [table, options] : spec.table_optimizers) {
    if (std::find(names.begin(), names.end(), table) == names.end()) {
      return FieldError(absl::StrCat("optimizer.tables.", table), lines.at(table),
                        absl::StrCat("the model has no table \"", table,
                                     "\"; its tables: ", absl::StrJoin(names, ", ")));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<JobSpec> FromYamlImpl(const std::string& yaml, const std::string& base_dir) {
  const YAML::Node doc = yaml::LoadDocument(yaml);
  if (!doc || doc.IsNull()) return FieldError(kJobSpec, 0, "empty document");
  MapReader root(doc, "", std::string(kJobSpec));
  RETURN_IF_ERROR(
      root.Check({"name", "priority", "data", "features", "model", "sparse", "dense", "model_file",
                  "optimizer", "embedding_init", "training", "trainers", "checkpoint", "export",
                  "eval", "retention", "init_from", "tables", "cache"},
                 "{name: my-job, data: {...}, features: ..., model: {...}}"));
  JobSpec spec;
  if (!root.Has("name")) return root.Missing("name", "a DNS label such as my-job-1");
  RETURN_IF_ERROR(root.String("name", &spec.name));
  if (!IsDnsLabel(spec.name)) {
    return root.Error("name", absl::StrCat("\"", spec.name,
                                           "\" is not a DNS label: 1 to 63 of "
                                           "a-z, 0-9 and '-', not starting or ending with '-'"));
  }
  RETURN_IF_ERROR(root.Int("priority", -1000, 1000, &spec.priority));
  if (!root.Has("data"))
    return root.Missing("data", "a map such as {train: [\"train-*.tfrecord\"]}");
  RETURN_IF_ERROR(ReadData(root.Get("data"), base_dir, &spec.data));
  RETURN_IF_ERROR(ReadFeatures(root, yaml, base_dir, &spec));
  RETURN_IF_ERROR(ReadModel(root, yaml, base_dir, &spec));
  std::map<std::string, int> table_lines;
  if (root.Has("optimizer")) {
    RETURN_IF_ERROR(ReadOptimizers(root.Get("optimizer"), &spec, &table_lines));
  }
  RETURN_IF_ERROR(CheckTables(spec, table_lines));
  if (root.Has("embedding_init")) {
    RETURN_IF_ERROR(ReadInitializer(root.Get("embedding_init"), &spec.embedding_init));
  }
  if (!root.Has("training")) {
    return root.Missing("training",
                        "a map with epochs or steps, e.g. {batch_size: 256, epochs: 1}");
  }
  RETURN_IF_ERROR(ReadTraining(root.Get("training"), &spec.training));
  std::map<std::string, int> settings_lines;
  if (root.Has("tables")) RETURN_IF_ERROR(ReadTables(root, &spec, &settings_lines));
  RETURN_IF_ERROR(CheckTableSettings(spec, settings_lines));
  RETURN_IF_ERROR(root.Int("trainers", 1, 4096, &spec.trainers));
  RETURN_IF_ERROR(root.Int("retention", int64_t{0}, int64_t{366} * 86400, &spec.retention_seconds));
  if (root.Has("checkpoint")) {
    RETURN_IF_ERROR(ReadCheckpoint(root.Get("checkpoint"), base_dir, &spec.checkpoint));
  }
  if (root.Has("export")) {
    MapReader r(root.Get("export"), "export");
    RETURN_IF_ERROR(r.Check({"dir"}, "{dir: /models/my-job}"));
    if (!r.Has("dir")) return r.Missing("dir", "the directory the trained model is exported to");
    RETURN_IF_ERROR(r.String("dir", &spec.export_dir));
    if (std::string why = NotLocalPathReason(spec.export_dir); !why.empty()) {
      return r.Error("dir", why);
    }
    spec.export_dir = Resolve(base_dir, spec.export_dir);
  }
  if (root.Has("init_from")) RETURN_IF_ERROR(ReadInitFrom(root, base_dir, &spec.init_from));
  if (root.Has("cache")) {
    MapReader r(root.Get("cache"), "cache");
    RETURN_IF_ERROR(r.Check({"rows", "refresh_steps"}, "{rows: 1000000, refresh_steps: 2}"));
    if (!r.Has("rows")) return r.Missing("rows", "the rows a trainer caches per table");
    // 0: off, as `--cache-rows 0` (the same as leaving `cache:` out).
    RETURN_IF_ERROR(r.Int("rows", int64_t{0}, int64_t{1} << 32, &spec.cache.rows));
    RETURN_IF_ERROR(
        r.Int("refresh_steps", int64_t{1}, int64_t{1} << 20, &spec.cache.refresh_steps));
  }
  if (root.Has("eval")) {
    MapReader r(root.Get("eval"), "eval");
    RETURN_IF_ERROR(r.Check({"every_steps"}, "{every_steps: 1000}"));
    RETURN_IF_ERROR(r.Int("every_steps", int64_t{0}, int64_t{1} << 40, &spec.eval_every_steps));
    if (spec.eval_every_steps > 0 && spec.data.eval.empty()) {
      return r.Error("every_steps", "needs data.eval (the examples to evaluate on)");
    }
  }
  return spec;
}

}  // namespace

absl::StatusOr<JobSpec> JobSpec::FromYaml(const std::string& yaml, const std::string& base_dir) {
  // A spec's strings end up in JSON (CanonicalJson, the export manifest),
  // which holds UTF-8 only: nlohmann::json throws on any other byte, so such
  // a spec used to parse and then crash CanonicalJson with an uncaught
  // exception (found by tests/fuzz/job_spec_fuzzer). YAML text is Unicode.
  if (const int line = InvalidUtf8Line(yaml); line != 0) {
    return FieldError(kJobSpec, line, "the job spec is not valid UTF-8 text");
  }
  // yaml-cpp throws on syntax errors and some conversions; no exception may
  // leave this API.
  return yaml::NoThrow(kJobSpec, [&] {
    absl::StatusOr<JobSpec> spec = FromYamlImpl(yaml, base_dir);
    // An escape can still make a string JSON cannot hold (a lone UTF-16
    // surrogate written as a YAML escape): printing it now makes that an error.
    if (spec.ok()) (void)spec->CanonicalJson();
    return spec;
  });
}

absl::StatusOr<JobSpec> JobSpec::FromYamlFile(const std::string& path) {
  ASSIGN_OR_RETURN(std::string text, ReadFile(path, "job spec"));
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(path, ec);
  if (ec) abs = path;
  absl::StatusOr<JobSpec> spec = FromYaml(text, abs.parent_path().lexically_normal().string());
  if (!spec.ok()) return Prefixed(spec.status(), absl::StrCat(path, ": "));
  return spec;
}

}  // namespace brook::chief
