// The path of an ML engineer who brings their own data (issue 24): the
// README's "Train on your own TFRecords" section run exactly as written on
// the TensorFlow-written Criteo sample, a Criteo CSV with a header converted
// with the criteo preset and trained, and the errors such a user meets first.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "features/feature_spec.h"
#include "tests/testing/test_util.h"

// Its own namespace: in a unity batch the other data tests' helpers share
// these names.
namespace brook::new_user_test {
namespace {

using testing::BrookBinary;
using testing::CommandResult;
using ::testing::HasSubstr;
using testing::RunCommand;

std::string Sample() { return testing::SharedDataDir() + "/tfrecord/criteo_sample.te.tfrecords"; }

CommandResult Brook(std::vector<std::string> args, int timeout_seconds = 300) {
  args.insert(args.begin(), BrookBinary());
  return RunCommand(args, timeout_seconds);
}

// The first ```sh block after `heading` in README.md.
std::string ReadmeBlock(const std::string& heading) {
  const std::string readme = testing::ReadFileOrDie(testing::SourceDir() + "/README.md");
  const size_t at = readme.find("\n" + heading + "\n");
  EXPECT_NE(at, std::string::npos) << "README.md has no section " << heading;
  if (at == std::string::npos) return "";
  const size_t begin = readme.find("```sh\n", at);
  const size_t end = readme.find("\n```\n", begin);
  EXPECT_NE(begin, std::string::npos);
  EXPECT_NE(end, std::string::npos);
  return readme.substr(begin + 6, end - begin - 6 + 1);
}

TEST(NewUserDataTest, ReadmeOwnTfrecordsSectionRunsAsWritten) {
  const std::string block = ReadmeBlock("## Train on your own TFRecords");
  ASSERT_THAT(block, HasSubstr("data spec"));
  ASSERT_THAT(block, HasSubstr("local /tmp/mine/job.yaml"));
  testing::TempDir dir;
  // Only two things change: its scratch directory (tests run in parallel)
  // and the binary under test (a sanitizer build's).
  const std::string script = absl::StrReplaceAll(
      block, {{"/tmp/mine", dir.Join("mine")}, {"$PWD/build/bin/brook", BrookBinary()}});
  const CommandResult r = RunCommand({"/bin/bash", "-e", "-o", "pipefail", "-c",
                                      absl::StrCat("cd '", testing::SourceDir(), "'\n", script)},
                                     600);
  ASSERT_EQ(r.exit_code, 0) << script << "\n---\n" << r.output;
  // 1: the spec, with its guess said on stderr and marked in the file.
  EXPECT_THAT(r.output, HasSubstr("brook data spec: wrote"));
  EXPECT_THAT(r.output, HasSubstr("the label \"label\" is a GUESS"));
  auto spec = input::FeatureSpec::FromYamlFile(dir.Join("mine/feature_spec.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->label_name, "label");
  EXPECT_EQ(spec->features.size(), 39u);
  EXPECT_THAT(testing::ReadFileOrDie(dir.Join("mine/feature_spec.yaml")),
              HasSubstr("# GUESSED: confirm"));
  // 3: trained and exported; 4: the export scored.
  EXPECT_THAT(r.output, HasSubstr("SUCCEEDED"));
  const size_t json_at = r.output.rfind("{\"accuracy\"");
  ASSERT_NE(json_at, std::string::npos) << r.output;
  const auto scored =
      nlohmann::json::parse(r.output.substr(json_at, r.output.find('\n', json_at) - json_at));
  EXPECT_EQ(scored["examples"], 40);
  ASSERT_TRUE(scored["auc"].is_number()) << scored.dump();
  EXPECT_GT(scored["auc"].get<double>(), 0.5);
}

// label, I1..I13, C1..C26 with a header line, as a CSV export of Criteo's
// data looks; the label follows I1 and C1 so there is something to learn.
std::string CriteoCsv(int rows) {
  std::string csv = "label";
  for (int i = 1; i <= 13; ++i) absl::StrAppend(&csv, ",I", i);
  for (int i = 1; i <= 26; ++i) absl::StrAppend(&csv, ",C", i);
  csv += "\n";
  uint64_t x = 12345;
  auto next = [&x] {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    return x >> 33;
  };
  for (int r = 0; r < rows; ++r) {
    const int i1 = static_cast<int>(next() % 20);
    const int c1 = static_cast<int>(next() % 4);
    const bool click = (i1 > 10) != (c1 == 3) || next() % 10 == 0;
    absl::StrAppend(&csv, click ? 1 : 0, ",", i1);
    for (int i = 2; i <= 13; ++i)
      absl::StrAppend(&csv, ",", i % 5 == 0 ? "" : std::to_string(next() % 100));
    absl::StrAppend(&csv, ",", absl::StrFormat("%08x", 0x68fd1e00 + c1));
    for (int i = 2; i <= 26; ++i) absl::StrAppend(&csv, ",", absl::StrFormat("%08x", next() % 50));
    csv += "\n";
  }
  return csv;
}

TEST(NewUserDataTest, CriteoCsvWithHeaderConvertsWithThePresetAndTrains) {
  testing::TempDir dir;
  const std::string csv = dir.Join("day_0.csv");
  testing::WriteFileOrDie(csv, CriteoCsv(2000));
  const std::string out = dir.Join("ctr");
  const CommandResult conv = Brook({"data", "convert", "--schema", "criteo", "--shards", "2",
                                    "--test-fraction", "0.2", "--out", out, csv});
  ASSERT_EQ(conv.exit_code, 0) << conv.output;
  EXPECT_THAT(conv.output, HasSubstr("converted 2000 of 2000 rows"));
  EXPECT_THAT(conv.output, HasSubstr("test-00000-of-00002.tfrecord"));
  ASSERT_TRUE(std::filesystem::exists(out + "/test-00001-of-00002.tfrecord"));

  // The converted shards also give a spec by inference, and it loads.
  const CommandResult spec = Brook({"data", "spec", out, "--out", dir.Join("inferred.yaml")});
  ASSERT_EQ(spec.exit_code, 0) << spec.output;
  auto inferred = input::FeatureSpec::FromYamlFile(dir.Join("inferred.yaml"));
  ASSERT_TRUE(inferred.ok()) << inferred.status();
  EXPECT_EQ(inferred->label_name, "label");
  EXPECT_EQ(inferred->features[inferred->IndexOf("C1")].type, input::FeatureType::kBytes);

  const CommandResult train =
      Brook({"trainer", "--local-ps", "1", "--spec", out + "/feature_spec.yaml", "--model",
             testing::SourceDir() + "/examples/criteo/wide_deep.yaml", "--data",
             out + "/train-*.tfrecord", "--eval-data", out + "/test-*.tfrecord", "--epochs", "3",
             "--batch-size", "64", "--embedding-lr", "0.1", "--dense-lr", "0.01"});
  ASSERT_EQ(train.exit_code, 0) << train.output;
  EXPECT_THAT(train.output, HasSubstr("\"auc\""));
}

TEST(NewUserDataTest, DataSpecErrorsNameTheFileOffsetOrFlag) {
  testing::TempDir dir;
  const std::string csv = dir.Join("not-a-tfrecord.csv");
  testing::WriteFileOrDie(csv, "label,x\n1,2\n");
  const CommandResult bad = Brook({"data", "spec", csv, "--out", dir.Join("s.yaml")});
  EXPECT_EQ(bad.exit_code, 1) << bad.output;
  EXPECT_THAT(bad.output, HasSubstr(csv));
  EXPECT_THAT(bad.output, HasSubstr("at offset 0"));
  EXPECT_FALSE(std::filesystem::exists(dir.Join("s.yaml")));

  const CommandResult label =
      Brook({"data", "spec", Sample(), "--label", "clicks", "--out", dir.Join("s.yaml")});
  EXPECT_EQ(label.exit_code, 1) << label.output;
  EXPECT_THAT(label.output, HasSubstr("brook data spec: --label clicks: no such feature in the "
                                      "data; it has 40 features: C1, C2, C3, C4, C5, C6, C7, C8, "
                                      "C9, C10, C11,"));
  EXPECT_THAT(label.output, HasSubstr(", C26, I1, I2, I3, I4, I5, I6, I7, I8, I9, I10, I11, I12, "
                                      "I13, label\n"));

  const CommandResult no_out = Brook({"data", "spec", Sample()});
  EXPECT_EQ(no_out.exit_code, 2) << no_out.output;
  EXPECT_THAT(no_out.output, HasSubstr("--out"));

  // `data stats --feature-spec-out` writes the same spec beside the table.
  const CommandResult stats =
      Brook({"data", "stats", Sample(), "--feature-spec-out", dir.Join("from-stats.yaml")});
  ASSERT_EQ(stats.exit_code, 0) << stats.output;
  ASSERT_TRUE(input::FeatureSpec::FromYamlFile(dir.Join("from-stats.yaml")).ok());
}

// A bare group names its subcommands (CLI11 alone says "A subcommand is
// required") and exits 2; a misspelt one is still named with a suggestion.
TEST(NewUserDataTest, BareCommandGroupsListTheirSubcommands) {
  const CommandResult data = Brook({"data"});
  EXPECT_EQ(data.exit_code, 2) << data.output;
  EXPECT_THAT(data.output, HasSubstr("brook data: a subcommand is required: inspect, gen, "
                                     "convert, stats, spec\nRun with --help"));
  const CommandResult bench = Brook({"bench"});
  EXPECT_EQ(bench.exit_code, 2) << bench.output;
  EXPECT_THAT(bench.output, HasSubstr("brook bench: a subcommand is required: tfrecord, ps, "));
  const CommandResult root = Brook({});
  EXPECT_EQ(root.exit_code, 2) << root.output;
  EXPECT_THAT(root.output, HasSubstr("brook: a subcommand is required: data, bench, "));

  const CommandResult typo = Brook({"data", "conver"});
  EXPECT_EQ(typo.exit_code, 2) << typo.output;
  EXPECT_THAT(typo.output,
              HasSubstr("brook data: unknown command 'conver'; did you mean 'convert'?"));
  const CommandResult help = Brook({"data", "--help"});
  EXPECT_EQ(help.exit_code, 0) << help.output;
  EXPECT_THAT(help.output, HasSubstr("convert"));
}

TEST(NewUserDataTest, InspectListsFeaturesInNaturalOrder) {
  const CommandResult r = Brook({"data", "inspect", Sample()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const size_t c2 = r.output.find("\nC2 ");
  const size_t c9 = r.output.find("\nC9 ");
  const size_t c10 = r.output.find("\nC10 ");
  const size_t i1 = r.output.find("\nI1 ");
  ASSERT_NE(c10, std::string::npos) << r.output;
  EXPECT_LT(c2, c9);
  EXPECT_LT(c9, c10);
  EXPECT_LT(c10, i1);
}

TEST(NewUserDataTest, ConvertNoHeaderOnAHeaderedFileNamesLineAndColumn) {
  testing::TempDir dir;
  const std::string csv = dir.Join("day_0.csv");
  testing::WriteFileOrDie(csv, CriteoCsv(3));
  const CommandResult r = Brook(
      {"data", "convert", "--schema", "criteo", "--no-header", "--out", dir.Join("out"), csv});
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(csv + ":1: label column \"label\": \"label\" is not a number"));
}

}  // namespace
}  // namespace brook::new_user_test
