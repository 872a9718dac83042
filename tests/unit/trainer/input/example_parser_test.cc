#include "trainer/input/example_parser.h"

#include <chrono>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/hash.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/test_util.h"
#include "tests/unit/trainer/input/example_test_util.h"
#include "trainer/input/example_parser_reference.h"

namespace brook::input {
namespace {

using ::testing::HasSubstr;
using namespace ::brook::input::testing;  // NOLINT: test helpers

FeatureSpecEntry FixedFloat(std::string name, int length = 1, double def = 0.0) {
  return {.name = std::move(name),
          .type = FeatureType::kFloat,
          .kind = FeatureKind::kFixed,
          .length = length,
          .default_value = def};
}
FeatureSpecEntry FixedInt64(std::string name, int length = 1, double def = 0.0) {
  return {.name = std::move(name),
          .type = FeatureType::kInt64,
          .kind = FeatureKind::kFixed,
          .length = length,
          .default_value = def};
}
FeatureSpecEntry VarInt64(std::string name, int max_length = 0) {
  return {.name = std::move(name),
          .type = FeatureType::kInt64,
          .kind = FeatureKind::kVarLen,
          .max_length = max_length};
}
FeatureSpecEntry VarBytes(std::string name, int max_length = 0) {
  return {.name = std::move(name),
          .type = FeatureType::kBytes,
          .kind = FeatureKind::kVarLen,
          .max_length = max_length};
}

FeatureSpec MakeSpec(std::vector<FeatureSpecEntry> features,
                     MissingPolicy on_missing = MissingPolicy::kDefault,
                     MismatchPolicy on_mismatch = MismatchPolicy::kError) {
  FeatureSpec spec;
  spec.label_name = "label";
  spec.on_missing = on_missing;
  spec.on_type_mismatch = on_mismatch;
  spec.features = std::move(features);
  return spec;
}

ExampleParser MustCreate(const FeatureSpec& spec) {
  absl::StatusOr<ExampleParser> p = ExampleParser::Create(spec);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

float FloatFromBits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Builds Examples with the generated classes, as most producers do.
class ProtoExample {
 public:
  ProtoExample& Floats(const std::string& name, std::initializer_list<float> v) {
    auto* list = Map()[name].mutable_float_list();
    for (float f : v) list->add_value(f);
    return *this;
  }
  ProtoExample& Int64s(const std::string& name, std::initializer_list<int64_t> v) {
    auto* list = Map()[name].mutable_int64_list();
    for (int64_t i : v) list->add_value(i);
    return *this;
  }
  ProtoExample& Bytes(const std::string& name, std::initializer_list<std::string> v) {
    auto* list = Map()[name].mutable_bytes_list();
    for (const std::string& s : v) list->add_value(s);
    return *this;
  }
  ProtoExample& Empty(const std::string& name) {  // present, no kind set
    Map()[name];
    return *this;
  }
  std::string Serialize() const {
    std::string out;
    EXPECT_TRUE(example_.SerializeToString(&out));
    return out;
  }

 private:
  google::protobuf::Map<std::string, tf::Feature>& Map() {
    return *example_.mutable_features()->mutable_feature();
  }
  tf::Example example_;
};

TEST(ExampleParserTest, FillsEveryColumnKind) {
  const FeatureSpec spec =
      MakeSpec({FixedFloat("f", 2), FixedInt64("n"), VarInt64("ids"), VarBytes("s")});
  const ExampleParser parser = MustCreate(spec);
  DualParse both(parser);
  ASSERT_TRUE(both.Parse(ProtoExample()
                             .Floats("label", {1.0f})
                             .Floats("f", {0.5f, -2.0f})
                             .Int64s("n", {-7})
                             .Int64s("ids", {1, -1, 3})
                             .Bytes("s", {"a", "bc"})
                             .Serialize())
                  .ok());
  ASSERT_TRUE(both.Parse(ProtoExample()
                             .Floats("label", {0.0f})
                             .Floats("f", {3.0f, 4.0f})
                             .Int64s("n", {int64_t{1} << 40})
                             .Int64s("ids", {})
                             .Bytes("s", {""})
                             .Serialize())
                  .ok());
  const ColumnarBatch& b = both.wire_batch;
  EXPECT_EQ(b.num_rows, 2u);
  EXPECT_THAT(b.labels, ::testing::ElementsAre(1.0f, 0.0f));
  EXPECT_THAT(b.columns[0].floats, ::testing::ElementsAre(0.5f, -2.0f, 3.0f, 4.0f));
  EXPECT_THAT(b.columns[1].int64s, ::testing::ElementsAre(-7, int64_t{1} << 40));
  EXPECT_THAT(b.columns[2].ids, ::testing::ElementsAre(1u, ~uint64_t{0}, 3u));
  EXPECT_THAT(b.columns[2].row_splits, ::testing::ElementsAre(0u, 3u, 3u));
  EXPECT_THAT(b.columns[3].ids, ::testing::ElementsAre(Hash64("a"), Hash64("bc"), Hash64("")));
  EXPECT_THAT(b.columns[3].row_splits, ::testing::ElementsAre(0u, 2u, 3u));
  EXPECT_EQ(both.wire_stats.examples, 2u);
  EXPECT_EQ(both.wire_stats.rejected, 0u);
  EXPECT_THAT(both.wire_stats.missing, ::testing::ElementsAre(0, 0, 0, 0));
}

TEST(ExampleParserTest, LabelMayBeInt64OrFloatAndIsRequired) {
  FeatureSpec spec = MakeSpec({FixedFloat("x")});
  spec.label_type = FeatureType::kInt64;
  const ExampleParser parser = MustCreate(spec);
  DualParse both(parser);
  EXPECT_TRUE(both.Parse(ProtoExample().Int64s("label", {1}).Floats("x", {1}).Serialize()).ok());
  EXPECT_TRUE(both.Parse(ProtoExample().Floats("label", {0.25f}).Serialize()).ok());
  EXPECT_THAT(both.wire_batch.labels, ::testing::ElementsAre(1.0f, 0.25f));

  absl::Status s = both.Parse(ProtoExample().Floats("x", {1}).Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "label \"label\" missing");
  s = both.Parse(ProtoExample().Empty("label").Serialize());
  EXPECT_EQ(s.message(), "label \"label\" missing");
  s = both.Parse(ProtoExample().Bytes("label", {"1"}).Serialize());
  EXPECT_EQ(s.message(),
            "label \"label\": expected one int64 or float value, got bytes_list with 1 value");
  s = both.Parse(ProtoExample().Floats("label", {1, 0}).Serialize());
  EXPECT_THAT(s.message(), HasSubstr("got float_list with 2 values"));
  s = both.Parse(ProtoExample().Int64s("label", {}).Serialize());
  EXPECT_THAT(s.message(), HasSubstr("got int64_list with 0 values"));
  EXPECT_EQ(both.wire_batch.num_rows, 2u);
  EXPECT_EQ(both.wire_stats.examples, 2u);
  EXPECT_EQ(both.wire_stats.rejected, 5u);
}

TEST(ExampleParserTest, MissingFeaturesGetDefaultsOrEmptyListsAndAreCounted) {
  const FeatureSpec spec =
      MakeSpec({FixedFloat("f", 2, 3.5), FixedInt64("n", 1, -1), VarInt64("ids"), VarBytes("s")});
  const ExampleParser parser = MustCreate(spec);
  DualParse both(parser);
  ASSERT_TRUE(both.Parse(ProtoExample().Floats("label", {1}).Serialize()).ok());
  // A Feature with no list set counts as missing too.
  ASSERT_TRUE(
      both.Parse(ProtoExample().Floats("label", {1}).Empty("f").Empty("ids").Serialize()).ok());
  const ColumnarBatch& b = both.wire_batch;
  EXPECT_THAT(b.columns[0].floats, ::testing::ElementsAre(3.5f, 3.5f, 3.5f, 3.5f));
  EXPECT_THAT(b.columns[1].int64s, ::testing::ElementsAre(-1, -1));
  EXPECT_THAT(b.columns[2].row_splits, ::testing::ElementsAre(0u, 0u, 0u));
  EXPECT_THAT(b.columns[3].row_splits, ::testing::ElementsAre(0u, 0u, 0u));
  EXPECT_THAT(both.wire_stats.missing, ::testing::ElementsAre(2, 2, 2, 2));
  EXPECT_THAT(both.wire_stats.mismatched, ::testing::ElementsAre(0, 0, 0, 0));
}

TEST(ExampleParserTest, OnMissingErrorNamesTheFeature) {
  const FeatureSpec spec = MakeSpec({FixedFloat("f"), VarInt64("ids")}, MissingPolicy::kError);
  const ExampleParser parser = MustCreate(spec);
  DualParse both(parser);
  absl::Status s = both.Parse(ProtoExample().Floats("label", {1}).Int64s("ids", {}).Serialize());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "feature \"f\" missing (on_missing: error)");
  s = both.Parse(ProtoExample().Floats("label", {1}).Floats("f", {1}).Serialize());
  EXPECT_EQ(s.message(), "feature \"ids\" missing (on_missing: error)");
  // An empty list is present, not missing.
  EXPECT_TRUE(
      both.Parse(ProtoExample().Floats("label", {1}).Floats("f", {1}).Int64s("ids", {}).Serialize())
          .ok());
}

TEST(ExampleParserTest, TypeMismatchIsAnErrorOrADefault) {
  const auto make = [](MismatchPolicy p) {
    return MakeSpec({FixedFloat("f", 2, 9), FixedInt64("n"), VarInt64("ids"), VarBytes("s")},
                    MissingPolicy::kDefault, p);
  };
  const ExampleParser strict = MustCreate(make(MismatchPolicy::kError));
  DualParse both(strict);
  absl::Status s = both.Parse(ProtoExample().Floats("label", {1}).Int64s("f", {1, 2}).Serialize());
  EXPECT_EQ(s.message(),
            "feature \"f\": type mismatch: expected float_list with 2 values, got int64_list "
            "with 2 values");
  s = both.Parse(ProtoExample().Floats("label", {1}).Floats("f", {1, 2, 3}).Serialize());
  EXPECT_EQ(s.message(),
            "feature \"f\": type mismatch: expected float_list with 2 values, got float_list "
            "with 3 values");
  s = both.Parse(ProtoExample().Floats("label", {1}).Bytes("ids", {"x"}).Serialize());
  EXPECT_EQ(s.message(),
            "feature \"ids\": type mismatch: expected int64_list, got bytes_list with 1 value");
  s = both.Parse(ProtoExample().Floats("label", {1}).Int64s("s", {4}).Serialize());
  EXPECT_THAT(s.message(), HasSubstr("feature \"s\": type mismatch"));
  EXPECT_EQ(both.wire_batch.num_rows, 0u);

  const ExampleParser lenient = MustCreate(make(MismatchPolicy::kDefault));
  DualParse soft(lenient);
  ASSERT_TRUE(soft.Parse(ProtoExample()
                             .Floats("label", {1})
                             .Floats("f", {1})
                             .Floats("n", {1})
                             .Floats("ids", {1})
                             .Bytes("s", {"ok"})
                             .Serialize())
                  .ok());
  const ColumnarBatch& b = soft.wire_batch;
  EXPECT_THAT(b.columns[0].floats, ::testing::ElementsAre(9.0f, 9.0f));
  EXPECT_THAT(b.columns[1].int64s, ::testing::ElementsAre(0));
  EXPECT_THAT(b.columns[2].row_splits, ::testing::ElementsAre(0u, 0u));
  EXPECT_THAT(b.columns[3].ids, ::testing::ElementsAre(Hash64("ok")));
  EXPECT_THAT(soft.wire_stats.mismatched, ::testing::ElementsAre(1, 1, 1, 0));
  EXPECT_THAT(soft.wire_stats.missing, ::testing::ElementsAre(0, 0, 0, 0));
}

TEST(ExampleParserTest, VarlenListsAreTruncatedAtMaxLength) {
  const ExampleParser parser = MustCreate(MakeSpec({VarInt64("ids", 2), VarBytes("s", 1)}));
  DualParse both(parser);
  ASSERT_TRUE(both.Parse(ProtoExample()
                             .Floats("label", {1})
                             .Int64s("ids", {5, 6, 7, 8})
                             .Bytes("s", {"p", "q", "r"})
                             .Serialize())
                  .ok());
  EXPECT_THAT(both.wire_batch.columns[0].ids, ::testing::ElementsAre(5u, 6u));
  EXPECT_THAT(both.wire_batch.columns[1].ids, ::testing::ElementsAre(Hash64("p")));
}

TEST(ExampleParserTest, AcceptsUnpackedAndMixedEncodings) {
  const ExampleParser parser = MustCreate(MakeSpec({FixedFloat("f", 3), VarInt64("ids")}));
  DualParse both(parser);
  // FloatList: one unpacked value, then two packed; Int64List: unpacked
  // varints around a packed run; label as a single unpacked float.
  const Wire floats = Wire().Float(1, 1.5f).Raw(PackedFloats({2.5f, 3.5f}).str());
  const Wire ints = Wire()
                        .VarintField(1, 10)
                        .Raw(PackedInt64s({11, 12}).str())
                        .VarintField(1, static_cast<uint64_t>(-13));
  const std::string record =
      ExampleOf({Entry("label", FeatureOf(2, Wire().Float(1, 1.0f))),
                 Entry("f", FeatureOf(2, floats)), Entry("ids", FeatureOf(3, ints))});
  ASSERT_TRUE(both.Parse(record).ok());
  EXPECT_THAT(both.wire_batch.columns[0].floats, ::testing::ElementsAre(1.5f, 2.5f, 3.5f));
  EXPECT_THAT(both.wire_batch.columns[1].ids,
              ::testing::ElementsAre(10u, 11u, 12u, static_cast<uint64_t>(-13)));
  EXPECT_THAT(both.wire_batch.labels, ::testing::ElementsAre(1.0f));
}

TEST(ExampleParserTest, SkipsUnknownFieldsAtEveryLevel) {
  const ExampleParser parser = MustCreate(MakeSpec({FixedInt64("n", 2), VarBytes("s")}));
  DualParse both(parser);
  const Wire junk = Wire().VarintField(7, 300).Fixed64(8, 1).Len(9, "zz").Fixed32(10, 2).Group(
      11, Wire().VarintField(1, 1).Group(2, Wire().Len(3, "in")));
  const Wire n_list = Wire().Raw(junk.str()).Raw(PackedInt64s({4, 5}).str()).Raw(junk.str());
  const Wire n_feature = Wire().Raw(junk.str()).Len(3, n_list).Raw(junk.str());
  const Wire s_list = Wire().Len(1, "v").Raw(junk.str());
  const Wire entry_n = Wire().Raw(junk.str()).Len(1, "n").Raw(junk.str()).Len(2, n_feature);
  const Wire features = Wire()
                            .Raw(junk.str())
                            .Len(1, Entry("label", FloatFeature({1})))
                            .Len(1, entry_n)
                            .Raw(junk.str())
                            .Len(1, Entry("s", FeatureOf(1, s_list)));
  const std::string record = Wire().Raw(junk.str()).Len(1, features).Raw(junk.str()).str();
  ASSERT_TRUE(both.Parse(record).ok());
  EXPECT_THAT(both.wire_batch.columns[0].int64s, ::testing::ElementsAre(4, 5));
  EXPECT_THAT(both.wire_batch.columns[1].ids, ::testing::ElementsAre(Hash64("v")));
}

TEST(ExampleParserTest, KnownFieldWithAnotherWireTypeIsAnUnknownField) {
  const ExampleParser parser = MustCreate(MakeSpec({VarInt64("ids"), FixedFloat("f")}));
  DualParse both(parser);
  // Int64List.value as fixed32 and FloatList.value as varint: skipped, so
  // the lists are present and empty.
  const std::string record = ExampleOf({Entry("label", FloatFeature({1})),
                                        Entry("ids", FeatureOf(3, Wire().Fixed32(1, 5))),
                                        Entry("f", FeatureOf(2, Wire().VarintField(1, 5)))});
  absl::Status s = both.Parse(record);
  EXPECT_THAT(s.message(), HasSubstr("expected float_list with 1 value, got float_list with 0"));
  // Example.features as a varint: skipped, so the label is missing.
  s = both.Parse(Wire().VarintField(1, 5).str());
  EXPECT_EQ(s.message(), "label \"label\" missing");
}

TEST(ExampleParserTest, MapEntriesInAnyOrderOrIncomplete) {
  const ExampleParser parser =
      MustCreate(MakeSpec({VarInt64("a"), VarInt64("b"), FixedFloat("c", 1, 7)}));
  DualParse both(parser);
  const Wire features =
      Wire()
          .Len(1, Wire().Len(2, FloatFeature({1})).Len(1, "label"))            // value before key
          .Len(1, Wire().Len(1, "zzz").Len(2, Int64Feature({1})).Len(1, "a"))  // last key wins
          .Len(1, Wire().Len(1, "b").Len(2, Int64Feature({2})).Len(2, Int64Feature({3})))  // merged
          .Len(1, Wire().Len(2, Int64Feature({4})))  // no key: name ""
          .Len(1, Wire().Len(1, "c"));               // no value: an empty Feature
  ASSERT_TRUE(both.Parse(Wire().Len(1, features).str()).ok());
  const ColumnarBatch& b = both.wire_batch;
  EXPECT_THAT(b.columns[0].ids, ::testing::ElementsAre(1u));
  EXPECT_THAT(b.columns[1].ids, ::testing::ElementsAre(2u, 3u));
  EXPECT_THAT(b.columns[2].floats, ::testing::ElementsAre(7.0f));
  EXPECT_EQ(both.wire_stats.missing[2], 1u);
  EXPECT_EQ(both.wire_stats.unknown_features, 1u);  // ""
}

TEST(ExampleParserTest, ANameGivenTwiceKeepsTheLastEntry) {
  const ExampleParser parser = MustCreate(MakeSpec({VarInt64("a"), FixedFloat("f")}));
  DualParse both(parser);
  // Valid then invalid: the invalid one counts.
  absl::Status s =
      both.Parse(ExampleOf({Entry("label", FloatFeature({1})), Entry("f", FloatFeature({1})),
                            Entry("f", Int64Feature({1}))}));
  EXPECT_THAT(s.message(), HasSubstr("feature \"f\": type mismatch"));
  // Invalid then valid; a longer list then a shorter one; the label twice.
  ASSERT_TRUE(
      both.Parse(ExampleOf({Entry("label", FloatFeature({1})), Entry("f", Int64Feature({1, 2})),
                            Entry("a", Int64Feature({1, 2, 3})), Entry("f", FloatFeature({2})),
                            Entry("a", Int64Feature({9})), Entry("label", Int64Feature({0}))}))
          .ok());
  EXPECT_THAT(both.wire_batch.columns[0].ids, ::testing::ElementsAre(9u));
  EXPECT_THAT(both.wire_batch.columns[1].floats, ::testing::ElementsAre(2.0f));
  EXPECT_THAT(both.wire_batch.labels, ::testing::ElementsAre(0.0f));
  // Present then absent-kind: missing.
  ASSERT_TRUE(both.Parse(ExampleOf({Entry("label", FloatFeature({1})),
                                    Entry("a", Int64Feature({5})), Entry("a", Wire())}))
                  .ok());
  EXPECT_THAT(both.wire_batch.columns[0].row_splits, ::testing::ElementsAre(0u, 1u, 1u));
  EXPECT_EQ(both.wire_stats.missing[0], 1u);
  // Two Example.features fields merge their maps.
  const std::string two = Wire()
                              .Len(1, FeaturesOf({Entry("a", Int64Feature({6}))}))
                              .Len(1, FeaturesOf({Entry("label", FloatFeature({1}))}))
                              .str();
  ASSERT_TRUE(both.Parse(two).ok());
  EXPECT_THAT(both.wire_batch.columns[0].ids, ::testing::ElementsAre(9u, 6u));
}

TEST(ExampleParserTest, ANewOneofCaseReplacesTheOldAndTheSameCaseMerges) {
  const ExampleParser parser = MustCreate(MakeSpec({VarInt64("a")}));
  DualParse both(parser);
  const Wire feature = Wire()
                           .Len(3, PackedInt64s({1, 2}))
                           .Len(2, PackedFloats({1}))
                           .Len(3, PackedInt64s({3}))
                           .Len(3, PackedInt64s({4}));
  ASSERT_TRUE(both.Parse(ExampleOf({Entry("label", FloatFeature({1})), Entry("a", feature)})).ok());
  EXPECT_THAT(both.wire_batch.columns[0].ids, ::testing::ElementsAre(3u, 4u));
  // Two value fields in one entry merge the same way.
  const Wire entry = Wire()
                         .Len(1, "a")
                         .Len(2, Int64Feature({7}))
                         .Len(2, FloatFeature({1}))
                         .Len(2, Int64Feature({8}));
  ASSERT_TRUE(both.Parse(ExampleOf({Entry("label", FloatFeature({1})), entry})).ok());
  EXPECT_THAT(both.wire_batch.columns[0].ids, ::testing::ElementsAre(3u, 4u, 8u));
}

TEST(ExampleParserTest, CountsDistinctUnknownFeatures) {
  const ExampleParser parser = MustCreate(MakeSpec({VarInt64("a")}));
  DualParse both(parser);
  ASSERT_TRUE(
      both.Parse(ExampleOf({Entry("u", Int64Feature({1})), Entry("label", FloatFeature({1})),
                            Entry("v", Wire()), Entry("u", FloatFeature({2}))}))
          .ok());
  EXPECT_EQ(both.wire_stats.unknown_features, 2u);
}

TEST(ExampleParserTest, MalformedWireDataIsDataLossWithTheByteOffset) {
  const ExampleParser parser = MustCreate(MakeSpec({VarInt64("ids"), FixedFloat("f")}));
  const std::string good = ExampleOf({Entry("label", FloatFeature({1}))});
  const size_t g = good.size();
  struct Case {
    std::string record;
    std::string expect;
  } cases[] = {
      {std::string("\x00", 1), "field number 0 at byte offset 0"},
      {good + "\x0f", "invalid wire type at byte offset " + std::to_string(g)},
      {good + "\x0e", "invalid wire type at byte offset " + std::to_string(g)},
      {good + "\x0c", "end-group without a start-group at byte offset " + std::to_string(g)},
      {"\x0a\x05"
       "ab",
       "length runs past the end of its message at byte offset 1"},
      {good + "\x08\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",
       "varint longer than 10 bytes at byte offset " + std::to_string(g + 1)},
      {good + "\x08\x80", "truncated varint at byte offset " + std::to_string(g + 1)},
      {good + "\x0b\x08\x01\x14", "mismatched end-group at byte offset " + std::to_string(g + 3)},
      {good + "\x0b\x08\x01", "unterminated group at byte offset " + std::to_string(g + 1)},
      {good + "\x81\x80\x80\x80\x80\x00",
       "tag longer than 5 bytes at byte offset " + std::to_string(g)},
      {good + "\x0d\x01\x02", "truncated fixed32 at byte offset " + std::to_string(g + 1)},
      {good + "\x09\x01\x02", "truncated fixed64 at byte offset " + std::to_string(g + 1)},
      {ExampleOf({Entry("f", FeatureOf(2, Wire().Len(1, "abc")))}),
       "packed floats not a multiple of 4"},
      {ExampleOf({Entry("f", FeatureOf(2, Wire().Tag(1, kFixed32).Raw("ab")))}), "truncated float"},
      {ExampleOf({Entry("ids", FeatureOf(3, Wire().Len(1, "\x80")))}), "truncated varint"},
      {ExampleOf({Entry("ids", FeatureOf(3, Wire().Raw("\x0a\x02\x80\x80")))}), "truncated varint"},
  };
  for (const Case& c : cases) {
    DualParse both(parser);
    const absl::Status s = both.Parse(c.record);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.expect));
    EXPECT_EQ(both.wire_stats.rejected, 1u);
  }
  // A group at nesting depth 200 exceeds protobuf's limit of 100.
  std::string deep = good;
  for (int i = 0; i < 200; ++i) deep += "\x0b";
  for (int i = 0; i < 200; ++i) deep += "\x0c";
  DualParse both(parser);
  EXPECT_THAT(both.Parse(deep).message(), HasSubstr("nested too deeply"));
}

