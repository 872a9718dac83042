// Differential and corruption tests: the wire parser against the reference
// parser (generated protobuf classes + the same policy) on many random
// Examples, encoded both by protobuf's serializer and by hand with every
// encoding variation protobuf accepts; then truncated and bit-flipped inputs.

#include <random>
#include <string>
#include <utility>
#include <vector>

#include "google/protobuf/stubs/logging.h"
#include "gtest/gtest.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/test_util.h"
#include "tests/unit/trainer/input/example_test_util.h"
#include "trainer/input/example_parser.h"
#include "trainer/input/example_parser_reference.h"

namespace brook::input {
namespace {

using namespace ::brook::input::testing;  // NOLINT: test helpers
using Rng = std::mt19937_64;

// Field numbers of Feature's oneof.
enum Kind { kNone = 0, kBytes = 1, kFloat = 2, kInt64 = 3 };

struct Value {
  Kind kind = kNone;
  std::vector<int64_t> ints;
  std::vector<float> floats;
  std::vector<std::string> bytes;
  size_t size() const {
    return kind == kInt64 ? ints.size() : kind == kFloat ? floats.size() : bytes.size();
  }
};

// An Example as the ordered list of its map entries (names may repeat).
using Entries = std::vector<std::pair<std::string, Value>>;

int Uniform(Rng& rng, int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); }
bool Chance(Rng& rng, double p) { return std::bernoulli_distribution(p)(rng); }

FeatureSpec RandomSpec(Rng& rng) {
  FeatureSpec spec;
  spec.label_name = "label";
  spec.label_type = Chance(rng, 0.5) ? FeatureType::kFloat : FeatureType::kInt64;
  spec.on_missing = Chance(rng, 0.7) ? MissingPolicy::kDefault : MissingPolicy::kError;
  spec.on_type_mismatch = Chance(rng, 0.5) ? MismatchPolicy::kDefault : MismatchPolicy::kError;
  const int n = Uniform(rng, 0, 8);
  for (int i = 0; i < n; ++i) {
    FeatureSpecEntry f;
    f.name = "f" + std::to_string(i);
    switch (Uniform(rng, 0, 3)) {
      case 0:
        f.type = FeatureType::kFloat;
        f.kind = FeatureKind::kFixed;
        break;
      case 1:
        f.type = FeatureType::kInt64;
        f.kind = FeatureKind::kFixed;
        break;
      case 2:
        f.type = FeatureType::kInt64;
        f.kind = FeatureKind::kVarLen;
        break;
      default:
        f.type = FeatureType::kBytes;
        f.kind = FeatureKind::kVarLen;
        break;
    }
    if (f.kind == FeatureKind::kFixed) {
      f.length = Uniform(rng, 1, 3);
      f.default_value = Uniform(rng, -5, 5);
    } else {
      f.max_length = Chance(rng, 0.5) ? 0 : Uniform(rng, 1, 3);
    }
    spec.features.push_back(f);
  }
  return spec;
}

Value RandomValue(Rng& rng, Kind kind, int count) {
  Value v;
  v.kind = kind;
  for (int i = 0; i < count; ++i) {
    switch (kind) {
      case kInt64:
        v.ints.push_back(Chance(rng, 0.5) ? Uniform(rng, -3, 300) : static_cast<int64_t>(rng()));
        break;
      case kFloat: {
        const uint32_t bits = static_cast<uint32_t>(rng());  // NaNs included
        float f;
        std::memcpy(&f, &bits, 4);
        v.floats.push_back(Chance(rng, 0.5) ? static_cast<float>(Uniform(rng, 0, 9)) : f);
        break;
      }
      case kBytes: {
        std::string s(Uniform(rng, 0, 6), '\0');
        for (char& c : s) c = static_cast<char>(rng());  // any bytes
        v.bytes.push_back(s);
        break;
      }
      case kNone:
        break;
    }
  }
  return v;
}

Kind DeclaredKind(FeatureType t) {
  return t == FeatureType::kBytes ? kBytes : t == FeatureType::kFloat ? kFloat : kInt64;
}

Entries RandomEntries(const FeatureSpec& spec, Rng& rng) {
  Entries entries;
  auto random_feature = [&](Kind usual, int usual_count) {
    if (Chance(rng, 0.05)) return Value();  // present, no kind
    const Kind kind = Chance(rng, 0.85) ? usual : static_cast<Kind>(Uniform(rng, 1, 3));
    const int count = Chance(rng, 0.85) && usual_count >= 0 ? usual_count : Uniform(rng, 0, 5);
    return RandomValue(rng, kind, count);
  };
  if (!Chance(rng, 0.05)) {
    const Kind k = spec.label_type == FeatureType::kFloat ? kFloat : kInt64;
    entries.emplace_back("label", random_feature(Chance(rng, 0.2) ? kInt64 : k, 1));
  }
  for (const FeatureSpecEntry& f : spec.features) {
    if (Chance(rng, 0.1)) continue;  // missing
    const int usual = f.kind == FeatureKind::kFixed ? f.length : Uniform(rng, 0, 5);
    entries.emplace_back(f.name, random_feature(DeclaredKind(f.type), usual));
  }
  const int unknown = Uniform(rng, 0, 3);
  for (int i = 0; i < unknown; ++i) {
    entries.emplace_back(
        "u" + std::to_string(Uniform(rng, 0, 2)),
        RandomValue(rng, static_cast<Kind>(Uniform(rng, 0, 3)), Uniform(rng, 0, 3)));
  }
  // Earlier entries for names that appear again later (the last one wins).
  if (!entries.empty() && Chance(rng, 0.2)) {
    const auto& [name, value] = entries[Uniform(rng, 0, static_cast<int>(entries.size()) - 1)];
    entries.emplace_back(name, value);
    entries.back().second =
        RandomValue(rng, static_cast<Kind>(Uniform(rng, 0, 3)), Uniform(rng, 0, 4));
  }
  std::shuffle(entries.begin(), entries.end(), rng);
  return entries;
}

std::string EncodeWithProtobuf(const Entries& entries) {
  tf::Example example;
  auto& map = *example.mutable_features()->mutable_feature();
  for (const auto& [name, v] : entries) {
    tf::Feature& f = map[name];
    f.Clear();  // a later entry replaces an earlier one, as when parsing
    switch (v.kind) {
      case kInt64:
        for (int64_t i : v.ints) f.mutable_int64_list()->add_value(i);
        f.mutable_int64_list();
        break;
      case kFloat:
        for (float x : v.floats) f.mutable_float_list()->add_value(x);
        f.mutable_float_list();
        break;
      case kBytes:
        for (const auto& s : v.bytes) f.mutable_bytes_list()->add_value(s);
        f.mutable_bytes_list();
        break;
      case kNone:
        break;
    }
  }
  std::string out;
  EXPECT_TRUE(example.SerializeToString(&out));
  return out;
}

Wire Junk(Rng& rng) {
  Wire w;
  if (!Chance(rng, 0.15)) return w;
  const uint32_t field = static_cast<uint32_t>(Uniform(rng, 4, 40));
  switch (Uniform(rng, 0, 4)) {
    case 0:
      return w.VarintField(field, rng());
    case 1:
      return w.Fixed64(field, rng());
    case 2:
      return w.Len(field, "junk");
    case 3:
      return w.Fixed32(field, static_cast<uint32_t>(rng()));
    default:
      return w.Group(field, Wire().VarintField(1, 2).Len(2, "g"));
  }
}

// The list message for `v`, values split into chunks each packed or not.
Wire EncodeList(const Value& v, Rng& rng) {
  Wire list;
  list.Raw(Junk(rng).str());
  size_t i = 0;
  const size_t n = v.size();
  while (i < n) {
    const size_t chunk = std::min(n - i, static_cast<size_t>(Uniform(rng, 1, 3)));
    const bool packed = Chance(rng, 0.5);
    if (v.kind == kBytes) {
      for (size_t j = i; j < i + chunk; ++j) list.Len(1, v.bytes[j]);
    } else if (v.kind == kInt64) {
      if (packed) {
        Wire p;
        for (size_t j = i; j < i + chunk; ++j) p.Varint(static_cast<uint64_t>(v.ints[j]));
        list.Len(1, p);
      } else {
        for (size_t j = i; j < i + chunk; ++j)
          list.VarintField(1, static_cast<uint64_t>(v.ints[j]));
      }
    } else {
      if (packed) {
        std::string bytes;
        for (size_t j = i; j < i + chunk; ++j)
          bytes.append(reinterpret_cast<const char*>(&v.floats[j]), 4);
        list.Len(1, bytes);
      } else {
        for (size_t j = i; j < i + chunk; ++j) list.Float(1, v.floats[j]);
      }
    }
    list.Raw(Junk(rng).str());
    i += chunk;
  }
  return list;
}

std::string EncodeByHand(const Entries& entries, Rng& rng) {
  Wire features[2];
  for (const auto& [name, v] : entries) {
    Wire feature;
    feature.Raw(Junk(rng).str());
    if (Chance(rng, 0.1)) {  // a decoy of another kind, cleared by the real one
      feature.Len(static_cast<uint32_t>(Uniform(rng, 1, 3)), Wire().Len(1, std::string(4, 'x')));
    }
    if (v.kind != kNone) {
      // Sometimes split the list over two fields of the same kind (merged).
      if (v.size() >= 2 && Chance(rng, 0.2)) {
        Value a = v, b = v;
        const size_t cut = v.size() / 2;
        a.ints.resize(std::min(a.ints.size(), cut));
        a.floats.resize(std::min(a.floats.size(), cut));
        a.bytes.resize(std::min(a.bytes.size(), cut));
        if (!b.ints.empty()) b.ints.erase(b.ints.begin(), b.ints.begin() + cut);
        if (!b.floats.empty()) b.floats.erase(b.floats.begin(), b.floats.begin() + cut);
        if (!b.bytes.empty()) b.bytes.erase(b.bytes.begin(), b.bytes.begin() + cut);
        feature.Len(v.kind, EncodeList(a, rng))
            .Raw(Junk(rng).str())
            .Len(v.kind, EncodeList(b, rng));
      } else {
        feature.Len(v.kind, EncodeList(v, rng));
      }
    } else if (Chance(rng, 0.3)) {
      feature = Wire();  // value field with an empty Feature, or no value at all
    }
    Wire entry;
    const bool value_first = Chance(rng, 0.2);
    if (value_first) entry.Len(2, feature);
    entry.Raw(Junk(rng).str()).Len(1, name);
    if (!value_first) entry.Len(2, feature);
    features[Chance(rng, 0.1) ? 1 : 0].Raw(Junk(rng).str()).Len(1, entry);
  }
  Wire example;
  example.Raw(Junk(rng).str()).Len(1, features[0]);
  if (!features[1].str().empty()) example.Len(1, features[1]);
  return example.Raw(Junk(rng).str()).str();
}

TEST(ExampleParserRandomTest, WireAndReferenceParsersAgreeOnRandomExamples) {
  Rng rng(20240611);
  int ok = 0, invalid = 0;
  for (int s = 0; s < 60; ++s) {
    const FeatureSpec spec = RandomSpec(rng);
    absl::StatusOr<ExampleParser> parser = ExampleParser::Create(spec);
    ASSERT_TRUE(parser.ok()) << parser.status();
    DualParse both(*parser);
    for (int e = 0; e < 100; ++e) {
      const Entries entries = RandomEntries(spec, rng);
      const std::string record =
          Chance(rng, 0.5) ? EncodeWithProtobuf(entries) : EncodeByHand(entries, rng);
      const absl::Status st = both.Parse(record);
      if (::testing::Test::HasFailure()) {
        FAIL() << "spec:\n" << spec.ToYaml() << "example #" << e;
      }
      ASSERT_NE(st.code(), absl::StatusCode::kDataLoss) << st;
      (st.ok() ? ok : invalid)++;
    }
  }
  // Both outcomes must be well represented or the test proves little.
  EXPECT_GT(ok, 1000);
  EXPECT_GT(invalid, 1000);
}

// Runs one (possibly corrupt) record through both parsers on top of a batch
// that already holds rows. The wire parser must never crash, must leave the
// batch untouched when it fails, and must accept whatever protobuf accepts
// with the same result. It may accept more (it does not look inside features
// outside the spec, nor check that names are UTF-8). Returns true if the wire
// parser accepted where the reference did not.
bool CheckCorrupt(const ExampleParser& parser, const std::vector<std::string>& prefix,
                  std::string_view record) {
  ColumnarBatch wire, ref;
  parser.InitBatch(&wire);
  parser.InitBatch(&ref);
  for (const std::string& p : prefix) {
    EXPECT_TRUE(parser.Append(p, &wire, nullptr).ok());
    EXPECT_TRUE(parser.Append(p, &ref, nullptr).ok());
  }
  const ColumnarBatch before = wire;
  ParseStats ws, rs;
  const absl::Status w = parser.Append(record, &wire, &ws);
  const absl::Status r = ReferenceParse(parser.spec(), record, &ref, &rs);
  if (!w.ok()) {
    EXPECT_TRUE(SameBatch(wire, before)) << w;
    EXPECT_EQ(ws.rejected, 1u);
    EXPECT_TRUE(w.code() == absl::StatusCode::kDataLoss ||
                w.code() == absl::StatusCode::kInvalidArgument)
        << w;
  } else {
    EXPECT_EQ(wire.num_rows, before.num_rows + 1);
  }
  if (r.code() != absl::StatusCode::kDataLoss) {  // protobuf parsed it
    EXPECT_EQ(w.code(), r.code()) << "wire: " << w << "\nreference: " << r;
    EXPECT_EQ(w.message(), r.message());
    EXPECT_TRUE(SameBatch(wire, ref));
    EXPECT_TRUE(SameStats(ws, rs));
  }
  return r.code() == absl::StatusCode::kDataLoss && w.code() != absl::StatusCode::kDataLoss;
}

std::vector<std::string> CriteoRecords() {
  auto reader = storage::TFRecordReader::Open(
      brook::testing::SharedDataDir() + "/tfrecord/criteo_sample.te.tfrecords",
      storage::TFRecordReaderOptions());
  std::vector<std::string> out;
  if (!reader.ok()) return out;
  std::string_view r;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&r);
    if (!more.ok() || !*more) break;
    out.emplace_back(r);
  }
  return out;
}

