// The user's own mistakes (issue 24): every command that takes an address,
// pointed at the wrong thing -- a PS, a chief, a trainer's /metrics port, a
// closed port, a TLS port without TLS -- says what it reached and exits
// with the documented code, within seconds; unknown commands and flags name
// the nearest valid word; a token file others can read gets a warning;
// object store URLs where a path goes are refused naming the flag or field.
// Real `brook` processes on 127.0.0.1.
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"
#include "tests/testing/process.h"
#include "tests/testing/test_pki.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::ChildProcess;
using ::testing::HasSubstr;
using ::testing::Not;
using testing::RunCommand;
using namespace std::chrono_literals;

constexpr char kClosedPort[] = "127.0.0.1:1";

// The address a `brook chief` printed, or "" (the test fails then).
std::string ChiefAddress(ChildProcess& chief) {
  auto line = chief.WaitForLine("brook chief listening on", 30s);
  EXPECT_TRUE(line.has_value()) << "no listening line from brook chief";
  if (!line.has_value()) return "";
  std::string address = line->substr(std::string("brook chief listening on ").size());
  return address.substr(0, address.find(' '));
}

// One PS, a chief over it, a trainer working for that chief (for its
// /metrics port) and a second chief whose --ps names the first chief: shared
// by every test (none changes them).
class WrongTargetTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = new testing::TempDir();
    std::string error;
    auto ps = testing::StartBrookPs(0, 1, {}, 30s, &error);
    ASSERT_TRUE(ps.has_value()) << error;
    ps_address_ = new std::string(ps->address);
    ps_ = ps->process.release();
    chief_ = StartChief("chief", *ps_address_).release();
    chief_address_ = new std::string(ChiefAddress(*chief_));
    bad_chief_ = StartChief("bad-chief", *chief_address_).release();
    bad_chief_address_ = new std::string(ChiefAddress(*bad_chief_));
    trainer_ =
        ChildProcess::Start({BrookBinary(), "trainer", "--chief", *chief_address_, "--node-id",
                             "t0", "--cpu-threads", "1", "--metrics-listen", "127.0.0.1:0"},
                            &error)
            .release();
    ASSERT_NE(trainer_, nullptr) << error;
    auto line = trainer_->WaitForLine("brook trainer metrics on", 30s);
    ASSERT_TRUE(line.has_value());
    trainer_metrics_ = new std::string(line->substr(line->rfind(' ') + 1));

    auto gen = RunCommand({BrookBinary(), "data", "gen", "--out", dir_->Join("data"), "--train",
                           "2000", "--test", "500", "--shards", "1"});
    ASSERT_EQ(gen.exit_code, 0) << gen.output;
    job_ = new std::string(dir_->Join("job.yaml"));
    testing::WriteFileOrDie(*job_, JobYaml(dir_->Join("data/train-*.tfrecord")));
  }
  static void TearDownTestSuite() {
    for (ChildProcess* p : {trainer_, bad_chief_, chief_, ps_}) delete p;  // SIGKILL + reap
    for (std::string* s :
         {ps_address_, chief_address_, bad_chief_address_, trainer_metrics_, job_}) {
      delete s;
    }
    delete dir_;
  }

  static std::unique_ptr<ChildProcess> StartChief(const std::string& name, const std::string& ps) {
    std::string error;
    auto chief =
        ChildProcess::Start({BrookBinary(), "chief", "--listen", "127.0.0.1:0", "--metrics-listen",
                             "127.0.0.1:0", "--state-dir", dir_->Join(name), "--ps", ps},
                            &error);
    EXPECT_NE(chief, nullptr) << error;
    return chief;
  }

  static std::string JobYaml(const std::string& train) {
    return absl::StrCat("name: wrong-target\ndata:\n  train: [", train,
                        "]\nfeatures: ", dir_->Join("data/feature_spec.yaml"),
                        "\nmodel_file: ", testing::SourceDir(), "/examples/criteo/wide_deep.yaml\n",
                        "training: {batch_size: 256, epochs: 1}\n");
  }

  // `brook ARGS...`, timed: the result and how long it took.
  static testing::CommandResult Brook(std::vector<std::string> args, double* seconds,
                                      int timeout_seconds = 60) {
    args.insert(args.begin(), BrookBinary());
    const auto start = std::chrono::steady_clock::now();
    testing::CommandResult r = RunCommand(args, timeout_seconds);
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  }

  static inline testing::TempDir* dir_ = nullptr;
  static inline ChildProcess* ps_ = nullptr;
  static inline ChildProcess* chief_ = nullptr;
  static inline ChildProcess* bad_chief_ = nullptr;
  static inline ChildProcess* trainer_ = nullptr;
  static inline std::string* ps_address_ = nullptr;
  static inline std::string* chief_address_ = nullptr;
  static inline std::string* bad_chief_address_ = nullptr;
  static inline std::string* trainer_metrics_ = nullptr;
  static inline std::string* job_ = nullptr;
};

// What each wrong target must be called, for a client that wants a chief.
struct Target {
  std::string address;
  std::string says;
};