TEST(ExampleParserTest, ARejectedRowLeavesTheBatchExactlyAsItWas) {
  const FeatureSpec spec =
      MakeSpec({FixedFloat("f", 2), FixedInt64("n"), VarInt64("ids"), VarBytes("s")});
  const ExampleParser parser = MustCreate(spec);
  ColumnarBatch batch;
  parser.InitBatch(&batch);
  ParseStats stats;
  parser.InitStats(&stats);
  const std::string good = ProtoExample()
                               .Floats("label", {1})
                               .Floats("f", {1, 2})
                               .Int64s("n", {3})
                               .Int64s("ids", {4, 5})
                               .Bytes("s", {"6"})
                               .Serialize();
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(parser.Append(good, &batch, &stats).ok());
  const ColumnarBatch before = batch;
  // Each of these writes some columns before it fails.
  const std::string bad[] = {
      // everything but the label
      ProtoExample()
          .Floats("f", {1, 2})
          .Int64s("n", {3})
          .Int64s("ids", {4})
          .Bytes("s", {"x"})
          .Serialize(),
      // a late mismatch
      ExampleOf({Entry("ids", Int64Feature({1, 2, 3})), Entry("f", FloatFeature({1, 2})),
                 Entry("label", FloatFeature({1})), Entry("n", FloatFeature({1}))}),
      // malformed data after several good features
      good + "\x0f",
      // more values than the fixed length
      ExampleOf({Entry("label", FloatFeature({1})), Entry("f", FloatFeature({1, 2, 3, 4}))}),
  };
  for (const std::string& record : bad) {
    EXPECT_FALSE(parser.Append(record, &batch, &stats).ok());
    EXPECT_TRUE(SameBatch(batch, before));
  }
  EXPECT_EQ(stats.rejected, 4u);
  EXPECT_EQ(stats.examples, 3u);
  ASSERT_TRUE(parser.Append(good, &batch, &stats).ok());
  EXPECT_EQ(batch.num_rows, 4u);
}

