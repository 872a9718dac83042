// The job CLI (`brook status/list/cancel/logs`) with the real binary and no
// chief: the exit codes and messages a script relies on (job_exit_codes.h).
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <utility>
#include <vector>

#include "tests/testing/test_util.h"

namespace brook {
namespace {

using testing::BrookBinary;
using testing::RunCommand;

class JobCliTest : public ::testing::Test {
 protected:
  // The child inherits the environment: no chief from it unless a test says.
  void SetUp() override {
    for (const char* name : {"BROOK_CHIEF", "TF_CONFIG"}) {
      if (const char* value = std::getenv(name)) saved_.emplace_back(name, value);
      unsetenv(name);
    }
  }
  void TearDown() override {
    unsetenv("BROOK_CHIEF");
    unsetenv("TF_CONFIG");
    for (const auto& [name, value] : saved_) setenv(name.c_str(), value.c_str(), 1);
  }

 private:
  std::vector<std::pair<std::string, std::string>> saved_;
};

TEST_F(JobCliTest, UnreachableChiefExits4NamingIt) {
  for (const char* cmd : {"status", "cancel", "logs"}) {
    auto r = RunCommand({BrookBinary(), cmd, "x", "--chief", "127.0.0.1:1"}, 60);
    EXPECT_EQ(r.exit_code, 4) << cmd << ": " << r.output;
    EXPECT_NE(r.output.find("chief at 127.0.0.1:1 unreachable"), std::string::npos)
        << cmd << ": " << r.output;
  }
  auto r = RunCommand({BrookBinary(), "status", "x", "--watch", "--chief", "127.0.0.1:1"}, 60);
  EXPECT_EQ(r.exit_code, 4) << r.output;
  // Never reached at all: no minute of retries (that is for a restart).
  for (const char* flag : {"--follow", "--trainer"}) {
    std::vector<std::string> argv = {BrookBinary(), "logs", "x", flag, "--chief", "127.0.0.1:1"};
    if (std::string(flag) == "--trainer") argv.insert(argv.begin() + 4, "trainer-0");
    r = RunCommand(argv, 30);
    EXPECT_EQ(r.exit_code, 4) << flag << ": " << r.output;
    EXPECT_NE(r.output.find("brook logs: chief at 127.0.0.1:1 unreachable"), std::string::npos)
        << r.output;
  }
}

TEST_F(JobCliTest, ChiefFromEnvironment) {
  setenv("BROOK_CHIEF", "127.0.0.1:1", 1);
  auto r = RunCommand({BrookBinary(), "list"}, 60);
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("127.0.0.1:1 unreachable"), std::string::npos) << r.output;
  unsetenv("BROOK_CHIEF");

  setenv("TF_CONFIG", R"({"cluster": {"chief": ["127.0.0.1:1"]}, "task": {"type": "worker"}})", 1);
  r = RunCommand({BrookBinary(), "list", "-o", "json"}, 60);
  EXPECT_EQ(r.exit_code, 4) << r.output;
  EXPECT_NE(r.output.find("127.0.0.1:1 unreachable"), std::string::npos) << r.output;
}

TEST_F(JobCliTest, NoChiefAddressIsAUsageErrorSayingHowToSetIt) {
  auto r = RunCommand({BrookBinary(), "list"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--chief"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("BROOK_CHIEF"), std::string::npos) << r.output;
}

TEST_F(JobCliTest, BadFlagsAreUsageErrors) {
  auto r = RunCommand({BrookBinary(), "status", "--chief", "127.0.0.1:1"}, 60);  // no job
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = RunCommand({BrookBinary(), "list", "--chief", "127.0.0.1:1", "--output", "yaml"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  r = RunCommand(
      {BrookBinary(), "logs", "x", "--follow", "--interval", "0", "--chief", "127.0.0.1:1"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--interval"), std::string::npos) << r.output;
  r = RunCommand({BrookBinary(), "list", "--chief", "no-port"}, 60);
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_NE(r.output.find("--chief: \"no-port\""), std::string::npos) << r.output;
}

}  // namespace
}  // namespace brook
