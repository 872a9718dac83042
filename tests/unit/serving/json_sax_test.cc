// json_sax.h's reader against nlohmann::json::sax_parse, event for event:
// on every text nlohmann accepts the two give the same events (numbers
// bit for bit, integers as integer or unsigned as nlohmann classifies them),
// and on every text it refuses the fast reader says kSyntaxError. Hand-made
// edge cases (numbers at the limits of int64, uint64 and double, escapes,
// surrogates, every class of bad UTF-8, structure errors, the BOM), then
// generated documents and mutations of them.
#include "serving/json_sax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace brook::serving::internal {
namespace {

// Every event as text; stops (returns false) at event number `stop_at`.
struct Recorder {
  std::vector<std::string> events;
  size_t stop_at = SIZE_MAX;
  bool failed = false;

  bool Add(std::string e) {
    events.push_back(std::move(e));
    return events.size() != stop_at;
  }
  bool null() { return Add("null"); }
  bool boolean(bool b) { return Add(b ? "true" : "false"); }
  bool number_integer(int64_t v) { return Add(absl::StrCat("i:", v)); }
  bool number_unsigned(uint64_t v) { return Add(absl::StrCat("u:", v)); }
  bool number_float(double v, const std::string&) {
    uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return Add(absl::StrFormat("f:%016x", bits));
  }
  bool string(std::string& s) { return Add("s:" + s); }
  bool binary(nlohmann::json::binary_t&) { return Add("binary"); }
  bool start_object(size_t) { return Add("{"); }
  bool key(std::string& k) { return Add("k:" + k); }
  bool end_object() { return Add("}"); }
  bool start_array(size_t) { return Add("["); }
  bool end_array() { return Add("]"); }
  bool parse_error(size_t, const std::string&, const nlohmann::detail::exception&) {
    failed = true;
    return false;
  }
};

// Both readers on `text`; returns whether nlohmann accepted it.
bool ExpectSameAsNlohmann(const std::string& text, size_t stop_at = SIZE_MAX) {
  Recorder slow, fast;
  slow.stop_at = fast.stop_at = stop_at;
  const bool parsed = nlohmann::json::sax_parse(text.begin(), text.end(), &slow);
  const SaxResult r = FastSaxParse(text, &fast);
  const std::string shown = absl::StrCat("text (", text.size(), " bytes): ", text.substr(0, 300));
  if (slow.failed) {
    EXPECT_EQ(r, SaxResult::kSyntaxError) << shown;
    return false;
  }
  EXPECT_EQ(r, parsed ? SaxResult::kDone : SaxResult::kStopped) << shown;
  EXPECT_EQ(fast.events, slow.events) << shown;
  return parsed;
}

TEST(FastJsonReaderTest, NumbersAsNlohmannReadsThem) {
  for (const char* ok :
       {"0", "-0", "7", "-7", "1.5", "-0.0", "1e5", "1E5", "1e+5", "1e-5", "-1.25e-3", "0.1",
        "123456789", "9223372036854775807", "-9223372036854775807", "-9223372036854775808",
        "-9223372036854775809", "18446744073709551615", "18446744073709551616",
        "99999999999999999999", "100000000000000000000", "123456789012345678901234567890",
        "-123456789012345678901234567890", "1e-400", "-1e-400", "4.9e-324", "2.4e-324",
        "2.2250738585072014e-308", "1.7976931348623157e308", "3.4028235e38", "1e308",
        "0.30000000000000004", "1.00000000000000011102230246251565404236316680908203125",
        "5e-324", "0.000001"}) {
    EXPECT_TRUE(ExpectSameAsNlohmann(ok)) << ok;
    EXPECT_TRUE(ExpectSameAsNlohmann(absl::StrCat("[", ok, ", ", ok, "]"))) << ok;
  }
  for (const char* bad : {"-", "+1", "01", "-01", "00", "1.", ".5", "1e", "1e+", "1e-", "0x10",
                          "1.5.2", "--1", "1e5.5", "Infinity", "NaN", "-Infinity", "1e400",
                          "-1e400", "1.7976931348623159e308", "1 2", "[1,]", "[01]"}) {
    EXPECT_FALSE(ExpectSameAsNlohmann(bad)) << bad;
  }
  // A very long integer: a double.
  EXPECT_TRUE(ExpectSameAsNlohmann("1" + std::string(300, '0')));
  EXPECT_FALSE(ExpectSameAsNlohmann("1" + std::string(400, '0')));
}

TEST(FastJsonReaderTest, StringsEscapesAndUtf8AsNlohmannReadsThem) {
  const std::vector<std::string> ok = {
      R"("")", R"("abc")", R"("a\"b\\c\/d")", R"("\b\f\n\r\t")", R"("\u0000")",
      R"("\u0041\u00e9\u20AC")", R"("\ud83d\ude00")", R"("\uD83D\uDE00x")", "\"\x7f\"",
      "\"\xc3\xa9\"", "\"\xe2\x82\xac\"", "\"\xf0\x9f\x98\x80\"", "\"\xf4\x8f\xbf\xbf\"",
      "\"\xed\x9f\xbf\"", "\"\xee\x80\x80\""};
  for (const std::string& s : ok) {
    EXPECT_TRUE(ExpectSameAsNlohmann(s)) << s;
    EXPECT_TRUE(ExpectSameAsNlohmann("{" + s + ":" + s + "}")) << s;
  }
  const std::vector<std::string> bad = {
      "\"abc", R"("\x")", R"("\u12")", R"("\u12g4")", R"("\ud800")", R"("\ud800x")",
      R"("\ud800\u0041")", R"("\udc00")", R"("\ud800\ud800")", "\"a\nb\"", "\"a\tb\"",
      std::string("\"a\0b\"", 5), "\"\x80\"", "\"\xc0\x80\"", "\"\xc1\xbf\"", "\"\xc3\"",
      "\"\xc3x\"", "\"\xe0\x80\x80\"", "\"\xe0\x9f\xbf\"", "\"\xed\xa0\x80\"", "\"\xed\xbf\xbf\"",
      "\"\xf0\x80\x80\x80\"", "\"\xf0\x8f\xbf\xbf\"", "\"\xf4\x90\x80\x80\"", "\"\xf5\x80\x80\x80\"",
      "\"\xff\"", "\"\xe2\x82\"", "\"\xf0\x9f\x98\"", "\"\\"};
  for (const std::string& s : bad) EXPECT_FALSE(ExpectSameAsNlohmann(s)) << s;
}

