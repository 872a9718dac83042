#include "chief/client/job_format.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "cli/job_exit_codes.h"

namespace brook::chief {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const absl::Time kNow = absl::FromUnixSeconds(1700000000);

int64_t Us(absl::Time t) { return absl::ToUnixMicros(t); }

v1::JobStatus RunningJob() {
  v1::JobStatus job;
  job.set_id("ctr-7");
  job.set_name("ctr");
  job.set_priority(5);
  job.set_state("RUNNING");
  job.set_submit_time_us(Us(kNow - absl::Minutes(12)));
  job.set_start_time_us(Us(kNow - absl::Minutes(10)));
  job.set_epochs(4);
  job.set_epoch(1);  // the second data epoch
  job.set_units_total(32);
  job.set_units_done(10);
  job.set_units_leased(2);
  job.set_units_pending(20);
  job.set_loss(0.43219);
  job.set_train_auc(0.87654);
  job.set_examples_per_second(12345);
  job.set_examples_trained(1234567);
  job.set_progress(0.25);
  job.set_trainers_wanted(2);
  job.add_trainers("trainer-a");
  return job;
}

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

TEST(FormatTest, Durations) {
  EXPECT_EQ(ShortDuration(absl::Seconds(0)), "0s");
  EXPECT_EQ(ShortDuration(absl::Seconds(42.9)), "42s");
  EXPECT_EQ(ShortDuration(absl::Seconds(185)), "3m05s");
  EXPECT_EQ(ShortDuration(absl::Hours(2) + absl::Minutes(7) + absl::Seconds(59)), "2h07m");
  EXPECT_EQ(ShortDuration(absl::Hours(76)), "3d04h");
  EXPECT_EQ(ShortDuration(-absl::Seconds(5)), "0s");
}

TEST(FormatTest, Counts) {
  EXPECT_EQ(FormatCount(0), "0");
  EXPECT_EQ(FormatCount(999), "999");
  EXPECT_EQ(FormatCount(1000), "1.00k");
  EXPECT_EQ(FormatCount(12345), "12.3k");
  EXPECT_EQ(FormatCount(123456), "123k");
  EXPECT_EQ(FormatCount(999999), "1.00M");
  EXPECT_EQ(FormatCount(1234567), "1.23M");
  EXPECT_EQ(FormatCount(4.56e9), "4.56G");
  EXPECT_EQ(FormatCount(-1), "-");
}

TEST(EstimateEtaTest, FromProgressAndRate) {
  v1::JobStatus job = RunningJob();
  // 1234567 examples are 25%: 3703701 left at 12345/s = 300.0 s.
  std::optional<absl::Duration> eta = EstimateEta(job, kNow);
  ASSERT_TRUE(eta.has_value());
  EXPECT_NEAR(absl::ToDoubleSeconds(*eta), 3 * 1234567.0 / 12345, 1e-6);
}

TEST(EstimateEtaTest, FromElapsedTimeWithoutARate) {
  v1::JobStatus job = RunningJob();
  job.set_examples_per_second(0);
  // 10 minutes for 25%: 30 minutes to go.
  std::optional<absl::Duration> eta = EstimateEta(job, kNow);
  ASSERT_TRUE(eta.has_value());
  EXPECT_EQ(*eta, absl::Minutes(30));
}

TEST(EstimateEtaTest, UnknownOrDone) {
  v1::JobStatus job = RunningJob();
  job.set_progress(0);
  EXPECT_FALSE(EstimateEta(job, kNow).has_value());
  job.set_progress(1);
  EXPECT_EQ(EstimateEta(job, kNow), absl::ZeroDuration());
  job.set_progress(0.5);
  job.set_start_time_us(0);  // queued
  EXPECT_FALSE(EstimateEta(job, kNow).has_value());
  job = RunningJob();
  job.set_state("SUCCEEDED");
  EXPECT_FALSE(EstimateEta(job, kNow).has_value());
}

TEST(ProgressLineTest, RunningJobHasEveryNumber) {
  const std::string line = ProgressLine(RunningJob(), kNow);
  EXPECT_THAT(line, AllOf(HasSubstr("RUNNING"), HasSubstr("25.0%"), HasSubstr("epoch 2/4"),
                          HasSubstr("1.23M examples"), HasSubstr("12.3k/s"), HasSubstr("ETA 5m00s"),
                          HasSubstr("loss 0.4322"), HasSubstr("AUC train 0.8765 eval -"),
                          HasSubstr("units 10 done 2 leased 20 left")));
  EXPECT_EQ(line.find('\n'), std::string::npos);
}

TEST(ProgressLineTest, NoMetricsYetShowDashes) {
  v1::JobStatus job = RunningJob();
  job.set_loss(0);
  job.set_train_auc(0);
  job.set_progress(0);
  job.set_epochs(0);  // unbounded
  EXPECT_THAT(ProgressLine(job, kNow),
              AllOf(HasSubstr("loss - AUC train - eval -"), HasSubstr("ETA -"),
                    HasSubstr("epoch 2 |"), Not(HasSubstr("/0"))));
}

TEST(ProgressLineTest, QueuedFinalizingAndFinished) {
  v1::JobStatus job = RunningJob();
  job.set_state("QUEUED");
  job.set_start_time_us(0);
  EXPECT_THAT(ProgressLine(job, kNow),
              AllOf(HasSubstr("QUEUED"), HasSubstr("priority 5"), HasSubstr("submitted 12m00s ago"),
                    Not(HasSubstr("ETA"))));
  job = RunningJob();
  job.set_finalizing(true);
  EXPECT_THAT(ProgressLine(job, kNow), HasSubstr("RUNNING (finalizing)"));
  job = RunningJob();
  job.set_state("SUCCEEDED");
  job.set_epoch(4);  // past the last epoch: shown as 4/4
  job.set_progress(1);
  EXPECT_THAT(ProgressLine(job, kNow), AllOf(HasSubstr("SUCCEEDED 100.0% epoch 4/4"),
                                             Not(HasSubstr("ETA")), Not(HasSubstr("/s"))));
}

TEST(JobSummaryTest, FinishedJobShowsEvalExportAndMessage) {
  v1::JobStatus job = RunningJob();
  job.set_state("SUCCEEDED");
  job.set_progress(1);
  job.set_end_time_us(Us(kNow - absl::Minutes(1)));
  job.set_message("trained 4 epochs");
  job.set_export_dir("/models/ctr-7");
  v1::ChiefEvalResult* eval = job.mutable_eval();
  eval->set_done(true);
  eval->set_auc(0.9012);
  eval->set_logloss(0.3012);
  eval->set_accuracy(0.85);
  eval->set_examples(16281);
  eval->set_step(1200);
  v1::ChiefCheckpoint* ckpt = job.add_checkpoints();
  ckpt->set_dir("/ckpt/ctr-7/step-1200");
  ckpt->set_step(1200);
  const std::string summary = JobSummary(job, kNow);
  EXPECT_THAT(
      summary,
      AllOf(HasSubstr("job ctr-7 (ctr): SUCCEEDED after 9m00s"),
            HasSubstr("message:    trained 4 epochs"),
            HasSubstr("AUC:        train 0.8765 (last 64K-128K examples)  eval 0.9012 "
                      "(step 1200)\n"),
            HasSubstr("eval:       AUC 0.9012"), HasSubstr("logloss 0.3012"),
            HasSubstr("on 16281 examples (step 1200)"), HasSubstr("export:     /models/ctr-7"),
            HasSubstr("checkpoint: /ckpt/ctr-7/step-1200 (step 1200)"), Not(HasSubstr("eta:")),
            Not(HasSubstr("trainers:"))));
  EXPECT_EQ(summary.back(), '\n');
}

TEST(JobSummaryTest, SkippedDataIsShownWhenThereIsSome) {
  v1::JobStatus job = RunningJob();
  EXPECT_THAT(JobSummary(job, kNow), Not(HasSubstr("skipped:")));
  job.set_skipped_corrupt_regions(3);
  job.set_skipped_corrupt_bytes(1605);
  EXPECT_THAT(JobSummary(job, kNow),
              HasSubstr("skipped:    3 corrupt regions (1605 bytes), 0 records that do not parse "
                        "(data.on_corrupt: skip;"));
}

TEST(JobSummaryTest, RunningJobShowsEtaAndTrainers) {
  const std::string summary = JobSummary(RunningJob(), kNow);
  EXPECT_THAT(summary,
              AllOf(HasSubstr("RUNNING for 10m00s"), HasSubstr("eta:        5m00s"),
                    HasSubstr("trainers:   1 of 2: trainer-a"),
                    HasSubstr("units 10 done 2 leased 20 left of 32"), Not(HasSubstr("eval:"))));
}

TEST(AucLineTest, LabelsEachAucAndSaysWhichIsMissing) {
  v1::JobStatus job = RunningJob();
  EXPECT_EQ(AucLine(job), "train 0.8765 (last 64K-128K examples)  eval - (not yet)");
  job.mutable_eval()->set_done(true);
  job.mutable_eval()->set_auc(0.86431);
  job.mutable_eval()->set_step(4000);
  EXPECT_EQ(AucLine(job), "train 0.8765 (last 64K-128K examples)  eval 0.8643 (step 4000)");
  job.set_train_auc(0);  // not reported yet
  EXPECT_EQ(AucLine(job), "train -  eval 0.8643 (step 4000)");
  EXPECT_THAT(ProgressLine(job, kNow), HasSubstr("AUC train - eval 0.8643 |"));
  // Before a window's worth of examples the AUC is over every one so far.
  job.set_train_auc(0.7);
  job.set_examples_trained(7250);
  EXPECT_EQ(AucLine(job), "train 0.7000 (every example so far)  eval 0.8643 (step 4000)");
}

TEST(RenderTableTest, ColumnsAlign) {
  const std::string table =
      RenderTable({"A", "LONG HEADER", "N"}, {{"wide cell", "x", "1"}, {"y", "", "12345"}},
                  {false, false, true});
  const std::vector<std::string> lines = Lines(table);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0], "A          LONG HEADER      N");
  EXPECT_EQ(lines[1], "wide cell  x                1");
  EXPECT_EQ(lines[2], "y                       12345");
}