FeatureSpec CriteoSpec(MismatchPolicy mismatch) {
  FeatureSpec spec;
  spec.label_name = "label";
  spec.on_type_mismatch = mismatch;
  for (int i = 1; i <= 13; ++i) {
    spec.features.push_back({.name = "I" + std::to_string(i), .type = FeatureType::kFloat});
  }
  for (int i = 1; i <= 26; i += 2) {  // every other C feature: the rest are unknown
    spec.features.push_back({.name = "C" + std::to_string(i),
                             .type = FeatureType::kInt64,
                             .kind = FeatureKind::kVarLen});
  }
  return spec;
}

TEST(ExampleParserRandomTest, EveryTruncationIsAnErrorOrAValidParse) {
  const std::vector<std::string> criteo = CriteoRecords();
  ASSERT_EQ(criteo.size(), 40u);
  for (MismatchPolicy policy : {MismatchPolicy::kError, MismatchPolicy::kDefault}) {
    absl::StatusOr<ExampleParser> parser = ExampleParser::Create(CriteoSpec(policy));
    ASSERT_TRUE(parser.ok());
    const std::vector<std::string> prefix(criteo.begin(), criteo.begin() + 3);
    for (const std::string& record : {criteo[0], criteo[39]}) {
      for (size_t len = 0; len <= record.size(); ++len) {
        EXPECT_FALSE(CheckCorrupt(*parser, prefix, std::string_view(record).substr(0, len)))
            << "truncated to " << len;
        if (::testing::Test::HasFailure()) FAIL() << "truncated to " << len;
      }
    }
  }
  // Hand-encoded records with every variation, truncated everywhere.
  Rng rng(7);
  for (int i = 0; i < 20; ++i) {
    const FeatureSpec spec = RandomSpec(rng);
    absl::StatusOr<ExampleParser> parser = ExampleParser::Create(spec);
    ASSERT_TRUE(parser.ok());
    const std::string record = EncodeByHand(RandomEntries(spec, rng), rng);
    for (size_t len = 0; len <= record.size(); ++len) {
      CheckCorrupt(*parser, {}, std::string_view(record).substr(0, len));
      if (::testing::Test::HasFailure()) FAIL() << spec.ToYaml() << "truncated to " << len;
    }
  }
}

