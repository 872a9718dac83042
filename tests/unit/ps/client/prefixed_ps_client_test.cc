// PrefixedPsClient over a real in-process cluster (two shards): every call
// reaches the PS under "<prefix><name>", two prefixes on the same PS never
// share rows or variables, and whole-shard calls pass through.
#include "ps/client/prefixed_ps_client.h"

#include <gtest/gtest.h>

#include <vector>

#include "ps/client/local_ps_client.h"
#include "tests/testing/ps_rpc_testing.h"
#include "tests/testing/test_util.h"

namespace brook::ps {
namespace {

using testing::CounterDense;
using testing::CounterTable;

TEST(PrefixedPsClientTest, TablesLiveUnderThePrefixedName) {
  LocalPsCluster cluster(2);
  PrefixedPsClient job(cluster.client.get(), "job-a/");
  EXPECT_EQ(job.num_shards(), 2);
  EXPECT_EQ(job.client_id(), cluster.client->client_id());
  BROOK_ASSERT_OK(job.CreateTable(CounterTable("emb", 2)));
  const std::vector<uint64_t> keys = {1, 2, 3, 1};
  BROOK_ASSERT_OK(job.Push("emb", keys, std::vector<float>(8, -1.0f), 0));

  // The inner client sees the table only under the prefixed name.
  std::vector<float> rows(8);
  BROOK_EXPECT_CODE(cluster.client->Pull("emb", keys, absl::MakeSpan(rows)),
                    absl::StatusCode::kNotFound);
  BROOK_ASSERT_OK(cluster.client->Pull("job-a/emb", keys, absl::MakeSpan(rows)));
  EXPECT_EQ(rows, (std::vector<float>{2, 2, 1, 1, 1, 1, 2, 2}));
  std::vector<float> via_job(8);
  BROOK_ASSERT_OK(job.Pull("emb", keys, absl::MakeSpan(via_job)));
  EXPECT_EQ(via_job, rows);

  auto stats = job.Stats();  // whole shards, PS names
  BROOK_ASSERT_OK(stats);
  ASSERT_EQ(stats->size(), 2u);
  ASSERT_EQ((*stats)[0].tables.size(), 1u);
  EXPECT_EQ((*stats)[0].tables[0].name, "job-a/emb");

  BROOK_ASSERT_OK(job.DropTable("emb"));
  BROOK_EXPECT_CODE(cluster.client->Pull("job-a/emb", keys, absl::MakeSpan(rows)),
                    absl::StatusCode::kNotFound);
}

TEST(PrefixedPsClientTest, TwoPrefixesDoNotShareRowsOrVariables) {
  LocalPsCluster cluster(2);
  PrefixedPsClient a(cluster.client.get(), "a/");
  PrefixedPsClient b(cluster.client.get(), "b/");
  for (PrefixedPsClient* c : {&a, &b}) {
    BROOK_ASSERT_OK(c->CreateTable(CounterTable("emb", 1)));
    const std::vector<DenseOptions> dense = {CounterDense("w", {3}), CounterDense("bias", {1})};
    BROOK_ASSERT_OK(c->CreateDense(dense));
  }
  const std::vector<uint64_t> keys = {7, 8};
  BROOK_ASSERT_OK(a.Push("emb", keys, std::vector<float>{-1, -2}, 0));
  BROOK_ASSERT_OK(b.Push("emb", keys, std::vector<float>{-10, -20}, 0));
  BROOK_ASSERT_OK(a.PushDense("w", std::vector<float>{-1, -1, -1}, 0));
  BROOK_ASSERT_OK(b.PushDense("w", std::vector<float>{-5, -5, -5}, 0));

  std::vector<float> ra(2), rb(2), wa(3), wb(3);
  BROOK_ASSERT_OK(a.Pull("emb", keys, absl::MakeSpan(ra)));
  BROOK_ASSERT_OK(b.Pull("emb", keys, absl::MakeSpan(rb)));
  EXPECT_EQ(ra, (std::vector<float>{1, 2}));
  EXPECT_EQ(rb, (std::vector<float>{10, 20}));
  BROOK_ASSERT_OK(a.PullDense("w", absl::MakeSpan(wa)));
  BROOK_ASSERT_OK(b.PullDense("w", absl::MakeSpan(wb)));
  EXPECT_EQ(wa, (std::vector<float>{1, 1, 1}));
  EXPECT_EQ(wb, (std::vector<float>{5, 5, 5}));
  std::vector<float> inner(3);
  BROOK_ASSERT_OK(cluster.client->PullDense("b/w", absl::MakeSpan(inner)));
  EXPECT_EQ(inner, wb);
}

TEST(PrefixedPsClientTest, BatchesArePrefixedPerPart) {
  LocalPsCluster cluster(2);
  PrefixedPsClient job(cluster.client.get(), "j/");
  BROOK_ASSERT_OK(job.CreateTable(CounterTable("user", 2)));
  BROOK_ASSERT_OK(job.CreateTable(CounterTable("item", 1)));
  const std::vector<DenseOptions> dense = {CounterDense("mlp/w0", {2, 2})};
  BROOK_ASSERT_OK(job.CreateDense(dense));

  const std::vector<uint64_t> users = {1, 2}, items = {3};
  const std::vector<float> ug = {-1, -1, -2, -2}, ig = {-3}, wg = {-1, -2, -3, -4};
  const std::vector<TablePush> pushes = {{"user", users, ug}, {"item", items, ig}};
  const std::vector<DensePush> dense_pushes = {{"mlp/w0", wg}};
  BROOK_ASSERT_OK(job.PushBatch(pushes, dense_pushes, 0, 1.0f));

  std::vector<float> u(4), i(1), w(4);
  const std::vector<TablePull> pulls = {{"user", users, absl::MakeSpan(u)},
                                        {"item", items, absl::MakeSpan(i)}};
  const std::vector<DensePull> dense_pulls = {{"mlp/w0", absl::MakeSpan(w)}};
  BROOK_ASSERT_OK(job.PullBatch(pulls, dense_pulls));
  EXPECT_EQ(u, (std::vector<float>{1, 1, 2, 2}));
  EXPECT_EQ(i, (std::vector<float>{3}));
  EXPECT_EQ(w, (std::vector<float>{1, 2, 3, 4}));

  std::vector<float> inner_item(1);
  BROOK_ASSERT_OK(cluster.client->Pull("j/item", items, absl::MakeSpan(inner_item)));
  EXPECT_EQ(inner_item, i);
  // A part naming a table the job lacks is the PS's NOT_FOUND, with the
  // name the PS knows.
  const std::vector<TablePull> missing = {{"nope", items, absl::MakeSpan(i)}};
  absl::Status st = job.PullBatch(missing, {});
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound) << st;
  EXPECT_NE(st.message().find("j/nope"), absl::string_view::npos) << st;
}

TEST(PrefixedPsClientTest, CheckpointAndRestorePassThroughWholeShards) {
  testing::TempDir dir;
  LocalPsCluster cluster(1);
  PrefixedPsClient a(cluster.client.get(), "a/");
  BROOK_ASSERT_OK(a.CreateTable(CounterTable("emb", 1)));
  BROOK_ASSERT_OK(cluster.client->CreateTable(CounterTable("other", 1)));
  BROOK_ASSERT_OK(a.Push("emb", std::vector<uint64_t>{5}, std::vector<float>{-4}, 0));
  CheckpointOptions o;
  o.dir = dir.Join("ckpt");
  auto info = a.Checkpoint(o);
  BROOK_ASSERT_OK(info);
  ASSERT_EQ(info->size(), 1u);
  EXPECT_EQ((*info)[0].rows, 1u);

  LocalPsCluster fresh(1);
  PrefixedPsClient a2(fresh.client.get(), "a/");
  BROOK_ASSERT_OK(a2.Restore(dir.Join("ckpt")));
  std::vector<float> row(1);
  BROOK_ASSERT_OK(a2.Pull("emb", std::vector<uint64_t>{5}, absl::MakeSpan(row)));
  EXPECT_EQ(row[0], 4.0f);
  auto stats = fresh.client->Stats();
  BROOK_ASSERT_OK(stats);
  EXPECT_EQ((*stats)[0].tables.size(), 2u);  // the other table came too
}

}  // namespace
}  // namespace brook::ps
