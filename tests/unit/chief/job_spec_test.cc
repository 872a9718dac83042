#include "chief/job/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "tests/testing/test_util.h"

namespace brook::chief {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The sections of a full spec, in order; tests drop or replace some.
const std::vector<std::pair<std::string, std::string>> kSections = {
    {"name", "name: test-job\n"},
    {"priority", "priority: 3\n"},
    {"data",
     "data:\n"
     "  train: [train-*.tfrecord]\n"
     "  eval: /abs/test-*.tfrecord\n"
     "  compression: gzip\n"
     "  records_per_unit: 5000\n"},
    {"features",
     "features:\n"
     "  label: {name: label, type: float}\n"
     "  features:\n"
     "    - {name: I1, type: float}\n"
     "    - {name: C1, type: int64, kind: varlen}\n"
     "    - {name: C2, type: bytes}\n"},
    {"model",
     "model:\n"
     "  type: wide_deep\n"
     "  embedding_dim: 4\n"
     "  hidden: [8]\n"
     "sparse:\n"
     "  - {feature: C1}\n"
     "  - {feature: C2, table: shared}\n"
     "dense:\n"
     "  - {feature: I1, transform: log1p}\n"},
    {"optimizer",
     "optimizer:\n"
     "  embedding: {type: adagrad, learning_rate: 0.05, initial_accumulator: 0.2}\n"
     "  dense: {type: adam, learning_rate: 0.002, beta1: 0.8}\n"
     "  tables:\n"
     "    C1_wide: {type: ftrl, learning_rate: 0.1, l1: 0.01}\n"
     "  schedule: {warmup_steps: 10, decay: cosine, decay_steps: 1000, min_scale: 0.1}\n"},
    {"embedding_init", "embedding_init: {type: truncated_normal, stddev: 0.02}\n"},
    {"training",
     "training:\n"
     "  batch_size: 128\n"
     "  steps: 500\n"
     "  staleness: 1\n"
     "  accumulation_steps: 2\n"
     "  dense_refresh_steps: 3\n"
     "  seed: 7\n"
     "  shuffle_buffer: 100\n"},
    {"trainers", "trainers: 4\n"},
    {"checkpoint", "checkpoint: {dir: ckpt, interval_seconds: 60, interval_steps: 100, keep: 2}\n"},
    {"export", "export: {dir: out/export}\n"},
    {"eval", "eval: {every_steps: 50}\n"},
};

// The full spec without the sections named in `drop`.
std::string Spec(const std::vector<std::string>& drop = {}) {
  std::string out;
  for (const auto& [name, text] : kSections) {
    if (std::find(drop.begin(), drop.end(), name) == drop.end()) out += text;
  }
  return out;
}

// The full spec with `from` (which must occur) replaced by `to`.
std::string With(const std::string& from, const std::string& to) {
  const std::string spec = Spec();
  EXPECT_NE(spec.find(from), std::string::npos) << from;
  return absl::StrReplaceAll(spec, {{from, to}});
}

// 1-based line of the first occurrence of `needle` in `text`.
int LineOf(const std::string& text, const std::string& needle) {
  const size_t pos = text.find(needle);
  EXPECT_NE(pos, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + pos, '\n'));
}

absl::Status Error(const std::string& yaml) {
  absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(yaml, "/jobs/x");
  EXPECT_FALSE(spec.ok()) << yaml;
  return spec.ok() ? absl::OkStatus() : spec.status();
}

