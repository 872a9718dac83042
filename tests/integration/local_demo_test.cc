// `brook local`: the whole cluster as child processes on 127.0.0.1, the
// built-in demo (generated Criteo-shaped data, DeepFM) at a small size, and
// a user's job file; every child is gone when it returns.
#include <signal.h>

#include <cstdio>
#include <filesystem>
#include <regex>
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "tests/testing/http_get.h"
#include "tests/testing/process.h"
#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::RunCommand;

// Processes whose command line mentions `needle` (children left behind).
int ProcessesMentioning(const std::string& needle) {
  int n = 0;
  for (const auto& entry : std::filesystem::directory_iterator("/proc")) {
    const std::string pid = entry.path().filename().string();
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    FILE* f = std::fopen((entry.path() / "cmdline").c_str(), "r");
    if (f == nullptr) continue;
    char buf[4096];
    const size_t len = std::fread(buf, 1, sizeof(buf), f);
    std::fclose(f);
    std::string cmd(buf, len);
    for (char& c : cmd) c = c == '\0' ? ' ' : c;
    if (cmd.find(needle) != std::string::npos) ++n;
  }
  return n;
}

TEST(LocalDemoTest, DemoTrainsDeepFmAndPrintsItsAucBesideTheBayesOptimal) {
  testing::TempDir dir;
  auto r = RunCommand({BrookBinary(), "local", "--work-dir", dir.path(), "--demo-train", "150000",
                       "--demo-test", "20000", "--ps", "2", "--trainers", "2"},
                      600);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::smatch m;
  ASSERT_TRUE(std::regex_search(r.output, m,
                                std::regex(R"(test AUC ([0-9.]+) .*Bayes-optimal AUC ([0-9.]+))")))
      << r.output;
  const double auc = std::stod(m[1]), bayes = std::stod(m[2]);
  EXPECT_GT(auc, 0.70) << r.output;  // learned something real at this small size
  EXPECT_LT(auc, bayes + 0.005) << r.output;
  EXPECT_NE(r.output.find("SUCCEEDED"), std::string::npos);
  // The export of the job, under its id: <name>-<date>-<time>-<random>.
  ASSERT_TRUE(std::regex_search(
      r.output, m,
      std::regex(R"(\nexport: (\S+/export/demo-deepfm-[0-9]{8}-[0-9]{6}-[0-9a-f]{6}) )")))
      << r.output;
  EXPECT_TRUE(std::filesystem::exists(m[1].str() + "/manifest.json")) << r.output;
  // Logs of every child are kept; no child outlives `brook local`.
  EXPECT_TRUE(std::filesystem::exists(dir.Join("logs/chief.err")));
  EXPECT_TRUE(std::filesystem::exists(dir.Join("logs/trainer-1.err")));
  // ... and their paths printed, with how to follow the job and a trainer.
  const std::string work = std::filesystem::absolute(dir.path()).lexically_normal().string();
  for (const char* name : {"chief", "ps-0", "ps-1", "trainer-0", "trainer-1"}) {
    EXPECT_NE(r.output.find(absl::StrFormat("\n  %-10s %s/logs/%s.err\n", name, work, name)),
              std::string::npos)
        << name << ": " << r.output;
  }
  EXPECT_TRUE(std::regex_search(r.output, std::regex(R"(brook logs demo-deepfm-\S+ --follow )"
                                                     R"(--chief 127\.0\.0\.1:[0-9]+ \(a trainer's )"
                                                     R"(own log: add --trainer trainer-0\))")))
      << r.output;
  EXPECT_NE(r.output.find(absl::StrCat("logs: ", work, "/logs")), std::string::npos) << r.output;
  EXPECT_EQ(ProcessesMentioning(dir.path() + "/chief-state"), 0);
  EXPECT_EQ(ProcessesMentioning(dir.path() + "/ps-0"), 0);
}

TEST(LocalDemoTest, AJobFileThatFailsValidationExitsNonZeroNamingTheField) {
  testing::TempDir dir;
  testing::WriteFileOrDie(dir.Join("job.yaml"), "name: Not_A_Dns_Label\n");
  auto r = RunCommand({BrookBinary(), "local", dir.Join("job.yaml"), "--work-dir", dir.Join("w")});
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("name"), std::string::npos) << r.output;
  // Refused before anything exists: no work directory left behind.
  EXPECT_FALSE(std::filesystem::exists(dir.Join("w"))) << r.output;
  // A missing job file the same way.
  auto missing =
      RunCommand({BrookBinary(), "local", dir.Join("nope.yaml"), "--work-dir", dir.Join("w2")});
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  EXPECT_FALSE(std::filesystem::exists(dir.Join("w2"))) << missing.output;
}

// `--serve`: after the job, its export answers the example request that
// `brook local` prints, until Ctrl-C.
TEST(LocalDemoTest, ServeAnswersThePrintedExampleRequest) {
  testing::TempDir dir;
  std::string error;
  auto child = testing::ChildProcess::Start(
      {BrookBinary(), "local", "--work-dir", dir.path(), "--demo-train", "20000", "--demo-test",
       "2000", "--ps", "1", "--trainers", "1", "--serve", "--serve-http", "127.0.0.1:0"},
      &error);
  ASSERT_NE(child, nullptr) << error;
  auto url_line = child->WaitForLine("serving: http://", std::chrono::seconds(300));
  ASSERT_TRUE(url_line.has_value()) << child->stdout_text();
  auto curl = child->WaitForLine("  curl -s ", std::chrono::seconds(10));
  ASSERT_TRUE(curl.has_value()) << child->stdout_text();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(
      *curl, m,
      std::regex(R"(curl -s http://127\.0\.0\.1:([0-9]+)(/v1/models/brook:predict) -d '(.*)'$)")))
      << *curl;
  auto r = testing::HttpRequest("127.0.0.1", std::stoi(m[1]), "POST", m[2], m[3], 20000, &error);
  ASSERT_TRUE(r.has_value()) << error;
  ASSERT_EQ(r->status, 200) << r->body;
  auto j = nlohmann::json::parse(r->body);
  ASSERT_EQ(j["predictions"].size(), 1u) << r->body;
  EXPECT_GT(j["predictions"][0].get<double>(), 0.0);
  EXPECT_LT(j["predictions"][0].get<double>(), 1.0);
  child->Signal(SIGINT);
  EXPECT_EQ(child->Wait(std::chrono::seconds(30)), std::optional<int>(0));
}

}  // namespace
}  // namespace brook
