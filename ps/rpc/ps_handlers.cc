#include "ps/rpc/ps_handlers.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "ps/parameter_server.h"
#include "ps/rpc/proto_convert.h"
#include "ps/rpc/pull_reply.h"
#include "ps/rpc/wire.h"

namespace brook::ps::rpc {
namespace {

// The slow path for a request that did not say its table's dim (or a dense
// variable's size): a full stats snapshot. Trainers always send them.
absl::StatusOr<uint32_t> LookupDim(const ParameterServer& ps, const std::string& table) {
  for (const TableStats& t : ps.Stats().tables) {
    if (t.name == table) return static_cast<uint32_t>(t.dim);
  }
  return absl::NotFoundError(absl::StrCat("no table '", table, "'"));
}

absl::StatusOr<uint64_t> LookupDenseSize(const ParameterServer& ps, const std::string& name) {
  for (const DenseStats& d : ps.Stats().dense) {
    if (d.name == name) return d.num_floats;
  }
  return absl::NotFoundError(absl::StrCat("no dense variable '", name, "'"));
}

PushContext MakeContext(uint64_t client_id, uint64_t sequence, int64_t step) {
  PushContext ctx;
  ctx.client_id = client_id;
  ctx.sequence = sequence;
  ctx.step = step;
  return ctx;
}

}  // namespace

absl::Status PsHandlers::CheckRoute(const v1::ShardRoute& route) const {
  if (route.num_shards() == 0) return absl::OkStatus();
  const ParameterServerOptions& o = ps_->options();
  if (route.num_shards() != o.num_shards || route.shard_index() != o.shard_index) {
    return absl::FailedPreconditionError(
        absl::StrCat("request routed for shard ", route.shard_index(), " of ", route.num_shards(),
                     " reached shard ", o.shard_index, " of ", o.num_shards,
                     " (client address list or shard map disagrees with this PS)"));
  }
  return absl::OkStatus();
}

void PsHandlers::NoteStep(int64_t step) {
  int64_t seen = max_step_.load(std::memory_order_relaxed);
  while (step > seen && !max_step_.compare_exchange_weak(seen, step, std::memory_order_relaxed)) {
  }
}

absl::Status PsHandlers::CreateTable(const v1::CreateTableRequest& req,
                                     v1::CreateTableResponse* /*resp*/) {
  ASSIGN_OR_RETURN(TableOptions options, FromProto(req.table()));
  return ps_->CreateTable(options);
}

absl::Status PsHandlers::DropTable(const v1::DropTableRequest& req,
                                   v1::DropTableResponse* /*resp*/) {
  return ps_->DropTable(req.table());
}

absl::StatusOr<uint32_t> PsHandlers::CheckPull(const v1::PullRequest& req, size_t keys) const {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  uint32_t dim = req.dim();
  if (dim == 0) {
    ASSIGN_OR_RETURN(dim, LookupDim(*ps_, req.table()));
  }
  const uint64_t max_keys = ps_->options().max_keys_per_request;
  if (keys > max_keys) {
    return absl::ResourceExhaustedError(absl::StrCat("pull of ", keys, " keys from '",
                                                     req.table(), "' exceeds the limit of ",
                                                     max_keys, " keys per request"));
  }
  // keys <= 2^20-ish and dim < 2^32: the product fits in 64 bits.
  const uint64_t bytes = static_cast<uint64_t>(keys) * dim * sizeof(float);
  if (bytes > max_reply_bytes_) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pull of ", keys, " keys x dim ", dim, " from '", req.table(),
                     "' would reply ", bytes, " bytes; the limit is ", max_reply_bytes_,
                     " (split the request)"));
  }
  return dim;
}

absl::Status PsHandlers::Pull(const v1::PullRequest& req, v1::PullResponse* resp) {
  std::vector<uint64_t> key_scratch;
  ASSIGN_OR_RETURN(absl::Span<const uint64_t> keys, DecodeKeys(req.keys(), &key_scratch));
  ASSIGN_OR_RETURN(uint32_t dim, CheckPull(req, keys.size()));
  absl::Span<float> out = MutableFloats(resp->mutable_rows(), keys.size() * size_t{dim});
  absl::Status st = ps_->Pull(req.table(), keys, out);
  if (!st.ok()) {
    resp->clear_rows();
    return st;
  }
  resp->set_dim(dim);
  return absl::OkStatus();
}

absl::Status PsHandlers::PullRaw(const grpc::ByteBuffer& request, grpc::ByteBuffer* reply) {
  v1::PullRequest req;
  {
    grpc::ByteBuffer copy(request);  // shares the slices; parsing consumes its reader
    grpc::ProtoBufferReader reader(&copy);
    if (!req.ParseFromZeroCopyStream(&reader)) {
      return absl::InvalidArgumentError("pull request does not parse as brook.v1.PullRequest");
    }
  }
  std::vector<uint64_t> key_scratch;
  ASSIGN_OR_RETURN(absl::Span<const uint64_t> keys, DecodeKeys(req.keys(), &key_scratch));
  ASSIGN_OR_RETURN(uint32_t dim, CheckPull(req, keys.size()));
  const size_t floats = keys.size() * size_t{dim};
  PullReplyWriter writer(dim, floats);
  RETURN_IF_ERROR(ps_->Pull(req.table(), keys, writer.rows()));
  *reply = writer.Finish();
  return absl::OkStatus();
}

