#include "ps/rpc/ps_handlers.h"

#include <grpcpp/support/byte_buffer.h>
#include <grpcpp/support/proto_buffer_reader.h>

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/part_runner.h"
#include "common/status_macros.h"
#include "common/version.h"
#include "ps/config_codec.h"
#include "ps/parameter_server.h"
#include "ps/wire/precision.h"
#include "ps/wire/proto_convert.h"
#include "ps/wire/pull_reply.h"
#include "ps/wire/wire.h"

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

// learning_rate_scale 0 is a client from before the field: 1.
PushContext MakeContext(uint64_t client_id, uint64_t sequence, int64_t step, float scale) {
  PushContext ctx;
  ctx.client_id = client_id;
  ctx.sequence = sequence;
  ctx.step = step;
  ctx.learning_rate_scale = scale == 0.0f ? 1.0f : scale;
  return ctx;
}

// A batch part's own copy of a batch-wide field: unset (0) or the same.
template <typename T>
absl::Status SameAsBatch(T part, T batch, const char* field, const std::string& name) {
  if (part == T{} || part == batch) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("push batch: the part for '", name, "' has ",
                                                 field, " ", part, ", the batch ", batch));
}

// Rows gathered in float32 before a bf16 / fp16 reply encodes them: one
// buffer per thread, reused, so a pull allocates nothing for them (a large
// one, past kKeep, is released after use).
class GatherScratch {
 public:
  explicit GatherScratch(size_t floats) {
    if (floats > kKeep) {
      own_.resize(floats);
      span_ = absl::MakeSpan(own_);
      return;
    }
    static thread_local std::vector<float> buffer;
    if (buffer.size() < floats) buffer.resize(floats);
    span_ = absl::MakeSpan(buffer.data(), floats);
  }
  absl::Span<float> span() const { return span_; }

 private:
  static constexpr size_t kKeep = size_t{4} << 20;  // floats: 16 MiB a thread
  std::vector<float> own_;
  absl::Span<float> span_;
};

// Per-thread buffers for bf16 / fp16 gradients decoded to float32, `parts`
// of them, reused by the thread's next push (an allocation and zero fill of
// a megabyte per push cost more than the decode); one past kKeep floats is
// released after use.
class GradScratch {
 public:
  explicit GradScratch(size_t parts) {
    if (pool_.size() < parts) pool_.resize(parts);
  }
  ~GradScratch() {
    for (std::vector<float>& v : pool_) {
      if (v.capacity() > kKeep) std::vector<float>().swap(v);
    }
  }
  std::vector<float>* at(size_t i) { return &pool_[i]; }

 private:
  static constexpr size_t kKeep = size_t{4} << 20;
  static thread_local std::vector<std::vector<float>> pool_;
};
thread_local std::vector<std::vector<float>> GradScratch::pool_;

// A push part's gradients, decoded from its precision into float32.
absl::StatusOr<absl::Span<const float>> DecodeGrads(const v1::PushRequest& part,
                                                    std::vector<float>* scratch,
                                                    const std::string& what) {
  ASSIGN_OR_RETURN(WirePrecision precision, wire::WirePrecisionFromNumber(part.precision(), what));
  return wire::DecodeFloatsAs(precision, part.grads(), part.grad_scale(), scratch, what);
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

absl::Status PsHandlers::DropTable(const v1::DropTableRequest& req, v1::DropTableResponse* resp) {
  if (req.prefix().empty()) return ps_->DropTable(req.table());
  ASSIGN_OR_RETURN(DroppedTables dropped, ps_->DropTablesWithPrefix(req.prefix()));
  resp->set_tables_dropped(dropped.tables);
  resp->set_dense_dropped(dropped.dense);
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> PsHandlers::CheckPull(const v1::PullRequest& req, size_t keys) const {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  ASSIGN_OR_RETURN(WirePrecision precision,
                   wire::WirePrecisionFromNumber(req.precision(),
                                                 absl::StrCat("pull from '", req.table(), "'")));
  uint32_t dim = req.dim();
  if (dim == 0) {
    ASSIGN_OR_RETURN(dim, LookupDim(*ps_, req.table()));
  }
  // The key limit is the core's (ParameterServer::Pull); the reply's size
  // is this adapter's, checked before anything is allocated. keys < 2^32
  // (the request's bytes) and dim < 2^32: the product fits in 64 bits.
  const uint64_t bytes = static_cast<uint64_t>(keys) * dim * wire::WireValueBytes(precision);
  if (bytes > max_reply_bytes_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "pull of ", keys, " keys x dim ", dim, " from '", req.table(), "' would reply ", bytes,
        " bytes; the limit is ", max_reply_bytes_, " (split the request)"));
  }
  return dim;
}