TEST(FastJsonReaderTest, StructureWhitespaceAndTheBom) {
  for (const char* ok : {"{}", "[]", " \t\r\n{ \"a\" : [ 1 , 2 , { } , [ ] ] } \n", "true",
                         "false", "null", "[true,false,null]", "{\"\":\"\"}",
                         "{\"a\":1,\"a\":2}", "\xef\xbb\xbf{}", "[[[[[[[[[[]]]]]]]]]]",
                         "{\"a\":{\"b\":{\"c\":[1,{\"d\":null}]}}}"}) {
    EXPECT_TRUE(ExpectSameAsNlohmann(ok)) << ok;
  }
  for (const char* bad :
       {"", " ", "{", "}", "[", "]", "{]", "[}", "{\"a\"}", "{\"a\":}", "{\"a\" 1}", "{a:1}",
        "{1:1}", "{\"a\":1,}", "[1,]", "[,1]", "{,}", "[1 2]", "{\"a\":1 \"b\":2}", "tru", "truex",
        "nul", "nulll", "True", "[true]x", "{}{}", "{} x", "\f{}", "{}\f", "\xef\xbb{}",
        "\xef{}", "\xbb\xbf{}", "{\"a\":1}}", "[1]]", "/* c */ {}", "{} // c", "'a'", "[\"a\",]"}) {
    EXPECT_FALSE(ExpectSameAsNlohmann(bad)) << bad;
  }
  // nlohmann ends the input at a NUL byte after the value; before it, or in
  // a string, a NUL is an error.
  EXPECT_TRUE(ExpectSameAsNlohmann(std::string("{}\0", 3)));
  EXPECT_TRUE(ExpectSameAsNlohmann(std::string("[1] \0x]]", 8)));
  EXPECT_TRUE(ExpectSameAsNlohmann(std::string("12\0", 3)));
  EXPECT_FALSE(ExpectSameAsNlohmann(std::string("[\0]", 3)));
  EXPECT_FALSE(ExpectSameAsNlohmann(std::string("{\"a\":\0}", 7)));
  EXPECT_FALSE(ExpectSameAsNlohmann(std::string("\0", 1)));
  // Deep nesting is read without recursion.
  EXPECT_TRUE(ExpectSameAsNlohmann(std::string(100000, '[') + std::string(100000, ']')));
  EXPECT_FALSE(ExpectSameAsNlohmann(std::string(100000, '[')));
}

