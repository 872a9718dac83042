#include "chief/client/cluster_spec.h"
#include "tests/testing/test_util.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <optional>
#include <string>

namespace brook::chief {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

constexpr char kKubeflowConfig[] = R"({
  "cluster": {
    "chief": ["mnist-chief-0.default.svc:2222"],
    "ps": ["mnist-ps-0.default.svc:2222", "mnist-ps-1.default.svc:2222"],
    "worker": ["mnist-worker-0.default.svc:2222", "mnist-worker-1.default.svc:2222",
               "mnist-worker-2.default.svc:2222"],
    "evaluator": ["mnist-evaluator-0.default.svc:2222"]
  },
  "task": {"type": "worker", "index": 1},
  "environment": "cloud"
})";

TEST(ParseTfConfigTest, KubeflowTfJobConfig) {
  absl::StatusOr<ClusterSpec> spec = ParseTfConfig(kKubeflowConfig);
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->chief, "mnist-chief-0.default.svc:2222");
  EXPECT_THAT(spec->ps, ElementsAre("mnist-ps-0.default.svc:2222", "mnist-ps-1.default.svc:2222"));
  EXPECT_EQ(spec->trainers.size(), 3u);
  EXPECT_EQ(spec->trainers[2], "mnist-worker-2.default.svc:2222");
  EXPECT_EQ(spec->task_type, "worker");
  EXPECT_EQ(spec->task_index, 1);
}

TEST(ParseTfConfigTest, MasterIsTheChief) {
  absl::StatusOr<ClusterSpec> spec = ParseTfConfig(
      R"({"cluster": {"master": ["m:2222"], "ps": ["p:2222"]},
          "task": {"type": "master", "index": 0}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->chief, "m:2222");
  EXPECT_EQ(spec->task_type, "chief");
  EXPECT_EQ(spec->task_index, 0);
  EXPECT_THAT(spec->trainers, IsEmpty());
}

TEST(ParseTfConfigTest, NoTaskLeavesItUnset) {
  absl::StatusOr<ClusterSpec> spec = ParseTfConfig(R"({"cluster": {"ps": ["p:1"]}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->chief, "");
  EXPECT_EQ(spec->task_type, "");
  EXPECT_EQ(spec->task_index, -1);
}

TEST(ParseTfConfigTest, EvaluatorTaskIsAccepted) {
  absl::StatusOr<ClusterSpec> spec = ParseTfConfig(
      R"({"cluster": {"chief": ["c:1"], "evaluator": ["e:1"]},
          "task": {"type": "evaluator", "index": 0}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->task_type, "evaluator");
}

// The job CLI under a worker task needs only cluster.chief.
TEST(ParseTfConfigTest, AWorkerTaskWithoutAWorkerListIsAccepted) {
  absl::StatusOr<ClusterSpec> spec = ParseTfConfig(
      R"({"cluster": {"chief": ["c:2222"]}, "task": {"type": "worker", "index": 0}})");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->chief, "c:2222");
  EXPECT_EQ(spec->task_type, "worker");
}

TEST(ParseTfConfigTest, ErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* field;
  };
  const Case cases[] = {
      {"not json", "not a JSON object"},
      {"[1]", "not a JSON object"},
      {R"({"task": {"type": "worker"}})", "cluster: missing"},
      {R"({"cluster": []})", "cluster: must be an object"},
      {R"({"cluster": {"ps": "p:1"}})", "cluster.ps: must be a list"},
      {R"({"cluster": {"ps": ["p:1", "p"]}})", "cluster.ps[1]: \"p\""},
      {R"({"cluster": {"ps": ["p:1", 7]}})", "cluster.ps[1]: must be a \"host:port\" string"},
      {R"({"cluster": {"worker": ["w:0"]}})", "cluster.worker[0]: \"w:0\": port"},
      {R"({"cluster": {"chief": ["a:1", "b:1"]}})", "cluster.chief: has 2 entries"},
      {R"({"cluster": {"chief": ["a:1"], "master": ["b:1"]}})", "cluster.master"},
      {R"({"cluster": {"trainer": ["a:1"]}})", "cluster.trainer: unknown role"},
      {R"({"cluster": {}, "task": 3})", "task: must be an object"},
      {R"({"cluster": {}, "task": {"index": 0}})", "task.type"},
      {R"({"cluster": {}, "task": {"type": "boss", "index": 0}})", "task.type: \"boss\""},
      {R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": -1}})",
       "task.index: must be an integer >= 0"},
      {R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": "0"}})",
       "task.index"},
      {R"({"cluster": {"worker": ["w:1"]}, "task": {"type": "worker", "index": 1}})",
       "task.index: 1 is out of range: cluster.worker has 1 entries"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<ClusterSpec> spec = ParseTfConfig(c.json);
    ASSERT_FALSE(spec.ok()) << c.json;
    EXPECT_TRUE(absl::IsInvalidArgument(spec.status())) << spec.status();
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr("TF_CONFIG: ")) << c.json;
    EXPECT_THAT(std::string(spec.status().message()), HasSubstr(c.field)) << c.json;
  }
}

TEST(ValidateAddressTest, AcceptsHostPortForms) {
  for (const char* ok : {"127.0.0.1:2222", "localhost:1", "brook-ps-0.brook-ps.ns.svc:65535",
                         "[::1]:8080", "[fe80::1]:1", "under_score:80"}) {
    EXPECT_TRUE(ValidateAddress(ok).ok()) << ok << ": " << ValidateAddress(ok);
  }
  for (const char* bad :
       {"", "host", ":80", "host:", "host:0", "host:65536", "host:8o", "host:123456", "[::1]",
        "[::1]80", "[]:80", "[zz]:80", "ho st:80", "h/x:80", "host:-1"}) {
    EXPECT_FALSE(ValidateAddress(bad).ok()) << bad;
  }
}

