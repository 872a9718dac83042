#include "features/feature_spec.h"

#include <cmath>
#include <cstring>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/testing/test_util.h"

namespace brook::input {
namespace {

using ::testing::HasSubstr;

// The example from the header comment, verbatim.
constexpr char kDocumented[] = R"(label: {name: label, type: float}        # or int64; required
on_missing: default                      # default | error (spec-wide)
on_type_mismatch: error                  # error | default
features:
  - {name: I1, type: float, length: 1, default: 0.0}   # fixed float
  - {name: age, type: int64, length: 1, default: -1}   # fixed int64
  - {name: C1, type: int64, kind: varlen}               # ragged id list
  - {name: country, type: bytes, kind: varlen}          # hashed ids
  - {name: tags, type: bytes, kind: varlen, max_length: 8}
)";

absl::Status ParseError(const std::string& yaml) {
  absl::StatusOr<FeatureSpec> spec = FeatureSpec::FromYaml(yaml);
  EXPECT_FALSE(spec.ok()) << yaml;
  if (spec.ok()) return absl::OkStatus();
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument) << spec.status();
  return spec.status();
}

// A spec whose one feature is `feature_yaml` (on line 3).
std::string OneFeature(const std::string& feature_yaml) {
  return "label: {name: y, type: float}\nfeatures:\n  - " + feature_yaml + "\n";
}

bool SameDouble(double a, double b) { return std::memcmp(&a, &b, sizeof(a)) == 0; }

void ExpectSameSpec(const FeatureSpec& a, const FeatureSpec& b) {
  EXPECT_EQ(a.label_name, b.label_name);
  EXPECT_EQ(a.label_type, b.label_type);
  EXPECT_EQ(a.on_missing, b.on_missing);
  EXPECT_EQ(a.on_type_mismatch, b.on_type_mismatch);
  ASSERT_EQ(a.features.size(), b.features.size());
  for (size_t i = 0; i < a.features.size(); ++i) {
    const FeatureSpecEntry& x = a.features[i];
    const FeatureSpecEntry& y = b.features[i];
    EXPECT_EQ(x.name, y.name);
    EXPECT_EQ(x.type, y.type) << x.name;
    EXPECT_EQ(x.kind, y.kind) << x.name;
    if (x.kind == FeatureKind::kFixed) {
      EXPECT_EQ(x.length, y.length) << x.name;
      EXPECT_TRUE(SameDouble(x.default_value, y.default_value) ||
                  (std::isnan(x.default_value) && std::isnan(y.default_value)))
          << x.name << ": " << x.default_value << " vs " << y.default_value;
    } else {
      EXPECT_EQ(x.max_length, y.max_length) << x.name;
    }
  }
}

TEST(FeatureSpecTest, ParsesTheDocumentedExample) {
  absl::StatusOr<FeatureSpec> spec = FeatureSpec::FromYaml(kDocumented);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->label_name, "label");
  EXPECT_EQ(spec->label_type, FeatureType::kFloat);
  EXPECT_EQ(spec->on_missing, MissingPolicy::kDefault);
  EXPECT_EQ(spec->on_type_mismatch, MismatchPolicy::kError);
  ASSERT_EQ(spec->features.size(), 5u);
  const auto& f = spec->features;
  EXPECT_EQ(f[0].name, "I1");
  EXPECT_EQ(f[0].type, FeatureType::kFloat);
  EXPECT_EQ(f[0].kind, FeatureKind::kFixed);
  EXPECT_EQ(f[0].length, 1);
  EXPECT_EQ(f[1].type, FeatureType::kInt64);
  EXPECT_EQ(f[1].default_value, -1.0);
  EXPECT_EQ(f[2].kind, FeatureKind::kVarLen);
  EXPECT_EQ(f[2].type, FeatureType::kInt64);
  EXPECT_EQ(f[3].type, FeatureType::kBytes);
  EXPECT_EQ(f[3].max_length, 0);
  EXPECT_EQ(f[4].max_length, 8);
  EXPECT_EQ(spec->IndexOf("C1"), 2);
  EXPECT_EQ(spec->IndexOf("label"), -1);
  EXPECT_EQ(spec->IndexOf("nope"), -1);
  EXPECT_TRUE(spec->Validate().ok());
}

