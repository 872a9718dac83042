#include "ps/client/local_ps_client.h"

#include <gtest/gtest.h>

#include "sharding/sharding.h"
#include "tests/testing/ps_rpc_testing.h"

namespace brook::ps {
namespace {

using testing::CounterTable;

TEST(LocalPsClientTest, PushesCarryClientIdAndIncreasingSequences) {
  ParameterServer shard(ParameterServerOptions{});
  LocalPsClient client({&shard}, /*client_id=*/5);
  EXPECT_EQ(client.client_id(), 5u);
  BROOK_ASSERT_OK(client.CreateTable(CounterTable("emb", 2)));
  BROOK_ASSERT_OK(client.Push("emb", std::vector<uint64_t>{1}, std::vector<float>{-1, -1}, 0));
  BROOK_ASSERT_OK(client.Push("emb", std::vector<uint64_t>{1}, std::vector<float>{-1, -1}, 1));
  // Sequences 1 and 2 of client 5 were used: replaying them is a duplicate,
  // sequence 3 is fresh.
  PushContext ctx;
  ctx.client_id = 5;
  for (uint64_t seq : {1, 2}) {
    ctx.sequence = seq;
    auto outcome = shard.Push("emb", std::vector<uint64_t>{1}, std::vector<float>{-1, -1}, ctx);
    ASSERT_TRUE(outcome.ok());
    EXPECT_EQ(*outcome, PushOutcome::kDuplicate) << seq;
  }
  ctx.sequence = 3;
  auto outcome = shard.Push("emb", std::vector<uint64_t>{1}, std::vector<float>{-1, -1}, ctx);
  ASSERT_TRUE(outcome.ok());
  EXPECT_EQ(*outcome, PushOutcome::kApplied);
  std::vector<float> row(2);
  BROOK_ASSERT_OK(client.Pull("emb", std::vector<uint64_t>{1}, absl::MakeSpan(row)));
  EXPECT_EQ(row, (std::vector<float>{3, 3}));
}

TEST(LocalPsClientTest, TwoClientsGetDifferentRandomIds) {
  ParameterServer shard(ParameterServerOptions{});
  LocalPsClient a({&shard}), b({&shard});
  EXPECT_NE(a.client_id(), 0u);
  EXPECT_NE(a.client_id(), b.client_id());
}

TEST(LocalPsClientTest, ErrorsNameTheShard) {
  ParameterServerOptions o0, o1;
  o1.shard_index = 1;
  o0.num_shards = o1.num_shards = 2;
  ParameterServer s0(o0), s1(o1);
  LocalPsClient client({&s0, &s1});
  std::vector<float> out(4 * 8);
  std::vector<uint64_t> keys = {1, 2, 3, 4, 5, 6, 7, 8};
  absl::Status st = client.Pull("missing", keys, absl::MakeSpan(out));
  EXPECT_EQ(st.code(), absl::StatusCode::kNotFound);
  EXPECT_NE(st.message().find("PS shard "), absl::string_view::npos) << st;
}

TEST(InferDimTest, ChecksKeysTimesDim) {
  EXPECT_EQ(*InferDim("t", 3, 12, "pull"), 4u);
  EXPECT_EQ(*InferDim("t", 0, 0, "pull"), 0u);
  EXPECT_EQ(InferDim("t", 0, 4, "pull").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InferDim("t", 3, 13, "push").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(InferDim("t", 3, 0, "push").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace brook::ps
