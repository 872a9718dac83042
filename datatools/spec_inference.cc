#include "datatools/spec_inference.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/absl_compat.h"
#include "common/status_macros.h"
#include "datatools/data_schema.h"
#include "datatools/natural_order.h"

namespace brook::datatools {
namespace {

// Names a label usually has in CTR and classification data, most telling
// first; compared case-insensitively.
constexpr std::string_view kLabelNames[] = {
    "label", "labels",     "click",     "clicked",      "is_click", "clicks", "target",
    "y",     "conversion", "converted", "is_converted", "outcome",  "class"};

// A label holds one number per example, in every example.
bool CanBeLabel(const FeatureSchema& fs, const FeatureStats& f, int64_t examples) {
  return (fs.type == ValueKind::kFloat || fs.type == ValueKind::kInt64) && f.kinds_seen() == 1 &&
         f.present == examples && f.min_values == 1 && f.max_values == 1;
}

bool OnlyZeroOne(const FeatureSchema& fs, const FeatureStats& f) {
  if (fs.type == ValueKind::kInt64) {
    return fs.int_min && *fs.int_min >= 0 && *fs.int_max <= 1;
  }
  // Floats: within [0, 1] and at most two distinct values (exact counts at
  // this size: HyperLogLog is exact up to its limit).
  return fs.float_min && *fs.float_min >= 0 && *fs.float_max <= 1 && f.distinct <= 2.5 &&
         f.non_finite == 0;
}

int LabelNameRank(const std::string& name) {
  const std::string lower = absl::AsciiStrToLower(name);
  for (size_t i = 0; i < std::size(kLabelNames); ++i) {
    if (lower == kLabelNames[i]) return static_cast<int>(i);
  }
  return -1;
}

// "it has 3 features: a, b, c", in natural order, at most kMaxNamesListed
// of them: the list is for a reader picking the label.
std::string FeatureNameList(const std::vector<FeatureSchema>& features) {
  constexpr size_t kMaxNamesListed = 100;
  if (features.empty()) return "it has no features";
  std::vector<std::string> names;
  for (const FeatureSchema& f : features) names.push_back(f.name);
  std::sort(names.begin(), names.end(), NaturalLessFn());
  const size_t more = names.size() > kMaxNamesListed ? names.size() - kMaxNamesListed : 0;
  names.resize(names.size() - more);
  return absl::StrCat(
      "it has ", features.size(),
      features.size() == 1 ? " feature: " : " features: ", absl::StrJoin(names, ", "),
      more > 0 ? absl::StrCat(", ... (", more, " more)") : "");
}

struct LabelChoice {
  size_t index;  // into schema.features
  std::string reason;
  bool guessed;
};

absl::StatusOr<LabelChoice> ChooseLabel(const DataSchema& schema, const DatasetStats& stats,
                                        const SpecInferenceOptions& options,
                                        std::vector<std::string>* notes) {
  const auto& fs = schema.features;
  if (!options.label.empty()) {
    for (size_t i = 0; i < fs.size(); ++i) {
      if (fs[i].name != options.label) continue;
      if (!CanBeLabel(fs[i], stats.features[i], stats.examples)) {
        const FeatureStats& f = stats.features[i];
        return absl::InvalidArgumentError(absl::StrCat(
            "--label ", options.label,
            ": a label needs one int64 or float value in every "
            "example; this feature has ",
            AbslView(ValueKindName(fs[i].type)), " values, ", f.min_values, "-", f.max_values,
            " per example, in ", f.present, " of ", stats.examples, " examples"));
      }
      return LabelChoice{i, "chosen with --label", false};
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "--label ", options.label, ": no such feature in the data; ", FeatureNameList(fs)));
  }
  std::optional<size_t> by_name;
  int best_rank = -1;
  std::vector<size_t> zero_one;
  for (size_t i = 0; i < fs.size(); ++i) {
    if (!CanBeLabel(fs[i], stats.features[i], stats.examples)) continue;
    const int rank = LabelNameRank(fs[i].name);
    if (rank >= 0 && (best_rank < 0 || rank < best_rank)) {
      by_name = i;
      best_rank = rank;
    }
    if (OnlyZeroOne(fs[i], stats.features[i])) zero_one.push_back(i);
  }
  if (by_name) {
    return LabelChoice{*by_name,
                       absl::StrCat(AbslView(ValueKindName(fs[*by_name].type)),
                                    ", one value per example, named like a label"),
                       true};
  }
  if (zero_one.empty()) {
    return absl::InvalidArgumentError(
        "cannot guess the label: no feature with one number per example is named like a label "
        "(label, click, target, y, ...) or holds only 0 and 1; name it with --label NAME");
  }
  if (zero_one.size() > 1) {
    std::vector<std::string> others;
    for (size_t k = 1; k < zero_one.size(); ++k) others.push_back(fs[zero_one[k]].name);
    notes->push_back(absl::StrCat("other features holding only 0 and 1 could be the label: ",
                                  absl::StrJoin(others, ", ")));
  }
  return LabelChoice{zero_one.front(),
                     absl::StrCat(AbslView(ValueKindName(fs[zero_one.front()].type)),
                                  ", one value per example, only 0 and 1"),
                     true};
}

std::string Percent(double fraction) { return absl::StrFormat("%.4g%%", 100 * fraction); }

std::string Describe(const FeatureSchema& fs, const FeatureStats& f, int64_t examples) {
  std::string d(ValueKindName(fs.type));
  if (f.min_values == f.max_values) {
    absl::StrAppend(&d, ", ", f.min_values, f.min_values == 1 ? " value" : " values");
  } else {
    absl::StrAppend(&d, ", ", f.min_values, "-", f.max_values, " values");
  }
  if (fs.type == ValueKind::kFloat && fs.float_min) {
    absl::StrAppend(&d, absl::StrFormat(", range [%g, %g]", *fs.float_min, *fs.float_max));
  } else if (fs.type != ValueKind::kFloat) {
    absl::StrAppend(&d, ", ~", std::llround(f.distinct), " distinct");
  }
  if (f.present < examples) {
    absl::StrAppend(&d, ", missing in ",
                    Percent(static_cast<double>(examples - f.present) / examples));
  }
  return d;
}

}  // namespace

