#include "datatools/example_builder.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "tensorflow/example.pb.h"

namespace brook::datatools {
namespace {

brook::tf::Example Parse(std::string_view bytes) {
  brook::tf::Example ex;
  EXPECT_TRUE(ex.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())));
  return ex;
}

// What protobuf itself writes, with map keys sorted (deterministic mode).
std::string DeterministicSerialize(const brook::tf::Example& ex) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream raw(&out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    EXPECT_TRUE(ex.SerializeToCodedStream(&coded));
  }
  return out;
}

TEST(ExampleBuilderTest, RoundTripsEveryKindThroughProtobuf) {
  ExampleBuilder b;
  b.Clear();
  const std::vector<float> floats = {0.0f, -1.5f, 3.25f, std::numeric_limits<float>::max(),
                                     std::numeric_limits<float>::denorm_min()};
  const std::vector<int64_t> ints = {0,
                                     1,
                                     -1,
                                     127,
                                     128,
                                     -128,
                                     300,
                                     std::numeric_limits<int64_t>::max(),
                                     std::numeric_limits<int64_t>::min()};
  const std::string binary("a\0b\xff", 4);
  const std::vector<std::string_view> bytes = {"", "x", binary, std::string_view("hello world")};
  b.AddFloats("f", floats);
  b.AddInt64s("i", ints);
  b.AddBytes("b", bytes);

  const brook::tf::Example ex = Parse(b.Serialize());
  const auto& fmap = ex.features().feature();
  ASSERT_EQ(fmap.size(), 3u);
  ASSERT_EQ(fmap.at("f").kind_case(), brook::tf::Feature::kFloatList);
  ASSERT_EQ(fmap.at("f").float_list().value_size(), static_cast<int>(floats.size()));
  for (size_t k = 0; k < floats.size(); ++k) {
    EXPECT_EQ(fmap.at("f").float_list().value(static_cast<int>(k)), floats[k]) << k;
  }
  ASSERT_EQ(fmap.at("i").kind_case(), brook::tf::Feature::kInt64List);
  ASSERT_EQ(fmap.at("i").int64_list().value_size(), static_cast<int>(ints.size()));
  for (size_t k = 0; k < ints.size(); ++k) {
    EXPECT_EQ(fmap.at("i").int64_list().value(static_cast<int>(k)), ints[k]) << k;
  }
  ASSERT_EQ(fmap.at("b").kind_case(), brook::tf::Feature::kBytesList);
  ASSERT_EQ(fmap.at("b").bytes_list().value_size(), static_cast<int>(bytes.size()));
  for (size_t k = 0; k < bytes.size(); ++k) {
    EXPECT_EQ(fmap.at("b").bytes_list().value(static_cast<int>(k)), bytes[k]) << k;
  }
}

TEST(ExampleBuilderTest, EmptyListsArePresentWithTheirKind) {
  ExampleBuilder b;
  b.Clear();
  b.AddFloats("f", {});
  b.AddInt64s("i", {});
  b.AddBytes("b", {});
  const brook::tf::Example ex = Parse(b.Serialize());
  const auto& fmap = ex.features().feature();
  ASSERT_EQ(fmap.size(), 3u);
  EXPECT_EQ(fmap.at("f").kind_case(), brook::tf::Feature::kFloatList);
  EXPECT_EQ(fmap.at("f").float_list().value_size(), 0);
  EXPECT_EQ(fmap.at("i").kind_case(), brook::tf::Feature::kInt64List);
  EXPECT_EQ(fmap.at("i").int64_list().value_size(), 0);
  EXPECT_EQ(fmap.at("b").kind_case(), brook::tf::Feature::kBytesList);
  EXPECT_EQ(fmap.at("b").bytes_list().value_size(), 0);
}