TEST(FeatureSpecTest, KindDefaultsToFixedForNumbersAndVarlenForBytes) {
  absl::StatusOr<FeatureSpec> spec = FeatureSpec::FromYaml(
      "label: clicked\n"  // scalar shorthand: a float label
      "on_missing: error\n"
      "on_type_mismatch: default\n"
      "features:\n"
      "  - name: dense\n"  // block style works as well as flow style
      "    type: float\n"
      "    length: 4\n"
      "  - {name: n, type: int64}\n"
      "  - {name: s, type: bytes}\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->label_name, "clicked");
  EXPECT_EQ(spec->label_type, FeatureType::kFloat);
  EXPECT_EQ(spec->on_missing, MissingPolicy::kError);
  EXPECT_EQ(spec->on_type_mismatch, MismatchPolicy::kDefault);
  EXPECT_EQ(spec->features[0].kind, FeatureKind::kFixed);
  EXPECT_EQ(spec->features[0].length, 4);
  EXPECT_EQ(spec->features[1].kind, FeatureKind::kFixed);
  EXPECT_EQ(spec->features[1].length, 1);
  EXPECT_EQ(spec->features[2].kind, FeatureKind::kVarLen);
}

TEST(FeatureSpecTest, UnknownTypeNamesTheFeatureTheLineAndTheChoices) {
  const absl::Status s = ParseError(
      "label: {name: label, type: float}\n"
      "features:\n"
      "  - {name: I1, type: float}\n"
      "  - {name: I2, type: float}\n"
      "  - {name: I3, type: float}\n"
      "  - {name: I4, type: float}\n"
      "  - {name: C1, type: int32, kind: varlen}\n");
  EXPECT_EQ(s.message(),
            "feature \"C1\" (line 7): unknown type \"int32\"; allowed: int64, float, bytes");
}

TEST(FeatureSpecTest, MisspelledKeysAreErrorsNotIgnored) {
  EXPECT_THAT(ParseError(OneFeature("{name: I1, type: float, lenght: 4}")).message(),
              HasSubstr("feature \"I1\" (line 3): unknown key \"lenght\"; allowed here: name, "
                        "type, kind, length, default, max_length"));
  EXPECT_THAT(ParseError("label: y\nfeature:\n  - {name: a, type: float}\n").message(),
              HasSubstr("(line 2): unknown key \"feature\""));
  EXPECT_THAT(ParseError("label: {name: y, tpye: float}\nfeatures: []\n").message(),
              HasSubstr("unknown key \"tpye\""));
  EXPECT_THAT(ParseError(OneFeature("{name: I1, type: float, type: int64}")).message(),
              HasSubstr("given twice"));
}

TEST(FeatureSpecTest, RejectsInvalidEntriesWithAReason) {
  struct Case {
    const char* feature;
    const char* expect;
  } cases[] = {
      {"{name: s, type: bytes, kind: fixed}", "bytes features cannot be kind: fixed"},
      {"{name: f, type: float, kind: varlen}", "float features cannot be kind: varlen"},
      {"{name: f, type: float, length: 0}", "length must be in [1, "},
      {"{name: f, type: float, length: -3}", "length must be in [1, "},
      {"{name: f, type: float, length: abc}", "length must be an integer, got \"abc\""},
      {"{name: f, type: float, length: 1.5}", "length must be an integer"},
      {"{name: f, type: float, default: x}", "default must be a number"},
      {"{name: n, type: int64, default: 0.5}", "default 0.5 is not a valid int64"},
      {"{name: n, type: int64, kind: varlen, max_length: -1}", "max_length must be >= 0"},
      {"{name: n, type: int64, kind: varlen, length: 3}", "\"length\" applies only to kind: fixed"},
      {"{name: n, type: int64, kind: varlen, default: 3}",
       "\"default\" applies only to kind: fixed"},
      {"{name: n, type: int64, max_length: 3}", "\"max_length\" applies only to kind: varlen"},
      {"{name: n, type: int64, kind: ragged}", "unknown kind \"ragged\"; allowed: fixed, varlen"},
      {"{name: n}", "missing \"type\""},
      {"{name: '', type: float}", "name must be non-empty"},
      {"{type: float}", "feature #1 (line 3): name must be non-empty"},
      {"just_a_name", "feature #1 (line 3): must be a map"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(std::string(ParseError(OneFeature(c.feature)).message()), HasSubstr(c.expect))
        << c.feature;
  }
}

TEST(FeatureSpecTest, RejectsBadLabelsAndPolicies) {
  EXPECT_THAT(ParseError("features: []\n").message(), HasSubstr("missing \"label\""));
  EXPECT_THAT(ParseError("label: {type: float}\nfeatures: []\n").message(),
              HasSubstr("label name must be non-empty"));
  EXPECT_THAT(
      ParseError("label: {name: y, type: bytes}\nfeatures: []\n").message(),
      HasSubstr("label \"y\" (line 1): unknown label type \"bytes\"; allowed: int64, float"));
  EXPECT_THAT(ParseError("label: y\n").message(), HasSubstr("missing \"features\""));
  EXPECT_THAT(ParseError("label: y\nfeatures: {a: 1}\n").message(),
              HasSubstr("features must be a list"));
  EXPECT_THAT(ParseError("label: y\non_missing: skip\nfeatures: []\n").message(),
              HasSubstr("(line 2): unknown on_missing policy \"skip\"; allowed: default, error"));
  EXPECT_THAT(ParseError("label: y\non_type_mismatch: 3\nfeatures: []\n").message(),
              HasSubstr("unknown on_type_mismatch policy"));
  EXPECT_THAT(ParseError("").message(), HasSubstr("empty document"));
  EXPECT_THAT(ParseError("- a\n- b\n").message(), HasSubstr("must be a map"));
  // An int64 label is allowed (the parsers convert it to float).
  absl::StatusOr<FeatureSpec> spec =
      FeatureSpec::FromYaml("label: {name: y, type: int64}\nfeatures: []\n");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->label_type, FeatureType::kInt64);
}

TEST(FeatureSpecTest, DuplicateNamesPointAtBothLines) {
  const absl::Status s = ParseError(
      "label: y\n"
      "features:\n"
      "  - {name: a, type: float}\n"
      "  - {name: b, type: float}\n"
      "  - {name: a, type: int64, kind: varlen}\n");
  EXPECT_EQ(s.message(), "feature \"a\" (line 5): duplicate name (first defined on line 3)");
  EXPECT_THAT(ParseError("label: y\nfeatures:\n  - {name: y, type: float}\n").message(),
              HasSubstr("feature \"y\" (line 3): has the same name as the label"));
}

TEST(FeatureSpecTest, SyntaxErrorsBecomeStatusesWithALine) {
  const absl::Status s = ParseError("label: y\nfeatures:\n  - {name: a, type: float\n");
  EXPECT_THAT(s.message(), HasSubstr("invalid YAML"));
  EXPECT_THAT(s.message(), HasSubstr("(line "));
  ParseError("label: [unclosed\n").IgnoreError();  // must not throw
  ParseError("\t\tbad: : :\n").IgnoreError();
}

TEST(FeatureSpecTest, ValidateChecksAStructBuiltInCode) {
  FeatureSpec spec;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("label name must be non-empty"));
  spec.label_name = "y";
  EXPECT_TRUE(spec.Validate().ok());
  spec.features.push_back({.name = "a", .type = FeatureType::kFloat, .length = 2});
  spec.features.push_back({.name = "b", .type = FeatureType::kBytes, .kind = FeatureKind::kVarLen});
  EXPECT_TRUE(spec.Validate().ok());
  spec.features.push_back({.name = "a", .type = FeatureType::kInt64});
  EXPECT_EQ(spec.Validate().message(), "feature \"a\": duplicate name");
  spec.features.back().name = "";
  EXPECT_EQ(spec.Validate().message(), "feature #3: name must be non-empty");
  spec.features.back() = {.name = "c", .type = FeatureType::kBytes};  // fixed by default
  EXPECT_THAT(spec.Validate().message(), HasSubstr("feature \"c\": bytes features cannot be"));
  spec.features.back() = {
      .name = "c", .type = FeatureType::kInt64, .length = 1, .default_value = 1e300};
  EXPECT_THAT(spec.Validate().message(), HasSubstr("is not a valid int64"));
  spec.features.back().default_value = 7;
  EXPECT_TRUE(spec.Validate().ok());
  spec.label_type = FeatureType::kBytes;
  EXPECT_THAT(spec.Validate().message(), HasSubstr("type must be int64 or float"));
}

