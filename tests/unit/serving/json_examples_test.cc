// TF Serving's predict JSON into tf.train.Examples: both request forms, each
// feature type, b64 bytes, null as missing, the label ignored, and errors
// that name the instance and feature. The row form's fast path (parse
// events straight into the wire format) against the DOM path it replaced.
#include "serving/json_examples.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include <google/protobuf/util/message_differencer.h>
#include "absl/strings/str_cat.h"
#include "tensorflow/example.pb.h"

namespace brook::serving {
namespace {

input::FeatureSpec Spec() {
  auto spec = input::FeatureSpec::FromYaml(R"(
label: {name: label, type: float}
features:
  - {name: c, type: int64, kind: varlen}
  - {name: tag, type: bytes, kind: varlen}
  - {name: x, type: float, length: 1}
)");
  EXPECT_TRUE(spec.ok()) << spec.status();
  return *spec;
}

tf::Example Decode(const std::string& bytes) {
  tf::Example ex;
  EXPECT_TRUE(ex.ParseFromString(bytes));
  return ex;
}

std::string Error(std::string_view body) {
  auto r = ExamplesFromPredictJson(body, Spec());
  EXPECT_FALSE(r.ok()) << body;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << r.status();
  return std::string(r.status().message());
}

TEST(JsonExamplesTest, InstancesFormSetsEachTypedFeature) {
  auto r = ExamplesFromPredictJson(
      R"({"signature_name": "serving_default", "instances": [
          {"c": 17, "tag": ["red", {"b64": "Ymx1ZQ=="}], "x": 0.5, "label": 1},
          {"c": [18446744073709551615, -3], "x": [2]}]})",
      Spec());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->columnar);
  ASSERT_EQ(r->examples.size(), 2u);
  const tf::Example a = Decode(r->examples[0]);
  const auto& f = a.features().feature();
  ASSERT_EQ(f.at("c").int64_list().value_size(), 1);
  EXPECT_EQ(f.at("c").int64_list().value(0), 17);
  ASSERT_EQ(f.at("tag").bytes_list().value_size(), 2);
  EXPECT_EQ(f.at("tag").bytes_list().value(0), "red");
  EXPECT_EQ(f.at("tag").bytes_list().value(1), "blue");
  EXPECT_FLOAT_EQ(f.at("x").float_list().value(0), 0.5f);
  EXPECT_EQ(f.count("label"), 0u);  // given, ignored
  const tf::Example b = Decode(r->examples[1]);
  // A uint64 id beyond 2^63 keeps its bits, as TFRecord files carry it.
  EXPECT_EQ(static_cast<uint64_t>(b.features().feature().at("c").int64_list().value(0)),
            18446744073709551615ull);
  EXPECT_EQ(b.features().feature().at("c").int64_list().value(1), -3);
  EXPECT_EQ(b.features().feature().count("tag"), 0u);
  EXPECT_EQ(r->Where(1), "instances[1]");
}

TEST(JsonExamplesTest, ColumnarInputsFormAndNullAsMissing) {
  auto r =
      ExamplesFromPredictJson(R"({"inputs": {"c": [1, 2, 3], "x": [0.1, null, 0.3]}})", Spec());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->columnar);
  ASSERT_EQ(r->examples.size(), 3u);
  EXPECT_EQ(Decode(r->examples[2]).features().feature().at("c").int64_list().value(0), 3);
  EXPECT_EQ(Decode(r->examples[1]).features().feature().count("x"), 0u);
  EXPECT_EQ(r->Where(2), "inputs[2]");
}

