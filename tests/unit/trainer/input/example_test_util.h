// Test helpers for the tf.train.Example parsers: a tiny protobuf wire writer
// for encodings protobuf's serializer never produces (unpacked lists, fields
// out of order, unknown fields), batch comparison, and a driver that runs the
// wire parser and the reference parser on the same bytes.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "features/feature_spec.h"
#include "gtest/gtest.h"
#include "trainer/input/columnar_batch.h"
#include "trainer/input/example_parser.h"
#include "trainer/input/example_parser_reference.h"

namespace brook::input::testing {

enum WireType { kVarint = 0, kFixed64 = 1, kLen = 2, kStartGroup = 3, kEndGroup = 4, kFixed32 = 5 };

// Appends protobuf wire data. Writes exactly what it is told, valid or not.
class Wire {
 public:
  Wire& Raw(std::string_view bytes) {
    out_.append(bytes);
    return *this;
  }
  Wire& Varint(uint64_t v) {
    while (v >= 0x80) {
      out_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    out_.push_back(static_cast<char>(v));
    return *this;
  }
  Wire& Tag(uint32_t field, WireType type) { return Varint(uint64_t{field} << 3 | type); }
  Wire& Len(uint32_t field, std::string_view bytes) {
    Tag(field, kLen).Varint(bytes.size());
    return Raw(bytes);
  }
  Wire& Len(uint32_t field, const Wire& message) { return Len(field, message.str()); }
  Wire& VarintField(uint32_t field, uint64_t v) { return Tag(field, kVarint).Varint(v); }
  Wire& Fixed32(uint32_t field, uint32_t v) {
    Tag(field, kFixed32);
    char b[4];
    std::memcpy(b, &v, 4);
    return Raw(std::string_view(b, 4));
  }
  Wire& Fixed64(uint32_t field, uint64_t v) {
    Tag(field, kFixed64);
    char b[8];
    std::memcpy(b, &v, 8);
    return Raw(std::string_view(b, 8));
  }
  Wire& Float(uint32_t field, float f) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    return Fixed32(field, bits);
  }
  // A group (wire types 3/4) holding `body`.
  Wire& Group(uint32_t field, const Wire& body) {
    Tag(field, kStartGroup).Raw(body.str());
    return Tag(field, kEndGroup);
  }

  const std::string& str() const { return out_; }

 private:
  std::string out_;
};

// Common message builders, all by hand.
inline Wire PackedInt64s(std::initializer_list<int64_t> values) {
  Wire packed;
  for (int64_t v : values) packed.Varint(static_cast<uint64_t>(v));
  return Wire().Len(1, packed);
}
inline Wire PackedFloats(std::initializer_list<float> values) {
  std::string bytes;
  for (float f : values) bytes.append(reinterpret_cast<const char*>(&f), 4);
  return Wire().Len(1, bytes);
}
// Feature { <kind field>: list }
inline Wire FeatureOf(uint32_t kind_field, const Wire& list) {
  return Wire().Len(kind_field, list);
}
inline Wire Int64Feature(std::initializer_list<int64_t> v) { return FeatureOf(3, PackedInt64s(v)); }
inline Wire FloatFeature(std::initializer_list<float> v) { return FeatureOf(2, PackedFloats(v)); }
// Features.feature map entry { key = 1; value = 2 }.
inline Wire Entry(std::string_view key, const Wire& feature) {
  return Wire().Len(1, key).Len(2, feature);
}
// Features { feature: entries... } as a message body.
inline Wire FeaturesOf(std::initializer_list<Wire> entries) {
  Wire body;
  for (const Wire& e : entries) body.Len(1, e);
  return body;
}
// Example { features { feature: entries... } }, serialized.
inline std::string ExampleOf(std::initializer_list<Wire> entries) {
  return Wire().Len(1, FeaturesOf(entries)).str();
}

inline bool SameBits(const void* a, const void* b, size_t n) {
  return n == 0 || std::memcmp(a, b, n) == 0;
}

// Bitwise equality (NaN payloads included).
inline ::testing::AssertionResult SameBatch(const ColumnarBatch& a, const ColumnarBatch& b) {
  if (a.num_rows != b.num_rows) {
    return ::testing::AssertionFailure() << "num_rows " << a.num_rows << " vs " << b.num_rows;
  }
  if (a.labels.size() != b.labels.size() ||
      !SameBits(a.labels.data(), b.labels.data(), a.labels.size() * sizeof(float))) {
    return ::testing::AssertionFailure() << "labels differ";
  }
  if (a.columns.size() != b.columns.size()) return ::testing::AssertionFailure() << "columns";
  for (size_t i = 0; i < a.columns.size(); ++i) {
    const Column& x = a.columns[i];
    const Column& y = b.columns[i];
    if (x.floats.size() != y.floats.size() ||
        !SameBits(x.floats.data(), y.floats.data(), x.floats.size() * sizeof(float))) {
      return ::testing::AssertionFailure() << "column " << i << " floats differ";
    }
    if (x.int64s != y.int64s) return ::testing::AssertionFailure() << "column " << i << " int64s";
    if (x.ids != y.ids) return ::testing::AssertionFailure() << "column " << i << " ids";
    if (x.row_splits != y.row_splits) {
      return ::testing::AssertionFailure() << "column " << i << " row_splits";
    }
  }
  return ::testing::AssertionSuccess();
}

inline ::testing::AssertionResult SameStats(const ParseStats& a, const ParseStats& b) {
  if (a.examples != b.examples || a.rejected != b.rejected ||
      a.unknown_features != b.unknown_features || a.missing != b.missing ||
      a.mismatched != b.mismatched) {
    auto r = ::testing::AssertionFailure();
    r << "examples " << a.examples << "/" << b.examples << " rejected " << a.rejected << "/"
      << b.rejected << " unknown " << a.unknown_features << "/" << b.unknown_features
      << " missing/mismatched:";
    for (size_t i = 0; i < a.missing.size() && i < b.missing.size(); ++i) {
      r << " [" << a.missing[i] << "/" << b.missing[i] << "," << a.mismatched[i] << "/"
        << b.mismatched[i] << "]";
    }
    return r;
  }
  return ::testing::AssertionSuccess();
}

// Runs both parsers over the same records, each into its own batch/stats.
struct DualParse {
  explicit DualParse(const ExampleParser& p) : parser(p) {
    parser.InitBatch(&wire_batch);
    parser.InitBatch(&ref_batch);
    parser.InitStats(&wire_stats);
    parser.InitStats(&ref_stats);
  }

  // Parses `record` with both; expects the same outcome, batch and stats.
  // Returns the wire parser's status.
  absl::Status Parse(std::string_view record) {
    absl::Status w = parser.Append(record, &wire_batch, &wire_stats);
    absl::Status r = ReferenceParse(parser.spec(), record, &ref_batch, &ref_stats);
    EXPECT_EQ(w.code(), r.code()) << "wire: " << w << "\nreference: " << r;
    if (w.code() == absl::StatusCode::kInvalidArgument) {
      EXPECT_EQ(w.message(), r.message());
    }
    EXPECT_TRUE(SameBatch(wire_batch, ref_batch));
    EXPECT_TRUE(SameStats(wire_stats, ref_stats));
    return w;
  }

  const ExampleParser& parser;
  ColumnarBatch wire_batch, ref_batch;
  ParseStats wire_stats, ref_stats;
};

}  // namespace brook::input::testing