std::vector<Target> NotAChief(const std::string& ps, const std::string& metrics) {
  return {
      {ps, ps + " is a brook PS (shard 0 of 1), not a chief"},
      {metrics, metrics + " does not speak brook's gRPC (HTTP/1 answered: is it a /metrics port?)"},
      {kClosedPort, absl::StrCat("chief at ", kClosedPort,
                                 " unreachable: connection refused (nothing listens there)")}};
}

TEST_F(WrongTargetTest, JobCommandsSayWhatAnsweredInsteadOfAChiefAndExit4) {
  const std::vector<std::vector<std::string>> commands = {
      {"list"}, {"status", "x"}, {"cancel", "x"}, {"logs", "x"}, {"submit", *job_}};
  for (const Target& t : NotAChief(*ps_address_, *trainer_metrics_)) {
    for (std::vector<std::string> cmd : commands) {
      cmd.insert(cmd.end(), {"--chief", t.address});
      double seconds = 0;
      auto r = Brook(cmd, &seconds);
      EXPECT_EQ(r.exit_code, 4) << cmd[0] << " " << t.address << ": " << r.output;
      EXPECT_THAT(r.output, HasSubstr(t.says)) << cmd[0];
      EXPECT_LT(seconds, 10) << cmd[0] << " " << t.address;
    }
  }
}

TEST_F(WrongTargetTest, TrainerUnderAChiefThatIsNoChiefFailsNamingWhatAnswered) {
  for (const Target& t : NotAChief(*ps_address_, *trainer_metrics_)) {
    if (t.address == kClosedPort) continue;  // below: waited for
    double seconds = 0;
    auto r = Brook({"trainer", "--chief", t.address, "--node-id", "t-wrong"}, &seconds);
    EXPECT_EQ(r.exit_code, 1) << t.address << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(t.says));
    EXPECT_LT(seconds, 10) << t.address;
  }
  // Nothing listening may be a chief still starting: the trainer waits for
  // it, saying why it waits.
  double seconds = 0;
  auto r = Brook({"trainer", "--chief", kClosedPort, "--node-id", "t-wait"}, &seconds, 4);
  EXPECT_EQ(r.exit_code, -1) << r.output;  // still waiting when killed
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("chief at ", kClosedPort,
                                               " unreachable: connection refused")));
  EXPECT_THAT(r.output, HasSubstr("retrying"));
}

TEST_F(WrongTargetTest, TrainerWhosePsListNamesNoPsFailsNamingWhatAnswered) {
  const std::vector<std::string> train = {"trainer",
                                          "--spec",
                                          dir_->Join("data/feature_spec.yaml"),
                                          "--model",
                                          testing::SourceDir() + "/examples/criteo/wide_deep.yaml",
                                          "--data",
                                          dir_->Join("data/train-*.tfrecord"),
                                          "--max-steps",
                                          "1",
                                          "--retry-seconds",
                                          "2",
                                          "--ps"};
  const std::vector<Target> targets = {
      {*chief_address_, "PS shard 0 (" + *chief_address_ + ") is a brook chief, not a PS"},
      {*trainer_metrics_,
       "PS shard 0 (" + *trainer_metrics_ + ") does not speak brook's gRPC (HTTP/1 answered"},
      {kClosedPort,
       absl::StrCat("PS shard 0 (", kClosedPort, "): connection refused (nothing listens there)")}};
  for (const Target& t : targets) {
    std::vector<std::string> args = train;
    args.push_back(t.address);
    double seconds = 0;
    auto r = Brook(args, &seconds);
    EXPECT_EQ(r.exit_code, 1) << t.address << ": " << r.output;
    EXPECT_THAT(r.output, HasSubstr(t.says));
    // A refused PS is retried for --retry-seconds (2 s), the others not at all.
    EXPECT_LT(seconds, 10) << t.address;
  }
}

TEST_F(WrongTargetTest, ChiefWhosePsListNamesAChiefRefusesTheJobNamingIt) {
  double seconds = 0;
  auto r = Brook({"submit", *job_, "--chief", *bad_chief_address_}, &seconds);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("the chief's PS list (--ps) is wrong: PS shard 0 (",
                                               *chief_address_, ") is a brook chief, not a PS")));
  auto list = Brook({"list", "--chief", *bad_chief_address_, "-o", "json"}, &seconds);
  EXPECT_EQ(list.exit_code, 0) << list.output;
  EXPECT_THAT(list.output, Not(HasSubstr("wrong-target")));  // nothing was queued
}