TEST(JobsTableTest, HeaderAndAlignedRows) {
  v1::JobStatus a = RunningJob();
  v1::JobStatus b = RunningJob();
  b.set_id("a-much-longer-job-id-12");
  b.set_name("x");
  b.set_state("SUCCEEDED");
  b.set_progress(1);
  b.mutable_eval()->set_done(true);
  b.mutable_eval()->set_auc(0.9);
  b.set_submit_time_us(Us(kNow - absl::Hours(3)));
  v1::JobStatus c;
  c.set_id("q-1");
  c.set_state("QUEUED");
  v1::ListJobsResponse list;
  *list.add_jobs() = a;
  *list.add_jobs() = b;
  *list.add_jobs() = c;
  const std::vector<std::string> lines = Lines(JobsTable(list.jobs(), kNow));
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_THAT(lines[0], testing::StartsWith("ID  "));
  for (const char* column :
       {"NAME", "STATE", "PRIORITY", "PROGRESS", "EXAMPLES", "TRAIN AUC", "EVAL AUC", "AGE"}) {
    EXPECT_THAT(lines[0], HasSubstr(column));
  }
  // Every column starts at the same offset on every line: NAME after the
  // widest id, STATE after the widest name.
  const size_t name_at = lines[0].find("NAME");
  EXPECT_EQ(name_at, std::string("a-much-longer-job-id-12  ").size());
  EXPECT_EQ(lines[1].substr(name_at, 4), "ctr ");
  EXPECT_EQ(lines[2].substr(name_at, 1), "x");
  const size_t state_at = lines[0].find("STATE");
  EXPECT_EQ(lines[1].find("RUNNING"), state_at);
  EXPECT_EQ(lines[2].find("SUCCEEDED"), state_at);
  EXPECT_EQ(lines[3].find("QUEUED"), state_at);
  // Right-aligned columns end together: AGE is the last.
  EXPECT_EQ(lines[0].size(), lines[1].size());
  EXPECT_EQ(lines[0].size(), lines[2].size());
  EXPECT_THAT(lines[1], AllOf(HasSubstr("25.0%"), HasSubstr("1.23M"), HasSubstr("0.8765"),
                              testing::EndsWith("12m00s")));
  EXPECT_THAT(lines[2],
              AllOf(HasSubstr("100.0%"), HasSubstr("0.9000"), testing::EndsWith("3h00m")));
  // Each AUC under its own header: a's train AUC ends where TRAIN AUC does,
  // its eval AUC (none yet) is "-" under EVAL AUC; b has both.
  const size_t train_end = lines[0].find("TRAIN AUC") + std::string("TRAIN AUC").size();
  const size_t eval_end = lines[0].find("EVAL AUC") + std::string("EVAL AUC").size();
  EXPECT_EQ(lines[1].substr(train_end - 6, 6), "0.8765") << lines[1];
  EXPECT_EQ(lines[1].substr(eval_end - 1, 1), "-") << lines[1];
  EXPECT_EQ(lines[2].substr(train_end - 6, 6), "0.8765") << lines[2];
  EXPECT_EQ(lines[2].substr(eval_end - 6, 6), "0.9000") << lines[2];
  EXPECT_THAT(lines[3], testing::EndsWith("-"));
}