absl::StatusOr<InferredSpec> InferFeatureSpec(const DatasetStats& stats,
                                              const SpecInferenceOptions& options) {
  if (stats.examples == 0) return absl::InvalidArgumentError("the data has no examples");
  // InferSchema keeps stats.features' order, so index i is the same feature
  // in both.
  const DataSchema schema = InferSchema(stats);
  InferredSpec out;
  ASSIGN_OR_RETURN(LabelChoice label, ChooseLabel(schema, stats, options, &out.notes));
  out.spec.label_name = schema.features[label.index].name;
  out.spec.label_type = schema.features[label.index].type == ValueKind::kInt64
                            ? input::FeatureType::kInt64
                            : input::FeatureType::kFloat;
  out.label_guessed = label.guessed;
  out.label_reason = label.reason;

  std::vector<size_t> order(schema.features.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    return NaturalLess(schema.features[a].name, schema.features[b].name);
  });
  for (size_t i : order) {
    if (i == label.index) continue;
    const FeatureSchema& fs = schema.features[i];
    const FeatureStats& f = stats.features[i];
    if (f.kinds_seen() == 0) {
      out.notes.push_back(absl::StrCat("left out ", fs.name, ": it never has a value"));
      continue;
    }
    input::FeatureSpecEntry e;
    e.name = fs.name;
    if (fs.type == ValueKind::kFloat) {
      e.type = input::FeatureType::kFloat;
      e.kind = input::FeatureKind::kFixed;
      e.default_value = 0.0;
      if (f.min_values == f.max_values && f.min_values >= 1) {
        e.length = static_cast<int>(std::min<int64_t>(f.max_values, 1 << 20));
      } else if (f.min_values == 0 && f.max_values == 1) {
        e.length = 1;
        out.spec.on_type_mismatch = input::MismatchPolicy::kDefault;
        out.notes.push_back(
            absl::StrCat(fs.name,
                         " is an empty float list in some examples: read as 0 there "
                         "(on_type_mismatch: default)"));
      } else {
        out.notes.push_back(absl::StrCat("left out ", fs.name, ": float lists of ", f.min_values,
                                         " to ", f.max_values,
                                         " values (a feature spec reads "
                                         "floats only as fixed-length)"));
        continue;
      }
    } else {
      e.type =
          fs.type == ValueKind::kInt64 ? input::FeatureType::kInt64 : input::FeatureType::kBytes;
      e.kind = input::FeatureKind::kVarLen;
    }
    if (f.kinds_seen() > 1) {
      out.spec.on_type_mismatch = input::MismatchPolicy::kDefault;
      out.notes.push_back(absl::StrCat(fs.name, " mixes value types; read as ",
                                       AbslView(ValueKindName(fs.type)),
                                       ", other examples as missing (on_type_mismatch: default)"));
    }
    out.spec.features.push_back(std::move(e));
    out.feature_comments.push_back(Describe(fs, f, stats.examples));
  }
  RETURN_IF_ERROR(out.spec.Validate());
  return out;
}