absl::Status PsHandlers::Pull(const v1::PullRequest& req, v1::PullResponse* resp) {
  std::vector<uint64_t> key_scratch;
  ASSIGN_OR_RETURN(absl::Span<const uint64_t> keys, wire::DecodeKeys(req.keys(), &key_scratch));
  ASSIGN_OR_RETURN(uint32_t dim, CheckPull(req, keys.size()));
  const auto precision = static_cast<WirePrecision>(req.precision());  // CheckPull checked it
  const size_t floats = keys.size() * size_t{dim};
  if (precision == WirePrecision::kFp32) {
    absl::Span<float> out = wire::MutableFloats(resp->mutable_rows(), floats);
    absl::Status st = ps_->Pull(req.table(), keys, out, helpers_);
    if (!st.ok()) {
      resp->clear_rows();
      return st;
    }
  } else {
    GatherScratch rows(floats);
    RETURN_IF_ERROR(ps_->Pull(req.table(), keys, rows.span(), helpers_));
    resp->set_scale(wire::EncodeFloatsAs(precision, rows.span(), resp->mutable_rows()));
    resp->set_precision(req.precision());
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
  ASSIGN_OR_RETURN(absl::Span<const uint64_t> keys, wire::DecodeKeys(req.keys(), &key_scratch));
  ASSIGN_OR_RETURN(uint32_t dim, CheckPull(req, keys.size()));
  const size_t floats = keys.size() * size_t{dim};
  const auto precision = static_cast<WirePrecision>(req.precision());  // CheckPull checked it
  wire::PullReplyWriter writer(dim, floats, precision);
  if (precision == WirePrecision::kFp32) {
    RETURN_IF_ERROR(ps_->Pull(req.table(), keys, writer.rows(), helpers_));
    *reply = writer.Finish();
    return absl::OkStatus();
  }
  GatherScratch rows(floats);
  RETURN_IF_ERROR(ps_->Pull(req.table(), keys, rows.span(), helpers_));
  const float scale = precision == WirePrecision::kFp16 ? wire::Fp16Scale(rows.span()) : 1.0f;
  wire::EncodeValues(precision, rows.span(), scale, writer.encoded_rows());
  *reply = writer.Finish(scale);
  return absl::OkStatus();
}

absl::Status PsHandlers::Push(const v1::PushRequest& req, v1::PushResponse* resp) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  std::vector<uint64_t> key_scratch;
  GradScratch grad_scratch(1);
  ASSIGN_OR_RETURN(absl::Span<const uint64_t> keys, wire::DecodeKeys(req.keys(), &key_scratch));
  ASSIGN_OR_RETURN(absl::Span<const float> grads, DecodeGrads(req, grad_scratch.at(0), "grads"));
  if (keys.empty() ? !grads.empty() : grads.size() % keys.size() != 0) {
    return absl::InvalidArgumentError(absl::StrCat("push to '", req.table(), "': ", grads.size(),
                                                   " gradient floats for ", keys.size(),
                                                   " keys is not keys x dim"));
  }
  PushContext ctx =
      MakeContext(req.client_id(), req.sequence(), req.step(), req.learning_rate_scale());
  ctx.helpers = helpers_;
  ASSIGN_OR_RETURN(PushOutcome outcome, ps_->Push(req.table(), keys, grads, ctx));
  NoteStep(req.step());
  resp->set_duplicate(outcome == PushOutcome::kDuplicate);
  return absl::OkStatus();
}

