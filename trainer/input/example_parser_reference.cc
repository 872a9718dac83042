#include "trainer/input/example_parser_reference.h"

#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "tensorflow/example.pb.h"
#include "trainer/input/parse_policy.h"

namespace brook::input {
namespace {

using internal::ListKind;
using internal::Outcome;

ListKind KindOf(const tf::Feature& f) {
  switch (f.kind_case()) {
    case tf::Feature::kBytesList:
      return ListKind::kBytes;
    case tf::Feature::kFloatList:
      return ListKind::kFloat;
    case tf::Feature::kInt64List:
      return ListKind::kInt64;
    case tf::Feature::KIND_NOT_SET:
      break;
  }
  return ListKind::kNone;
}

uint64_t CountOf(const tf::Feature& f) {
  switch (f.kind_case()) {
    case tf::Feature::kBytesList:
      return static_cast<uint64_t>(f.bytes_list().value_size());
    case tf::Feature::kFloatList:
      return static_cast<uint64_t>(f.float_list().value_size());
    case tf::Feature::kInt64List:
      return static_cast<uint64_t>(f.int64_list().value_size());
    case tf::Feature::KIND_NOT_SET:
      break;
  }
  return 0;
}

}  // namespace

absl::Status ReferenceParse(const FeatureSpec& spec, std::string_view serialized,
                            ColumnarBatch* batch, ParseStats* stats) {
  const size_t n = spec.features.size();
  if (stats != nullptr && (stats->missing.size() != n || stats->mismatched.size() != n)) {
    stats->missing.resize(n, 0);
    stats->mismatched.resize(n, 0);
  }
  auto reject = [stats](absl::Status s) {
    if (stats != nullptr) ++stats->rejected;
    return s;
  };
  if (const char* what = internal::CheckBatchShape(spec, *batch)) {
    return reject(internal::BatchShapeError(spec, what));
  }
  if (serialized.size() >= (size_t{1} << 31)) {
    return reject(absl::InvalidArgumentError(
        absl::StrCat("tf.train.Example of ", serialized.size(), " bytes exceeds 2 GiB")));
  }
  tf::Example example;
  if (!example.ParseFromArray(serialized.data(), static_cast<int>(serialized.size()))) {
    return reject(absl::DataLossError(absl::StrCat(
        "malformed tf.train.Example (protobuf parse failed) of ", serialized.size(), " bytes")));
  }
  const auto& features = example.features().feature();

  // Decide everything before writing anything, so an error needs no rollback.
  const auto label_it = features.find(spec.label_name);
  const ListKind label_kind =
      label_it == features.end() ? ListKind::kNone : KindOf(label_it->second);
  if (label_kind == ListKind::kNone) return reject(internal::LabelMissingError(spec));
  const uint64_t label_count = CountOf(label_it->second);
  if (!internal::LabelOk(label_kind, label_count)) {
    return reject(internal::LabelMismatchError(spec, label_kind, label_count));
  }
  std::vector<Outcome> outcomes(n);
  std::vector<const tf::Feature*> values(n, nullptr);
  for (size_t i = 0; i < n; ++i) {
    const FeatureSpecEntry& f = spec.features[i];
    const auto it = features.find(f.name);
    if (it != features.end()) values[i] = &it->second;
    const ListKind kind = values[i] ? KindOf(*values[i]) : ListKind::kNone;
    const uint64_t count = values[i] ? CountOf(*values[i]) : 0;
    outcomes[i] = internal::Classify(f, kind, count);
    if (outcomes[i] == Outcome::kMissing && spec.on_missing == MissingPolicy::kError) {
      return reject(internal::FeatureMissingError(f));
    }
    if (outcomes[i] == Outcome::kMismatch && spec.on_type_mismatch == MismatchPolicy::kError) {
      return reject(internal::FeatureMismatchError(f, kind, count));
    }
  }

  for (size_t i = 0; i < n; ++i) {
    const FeatureSpecEntry& f = spec.features[i];
    Column& c = batch->columns[i];
    const bool ok = outcomes[i] == Outcome::kOk;
    if (f.kind == FeatureKind::kFixed) {
      for (int j = 0; j < f.length; ++j) {
        if (f.type == FeatureType::kFloat) {
          c.floats.push_back(ok ? values[i]->float_list().value(j)
                                : static_cast<float>(f.default_value));
        } else {
          c.int64s.push_back(ok ? values[i]->int64_list().value(j)
                                : static_cast<int64_t>(f.default_value));
        }
      }
      continue;
    }
    if (ok) {
      const size_t limit = f.max_length > 0 ? static_cast<size_t>(f.max_length) : SIZE_MAX;
      if (f.type == FeatureType::kBytes) {
        const auto& v = values[i]->bytes_list().value();
        for (int j = 0; j < v.size() && static_cast<size_t>(j) < limit; ++j) {
          c.ids.push_back(Hash64(v[j]));
        }
      } else {
        const auto& v = values[i]->int64_list().value();
        for (int j = 0; j < v.size() && static_cast<size_t>(j) < limit; ++j) {
          c.ids.push_back(static_cast<uint64_t>(v[j]));
        }
      }
    }
    c.row_splits.push_back(static_cast<uint32_t>(c.ids.size()));
  }
  const tf::Feature& label = label_it->second;
  batch->labels.push_back(label_kind == ListKind::kFloat
                              ? label.float_list().value(0)
                              : static_cast<float>(label.int64_list().value(0)));
  ++batch->num_rows;

  if (stats != nullptr) {
    ++stats->examples;
    for (size_t i = 0; i < n; ++i) {
      stats->missing[i] += outcomes[i] == Outcome::kMissing;
      stats->mismatched[i] += outcomes[i] == Outcome::kMismatch;
    }
    absl::flat_hash_set<std::string> known;
    for (const FeatureSpecEntry& f : spec.features) known.insert(f.name);
    known.insert(spec.label_name);
    for (const auto& [name, value] : features) stats->unknown_features += !known.contains(name);
  }
  return absl::OkStatus();
}

}  // namespace brook::input