TEST_F(WrongTargetTest, UnknownCommandsAndFlagsExit2NamingTheNearestWord) {
  double seconds = 0;
  auto r = Brook({"deploy", "--help"}, &seconds);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("brook: unknown command 'deploy' (commands: data, bench, ps"));
  r = Brook({"trainr", "--chief", kClosedPort}, &seconds);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("brook: unknown command 'trainr'; did you mean 'trainer'?"));
  r = Brook({"data", "inpsect", "x.tfrecord"}, &seconds);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr("brook data: unknown command 'inpsect'; did you mean 'inspect'?"));
  r = Brook({"list", "--chife", kClosedPort}, &seconds);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("brook list: unknown flag '--chife'; did you mean '--chief'?"));
  r = Brook({"data", "inspect", "--compresion=gzip", "x"}, &seconds);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("brook data inspect: unknown flag '--compresion'; did you mean "
                                  "'--compression'?"));
  // Known words still work, values that look like words too.
  r = Brook({"data", "--help"}, &seconds);
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST_F(WrongTargetTest, TokenFileOthersCanReadGetsAWarningNamingTheFix) {
  const std::string token = dir_->Join("token");
  testing::WriteFileOrDie(token, "brook-token-0123456789abcdef\n");
  ASSERT_EQ(chmod(token.c_str(), 0644), 0);
  double seconds = 0;
  auto r = Brook({"list", "--chief", kClosedPort, "--token-file", token}, &seconds);
  EXPECT_EQ(r.exit_code, 4) << r.output;  // still used: a warning, not an error
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("warning: token file ", token,
                                               " is readable by group and others (mode 0644)")));
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("chmod 600 ", token)));
  ASSERT_EQ(chmod(token.c_str(), 0600), 0);
  r = Brook({"list", "--chief", kClosedPort, "--token-file", token}, &seconds);
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_THAT(r.output, Not(HasSubstr("warning")));
}

TEST_F(WrongTargetTest, ObjectStoreUrlsWhereAPathGoesAreRefusedNamingTheFlagOrField) {
  const std::string not_yet = "URLs are not supported yet: mount the data and give a path";
  double seconds = 0;
  auto r = Brook({"trainer", "--local-ps", "1", "--spec", "x.yaml", "--model", "m.yaml", "--data",
                  "s3://bucket/train-*.tfrecord"},
                 &seconds);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr(absl::StrCat("--data: \"s3://bucket/train-*.tfrecord\": s3:// ", not_yet)));
  r = Brook({"data", "inspect", "gs://bucket/a.tfrecord"}, &seconds);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("\"gs://bucket/a.tfrecord\": gs:// ", not_yet)));
  r = Brook({"predict", "--model", "hdfs://nn/models/x", "--data", "x.tfrecord"}, &seconds);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr(absl::StrCat("--model: \"hdfs://nn/models/x\": hdfs:// ", not_yet)));

  const std::string job = dir_->Join("s3-job.yaml");
  testing::WriteFileOrDie(job, JobYaml("s3://bucket/train-*.tfrecord"));
  r = Brook({"submit", job, "--dry-run"}, &seconds);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output,
              HasSubstr(absl::StrCat(
                  "data.train[0] (line 3): \"s3://bucket/train-*.tfrecord\": s3:// ", not_yet)));
}

// TLS on one side only: refused at once, saying which side lacks what.
TEST(WrongTargetTlsTest, PlaintextToATlsChiefAndNoClientCertificateAreImmediateAndNamed) {
  testing::TestPki pki;
  ASSERT_TRUE(pki.ok());
  testing::TempDir dir;
  std::string error;
  auto chief = ChildProcess::Start(
      {BrookBinary(), "chief", "--listen", "127.0.0.1:0", "--metrics-listen", "", "--state-dir",
       dir.Join("chief"), "--ps", kClosedPort, "--tls-cert", pki.server_cert(), "--tls-key",
       pki.server_key(), "--tls-ca", pki.ca_cert(), "--tls-mutual"},
      &error);
  ASSERT_NE(chief, nullptr) << error;
  const std::string address = ChiefAddress(*chief);
  ASSERT_FALSE(address.empty());

  const auto run = [](std::vector<std::string> args, double* seconds) {
    args.insert(args.begin(), BrookBinary());
    const auto start = std::chrono::steady_clock::now();
    testing::CommandResult r = RunCommand(args, 60);
    *seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  double seconds = 0;
  auto plain = run({"list", "--chief", address}, &seconds);
  EXPECT_EQ(plain.exit_code, 4) << plain.output;
  EXPECT_THAT(plain.output, HasSubstr(address + ": TLS handshake failed: the server expects TLS"));
  EXPECT_LT(seconds, 10);
  auto no_cert = run({"list", "--chief", address, "--tls-ca", pki.ca_cert()}, &seconds);
  EXPECT_EQ(no_cert.exit_code, 4) << no_cert.output;
  EXPECT_THAT(no_cert.output,
              HasSubstr(address + ": TLS handshake failed: the server requires a client "
                                  "certificate (give --tls-cert and --tls-key)"));
  EXPECT_LT(seconds, 10);
  auto trainer = run({"trainer", "--chief", address, "--node-id", "t-plain"}, &seconds);
  EXPECT_EQ(trainer.exit_code, 1) << trainer.output;
  EXPECT_THAT(trainer.output, HasSubstr("the server expects TLS"));
  EXPECT_LT(seconds, 10);
  chief->Signal(SIGTERM);
  EXPECT_EQ(chief->Wait(30s), 0);
}

}  // namespace
}  // namespace brook
