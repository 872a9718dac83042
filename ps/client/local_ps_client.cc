#include "ps/client/local_ps_client.h"

#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/client/batch_plan.h"
#include "ps/client/change_follow.h"
#include "ps/client/key_plan.h"
#include "ps/wire/precision.h"
#include "sharding/sharding.h"

namespace brook::ps {
namespace {

absl::Status AtShard(int32_t shard, const absl::Status& st) {
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat("PS shard ", shard, ": ", st.message()));
}

}  // namespace

LocalPsCluster::LocalPsCluster(int num_shards) {
  std::vector<ParameterServer*> raw;
  for (int i = 0; i < num_shards; ++i) {
    ParameterServerOptions o;
    o.shard_index = i;
    o.num_shards = num_shards;
    shards.push_back(std::make_unique<ParameterServer>(o));
    raw.push_back(shards.back().get());
  }
  client = std::make_unique<LocalPsClient>(std::move(raw));
}

LocalPsClient::LocalPsClient(std::vector<ParameterServer*> shards, uint64_t client_id)
    : PsClient(static_cast<int32_t>(shards.size()), client_id), shards_(std::move(shards)) {}

absl::Status LocalPsClient::CreateTable(const TableOptions& options) {
  for (size_t s = 0; s < shards_.size(); ++s) {
    RETURN_IF_ERROR(AtShard(s, shards_[s]->CreateTable(options)));
  }
  RememberWire(options);
  return absl::OkStatus();
}

absl::StatusOr<DroppedTables> LocalPsClient::DropTablesWithPrefix(std::string_view prefix) {
  DroppedTables sum;
  for (size_t s = 0; s < shards_.size(); ++s) {
    absl::StatusOr<DroppedTables> d = shards_[s]->DropTablesWithPrefix(prefix);
    if (!d.ok()) return AtShard(s, d.status());
    sum.tables += d->tables;
    sum.dense += d->dense;
  }
  return sum;
}

absl::Status LocalPsClient::DropTable(std::string_view table) {
  size_t not_found = 0;
  for (size_t s = 0; s < shards_.size(); ++s) {
    absl::Status st = shards_[s]->DropTable(table);
    if (absl::IsNotFound(st)) {
      ++not_found;
    } else if (!st.ok()) {
      return AtShard(s, st);
    }
  }
  if (not_found == shards_.size()) {
    return absl::NotFoundError(absl::StrCat("no table '", std::string(table), "' on any shard"));
  }
  return absl::OkStatus();
}

absl::Status LocalPsClient::Pull(std::string_view table, absl::Span<const uint64_t> keys,
                                 absl::Span<float> out) {
  ASSIGN_OR_RETURN(size_t dim, InferDim(table, keys.size(), out.size(), "pull"));
  if (keys.empty()) return absl::OkStatus();
  const WirePrecision precision = WireOf(table);
  KeyPlan plan(sharding::TableId(table), keys, num_shards());
  std::vector<std::vector<float>> rows(shards_.size());
  std::vector<absl::Span<const float>> views(shards_.size());
  for (int32_t s = 0; s < num_shards(); ++s) {
    absl::Span<const uint64_t> shard_keys = plan.shard_keys(s);
    if (shard_keys.empty()) continue;
    rows[s].resize(shard_keys.size() * dim);
    RETURN_IF_ERROR(AtShard(s, shards_[s]->Pull(table, shard_keys, absl::MakeSpan(rows[s]))));
    wire::RoundTrip(precision, absl::MakeSpan(rows[s]));
    views[s] = rows[s];
  }
  plan.ExpandRows(views, dim, out);
  CountPull(plan.num_unique(), plan.num_unique() * dim, precision);
  return absl::OkStatus();
}

absl::Status LocalPsClient::Push(std::string_view table, absl::Span<const uint64_t> keys,
                                 absl::Span<const float> grads, int64_t step) {
  ASSIGN_OR_RETURN(size_t dim, InferDim(table, keys.size(), grads.size(), "push"));
  if (keys.empty()) return absl::OkStatus();
  KeyPlan plan(sharding::TableId(table), keys, num_shards());
  std::vector<std::vector<float>> shard_grads(shards_.size());
  std::vector<absl::Span<float>> views(shards_.size());
  for (int32_t s = 0; s < num_shards(); ++s) {
    shard_grads[s].resize(plan.shard_keys(s).size() * dim);
    views[s] = absl::MakeSpan(shard_grads[s]);
  }
  plan.SumGradients(grads, dim, views);
  const WirePrecision precision = WireOf(table);
  for (int32_t s = 0; s < num_shards(); ++s) {
    if (plan.shard_keys(s).empty()) continue;
    wire::RoundTrip(precision, views[s]);
    PushContext ctx;
    ctx.client_id = client_id();
    ctx.sequence = NextSequence();
    ctx.step = step;
    absl::StatusOr<PushOutcome> outcome =
        shards_[s]->Push(table, plan.shard_keys(s), shard_grads[s], ctx);
    RETURN_IF_ERROR(AtShard(s, outcome.status()));
  }
  CountPush(plan.num_unique(), plan.num_unique() * dim, precision);
  return absl::OkStatus();
}