TEST(ExampleParserRandomTest, RandomByteFlipsNeverCrashOrCorruptTheBatch) {
  const std::vector<std::string> criteo = CriteoRecords();
  ASSERT_EQ(criteo.size(), 40u);
  absl::StatusOr<ExampleParser> parser =
      ExampleParser::Create(CriteoSpec(MismatchPolicy::kDefault));
  ASSERT_TRUE(parser.ok());
  const std::vector<std::string> prefix(criteo.begin(), criteo.begin() + 2);
  // protobuf logs every non-UTF-8 map key it rejects; thousands are expected.
  google::protobuf::LogSilencer quiet;
  Rng rng(99);
  int lenient = 0;
  for (int i = 0; i < 4000; ++i) {
    std::string record = criteo[static_cast<size_t>(Uniform(rng, 0, 39))];
    const int flips = Uniform(rng, 1, 4);
    for (int f = 0; f < flips; ++f) {
      const size_t at = static_cast<size_t>(Uniform(rng, 0, static_cast<int>(record.size()) - 1));
      if (Chance(rng, 0.5)) {
        record[at] = static_cast<char>(record[at] ^ (1 << Uniform(rng, 0, 7)));
      } else {
        record[at] = static_cast<char>(rng());
      }
    }
    lenient += CheckCorrupt(*parser, prefix, record);
    if (::testing::Test::HasFailure()) FAIL() << "flip case " << i;
  }
  // Some flips land inside features outside the spec: protobuf rejects those,
  // the wire parser (like TensorFlow's) does not read them.
  std::printf("[ info     ] %d of 4000 corrupt records accepted by the wire parser only\n",
              lenient);
}

}  // namespace
}  // namespace brook::input