absl::Status PsHandlers::Push(const v1::PushRequest& req, v1::PushResponse* resp) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  std::vector<uint64_t> key_scratch;
  std::vector<float> grad_scratch;
  ASSIGN_OR_RETURN(absl::Span<const uint64_t> keys, DecodeKeys(req.keys(), &key_scratch));
  ASSIGN_OR_RETURN(absl::Span<const float> grads,
                   DecodeFloats(req.grads(), &grad_scratch, "grads"));
  if (keys.empty() ? !grads.empty() : grads.size() % keys.size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("push to '", req.table(), "': ", grads.size(),
                                                   " gradient floats for ", keys.size(),
                                                   " keys is not keys x dim"));
  }
  ASSIGN_OR_RETURN(PushOutcome outcome,
                   ps_->Push(req.table(), keys, grads,
                             MakeContext(req.client_id(), req.sequence(), req.step())));
  NoteStep(req.step());
  resp->set_duplicate(outcome == PushOutcome::kDuplicate);
  return absl::OkStatus();
}

absl::Status PsHandlers::CreateDense(const v1::CreateDenseRequest& req,
                                     v1::CreateDenseResponse* /*resp*/) {
  ASSIGN_OR_RETURN(DenseOptions options, FromProto(req.dense()));
  return ps_->CreateDense(options);
}

absl::Status PsHandlers::PullDense(const v1::PullDenseRequest& req, v1::PullDenseResponse* resp) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  uint64_t floats = req.num_floats();
  if (floats == 0) {
    ASSIGN_OR_RETURN(floats, LookupDenseSize(*ps_, req.name()));
  }
  if (floats > max_reply_bytes_ / sizeof(float)) {
    return absl::ResourceExhaustedError(absl::StrCat("dense pull of ", floats, " floats of '",
                                                     req.name(), "' exceeds the reply limit of ",
                                                     max_reply_bytes_, " bytes"));
  }
  absl::Span<float> out = MutableFloats(resp->mutable_values(), floats);
  absl::Status st = ps_->PullDense(req.name(), out);
  if (!st.ok()) resp->clear_values();
  return st;
}

absl::Status PsHandlers::PushDense(const v1::PushDenseRequest& req, v1::PushDenseResponse* resp) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  std::vector<float> scratch;
  ASSIGN_OR_RETURN(absl::Span<const float> grads, DecodeFloats(req.grads(), &scratch, "grads"));
  ASSIGN_OR_RETURN(
      PushOutcome outcome,
      ps_->PushDense(req.name(), grads, MakeContext(req.client_id(), req.sequence(), req.step())));
  NoteStep(req.step());
  resp->set_duplicate(outcome == PushOutcome::kDuplicate);
  return absl::OkStatus();
}

absl::Status PsHandlers::Stats(const v1::StatsRequest& /*req*/, v1::StatsResponse* resp) {
  resp->set_shard_index(ps_->options().shard_index);
  resp->set_num_shards(ps_->options().num_shards);
  ToProto(ps_->Stats(), resp);
  return absl::OkStatus();
}

absl::Status PsHandlers::Checkpoint(const v1::CheckpointRequest& req,
                                    v1::CheckpointResponse* resp) {
  CheckpointOptions o;
  o.dir = req.dir();
  o.incremental = req.incremental();
  o.step = req.step() != 0 ? req.step() : max_step_.load(std::memory_order_relaxed);
  o.shard_map_version = req.shard_map_version();
  o.shard_addresses.assign(req.shard_addresses().begin(), req.shard_addresses().end());
  ASSIGN_OR_RETURN(CheckpointInfo info, ps_->Checkpoint(o));
  ToProto(info, resp->mutable_checkpoint());
  return absl::OkStatus();
}

absl::Status PsHandlers::Restore(const v1::RestoreRequest& req, v1::RestoreResponse* resp) {
  if (req.dir().empty()) return absl::InvalidArgumentError("restore: no checkpoint dir given");
  ASSIGN_OR_RETURN(RestoreInfo info, ps_->Restore(req.dir()));
  resp->set_rows(info.rows);
  resp->set_dense(info.dense);
  resp->set_seconds(info.seconds);
  return absl::OkStatus();
}

absl::Status PsHandlers::Health(const v1::HealthRequest& /*req*/, v1::HealthResponse* resp) {
  resp->set_version(Version());
  resp->set_commit(GitCommit());
  return absl::OkStatus();
}

}  // namespace brook::ps::rpc
