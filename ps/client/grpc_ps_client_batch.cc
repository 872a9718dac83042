// GrpcPsClient::PullBatch / PushBatch: every table's and dense variable's part
// of a training step packed into one request per shard (a new request only
// when a shard's part passes max_request_bytes), all shards at once through
// Run (retries with the same requests, so a push part keeps its sequence).
#include <algorithm>
#include <cstring>
#include <deque>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/client/batch_plan.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/client/grpc_ps_client_internal.h"
#include "ps/wire/precision.h"
#include "ps/wire/wire.h"

namespace brook::ps {
namespace {

using grpc_client_internal::Done;
using grpc_client_internal::Stub;

// Bytes of one key's share of a request: the key and its row (the reply's
// for a pull, the gradients for a push), as KeysPerRequest counts them.
uint64_t KeyBytes(size_t dim) { return sizeof(uint64_t) + dim * sizeof(float); }

// A table part's slice of one shard's unique keys: [begin, end).
struct Piece {
  size_t table = 0;
  size_t begin = 0;
  size_t end = 0;
};

struct PullRpc {
  int32_t shard = 0;
  uint64_t bytes = 0;
  v1::PullBatchRequest req;
  v1::PullBatchResponse resp;
  std::vector<Piece> pieces;  // parallel to req.tables
  std::vector<size_t> dense;  // parallel to req.dense: the caller's index
};

struct PushRpc {
  int32_t shard = 0;
  uint64_t bytes = 0;
  v1::PushBatchRequest req;
  v1::PushBatchResponse resp;
};

// Assigns parts to requests: per shard, the current request until it would
// pass `max_bytes` (a part larger than that goes alone). Requests live in a
// deque, so references handed out stay valid as more are opened.
template <typename Rpc>
class Packer {
 public:
  Packer(int32_t num_shards, uint64_t max_bytes, bool route)
      : open_(num_shards, -1), max_bytes_(max_bytes), route_(route) {}

  Rpc& For(int32_t shard, uint64_t bytes) {
    int64_t& cur = open_[shard];
    if (cur < 0 || (rpcs_[cur].bytes > 0 && rpcs_[cur].bytes + bytes > max_bytes_)) {
      cur = static_cast<int64_t>(rpcs_.size());
      Rpc& rpc = rpcs_.emplace_back();
      rpc.shard = shard;
      if (route_) {
        rpc.req.mutable_route()->set_shard_index(shard);
        rpc.req.mutable_route()->set_num_shards(static_cast<int32_t>(open_.size()));
      }
    }
    rpcs_[cur].bytes += bytes;
    return rpcs_[cur];
  }
  std::deque<Rpc>& rpcs() { return rpcs_; }

