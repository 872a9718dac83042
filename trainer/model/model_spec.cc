#include "trainer/model/model_spec.h"

#include <cmath>
#include <exception>
#include <initializer_list>
#include <limits>
#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "common/yaml_fields.h"
#include "ps/options.h"
#include "yaml-cpp/yaml.h"

namespace brook::trainer {
namespace {

// Layer widths above this are surely typos (a 65536-wide layer over a batch
// of 4096 is already a 1 GiB activation).
constexpr int kMaxWidth = 1 << 16;
// A fixed feature longer than this is rejected by the feature spec too.
constexpr int kMaxLength = 1 << 20;
constexpr size_t kMaxBoundaries = 1 << 20;

// Our abseil has its own absl::string_view (not std::string_view).
absl::string_view AV(std::string_view s) { return absl::string_view(s.data(), s.size()); }

using yaml::LineSuffix;

constexpr std::string_view kModelSpec = "model spec";  // errors about the whole spec

absl::Status SpecError(int line, std::string_view msg) {
  return yaml::FieldError(kModelSpec, line, msg);
}
// An error at a field of the `model` section.
absl::Status FieldError(std::string_view field, int line, std::string_view msg) {
  return yaml::FieldError(absl::StrCat("model.", AV(field)), line, msg);
}
std::string SparseName(const SparseInputSpec& s, size_t index) {
  return s.feature.empty() ? absl::StrCat("sparse input #", index + 1)
                           : absl::StrCat("sparse input \"", s.feature, "\"");
}
std::string DenseName(const DenseInputSpec& d, size_t index) {
  return d.feature.empty() ? absl::StrCat("dense input #", index + 1)
                           : absl::StrCat("dense input \"", d.feature, "\"");
}
absl::Status SparseError(const SparseInputSpec& s, size_t index, int line, std::string_view msg) {
  return yaml::FieldError(SparseName(s, index), line, msg);
}
absl::Status DenseError(const DenseInputSpec& d, size_t index, int line, std::string_view msg) {
  return yaml::FieldError(DenseName(d, index), line, msg);
}

std::string TableName(const SparseInputSpec& s) { return s.table.empty() ? s.feature : s.table; }
std::string BucketTableName(const DenseInputSpec& d) { return d.feature + "_bucket"; }
bool HasWide(ModelType t) { return t == ModelType::kWideDeep || t == ModelType::kDeepFm; }

std::string_view TransformName(DenseTransform t) {
  switch (t) {
    case DenseTransform::kNone:
      return "none";
    case DenseTransform::kLog1p:
      return "log1p";
    case DenseTransform::kStandardize:
      return "standardize";
    case DenseTransform::kBucketize:
      return "bucketize";
  }
  return "unknown";
}

// ---- YAML reading. yaml-cpp may throw; FromYaml catches it.

bool ReadDouble(const YAML::Node& v, double* out) {
  return v.IsScalar() && YAML::convert<double>::decode(v, *out);
}

// The feature name an entry of sparse/dense gives, so that every message
// about the entry can name it ("" when it gives none).
std::string EntryFeature(const YAML::Node& node) {
  if (!node.IsMap()) return "";
  const YAML::Node f = node["feature"];
  return f && f.IsScalar() ? f.Scalar() : "";
}

// A list of layer widths such as [256, 128] at r's `key`.
absl::Status ReadWidths(const yaml::MapReader& r, const std::string& key, std::vector<int>* out) {
  if (!r.Has(key)) return absl::OkStatus();
  const YAML::Node v = r.Get(key);
  out->clear();
  if (!v.IsSequence()) return r.Error(key, absl::StrCat(key, " must be a list of widths"));
  for (size_t i = 0; i < v.size(); ++i) {
    int w = 0;
    if (!v[i].IsScalar() || !YAML::convert<int>::decode(v[i], w) || w < 1 || w > kMaxWidth) {
      return yaml::FieldError(r.Path(key), yaml::LineOf(v[i]),
                              absl::StrCat(key, "[", i, "] must be an integer in [1, ", kMaxWidth,
                                           "], got ", yaml::Describe(v[i])));
    }
    out->push_back(w);
  }
  return absl::OkStatus();
}

absl::Status ReadModel(const YAML::Node& node, ModelSpec* spec) {
  yaml::MapReader r(node, "model");
  RETURN_IF_ERROR(r.Check(
      {"type", "embedding_dim", "hidden", "bottom", "top", "activation", "dropout", "loss", "seed"},
      "{type: deepfm, embedding_dim: 16}"));
  if (!r.Has("type")) return r.Missing("type", "one of lr, wide_deep, deepfm, dlrm");
  RETURN_IF_ERROR(r.Choice("type", "model type",
                           {{"lr", ModelType::kLr},
                            {"wide_deep", ModelType::kWideDeep},
                            {"deepfm", ModelType::kDeepFm},
                            {"dlrm", ModelType::kDlrm}},
                           &spec->type));
  RETURN_IF_ERROR(r.Int("embedding_dim", 1, ps::kMaxDim, &spec->embedding_dim));
  RETURN_IF_ERROR(ReadWidths(r, "hidden", &spec->hidden));
  RETURN_IF_ERROR(ReadWidths(r, "bottom", &spec->bottom));
  RETURN_IF_ERROR(ReadWidths(r, "top", &spec->top));
  RETURN_IF_ERROR(r.Choice(
      "activation", "activation",
      {{"relu", Activation::kRelu}, {"sigmoid", Activation::kSigmoid}, {"tanh", Activation::kTanh}},
      &spec->activation));
  if (r.Has("dropout")) {
    double d = 0;
    if (!ReadDouble(r.Get("dropout"), &d) || !(d >= 0.0 && d < 1.0)) {
      return r.Error("dropout", absl::StrCat("must be a number in [0, 1), got ",
                                             yaml::Describe(r.Get("dropout"))));
    }
    spec->dropout = static_cast<float>(d);
  }
  RETURN_IF_ERROR(r.Choice(
      "loss", "loss", {{"logloss", LossKind::kLogLoss}, {"mse", LossKind::kMse}}, &spec->loss));
  RETURN_IF_ERROR(r.Uint("seed", &spec->seed));
  // Keys that do not apply to the chosen type are errors, not silently unused.
  auto reject = [&](const std::string& key, absl::string_view why) -> absl::Status {
    if (!r.Has(key)) return absl::OkStatus();
    return r.Error(key, absl::StrCat("does not apply to type ", AV(ModelTypeName(spec->type)), " (",
                                     why, ")"));
  };
  const ModelType t = spec->type;
  if (t != ModelType::kWideDeep && t != ModelType::kDeepFm) {
    RETURN_IF_ERROR(reject("hidden", "only wide_deep and deepfm have a deep tower"));
  }
  if (t != ModelType::kDlrm) {
    RETURN_IF_ERROR(reject("bottom", "only dlrm has bottom/top MLPs"));
    RETURN_IF_ERROR(reject("top", "only dlrm has bottom/top MLPs"));
  }
  if (t == ModelType::kLr) {
    RETURN_IF_ERROR(reject("activation", "lr has no hidden layers"));
    RETURN_IF_ERROR(reject("dropout", "lr has no hidden layers"));
    RETURN_IF_ERROR(reject("embedding_dim", "lr weights are dim-1 tables"));
  }
  return absl::OkStatus();
}

// `feature` of a sparse or dense entry: required, a non-empty name.
absl::Status ReadEntryFeature(const yaml::MapReader& r) {
  if (!r.Has("feature")) return r.Missing("feature", "");
  const YAML::Node f = r.Get("feature");
  if (!f.IsScalar() || f.Scalar().empty()) return r.Error("feature", "feature must be a name");
  return absl::OkStatus();
}

// `dim` of a sparse or dense entry (the table's dim when not the model's).
absl::Status ReadEntryDim(const yaml::MapReader& r, ModelType type, int* dim) {
  if (r.Has("dim") && type == ModelType::kLr) {
    return r.Error("dim", "dim does not apply to type lr (its weights are dim-1 tables)");
  }
  return r.Int("dim", 1, ps::kMaxDim, dim);
}

absl::Status ReadSparse(const YAML::Node& node, size_t index, ModelType type,
                        SparseInputSpec* out) {
  out->line = yaml::LineOf(node);
  out->feature = EntryFeature(node);
  yaml::MapReader r = yaml::MapReader::Named(node, SparseName(*out, index));
  RETURN_IF_ERROR(r.Check({"feature", "table", "dim", "combiner"},
                          "{feature: C1, table: C1, dim: 16, combiner: sum}"));
  RETURN_IF_ERROR(ReadEntryFeature(r));
  if (r.Has("table")) {
    const YAML::Node t = r.Get("table");
    if (!t.IsScalar() || t.Scalar().empty()) return r.Error("table", "table must be a name");
    out->table = t.Scalar();
  }
  RETURN_IF_ERROR(ReadEntryDim(r, type, &out->dim));
  return r.Choice("combiner", "combiner", {{"sum", Combiner::kSum}, {"mean", Combiner::kMean}},
                  &out->combiner);
}

absl::Status ReadDense(const YAML::Node& node, size_t index, ModelType type, DenseInputSpec* out) {
  out->line = yaml::LineOf(node);
  out->feature = EntryFeature(node);
  yaml::MapReader r = yaml::MapReader::Named(node, DenseName(*out, index));
  RETURN_IF_ERROR(r.Check({"feature", "transform", "mean", "stddev", "boundaries", "dim"},
                          "{feature: I1, transform: log1p}"));
  RETURN_IF_ERROR(ReadEntryFeature(r));
  RETURN_IF_ERROR(r.Choice("transform", "transform",
                           {{"none", DenseTransform::kNone},
                            {"log1p", DenseTransform::kLog1p},
                            {"standardize", DenseTransform::kStandardize},
                            {"bucketize", DenseTransform::kBucketize}},
                           &out->transform));
  if (r.Has("mean") && (!ReadDouble(r.Get("mean"), &out->mean) || !std::isfinite(out->mean))) {
    return r.Error(
        "mean", absl::StrCat("mean must be a finite number, got ", yaml::Describe(r.Get("mean"))));
  }
  RETURN_IF_ERROR(r.Double("stddev", 0, std::numeric_limits<double>::max(),
                           /*min_exclusive=*/true, &out->stddev));
  if (r.Has("boundaries")) {
    const YAML::Node v = r.Get("boundaries");
    if (!v.IsSequence()) return r.Error("boundaries", "boundaries must be a list of numbers");
    for (size_t i = 0; i < v.size(); ++i) {
      double b = 0;
      if (!ReadDouble(v[i], &b) || !std::isfinite(b)) {
        return yaml::FieldError(r.Path("boundaries"), yaml::LineOf(v[i]),
                                absl::StrCat("boundaries[", i, "] must be a finite number, got ",
                                             yaml::Describe(v[i])));
      }
      out->boundaries.push_back(b);
    }
  }
  RETURN_IF_ERROR(ReadEntryDim(r, type, &out->dim));
  const std::string_view tname = TransformName(out->transform);
  auto not_for = [&](const std::string& key, absl::string_view only) -> absl::Status {
    if (!r.Has(key)) return absl::OkStatus();
    return r.Error(
        key, absl::StrCat("\"", key, "\" applies only to transform: ", only, ", not ", AV(tname)));
  };
  if (out->transform != DenseTransform::kStandardize) {
    RETURN_IF_ERROR(not_for("mean", "standardize"));
    RETURN_IF_ERROR(not_for("stddev", "standardize"));
  } else if (r.Has("mean") != r.Has("stddev")) {
    return r.Error(r.Has("mean") ? "mean" : "stddev",
                   "give mean and stddev together, or neither (then ComputeMoments fills them)");
  } else {
    out->has_moments = r.Has("mean");
  }
  if (out->transform != DenseTransform::kBucketize) {
    RETURN_IF_ERROR(not_for("boundaries", "bucketize"));
    RETURN_IF_ERROR(not_for("dim", "bucketize"));
  } else if (!r.Has("boundaries")) {
    return r.MapError("transform: bucketize needs \"boundaries\"");
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelSpec> FromYamlImpl(const std::string& yaml_text,
                                       const input::FeatureSpec& features,
                                       absl::Span<const std::string_view> other_sections) {
  const YAML::Node root = yaml::LoadDocument(yaml_text);
  if (!root || root.IsNull()) return SpecError(0, "empty document");
  std::vector<std::string_view> allowed = {"model", "sparse", "dense"};
  allowed.insert(allowed.end(), other_sections.begin(), other_sections.end());
  yaml::MapReader r = yaml::MapReader::Named(root, std::string(kModelSpec));
  RETURN_IF_ERROR(r.Check(allowed, "{model: {type: lr}, sparse: [{feature: C1}]}"));
  // The model type decides which keys apply inside sparse/dense entries, so
  // `model` comes first.
  if (!r.Has("model")) return r.Missing("model", "model: {type: ...}");
  ModelSpec spec;
  RETURN_IF_ERROR(ReadModel(r.Get("model"), &spec));
  RETURN_IF_ERROR(r.ForEachItem("sparse", [&](const YAML::Node& item, size_t i) {
    return ReadSparse(item, i, spec.type, &spec.sparse.emplace_back());
  }));
  RETURN_IF_ERROR(r.ForEachItem("dense", [&](const YAML::Node& item, size_t i) {
    return ReadDense(item, i, spec.type, &spec.dense.emplace_back());
  }));
  // Record each dense feature's length so the spec alone sizes the model.
  for (DenseInputSpec& d : spec.dense) {
    const int fi = features.IndexOf(d.feature);
    if (fi >= 0) d.length = features.features[fi].length;
  }
  RETURN_IF_ERROR(spec.ValidateAgainst(features));
  return spec;
}

}  // namespace

std::string_view ModelTypeName(ModelType t) {
  switch (t) {
    case ModelType::kLr:
      return "lr";
    case ModelType::kWideDeep:
      return "wide_deep";
    case ModelType::kDeepFm:
      return "deepfm";
    case ModelType::kDlrm:
      return "dlrm";
  }
  return "unknown";
}

absl::StatusOr<ModelSpec> ModelSpec::FromYaml(const std::string& yaml_text,
                                              const input::FeatureSpec& features,
                                              absl::Span<const std::string_view> other_sections) {
  return yaml::NoThrow(kModelSpec,
                       [&] { return FromYamlImpl(yaml_text, features, other_sections); });
}

int ModelSpec::SparseDim(const SparseInputSpec& s) const {
  if (type == ModelType::kLr) return 1;
  return s.dim > 0 ? s.dim : embedding_dim;
}

int ModelSpec::BucketDim(const DenseInputSpec& d) const {
  if (type == ModelType::kLr) return 1;
  return d.dim > 0 ? d.dim : embedding_dim;
}

absl::Status ModelSpec::Validate() const {
  if (embedding_dim < 1 || embedding_dim > ps::kMaxDim) {
    return FieldError("embedding_dim", 0,
                      absl::StrCat("must be in [1, ", ps::kMaxDim, "], got ", embedding_dim));
  }
  for (const auto& [name, widths] :
       {std::pair<std::string_view, const std::vector<int>*>{"hidden", &hidden},
        {"bottom", &bottom},
        {"top", &top}}) {
    for (size_t i = 0; i < widths->size(); ++i) {
      if ((*widths)[i] < 1 || (*widths)[i] > kMaxWidth) {
        return FieldError(
            name, 0, absl::StrCat("[", i, "] must be in [1, ", kMaxWidth, "], got ", (*widths)[i]));
      }
    }
  }
  if (!(dropout >= 0.0f && dropout < 1.0f)) {
    return FieldError("dropout", 0, absl::StrCat("must be in [0, 1), got ", dropout));
  }
  if (sparse.empty() && dense.empty()) {
    return SpecError(0, "no inputs: give at least one sparse or dense input");
  }

  // Tables by name: dim and the line that first declared it.
  struct TableInfo {
    int dim;
    int line;
    std::string who;
  };
  absl::flat_hash_map<std::string, TableInfo> tables;
  auto add_table = [&](const std::string& name, int dim, int line,
                       const std::string& who) -> absl::Status {
    auto [it, inserted] = tables.emplace(name, TableInfo{dim, line, who});
    if (!inserted && it->second.dim != dim) {
      return absl::InvalidArgumentError(
          absl::StrCat(who, LineSuffix(line), ": table \"", name, "\" has dim ", dim,
                       " here but dim ", it->second.dim, " for ", it->second.who,
                       LineSuffix(it->second.line), "; inputs sharing a table must agree"));
    }
    return absl::OkStatus();
  };

  absl::flat_hash_map<std::string, int> sparse_lines;
  for (size_t i = 0; i < sparse.size(); ++i) {
    const SparseInputSpec& s = sparse[i];
    if (s.feature.empty()) return SparseError(s, i, s.line, "feature must be a name");
    if (s.dim < 0 || s.dim > ps::kMaxDim) {
      return SparseError(s, i, s.line, absl::StrCat("dim must be in [1, ", ps::kMaxDim, "]"));
    }
    if (auto [it, inserted] = sparse_lines.emplace(s.feature, s.line); !inserted) {
      return SparseError(
          s, i, s.line,
          absl::StrCat("feature listed twice in sparse (first on line ", it->second, ")"));
    }
    RETURN_IF_ERROR(add_table(TableName(s), SparseDim(s), s.line,
                              absl::StrCat("sparse input \"", s.feature, "\"")));
  }
  absl::flat_hash_map<std::string, int> dense_lines;
  for (size_t i = 0; i < dense.size(); ++i) {
    const DenseInputSpec& d = dense[i];
    if (d.feature.empty()) return DenseError(d, i, d.line, "feature must be a name");
    if (auto [it, inserted] = dense_lines.emplace(d.feature, d.line); !inserted) {
      return DenseError(
          d, i, d.line,
          absl::StrCat("feature listed twice in dense (first on line ", it->second, ")"));
    }
    if (d.length < 1 || d.length > kMaxLength) {
      return DenseError(d, i, d.line, absl::StrCat("length must be in [1, ", kMaxLength, "]"));
    }
    if (d.transform == DenseTransform::kStandardize && d.has_moments &&
        !(std::isfinite(d.mean) && std::isfinite(d.stddev) && d.stddev > 0)) {
      return DenseError(d, i, d.line, "standardize needs a finite mean and a finite stddev > 0");
    }
    if (d.transform != DenseTransform::kBucketize) continue;
    if (d.boundaries.empty() || d.boundaries.size() > kMaxBoundaries) {
      return DenseError(d, i, d.line,
                        absl::StrCat("bucketize needs 1 to ", kMaxBoundaries, " boundaries"));
    }
    for (size_t b = 0; b < d.boundaries.size(); ++b) {
      if (!std::isfinite(d.boundaries[b]) || (b > 0 && !(d.boundaries[b - 1] < d.boundaries[b]))) {
        return DenseError(d, i, d.line,
                          absl::StrCat("boundaries must be finite and strictly increasing (at "
                                       "boundaries[",
                                       b, "])"));
      }
    }
    if (d.length != 1) {
      return DenseError(
          d, i, d.line,
          absl::StrCat("bucketize needs a length-1 feature, this one has length ", d.length));
    }
    if (d.dim < 0 || d.dim > ps::kMaxDim) {
      return DenseError(d, i, d.line, absl::StrCat("dim must be in [1, ", ps::kMaxDim, "]"));
    }
    const std::string name = BucketTableName(d);
    if (tables.contains(name)) {
      return DenseError(d, i, d.line,
                        absl::StrCat("its bucket table \"", name, "\" collides with the table of ",
                                     tables[name].who, LineSuffix(tables[name].line)));
    }
    RETURN_IF_ERROR(
        add_table(name, BucketDim(d), d.line, absl::StrCat("dense input \"", d.feature, "\"")));
  }
  if (HasWide(type)) {
    for (const auto& [name, info] : tables) {
      const std::string wide = name + "_wide";
      if (auto it = tables.find(wide); it != tables.end()) {
        return absl::InvalidArgumentError(
            absl::StrCat(it->second.who, LineSuffix(it->second.line), ": table \"", wide,
                         "\" collides with the wide table generated for table \"", name, "\" of ",
                         info.who, LineSuffix(info.line)));
      }
    }
  }
  if (type == ModelType::kDeepFm || type == ModelType::kDlrm) {
    const ModelLayout layout = Layout();
    for (const InputLayout& in : layout.inputs) {
      if (in.dim != layout.inputs[0].dim) {
        const InputLayout& first = layout.inputs[0];
        auto describe = [&](const InputLayout& x) {
          return x.bucketized ? absl::StrCat("dense input \"", dense[x.source].feature, "\"",
                                             LineSuffix(dense[x.source].line))
                              : absl::StrCat("sparse input \"", sparse[x.source].feature, "\"",
                                             LineSuffix(sparse[x.source].line));
        };
        return absl::InvalidArgumentError(
            absl::StrCat(describe(in), ": dim ", in.dim, " differs from dim ", first.dim, " of ",
                         describe(first), "; ", AV(ModelTypeName(type)),
                         " pairs embeddings up, so every sparse input needs the same dim"));
      }
    }
    if (type == ModelType::kDlrm && layout.dense_width == 0 && layout.inputs.size() < 2) {
      return SpecError(0,
                       "dlrm needs dense inputs or at least two sparse inputs (nothing to "
                       "interact)");
    }
  }
  return absl::OkStatus();
}

absl::Status ModelSpec::ValidateAgainst(const input::FeatureSpec& features) const {
  RETURN_IF_ERROR(Validate());
  for (size_t i = 0; i < sparse.size(); ++i) {
    const SparseInputSpec& s = sparse[i];
    const int fi = features.IndexOf(s.feature);
    if (fi < 0) {
      return SparseError(s, i, s.line,
                         absl::StrCat("feature \"", s.feature, "\" is not in the feature spec"));
    }
    const input::FeatureSpecEntry& f = features.features[fi];
    if (f.kind == input::FeatureKind::kFixed && f.type != input::FeatureType::kInt64) {
      return SparseError(s, i, s.line,
                         absl::StrCat("feature \"", s.feature, "\" is a fixed ",
                                      AV(input::FeatureTypeName(f.type)),
                                      " feature; sparse inputs need varlen (int64 or bytes) or "
                                      "fixed int64 ids (list a float under dense)"));
    }
  }
  for (size_t i = 0; i < dense.size(); ++i) {
    const DenseInputSpec& d = dense[i];
    const int fi = features.IndexOf(d.feature);
    if (fi < 0) {
      return DenseError(d, i, d.line,
                        absl::StrCat("feature \"", d.feature, "\" is not in the feature spec"));
    }
    const input::FeatureSpecEntry& f = features.features[fi];
    if (f.kind != input::FeatureKind::kFixed || f.type == input::FeatureType::kBytes) {
      return DenseError(d, i, d.line,
                        absl::StrCat("feature \"", d.feature,
                                     "\" is varlen; dense inputs need fixed float or int64 "
                                     "features (list id lists under sparse)"));
    }
    if (f.length != d.length) {
      return DenseError(d, i, d.line,
                        absl::StrCat("length ", d.length,
                                     " recorded in the model spec, but the "
                                     "feature spec says ",
                                     f.length));
    }
  }
  return absl::OkStatus();
}

ModelLayout ModelSpec::Layout() const {
  ModelLayout layout;
  absl::flat_hash_map<std::string, int> index;
  auto table = [&](const std::string& name, int dim) {
    auto [it, inserted] = index.emplace(name, static_cast<int>(layout.tables.size()));
    if (inserted) layout.tables.push_back(TableSpec{name, dim, -1});
    return it->second;
  };
  for (size_t i = 0; i < sparse.size(); ++i) {
    const int dim = SparseDim(sparse[i]);
    layout.inputs.push_back(InputLayout{
        false, static_cast<int>(i), table(TableName(sparse[i]), dim), -1, dim, sparse[i].combiner});
  }
  for (size_t i = 0; i < dense.size(); ++i) {
    const DenseInputSpec& d = dense[i];
    if (d.transform != DenseTransform::kBucketize) {
      layout.dense_width += d.length;
      continue;
    }
    const int dim = BucketDim(d);
    layout.inputs.push_back(InputLayout{true, static_cast<int>(i), table(BucketTableName(d), dim),
                                        -1, dim, Combiner::kSum});
  }
  if (HasWide(type)) {
    const int deep_tables = static_cast<int>(layout.tables.size());
    for (int t = 0; t < deep_tables; ++t) {
      layout.tables.push_back(TableSpec{layout.tables[t].name + "_wide", 1, t});
    }
    for (InputLayout& in : layout.inputs) in.wide_table = deep_tables + in.table;
  }
  return layout;
}

// ---- Moments.

MomentsAccumulator::MomentsAccumulator(const ModelSpec& spec, const input::FeatureSpec& features)
    : features_(&features) {
  for (size_t i = 0; i < spec.dense.size(); ++i) {
    const DenseInputSpec& d = spec.dense[i];
    if (d.transform != DenseTransform::kStandardize || d.has_moments) continue;
    Moments m;
    m.dense_index = static_cast<int>(i);
    m.column = features.IndexOf(d.feature);
    m.length = d.length;
    m.is_float = m.column >= 0 && features.features[m.column].type == input::FeatureType::kFloat;
    moments_.push_back(m);
  }
}

absl::Status MomentsAccumulator::Add(const input::ColumnarBatch& batch) {
  if (batch.columns.size() != features_->features.size()) {
    return absl::InvalidArgumentError(absl::StrCat("ComputeMoments: batch has ",
                                                   batch.columns.size(),
                                                   " columns, the feature "
                                                   "spec ",
                                                   features_->features.size()));
  }
  for (const Moments& m : moments_) {
    if (m.column < 0) return absl::FailedPreconditionError("ComputeMoments: spec not validated");
    const input::Column& c = batch.columns[m.column];
    const size_t n = m.is_float ? c.floats.size() : c.int64s.size();
    if (n != batch.num_rows * m.length) {
      return absl::InvalidArgumentError(
          absl::StrCat("ComputeMoments: column of feature \"", features_->features[m.column].name,
                       "\" has ", n, " values, expected ", batch.num_rows, " rows x ", m.length));
    }
  }
  for (Moments& m : moments_) {
    const input::Column& c = batch.columns[m.column];
    // Moments of this batch (two-pass), then merged (Chan et al.), which is
    // stable where a running sum of squares is not. Non-finite values are
    // skipped.
    double count = 0, sum = 0;
    const size_t n = batch.num_rows * m.length;
    auto value = [&](size_t i) {
      return m.is_float ? static_cast<double>(c.floats[i]) : static_cast<double>(c.int64s[i]);
    };
    for (size_t i = 0; i < n; ++i) {
      const double v = value(i);
      if (!std::isfinite(v)) continue;
      count += 1;
      sum += v;
    }
    if (count == 0) continue;
    const double mean = sum / count;
    double m2 = 0;
    for (size_t i = 0; i < n; ++i) {
      const double v = value(i);
      if (std::isfinite(v)) m2 += (v - mean) * (v - mean);
    }
    const double total = m.count + count;
    const double delta = mean - m.mean;
    m.mean += delta * count / total;
    m.m2 += m2 + delta * delta * m.count * count / total;
    m.count = total;
  }
  return absl::OkStatus();
}

absl::Status MomentsAccumulator::Apply(ModelSpec* spec) const {
  for (const Moments& m : moments_) {
    if (m.count == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("ComputeMoments: dense input \"", spec->dense[m.dense_index].feature,
                       "\" saw no finite values; cannot standardize it"));
    }
  }
  for (const Moments& m : moments_) {
    DenseInputSpec& d = spec->dense[m.dense_index];
    const double stddev = std::sqrt(m.m2 / m.count);
    d.mean = m.mean;
    d.stddev = (stddev > 0 && std::isfinite(stddev)) ? stddev : 1.0;
    d.has_moments = true;
  }
  return absl::OkStatus();
}

absl::Status ComputeMoments(const input::FeatureSpec& features,
                            absl::Span<const input::ColumnarBatch> batches, ModelSpec* spec) {
  RETURN_IF_ERROR(spec->ValidateAgainst(features));
  MomentsAccumulator acc(*spec, features);
  for (const input::ColumnarBatch& b : batches) RETURN_IF_ERROR(acc.Add(b));
  return acc.Apply(spec);
}

}  // namespace brook::trainer