absl::Status LocalPsClient::CreateDense(absl::Span<const DenseOptions> variables) {
  ASSIGN_OR_RETURN(std::vector<int32_t> placement, dense_.Place(variables, num_shards()));
  for (size_t i = 0; i < variables.size(); ++i) {
    RETURN_IF_ERROR(AtShard(placement[i], shards_[placement[i]]->CreateDense(variables[i])));
  }
  return absl::OkStatus();
}

absl::Status LocalPsClient::LocateDense(absl::Span<const DenseOptions> variables) {
  return dense_.Place(variables, num_shards()).status();
}

absl::Status LocalPsClient::PullDense(std::string_view name, absl::Span<float> out) {
  ASSIGN_OR_RETURN(DenseDirectory::Entry e, dense_.Find(name));
  if (out.size() != e.num_floats) {
    return absl::InvalidArgumentError(absl::StrCat("dense pull of '", std::string(name), "' into ",
                                                   out.size(), " floats; the variable has ",
                                                   e.num_floats));
  }
  return AtShard(e.shard, shards_[e.shard]->PullDense(name, out));
}

absl::Status LocalPsClient::PushDense(std::string_view name, absl::Span<const float> grads,
                                      int64_t step) {
  ASSIGN_OR_RETURN(DenseDirectory::Entry e, dense_.Find(name));
  if (grads.size() != e.num_floats) {
    return absl::InvalidArgumentError(absl::StrCat("dense push to '", std::string(name), "' of ",
                                                   grads.size(), " floats; the variable has ",
                                                   e.num_floats));
  }
  PushContext ctx;
  ctx.client_id = client_id();
  ctx.sequence = NextSequence();
  ctx.step = step;
  return AtShard(e.shard, shards_[e.shard]->PushDense(name, grads, ctx).status());
}

absl::Status LocalPsClient::PullBatch(absl::Span<const TablePull> tables,
                                      absl::Span<const DensePull> dense) {
  ASSIGN_OR_RETURN(BatchPlan bp, BatchPlan::ForPull(tables, dense, dense_, num_shards()));
  // rows[i][s]: table i's rows from shard s, in that shard's key order.
  std::vector<std::vector<std::vector<float>>> rows(tables.size());
  std::vector<std::vector<TablePull>> shard_tables(shards_.size());
  std::vector<std::vector<DensePull>> shard_dense(shards_.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const KeyPlan* plan = bp.plan(i);
    if (plan == nullptr) continue;
    rows[i].resize(shards_.size());
    for (int32_t s = 0; s < num_shards(); ++s) {
      absl::Span<const uint64_t> keys = plan->shard_keys(s);
      if (keys.empty()) continue;
      rows[i][s].resize(keys.size() * bp.dim(i));
      shard_tables[s].push_back({tables[i].table, keys, absl::MakeSpan(rows[i][s])});
    }
  }
  for (size_t d = 0; d < dense.size(); ++d) shard_dense[bp.dense_shard(d)].push_back(dense[d]);
  for (int32_t s = 0; s < num_shards(); ++s) {
    if (shard_tables[s].empty() && shard_dense[s].empty()) continue;
    RETURN_IF_ERROR(AtShard(s, shards_[s]->PullBatch(shard_tables[s], shard_dense[s])));
  }
  std::vector<absl::Span<const float>> views(shards_.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const KeyPlan* plan = bp.plan(i);
    if (plan == nullptr) continue;
    const WirePrecision precision = WireOf(tables[i].table);
    for (int32_t s = 0; s < num_shards(); ++s) {
      wire::RoundTrip(precision, absl::MakeSpan(rows[i][s]));
      views[s] = rows[i][s];
    }
    plan->ExpandRows(views, bp.dim(i), tables[i].out);
    CountPull(plan->num_unique(), plan->num_unique() * bp.dim(i), precision);
  }
  return absl::OkStatus();
}

