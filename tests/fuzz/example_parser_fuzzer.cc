// Fuzzes the tf.train.Example wire parser (trainer/input/example_parser.h)
// against the protobuf reference parser (example_parser_reference.h): the
// input is one serialized Example (no TFRecord framing, so every mutation
// reaches the parser), after a byte that picks one of three feature specs
// (fixed/varlen/bytes columns; on_missing and on_type_mismatch policies).
// Each record is appended twice, so rows after the first are checked too.
// When both parsers accept a record they must produce identical columns and
// counters; protobuf accepting what the wire parser refuses is a bug.
#include <array>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "features/feature_spec.h"
#include "trainer/input/example_parser.h"
#include "trainer/input/example_parser_reference.h"

namespace {

using brook::input::ColumnarBatch;
using brook::input::ExampleParser;
using brook::input::ParseStats;

constexpr std::array<const char*, 3> kSpecs = {
    // The Criteo-like mix, defaults for missing features, errors on mismatch.
    "label: {name: label, type: float}\n"
    "features:\n"
    "  - {name: I1, type: float, length: 1}\n"
    "  - {name: I2, type: float, length: 1}\n"
    "  - {name: I3, type: float, length: 1}\n"
    "  - {name: I4, type: int64, length: 2, default: 7}\n"
    "  - {name: C1, type: int64, kind: varlen}\n"
    "  - {name: C2, type: int64, kind: varlen}\n"
    "  - {name: C3, type: int64, kind: varlen}\n"
    "  - {name: B1, type: bytes, kind: varlen, max_length: 3}\n",
    // Strict about presence, lenient about types; an int64 label.
    "label: {name: y, type: int64}\n"
    "on_missing: error\n"
    "on_type_mismatch: default\n"
    "features:\n"
    "  - {name: f, type: float, length: 3, default: 0.5}\n"
    "  - {name: ids, type: int64, kind: varlen, max_length: 2}\n"
    "  - {name: s, type: bytes}\n",
    // Adult-like names with punctuation; bytes columns only.
    "label: income\n"
    "features:\n"
    "  - {name: age, type: float}\n"
    "  - {name: workclass, type: bytes}\n"
    "  - {name: marital-status, type: bytes}\n"
    "  - {name: native-country, type: bytes, kind: varlen, max_length: 1}\n",
};

const ExampleParser& Parser(size_t i) {
  static const std::array<const ExampleParser*, kSpecs.size()> parsers = [] {
    std::array<const ExampleParser*, kSpecs.size()> out{};
    for (size_t j = 0; j < kSpecs.size(); ++j) {
      auto spec = brook::input::FeatureSpec::FromYaml(kSpecs[j]);
      if (!spec.ok()) __builtin_trap();
      auto parser = ExampleParser::Create(*spec);
      if (!parser.ok()) __builtin_trap();
      out[j] = new ExampleParser(*std::move(parser));
    }
    return out;
  }();
  return *parsers[i];
}

bool SameFloats(const std::vector<float>& a, const std::vector<float>& b) {
  // Bitwise: NaN payloads must come through unchanged too.
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

bool SameBatch(const ColumnarBatch& a, const ColumnarBatch& b) {
  if (a.num_rows != b.num_rows || a.columns.size() != b.columns.size()) return false;
  if (!SameFloats(a.labels, b.labels)) return false;
  for (size_t i = 0; i < a.columns.size(); ++i) {
    const auto& x = a.columns[i];
    const auto& y = b.columns[i];
    if (!SameFloats(x.floats, y.floats)) return false;
    if (x.int64s != y.int64s || x.ids != y.ids || x.row_splits != y.row_splits) return false;
  }
  return true;
}

bool SameStats(const ParseStats& a, const ParseStats& b) {
  return a.examples == b.examples && a.rejected == b.rejected && a.missing == b.missing &&
         a.mismatched == b.mismatched && a.unknown_features == b.unknown_features;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  // protobuf logs every invalid-UTF-8 string it meets: a fuzzer's every input.
  google::protobuf::SetLogHandler(nullptr);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const ExampleParser& parser = Parser(data[0] % kSpecs.size());
  const std::string_view record(reinterpret_cast<const char*>(data) + 1, size - 1);

  ColumnarBatch wire_batch, ref_batch;
  ParseStats wire_stats, ref_stats;
  parser.InitBatch(&wire_batch);
  parser.InitBatch(&ref_batch);
  parser.InitStats(&wire_stats);
  parser.InitStats(&ref_stats);
  for (size_t round = 0; round < 2; ++round) {
    absl::Status wire = parser.Append(record, &wire_batch, &wire_stats);
    absl::Status ref = brook::input::ReferenceParse(parser.spec(), record, &ref_batch, &ref_stats);
    if (ref.ok() && !wire.ok()) __builtin_trap();  // protobuf accepts => wire must too
    // A rejected row leaves the batch as it was.
    if (!wire.ok() && (wire_batch.num_rows != round || wire_batch.labels.size() != round)) {
      __builtin_trap();
    }
    // The wire parser is deliberately looser (it skips features outside the
    // spec unread and does not check UTF-8 in names, like TF's fast parser).
    if (!ref.ok()) return 0;
    if (!SameBatch(wire_batch, ref_batch) || !SameStats(wire_stats, ref_stats)) __builtin_trap();
    if (wire_batch.num_rows != round + 1) __builtin_trap();
  }
  return 0;
}