absl::Status PsHandlers::CreateDense(const v1::CreateDenseRequest& req,
                                     v1::CreateDenseResponse* /*resp*/) {
  ASSIGN_OR_RETURN(DenseOptions options, FromProto(req.dense()));
  return ps_->CreateDense(options);
}

absl::StatusOr<uint64_t> PsHandlers::DenseFloats(const v1::PullDenseRequest& req) const {
  if (req.num_floats() != 0) return req.num_floats();
  return LookupDenseSize(*ps_, req.name());
}

absl::Status PsHandlers::PullDense(const v1::PullDenseRequest& req, v1::PullDenseResponse* resp) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  ASSIGN_OR_RETURN(uint64_t floats, DenseFloats(req));
  if (floats > max_reply_bytes_ / sizeof(float)) {
    return absl::ResourceExhaustedError(absl::StrCat("dense pull of ", floats, " floats of '",
                                                     req.name(), "' exceeds the reply limit of ",
                                                     max_reply_bytes_, " bytes"));
  }
  absl::Span<float> out = wire::MutableFloats(resp->mutable_values(), floats);
  absl::Status st = ps_->PullDense(req.name(), out);
  if (!st.ok()) resp->clear_values();
  return st;
}

absl::Status PsHandlers::PushDense(const v1::PushDenseRequest& req, v1::PushDenseResponse* resp) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  std::vector<float> scratch;
  ASSIGN_OR_RETURN(absl::Span<const float> grads,
                   wire::DecodeFloats(req.grads(), &scratch, "grads"));
  ASSIGN_OR_RETURN(PushOutcome outcome,
                   ps_->PushDense(req.name(), grads,
                                  MakeContext(req.client_id(), req.sequence(), req.step(),
                                              req.learning_rate_scale())));
  NoteStep(req.step());
  resp->set_duplicate(outcome == PushOutcome::kDuplicate);
  return absl::OkStatus();
}

absl::Status PsHandlers::PullBatch(const v1::PullBatchRequest& req, v1::PullBatchResponse* resp) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  // Decode and size everything first: the reply is allocated only once the
  // whole of it is known to fit.
  std::vector<std::vector<uint64_t>> key_scratch(req.tables_size());
  std::vector<TablePull> tables(req.tables_size());
  std::vector<uint32_t> dims(req.tables_size());
  std::vector<uint64_t> dense_floats(req.dense_size());
  const uint64_t max_floats = max_reply_bytes_ / sizeof(float);
  uint64_t reply_floats = 0;
  // Adds a part's floats to the reply; RESOURCE_EXHAUSTED past the limit
  // (every part is checked before the sum, so it cannot overflow).
  auto add_to_reply = [&](uint64_t floats, const std::string& name) -> absl::Status {
    if (floats <= max_floats && reply_floats + floats <= max_floats) {
      reply_floats += floats;
      return absl::OkStatus();
    }
    return absl::ResourceExhaustedError(
        absl::StrCat("pull batch of ", req.tables_size(), " tables and ", req.dense_size(),
                     " dense variables: the reply passes the limit of ", max_reply_bytes_,
                     " bytes at '", name, "' (split the request)"));
  };
  for (int i = 0; i < req.tables_size(); ++i) {
    const v1::PullRequest& part = req.tables(i);
    ASSIGN_OR_RETURN(tables[i].keys,
                     wire::DecodeKeys(part.keys(), &key_scratch[i],
                                      absl::StrCat("keys of table '", part.table(), "'")));
    ASSIGN_OR_RETURN(dims[i], CheckPull(part, tables[i].keys.size()));
    tables[i].table = part.table();
    RETURN_IF_ERROR(add_to_reply(tables[i].keys.size() * uint64_t{dims[i]}, part.table()));
  }
  for (int i = 0; i < req.dense_size(); ++i) {
    RETURN_IF_ERROR(CheckRoute(req.dense(i).route()));
    ASSIGN_OR_RETURN(dense_floats[i], DenseFloats(req.dense(i)));
    RETURN_IF_ERROR(add_to_reply(dense_floats[i], req.dense(i).name()));
  }
  std::vector<DensePull> dense(req.dense_size());
  // bf16 / fp16 parts are gathered in float32 first, then encoded.
  std::vector<std::vector<float>> gathered(req.tables_size());
  bool any_fp16 = false;
  for (int i = 0; i < req.tables_size(); ++i) {
    const size_t floats = tables[i].keys.size() * size_t{dims[i]};
    if (req.tables(i).precision() == v1::WIRE_PRECISION_FP32) {
      tables[i].out = wire::MutableFloats(resp->add_rows(), floats);
      continue;
    }
    any_fp16 |= req.tables(i).precision() == v1::WIRE_PRECISION_FP16;
    resp->add_rows();
    gathered[i].resize(floats);
    tables[i].out = absl::MakeSpan(gathered[i]);
  }
  for (int i = 0; i < req.dense_size(); ++i) {
    dense[i].name = req.dense(i).name();
    dense[i].out = wire::MutableFloats(resp->add_dense_values(), dense_floats[i]);
  }
  absl::Status st = ps_->PullBatch(tables, dense);
  if (!st.ok()) {
    resp->Clear();
    return st;
  }
  for (int i = 0; i < req.tables_size(); ++i) {
    float scale = 1.0f;
    if (req.tables(i).precision() != v1::WIRE_PRECISION_FP32) {
      scale = wire::EncodeFloatsAs(static_cast<WirePrecision>(req.tables(i).precision()),
                                   gathered[i], resp->mutable_rows(i));
    }
    if (any_fp16) resp->add_row_scales(scale);
  }
  return absl::OkStatus();
}