absl::Status LocalPsClient::PushBatch(absl::Span<const TablePush> tables,
                                      absl::Span<const DensePush> dense, int64_t step,
                                      float learning_rate_scale, const PushStream& stream) {
  RETURN_IF_ERROR(CheckPushScale(learning_rate_scale));
  PartSequences sequences(this, stream);
  ASSIGN_OR_RETURN(BatchPlan bp, BatchPlan::ForPush(tables, dense, dense_, num_shards()));
  // sums[i][s]: table i's summed gradients for shard s's keys.
  std::vector<std::vector<std::vector<float>>> sums(tables.size());
  std::vector<absl::Span<float>> views(shards_.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const KeyPlan* plan = bp.plan(i);
    if (plan == nullptr) continue;
    sums[i].resize(shards_.size());
    for (int32_t s = 0; s < num_shards(); ++s) {
      sums[i][s].resize(plan->shard_keys(s).size() * bp.dim(i));
      views[s] = absl::MakeSpan(sums[i][s]);
    }
    plan->SumGradients(tables[i].grads, bp.dim(i), views);
    const WirePrecision precision = WireOf(tables[i].table);
    for (int32_t s = 0; s < num_shards(); ++s) wire::RoundTrip(precision, views[s]);
    CountPush(plan->num_unique(), plan->num_unique() * bp.dim(i), precision);
  }
  std::vector<std::vector<TablePushPart>> shard_tables(shards_.size());
  std::vector<std::vector<DensePushPart>> shard_dense(shards_.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const KeyPlan* plan = bp.plan(i);
    if (plan == nullptr) continue;
    for (int32_t s = 0; s < num_shards(); ++s) {
      if (plan->shard_keys(s).empty()) continue;
      ASSIGN_OR_RETURN(const uint64_t sequence, sequences.Next(s));
      shard_tables[s].push_back({tables[i].table, plan->shard_keys(s), sums[i][s], sequence});
    }
  }
  for (size_t d = 0; d < dense.size(); ++d) {
    ASSIGN_OR_RETURN(const uint64_t sequence, sequences.Next(bp.dense_shard(d)));
    shard_dense[bp.dense_shard(d)].push_back({dense[d].name, dense[d].grads, sequence});
  }
  PushContext ctx;
  ctx.client_id = client_id();
  ctx.stream_id = stream.id;
  ctx.step = step;
  ctx.learning_rate_scale = learning_rate_scale;
  for (int32_t s = 0; s < num_shards(); ++s) {
    if (shard_tables[s].empty() && shard_dense[s].empty()) continue;
    RETURN_IF_ERROR(
        AtShard(s, shards_[s]->PushBatch(shard_tables[s], shard_dense[s], ctx).status()));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<ServerStats>> LocalPsClient::Stats() {
  std::vector<ServerStats> out;
  out.reserve(shards_.size());
  for (ParameterServer* ps : shards_) out.push_back(ps->Stats());
  return out;
}

absl::StatusOr<std::vector<CheckpointInfo>> LocalPsClient::Checkpoint(
    const CheckpointOptions& options) {
  std::vector<CheckpointInfo> out;
  for (ParameterServer* ps : shards_) {
    ASSIGN_OR_RETURN(CheckpointInfo info, ps->Checkpoint(options));
    out.push_back(std::move(info));
  }
  return out;
}

absl::StatusOr<std::vector<RestoreInfo>> LocalPsClient::Restore(const std::string& dir) {
  std::vector<RestoreInfo> out;
  for (ParameterServer* ps : shards_) {
    ASSIGN_OR_RETURN(RestoreInfo info, ps->Restore(dir));
    out.push_back(info);
  }
  return out;
}

absl::StatusOr<std::vector<ImportInfo>> LocalPsClient::ImportTables(const ImportOptions& options) {
  std::vector<ImportInfo> out;
  for (ParameterServer* ps : shards_) {
    ASSIGN_OR_RETURN(ImportInfo info, ps->ImportTables(options));
    out.push_back(std::move(info));
  }
  return out;
}

absl::StatusOr<std::vector<StartupInfo>> LocalPsClient::FenceClients(
    absl::Span<const uint64_t> client_ids) {
  std::vector<StartupInfo> out;
  for (ParameterServer* ps : shards_) {
    ps->FenceClients(client_ids);
    out.push_back(ps->startup());
  }
  return out;
}

absl::StatusOr<ChangeSet> LocalPsClient::ChangesSince(std::string_view prefix,
                                                      const ChangeCursor& cursor,
                                                      uint64_t max_keys_per_shard) {
  auto read = [&](absl::Span<const ShardChangeAsk> asks,
                  bool head_only) -> absl::StatusOr<std::vector<absl::StatusOr<ShardChanges>>> {
    std::vector<absl::StatusOr<ShardChanges>> out;
    for (const ShardChangeAsk& ask : asks) {
      const ParameterServer& ps = *shards_[ask.shard];
      if (head_only) {
        if (ps.options().change_log_bytes == 0) {
          // As ChangesSince says it, for the same answer in both cases.
          out.push_back(AtShard(ask.shard, ps.ChangesSince(prefix, 0, 0).status()));
          continue;
        }
        out.push_back(
            ShardChanges{.incarnation = ps.startup().incarnation, .next = ps.ChangeLogHead()});
        continue;
      }
      absl::StatusOr<Changes> c = ps.ChangesSince(prefix, ask.since, max_keys_per_shard);
      if (!c.ok()) {
        out.push_back(AtShard(ask.shard, c.status()));
        continue;
      }
      out.push_back(ShardChanges{.incarnation = c->incarnation,
                                 .next = c->next,
                                 .more = c->more,
                                 .tables = std::move(c->tables),
                                 .dense = std::move(c->dense)});
    }
    return out;
  };
  return FollowChanges(num_shards(), prefix, cursor, kMaxChangeRounds, read);
}

absl::Status LocalPsClient::ScanRows(std::string_view table, const ChunkFn& chunk) {
  for (size_t s = 0; s < shards_.size(); ++s) {
    RETURN_IF_ERROR(AtShard(s, shards_[s]->ScanRows(table, kScanChunkRows, chunk)));
  }
  return absl::OkStatus();
}

}  // namespace brook::ps