TEST(JsonExamplesTest, ErrorsNameTheInstanceAndFeature) {
  EXPECT_EQ(Error(R"({"instances": [{"c": 1}, {"c": 1}, {"c": 1}, {"c": "abc"}]})"),
            "instances[3].c: expected int64 (an integer or list of integers), got string");
  EXPECT_EQ(Error(R"({"instances": [{"x": [1, "a"]}]})"),
            "instances[0].x[1]: expected float (a number or list of numbers), got string");
  EXPECT_EQ(Error(R"({"instances": [{"c": 1.5}]})"),
            "instances[0].c: expected int64 (an integer or list of integers), got number");
  EXPECT_NE(Error(R"({"instances": [{"cc": 1}]})")
                .find("instances[0].cc: the model has no feature \"cc\" (its features: c, tag, x)"),
            std::string::npos);
  EXPECT_EQ(Error(R"({"instances": [{"tag": {"b64": "!!"}}]})"),
            "instances[0].tag.b64: not base64");
  EXPECT_EQ(Error(R"({"instances": [{"x": 1e300}]})"),
            "instances[0].x: 1e+300 is not a finite float");
  EXPECT_EQ(Error(R"({"inputs": {"c": [1, 2], "x": [0.5]}})"), "inputs.x: 1 values, but c has 2");
  EXPECT_EQ(Error(R"({"instances": [3]})"),
            "instances[0]: expected an object of feature values, got integer");
  EXPECT_NE(Error(R"({"instance": []})").find("unknown field \"instance\""), std::string::npos);
  EXPECT_NE(Error(R"({"instances": [], "inputs": {}})").find("exactly one of"), std::string::npos);
  EXPECT_NE(Error("[1, 2]").find("must be a JSON object"), std::string::npos);
  const std::string not_json = Error(R"({"instances": [{"c": 1},]})");
  EXPECT_NE(not_json.find("body is not JSON"), std::string::npos);
  EXPECT_NE(not_json.find("byte 24"), std::string::npos) << not_json;
  EXPECT_NE(Error("").find("body is not JSON"), std::string::npos);
  EXPECT_NE(Error("1e400").find("number overflow"), std::string::npos);
  // Valid JSON, out of range: said so, with where.
  EXPECT_NE(Error(R"({"instances": [{"x": 1e400}]})").find("the number at byte 21 is out of range"),
            std::string::npos)
      << Error(R"({"instances": [{"x": 1e400}]})");
  EXPECT_EQ(Error(R"({"instances": [{"c": 18446744073709551616}]})"),
            "instances[0].c: 1.8446744073709552e+19 is out of range (ids are int64, or uint64 up "
            "to 2^64-1)");
  // A number beyond a double is nlohmann's out_of_range, not a parse error.
  EXPECT_NE(Error(R"({"instances": [{"x": 1e400}]})").find("number overflow"), std::string::npos);
}