TEST(EventLogTest, TimestampedLines) {
  v1::JobStatus job;
  job.set_events_dropped(3);
  v1::ChiefJobEvent* e = job.add_events();
  e->set_time_us(Us(absl::FromUnixSeconds(1700000000) + absl::Milliseconds(123)));
  e->set_text("submitted");
  e = job.add_events();
  e->set_time_us(Us(absl::FromUnixSeconds(1700000060)));
  e->set_text("started on 2 trainers");
  EXPECT_EQ(EventLog(job),
            "(3 older events dropped)\n"
            "2023-11-14T22:13:20.123Z  submitted\n"
            "2023-11-14T22:14:20.000Z  started on 2 trainers\n");
}

TEST(EventLogTest, FollowShowsEachEventOnceAndCountsTheDropped) {
  v1::JobStatus job;
  auto add = [&job](const std::string& text) { job.add_events()->set_text(text); };
  add("submitted");
  add("started");
  uint64_t seen = 0;
  NewEvents n = FollowEvents(job, &seen);
  EXPECT_EQ(n.first, 0);
  EXPECT_EQ(n.missed, 0u);
  EXPECT_EQ(seen, 2u);
  n = FollowEvents(job, &seen);  // nothing new
  EXPECT_EQ(n.first, 2);
  add("eval at step 200");
  n = FollowEvents(job, &seen);
  EXPECT_EQ(n.first, 2);
  EXPECT_EQ(job.events(n.first).text(), "eval at step 200");
  EXPECT_EQ(seen, 3u);
  // The chief dropped the oldest 4 (the log is bounded): 3 shown, then 1
  // lost unseen, then the 2 it still holds are new.
  job.clear_events();
  job.set_events_dropped(4);
  add("checkpoint");
  add("exported to /x");
  n = FollowEvents(job, &seen);
  EXPECT_EQ(n.missed, 1u);
  EXPECT_EQ(n.first, 0);
  EXPECT_EQ(seen, 6u);
  // A chief that knows fewer than were shown shows nothing (until it knows more).
  job.clear_events();
  job.set_events_dropped(0);
  add("submitted");
  n = FollowEvents(job, &seen);
  EXPECT_EQ(n.first, 1);
  EXPECT_EQ(n.missed, 0u);
  EXPECT_EQ(seen, 6u);
  v1::ChiefJobEvent e;
  e.set_time_us(Us(absl::FromUnixSeconds(1700000000)));
  e.set_text("x");
  EXPECT_EQ(EventLine(e), "2023-11-14T22:13:20.000Z  x\n");
}