std::string InferredSpecYaml(const InferredSpec& inferred, const DatasetStats& stats) {
  auto flow = [](auto&& fill) {
    YAML::Emitter e;
    e << YAML::Flow << YAML::BeginMap;
    fill(e);
    e << YAML::EndMap;
    return std::string(e.c_str());
  };
  const input::FeatureSpec& spec = inferred.spec;
  std::string y = absl::StrCat("# Feature spec inferred by `brook data spec` from ", stats.examples,
                               " examples in ", stats.files.size(), " file(s):\n");
  for (const std::string& f : stats.files)
    absl::StrAppend(&y, "#   ", PrintableValue(f, 200), "\n");
  absl::StrAppend(
      &y,
      "# int64 and bytes features are read as varlen id lists (embedding inputs), floats as\n"
      "# fixed-length numbers (dense inputs, 0 where missing). See features/feature_spec.h.\n");
  for (const std::string& n : inferred.notes) absl::StrAppend(&y, "# note: ", n, "\n");
  if (inferred.label_guessed) {
    absl::StrAppend(
        &y, "# CONFIRM THE LABEL: \"", spec.label_name, "\" is a guess (", inferred.label_reason,
        ").\n# If the model should predict another feature, rerun with --label NAME.\n");
  }
  absl::StrAppend(&y, "label: ", flow([&](YAML::Emitter& e) {
    e << YAML::Key << "name" << YAML::Value << spec.label_name << YAML::Key << "type" << YAML::Value
      << std::string(FeatureTypeName(spec.label_type));
  }),
                  inferred.label_guessed ? "   # GUESSED: confirm" : "", "\n");
  absl::StrAppend(&y, "on_missing: ",
                  spec.on_missing == input::MissingPolicy::kError ? "error" : "default", "\n");
  absl::StrAppend(&y, "on_type_mismatch: ",
                  spec.on_type_mismatch == input::MismatchPolicy::kDefault ? "default" : "error",
                  "\n");
  absl::StrAppend(&y, "features:\n");
  for (size_t i = 0; i < spec.features.size(); ++i) {
    const input::FeatureSpecEntry& f = spec.features[i];
    const std::string entry = flow([&](YAML::Emitter& e) {
      e << YAML::Key << "name" << YAML::Value << f.name;
      e << YAML::Key << "type" << YAML::Value << std::string(FeatureTypeName(f.type));
      if (f.kind == input::FeatureKind::kFixed) {
        e << YAML::Key << "length" << YAML::Value << f.length;
        e << YAML::Key << "default" << YAML::Value << "0.0";
      } else {
        e << YAML::Key << "kind" << YAML::Value << "varlen";
      }
    });
    absl::StrAppend(&y, "  - ", entry, "   # ", inferred.feature_comments[i], "\n");
  }
  if (spec.features.empty()) absl::StrAppend(&y, "  []\n");
  return y;
}

}  // namespace brook::datatools