TEST(JsonExamplesTest, ExamplesToJsonAndBackKeepTheFeatures) {
  tf::Example ex;
  auto& f = *ex.mutable_features()->mutable_feature();
  f["c"].mutable_int64_list()->add_value(-7);
  f["c"].mutable_int64_list()->add_value(12);
  f["tag"].mutable_bytes_list()->add_value(std::string("\x00\xff", 2));  // not text: b64
  f["tag"].mutable_bytes_list()->add_value("red");
  f["x"].mutable_float_list()->add_value(0.25f);
  f["label"].mutable_float_list()->add_value(1);
  f["other"].mutable_float_list()->add_value(3);  // not the model's: left out
  const std::string one[] = {ex.SerializeAsString()};
  auto json = PredictJsonFromExamples(one, Spec());
  ASSERT_TRUE(json.ok()) << json.status();
  EXPECT_NE(json->find("\"b64\""), std::string::npos) << *json;
  EXPECT_EQ(json->find("label"), std::string::npos) << *json;
  auto back = ExamplesFromPredictJson(*json, Spec());
  ASSERT_TRUE(back.ok()) << back.status() << " " << *json;
  ASSERT_EQ(back->examples.size(), 1u);
  const tf::Example got = Decode(back->examples[0]);
  const auto& g = got.features().feature();
  EXPECT_EQ(g.at("c").int64_list().value(1), 12);
  EXPECT_EQ(g.at("tag").bytes_list().value(0), std::string("\x00\xff", 2));
  EXPECT_EQ(g.at("tag").bytes_list().value(1), "red");
  EXPECT_EQ(g.at("x").float_list().value(0), 0.25f);
  EXPECT_EQ(g.size(), 3u);
  const std::string bad[] = {"\xff\xff"};
  EXPECT_EQ(PredictJsonFromExamples(bad, Spec()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

// Both paths on `body`: the fast one accepts iff the DOM one does, with
// Examples equal field for field, or both refuse with the same message.
void ExpectSameAsDom(std::string_view body) {
  SCOPED_TRACE(std::string(body.substr(0, 200)));
  auto fast = ExamplesFromPredictJson(body, Spec());
  auto dom = ExamplesFromPredictJsonDom(body, Spec());
  ASSERT_EQ(fast.ok(), dom.ok()) << fast.status() << " vs " << dom.status();
  if (!fast.ok()) {
    EXPECT_EQ(fast.status(), dom.status());
    return;
  }
  EXPECT_EQ(fast->columnar, dom->columnar);
  ASSERT_EQ(fast->examples.size(), dom->examples.size());
  for (size_t i = 0; i < fast->examples.size(); ++i) {
    EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Decode(fast->examples[i]),
                                                                   Decode(dom->examples[i])))
        << "example " << i << ": " << Decode(fast->examples[i]).DebugString() << " vs "
        << Decode(dom->examples[i]).DebugString();
  }
}

TEST(JsonExamplesTest, TheFastRowPathGivesWhatTheDomPathGives) {
  for (
      const char* body : {
          R"({"instances": []})",
          R"({"instances": [{}]})",
          R"({"signature_name": {"a": [1, {"b": null}]}, "instances": [{"c": []}]})",
          R"({"instances": [{"c": [], "tag": [], "x": []}]})",
          R"({"instances": [{"c": null, "tag": null, "x": null, "label": {"any": [1]}}]})",
          R"({"instances": [{"tag": ["é
"q"", "", {"b64": ""}]}]})",
          R"({"instances": [{"c": [-1, 0, 9223372036854775807, -9223372036854775808]}]})",
          R"({"instances": [{"x": [3, -0.0, 1e-45, 3.4028234663852886e38, 18446744073709551615]}]})",
          R"({"instances": [{"x": 1}, {"x": [1]}, {"c": 5, "x": 2.5}]})",
          // Errors, each alone in its body.
          R"({"instances": [{"c": true}]})",
          R"({"instances": [{"c": [1, null]}]})",
          R"({"instances": [{"c": [[1]]}]})",
          R"({"instances": [{"c": {"b64": "AA=="}}]})",
          R"({"instances": [{"tag": 5}]})",
          R"({"instances": [{"tag": [{"b64": 5}]}]})",
          R"({"instances": [{"tag": [{"b64": "AA==", "x": 1}]}]})",
          R"({"instances": [{"tag": {}}]})",
          R"({"instances": [{"tag": ["a", {"b64": "%"}]}]})",
          R"({"instances": [{"x": 3.5e38}]})",
          R"({"instances": [{"x": [-1e39]}]})",
          R"({"instances": [{"c": -1e19}]})",
          R"({"instances": [{"nope": 1}]})",
          R"({"instances": [{"c": 1}, [1]]})",
          R"({"instances": [{"c": 1}, "x"]})",
          R"({"instances": {"c": 1}})",
          R"({"instances": 7})",
          R"({"instances": null})",
          R"({})",
          R"({"signature_name": "s"})",
          R"({"zeta": 1, "alpha": 2, "instances": []})",
          R"({"instances": [], "inputs": {}})",
          R"({"inputs": {"c": [1, 2]}, "instances": []})",
          R"({"inputs": {"c": [1, 2], "x": [0.5, 1]}})",
          R"("instances")",
          R"(null)",
          R"([{"c": 1}])",
          R"({"instances": [{"c": 1}]} trailing)",
          R"({"instances": [{"c": 1e400}]})",
          R"({"instances": [{"c": 1)",
          "",
          R"({"signature_name": "x", "instances": [{"c": "bad"}]})",
          R"({"signature_name": {"a": 1}, "instances": []})",
          R"({"instances": [{"x": 3.4028235e38}]})",
      }) {
    ExpectSameAsDom(body);
  }
}

// The bodies clients send: many instances of every feature kind, as
// PredictJsonFromExamples writes them (the bench's and `brook local`'s).
TEST(JsonExamplesTest, TheFastRowPathMatchesTheDomPathOnGeneratedBodies) {
  std::mt19937_64 rng(7);
  std::vector<std::string> records;
  for (int i = 0; i < 300; ++i) {
    tf::Example ex;
    auto& f = *ex.mutable_features()->mutable_feature();
    const int n = static_cast<int>(rng() % 4);
    if (rng() % 5 != 0) {
      auto* c = f["c"].mutable_int64_list();
      for (int k = 0; k < n; ++k) c->add_value(static_cast<int64_t>(rng()));
    }
    if (rng() % 5 != 0) {
      auto* tag = f["tag"].mutable_bytes_list();
      for (int k = 0; k < n; ++k) {
        std::string b(rng() % 6, '\0');
        for (char& ch : b) ch = static_cast<char>(rng() % (k % 2 ? 256 : 26) + (k % 2 ? 0 : 'a'));
        tag->add_value(b);
      }
    }
    if (rng() % 5 != 0) {
      f["x"].mutable_float_list()->add_value(
          std::ldexp(static_cast<float>(rng() % 1000) - 500, static_cast<int>(rng() % 40) - 20));
    }
    records.push_back(ex.SerializeAsString());
  }
  auto body = PredictJsonFromExamples(records, Spec());
  ASSERT_TRUE(body.ok()) << body.status();
  ExpectSameAsDom(*body);
  auto fast = ExamplesFromPredictJson(*body, Spec());
  ASSERT_TRUE(fast.ok()) << fast.status();
  ASSERT_EQ(fast->examples.size(), records.size());
  tf::Example want;
  ASSERT_TRUE(want.ParseFromString(records[3]));
  EXPECT_TRUE(google::protobuf::util::MessageDifferencer::Equals(Decode(fast->examples[3]), want));
}

// A key given twice is refused by both paths, in any object: a misspelt
// copy must not silently win (nlohmann alone keeps the last).
TEST(JsonExamplesTest, ErrorsComeInTheDomPathsOrderAndDuplicatesAreRefused) {
  // A syntax error after a bad value still wins; so does the body's shape.
  EXPECT_NE(Error(R"({"instances": [{"c": "a"}], )").find("body is not JSON"), std::string::npos);
  EXPECT_NE(Error(R"({"instances": [{"c": "a"}], "zz": 1})").find("unknown field \"zz\""),
            std::string::npos);
  // The first bad value in the body is the one named.
  EXPECT_EQ(Error(R"({"instances": [{"x": 1}, {"c": "a"}, {"x": "b"}]})"),
            "instances[1].c: expected int64 (an integer or list of integers), got string");
  EXPECT_EQ(Error(R"({"instances": [], "instances": []})"), "body: \"instances\" is given twice");
  EXPECT_EQ(Error(R"({"instances": [{"x": 1}, {"c": 1, "c": [2, 3]}]})"),
            "instances[1]: \"c\" is given twice");
  EXPECT_EQ(Error(R"({"inputs": {"c": [1], "c": [2]}})"), "key \"c\" is given twice in one object");
  for (const char* body : {
           R"({"inputs": {"c": [1]}, "inputs": {"c": [1]}})",
           R"({"instances": [{"label": 1, "label": 2}]})",
           R"({"instances": [{"label": {"a": 1, "a": 2}}]})",
           R"({"instances": [{"tag": {"b64": "YQ==", "b64": "YQ=="}}]})",
           R"({"signature_name": "", "signature_name": "", "instances": []})",
       }) {
    EXPECT_FALSE(ExamplesFromPredictJson(body, Spec()).ok()) << body;
    EXPECT_FALSE(ExamplesFromPredictJsonDom(body, Spec()).ok()) << body;
  }
}

// TF Serving refuses a signature the model does not have; a brook model
// has one, "serving_default" ("" means it too).
TEST(JsonExamplesTest, OnlyTheModelsSignatureIsAccepted) {
  for (const char* sig : {R"("serving_default")", R"("")"}) {
    const std::string body = absl::StrCat(R"({"signature_name": )", sig, R"(, "instances": [{}]})");
    EXPECT_TRUE(ExamplesFromPredictJson(body, Spec()).ok()) << body;
  }
  EXPECT_EQ(Error(R"({"signature_name": "predict", "instances": [{}]})"),
            "signature_name \"predict\" is not this model's; its one signature is "
            "\"serving_default\"");
  EXPECT_EQ(Error(R"({"signature_name": [[1]], "inputs": {"c": [1]}})"),
            "signature_name: expected a string, got list");
  EXPECT_EQ(Error(R"({"instances": [{}], "signature_name": 5})"),
            "signature_name: expected a string, got integer");
}

// FLT_MAX's shortest text (what JavaScript and Go write) is a little above
// FLT_MAX as a double, and rounds to it.
TEST(JsonExamplesTest, TheLargestFloatIsAcceptedAsItsShortestText) {
  for (const char* body :
       {R"({"instances": [{"x": 3.4028235e38}]})", R"({"instances": [{"x": [-3.4028235e38]}]})",
        R"({"inputs": {"x": [3.4028235e38]}})"}) {
    auto r = ExamplesFromPredictJson(body, Spec());
    ASSERT_TRUE(r.ok()) << body << ": " << r.status();
    EXPECT_EQ(std::fabs(Decode(r->examples[0]).features().feature().at("x").float_list().value(0)),
              std::numeric_limits<float>::max());
  }
  // Half an ulp beyond rounds to infinity: refused.
  EXPECT_NE(Error(R"({"instances": [{"x": 3.4028236e38}]})").find("not a finite float"),
            std::string::npos);
}

// What the client sent is echoed in errors only in part: a 3 MB name does
// not come back as a 6 MB error.
TEST(JsonExamplesTest, EchoedNamesAreCut) {
  const std::string name(1 << 20, 'n');
  for (const std::string& body :
       {absl::StrCat(R"({"instances": [{")", name, R"(": 1}]})"),
        absl::StrCat(R"({")", name, R"(": 1, "instances": []})"),
        absl::StrCat(R"({"inputs": {")", name, R"(": 1}})"),
        absl::StrCat(R"({"instances": [{"c": )", std::string(100000, '9'), "e9999}]}")}) {
    const std::string e = Error(body);
    EXPECT_LT(e.size(), 1000u) << e.substr(0, 200);
  }
  // Each quote of the name says how long it was (the location is not cut
  // again, which would count its own length).
  const std::string e = Error(absl::StrCat(R"({"instances": [{")", name, R"(": 1}]})"));
  size_t counts = 0, whole = 0;
  for (size_t at = e.find(" bytes)"); at != std::string::npos; at = e.find(" bytes)", at + 1)) {
    ++counts;
  }
  for (size_t at = e.find("(1048576 bytes)"); at != std::string::npos;
       at = e.find("(1048576 bytes)", at + 1)) {
    ++whole;
  }
  EXPECT_EQ(counts, 2u) << e;
  EXPECT_EQ(whole, 2u) << e;
  // A cut never splits a UTF-8 character.
  EXPECT_EQ(CutForError(std::string(99, 'a') + "\xc3\xa9" + "b"),
            std::string(99, 'a') + "... (102 bytes)");
}

}  // namespace
}  // namespace brook::serving