TEST(ToJsonTest, OneLineWithProtoNamesAndZeros) {
  v1::JobStatus job = RunningJob();
  const std::string json = ToJson(job);
  EXPECT_EQ(json.find('\n'), std::string::npos);
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_EQ(parsed["id"], "ctr-7");
  EXPECT_EQ(parsed["state"], "RUNNING");
  EXPECT_EQ(parsed["finalizing"], false);
  EXPECT_DOUBLE_EQ(parsed["progress"].get<double>(), 0.25);
  EXPECT_EQ(parsed["trainers"], nlohmann::json::array({"trainer-a"}));
  EXPECT_EQ(parsed["eval"]["done"], false);  // an unset message: all its zeros
}

TEST(ToJsonTest, IntegersOfEveryWidthAreNumbers) {
  v1::JobStatus job = RunningJob();
  job.set_examples_trained(18446744073709551615ull);  // 2^64-1: exact, not a double
  job.add_examples_per_epoch(32561);
  job.mutable_eval()->set_done(true);
  job.mutable_eval()->set_step(-1);
  job.mutable_eval()->set_examples(16281);
  v1::ChiefJobEvent* e = job.add_events();
  e->set_time_us(1700000000123456);
  e->set_text("submitted");
  const nlohmann::json parsed = nlohmann::json::parse(ToJson(job));
  ASSERT_TRUE(parsed["units_done"].is_number_unsigned()) << parsed["units_done"];
  EXPECT_EQ(parsed["units_done"].get<uint64_t>(), 10u);
  EXPECT_EQ(parsed["examples_trained"].get<uint64_t>(), 18446744073709551615ull);
  ASSERT_TRUE(parsed["submit_time_us"].is_number_integer());
  EXPECT_EQ(parsed["submit_time_us"].get<int64_t>(), Us(kNow - absl::Minutes(12)));
  EXPECT_EQ(parsed["examples_per_epoch"], nlohmann::json::array({32561}));
  EXPECT_EQ(parsed["eval"]["step"].get<int64_t>(), -1);
  EXPECT_EQ(parsed["eval"]["examples"].get<int64_t>(), 16281);
  EXPECT_EQ(parsed["events"][0]["time_us"].get<int64_t>(), 1700000000123456);
  EXPECT_EQ(parsed["priority"].get<int>(), 5);
  // Nothing quoted anywhere: no number is a string.
  EXPECT_EQ(ToJson(job).find("\"10\""), std::string::npos);
}

