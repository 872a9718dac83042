// `brook bench ps --target`: the real benchmark against a real `brook ps`
// process (with a token), its bare gRPC ceiling a process of its own. Checks
// the plumbing, not the timing: positive rates on both sides, the table
// made for the run dropped afterwards, the ceiling child gone, and a wrong
// address an error naming it within seconds. Plus `brook bench
// grpc-ceiling` on its own, answering a Pull with the bytes it asks for.
#include <grpcpp/support/byte_buffer.h>
#include <signal.h>
#include <sys/stat.h>

#include <chrono>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "bench/bare_grpc.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ps/client/grpc_ps_client.h"
#include "tests/testing/process.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using ::testing::HasSubstr;
using testing::RunCommand;

constexpr char kBenchTargetToken[] = "bench-target-test-token-5d2a9e71";

// The JSON `--json` prints last: from the last line that is just "{".
nlohmann::json BenchTargetJson(const std::string& output) {
  size_t start = output.rfind("\n{\n");
  size_t end = output.rfind('}');
  if (start == std::string::npos || end == std::string::npos) return nlohmann::json();
  return nlohmann::json::parse(output.substr(start + 1, end - start), nullptr, false);
}

class BenchPsTargetTest : public ::testing::Test {
 protected:
  void SetUp() override {
    token_file_ = dir_.Join("token");
    testing::WriteFileOrDie(token_file_, absl::StrCat(kBenchTargetToken, "\n"));
    ASSERT_EQ(chmod(token_file_.c_str(), 0600), 0);
  }
  testing::TempDir dir_;
  std::string token_file_;
};