TEST(FeatureSpecTest, ToYamlRoundTrips) {
  FeatureSpec spec;
  spec.label_name = "label: with colon";
  spec.label_type = FeatureType::kInt64;
  spec.on_missing = MissingPolicy::kError;
  spec.on_type_mismatch = MismatchPolicy::kDefault;
  const double defaults[] = {0.0,       -0.0, 0.1,      -1.0,     1e-30, 3.4028234663852886e38,
                             1.0 / 3.0, NAN,  INFINITY, -INFINITY};
  int i = 0;
  for (double d : defaults) {
    spec.features.push_back({.name = "f" + std::to_string(i++),
                             .type = FeatureType::kFloat,
                             .length = i,
                             .default_value = d});
  }
  spec.features.push_back({.name = "n",
                           .type = FeatureType::kInt64,
                           .length = 3,
                           .default_value = -9007199254740993.0});
  // Names YAML would otherwise read as something else.
  for (const char* name : {"null", "true", "123", "#hash", " lead", "a: b", "[x]", "é名", "'q'"}) {
    spec.features.push_back(
        {.name = name, .type = FeatureType::kBytes, .kind = FeatureKind::kVarLen, .max_length = 5});
  }
  spec.features.push_back(
      {.name = "ids", .type = FeatureType::kInt64, .kind = FeatureKind::kVarLen});
  ASSERT_TRUE(spec.Validate().ok()) << spec.Validate();

  const std::string yaml = spec.ToYaml();
  absl::StatusOr<FeatureSpec> back = FeatureSpec::FromYaml(yaml);
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << yaml;
  ExpectSameSpec(spec, *back);
  EXPECT_EQ(back->ToYaml(), yaml);
  EXPECT_THAT(yaml, HasSubstr("default: 0.1}"));  // shortest form, not 0.1000000000000000055

  absl::StatusOr<FeatureSpec> documented = FeatureSpec::FromYaml(kDocumented);
  ASSERT_TRUE(documented.ok());
  absl::StatusOr<FeatureSpec> again = FeatureSpec::FromYaml(documented->ToYaml());
  ASSERT_TRUE(again.ok()) << again.status();
  ExpectSameSpec(*documented, *again);
}

