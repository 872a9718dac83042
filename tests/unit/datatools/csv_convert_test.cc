#include "datatools/csv_convert.h"

#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_format.h"
#include "datatools/convert_schema.h"
#include "features/feature_spec.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/test_util.h"

namespace brook::datatools {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::vector<std::string> Split(std::string_view line, char delim = ',', bool quoting = true) {
  auto f = SplitRecord(line, delim, quoting);
  EXPECT_TRUE(f.ok()) << f.status();
  return f.ok() ? *f : std::vector<std::string>{};
}

TEST(SplitRecordTest, SplitsAndTrimsPlainFields) {
  EXPECT_THAT(Split("39, State-gov ,77516"), ElementsAre("39", "State-gov", "77516"));
  EXPECT_THAT(Split("a,,b,"), ElementsAre("a", "", "b", ""));
  EXPECT_THAT(Split(""), ElementsAre(""));
}

TEST(SplitRecordTest, QuotedFieldsKeepCommasQuotesAndInnerSpaces) {
  EXPECT_THAT(Split(R"(1,"a,b",2)"), ElementsAre("1", "a,b", "2"));
  EXPECT_THAT(Split(R"(  "say ""hi""" , x)"), ElementsAre(R"(say "hi")", "x"));
  EXPECT_THAT(Split(R"(" padded ",)"), ElementsAre(" padded ", ""));
  EXPECT_THAT(Split(R"("multi
line",z)"),
              ElementsAre("multi\nline", "z"));
  // A quote inside an unquoted field is data.
  EXPECT_THAT(Split(R"(5" pipe,x)"), ElementsAre(R"(5" pipe)", "x"));
}

TEST(SplitRecordTest, UnterminatedQuoteAsksForMoreAndJunkAfterQuoteIsAnError) {
  EXPECT_EQ(SplitRecord(R"(1,"open)", ',', true).status().code(), absl::StatusCode::kOutOfRange);
  auto bad = SplitRecord(R"(1,"closed"junk,2)", ',', true);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("field 2"));
}

TEST(SplitRecordTest, TabsWithoutQuoting) {
  EXPECT_THAT(Split("0\t\"x\t\t68fd1e64", '\t', false), ElementsAre("0", "\"x", "", "68fd1e64"));
}

TEST(DelimitedReaderTest, HandlesBomCrlfBlankLinesAndMultilineRecords) {
  testing::TempDir dir;
  const std::string path = dir.Join("in.csv");
  testing::WriteFileOrDie(path, "\xEF\xBB\xBFh1,h2\r\n\r\n1,\"two\r\nlines\"\r\n3,4");
  auto reader = DelimitedReader::Open(path, ',', true);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> f;
  ASSERT_TRUE(*(*reader)->Next(&f));
  EXPECT_THAT(f, ElementsAre("h1", "h2"));
  ASSERT_TRUE(*(*reader)->Next(&f));
  EXPECT_THAT(f, ElementsAre("1", "two\nlines"));
  EXPECT_EQ((*reader)->line(), 3);
  ASSERT_TRUE(*(*reader)->Next(&f));
  EXPECT_THAT(f, ElementsAre("3", "4"));
  EXPECT_EQ((*reader)->line(), 5);
  EXPECT_FALSE(*(*reader)->Next(&f));
}

TEST(DelimitedReaderTest, ReadsGzipAndReportsMissingFiles) {
  testing::TempDir dir;
  const std::string path = dir.Join("in.csv.gz");
  gzFile gz = gzopen(path.c_str(), "wb");
  ASSERT_NE(gz, nullptr);
  const std::string text = "a,b\n1,2\n";
  gzwrite(gz, text.data(), static_cast<unsigned>(text.size()));
  gzclose(gz);
  auto reader = DelimitedReader::Open(path, ',', true);
  ASSERT_TRUE(reader.ok()) << reader.status();
  std::vector<std::string> f;
  ASSERT_TRUE(*(*reader)->Next(&f));
  ASSERT_TRUE(*(*reader)->Next(&f));
  EXPECT_THAT(f, ElementsAre("1", "2"));
  EXPECT_EQ(DelimitedReader::Open(dir.Join("nope.csv"), ',', true).status().code(),
            absl::StatusCode::kNotFound);
}

// --- schema ---------------------------------------------------------------

TEST(ConvertSchemaTest, ParsesTheDocumentedShape) {
  auto s = ConvertSchema::FromYaml(R"(
format: csv
header: true
missing: ["?", ""]
label: {column: label, positive: [">50K", ">50K."]}
default_type: ignore
columns:
  - {name: age, type: numeric}
  - {name: workclass, type: categorical}
  - {name: fnlwgt, type: ignore}
)");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->format, TextFormat::kCsv);
  EXPECT_TRUE(s->header);
  EXPECT_THAT(s->missing, ElementsAre("?", ""));
  EXPECT_EQ(s->label.column, "label");
  EXPECT_THAT(s->label.positive, ElementsAre(">50K", ">50K."));
  EXPECT_EQ(s->default_type, ColumnType::kIgnore);
  ASSERT_EQ(s->columns.size(), 3u);
  EXPECT_EQ(s->columns[1].type, ColumnType::kCategorical);
}

TEST(ConvertSchemaTest, ErrorsNameTheFieldAndLine) {
  auto bad_type = ConvertSchema::FromYaml(
      "label: y\ncolumns:\n  - {name: a, type: numeric}\n  - {name: workclass, type: "
      "categorial}\n");
  ASSERT_FALSE(bad_type.ok());
  EXPECT_THAT(std::string(bad_type.status().message()), HasSubstr("line 4"));
  EXPECT_THAT(std::string(bad_type.status().message()), HasSubstr("\"workclass\""));
  EXPECT_THAT(std::string(bad_type.status().message()), HasSubstr("categorial"));

  auto typo = ConvertSchema::FromYaml("label: y\ndefualt_type: numeric\n");
  ASSERT_FALSE(typo.ok());
  EXPECT_THAT(std::string(typo.status().message()), HasSubstr("defualt_type"));

  auto no_label = ConvertSchema::FromYaml("columns: [a, b]\n");
  ASSERT_FALSE(no_label.ok());
  EXPECT_THAT(std::string(no_label.status().message()), HasSubstr("label"));

  auto dup = ConvertSchema::FromYaml(
      "label: y\ncolumns: [{name: a, type: numeric}, {name: a, type: ignore}]\n");
  ASSERT_FALSE(dup.ok());
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("\"a\" is listed twice"));

  auto typed_label = ConvertSchema::FromYaml("label: y\ncolumns: [{name: y, type: numeric}]\n");
  ASSERT_FALSE(typed_label.ok());
  EXPECT_THAT(std::string(typed_label.status().message()), HasSubstr("\"y\" is the label column"));

  auto syntax = ConvertSchema::FromYaml("label: {column: y\n");
  EXPECT_EQ(syntax.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConvertSchemaTest, ResolveNamesUntypedAndAbsentColumns) {
  auto s = ConvertSchema::FromYaml("label: y\ncolumns: [{name: a, type: numeric}]\n");
  ASSERT_TRUE(s.ok()) << s.status();
  auto untyped = ResolveColumns(*s, {"a", "b", "y"});
  ASSERT_FALSE(untyped.ok());
  EXPECT_THAT(std::string(untyped.status().message()), HasSubstr("column \"b\" has no type"));

  auto absent = ResolveColumns(*s, {"y"});
  ASSERT_FALSE(absent.ok());
  EXPECT_THAT(std::string(absent.status().message()), HasSubstr("column \"a\" is in the schema"));

  auto no_label = ResolveColumns(*s, {"a"});
  ASSERT_FALSE(no_label.ok());
  EXPECT_THAT(std::string(no_label.status().message()), HasSubstr("label column \"y\""));

  s->default_type = ColumnType::kCategorical;
  auto ok = ResolveColumns(*s, {"a", "b", "y"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[1].type, ColumnType::kCategorical);
  EXPECT_TRUE((*ok)[2].is_label);
}

TEST(ConvertSchemaTest, BareColumnNamesMeanNoHeader) {
  auto s = ConvertSchema::FromYaml("label: y\ndefault_type: numeric\ncolumns: [y, a, b]\n");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_FALSE(s->header);
}

TEST(ConvertSchemaTest, PresetsLoad) {
  auto adult = ConvertSchema::Load("adult");
  ASSERT_TRUE(adult.ok()) << adult.status();
  EXPECT_EQ(adult->columns.size(), 14u);
  auto criteo = ConvertSchema::Preset("criteo");
  ASSERT_TRUE(criteo.ok()) << criteo.status();
  EXPECT_EQ(criteo->format, TextFormat::kCriteo);
  EXPECT_FALSE(criteo->header);
  ASSERT_EQ(criteo->columns.size(), 40u);
  EXPECT_EQ(criteo->columns[1].name, "I1");
  EXPECT_EQ(criteo->columns[39].name, "C26");
  EXPECT_EQ(ConvertSchema::Load("no-such-preset-or-file").status().code(),
            absl::StatusCode::kNotFound);
}

// --- conversion -----------------------------------------------------------

std::vector<tf::Example> ReadAll(const std::string& path,
                                 storage::Compression c = storage::Compression::kNone) {
  std::vector<tf::Example> out;
  storage::TFRecordReaderOptions o;
  o.compression = c;
  auto reader = storage::TFRecordReader::Open(path, o);
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  std::string_view rec;
  while (true) {
    auto more = (*reader)->Next(&rec);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    tf::Example ex;
    EXPECT_TRUE(ex.ParseFromArray(rec.data(), static_cast<int>(rec.size())));
    out.push_back(std::move(ex));
  }
  return out;
}

const tf::Feature* Get(const tf::Example& ex, const std::string& name) {
  auto it = ex.features().feature().find(name);
  return it == ex.features().feature().end() ? nullptr : &it->second;
}

constexpr char kSchema[] = R"(
missing: ["?", ""]
label: {column: income, positive: [high], negative: [low]}
columns:
  - {name: age, type: numeric}
  - {name: job, type: categorical}
  - {name: weight, type: ignore}
)";

class ConvertTest : public ::testing::Test {
 protected:
  absl::StatusOr<ConvertResult> Convert(const std::string& csv, ConvertOptions options = {},
                                        const std::string& schema_yaml = kSchema) {
    const std::string in = dir_.Join("people.csv");
    testing::WriteFileOrDie(in, csv);
    auto schema = ConvertSchema::FromYaml(schema_yaml);
    if (!schema.ok()) return schema.status();
    if (options.out_dir.empty()) options.out_dir = dir_.Join("out");
    auto conv = CsvConverter::Open(*schema, {in}, options);
    if (!conv.ok()) return conv.status();
    return (*conv)->Run();
  }

  testing::TempDir dir_;
};

TEST_F(ConvertTest, WritesRoundRobinShardsAndAFeatureSpec) {
  auto r = Convert(
      "age,job,weight,income\n"
      "39, \"Sales, retail\",1,high\n"
      "50,?,2,low\n"
      "?,Tech,3,low\n"
      "28,Tech,4,high\n"
      "31,Ops,5,low\n",
      {.shards = 2});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows_read, 5);
  EXPECT_EQ(r->examples_written, 5);
  ASSERT_EQ(r->shard_paths.size(), 2u);
  EXPECT_THAT(r->shard_paths[1], HasSubstr("out/train-00001-of-00002.tfrecord"));
  EXPECT_THAT(r->shard_records, ElementsAre(3, 2));
  ASSERT_EQ(r->columns.size(), 3u);
  EXPECT_EQ(r->columns[0].name, "age");
  EXPECT_EQ(r->columns[0].missing, 1);
  EXPECT_EQ(r->columns[1].missing, 1);

  auto shard0 = ReadAll(r->shard_paths[0]);  // rows 1, 3, 5
  auto shard1 = ReadAll(r->shard_paths[1]);  // rows 2, 4
  ASSERT_EQ(shard0.size(), 3u);
  ASSERT_EQ(shard1.size(), 2u);
  const tf::Example& row1 = shard0[0];
  ASSERT_NE(Get(row1, "age"), nullptr);
  EXPECT_FLOAT_EQ(Get(row1, "age")->float_list().value(0), 39);
  EXPECT_EQ(Get(row1, "job")->bytes_list().value(0), "Sales, retail");
  EXPECT_EQ(Get(row1, "weight"), nullptr);  // ignored
  EXPECT_FLOAT_EQ(Get(row1, "income")->float_list().value(0), 1);
  EXPECT_EQ(Get(shard1[0], "job"), nullptr);  // "?" is missing: omitted
  EXPECT_FLOAT_EQ(Get(shard1[0], "income")->float_list().value(0), 0);
  EXPECT_EQ(Get(shard0[1], "age"), nullptr);

  auto spec = input::FeatureSpec::FromYamlFile(r->feature_spec_path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->label_name, "income");
  EXPECT_EQ(spec->label_type, input::FeatureType::kFloat);
  ASSERT_EQ(spec->features.size(), 2u);
  EXPECT_EQ(spec->features[0].name, "age");
  EXPECT_EQ(spec->features[0].type, input::FeatureType::kFloat);
  EXPECT_EQ(spec->features[0].kind, input::FeatureKind::kFixed);
  EXPECT_EQ(spec->features[0].length, 1);
  EXPECT_EQ(spec->features[1].name, "job");
  EXPECT_EQ(spec->features[1].type, input::FeatureType::kBytes);
  EXPECT_EQ(spec->features[1].kind, input::FeatureKind::kVarLen);
}

TEST_F(ConvertTest, NumericParseErrorNamesFileLineAndColumn) {
  auto r = Convert("age,job,weight,income\n39,a,1,low\nabc,b,2,low\n");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("people.csv:3: column \"age\": \"abc\" is not a number"));
  // Nothing that looks finished is left behind.
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("out/train-00000-of-00001.tfrecord")));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("out/train-00000-of-00001.tfrecord.tmp")));
}

TEST_F(ConvertTest, SkipBadRowsCountsThem) {
  auto r = Convert(
      "age,job,weight,income\n"
      "abc,b,2,low\n"
      "1,2\n"
      "3,c,4,medium\n"
      "nan,d,5,low\n"
      "7,e,6,high\n",
      {.skip_bad_rows = true});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows_read, 5);
  EXPECT_EQ(r->bad_rows, 4);
  EXPECT_EQ(r->examples_written, 1);
  ASSERT_EQ(r->bad_row_samples.size(), 4u);
  EXPECT_THAT(r->bad_row_samples[1], HasSubstr(":3: expected 4 fields, got 2"));
  EXPECT_THAT(r->bad_row_samples[2], HasSubstr(":4: label column \"income\": \"medium\""));
  EXPECT_THAT(r->bad_row_samples[3], HasSubstr("not a finite float"));
}

std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    names.push_back(e.path().filename().string());
  }
  std::sort(names.begin(), names.end());
  return names;
}

// A failed run leaves nothing it created: no shard (temporary or renamed),
// no spec, no directory; a directory that was there stays as it was.
TEST_F(ConvertTest, FailedRunRemovesWhatItCreated) {
  const std::string bad = "age,job,weight,income\n1,a,1,low\nabc,b,2,high\n";
  auto r = Convert(bad, {.out_dir = dir_.Join("new/nested/out"), .shards = 3});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("\"abc\" is not a number"));
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("new")));

  const std::string old = dir_.Join("old");
  std::filesystem::create_directories(old);
  testing::WriteFileOrDie(old + "/notes.txt", "mine");
  r = Convert(bad, {.out_dir = old, .shards = 2});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Listing(old), ElementsAre("notes.txt"));

  // Failing after the shards are renamed into place (the spec cannot be
  // written) removes them too.
  const std::string good = "age,job,weight,income\n1,a,1,low\n";
  r = Convert(good, {.out_dir = dir_.Join("late/"), .feature_spec_name = "no/such/dir.yaml"});
  ASSERT_FALSE(r.ok());
  EXPECT_FALSE(std::filesystem::exists(dir_.Join("late")));
  r = Convert(good, {.out_dir = old, .feature_spec_name = "no/such/dir.yaml"});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(Listing(old), ElementsAre("notes.txt"));

  r = Convert(good, {.out_dir = old});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Listing(old),
              ElementsAre("feature_spec.yaml", "notes.txt", "train-00000-of-00001.tfrecord"));
}

TEST_F(ConvertTest, HeaderMismatchFailsAtOpen) {
  auto r = Convert("age,job,income\n1,a,low\n");
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("column \"weight\""));
}

TEST_F(ConvertTest, GzipShardsReadBack) {
  auto r = Convert("age,job,weight,income\n1,a,1,low\n2,b,2,high\n",
                   {.prefix = "eval", .compression = storage::Compression::kGzip});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->shard_paths.size(), 1u);
  EXPECT_THAT(r->shard_paths[0], HasSubstr("eval-00000-of-00001.tfrecord.gz"));
  EXPECT_EQ(ReadAll(r->shard_paths[0], storage::Compression::kGzip).size(), 2u);
}

TEST_F(ConvertTest, OutputIsDeterministic) {
  const std::string csv = "age,job,weight,income\n1,a,1,low\n2,b,2,high\n";
  auto a = Convert(csv, {.out_dir = dir_.Join("a")});
  auto b = Convert(csv, {.out_dir = dir_.Join("b")});
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(testing::ReadFileOrDie(a->shard_paths[0]), testing::ReadFileOrDie(b->shard_paths[0]));
}

TEST_F(ConvertTest, CriteoLines) {
  // label, I1..I13, C1..C26; empty fields are missing.
  std::string line1 = "1\t5\t\t-1";
  for (int i = 4; i <= 13; ++i) line1 += "\t" + std::to_string(i);
  for (int i = 1; i <= 26; ++i) line1 += i == 3 ? "\t" : "\t68fd1e64";
  std::string line2 = "0";
  for (int i = 1; i <= 13; ++i) line2 += "\t0";
  for (int i = 1; i <= 26; ++i) line2 += "\tdeadbeef";
  auto r = Convert(line1 + "\n" + line2 + "\n", {}, "format: criteo\n");
  ASSERT_TRUE(r.ok()) << r.status();
  auto ex = ReadAll(r->shard_paths[0]);
  ASSERT_EQ(ex.size(), 2u);
  EXPECT_FLOAT_EQ(Get(ex[0], "label")->float_list().value(0), 1);
  EXPECT_FLOAT_EQ(Get(ex[0], "I1")->float_list().value(0), 5);
  EXPECT_EQ(Get(ex[0], "I2"), nullptr);
  EXPECT_FLOAT_EQ(Get(ex[0], "I3")->float_list().value(0), -1);
  EXPECT_EQ(Get(ex[0], "C1")->bytes_list().value(0), "68fd1e64");
  EXPECT_EQ(Get(ex[0], "C3"), nullptr);
  EXPECT_EQ(ex[0].features().feature_size(), 1 + 12 + 25);
  EXPECT_EQ(ex[1].features().feature_size(), 40);
  EXPECT_FLOAT_EQ(Get(ex[1], "label")->float_list().value(0), 0);
  EXPECT_EQ(Get(ex[1], "C26")->bytes_list().value(0), "deadbeef");
}

// A Criteo CSV with a header line, as people export it: the criteo preset
// (tab-separated, no header) detects both the commas and the header.
std::string CriteoCsvWithHeader(int rows) {
  std::string csv = "label";
  for (int i = 1; i <= 13; ++i) csv += ",I" + std::to_string(i);
  for (int i = 1; i <= 26; ++i) csv += ",C" + std::to_string(i);
  csv += "\n";
  for (int r = 0; r < rows; ++r) {
    csv += std::to_string(r % 2);
    for (int i = 1; i <= 13; ++i) csv += "," + std::to_string((r * 7 + i) % 11);
    for (int i = 1; i <= 26; ++i) csv += "," + absl::StrFormat("%08x", (r * 31 + i * 17) % 97);
    csv += "\n";
  }
  return csv;
}

TEST_F(ConvertTest, CriteoPresetReadsACsvWithAHeader) {
  auto r = Convert(CriteoCsvWithHeader(5), {}, "format: criteo\n");
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->rows_read, 5);  // the header is not a row
  auto ex = ReadAll(r->shard_paths[0]);
  ASSERT_EQ(ex.size(), 5u);
  EXPECT_FLOAT_EQ(Get(ex[1], "label")->float_list().value(0), 1);
  EXPECT_FLOAT_EQ(Get(ex[1], "I1")->float_list().value(0), 8);
  EXPECT_EQ(Get(ex[0], "C1")->bytes_list().value(0), "00000011");
  EXPECT_EQ(ex[0].features().feature_size(), 40);

  // --no-header: the header line is a data row, and its label is no number.
  auto forced = Convert(CriteoCsvWithHeader(2), {.header = false}, "format: criteo\n");
  ASSERT_FALSE(forced.ok());
  EXPECT_THAT(std::string(forced.status().message()), HasSubstr("people.csv:1"));
  EXPECT_THAT(std::string(forced.status().message()), HasSubstr("\"label\" is not a number"));

  // With the delimiter fixed (--format criteo), the CSV line is one field.
  auto fixed = Convert(CriteoCsvWithHeader(2), {.detect_delimiter = false}, "format: criteo\n");
  ASSERT_FALSE(fixed.ok());
  EXPECT_THAT(std::string(fixed.status().message()), HasSubstr("expected 40 fields, got 1"));
}

TEST_F(ConvertTest, SeparatorColumnBecomesAListOfIds) {
  constexpr char kGenres[] = R"(
label: {column: liked}
columns:
  - {name: year, type: numeric}
  - {name: genres, type: categorical, separator: "|"}
)";
  auto r =
      Convert("year,genres,liked\n1999,Comedy|Drama,1\n2001, Horror ||,0\n2003,,1\n", {}, kGenres);
  ASSERT_TRUE(r.ok()) << r.status();
  auto ex = ReadAll(r->shard_paths[0]);
  ASSERT_EQ(ex.size(), 3u);
  EXPECT_THAT(Get(ex[0], "genres")->bytes_list().value(), ElementsAre("Comedy", "Drama"));
  EXPECT_THAT(Get(ex[1], "genres")->bytes_list().value(), ElementsAre("Horror"));
  EXPECT_EQ(Get(ex[2], "genres"), nullptr);  // "" is a missing token
  auto spec = input::FeatureSpec::FromYamlFile(r->feature_spec_path);
  ASSERT_TRUE(spec.ok()) << spec.status();
  const int g = spec->IndexOf("genres");
  ASSERT_GE(g, 0);
  EXPECT_EQ(spec->features[g].kind, input::FeatureKind::kVarLen);
  EXPECT_EQ(spec->features[g].type, input::FeatureType::kBytes);

  // The map form says the same.
  auto m = ConvertSchema::FromYaml(
      "label: liked\ncolumns: {year: numeric, genres: {type: categorical, separator: \"|\"}}\n");
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->columns.size(), 2u);
  EXPECT_EQ(m->columns[1].separator, "|");
}

// Missing tokens apply to each element of a list column: "?|?" and "|" are
// a missing feature (counted as such), "?|b" is [b], "A||B" is [A, B].
TEST_F(ConvertTest, MissingTokensApplyToListElements) {
  constexpr char kTags[] = R"(
missing: ["?", ""]
label: {column: y}
columns:
  - {name: tags, type: categorical, separator: "|"}
)";
  auto r = Convert("tags,y\n?|?,1\n|,0\n? | b,1\nA||B,0\n ? ,1\n", {}, kTags);
  ASSERT_TRUE(r.ok()) << r.status();
  auto ex = ReadAll(r->shard_paths[0]);
  ASSERT_EQ(ex.size(), 5u);
  EXPECT_EQ(Get(ex[0], "tags"), nullptr);
  EXPECT_EQ(Get(ex[1], "tags"), nullptr);
  ASSERT_NE(Get(ex[2], "tags"), nullptr);
  EXPECT_THAT(Get(ex[2], "tags")->bytes_list().value(), ElementsAre("b"));
  ASSERT_NE(Get(ex[3], "tags"), nullptr);
  EXPECT_THAT(Get(ex[3], "tags")->bytes_list().value(), ElementsAre("A", "B"));
  EXPECT_EQ(Get(ex[4], "tags"), nullptr);
  ASSERT_EQ(r->columns.size(), 2u);
  EXPECT_EQ(r->columns[0].name, "tags");
  EXPECT_EQ(r->columns[0].missing, 3);
}

TEST(ConvertSchemaTest, SeparatorNeedsACategoricalColumn) {
  auto s = ConvertSchema::FromYaml(
      "label: y\ncolumns:\n  - {name: a, type: numeric, separator: \";\"}\n");
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(std::string(s.status().message()),
              HasSubstr("column \"a\" (line 3): separator needs"));
  auto empty = ConvertSchema::FromYaml(
      "label: y\ncolumns:\n  - {name: a, type: categorical, separator: \"\"}\n");
  ASSERT_FALSE(empty.ok());
  EXPECT_THAT(std::string(empty.status().message()),
              HasSubstr("separator must be a non-empty string"));
}

TEST_F(ConvertTest, TestFractionSplitsByRowHashDeterministically) {
  std::string csv = "age,job,weight,income\n";
  for (int i = 0; i < 1000; ++i) {
    csv +=
        std::to_string(i) + ",j" + std::to_string(i % 7) + ",1," + (i % 3 ? "low" : "high") + "\n";
  }
  ConvertOptions o{.shards = 2, .test_fraction = 0.2, .test_shards = 1};
  o.out_dir = dir_.Join("a");
  auto a = Convert(csv, o);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->examples_written, 1000);
  EXPECT_GT(a->test_examples, 150);
  EXPECT_LT(a->test_examples, 250);
  ASSERT_EQ(a->test_shard_paths.size(), 1u);
  EXPECT_THAT(a->test_shard_paths[0], HasSubstr("a/test-00000-of-00001.tfrecord"));
  EXPECT_EQ(a->test_shard_records[0], a->test_examples);
  EXPECT_EQ(a->shard_records[0] + a->shard_records[1], 1000 - a->test_examples);
  EXPECT_THAT(testing::ReadFileOrDie(a->feature_spec_path),
              HasSubstr("and test-*-of-00001.tfrecord"));

  // Same rows to the test side on another run, with another shard count,
  // and whatever the row order: the split is a function of each row.
  std::set<int> test_ages;
  for (const tf::Example& ex : ReadAll(a->test_shard_paths[0])) {
    test_ages.insert(static_cast<int>(Get(ex, "age")->float_list().value(0)));
  }
  std::string reversed = "age,job,weight,income\n";
  for (int i = 999; i >= 0; --i) {
    reversed +=
        std::to_string(i) + ",j" + std::to_string(i % 7) + ",1," + (i % 3 ? "low" : "high") + "\n";
  }
  ConvertOptions o2{.shards = 3, .test_fraction = 0.2, .test_shards = 2};
  o2.out_dir = dir_.Join("b");
  auto b = Convert(reversed, o2);
  ASSERT_TRUE(b.ok()) << b.status();
  std::set<int> test_ages_b;
  for (const std::string& p : b->test_shard_paths) {
    for (const tf::Example& ex : ReadAll(p)) {
      test_ages_b.insert(static_cast<int>(Get(ex, "age")->float_list().value(0)));
    }
  }
  EXPECT_EQ(test_ages, test_ages_b);

  auto bad = Convert(csv, {.test_fraction = 1.0});
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("--test-fraction must be in [0, 1)"));
}

TEST_F(ConvertTest, ProgressCountsRowsAndBytes) {
  std::atomic<int64_t> rows{0}, bytes{0};
  const std::string csv = "age,job,weight,income\n1,a,1,low\n2,b,2,high\n3,c,3,low\n";
  auto r = Convert(csv, {.progress_rows = &rows, .progress_bytes = &bytes});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(rows.load(), 3);
  EXPECT_EQ(bytes.load(), static_cast<int64_t>(csv.size()));
}

}  // namespace
}  // namespace brook::datatools