absl::Status PsHandlers::PushBatch(const v1::PushBatchRequest& req, v1::PushBatchResponse* resp) {
  RETURN_IF_ERROR(CheckRoute(req.route()));
  PushContext ctx = MakeContext(req.client_id(), 0, req.step(), req.learning_rate_scale());
  ctx.stream_id = req.stream_id();
  ctx.helpers = helpers_;
  std::vector<std::vector<uint64_t>> key_scratch(req.tables_size());
  GradScratch grad_scratch(static_cast<size_t>(req.tables_size() + req.dense_size()));
  std::vector<TablePushPart> tables(req.tables_size());
  for (int i = 0; i < req.tables_size(); ++i) {
    const v1::PushRequest& part = req.tables(i);
    RETURN_IF_ERROR(CheckRoute(part.route()));
    RETURN_IF_ERROR(SameAsBatch(part.client_id(), req.client_id(), "client_id", part.table()));
    RETURN_IF_ERROR(SameAsBatch(part.step(), req.step(), "step", part.table()));
    RETURN_IF_ERROR(SameAsBatch(part.learning_rate_scale(), req.learning_rate_scale(),
                                "learning_rate_scale", part.table()));
    TablePushPart& t = tables[i];
    ASSIGN_OR_RETURN(t.keys, wire::DecodeKeys(part.keys(), &key_scratch[i],
                                              absl::StrCat("keys of table '", part.table(), "'")));
    ASSIGN_OR_RETURN(t.grads, DecodeGrads(part, grad_scratch.at(i),
                                          absl::StrCat("grads of table '", part.table(), "'")));
    if (t.keys.empty() ? !t.grads.empty() : t.grads.size() % t.keys.size() != 0) {
      return absl::InvalidArgumentError(absl::StrCat("push to '", part.table(),
                                                     "': ", t.grads.size(), " gradient floats for ",
                                                     t.keys.size(), " keys is not keys x dim"));
    }
    t.table = part.table();
    t.sequence = part.sequence();
  }
  std::vector<DensePushPart> dense(req.dense_size());
  for (int i = 0; i < req.dense_size(); ++i) {
    const v1::PushDenseRequest& part = req.dense(i);
    RETURN_IF_ERROR(CheckRoute(part.route()));
    RETURN_IF_ERROR(SameAsBatch(part.client_id(), req.client_id(), "client_id", part.name()));
    RETURN_IF_ERROR(SameAsBatch(part.step(), req.step(), "step", part.name()));
    RETURN_IF_ERROR(SameAsBatch(part.learning_rate_scale(), req.learning_rate_scale(),
                                "learning_rate_scale", part.name()));
    ASSIGN_OR_RETURN(
        dense[i].grads,
        wire::DecodeFloats(part.grads(), grad_scratch.at(req.tables_size() + i),
                           absl::StrCat("grads of dense variable '", part.name(), "'")));
    dense[i].name = part.name();
    dense[i].sequence = part.sequence();
  }
  ASSIGN_OR_RETURN(PushBatchOutcome outcome, ps_->PushBatch(tables, dense, ctx));
  NoteStep(req.step());
  for (PushOutcome o : outcome.tables) resp->add_table_duplicate(o == PushOutcome::kDuplicate);
  for (PushOutcome o : outcome.dense) resp->add_dense_duplicate(o == PushOutcome::kDuplicate);
  return absl::OkStatus();
}