TEST(FeatureSpecTest, FromYamlFileReadsAFileAndNamesItInErrors) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.Join("spec.yaml"), kDocumented);
  absl::StatusOr<FeatureSpec> spec = FeatureSpec::FromYamlFile(dir.Join("spec.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->features.size(), 5u);

  testing::WriteFileOrDie(dir.Join("bad.yaml"), "label: y\nfeatures: 3\n");
  spec = FeatureSpec::FromYamlFile(dir.Join("bad.yaml"));
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(spec.status().message(), HasSubstr("bad.yaml: feature spec (line 2)"));

  spec = FeatureSpec::FromYamlFile(dir.Join("missing.yaml"));
  EXPECT_EQ(spec.status().code(), absl::StatusCode::kNotFound);
}

TEST(FeatureSpecTest, FeatureTypeNames) {
  EXPECT_EQ(FeatureTypeName(FeatureType::kInt64), "int64");
  EXPECT_EQ(FeatureTypeName(FeatureType::kFloat), "float");
  EXPECT_EQ(FeatureTypeName(FeatureType::kBytes), "bytes");
}

TEST(FeatureSpecTest, ASecondYamlDocumentIsRefusedNotDropped) {
  absl::StatusOr<FeatureSpec> spec =
      FeatureSpec::FromYaml(std::string(kDocumented) + "\n---\nlabel: x\n");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("a second document"), std::string::npos) << spec.status();
}

}  // namespace
}  // namespace brook::input