TEST(JobSpecTest, FullSpecGivesTrainerOptionsAndOptimizers) {
  absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(Spec(), "/jobs/x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->name, "test-job");
  EXPECT_EQ(spec->priority, 3);
  EXPECT_THAT(spec->data.train, ElementsAre("/jobs/x/train-*.tfrecord"));
  EXPECT_THAT(spec->data.eval, ElementsAre("/abs/test-*.tfrecord"));
  EXPECT_EQ(spec->data.compression, storage::Compression::kGzip);
  EXPECT_EQ(spec->data.records_per_unit, 5000);
  EXPECT_EQ(spec->features.features.size(), 3u);
  EXPECT_EQ(spec->features_file, "");
  EXPECT_EQ(spec->model.type, trainer::ModelType::kWideDeep);
  EXPECT_EQ(spec->training.batch_size, 128);
  EXPECT_EQ(spec->training.shuffle_buffer, 100);
  EXPECT_EQ(spec->trainers, 4);
  EXPECT_EQ(spec->checkpoint.dir, "/jobs/x/ckpt");
  EXPECT_EQ(spec->checkpoint.interval_seconds, 60);
  EXPECT_EQ(spec->checkpoint.interval_steps, 100);
  EXPECT_EQ(spec->checkpoint.keep, 2);
  EXPECT_EQ(spec->export_dir, "/jobs/x/out/export");
  EXPECT_EQ(spec->eval_every_steps, 50);

  const trainer::TrainerOptions o = spec->ToTrainerOptions();
  EXPECT_EQ(o.staleness, 1);
  EXPECT_EQ(o.max_steps, 500);
  EXPECT_EQ(o.accumulation_steps, 2);
  EXPECT_EQ(o.dense_refresh_steps, 3);
  EXPECT_EQ(o.seed, 7u);
  EXPECT_EQ(o.embedding_optimizer.kind, ps::OptimizerKind::kAdagrad);
  EXPECT_FLOAT_EQ(o.embedding_optimizer.learning_rate, 0.05f);
  EXPECT_FLOAT_EQ(o.embedding_optimizer.initial_accumulator, 0.2f);
  EXPECT_EQ(o.dense_optimizer.kind, ps::OptimizerKind::kAdam);
  EXPECT_FLOAT_EQ(o.dense_optimizer.learning_rate, 0.002f);
  EXPECT_FLOAT_EQ(o.dense_optimizer.beta1, 0.8f);
  EXPECT_FLOAT_EQ(o.dense_optimizer.beta2, 0.999f);  // not given: TF's default
  EXPECT_EQ(o.lr_schedule.decay, trainer::LrDecay::kCosine);
  EXPECT_EQ(o.lr_schedule.warmup_steps, 10);
  EXPECT_EQ(o.lr_schedule.decay_steps, 1000);
  EXPECT_DOUBLE_EQ(o.lr_schedule.min_scale, 0.1);
  EXPECT_EQ(o.embedding_init.kind, ps::InitializerKind::kTruncatedNormal);
  EXPECT_FLOAT_EQ(o.embedding_init.stddev, 0.02f);

  EXPECT_EQ(spec->OptimizerForTable("C1_wide").kind, ps::OptimizerKind::kFtrl);
  EXPECT_FLOAT_EQ(spec->OptimizerForTable("C1_wide").l1, 0.01f);
  EXPECT_EQ(spec->OptimizerForTable("C1"), o.embedding_optimizer);
  EXPECT_EQ(spec->OptimizerForTable("shared"), o.embedding_optimizer);
}

TEST(JobSpecTest, MinimalSpecTakesTheDefaults) {
  absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(
      absl::StrReplaceAll(Spec({"priority", "optimizer", "embedding_init", "training", "trainers",
                                "checkpoint", "export", "eval"}),
                          {{"  eval: /abs/test-*.tfrecord\n", ""}}) +
          "training: {epochs: 2}\n",
      "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->data.train, ElementsAre("train-*.tfrecord"));  // no base dir: as given
  EXPECT_EQ(spec->training.epochs, 2);
  EXPECT_EQ(spec->training.steps, 0);
  EXPECT_EQ(spec->trainers, 1);
  EXPECT_EQ(spec->checkpoint.dir, "");
  EXPECT_EQ(spec->export_dir, "");
  const trainer::TrainerOptions o = spec->ToTrainerOptions();
  const trainer::TrainerOptions defaults;
  EXPECT_EQ(o.max_steps, 0);
  EXPECT_EQ(o.staleness, defaults.staleness);
  EXPECT_EQ(o.embedding_optimizer, defaults.embedding_optimizer);
  EXPECT_EQ(o.dense_optimizer, defaults.dense_optimizer);
  EXPECT_EQ(o.embedding_init, defaults.embedding_init);
}

TEST(JobSpecTest, EachRequiredFieldMissingIsNamed) {
  struct Case {
    std::string yaml;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {Spec({"name"}), "name (line 1): missing"},
      {Spec({"data"}), "data (line 1): missing"},
      {Spec({"features"}), "features (line 1): missing"},
      {Spec({"model"}), "model (line 1): missing"},
      {Spec({"training"}), "training (line 1): missing"},
      {With("  train: [train-*.tfrecord]\n", ""), "data.train (line 4): missing"},
      {With("  train: [train-*.tfrecord]\n", "  train: []\n"),
       "data.train (line 4): must name at least one glob"},
      {With("  steps: 500\n", ""), "training.epochs (line 31): give exactly one"},
      {With("{type: adagrad, learning_rate: 0.05, ", "{"), "optimizer.embedding.type"},
      {With("learning_rate: 0.002, ", ""), "optimizer.dense.learning_rate (line 25): missing"},
      {With("type: truncated_normal, ", ""), "embedding_init.type (line 29): missing"},
      {With("dir: ckpt, ", ""), "checkpoint.dir (line 39): missing"},
      {With("{dir: out/export}", "{}"), "export.dir (line 40): missing"},
      {With("decay_steps: 1000, ", ""), "optimizer.schedule.decay_steps (line 28): missing"},
  };
  for (const Case& c : cases) {
    EXPECT_THAT(std::string(Error(c.yaml).message()), HasSubstr(c.expected)) << c.yaml;
    EXPECT_TRUE(absl::IsInvalidArgument(Error(c.yaml)));
  }
}

TEST(JobSpecTest, WrongTypeOrRangeNamesTheFieldAndLine) {
  struct Case {
    std::string from, to;
    std::string path;     // the field named
    std::string allowed;  // what the message says is allowed
  };
  const std::vector<Case> cases = {
      {"name: test-job", "name: Test_Job", "name", "DNS label"},
      {"priority: 3", "priority: high", "priority", "integer in [-1000, 1000]"},
      {"compression: gzip", "compression: brotli", "data.compression", "auto, none, gzip, zlib"},
      {"records_per_unit: 5000", "records_per_unit: -1", "data.records_per_unit", "integer in [0"},
      {"train: [train-*.tfrecord]", "train: {a: b}", "data.train", "glob"},
      {"learning_rate: 0.05", "learning_rate: -1", "optimizer.embedding.learning_rate", "> 0"},
      {"learning_rate: 0.05", "learning_rate: fast", "optimizer.embedding.learning_rate", "> 0"},
      {"{type: adagrad", "{type: rmsprop", "optimizer.embedding.type", "sgd, adagrad, adam, ftrl"},
      {"beta1: 0.8", "beta1: 1.0", "optimizer.dense.beta1", "[0, 1)"},
      {"beta1: 0.8", "l1: 0.8", "optimizer.dense.l1", "does not apply to type: adam"},
      {"l1: 0.01", "l1: -0.5", "optimizer.tables.C1_wide.l1", ">= 0"},
      {"decay: cosine", "decay: step", "optimizer.schedule.decay", "constant, linear, cosine"},
      {"min_scale: 0.1", "min_scale: 2", "optimizer.schedule.min_scale", "[0, 1]"},
      {"stddev: 0.02", "stddev: -1", "embedding_init.stddev", "> 0"},
      {"stddev: 0.02", "low: 1", "embedding_init.low", "does not apply to type: truncated_normal"},
      {"batch_size: 128", "batch_size: 0", "training.batch_size", "integer in [1, 1048576]"},
      {"staleness: 1", "staleness: two", "training.staleness", "integer in [0, 1024]"},
      {"accumulation_steps: 2", "accumulation_steps: 0", "training.accumulation_steps",
       "[1, 1024]"},
      {"seed: 7", "seed: -7", "training.seed", "integer in [0, 2^64)"},
      {"seed: 7", "retry_seconds: 0", "training.retry_seconds", "integer in [1, 604800]"},
      {"trainers: 4", "trainers: 0", "trainers", "integer in [1, 4096]"},
      {"keep: 2", "keep: 0", "checkpoint.keep", "integer in [1, 1000]"},
      {"interval_seconds: 60", "interval_seconds: 1.5", "checkpoint.interval_seconds", "integer"},
      {"every_steps: 50", "every_steps: -5", "eval.every_steps", "integer in [0"},
      {"embedding_init: {type: truncated_normal, stddev: 0.02}", "embedding_init: 3",
       "embedding_init", "must be a map"},
  };
  for (const Case& c : cases) {
    const std::string yaml = With(c.from, c.to);
    const std::string where = absl::StrCat(c.path, " (line ", LineOf(yaml, c.to), "): ");
    EXPECT_THAT(std::string(Error(yaml).message()), AllOf(HasSubstr(where), HasSubstr(c.allowed)))
        << c.to;
  }
}

// training.retry_seconds: 300 unless given, and kept by the canonical JSON
// the chief hands to trainers.
TEST(JobSpecTest, RetrySecondsDefaultsAndSurvivesTheCanonicalJson) {
  absl::StatusOr<JobSpec> plain = JobSpec::FromYaml(Spec(), "");
  ASSERT_TRUE(plain.ok()) << plain.status();
  EXPECT_EQ(plain->training.retry_seconds, 300);
  absl::StatusOr<JobSpec> spec =
      JobSpec::FromYaml(With("seed: 7", "seed: 7\n  retry_seconds: 45"), "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->training.retry_seconds, 45);
  absl::StatusOr<JobSpec> again = JobSpec::FromYaml(spec->CanonicalJson(), "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->training.retry_seconds, 45);
  EXPECT_NE(spec->SpecHash(), plain->SpecHash());
  // Defaults of fields added later are left out of the canonical JSON: the
  // spec hashes recorded in older exports still match.
  EXPECT_EQ(plain->CanonicalJson().find("retry_seconds"), std::string::npos);
  EXPECT_EQ(plain->CanonicalJson().find("retention"), std::string::npos);
  absl::StatusOr<JobSpec> kept = JobSpec::FromYaml(Spec() + "retention: 5\n", "");
  ASSERT_TRUE(kept.ok()) << kept.status();
  EXPECT_EQ(kept->retention_seconds, 5);
  EXPECT_EQ(JobSpec::FromYaml(kept->CanonicalJson(), "")->retention_seconds, 5);
  EXPECT_NE(kept->SpecHash(), plain->SpecHash());
}

TEST(JobSpecTest, InitFromParsesBothFormsAndSurvivesTheCanonicalJson) {
  absl::StatusOr<JobSpec> plain = JobSpec::FromYaml(Spec(), "/jobs/x");
  ASSERT_TRUE(plain.ok()) << plain.status();
  // Without init_from the spec, and so its hash, is what it was before the
  // field existed (pinned: the hash before retry_seconds, retention and
  // init_from, which are left out at their defaults).
  EXPECT_TRUE(plain->init_from.path.empty());
  EXPECT_EQ(plain->CanonicalJson().find("init_from"), std::string::npos);
  EXPECT_EQ(plain->SpecHash(), "b9873f3324e6411f");

  absl::StatusOr<JobSpec> str = JobSpec::FromYaml(Spec() + "init_from: ../models/a\n", "/jobs/x");
  ASSERT_TRUE(str.ok()) << str.status();
  EXPECT_EQ(str->init_from.path, "/jobs/models/a");
  EXPECT_TRUE(str->init_from.tables.empty());
  EXPECT_NE(str->SpecHash(), plain->SpecHash());

  const std::string yaml = Spec() + "init_from:\n  path: /models/a\n  tables: [C1, shared_wide]\n";
  absl::StatusOr<JobSpec> map = JobSpec::FromYaml(yaml, "/jobs/x");
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->init_from.path, "/models/a");
  EXPECT_THAT(map->init_from.tables, ElementsAre("C1", "shared_wide"));
  EXPECT_EQ(map->init_from.path_line, LineOf(yaml, "path: /models/a"));
  EXPECT_THAT(map->init_from.table_lines,
              ElementsAre(LineOf(yaml, "tables: [C1"), LineOf(yaml, "tables: [C1")));
  EXPECT_THAT(map->CanonicalJson(),
              HasSubstr(R"("init_from":{"path":"/models/a","tables":["C1","shared_wide"]})"));
  absl::StatusOr<JobSpec> again = JobSpec::FromYaml(map->CanonicalJson(), "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->CanonicalJson(), map->CanonicalJson());
  EXPECT_EQ(again->init_from.tables, map->init_from.tables);
  // The string form is the map form without tables.
  absl::StatusOr<JobSpec> as_map =
      JobSpec::FromYaml(Spec() + "init_from: {path: /jobs/models/a}\n", "/jobs/x");
  ASSERT_TRUE(as_map.ok()) << as_map.status();
  EXPECT_EQ(as_map->SpecHash(), str->SpecHash());
}

TEST(JobSpecTest, InitFromErrorsNameTheFieldAndLine) {
  struct Case {
    std::string tail, field, needle;
  };
  const std::vector<Case> cases = {
      {"init_from: {tables: [C1]}\n", "init_from.path", "init_from:"},
      {"init_from: {path: /m, table: [C1]}\n", "init_from.table", "init_from:"},
      {"init_from: {path: /m, tables: []}\n", "init_from.tables", "init_from:"},
      {"init_from: {path: /m, tables: C1}\n", "init_from.tables", "init_from:"},
      {"init_from:\n  path: /m\n  tables:\n    - C1\n    - [x]\n", "init_from.tables[1]", "- [x]"},
      {"init_from:\n  path: /m\n  tables:\n    - C1\n    - C1\n", "init_from.tables[1]",
       "    - C1\n    - C1"},
      {"init_from: [a]\n", "init_from", "init_from:"},
      {"init_from: {path: ''}\n", "init_from.path", "init_from:"},
  };
  for (const Case& c : cases) {
    const std::string yaml = Spec() + c.tail;
    const absl::Status s = Error(yaml);
    int line = LineOf(yaml, c.needle);
    if (c.needle.find('\n') != std::string::npos) ++line;  // the second of two lines
    EXPECT_THAT(std::string(s.message()), HasSubstr(absl::StrCat(c.field, " (line ", line, ")")))
        << c.tail;
  }
}

TEST(JobSpecTest, UnknownAndRepeatedKeysAreErrorsWithTheLine) {
  std::string yaml = Spec() + "learning_rate: 0.1\n";
  EXPECT_THAT(std::string(Error(yaml).message()),
              AllOf(HasSubstr("learning_rate (line 42): unknown key"), HasSubstr("allowed here")));
  yaml = With("  staleness: 1\n", "  stalenes: 1\n");
  EXPECT_THAT(std::string(Error(yaml).message()),
              HasSubstr(absl::StrCat("training.stalenes (line ", LineOf(yaml, "stalenes"),
                                     "): unknown key; allowed here: batch_size, epochs")));
  yaml = Spec() + "trainers: 5\n";
  EXPECT_THAT(std::string(Error(yaml).message()),
              HasSubstr("trainers (line 42): given twice (first on line 38)"));
}

TEST(JobSpecTest, EpochsAndStepsAreExclusive) {
  const std::string yaml = With("  steps: 500\n", "  steps: 500\n  epochs: 1\n");
  EXPECT_THAT(std::string(Error(yaml).message()),
              AllOf(HasSubstr("training.epochs"), HasSubstr("exactly one of training.epochs")));
}

TEST(JobSpecTest, TableOverrideMustNameATableOfTheModel) {
  const std::string yaml = With("    C1_wide:", "    C9:");
  EXPECT_THAT(std::string(Error(yaml).message()),
              AllOf(HasSubstr(absl::StrCat("optimizer.tables.C9 (line ", LineOf(yaml, "C9:"), ")")),
                    HasSubstr("the model has no table \"C9\"; its tables: C1, shared, C1_wide, "
                              "shared_wide")));
}

TEST(JobSpecTest, EmbeddedSpecErrorsKeepTheJobSpecsLines) {
  std::string yaml = With("{name: I1, type: float}", "{name: I1, type: double}");
  EXPECT_THAT(std::string(Error(yaml).message()),
              AllOf(HasSubstr("features: "), HasSubstr("feature \"I1\" (line 11)"),
                    HasSubstr("int64, float, bytes")));
  yaml = With("{feature: C2, table: shared}", "{feature: C9}");
  EXPECT_THAT(std::string(Error(yaml).message()), HasSubstr("C9"));
  yaml = With("  embedding_dim: 4\n", "  embedding_dim: 4\n  hiden: [8]\n");
  EXPECT_THAT(std::string(Error(yaml).message()), HasSubstr("line 17"));
}

TEST(JobSpecTest, InvalidYamlNamesTheLine) {
  EXPECT_THAT(std::string(Error(With("  staleness: 1\n", "  staleness: [1\n")).message()),
              AllOf(HasSubstr("job spec (line 3"), HasSubstr("invalid YAML")));
  EXPECT_THAT(std::string(Error("").message()), HasSubstr("empty document"));
  EXPECT_THAT(std::string(Error("- a\n- b\n").message()), HasSubstr("must be a map"));
}

TEST(JobSpecTest, FlowStyleDocumentParses) {
  absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(
      "{name: flow, data: {train: a}, features: {label: l, features: [{name: C1, type: int64, "
      "kind: varlen}]}, model: {type: lr}, sparse: [{feature: C1}], training: {steps: 5}}",
      "");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->features.features.size(), 1u);
  EXPECT_EQ(spec->training.steps, 5);
}

TEST(JobSpecTest, RelativePathsResolveAgainstTheSpecFile) {
  testing::TempDir dir;
  std::filesystem::create_directories(dir.Join("specs/data"));
  testing::WriteFileOrDie(dir.Join("specs/data/features.yaml"),
                          "label: label\nfeatures:\n  - {name: I1, type: float}\n"
                          "  - {name: C1, type: int64, kind: varlen}\n");
  testing::WriteFileOrDie(dir.Join("specs/model.yaml"),
                          "model: {type: lr}\nsparse: [{feature: C1}]\n");
  testing::WriteFileOrDie(dir.Join("specs/job.yaml"),
                          "name: rel\n"
                          "data: {train: data/train-*.tfrecord, eval: [../other/*.tfrecord]}\n"
                          "features: data/features.yaml\n"
                          "model_file: model.yaml\n"
                          "training: {epochs: 1}\n"
                          "checkpoint: {dir: ckpt}\n");
  absl::StatusOr<JobSpec> spec = JobSpec::FromYamlFile(dir.Join("specs/job.yaml"));
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_THAT(spec->data.train, ElementsAre(dir.Join("specs/data/train-*.tfrecord")));
  EXPECT_THAT(spec->data.eval, ElementsAre(dir.Join("other/*.tfrecord")));
  EXPECT_EQ(spec->features_file, dir.Join("specs/data/features.yaml"));
  EXPECT_EQ(spec->model_file, dir.Join("specs/model.yaml"));
  EXPECT_EQ(spec->checkpoint.dir, dir.Join("specs/ckpt"));
  EXPECT_EQ(spec->model.type, trainer::ModelType::kLr);

  // A missing referenced file names the field and the path; errors of the
  // whole file are prefixed by its path.
  testing::WriteFileOrDie(dir.Join("specs/job2.yaml"),
                          "name: rel\ndata: {train: x}\nfeatures: nope.yaml\n"
                          "model_file: model.yaml\ntraining: {epochs: 1}\n");
  absl::StatusOr<JobSpec> bad = JobSpec::FromYamlFile(dir.Join("specs/job2.yaml"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()),
              AllOf(HasSubstr(dir.Join("specs/job2.yaml") + ": features: "),
                    HasSubstr(dir.Join("specs/nope.yaml"))));
  // model_file and inline model sections are exclusive.
  testing::WriteFileOrDie(dir.Join("specs/job3.yaml"),
                          "name: rel\ndata: {train: x}\nfeatures: data/features.yaml\n"
                          "model_file: model.yaml\nmodel: {type: lr}\ntraining: {epochs: 1}\n");
  bad = JobSpec::FromYamlFile(dir.Join("specs/job3.yaml"));
  EXPECT_THAT(std::string(bad.status().message()),
              HasSubstr("model (line 5): give either model_file or the model/sparse/dense"));
}

TEST(JobSpecTest, InlineAndFileFeatureSpecsAreTheSameJob) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.Join("features.yaml"),
                          "label: {name: label, type: float}\n"
                          "features:\n"
                          "  - {name: I1, type: float}\n"
                          "  - {name: C1, type: int64, kind: varlen}\n"
                          "  - {name: C2, type: bytes}\n");
  const std::string inline_yaml = Spec();
  std::string file_yaml = Spec({"features"}) + "features: features.yaml\n";
  absl::StatusOr<JobSpec> a = JobSpec::FromYaml(inline_yaml, dir.path());
  absl::StatusOr<JobSpec> b = JobSpec::FromYaml(file_yaml, dir.path());
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->features_file, dir.Join("features.yaml"));
  EXPECT_EQ(a->CanonicalJson(), b->CanonicalJson());
  EXPECT_EQ(a->SpecHash(), b->SpecHash());
}

