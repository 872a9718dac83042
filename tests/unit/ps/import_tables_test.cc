// ParameterServer::ImportTables: a job's warm start (init_from) from another
// job's checkpoint. Real files, real RocksDB for the restart case.
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "ps/parameter_server.h"
#include "sharding/sharding.h"
#include "tests/testing/test_util.h"
#include "tests/unit/ps/ps_test_util.h"

namespace brook::ps {
namespace {

using test::Dump;
using Rows = std::map<uint64_t, std::vector<float>>;

TableOptions Table(const std::string& name, int dim, OptimizerKind kind) {
  TableOptions t;
  t.name = name;
  t.dim = dim;
  t.seed = 7;
  t.initializer.kind = InitializerKind::kUniform;
  t.optimizer.kind = kind;
  t.optimizer.learning_rate = 0.05f;
  return t;
}

DenseOptions Dense(const std::string& name, int64_t n, OptimizerKind kind) {
  DenseOptions d;
  d.name = name;
  d.shape = {n};
  d.seed = 3;
  d.optimizer.kind = kind;
  d.optimizer.learning_rate = 0.1f;
  return d;
}

// A finished job "old-job": tables emb (adam, dim 8) and wide (sgd, dim 1),
// dense variable w (adagrad), trained a little; another job's table beside
// them. Its checkpoint (table_prefix "old-job/") is written to `dir`.
class ImportTablesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ParameterServer src(ParameterServerOptions{});
    PS_ASSERT_OK(src.CreateTable(Table("old-job/emb", 8, OptimizerKind::kAdam)));
    PS_ASSERT_OK(src.CreateTable(Table("old-job/wide", 1, OptimizerKind::kSgd)));
    PS_ASSERT_OK(src.CreateTable(Table("other-job/emb", 8, OptimizerKind::kAdam)));
    PS_ASSERT_OK(src.CreateDense(Dense("old-job/w", 5, OptimizerKind::kAdagrad)));
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 200; ++k) keys.push_back(k * 7919);
    for (const char* t : {"old-job/emb", "other-job/emb"}) {
      std::vector<float> grads(keys.size() * 8);
      for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * static_cast<float>(i % 13);
      PS_ASSERT_OK(src.Push(t, keys, grads, {}));
    }
    std::vector<float> wide(keys.size(), 0.5f);
    PS_ASSERT_OK(src.Push("old-job/wide", keys, wide, {}));
    PS_ASSERT_OK(src.PushDense("old-job/w", {1, 2, 3, 4, 5}, {}));
    CheckpointOptions o;
    o.dir = ckpt_;
    o.table_prefix = "old-job/";
    PS_ASSERT_OK(src.Checkpoint(o));
    emb_ = Dump(src, "old-job/emb");
    wide_ = Dump(src, "old-job/wide");
    dense_.resize(5);
    PS_ASSERT_OK(src.PullDense("old-job/w", absl::MakeSpan(dense_)));
  }

  // A shard of a 2-shard PS with the new job's tables, as Trainer::Setup
  // creates them (dense variable w on shard 1).
  std::unique_ptr<ParameterServer> NewShard(int32_t index, const std::string& data_dir = "") {
    ParameterServerOptions o;
    o.shard_index = index;
    o.num_shards = 2;
    o.data_dir = data_dir;
    absl::StatusOr<std::unique_ptr<ParameterServer>> ps = ParameterServer::Open(o);
    EXPECT_TRUE(ps.ok()) << ps.status();
    EXPECT_TRUE((*ps)->CreateTable(Table("new-job/emb", 8, OptimizerKind::kAdam)).ok());
    EXPECT_TRUE((*ps)->CreateTable(Table("new-job/wide", 1, OptimizerKind::kAdagrad)).ok());
    if (index == 1) {
      EXPECT_TRUE((*ps)->CreateDense(Dense("new-job/w", 5, OptimizerKind::kAdagrad)).ok());
    }
    return std::move(*ps);
  }

  // The source rows the new name's owner `shard` of 2 keeps.
  static Rows Owned(const Rows& rows, const std::string& name, int32_t shard) {
    Rows out;
    for (const auto& [k, v] : rows) {
      if (sharding::ShardForKey(sharding::TableId(name), k, 2) == shard) out.emplace(k, v);
    }
    return out;
  }

  testing::TempDir tmp_;
  const std::string ckpt_ = tmp_.Join("old-job-final");
  Rows emb_, wide_;
  std::vector<float> dense_;
};