TEST(FastJsonReaderTest, AHandlerThatStopsStopsBothAtTheSameEvent) {
  const std::string text = R"({"instances": [{"a": 1, "b": [1.5, "x"]}], "inputs": {}})";
  for (size_t stop = 1; stop <= 14; ++stop) {
    SCOPED_TRACE(stop);
    ExpectSameAsNlohmann(text, stop);
  }
}

// Random documents (every kind of value, random spacing), then each mutated
// byte-wise: both readers must agree on all of them.
class Generator {
 public:
  explicit Generator(uint64_t seed) : rng_(seed) {}

  std::string Document() {
    std::string out;
    Value(&out, 0);
    return out;
  }
  std::string Mutate(std::string s) {
    const int edits = 1 + static_cast<int>(rng_() % 3);
    for (int e = 0; e < edits && !s.empty(); ++e) {
      const size_t at = rng_() % s.size();
      // sizeof - 1 leaves out the terminator; the NUL in the middle is meant.
      static constexpr char kBytes[] = "{}[],:\"\\ -+.0123456789eEtfnu\xc3\xa9\xed\xf4\x80\0x";
      const char c = kBytes[rng_() % (sizeof(kBytes) - 1)];
      switch (rng_() % 3) {
        case 0:
          s[at] = c;
          break;
        case 1:
          s.insert(s.begin() + static_cast<std::ptrdiff_t>(at), c);
          break;
        default:
          s.erase(at, 1);
      }
    }
    return s;
  }

 private:
  void Space(std::string* out) {
    static constexpr const char* kSpace[] = {"", "", "", " ", "\n", "\t", "\r\n  "};
    out->append(kSpace[rng_() % 7]);
  }
  void Value(std::string* out, int depth) {
    Space(out);
    const int kind = static_cast<int>(rng_() % (depth > 4 ? 6 : 8));
    switch (kind) {
      case 0:
        out->append(rng_() % 2 ? "true" : "false");
        break;
      case 1:
        out->append("null");
        break;
      case 2:
        absl::StrAppend(out, static_cast<int64_t>(rng_()) >> (rng_() % 64));
        break;
      case 3:
        absl::StrAppend(out, rng_() >> (rng_() % 64));
        break;
      case 4: {
        std::uniform_real_distribution<double> u(-1e6, 1e6);
        const double v = u(rng_) * std::pow(10.0, static_cast<int>(rng_() % 40) - 20);
        out->append(absl::StrFormat(rng_() % 2 ? "%.17g" : "%.6e", v));
        break;
      }
      case 5: {
        static constexpr const char* kStrings[] = {
            "\"\"", "\"C1\"", "\"b64\"", "\"a\\\"b\"", "\"\\u00e9t\\u00e9\"", "\"\xc3\xa9\"",
            "\"\\ud83d\\ude00\"", "\"tab\\tnew\\nline\"", "\"x\\/y\""};
        out->append(kStrings[rng_() % 9]);
        break;
      }
      case 6: {
        out->push_back('[');
        const int n = static_cast<int>(rng_() % 4);
        for (int i = 0; i < n; ++i) {
          if (i > 0) out->push_back(',');
          Value(out, depth + 1);
        }
        Space(out);
        out->push_back(']');
        break;
      }
      default: {
        out->push_back('{');
        const int n = static_cast<int>(rng_() % 4);
        for (int i = 0; i < n; ++i) {
          if (i > 0) out->push_back(',');
          Space(out);
          absl::StrAppend(out, "\"k", rng_() % 5, "\"");
          Space(out);
          out->push_back(':');
          Value(out, depth + 1);
        }
        Space(out);
        out->push_back('}');
      }
    }
    Space(out);
  }

  std::mt19937_64 rng_;
};

TEST(FastJsonReaderTest, GeneratedDocumentsAndTheirMutationsAgree) {
  Generator g(20261206);
  int accepted = 0, refused = 0;
  for (int i = 0; i < 3000; ++i) {
    const std::string doc = g.Document();
    ASSERT_TRUE(ExpectSameAsNlohmann(doc)) << doc;
    for (int m = 0; m < 5; ++m) {
      (ExpectSameAsNlohmann(g.Mutate(doc)) ? accepted : refused) += 1;
    }
    if (HasFailure()) return;
  }
  // The mutations reach both sides of the line.
  EXPECT_GT(accepted, 1000);
  EXPECT_GT(refused, 1000);
}

}  // namespace
}  // namespace brook::serving::internal