TEST(ToJsonTest, FieldsInProtoOrderNonFiniteIsNullMapsAreObjects) {
  v1::JobStatus job = RunningJob();
  job.set_loss(std::numeric_limits<double>::quiet_NaN());
  job.set_message("bad byte \xff here");
  const std::string json = ToJson(job);
  const nlohmann::json parsed = nlohmann::json::parse(json);
  EXPECT_TRUE(parsed["loss"].is_null());
  EXPECT_LT(json.find("\"id\""), json.find("\"name\""));
  EXPECT_LT(json.find("\"name\""), json.find("\"tables_dropped_time_us\""));
  EXPECT_THAT(parsed["message"].get<std::string>(), HasSubstr("bad byte"));

  v1::ChiefQueueMeta meta;
  meta.set_next_seq(3);
  (*meta.mutable_job_ids())[2] = "ctr-2";
  const nlohmann::json m = nlohmann::json::parse(ToJson(meta));
  EXPECT_EQ(m["next_seq"].get<uint64_t>(), 3u);
  EXPECT_EQ(m["job_ids"]["2"], "ctr-2");
}

TEST(JobExitCodeTest, FromStateAndError) {
  namespace job_exit = cli::job_exit;
  EXPECT_EQ(job_exit::ForJobState("SUCCEEDED"), 0);
  EXPECT_EQ(job_exit::ForJobState("RUNNING"), 0);
  EXPECT_EQ(job_exit::ForJobState("QUEUED"), 0);
  EXPECT_EQ(job_exit::ForJobState("FAILED"), 1);
  EXPECT_EQ(job_exit::ForJobState("CANCELLED"), 1);
  EXPECT_EQ(job_exit::ForError(absl::OkStatus()), 0);
  EXPECT_EQ(job_exit::ForError(absl::NotFoundError("no job x")), 3);
  EXPECT_EQ(job_exit::ForError(absl::UnavailableError("down")), 4);
  EXPECT_EQ(job_exit::ForError(absl::DeadlineExceededError("slow")), 4);
  EXPECT_EQ(job_exit::ForError(absl::UnauthenticatedError("wrong bearer token")), 5);
  EXPECT_EQ(job_exit::ForError(absl::PermissionDeniedError("no")), 5);
  EXPECT_EQ(job_exit::ForError(absl::InvalidArgumentError("bad")), 1);
  EXPECT_EQ(job_exit::ForError(absl::FailedPreconditionError("finished")), 1);
  EXPECT_TRUE(IsFinishedState("CANCELLED"));
  EXPECT_FALSE(IsFinishedState("RUNNING"));
}

}  // namespace
}  // namespace brook::chief