TEST(ExampleParserTest, RefusesABatchNotShapedForTheSpec) {
  const ExampleParser parser = MustCreate(MakeSpec({VarInt64("ids")}));
  ColumnarBatch batch;  // no InitBatch
  ParseStats stats;
  const std::string good = ExampleOf({Entry("label", FloatFeature({1}))});
  absl::Status s = parser.Append(good, &batch, &stats);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(stats.rejected, 1u);
  EXPECT_EQ(stats.missing.size(), 1u);  // stats are sized on first use
  parser.InitBatch(&batch);
  ASSERT_TRUE(parser.Append(good, &batch, nullptr).ok());  // stats are optional
  batch.columns[0].ids.push_back(1);                       // tampered with
  EXPECT_EQ(parser.Append(good, &batch, &stats).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(ReferenceParse(parser.spec(), good, &batch, &stats).code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ExampleParserTest, CreateRejectsAnInvalidSpec) {
  EXPECT_EQ(ExampleParser::Create(MakeSpec({VarInt64("a"), VarInt64("a")})).status().code(),
            absl::StatusCode::kInvalidArgument);
  FeatureSpec no_label = MakeSpec({});
  no_label.label_name = "";
  EXPECT_FALSE(ExampleParser::Create(no_label).ok());
}

// ---- The TFRecord file TensorFlow itself wrote.

FeatureSpec CriteoSpec() {
  std::vector<FeatureSpecEntry> f;
  for (int i = 1; i <= 13; ++i) f.push_back(FixedFloat("I" + std::to_string(i)));
  for (int i = 1; i <= 26; ++i) f.push_back(VarInt64("C" + std::to_string(i)));
  return MakeSpec(std::move(f), MissingPolicy::kError, MismatchPolicy::kError);
}

std::vector<std::string> ReadCriteoRecords() {
  const std::string path = brook::testing::SharedDataDir() + "/tfrecord/criteo_sample.te.tfrecords";
  absl::StatusOr<std::unique_ptr<storage::TFRecordReader>> reader =
      storage::TFRecordReader::Open(path, storage::TFRecordReaderOptions());
  EXPECT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> records;
  if (!reader.ok()) return records;
  std::string_view record;
  for (;;) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    records.emplace_back(record);
  }
  return records;
}

TEST(ExampleParserTest, ParsesTheCriteoSampleWrittenByTensorFlow) {
  const std::vector<std::string> records = ReadCriteoRecords();
  ASSERT_EQ(records.size(), 40u);
  const ExampleParser parser = MustCreate(CriteoSpec());
  DualParse both(parser);
  for (const std::string& r : records) ASSERT_TRUE(both.Parse(r).ok());
  const ColumnarBatch& b = both.wire_batch;
  ASSERT_EQ(b.num_rows, 40u);
  auto I = [&](int i) { return b.columns[i - 1].floats[0]; };  // first record
  auto C = [&](int i) {
    const Column& c = b.columns[13 + i - 1];
    EXPECT_EQ(c.row_splits[1], 1u);  // single-valued
    return c.ids[0];
  };
  EXPECT_EQ(I(9), FloatFromBits(0x3d02b931));  // bytes 31 b9 02 3d
  EXPECT_NEAR(I(9), 0.0319, 1e-4);
  EXPECT_EQ(I(10), FloatFromBits(0x3eaaaaab));  // ab aa aa 3e
  EXPECT_EQ(I(10), 0.33333334f);
  EXPECT_EQ(I(11), 0.03125f);  // 00 00 00 3d
  EXPECT_EQ(I(12), 0.0f);
  EXPECT_EQ(b.labels[0], 0.0f);
  EXPECT_EQ(C(1), 7u);
  EXPECT_EQ(C(2), 31u);
  EXPECT_EQ(C(3), 129u);  // varint 81 01
  EXPECT_EQ(C(10), 30u);  // varint 1e
  EXPECT_EQ(C(11), 5u);
  EXPECT_EQ(C(12), 111u);
  EXPECT_EQ(C(13), 1u);
  EXPECT_EQ(C(14), 7u);
  EXPECT_EQ(C(15), 167u);  // varint a7 01
  for (int c = 13; c < 39; ++c) {
    EXPECT_EQ(b.columns[c].row_splits.size(), 41u);
    EXPECT_EQ(b.columns[c].row_splits.back(), 40u) << "every C feature single-valued";
  }
  EXPECT_EQ(both.wire_stats.examples, 40u);
  EXPECT_EQ(both.wire_stats.unknown_features, 0u);
  // Labels are 0/1 clicks.
  for (float label : b.labels) EXPECT_TRUE(label == 0.0f || label == 1.0f) << label;
}

TEST(ExampleParserTest, OneParserServesManyThreads) {
  const std::vector<std::string> records = ReadCriteoRecords();
  ASSERT_FALSE(records.empty());
  const ExampleParser parser = MustCreate(CriteoSpec());
  ColumnarBatch expected;
  parser.InitBatch(&expected);
  for (const std::string& r : records) ASSERT_TRUE(parser.Append(r, &expected, nullptr).ok());

  constexpr int kThreads = 4;
  std::vector<ColumnarBatch> batches(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 50; ++round) {
        parser.InitBatch(&batches[t]);
        for (const std::string& r : records) {
          if (!parser.Append(r, &batches[t], nullptr).ok()) return;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  for (const ColumnarBatch& b : batches) EXPECT_TRUE(SameBatch(b, expected));
}

TEST(ExampleParserTest, AWarmBatchIsRefilledWithoutReallocating) {
  const std::vector<std::string> records = ReadCriteoRecords();
  ASSERT_FALSE(records.empty());
  const ExampleParser parser = MustCreate(CriteoSpec());
  ColumnarBatch batch;
  parser.InitBatch(&batch);
  ParseStats stats;
  parser.InitStats(&stats);
  auto buffers = [&] {
    std::vector<const void*> p = {batch.labels.data()};
    for (const Column& c : batch.columns) {
      p.insert(p.end(), {c.floats.data(), c.int64s.data(), c.ids.data(), c.row_splits.data()});
    }
    return p;
  };
  std::vector<const void*> warm;
  for (int round = 0; round < 3; ++round) {
    batch.Clear();
    for (const std::string& r : records) {
      ASSERT_TRUE(parser.Append(r, &batch, &stats).ok());
      // Rejected rows in between must not grow anything either.
      ASSERT_FALSE(parser.Append(r.substr(0, r.size() / 2), &batch, &stats).ok());
    }
    if (round == 0) warm = buffers();
    EXPECT_EQ(buffers(), warm) << "round " << round;
  }
}

// Not a benchmark (tests/bench has those); prints a rough single-thread rate
// so a regression by an order of magnitude is visible in the test log.
TEST(ExampleParserTest, ReportsSingleThreadParseRate) {
  const std::vector<std::string> records = ReadCriteoRecords();
  ASSERT_FALSE(records.empty());
  const ExampleParser parser = MustCreate(CriteoSpec());
  ColumnarBatch batch;
  parser.InitBatch(&batch);
  size_t bytes = 0;
  for (const std::string& r : records) bytes += r.size();
  const auto start = std::chrono::steady_clock::now();
  int rounds = 0;
  double seconds = 0;
  do {
    batch.Clear();
    for (int k = 0; k < 25; ++k) {
      for (const std::string& r : records) ASSERT_TRUE(parser.Append(r, &batch, nullptr).ok());
    }
    ++rounds;
    seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (seconds < 0.2);
  const double examples = 25.0 * rounds * records.size();
  std::printf("[ rate     ] %.0f examples/s, %.0f MB/s (criteo sample, 1 thread)\n",
              examples / seconds, 25.0 * rounds * bytes / seconds / 1e6);
}

}  // namespace
}  // namespace brook::input