TEST_F(ImportTablesTest, OnlyTheNamedTablesComeRenamedWithThisShardsKeysAndSlots) {
  uint64_t rows = 0;
  for (int32_t s = 0; s < 2; ++s) {
    std::unique_ptr<ParameterServer> ps = NewShard(s);
    absl::StatusOr<ImportInfo> info =
        ps->ImportTables({.dir = ckpt_, .names = {"emb", "w"}, .to_prefix = "new-job/"});
    ASSERT_TRUE(info.ok()) << info.status();
    EXPECT_EQ(info->from_prefix, "old-job/");
    const Rows mine = Owned(emb_, "new-job/emb", s);
    EXPECT_FALSE(mine.empty());
    EXPECT_EQ(Dump(*ps, "new-job/emb"), mine);  // weights and Adam's slots
    rows += mine.size();
    EXPECT_TRUE(Dump(*ps, "new-job/wide").empty());  // not named
    ASSERT_EQ(info->parts.size(), s == 1 ? 2u : 1u);
    EXPECT_EQ(info->parts[0].name, "new-job/emb");
    EXPECT_EQ(info->parts[0].rows, mine.size());
    EXPECT_TRUE(info->parts[0].slots);
    // No table of the old job's or anyone else's name appeared.
    for (const TableStats& t : ps->Stats().tables) EXPECT_EQ(t.name.rfind("new-job/", 0), 0u);
    if (s == 1) {
      std::vector<float> w(5);
      PS_ASSERT_OK(ps->PullDense("new-job/w", absl::MakeSpan(w)));
      EXPECT_EQ(w, dense_);
      EXPECT_TRUE(info->parts[1].dense);
    }
  }
  EXPECT_EQ(rows, emb_.size());
}

TEST_F(ImportTablesTest, AnotherOptimizerKindTakesTheWeightsAndStartsItsOwnSlots) {
  std::unique_ptr<ParameterServer> ps = NewShard(0);
  absl::StatusOr<ImportInfo> info =
      ps->ImportTables({.dir = ckpt_, .names = {}, .to_prefix = "new-job/"});
  ASSERT_TRUE(info.ok()) << info.status();
  ASSERT_EQ(info->parts.size(), 2u);  // emb, wide (w is on shard 1)
  EXPECT_EQ(info->parts[1].name, "new-job/wide");
  EXPECT_FALSE(info->parts[1].slots);
  const Rows got = Dump(*ps, "new-job/wide");
  const Rows want = Owned(wide_, "new-job/wide", 0);
  ASSERT_EQ(got.size(), want.size());
  for (const auto& [k, v] : want) {
    ASSERT_EQ(v.size(), 1u);  // sgd: no slots
    ASSERT_EQ(got.at(k).size(), 2u);
    EXPECT_EQ(got.at(k)[0], v[0]);
    EXPECT_EQ(got.at(k)[1], 0.1f);  // Adagrad's initial accumulator
  }
}

TEST_F(ImportTablesTest, ABadSourceOrTargetChangesNothing) {
  std::unique_ptr<ParameterServer> ps = NewShard(1);
  auto untouched = [&] {
    EXPECT_TRUE(Dump(*ps, "new-job/emb").empty());
    EXPECT_TRUE(Dump(*ps, "new-job/wide").empty());
    EXPECT_EQ(ps->Stats().tables.size(), 2u);
  };
  PS_EXPECT_CODE(
      ps->ImportTables({.dir = ckpt_, .names = {"emb", "nope"}, .to_prefix = "new-job/"}),
      absl::StatusCode::kNotFound);
  untouched();
  PS_EXPECT_CODE(
      ps->ImportTables({.dir = tmp_.Join("missing"), .names = {}, .to_prefix = "new-job/"}),
      absl::StatusCode::kNotFound);
  untouched();
  // A target whose dim differs: named, nothing imported (not even emb).
  PS_ASSERT_OK(ps->CreateTable(Table("other/wide", 4, OptimizerKind::kSgd)));
  PS_ASSERT_OK(ps->CreateTable(Table("other/emb", 8, OptimizerKind::kAdam)));
  absl::StatusOr<ImportInfo> dim =
      ps->ImportTables({.dir = ckpt_, .names = {}, .to_prefix = "other/"});
  EXPECT_EQ(dim.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(dim.status().message().find("'wide'"), std::string::npos) << dim.status();
  EXPECT_TRUE(Dump(*ps, "other/emb").empty());
  // A rows file that does not verify: DATA_LOSS before anything changes.
  const std::string rows = ckpt_ + "/shard-00000-of-00001/rows.tfrecord";
  std::filesystem::resize_file(rows, std::filesystem::file_size(rows) - 1);
  PS_EXPECT_CODE(ps->ImportTables({.dir = ckpt_, .names = {}, .to_prefix = "new-job/"}),
                 absl::StatusCode::kDataLoss);
  EXPECT_TRUE(Dump(*ps, "new-job/emb").empty());
}

TEST_F(ImportTablesTest, ARestartOverTheDataDirKeepsTheImportAndLaterPushes) {
  const std::string data = tmp_.Join("ps0");
  Rows after;
  {
    std::unique_ptr<ParameterServer> ps = NewShard(0, data);
    PS_ASSERT_OK(ps->ImportTables({.dir = ckpt_, .names = {"emb"}, .to_prefix = "new-job/"}));
    const Rows mine = Owned(emb_, "new-job/emb", 0);
    const uint64_t key = mine.begin()->first;
    PS_ASSERT_OK(ps->Push("new-job/emb", {key}, std::vector<float>(8, 0.5f), {}));
    after = Dump(*ps, "new-job/emb");
    EXPECT_NE(after, mine);
    EXPECT_EQ(after.size(), mine.size());
  }
  std::unique_ptr<ParameterServer> again = NewShard(0, data);
  EXPECT_EQ(Dump(*again, "new-job/emb"), after);
}

}  // namespace
}  // namespace brook::ps
