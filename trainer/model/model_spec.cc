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

std::string LineSuffix(int line) { return line > 0 ? absl::StrCat(" (line ", line, ")") : ""; }

absl::Status SpecError(int line, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("model spec", LineSuffix(line), ": ", msg));
}
absl::Status FieldError(absl::string_view field, int line, absl::string_view msg) {
  return absl::InvalidArgumentError(absl::StrCat("model.", field, LineSuffix(line), ": ", msg));
}
absl::Status SparseError(const SparseInputSpec& s, size_t index, int line, absl::string_view msg) {
  const std::string who = s.feature.empty() ? absl::StrCat("sparse input #", index + 1)
                                            : absl::StrCat("sparse input \"", s.feature, "\"");
  return absl::InvalidArgumentError(absl::StrCat(who, LineSuffix(line), ": ", msg));
}
absl::Status DenseError(const DenseInputSpec& d, size_t index, int line, absl::string_view msg) {
  const std::string who = d.feature.empty() ? absl::StrCat("dense input #", index + 1)
                                            : absl::StrCat("dense input \"", d.feature, "\"");
  return absl::InvalidArgumentError(absl::StrCat(who, LineSuffix(line), ": ", msg));
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

// ---- YAML helpers (the same conventions as features/feature_spec.cc).

int LineOf(const YAML::Node& n) { return n.Mark().is_null() ? 0 : n.Mark().line + 1; }

std::string ScalarText(const YAML::Node& n) {
  return n.IsScalar() ? absl::StrCat("\"", n.Scalar(), "\"") : std::string("a non-scalar");
}

template <typename E>
bool ParseChoice(const YAML::Node& node,
                 std::initializer_list<std::pair<absl::string_view, E>> choices, E* out) {
  if (!node.IsScalar()) return false;
  for (const auto& [name, value] : choices) {
    if (node.Scalar() == name) {
      *out = value;
      return true;
    }
  }
  return false;
}

// Calls fn(key, value) for each pair of `map`; unknown and repeated keys are
// errors, so a typo is never silently ignored.
template <typename ErrorFn, typename Fn>
absl::Status ForEachKey(const YAML::Node& map, absl::Span<const absl::string_view> allowed,
                        const ErrorFn& error, Fn&& fn) {
  absl::flat_hash_map<std::string, int> seen;
  for (const auto& pair : map) {
    const YAML::Node key = pair.first;
    const int line = LineOf(key);
    if (!key.IsScalar()) return error(line, "keys must be plain names");
    const std::string& k = key.Scalar();
    bool known = false;
    for (absl::string_view a : allowed) known |= (a == k);
    if (!known) {
      return error(
          line, absl::StrCat("unknown key \"", k, "\"; allowed: ", absl::StrJoin(allowed, ", ")));
    }
    auto [pos, inserted] = seen.emplace(k, line);
    if (!inserted) {
      return error(line,
                   absl::StrCat("key \"", k, "\" given twice (first on line ", pos->second, ")"));
    }
    RETURN_IF_ERROR(fn(k, pair.second));
  }
  return absl::OkStatus();
}

bool ReadInt(const YAML::Node& v, int* out) {
  return v.IsScalar() && YAML::convert<int>::decode(v, *out);
}
bool ReadDouble(const YAML::Node& v, double* out) {
  return v.IsScalar() && YAML::convert<double>::decode(v, *out);
}

// A list of layer widths such as [256, 128].
template <typename ErrorFn>
absl::Status ReadWidths(const YAML::Node& v, absl::string_view field, const ErrorFn& error,
                        std::vector<int>* out) {
  out->clear();
  if (!v.IsSequence()) return error(LineOf(v), absl::StrCat(field, " must be a list of widths"));
  for (size_t i = 0; i < v.size(); ++i) {
    int w = 0;
    if (!ReadInt(v[i], &w) || w < 1 || w > kMaxWidth) {
      return error(LineOf(v[i]), absl::StrCat(field, "[", i, "] must be an integer in [1, ",
                                              kMaxWidth, "], got ", ScalarText(v[i])));
    }
    out->push_back(w);
  }
  return absl::OkStatus();
}

absl::Status ReadModel(const YAML::Node& node, ModelSpec* spec) {
  if (!node.IsMap()) {
    return SpecError(LineOf(node), "model must be a map such as {type: deepfm, embedding_dim: 16}");
  }
  bool has_type = false;
  // Line of each key given, to check afterwards that it applies to the type.
  absl::flat_hash_map<std::string, int> lines;
  auto error = [](absl::string_view field) {
    return [field](int l, absl::string_view msg) { return FieldError(field, l, msg); };
  };
  static constexpr absl::string_view kKeys[] = {"type",       "embedding_dim", "hidden",
                                                "bottom",     "top",           "activation",
                                                "dropout",    "loss",          "seed"};
  RETURN_IF_ERROR(ForEachKey(
      node, kKeys, [](int l, absl::string_view msg) { return SpecError(l, absl::StrCat("model: ", msg)); },
      [&](const std::string& key, const YAML::Node& v) -> absl::Status {
        const int l = LineOf(v);
        lines[key] = l;
        if (key == "type") {
          has_type = true;
          if (!ParseChoice(v,
                           {{"lr", ModelType::kLr},
                            {"wide_deep", ModelType::kWideDeep},
                            {"deepfm", ModelType::kDeepFm},
                            {"dlrm", ModelType::kDlrm}},
                           &spec->type)) {
            return FieldError("type", l,
                              absl::StrCat("unknown model type ", ScalarText(v),
                                           "; allowed: lr, wide_deep, deepfm, dlrm"));
          }
        } else if (key == "embedding_dim") {
          if (!ReadInt(v, &spec->embedding_dim) || spec->embedding_dim < 1 ||
              spec->embedding_dim > ps::kMaxDim) {
            return FieldError("embedding_dim", l,
                              absl::StrCat("must be an integer in [1, ", ps::kMaxDim, "], got ",
                                           ScalarText(v)));
          }
        } else if (key == "hidden") {
          return ReadWidths(v, "hidden", error("hidden"), &spec->hidden);
        } else if (key == "bottom") {
          return ReadWidths(v, "bottom", error("bottom"), &spec->bottom);
        } else if (key == "top") {
          return ReadWidths(v, "top", error("top"), &spec->top);
        } else if (key == "activation") {
          if (!ParseChoice(v,
                           {{"relu", Activation::kRelu},
                            {"sigmoid", Activation::kSigmoid},
                            {"tanh", Activation::kTanh}},
                           &spec->activation)) {
            return FieldError("activation", l,
                              absl::StrCat("unknown activation ", ScalarText(v),
                                           "; allowed: relu, sigmoid, tanh"));
          }
        } else if (key == "dropout") {
          double d = 0;
          if (!ReadDouble(v, &d) || !(d >= 0.0 && d < 1.0)) {
            return FieldError("dropout", l,
                              absl::StrCat("must be a number in [0, 1), got ", ScalarText(v)));
          }
          spec->dropout = static_cast<float>(d);
        } else if (key == "loss") {
          if (!ParseChoice(v, {{"logloss", LossKind::kLogLoss}, {"mse", LossKind::kMse}},
                           &spec->loss)) {
            return FieldError("loss", l,
                              absl::StrCat("unknown loss ", ScalarText(v), "; allowed: logloss, mse"));
          }
        } else if (key == "seed") {
          if (!v.IsScalar() || v.Scalar().empty() || v.Scalar()[0] == '-' ||
              !YAML::convert<uint64_t>::decode(v, spec->seed)) {
            return FieldError("seed", l,
                              absl::StrCat("must be an unsigned integer, got ", ScalarText(v)));
          }
        }
        return absl::OkStatus();
      }));
  if (!has_type) {
    return SpecError(LineOf(node), "model: missing \"type\" (one of lr, wide_deep, deepfm, dlrm)");
  }
  // Keys that do not apply to the chosen type are errors, not silently unused.
  auto reject = [&](absl::string_view key, absl::string_view why) -> absl::Status {
    auto it = lines.find(key);
    if (it == lines.end()) return absl::OkStatus();
    return FieldError(key, it->second,
                      absl::StrCat("does not apply to type ", AV(ModelTypeName(spec->type)), " (",
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

absl::Status ReadSparse(const YAML::Node& node, size_t index, ModelType type,
                        SparseInputSpec* out) {
  out->line = LineOf(node);
  if (!node.IsMap()) {
    return SparseError(*out, index, out->line,
                       "must be a map such as {feature: C1, table: C1, dim: 16, combiner: sum}");
  }
  if (const YAML::Node f = node["feature"]; f && f.IsScalar()) out->feature = f.Scalar();
  auto error = [&](int l, absl::string_view msg) { return SparseError(*out, index, l, msg); };
  bool has_feature = false;
  static constexpr absl::string_view kKeys[] = {"feature", "table", "dim", "combiner"};
  RETURN_IF_ERROR(ForEachKey(
      node, kKeys, error, [&](const std::string& key, const YAML::Node& v) -> absl::Status {
        const int l = LineOf(v);
        if (key == "feature") {
          has_feature = true;
          if (!v.IsScalar() || v.Scalar().empty()) return error(l, "feature must be a name");
        } else if (key == "table") {
          if (!v.IsScalar() || v.Scalar().empty()) return error(l, "table must be a name");
          out->table = v.Scalar();
        } else if (key == "dim") {
          if (type == ModelType::kLr) {
            return error(l, "dim does not apply to type lr (its weights are dim-1 tables)");
          }
          if (!ReadInt(v, &out->dim) || out->dim < 1 || out->dim > ps::kMaxDim) {
            return error(l, absl::StrCat("dim must be an integer in [1, ", ps::kMaxDim, "], got ",
                                         ScalarText(v)));
          }
        } else if (key == "combiner") {
          if (!ParseChoice(v, {{"sum", Combiner::kSum}, {"mean", Combiner::kMean}},
                           &out->combiner)) {
            return error(l,
                         absl::StrCat("unknown combiner ", ScalarText(v), "; allowed: sum, mean"));
          }
        }
        return absl::OkStatus();
      }));
  if (!has_feature) return error(out->line, "missing \"feature\"");
  return absl::OkStatus();
}

absl::Status ReadDense(const YAML::Node& node, size_t index, ModelType type, DenseInputSpec* out) {
  out->line = LineOf(node);
  if (!node.IsMap()) {
    return DenseError(*out, index, out->line,
                      "must be a map such as {feature: I1, transform: log1p}");
  }
  if (const YAML::Node f = node["feature"]; f && f.IsScalar()) out->feature = f.Scalar();
  auto error = [&](int l, absl::string_view msg) { return DenseError(*out, index, l, msg); };
  bool has_feature = false, has_mean = false, has_stddev = false, has_boundaries = false;
  absl::flat_hash_map<std::string, int> lines;
  static constexpr absl::string_view kKeys[] = {"feature", "transform", "mean",
                                                "stddev",  "boundaries", "dim"};
  RETURN_IF_ERROR(ForEachKey(
      node, kKeys, error, [&](const std::string& key, const YAML::Node& v) -> absl::Status {
        const int l = LineOf(v);
        lines[key] = l;
        if (key == "feature") {
          has_feature = true;
          if (!v.IsScalar() || v.Scalar().empty()) return error(l, "feature must be a name");
        } else if (key == "transform") {
          if (!ParseChoice(v,
                           {{"none", DenseTransform::kNone},
                            {"log1p", DenseTransform::kLog1p},
                            {"standardize", DenseTransform::kStandardize},
                            {"bucketize", DenseTransform::kBucketize}},
                           &out->transform)) {
            return error(l, absl::StrCat("unknown transform ", ScalarText(v),
                                         "; allowed: none, log1p, standardize, bucketize"));
          }
        } else if (key == "mean") {
          has_mean = true;
          if (!ReadDouble(v, &out->mean) || !std::isfinite(out->mean)) {
            return error(l, absl::StrCat("mean must be a finite number, got ", ScalarText(v)));
          }
        } else if (key == "stddev") {
          has_stddev = true;
          if (!ReadDouble(v, &out->stddev) || !std::isfinite(out->stddev) || !(out->stddev > 0)) {
            return error(l, absl::StrCat("stddev must be a finite number > 0, got ", ScalarText(v)));
          }
        } else if (key == "boundaries") {
          has_boundaries = true;
          if (!v.IsSequence()) return error(l, "boundaries must be a list of numbers");
          for (size_t i = 0; i < v.size(); ++i) {
            double b = 0;
            if (!ReadDouble(v[i], &b) || !std::isfinite(b)) {
              return error(LineOf(v[i]), absl::StrCat("boundaries[", i,
                                                      "] must be a finite number, got ",
                                                      ScalarText(v[i])));
            }
            out->boundaries.push_back(b);
          }
        } else if (key == "dim") {
          if (type == ModelType::kLr) {
            return error(l, "dim does not apply to type lr (its weights are dim-1 tables)");
          }
          if (!ReadInt(v, &out->dim) || out->dim < 1 || out->dim > ps::kMaxDim) {
            return error(l, absl::StrCat("dim must be an integer in [1, ", ps::kMaxDim, "], got ",
                                         ScalarText(v)));
          }
        }
        return absl::OkStatus();
      }));
  if (!has_feature) return error(out->line, "missing \"feature\"");
  const std::string_view tname = TransformName(out->transform);
  auto not_for = [&](absl::string_view key, absl::string_view only) -> absl::Status {
    auto it = lines.find(key);
    if (it == lines.end()) return absl::OkStatus();
    return error(it->second, absl::StrCat("\"", key, "\" applies only to transform: ", only,
                                          ", not ", AV(tname)));
  };
  if (out->transform != DenseTransform::kStandardize) {
    RETURN_IF_ERROR(not_for("mean", "standardize"));
    RETURN_IF_ERROR(not_for("stddev", "standardize"));
  } else if (has_mean != has_stddev) {
    return error(lines[has_mean ? "mean" : "stddev"],
                 "give mean and stddev together, or neither (then ComputeMoments fills them)");
  } else {
    out->has_moments = has_mean;
  }
  if (out->transform != DenseTransform::kBucketize) {
    RETURN_IF_ERROR(not_for("boundaries", "bucketize"));
    RETURN_IF_ERROR(not_for("dim", "bucketize"));
  } else if (!has_boundaries) {
    return error(out->line, "transform: bucketize needs \"boundaries\"");
  }
  return absl::OkStatus();
}

absl::StatusOr<ModelSpec> FromYamlImpl(const std::string& yaml_text,
                                       const input::FeatureSpec& features,
                                       absl::Span<const std::string_view> other_sections) {
  const YAML::Node root = YAML::Load(yaml_text);
  if (!root || root.IsNull()) return SpecError(0, "empty document");
  if (!root.IsMap()) return SpecError(LineOf(root), "must be a map with model, sparse and dense");
  std::vector<absl::string_view> allowed = {"model", "sparse", "dense"};
  for (std::string_view s : other_sections) allowed.push_back(AV(s));
  ModelSpec spec;
  bool has_model = false;
  // The model type decides which keys apply inside sparse/dense entries, so
  // read `model` first wherever it appears.
  if (const YAML::Node m = root["model"]; m) {
    has_model = true;
    RETURN_IF_ERROR(ReadModel(m, &spec));
  }
  RETURN_IF_ERROR(ForEachKey(
      root, allowed, [](int l, absl::string_view msg) { return SpecError(l, msg); },
      [&](const std::string& key, const YAML::Node& v) -> absl::Status {
        const int l = LineOf(v);
        if (key == "sparse") {
          if (v.IsNull()) return absl::OkStatus();
          if (!v.IsSequence()) return SpecError(l, "sparse must be a list");
          for (size_t i = 0; i < v.size(); ++i) {
            SparseInputSpec s;
            RETURN_IF_ERROR(ReadSparse(v[i], i, spec.type, &s));
            spec.sparse.push_back(std::move(s));
          }
        } else if (key == "dense") {
          if (v.IsNull()) return absl::OkStatus();
          if (!v.IsSequence()) return SpecError(l, "dense must be a list");
          for (size_t i = 0; i < v.size(); ++i) {
            DenseInputSpec d;
            RETURN_IF_ERROR(ReadDense(v[i], i, spec.type, &d));
            spec.dense.push_back(std::move(d));
          }
        }
        return absl::OkStatus();
      }));
  if (!has_model) return SpecError(LineOf(root), "missing \"model\" section (model: {type: ...})");
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
  // yaml-cpp throws on syntax errors; no exception may leave this API.
  try {
    return FromYamlImpl(yaml_text, features, other_sections);
  } catch (const YAML::Exception& e) {
    return SpecError(e.mark.is_null() ? 0 : e.mark.line + 1, absl::StrCat("invalid YAML: ", e.msg));
  } catch (const std::exception& e) {
    return SpecError(0, absl::StrCat("invalid YAML: ", e.what()));
  }
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
  for (const auto& [name, widths] : {std::pair<absl::string_view, const std::vector<int>*>{
                                         "hidden", &hidden},
                                     {"bottom", &bottom},
                                     {"top", &top}}) {
    for (size_t i = 0; i < widths->size(); ++i) {
      if ((*widths)[i] < 1 || (*widths)[i] > kMaxWidth) {
        return FieldError(name, 0,
                          absl::StrCat("[", i, "] must be in [1, ", kMaxWidth, "], got ",
                                       (*widths)[i]));
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
      return absl::InvalidArgumentError(absl::StrCat(
          who, LineSuffix(line), ": table \"", name, "\" has dim ", dim, " here but dim ",
          it->second.dim, " for ", it->second.who, LineSuffix(it->second.line),
          "; inputs sharing a table must agree"));
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
      return SparseError(s, i, s.line,
                         absl::StrCat("feature listed twice in sparse (first on line ",
                                      it->second, ")"));
    }
    RETURN_IF_ERROR(add_table(TableName(s), SparseDim(s), s.line,
                              absl::StrCat("sparse input \"", s.feature, "\"")));
  }
  absl::flat_hash_map<std::string, int> dense_lines;
  for (size_t i = 0; i < dense.size(); ++i) {
    const DenseInputSpec& d = dense[i];
    if (d.feature.empty()) return DenseError(d, i, d.line, "feature must be a name");
    if (auto [it, inserted] = dense_lines.emplace(d.feature, d.line); !inserted) {
      return DenseError(d, i, d.line,
                        absl::StrCat("feature listed twice in dense (first on line ",
                                     it->second, ")"));
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
                                       "boundaries[", b, "])"));
      }
    }
    if (d.length != 1) {
      return DenseError(d, i, d.line,
                        absl::StrCat("bucketize needs a length-1 feature, this one has length ",
                                     d.length));
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
    RETURN_IF_ERROR(add_table(name, BucketDim(d), d.line,
                              absl::StrCat("dense input \"", d.feature, "\"")));
  }
  if (HasWide(type)) {
    for (const auto& [name, info] : tables) {
      const std::string wide = name + "_wide";
      if (auto it = tables.find(wide); it != tables.end()) {
        return absl::InvalidArgumentError(absl::StrCat(
            it->second.who, LineSuffix(it->second.line), ": table \"", wide,
            "\" collides with the wide table generated for table \"", name, "\" of ", info.who,
            LineSuffix(info.line)));
      }
    }
  }
  if (type == ModelType::kDeepFm || type == ModelType::kDlrm) {
    const ModelLayout layout = Layout();
    for (const InputLayout& in : layout.inputs) {
      if (in.dim != layout.inputs[0].dim) {
        const InputLayout& first = layout.inputs[0];
        auto describe = [&](const InputLayout& x) {
          return x.bucketized
                     ? absl::StrCat("dense input \"", dense[x.source].feature, "\"",
                                    LineSuffix(dense[x.source].line))
                     : absl::StrCat("sparse input \"", sparse[x.source].feature, "\"",
                                    LineSuffix(sparse[x.source].line));
        };
        return absl::InvalidArgumentError(absl::StrCat(
            describe(in), ": dim ", in.dim, " differs from dim ", first.dim, " of ",
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
                        absl::StrCat("length ", d.length, " recorded in the model spec, but the "
                                     "feature spec says ", f.length));
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
    layout.inputs.push_back(InputLayout{false, static_cast<int>(i), table(TableName(sparse[i]), dim),
                                        -1, dim, sparse[i].combiner});
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
                                                   batch.columns.size(), " columns, the feature "
                                                   "spec ", features_->features.size()));
  }
  for (const Moments& m : moments_) {
    if (m.column < 0) return absl::FailedPreconditionError("ComputeMoments: spec not validated");
    const input::Column& c = batch.columns[m.column];
    const size_t n = m.is_float ? c.floats.size() : c.int64s.size();
    if (n != batch.num_rows * m.length) {
      return absl::InvalidArgumentError(absl::StrCat(
          "ComputeMoments: column of feature \"", features_->features[m.column].name, "\" has ", n,
          " values, expected ", batch.num_rows, " rows x ", m.length));
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