TEST(ExampleBuilderTest, BigListsAndLongNamesRoundTrip) {
  std::mt19937_64 rng(42);
  std::vector<float> floats(100000);
  std::vector<int64_t> ints(100000);
  for (auto& f : floats) f = std::uniform_real_distribution<float>(-1e6f, 1e6f)(rng);
  // Every varint length from 1 to 10 bytes.
  for (size_t k = 0; k < ints.size(); ++k) {
    ints[k] = static_cast<int64_t>(rng() >> (k % 64));
    if (k % 3 == 0) ints[k] = -ints[k];
  }
  std::vector<std::string> storage;
  for (int k = 0; k < 1000; ++k)
    storage.push_back(std::string(static_cast<size_t>(k % 300), 'a' + k % 26));
  std::vector<std::string_view> bytes(storage.begin(), storage.end());
  const std::string long_name(1000, 'n');

  ExampleBuilder b;
  b.Clear();
  b.AddFloats(long_name, floats);
  b.AddInt64s("ints", ints);
  b.AddBytes("bytes", bytes);
  const brook::tf::Example ex = Parse(b.Serialize());
  const auto& fmap = ex.features().feature();
  ASSERT_EQ(fmap.size(), 3u);
  const auto& fl = fmap.at(long_name).float_list();
  ASSERT_EQ(fl.value_size(), static_cast<int>(floats.size()));
  for (size_t k = 0; k < floats.size(); ++k) ASSERT_EQ(fl.value(static_cast<int>(k)), floats[k]);
  const auto& il = fmap.at("ints").int64_list();
  ASSERT_EQ(il.value_size(), static_cast<int>(ints.size()));
  for (size_t k = 0; k < ints.size(); ++k) ASSERT_EQ(il.value(static_cast<int>(k)), ints[k]);
  const auto& bl = fmap.at("bytes").bytes_list();
  ASSERT_EQ(bl.value_size(), static_cast<int>(bytes.size()));
  for (size_t k = 0; k < bytes.size(); ++k) ASSERT_EQ(bl.value(static_cast<int>(k)), bytes[k]);
}

TEST(ExampleBuilderTest, BytesMatchProtobufSerializerForSortedNames) {
  // Protobuf's deterministic mode writes map entries sorted by key; adding
  // features in that order must give exactly its bytes.
  ExampleBuilder b;
  b.Clear();
  const std::vector<float> one_float = {0.5f};
  const std::vector<int64_t> ids = {123456789, -7};
  const std::vector<std::string_view> words = {"ab", ""};
  b.AddFloats("a_empty", {});
  b.AddBytes("b_words", words);
  b.AddInt64s("c_ids", ids);
  b.AddFloats("d_label", one_float);
  b.AddInt64s("e_empty", {});

  brook::tf::Example ex;
  auto& fmap = *ex.mutable_features()->mutable_feature();
  fmap["a_empty"].mutable_float_list();
  for (auto w : words) fmap["b_words"].mutable_bytes_list()->add_value(std::string(w));
  for (auto v : ids) fmap["c_ids"].mutable_int64_list()->add_value(v);
  fmap["d_label"].mutable_float_list()->add_value(0.5f);
  fmap["e_empty"].mutable_int64_list();
  EXPECT_EQ(std::string(b.Serialize()), DeterministicSerialize(ex));
}

TEST(ExampleBuilderTest, ClearStartsAFreshExample) {
  ExampleBuilder b;
  b.Clear();
  const std::vector<int64_t> ids = {1, 2, 3};
  b.AddInt64s("old", ids);
  ASSERT_EQ(Parse(b.Serialize()).features().feature_size(), 1);
  b.Clear();
  EXPECT_EQ(b.features_bytes(), 0u);
  // An Example with an empty (but present) Features message.
  EXPECT_EQ(std::string(b.Serialize()), std::string("\x0a\x00", 2));
  const std::vector<float> x = {2.0f};
  b.AddFloats("new", x);
  const brook::tf::Example ex = Parse(b.Serialize());
  ASSERT_EQ(ex.features().feature_size(), 1);
  EXPECT_EQ(ex.features().feature().at("new").float_list().value(0), 2.0f);
}

TEST(ExampleBuilderTest, SerializeIsRepeatableAndAppendable) {
  ExampleBuilder b;
  b.Clear();
  const std::vector<float> x = {1.0f};
  b.AddFloats("x", x);
  const std::string first(b.Serialize());
  EXPECT_EQ(std::string(b.Serialize()), first);
  b.AddFloats("y", x);
  const brook::tf::Example ex = Parse(b.Serialize());
  EXPECT_EQ(ex.features().feature_size(), 2);
}

TEST(ExampleBuilderTest, HeaderGrowsPastOneByteLengths) {
  // Features longer than 127 and 16383 bytes need 2- and 3-byte length
  // varints in the Example header.
  for (size_t n : {10u, 40u, 5000u}) {
    ExampleBuilder b;
    b.Clear();
    std::vector<float> v(n, 1.0f);
    b.AddFloats("v", v);
    const brook::tf::Example ex = Parse(b.Serialize());
    EXPECT_EQ(ex.features().feature().at("v").float_list().value_size(), static_cast<int>(n));
  }
}

}  // namespace
}  // namespace brook::datatools