absl::Status PsHandlers::Stats(const v1::StatsRequest& /*req*/, v1::StatsResponse* resp) {
  resp->set_shard_index(ps_->options().shard_index);
  resp->set_num_shards(ps_->options().num_shards);
  wire::ToProto(ps_->Stats(), resp);
  return absl::OkStatus();
}

absl::Status PsHandlers::Checkpoint(const v1::CheckpointRequest& req,
                                    v1::CheckpointResponse* resp) {
  CheckpointOptions o;
  o.dir = req.dir();
  o.table_prefix = req.table_prefix();
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
  if (req.has_import()) {
    ImportOptions o;
    o.dir = req.dir();
    o.names.assign(req.import().names().begin(), req.import().names().end());
    o.to_prefix = req.import().to_prefix();
    ASSIGN_OR_RETURN(ImportInfo info, ps_->ImportTables(o));
    for (const ImportedPart& part : info.parts) {
      v1::ImportedPart* out = resp->add_imported();
      out->set_name(part.name);
      out->set_dense(part.dense);
      out->set_rows(part.rows);
      out->set_slots(part.slots);
      resp->set_rows(resp->rows() + part.rows);
      resp->set_dense(resp->dense() + (part.dense ? 1 : 0));
    }
    resp->set_from_prefix(info.from_prefix);
    resp->set_seconds(info.seconds);
    return absl::OkStatus();
  }
  ASSIGN_OR_RETURN(RestoreInfo info, ps_->Restore(req.dir()));
  resp->set_rows(info.rows);
  resp->set_dense(info.dense);
  resp->set_seconds(info.seconds);
  return absl::OkStatus();
}

absl::Status PsHandlers::FenceClients(const v1::FenceClientsRequest& req,
                                      v1::FenceClientsResponse* resp) {
  // The chief sends at most its bounded list (4096 by default).
  constexpr int kMaxFencesPerRequest = 1 << 16;
  if (req.client_ids_size() > kMaxFencesPerRequest) {
    return absl::ResourceExhaustedError(absl::StrCat("fence_clients: ", req.client_ids_size(),
                                                     " client ids exceed the limit of ",
                                                     kMaxFencesPerRequest, " per request"));
  }
  resp->set_newly_fenced(
      ps_->FenceClients(absl::MakeConstSpan(req.client_ids().data(), req.client_ids().size())));
  resp->set_fenced_clients(ps_->fenced_clients());
  wire::ToProto(ps_->startup(), resp->mutable_startup());
  return absl::OkStatus();
}

absl::Status PsHandlers::Health(const v1::HealthRequest& /*req*/, v1::HealthResponse* resp) {
  resp->set_version(Version());
  resp->set_commit(GitCommit());
  return absl::OkStatus();
}

}  // namespace brook::ps::rpc