TEST(JobSpecTest, CanonicalJsonIsStableUnderKeyOrderAndLayout) {
  absl::StatusOr<JobSpec> a = JobSpec::FromYaml(Spec(), "/jobs/x");
  ASSERT_TRUE(a.ok()) << a.status();
  // Sections reversed, flow maps reordered, a comment, block style.
  std::string reordered;
  for (auto it = kSections.rbegin(); it != kSections.rend(); ++it) reordered += it->second;
  reordered = absl::StrReplaceAll(
      reordered,
      {{"{type: adagrad, learning_rate: 0.05, initial_accumulator: 0.2}",
        "{initial_accumulator: 0.2, learning_rate: 0.050, type: adagrad}  # comment"},
       {"checkpoint: {dir: ckpt, interval_seconds: 60, interval_steps: 100, keep: 2}",
        "checkpoint:\n  keep: 2\n  interval_steps: 100\n  interval_seconds: 60\n  dir: ./ckpt"}});
  absl::StatusOr<JobSpec> b = JobSpec::FromYaml(reordered, "/jobs/x");
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(a->CanonicalJson(), b->CanonicalJson());
  EXPECT_EQ(a->SpecHash(), b->SpecHash());
  EXPECT_EQ(a->SpecHash().size(), 16u);
  EXPECT_THAT(a->CanonicalJson(),
              AllOf(HasSubstr("\"learning_rate\":0.05,"), HasSubstr("\"name\":\"test-job\"")));

  absl::StatusOr<JobSpec> c =
      JobSpec::FromYaml(With("batch_size: 128", "batch_size: 64"), "/jobs/x");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_NE(a->SpecHash(), c->SpecHash());
}

