#include "common/yaml_fields.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <stdexcept>
#include <string>

namespace brook::yaml {
namespace {

TEST(YamlFieldsTest, ADottedMapNamesEachKeysPath) {
  const YAML::Node doc = YAML::Load("training:\n  batch_size: 0\n  epochs: 1\n");
  MapReader root(doc, "", "job spec");
  ASSERT_TRUE(root.Check({"training"}, "{training: {...}}").ok());
  MapReader r(root.Get("training"), "training");
  ASSERT_TRUE(r.Check({"batch_size", "epochs"}, "{epochs: 1}").ok());
  int batch_size = 256;
  EXPECT_EQ(r.Int("batch_size", 1, 1 << 20, &batch_size).message(),
            "training.batch_size (line 2): must be an integer in [1, 1048576], got \"0\"");
  EXPECT_EQ(batch_size, 256);  // unchanged on error
  int64_t steps = 7;
  ASSERT_TRUE(r.Int("steps", int64_t{0}, int64_t{100}, &steps).ok());  // absent: default stays
  EXPECT_EQ(steps, 7);
  EXPECT_EQ(r.Missing("steps", "epochs or steps").message(),
            "training.steps (line 2): missing; epochs or steps");
}

TEST(YamlFieldsTest, UnknownAndRepeatedKeysAreErrors) {
  MapReader dotted(YAML::Load("a: 1\nb: 2\nc: 3\n"), "sec");
  EXPECT_EQ(dotted.Check({"a", "b"}, "{a: 1}").message(),
            "sec.c (line 3): unknown key; allowed here: a, b");
  MapReader twice(YAML::Load("a: 1\nb: 2\na: 3\n"), "sec");
  EXPECT_EQ(twice.Check({"a", "b"}, "{a: 1}").message(),
            "sec.a (line 3): given twice (first on line 1)");

  // A named map has no path for the key, so the message quotes it.
  MapReader named = MapReader::Named(YAML::Load("{name: I1, lenght: 4}"), "feature \"I1\"");
  EXPECT_EQ(named.Check({"name", "length"}, "{name: I1}").message(),
            "feature \"I1\" (line 1): unknown key \"lenght\"; allowed here: name, length");
  MapReader named_twice = MapReader::Named(YAML::Load("name: x\nname: y\n"), "feature \"x\"");
  EXPECT_EQ(named_twice.Check({"name"}, "{name: I1}").message(),
            "feature \"x\" (line 2): key \"name\" given twice (first on line 1)");
}

TEST(YamlFieldsTest, ANamedMapsErrorsNameTheMapAndTheKey) {
  MapReader r = MapReader::Named(YAML::Load("label: y\nfeatures:\n  - {dim: -1}\n")["features"][0],
                                 "sparse input #1");
  ASSERT_TRUE(r.Check({"feature", "dim"}, "{feature: C1}").ok());
  int dim = 0;
  EXPECT_EQ(r.Int("dim", 1, 1024, &dim).message(),
            "sparse input #1 (line 3): dim must be an integer in [1, 1024], got \"-1\"");
  EXPECT_EQ(r.Missing("feature", "").message(), "sparse input #1 (line 3): missing \"feature\"");
  EXPECT_EQ(r.Error("dim", "too big").message(), "sparse input #1 (line 3): too big");
}

TEST(YamlFieldsTest, NotAMapSaysWhatItIs) {
  MapReader r(YAML::Load("[1, 2]"), "", "job spec");
  EXPECT_EQ(r.Check({"name"}, "{name: x}").message(),
            "job spec (line 1): must be a map such as {name: x}, got a list");
}

TEST(YamlFieldsTest, TypedReaders) {
  MapReader r(YAML::Load("{n: -1, d: 0, s: '', c: fast, ok: 0.5, k: zlib}"), "x");
  ASSERT_TRUE(r.Check({"n", "d", "s", "c", "ok", "k"}, "{}").ok());
  uint64_t u = 0;
  EXPECT_EQ(r.Uint("n", &u).message(), "x.n (line 1): must be an integer in [0, 2^64), got \"-1\"");
  double d = 1;
  EXPECT_EQ(r.Double("d", 0, 1e300, /*min_exclusive=*/true, &d).message(),
            "x.d (line 1): must be a finite number > 0, got \"0\"");
  float f = 0;
  ASSERT_TRUE(r.Float("ok", 0, 1, false, &f).ok());
  EXPECT_EQ(f, 0.5f);
  std::string s = "kept";
  EXPECT_EQ(r.String("s", &s).message(), "x.s (line 1): must be a non-empty string, got \"\"");
  enum class C { kNone, kGzip, kZlib } c = C::kNone;
  EXPECT_EQ(r.Choice<C>("c", {{"none", C::kNone}, {"gzip", C::kGzip}}, &c).message(),
            "x.c (line 1): must be one of none, gzip, got \"fast\"");
  ASSERT_TRUE(r.Choice<C>("k", {{"gzip", C::kGzip}, {"zlib", C::kZlib}}, &c).ok());
  EXPECT_EQ(c, C::kZlib);
}

TEST(YamlFieldsTest, DescribeAndErrors) {
  EXPECT_EQ(Describe(YAML::Load("abc")), "\"abc\"");
  EXPECT_EQ(Describe(YAML::Load("[1]")), "a list");
  EXPECT_EQ(Describe(YAML::Load("{a: 1}")), "a map");
  EXPECT_EQ(Describe(YAML::Node()), "nothing");
  EXPECT_EQ(FieldError("model.type", 0, "bad").message(), "model.type: bad");
  EXPECT_EQ(FieldError("model.type", 4, "bad").message(), "model.type (line 4): bad");
  try {
    YAML::Load("a: [1\n");
    FAIL() << "yaml-cpp took an unclosed list";
  } catch (const std::exception& e) {
    const absl::Status s = InvalidYaml("feature spec", e);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), ::testing::StartsWith("feature spec (line "));
    EXPECT_THAT(std::string(s.message()), ::testing::HasSubstr("invalid YAML: "));
  }
  EXPECT_EQ(InvalidYaml("data schema", std::runtime_error("boom")).message(),
            "data schema: invalid YAML: boom");
}

TEST(YamlFieldsTest, ASpecIsOneDocumentAndASecondIsAnErrorAtItsLine) {
  EXPECT_EQ(LoadDocument("a: 1\n")["a"].as<int>(), 1);
  EXPECT_TRUE(LoadDocument("").IsNull());
  EXPECT_TRUE(LoadDocument("# only a comment\n").IsNull());
  const absl::Status second = NoThrow("job spec", []() -> absl::Status {
    LoadDocument("name: a\n---\nname: b\n");
    return absl::OkStatus();
  });
  EXPECT_EQ(second.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(second.message()),
              ::testing::AllOf(::testing::StartsWith("job spec (line 2): "),
                               ::testing::HasSubstr("a second document")));
}

}  // namespace
}  // namespace brook::yaml