TEST(ParseAddressListTest, SplitsTrimsAndValidates) {
  absl::StatusOr<std::vector<std::string>> list = ParseAddressList(" a:1, b:2 ,[::1]:3");
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_THAT(*list, ElementsAre("a:1", "b:2", "[::1]:3"));
  list = ParseAddressList("");
  ASSERT_TRUE(list.ok());
  EXPECT_THAT(*list, IsEmpty());
}

TEST(ParseAddressListTest, ErrorNamesTheBadEntry) {
  absl::StatusOr<std::vector<std::string>> list = ParseAddressList("a:1,b:99999,c:3");
  ASSERT_FALSE(list.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(list.status()));
  EXPECT_THAT(std::string(list.status().message()), HasSubstr("entry 1"));
  EXPECT_THAT(std::string(list.status().message()), HasSubstr("\"b:99999\""));
  EXPECT_THAT(std::string(list.status().message()), HasSubstr("1..65535"));

  list = ParseAddressList("a:1,,c:3");
  ASSERT_FALSE(list.ok());
  EXPECT_THAT(std::string(list.status().message()), HasSubstr("entry 1 is empty"));
}

TEST(HeadlessServiceAddressesTest, StatefulSetPodNames) {
  EXPECT_THAT(HeadlessServiceAddresses("brook-ps", "brook-ps", "ml", 3, 2222),
              ElementsAre("brook-ps-0.brook-ps.ml.svc.cluster.local:2222",
                          "brook-ps-1.brook-ps.ml.svc.cluster.local:2222",
                          "brook-ps-2.brook-ps.ml.svc.cluster.local:2222"));
  EXPECT_THAT(HeadlessServiceAddresses("ps", "ps-headless", "ns", 1, 80, "corp.example"),
              ElementsAre("ps-0.ps-headless.ns.svc.corp.example:80"));
  EXPECT_THAT(HeadlessServiceAddresses("ps", "ps", "ns", 0, 80), IsEmpty());
}

TEST(ClusterFromEnvironmentTest, ReadsTfConfig) {
  {
    testing::ScopedEnv tf("TF_CONFIG", std::nullopt);
    EXPECT_TRUE(absl::IsNotFound(ClusterFromEnvironment().status()));
  }
  testing::ScopedEnv tf("TF_CONFIG", kKubeflowConfig);
  absl::StatusOr<ClusterSpec> spec = ClusterFromEnvironment();
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->ps.size(), 2u);
}

TEST(ChiefAddressTest, FlagThenEnvThenTfConfig) {
  testing::ScopedEnv env("BROOK_CHIEF", "env-chief:7000");
  testing::ScopedEnv tf("TF_CONFIG", kKubeflowConfig);
  EXPECT_EQ(ChiefAddress("flag-chief:7001").value(), "flag-chief:7001");
  EXPECT_EQ(ChiefAddress("").value(), "env-chief:7000");
  {
    testing::ScopedEnv no_env("BROOK_CHIEF", std::nullopt);
    EXPECT_EQ(ChiefAddress("").value(), "mnist-chief-0.default.svc:2222");
    testing::ScopedEnv empty_env("BROOK_CHIEF", "");
    EXPECT_EQ(ChiefAddress("").value(), "mnist-chief-0.default.svc:2222");
  }
}

TEST(ChiefAddressTest, NoneSaysHowToSetIt) {
  testing::ScopedEnv env("BROOK_CHIEF", std::nullopt);
  testing::ScopedEnv tf("TF_CONFIG", std::nullopt);
  absl::StatusOr<std::string> address = ChiefAddress("");
  ASSERT_FALSE(address.ok());
  EXPECT_TRUE(absl::IsNotFound(address.status()));
  EXPECT_THAT(std::string(address.status().message()), HasSubstr("--chief"));
  EXPECT_THAT(std::string(address.status().message()), HasSubstr("BROOK_CHIEF"));

  // A TF_CONFIG without a chief gives the same answer.
  testing::ScopedEnv tf_ps_only("TF_CONFIG", R"({"cluster": {"ps": ["p:1"]}})");
  EXPECT_TRUE(absl::IsNotFound(ChiefAddress("").status()));
}

TEST(ChiefAddressTest, BadAddressNamesItsSource) {
  testing::ScopedEnv tf("TF_CONFIG", std::nullopt);
  absl::StatusOr<std::string> address = ChiefAddress("nohost");
  ASSERT_FALSE(address.ok());
  EXPECT_THAT(std::string(address.status().message()), HasSubstr("--chief: \"nohost\""));
  {
    testing::ScopedEnv env("BROOK_CHIEF", "h:0");
    address = ChiefAddress("");
    ASSERT_FALSE(address.ok());
    EXPECT_THAT(std::string(address.status().message()), HasSubstr("BROOK_CHIEF: \"h:0\""));
  }
  testing::ScopedEnv env("BROOK_CHIEF", std::nullopt);
  testing::ScopedEnv bad_tf("TF_CONFIG", "{");
  address = ChiefAddress("");
  ASSERT_FALSE(address.ok());
  EXPECT_TRUE(absl::IsInvalidArgument(address.status()));
  EXPECT_THAT(std::string(address.status().message()), HasSubstr("TF_CONFIG"));
}

}  // namespace
}  // namespace brook::chief