// Regression (tests/fuzz/job_spec_fuzzer): a byte that is not UTF-8 in any
// string parsed, then CanonicalJson() threw nlohmann's type_error out of the
// chief. Now the parse refuses it, naming the line; UTF-8 text still parses
// and prints.
TEST(JobSpecTest, TextThatIsNotUtf8IsRefusedAndUtf8Prints) {
  const std::string bad_byte = With("export: {dir: out/export}", "export: {dir: out/\xF7x}");
  EXPECT_THAT(std::string(Error(bad_byte).message()),
              AllOf(HasSubstr("not valid UTF-8"),
                    HasSubstr(absl::StrCat("(line ", LineOf(bad_byte, "export:"), ")"))));
  // An overlong form, a surrogate encoded directly, a sequence cut short.
  for (const std::string bytes : {"\xC0\xAF", "\xED\xA0\x80", "\xE2\x82"}) {
    EXPECT_THAT(std::string(Error(With("out/export", "out/" + bytes)).message()),
                HasSubstr("not valid UTF-8"));
  }
  // A lone surrogate written as an escape: valid text, but not a string
  // JSON can hold. An error either way (yaml-cpp's or the JSON check's).
  EXPECT_EQ(Error(With("export: {dir: out/export}", "export: {dir: \"out/\\ud800\"}")).code(),
            absl::StatusCode::kInvalidArgument);

  absl::StatusOr<JobSpec> ok =
      JobSpec::FromYaml(With("out/export", "out/\xC3\xA9t\xC3\xA9-\xF0\x9F\x93\xA6"), "/jobs/x");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT(ok->CanonicalJson(), HasSubstr("out/\xC3\xA9t\xC3\xA9-\xF0\x9F\x93\xA6"));
}