 private:
  std::vector<int64_t> open_;  // per shard: index of its current request, -1 none
  const uint64_t max_bytes_;
  const bool route_;
  std::deque<Rpc> rpcs_;
};

}  // namespace

absl::Status GrpcPsClient::PullBatch(absl::Span<const TablePull> tables,
                                     absl::Span<const DensePull> dense) {
  ASSIGN_OR_RETURN(BatchPlan bp, BatchPlan::ForPull(tables, dense, dense_, num_shards()));
  Packer<PullRpc> packer(num_shards(), options_.max_request_bytes, options_.check_route);
  std::vector<WirePrecision> precision(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const KeyPlan* plan = bp.plan(i);
    if (plan == nullptr) continue;
    precision[i] = WireOf(tables[i].table);
    const size_t dim = bp.dim(i), per = KeysPerRequest(dim);
    for (int32_t s = 0; s < num_shards(); ++s) {
      absl::Span<const uint64_t> keys = plan->shard_keys(s);
      for (size_t b = 0; b < keys.size(); b += per) {
        const size_t e = std::min(keys.size(), b + per);
        PullRpc& rpc = packer.For(s, (e - b) * KeyBytes(dim));
        v1::PullRequest* part = rpc.req.add_tables();
        part->set_table(std::string(tables[i].table));
        wire::EncodeKeys(keys.subspan(b, e - b), part->mutable_keys());
        part->set_dim(static_cast<uint32_t>(dim));
        part->set_precision(
            static_cast<v1::WirePrecision>(wire::WirePrecisionNumber(precision[i])));
        rpc.pieces.push_back({i, b, e});
      }
    }
  }
  for (size_t d = 0; d < dense.size(); ++d) {
    PullRpc& rpc = packer.For(bp.dense_shard(d), dense[d].out.size() * sizeof(float));
    v1::PullDenseRequest* part = rpc.req.add_dense();
    part->set_name(std::string(dense[d].name));
    part->set_num_floats(dense[d].out.size());
    rpc.dense.push_back(d);
  }
  std::deque<PullRpc>& rpcs = packer.rpcs();
  std::vector<Call> calls(rpcs.size());
  for (size_t r = 0; r < rpcs.size(); ++r) {
    calls[r].shard = rpcs[r].shard;
    calls[r].issue = [rpc = &rpcs[r]](Stub* stub, grpc::ClientContext* ctx, Done done) {
      stub->async()->PullBatch(ctx, &rpc->req, &rpc->resp, std::move(done));
    };
  }
  RETURN_IF_ERROR(Run(calls, CallDeadline()));

  // views[i][s]: table i's rows from shard s in that shard's key order,
  // straight from the reply when one request carried them, else gathered.
  std::vector<std::vector<absl::Span<const float>>> views(
      tables.size(), std::vector<absl::Span<const float>>(num_shards()));
  std::deque<std::vector<float>> buffers;  // gathered or realigned rows
  std::vector<std::vector<float>*> gathered(tables.size() * num_shards(), nullptr);
  for (PullRpc& rpc : rpcs) {
    auto bad_reply = [&](const std::string& what) {
      return absl::InternalError(absl::StrCat(
          "PS shard ", rpc.shard, " (", shards_[rpc.shard]->address, "): pull batch reply ", what));
    };
    if (rpc.resp.rows_size() != static_cast<int>(rpc.pieces.size()) ||
        rpc.resp.dense_values_size() != static_cast<int>(rpc.dense.size())) {
      return bad_reply(absl::StrCat("has ", rpc.resp.rows_size(), " tables and ",
                                    rpc.resp.dense_values_size(), " dense variables; asked ",
                                    rpc.pieces.size(), " and ", rpc.dense.size()));
    }
    const bool scaled = rpc.resp.row_scales_size() > 0;
    if (scaled && rpc.resp.row_scales_size() != rpc.resp.rows_size()) {
      return bad_reply(absl::StrCat("has ", rpc.resp.row_scales_size(), " row scales for ",
                                    rpc.resp.rows_size(), " tables"));
    }
    for (size_t j = 0; j < rpc.pieces.size(); ++j) {
      const Piece& p = rpc.pieces[j];
      const size_t dim = bp.dim(p.table);
      const WirePrecision wp = precision[p.table];
      const std::string& bytes = rpc.resp.rows(static_cast<int>(j));
      if (bytes.size() != (p.end - p.begin) * dim * wire::WireValueBytes(wp)) {
        return bad_reply(absl::StrCat(
            "holds ", bytes.size(), " bytes for ", p.end - p.begin, " keys x dim ", dim, " in ",
            std::string(WirePrecisionName(wp)), " of '", std::string(tables[p.table].table), "'"));
      }
      float scale = scaled ? rpc.resp.row_scales(static_cast<int>(j)) : 1.0f;
      if (wp == WirePrecision::kFp16 && !scaled) {
        return bad_reply(absl::StrCat("has no scale for the fp16 rows of '",
                                      std::string(tables[p.table].table),
                                      "' (a PS too old for wire precision?)"));
      }
      if (wp != WirePrecision::kFp32) {
        if (absl::Status st = wire::CheckScale(&scale, "rows"); !st.ok()) {
          return bad_reply(std::string(st.message()));
        }
      }
      const size_t shard_keys = bp.plan(p.table)->shard_keys(rpc.shard).size();
      if (p.begin == 0 && p.end == shard_keys) {  // the shard's whole part
        ASSIGN_OR_RETURN(views[p.table][rpc.shard],
                         wire::DecodeFloatsAs(wp, bytes, scale, &buffers.emplace_back(), "rows"));
        continue;
      }
      std::vector<float>*& all = gathered[p.table * num_shards() + rpc.shard];
      if (all == nullptr) {
        all = &buffers.emplace_back(shard_keys * dim);
        views[p.table][rpc.shard] = *all;
      }
      wire::DecodeValues(wp, bytes.data(), (p.end - p.begin) * dim, scale,
                         all->data() + p.begin * dim);
    }
    for (size_t j = 0; j < rpc.dense.size(); ++j) {
      const DensePull& d = dense[rpc.dense[j]];
      const std::string& bytes = rpc.resp.dense_values(static_cast<int>(j));
      if (bytes.size() != d.out.size() * sizeof(float)) {
        return bad_reply(absl::StrCat("holds ", bytes.size(), " bytes for dense '",
                                      std::string(d.name), "' of ", d.out.size(), " floats"));
      }
      std::memcpy(d.out.data(), bytes.data(), bytes.size());
    }
  }
  for (size_t i = 0; i < tables.size(); ++i) {
    if (const KeyPlan* plan = bp.plan(i)) {
      plan->ExpandRows(views[i], bp.dim(i), tables[i].out);
      CountPull(plan->num_unique(), plan->num_unique() * bp.dim(i), precision[i]);
    }
  }
  return absl::OkStatus();
}

absl::Status GrpcPsClient::PushBatch(absl::Span<const TablePush> tables,
                                     absl::Span<const DensePush> dense, int64_t step,
                                     float learning_rate_scale, const PushStream& stream) {
  RETURN_IF_ERROR(CheckPushScale(learning_rate_scale));
  ASSIGN_OR_RETURN(BatchPlan bp, BatchPlan::ForPush(tables, dense, dense_, num_shards()));
  Packer<PushRpc> packer(num_shards(), options_.max_request_bytes, options_.check_route);
  PartSequences sequences(this, stream);
  // Per table: each shard's summed gradients go straight into its request
  // when one request carries the shard's part, else into split[s] first.
  std::vector<absl::Span<float>> sums(num_shards());
  std::vector<std::vector<float>> split(num_shards());
  struct SplitPart {
    v1::PushRequest* part;
    int32_t shard;
    size_t begin, end;
  };
  std::vector<SplitPart> split_parts;
  for (size_t i = 0; i < tables.size(); ++i) {
    const KeyPlan* plan = bp.plan(i);
    if (plan == nullptr) continue;
    const size_t dim = bp.dim(i), per = KeysPerRequest(dim);
    // fp32 gradients are summed straight into a request that carries a
    // shard's whole part; bf16 / fp16 ones are summed first, then encoded.
    const WirePrecision precision = WireOf(tables[i].table);
    const bool fp32 = precision == WirePrecision::kFp32;
    split_parts.clear();
    for (int32_t s = 0; s < num_shards(); ++s) {
      absl::Span<const uint64_t> keys = plan->shard_keys(s);
      sums[s] = {};
      if (keys.size() > per || (!fp32 && !keys.empty())) {
        split[s].resize(keys.size() * dim);
        sums[s] = absl::MakeSpan(split[s]);
      }
      for (size_t b = 0; b < keys.size(); b += per) {
        const size_t e = std::min(keys.size(), b + per);
        PushRpc& rpc = packer.For(s, (e - b) * KeyBytes(dim));
        v1::PushRequest* part = rpc.req.add_tables();
        part->set_table(std::string(tables[i].table));
        wire::EncodeKeys(keys.subspan(b, e - b), part->mutable_keys());
        // Fixed before the first attempt: every retry of the batch carries it.
        ASSIGN_OR_RETURN(const uint64_t sequence, sequences.Next(s));
        part->set_sequence(sequence);
        if (fp32 && keys.size() <= per) {
          sums[s] = wire::MutableFloats(part->mutable_grads(), keys.size() * dim);
        } else {
          split_parts.push_back({part, s, b, e});
        }
      }
    }
    plan->SumGradients(tables[i].grads, dim, sums);
    for (const SplitPart& p : split_parts) {
      p.part->set_precision(static_cast<v1::WirePrecision>(wire::WirePrecisionNumber(precision)));
      const float scale = wire::EncodeFloatsAs(
          precision, sums[p.shard].subspan(p.begin * dim, (p.end - p.begin) * dim),
          p.part->mutable_grads());
      if (precision == WirePrecision::kFp16) p.part->set_grad_scale(scale);
    }
    CountPush(plan->num_unique(), plan->num_unique() * dim, precision);
  }
  for (size_t d = 0; d < dense.size(); ++d) {
    PushRpc& rpc = packer.For(bp.dense_shard(d), dense[d].grads.size() * sizeof(float));
    v1::PushDenseRequest* part = rpc.req.add_dense();
    part->set_name(std::string(dense[d].name));
    wire::EncodeFloats(dense[d].grads, part->mutable_grads());
    ASSIGN_OR_RETURN(const uint64_t sequence, sequences.Next(bp.dense_shard(d)));
    part->set_sequence(sequence);
  }
  std::deque<PushRpc>& rpcs = packer.rpcs();
  std::vector<Call> calls(rpcs.size());
  for (size_t r = 0; r < rpcs.size(); ++r) {
    PushRpc& rpc = rpcs[r];
    rpc.req.set_client_id(client_id());
    rpc.req.set_stream_id(stream.id);
    rpc.req.set_step(step);
    rpc.req.set_learning_rate_scale(learning_rate_scale);
    calls[r].shard = rpc.shard;
    calls[r].issue = [rpc = &rpc](Stub* stub, grpc::ClientContext* ctx, Done done) {
      stub->async()->PushBatch(ctx, &rpc->req, &rpc->resp, std::move(done));
    };
  }
  return Run(calls, CallDeadline());
}

}  // namespace brook::ps