TEST_F(BenchPsTargetTest, MeasuresRunningShardsBesideTheirOwnCeilingsAndDropsItsTable) {
  std::string error;
  std::vector<testing::PsProcess> shards;
  for (int s = 0; s < 2; ++s) {
    auto ps = testing::StartBrookPs(s, 2, {"--auth-token-file", token_file_},
                                    std::chrono::seconds(30), &error);
    ASSERT_TRUE(ps.has_value()) << error;
    shards.push_back(std::move(*ps));
  }
  const std::vector<std::string> addresses = {shards[0].address, shards[1].address};

  const std::vector<std::string> argv = {BrookBinary(),
                                         "bench",
                                         "ps",
                                         "--target",
                                         absl::StrJoin(addresses, ","),
                                         "--seconds",
                                         "0.2",
                                         "--slices",
                                         "2",
                                         "--dims",
                                         "8",
                                         "--threads",
                                         "1",
                                         "--rows",
                                         "20000",
                                         "--ps-token-file",
                                         token_file_,
                                         "--json"};
  auto r = RunCommand(argv, 120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("[goal >= 60%]"));
  EXPECT_THAT(r.output, HasSubstr("[goal >= 50%]"));
  EXPECT_THAT(r.output, HasSubstr("token from --ps-token-file"));
  const nlohmann::json json = BenchTargetJson(r.output);
  ASSERT_TRUE(json.is_object()) << r.output;
  EXPECT_EQ(json["mode"], "target");
  EXPECT_EQ(json["targets"], nlohmann::json(addresses));
  // One ceiling process per shard, started by the bench.
  EXPECT_EQ(json["ceilings_started_here"], 2);
  ASSERT_EQ(json["ceiling_targets"].size(), 2u) << json.dump(2);
  ASSERT_EQ(json["runs"].size(), 1u) << json.dump(2);
  const auto& run = json["runs"][0];
  EXPECT_EQ(run["dim"], 8);
  EXPECT_EQ(run["threads"], 1);
  EXPECT_EQ(run["shards"], 2);
  EXPECT_EQ(run["slice_pairs"], 2);
  for (const char* key :
       {"grpc_pull_mrows_s", "bare_grpc_pull_mrows_s", "grpc_push_mrows_s",
        "bare_grpc_push_mrows_s", "grpc_pull_vs_bare", "grpc_push_vs_bare", "grpc_pull_vs_bare_low",
        "grpc_push_vs_bare_low", "grpc_pull_client_cores", "bare_grpc_push_client_cores",
        "grpc_pull_machine_cores"}) {
    ASSERT_TRUE(run.contains(key)) << key << " " << json.dump(2);
    EXPECT_GT(run[key].get<double>(), 0.0) << key;
  }
  // The shards and ceilings run here: their processes' CPU is measured.
  for (const char* key : {"grpc_push_server_cores", "bare_grpc_push_server_cores"}) {
    ASSERT_TRUE(run.contains(key)) << key << " " << json.dump(2);
    EXPECT_GE(run[key].get<double>(), 0.0) << key;
  }
  const std::string table = run["table"];
  EXPECT_TRUE(absl::StartsWith(table, "bench-")) << table;
  EXPECT_THAT(r.output, HasSubstr(absl::StrCat("table ", table, " dropped")));

  // No shard holds a table of the run any more.
  ps::GrpcPsClientOptions co;
  co.addresses = addresses;
  co.token = {.token = kBenchTargetToken, .source = "test"};
  auto client = ps::GrpcPsClient::Create(co);
  ASSERT_TRUE(client.ok()) << client.status();
  auto stats = (*client)->Stats();
  ASSERT_TRUE(stats.ok()) << stats.status();
  ASSERT_EQ(stats->size(), 2u);
  for (const auto& shard : *stats) {
    for (const auto& t : shard.tables) EXPECT_NE(t.name, table);
  }

  // The ceilings it started are gone with it.
  for (const std::string ceiling : json["ceiling_targets"]) {
    auto bare = bench::BareGrpcClient::Create(ceiling, 1);
    ASSERT_TRUE(bare.ok());
    EXPECT_FALSE((*bare)->WaitForReady(absl::Milliseconds(300)).ok()) << ceiling;
  }

  // Without the token: the PS's refusal, naming where the token goes.
  std::vector<std::string> no_token;
  for (const std::string& arg : argv) {
    if (arg != "--ps-token-file" && arg != token_file_) no_token.push_back(arg);
  }
  testing::ScopedEnv env("BROOK_PS_TOKEN", std::nullopt);
  testing::ScopedEnv env_file("BROOK_PS_TOKEN_FILE", std::nullopt);
  r = RunCommand(no_token, 60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--ps-token-file"));
}

// --wire bf16: the PS calls move 2-byte rows (the heading and the JSON say
// so, bytes and GB/s counted in them); the ceiling still moves fp32 bytes.
TEST_F(BenchPsTargetTest, Bf16OnTheWireIsMeasuredAndNamed) {
  std::string error;
  auto ps = testing::StartBrookPs(0, 1, {}, std::chrono::seconds(30), &error);
  ASSERT_TRUE(ps.has_value()) << error;
  auto r = RunCommand(
      {BrookBinary(), "bench", "ps", "--target", ps->address, "--seconds", "0.2", "--slices", "2",
       "--dims", "16", "--threads", "1", "--rows", "20000", "--wire", "bf16", "--json"},
      120);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_THAT(r.output, HasSubstr("32 B per row on the wire (bf16)"));
  EXPECT_THAT(r.output, HasSubstr("fp32 bytes (ceiling)"));
  const nlohmann::json json = BenchTargetJson(r.output);
  ASSERT_TRUE(json.is_object()) << r.output;
  const auto& run = json["runs"][0];
  EXPECT_EQ(run["wire"], "bf16");
  EXPECT_GT(run["grpc_pull_mrows_s"].get<double>(), 0);
  EXPECT_NEAR(run["grpc_pull_gb_s"].get<double>(), run["grpc_pull_mrows_s"].get<double>() * 0.032,
              1e-9);
}

// Ctrl-C (or SIGTERM) mid-run: the bench drops its table on the way out
// (exit 130 / 143) instead of leaving it on the user's PS.
TEST_F(BenchPsTargetTest, AnInterruptedBenchDropsItsTable) {
  for (int sig : {SIGINT, SIGTERM}) {
    std::string error;
    auto ps = testing::StartBrookPs(0, 1, {}, std::chrono::seconds(30), &error);
    ASSERT_TRUE(ps.has_value()) << error;
    auto bench = testing::ChildProcess::Start(
        {BrookBinary(), "bench", "ps", "--target", ps->address, "--seconds", "60", "--slices", "4",
         "--dims", "8", "--threads", "1", "--rows", "20000"},
        &error);
    ASSERT_NE(bench, nullptr) << error;
    const auto line = bench->WaitForLine("dim 8: table bench-", std::chrono::seconds(60));
    ASSERT_TRUE(line.has_value()) << bench->stdout_text();
    ASSERT_TRUE(bench->Signal(sig));
    const auto code = bench->Wait(std::chrono::seconds(30));
    ASSERT_TRUE(code.has_value()) << "the bench did not exit after signal " << sig;
    EXPECT_EQ(*code, 128 + sig);

    ps::GrpcPsClientOptions co;
    co.addresses = {ps->address};
    auto client = ps::GrpcPsClient::Create(co);
    ASSERT_TRUE(client.ok()) << client.status();
    auto stats = (*client)->Stats();
    ASSERT_TRUE(stats.ok()) << stats.status();
    for (const auto& t : (*stats)[0].tables) {
      EXPECT_FALSE(absl::StartsWith(t.name, "bench-")) << t.name << " left after signal " << sig;
    }
  }
}

// A PS killed and restarted on its port mid-run (with its data dir, so the
// table comes back and the calls succeed again): the figures would mix two
// processes, so the bench fails naming the shard instead of reporting them
// (it reported PASS, with the dead process's CPU as the server's).
TEST_F(BenchPsTargetTest, APsRestartedMidRunFailsTheBenchInsteadOfReportingFigures) {
  std::string error;
  const std::string data_dir = dir_.Join("ps-data");
  auto ps = testing::StartBrookPs(0, 1, {"--data-dir", data_dir}, std::chrono::seconds(30), &error);
  ASSERT_TRUE(ps.has_value()) << error;
  // stderr too (the error goes there): through a shell that execs the bench.
  auto bench = testing::ChildProcess::Start(
      {"/bin/sh", "-c",
       absl::StrCat("exec '", BrookBinary(), "' bench ps --target ", ps->address,
                    " --seconds 8 --slices 2 --dims 8 --threads 1 --rows 20000 2>&1")},
      &error);
  ASSERT_NE(bench, nullptr) << error;
  ASSERT_TRUE(bench->WaitForLine("dim 8: table bench-", std::chrono::seconds(60)).has_value())
      << bench->stdout_text();
  ASSERT_TRUE(ps->process->Signal(SIGKILL));
  ps->process->Wait(std::chrono::seconds(10));
  auto again = testing::StartBrookPs(0, 1, {"--data-dir", data_dir}, std::chrono::seconds(30),
                                     &error, ps->address);
  ASSERT_TRUE(again.has_value()) << error;
  const auto code = bench->Wait(std::chrono::seconds(120));
  ASSERT_TRUE(code.has_value()) << "the bench did not finish";
  EXPECT_EQ(*code, 1) << bench->stdout_text();
  const auto why = bench->WaitForLine("brook bench ps: the PS at ", std::chrono::seconds(5));
  ASSERT_TRUE(why.has_value()) << bench->stdout_text();
  EXPECT_THAT(*why, HasSubstr(absl::StrCat(ps->address, " (shard 0) restarted during the run")));
  EXPECT_THAT(bench->stdout_text(), ::testing::Not(HasSubstr("PASS")));
}

TEST_F(BenchPsTargetTest, AWrongAddressIsAnErrorNamingItWithinSeconds) {
  // A port that was free a moment ago.
  std::string address;
  {
    auto server = bench::BareGrpcServer::Start();
    ASSERT_TRUE(server.ok()) << server.status();
    address = (*server)->address();
  }
  const auto t0 = std::chrono::steady_clock::now();
  auto r = RunCommand({BrookBinary(), "bench", "ps", "--target", address, "--dims", "8",
                       "--threads", "1", "--seconds", "0.2", "--rows", "20000"},
                      60);
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(15));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr(address));
  // Not a host:port at all: a usage error.
  r = RunCommand(
      {BrookBinary(), "bench", "ps", "--target", "nowhere", "--ceiling-target", "127.0.0.1:1"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("'nowhere'"));
  // Three ceilings for two shards: neither one for all nor one each.
  r = RunCommand({BrookBinary(), "bench", "ps", "--target", "127.0.0.1:1,127.0.0.1:2",
                  "--ceiling-target", "127.0.0.1:3,127.0.0.1:4,127.0.0.1:5"},
                 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_THAT(r.output, HasSubstr("--ceiling-target has 3 addresses for 2"));
  // A ceiling address that is a PS: what answered, not an empty gRPC message.
  std::string error;
  auto ps = testing::StartBrookPs(0, 1, {}, std::chrono::seconds(30), &error);
  ASSERT_TRUE(ps.has_value()) << error;
  r = RunCommand(
      {BrookBinary(), "bench", "ps", "--target", ps->address, "--ceiling-target", ps->address,
       "--dims", "8", "--threads", "1", "--seconds", "0.2", "--rows", "20000"},
      60);
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_THAT(r.output, HasSubstr("it answers gRPC ("));
  EXPECT_THAT(r.output, HasSubstr(" for /brook.bench.Bare/Push) but not as a ceiling"));
  EXPECT_THAT(r.output, ::testing::Not(HasSubstr(": ;")));
}

TEST(BenchGrpcCeiling, AnswersAPullWithTheBytesItAsksForUntilSigterm) {
  std::string error;
  auto child = testing::ChildProcess::Start(
      {BrookBinary(), "bench", "grpc-ceiling", "--listen", "127.0.0.1:0"}, &error);
  ASSERT_NE(child, nullptr) << error;
  auto line =
      child->WaitForLine("brook bench grpc-ceiling listening on ", std::chrono::seconds(20));
  ASSERT_TRUE(line.has_value()) << child->stdout_text();
  const std::string address = line->substr(line->rfind(' ') + 1);
  EXPECT_TRUE(absl::StartsWith(address, "127.0.0.1:")) << *line;
  auto client = bench::BareGrpcClient::Create(address, 2);
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE((*client)->WaitForReady(absl::Seconds(10)).ok());
  // BareGrpcClient checks each reply's size against the request's ask.
  for (uint64_t bytes : {uint64_t{0}, uint64_t{32768}, uint64_t{1} << 20}) {
    absl::Status st = (*client)->Call(bench::kBarePullMethod, bench::MakePullRequest(64, bytes));
    EXPECT_TRUE(st.ok()) << bytes << ": " << st;
  }
  EXPECT_TRUE(child->Signal(SIGTERM));
  EXPECT_EQ(child->Wait(std::chrono::seconds(10)), 0);
}

}  // namespace
}  // namespace brook