TEST(JobSpecTest, CheckDataCountsMatchesAndRefusesAnEmptyGlob) {
  testing::TempDir dir;
  for (const char* f : {"train-0.tfrecord", "train-1.tfrecord", "test-0.tfrecord"}) {
    testing::WriteFileOrDie(dir.Join(f), "");
  }
  const std::string yaml =
      absl::StrReplaceAll(Spec(), {{"/abs/test-*.tfrecord", "test-*.tfrecord"}});
  absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(yaml, dir.path());
  ASSERT_TRUE(spec.ok()) << spec.status();
  absl::StatusOr<std::vector<JobSpec::GlobMatches>> m = spec->CheckData();
  ASSERT_TRUE(m.ok()) << m.status();
  ASSERT_EQ(m->size(), 2u);
  EXPECT_EQ((*m)[0].field, "data.train[0]");
  EXPECT_THAT((*m)[0].files,
              ElementsAre(dir.Join("train-0.tfrecord"), dir.Join("train-1.tfrecord")));
  EXPECT_EQ((*m)[1].field, "data.eval[0]");
  EXPECT_EQ((*m)[1].files.size(), 1u);

  spec = JobSpec::FromYaml(Spec(), dir.path());  // eval: /abs/... matches nothing
  ASSERT_TRUE(spec.ok()) << spec.status();
  m = spec->CheckData();
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(std::string(m.status().message()),
              HasSubstr("data.eval[0]: \"/abs/test-*.tfrecord\" matches no file"));
}

TEST(JobSpecTest, ASecondYamlDocumentIsRefusedNotDropped) {
  absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(Spec() + "\n---\nname: other\n", "/jobs/x");
  ASSERT_FALSE(spec.ok());
  EXPECT_NE(spec.status().message().find("a second document"), std::string::npos) << spec.status();
}

}  // namespace
}  // namespace brook::chief
