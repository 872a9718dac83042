// The job spec's `tables:` section: PS options of the model's tables, from
// YAML through the canonical JSON to the options the trainer creates tables
// with.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "chief/job/job_spec.h"
#include "trainer/trainer.h"

namespace brook::chief {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

// Wide & deep over C1 and C2: tables C1, C2 (dim 4), C1_wide, C2_wide (dim 1).
std::string TablesJob(const std::string& extra) {
  return "name: tables-job\n"
         "data: {train: [train-*.tfrecord]}\n"
         "features:\n"
         "  label: {name: label, type: float}\n"
         "  features:\n"
         "    - {name: C1, type: int64, kind: varlen}\n"
         "    - {name: C2, type: int64, kind: varlen}\n"
         "model: {type: wide_deep, embedding_dim: 4, hidden: [8]}\n"
         "sparse: [{feature: C1}, {feature: C2}]\n"
         "dense: []\n"
         "training: {batch_size: 16, steps: 10}\n" +
         extra;
}

int LineIn(const std::string& text, const std::string& needle) {
  const size_t pos = text.find(needle);
  EXPECT_NE(pos, std::string::npos) << needle;
  return 1 + static_cast<int>(std::count(text.begin(), text.begin() + pos, '\n'));
}

ps::TableOptions OptionsOf(const JobSpec& spec, const std::string& table) {
  for (const trainer::TableSpec& t : spec.model.Layout().tables) {
    if (t.name == table) return trainer::TableOptionsFor(t, spec.ToTrainerOptions());
  }
  ADD_FAILURE() << "no table " << table;
  return {};
}

std::string TablesError(const std::string& yaml) {
  absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(yaml, "/jobs/x");
  EXPECT_FALSE(spec.ok()) << yaml;
  return spec.ok() ? "" : std::string(spec.status().message());
}

TEST(JobSpecTablesTest, DefaultAndPerTableOptionsReachTheTablesOptions) {
  const std::string yaml = TablesJob(
      "tables:\n"
      "  default: {memory_budget: 2GiB, admission_min_count: 2, ttl_seconds: 86400}\n"
      "  C1:\n"
      "    memory_budget: 512MiB\n"
      "    initializer: {type: zeros}\n"
      "    ttl_steps: 1000\n"
      "    max_pending_keys: 4096\n"
      "    gradient_clip: 5\n"
      "    bad_gradient: zero\n"
      "    wire: bf16\n"
      "  C2: {wire: fp16}\n");
  absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(yaml, "/jobs/x");
  ASSERT_TRUE(spec.ok()) << spec.status();

  const ps::TableOptions c1 = OptionsOf(*spec, "C1");
  EXPECT_EQ(c1.memory_budget_bytes, 512ull << 20);
  EXPECT_EQ(c1.admission_min_count, 2u);  // from default
  EXPECT_EQ(c1.ttl_seconds, 86400);
  EXPECT_EQ(c1.ttl_steps, 1000);
  EXPECT_EQ(c1.max_pending_keys, 4096u);
  EXPECT_EQ(c1.gradient_clip, 5.0f);
  EXPECT_EQ(c1.bad_gradient, ps::BadGradientPolicy::kZero);
  EXPECT_EQ(c1.initializer.kind, ps::InitializerKind::kZeros);
  EXPECT_EQ(c1.wire, ps::WirePrecision::kBf16);

  const ps::TableOptions c2 = OptionsOf(*spec, "C2");
  EXPECT_EQ(c2.memory_budget_bytes, 2ull << 30);
  EXPECT_EQ(c2.admission_min_count, 2u);
  EXPECT_EQ(c2.ttl_steps, 0);
  EXPECT_EQ(c2.bad_gradient, ps::BadGradientPolicy::kReject);
  EXPECT_EQ(c2.initializer.kind, ps::InitializerKind::kUniform);  // embedding_init's default
  EXPECT_EQ(c2.wire, ps::WirePrecision::kFp16);
  EXPECT_EQ(OptionsOf(*spec, "C1_wide").wire, ps::WirePrecision::kFp32);
  // Wide tables take the defaults too, and still start at zero.
  const ps::TableOptions wide = OptionsOf(*spec, "C2_wide");
  EXPECT_EQ(wide.memory_budget_bytes, 2ull << 30);
  EXPECT_EQ(wide.initializer.kind, ps::InitializerKind::kZeros);

  // The canonical JSON carries them (sizes in bytes) and reads back the same.
  const std::string json = spec->CanonicalJson();
  EXPECT_THAT(json, HasSubstr("\"memory_budget\":536870912"));
  absl::StatusOr<JobSpec> again = JobSpec::FromYaml(json, "");
  ASSERT_TRUE(again.ok()) << again.status() << "\n" << json;
  EXPECT_EQ(OptionsOf(*again, "C1"), c1);
  EXPECT_EQ(OptionsOf(*again, "C2"), c2);
  EXPECT_EQ(again->SpecHash(), spec->SpecHash());
}

TEST(JobSpecTablesTest, WithoutTheSectionTheSpecAndItsHashAreUnchanged) {
  absl::StatusOr<JobSpec> plain = JobSpec::FromYaml(TablesJob(""), "/jobs/x");
  ASSERT_TRUE(plain.ok()) << plain.status();
  // No top-level "tables" (optimizer.tables is {} here).
  EXPECT_EQ(plain->CanonicalJson().find("\"tables\":{\""), std::string::npos);
  EXPECT_EQ(OptionsOf(*plain, "C1").memory_budget_bytes, 1ull << 30);
  EXPECT_EQ(OptionsOf(*plain, "C1").admission_min_count, 0u);
  // An empty default is no setting at all.
  absl::StatusOr<JobSpec> empty =
      JobSpec::FromYaml(TablesJob("tables: {default: {}}\n"), "/jobs/x");
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(empty->SpecHash(), plain->SpecHash());
  absl::StatusOr<JobSpec> set =
      JobSpec::FromYaml(TablesJob("tables: {default: {ttl_steps: 5}}\n"), "/jobs/x");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_NE(set->SpecHash(), plain->SpecHash());
}

TEST(JobSpecTablesTest, ErrorsNameTheFieldAndLine) {
  struct Case {
    std::string tables;  // the section
    std::string field;   // expected "<field> (line N)" where N is `at`'s line
    std::string at;
    std::string says;
  };
  const Case cases[] = {
      {"tables:\n  C9: {ttl_steps: 1}\n", "tables.C9",
       "C9:", "the model has no table \"C9\"; its tables: C1, C2, C1_wide, C2_wide (or default"},
      {"tables:\n  C1:\n    memory_budgte: 1GiB\n", "tables.C1.memory_budgte", "memory_budgte",
       "unknown key; allowed here: memory_budget,"},
      {"tables:\n  default:\n    memory_budget: lots\n", "tables.default.memory_budget", "lots",
       "\"lots\" is not a size"},
      {"tables:\n  C1:\n    memory_budget: -1GiB\n", "tables.C1.memory_budget", "-1GiB",
       "is not a size"},
      {"tables:\n  C1:\n    memory_budget: 0\n", "tables.C1.memory_budget", "memory_budget",
       "must be > 0 bytes"},
      {"tables:\n  C1:\n    memory_budget: 10\n", "tables.C1.memory_budget",
       "C1:", "bytes), got 10 (for table 'C1')"},
      {"tables:\n  C1:\n    admission_min_count: 70000\n", "tables.C1.admission_min_count",
       "admission_min_count", "must be an integer in [0, 65535]"},
      {"tables:\n  default:\n    ttl_seconds: -1\n", "tables.default.ttl_seconds", "ttl_seconds",
       "must be a finite number"},
      {"tables:\n  C1:\n    bad_gradient: ignore\n", "tables.C1.bad_gradient", "bad_gradient",
       "must be one of reject, zero"},
      {"tables:\n  default:\n    wire: half\n", "tables.default.wire", "wire",
       "must be one of fp32, bf16, fp16"},
      {"tables:\n  C1:\n    initializer: {type: uniform, low: 1, high: 0}\n",
       "tables.C1.initializer.high", "initializer", "must be > low"},
      {"tables:\n  C1: {ttl_steps: 1}\n  C1: {ttl_steps: 2}\n", "tables.C1", "C1: {ttl_steps: 2}",
       "given twice"},
      {"tables: [C1]\n", "tables", "tables:", "must be a map from a table name (or default)"},
      {"embedding_init: {type: zeros}\ntables:\n  default: {initializer: {type: zeros}}\n",
       "tables.default.initializer", "default:", "embedding_init (line 12) sets it too"},
  };
  for (const Case& c : cases) {
    const std::string yaml = TablesJob(c.tables);
    EXPECT_THAT(TablesError(yaml),
                AllOf(HasSubstr(absl::StrCat(c.field, " (line ", LineIn(yaml, c.at), ")")),
                      HasSubstr(c.says)))
        << c.tables;
  }
}

// `cache`: the trainers' row cache, through the canonical JSON to their
// options; absent, nothing changes (nor the spec's hash); bad values name
// the field and line.
TEST(JobSpecTablesTest, TheCacheSectionReachesTheTrainerOptions) {
  const std::string yaml = TablesJob("cache: {rows: 50000, refresh_steps: 4}\n");
  absl::StatusOr<JobSpec> spec = JobSpec::FromYaml(yaml, "/jobs/x");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ToTrainerOptions().cache.rows, 50000);
  EXPECT_EQ(spec->ToTrainerOptions().cache.refresh_steps, 4);
  absl::StatusOr<JobSpec> again = JobSpec::FromYaml(spec->CanonicalJson(), "");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->cache, spec->cache);
  absl::StatusOr<JobSpec> plain = JobSpec::FromYaml(TablesJob(""), "/jobs/x");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->ToTrainerOptions().cache.enabled());
  EXPECT_EQ(plain->CanonicalJson().find("\"cache\""), std::string::npos);
  EXPECT_NE(plain->SpecHash(), spec->SpecHash());
  const std::string missing = TablesJob("cache: {refresh_steps: 4}\n");
  EXPECT_THAT(TablesError(missing), AllOf(HasSubstr("cache.rows"), HasSubstr("missing")));
  // rows: 0 is off, as `--cache-rows 0`, and hashes as no cache at all.
  absl::StatusOr<JobSpec> off = JobSpec::FromYaml(TablesJob("cache: {rows: 0}\n"), "/jobs/x");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE(off->ToTrainerOptions().cache.enabled());
  EXPECT_EQ(off->SpecHash(), plain->SpecHash());
  const std::string negative = TablesJob("cache:\n  rows: -1\n");
  EXPECT_THAT(TablesError(negative),
              HasSubstr(absl::StrCat("cache.rows (line ", LineIn(negative, "rows: -1"), ")")));
  const std::string refresh = TablesJob("cache: {rows: 10, refresh_steps: 0}\n");
  EXPECT_THAT(TablesError(refresh), HasSubstr("cache.refresh_steps"));
}

}  // namespace
}  // namespace brook::chief
