// Per-example score files (`brook predict --output`): the format from the
// extension, CSV and TFRecord rows read back, the file appearing only when
// finished, and the ids read beside the scores with errors naming the record.
#include "chief/export/score_output.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"
#include "tests/testing/test_util.h"

namespace brook::chief {
namespace {

tf::Feature BytesId(const std::string& v) {
  tf::Feature f;
  f.mutable_bytes_list()->add_value(v);
  return f;
}

std::vector<tf::Example> ReadScoreExamples(const std::string& path, storage::Compression c) {
  std::vector<tf::Example> out;
  auto reader = storage::TFRecordReader::Open(path, {.compression = c});
  EXPECT_TRUE(reader.ok()) << reader.status();
  if (!reader.ok()) return out;
  std::string_view record;
  while (true) {
    absl::StatusOr<bool> more = (*reader)->Next(&record);
    EXPECT_TRUE(more.ok()) << more.status();
    if (!more.ok() || !*more) break;
    out.emplace_back();
    EXPECT_TRUE(out.back().ParseFromArray(record.data(), static_cast<int>(record.size())));
  }
  return out;
}

void WriteScoreInput(const std::string& path, const std::vector<tf::Example>& examples) {
  auto writer = storage::TFRecordWriter::Open(path, {});
  ASSERT_TRUE(writer.ok()) << writer.status();
  for (const tf::Example& e : examples) {
    ASSERT_TRUE((*writer)->Write(e.SerializeAsString()).ok());
  }
  ASSERT_TRUE((*writer)->Close().ok());
}

TEST(ScoreFileTypeTest, FromTheExtension) {
  auto csv = ScoreFileTypeFromPath("/x/scores.csv");
  ASSERT_TRUE(csv.ok());
  EXPECT_EQ(csv->format, ScoreFileFormat::kCsv);
  for (const char* p : {"s.tfrecord", "s.tfrecords"}) {
    auto t = ScoreFileTypeFromPath(p);
    ASSERT_TRUE(t.ok()) << p;
    EXPECT_EQ(t->format, ScoreFileFormat::kTfRecord);
    EXPECT_EQ(t->compression, storage::Compression::kNone);
  }
  auto gz = ScoreFileTypeFromPath("s.tfrecord.gz");
  ASSERT_TRUE(gz.ok());
  EXPECT_EQ(gz->compression, storage::Compression::kGzip);
  for (const char* p : {"scores.txt", "scores", "scores.csv.gz", "s.json"}) {
    auto bad = ScoreFileTypeFromPath(p);
    ASSERT_FALSE(bad.ok()) << p;
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(bad.status().message(),
              absl::StrCat("--output ", p,
                           ": unknown file type; the extension picks it: .csv, .tfrecord or "
                           ".tfrecords (.tfrecord.gz for GZIP)"));
  }
}

TEST(ScoreWriterTest, CsvHasAHeaderExactFloatsAndQuotedIds) {
  testing::TempDir dir;
  const std::string path = dir.Join("scores.csv");
  auto w = ScoreWriter::Open(path, "user id");
  ASSERT_TRUE(w.ok()) << w.status();
  EXPECT_FALSE(std::filesystem::exists(path));  // only once finished
  const tf::Feature a = BytesId("a,b \"c\"");
  tf::Feature n;
  n.mutable_int64_list()->add_value(-42);
  tf::Feature x;
  x.mutable_float_list()->add_value(0.5f);
  ASSERT_TRUE((*w)->Write(1, 0.123456789f, &a).ok());
  ASSERT_TRUE((*w)->Write(0, 1e-7f, &n).ok());
  ASSERT_TRUE((*w)->Write(0, 1, &x).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ((*w)->rows(), 3u);
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp"));
  EXPECT_EQ(testing::ReadFileOrDie(path),
            "user id,label,score\n"
            "\"a,b \"\"c\"\"\",1,0.123456791\n"
            "-42,0,1.00000001e-07\n"
            "0.5,0,1\n");
  EXPECT_EQ(std::stof("0.123456791"), 0.123456789f);  // %.9g reads back exactly
}

TEST(ScoreWriterTest, CsvWithoutIds) {
  testing::TempDir dir;
  auto w = ScoreWriter::Open(dir.Join("s.csv"), "");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE((*w)->Write(1, 0.75f, nullptr).ok());
  ASSERT_TRUE((*w)->Finish().ok());
  EXPECT_EQ(testing::ReadFileOrDie(dir.Join("s.csv")), "label,score\n1,0.75\n");
}

TEST(ScoreWriterTest, TfRecordIsExamplesWithScoreLabelAndTheIdAsGiven) {
  testing::TempDir dir;
  for (const std::string name : {"s.tfrecord", "s.tfrecord.gz"}) {
    const std::string path = dir.Join(name);
    auto w = ScoreWriter::Open(path, "example_id");
    ASSERT_TRUE(w.ok()) << w.status();
    const tf::Feature id = BytesId("row-7");
    ASSERT_TRUE((*w)->Write(1, 0.25f, &id).ok());
    ASSERT_TRUE((*w)->Write(0, 0.5f, &id).ok());
    ASSERT_TRUE((*w)->Finish().ok());
    const std::vector<tf::Example> got = ReadScoreExamples(
        path, name.ends_with(".gz") ? storage::Compression::kGzip : storage::Compression::kNone);
    ASSERT_EQ(got.size(), 2u) << name;
    const auto& f = got[0].features().feature();
    EXPECT_EQ(f.at("score").float_list().value(0), 0.25f);
    EXPECT_EQ(f.at("label").float_list().value(0), 1.0f);
    EXPECT_EQ(f.at("example_id").bytes_list().value(0), "row-7");
    EXPECT_EQ(got[1].features().feature().at("score").float_list().value(0), 0.5f);
  }
}

TEST(ScoreWriterTest, UnfinishedLeavesNothingAndBadNamesAreRefused) {
  testing::TempDir dir;
  {
    auto w = ScoreWriter::Open(dir.Join("s.csv"), "");
    ASSERT_TRUE(w.ok());
    ASSERT_TRUE((*w)->Write(1, 0.5f, nullptr).ok());
  }  // scoring failed: no file, no tmp
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  auto clash = ScoreWriter::Open(dir.Join("s.csv"), "score");
  ASSERT_FALSE(clash.ok());
  EXPECT_EQ(clash.status().message(),
            "--id-feature score: the output has a column of that name; pick another");
  auto no_dir = ScoreWriter::Open(dir.Join("missing/s.csv"), "");
  ASSERT_FALSE(no_dir.ok());
  EXPECT_NE(no_dir.status().message().find(dir.Join("missing/s.csv.tmp")), std::string::npos)
      << no_dir.status();
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
}

TEST(IdReaderTest, IdsInFileOrderAndErrorsNameTheRecord) {
  testing::TempDir dir;
  std::vector<tf::Example> first(2), second(2);
  (*first[0].mutable_features()->mutable_feature())["id"] = BytesId("a");
  (*first[1].mutable_features()->mutable_feature())["id"] = BytesId("b");
  (*second[0].mutable_features()->mutable_feature())["id"] = BytesId("c");
  tf::Feature two;
  two.mutable_int64_list()->add_value(1);
  two.mutable_int64_list()->add_value(2);
  (*second[1].mutable_features()->mutable_feature())["id"] = two;
  WriteScoreInput(dir.Join("a.tfrecord"), first);
  WriteScoreInput(dir.Join("b.tfrecord"), second);

  auto ids = IdReader::Open({dir.Join("a.tfrecord"), dir.Join("b.tfrecord")}, std::nullopt, "id");
  ASSERT_TRUE(ids.ok());
  for (const char* want : {"a", "b", "c"}) {
    absl::StatusOr<const tf::Feature*> id = (*ids)->Next();
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_EQ((*id)->bytes_list().value(0), want);
  }
  absl::StatusOr<const tf::Feature*> bad = (*ids)->Next();
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(bad.status().message(),
            absl::StrCat("--id-feature id: record 1 of ", dir.Join("b.tfrecord"),
                         " holds 2 values, want 1"));

  auto other = IdReader::Open({dir.Join("b.tfrecord")}, std::nullopt, "user");
  ASSERT_TRUE(other.ok());
  absl::StatusOr<const tf::Feature*> missing = (*other)->Next();
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().message(),
            absl::StrCat("--id-feature user: missing in record 0 of ", dir.Join("b.tfrecord")));
}

}  // namespace
}  // namespace brook::chief
