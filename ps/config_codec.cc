#include "ps/config_codec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "brook/v1/ps.pb.h"
#include "brook/v1/storage.pb.h"

namespace brook::ps {
namespace {

// ----- enums: UNSPECIFIED takes the ps/options.h default; an unknown value
// (a newer client) is INVALID_ARGUMENT rather than a silent default.

absl::StatusOr<InitializerKind> FromProto(v1::InitializerKind k) {
  switch (k) {
    case v1::INITIALIZER_KIND_UNSPECIFIED:
      return InitializerOptions().kind;
    case v1::INITIALIZER_KIND_ZEROS:
      return InitializerKind::kZeros;
    case v1::INITIALIZER_KIND_CONSTANT:
      return InitializerKind::kConstant;
    case v1::INITIALIZER_KIND_UNIFORM:
      return InitializerKind::kUniform;
    case v1::INITIALIZER_KIND_TRUNCATED_NORMAL:
      return InitializerKind::kTruncatedNormal;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown initializer kind ", k));
  }
}

v1::InitializerKind ToProto(InitializerKind k) {
  switch (k) {
    case InitializerKind::kZeros:
      return v1::INITIALIZER_KIND_ZEROS;
    case InitializerKind::kConstant:
      return v1::INITIALIZER_KIND_CONSTANT;
    case InitializerKind::kUniform:
      return v1::INITIALIZER_KIND_UNIFORM;
    case InitializerKind::kTruncatedNormal:
      return v1::INITIALIZER_KIND_TRUNCATED_NORMAL;
  }
  return v1::INITIALIZER_KIND_UNSPECIFIED;
}

absl::StatusOr<OptimizerKind> FromProto(v1::OptimizerKind k) {
  switch (k) {
    case v1::OPTIMIZER_KIND_UNSPECIFIED:
      return OptimizerOptions().kind;
    case v1::OPTIMIZER_KIND_SGD:
      return OptimizerKind::kSgd;
    case v1::OPTIMIZER_KIND_ADAGRAD:
      return OptimizerKind::kAdagrad;
    case v1::OPTIMIZER_KIND_ADAM:
      return OptimizerKind::kAdam;
    case v1::OPTIMIZER_KIND_FTRL:
      return OptimizerKind::kFtrl;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown optimizer kind ", k));
  }
}

v1::OptimizerKind ToProto(OptimizerKind k) {
  switch (k) {
    case OptimizerKind::kSgd:
      return v1::OPTIMIZER_KIND_SGD;
    case OptimizerKind::kAdagrad:
      return v1::OPTIMIZER_KIND_ADAGRAD;
    case OptimizerKind::kAdam:
      return v1::OPTIMIZER_KIND_ADAM;
    case OptimizerKind::kFtrl:
      return v1::OPTIMIZER_KIND_FTRL;
  }
  return v1::OPTIMIZER_KIND_UNSPECIFIED;
}

absl::StatusOr<BadGradientPolicy> FromProto(v1::BadGradientPolicy p) {
  switch (p) {
    case v1::BAD_GRADIENT_POLICY_UNSPECIFIED:
    case v1::BAD_GRADIENT_POLICY_REJECT:
      return BadGradientPolicy::kReject;
    case v1::BAD_GRADIENT_POLICY_ZERO:
      return BadGradientPolicy::kZero;
    default:
      return absl::InvalidArgumentError(absl::StrCat("unknown bad_gradient policy ", p));
  }
}

v1::BadGradientPolicy ToProto(BadGradientPolicy p) {
  return p == BadGradientPolicy::kZero ? v1::BAD_GRADIENT_POLICY_ZERO
                                       : v1::BAD_GRADIENT_POLICY_REJECT;
}

}  // namespace
// ----- initializer and optimizer

absl::StatusOr<InitializerOptions> FromProto(const v1::InitializerConfig& p) {
  InitializerOptions o;
  absl::StatusOr<InitializerKind> kind = FromProto(p.kind());
  if (!kind.ok()) return kind.status();
  o.kind = *kind;
  o.value = p.value();
  o.low = p.low();
  o.high = p.high();
  o.mean = p.mean();
  o.stddev = p.stddev();
  return o;
}

void ToProto(const InitializerOptions& o, v1::InitializerConfig* p) {
  p->set_kind(ToProto(o.kind));
  p->set_value(o.value);
  p->set_low(o.low);
  p->set_high(o.high);
  p->set_mean(o.mean);
  p->set_stddev(o.stddev);
}

absl::StatusOr<OptimizerOptions> FromProto(const v1::OptimizerConfig& p) {
  OptimizerOptions o;
  absl::StatusOr<OptimizerKind> kind = FromProto(p.kind());
  if (!kind.ok()) return kind.status();
  o.kind = *kind;
  o.learning_rate = p.learning_rate();
  o.initial_accumulator = p.initial_accumulator();
  o.beta1 = p.beta1();
  o.beta2 = p.beta2();
  o.epsilon = p.epsilon();
  o.l1 = p.l1();
  o.l2 = p.l2();
  o.l2_shrinkage = p.l2_shrinkage();
  o.lr_power = p.lr_power();
  return o;
}

void ToProto(const OptimizerOptions& o, v1::OptimizerConfig* p) {
  p->set_kind(ToProto(o.kind));
  p->set_learning_rate(o.learning_rate);
  p->set_initial_accumulator(o.initial_accumulator);
  p->set_beta1(o.beta1);
  p->set_beta2(o.beta2);
  p->set_epsilon(o.epsilon);
  p->set_l1(o.l1);
  p->set_l2(o.l2);
  p->set_l2_shrinkage(o.l2_shrinkage);
  p->set_lr_power(o.lr_power);
}

// ----- tables and dense variables. The server validates the result
// (TableOptions::Validate via ParameterServer::CreateTable).

absl::StatusOr<TableOptions> FromProto(const v1::TableConfig& p) {
  TableOptions o;
  o.name = p.name();
  o.dim = static_cast<int>(std::min<uint32_t>(p.dim(), 1u << 30));
  o.seed = p.seed();
  absl::StatusOr<InitializerOptions> init = FromProto(p.initializer());
  if (!init.ok()) return init.status();
  o.initializer = *init;
  absl::StatusOr<OptimizerOptions> opt = FromProto(p.optimizer());
  if (!opt.ok()) return opt.status();
  o.optimizer = *opt;
  if (p.memory_budget_bytes() != 0) o.memory_budget_bytes = p.memory_budget_bytes();
  o.admission_min_count = p.admission_min_count();
  o.ttl_steps = p.ttl_steps();
  o.ttl_seconds = p.ttl_seconds();
  absl::StatusOr<BadGradientPolicy> bad = FromProto(p.bad_gradient());
  if (!bad.ok()) return bad.status();
  o.bad_gradient = *bad;
  o.gradient_clip = p.gradient_clip();
  if (p.max_pending_keys() != 0) o.max_pending_keys = p.max_pending_keys();
  return o;
}

void ToProto(const TableOptions& o, v1::TableConfig* p) {
  p->set_name(o.name);
  p->set_dim(o.dim < 0 ? 0 : static_cast<uint32_t>(o.dim));
  p->set_seed(o.seed);
  ToProto(o.initializer, p->mutable_initializer());
  ToProto(o.optimizer, p->mutable_optimizer());
  p->set_memory_budget_bytes(o.memory_budget_bytes);
  p->set_admission_min_count(o.admission_min_count);
  p->set_ttl_steps(o.ttl_steps);
  p->set_ttl_seconds(o.ttl_seconds);
  p->set_bad_gradient(ToProto(o.bad_gradient));
  p->set_gradient_clip(o.gradient_clip);
  p->set_max_pending_keys(o.max_pending_keys);
}

absl::StatusOr<DenseOptions> FromProto(const v1::DenseConfig& p) {
  DenseOptions o;
  o.name = p.name();
  o.shape.assign(p.shape().begin(), p.shape().end());
  o.seed = p.seed();
  absl::StatusOr<InitializerOptions> init = FromProto(p.initializer());
  if (!init.ok()) return init.status();
  o.initializer = *init;
  absl::StatusOr<OptimizerOptions> opt = FromProto(p.optimizer());
  if (!opt.ok()) return opt.status();
  o.optimizer = *opt;
  absl::StatusOr<BadGradientPolicy> bad = FromProto(p.bad_gradient());
  if (!bad.ok()) return bad.status();
  o.bad_gradient = *bad;
  return o;
}

void ToProto(const DenseOptions& o, v1::DenseConfig* p) {
  p->set_name(o.name);
  for (int64_t d : o.shape) p->add_shape(d);
  p->set_seed(o.seed);
  ToProto(o.initializer, p->mutable_initializer());
  ToProto(o.optimizer, p->mutable_optimizer());
  p->set_bad_gradient(ToProto(o.bad_gradient));
}

CheckpointInfo FromProto(const v1::CheckpointInfo& p) {
  CheckpointInfo i;
  i.dir = p.dir();
  i.shard_dir = p.shard_dir();
  i.incremental = p.incremental();
  i.base_dir = p.base_dir();
  i.step = p.step();
  i.wal_lsn = p.wal_lsn();
  i.created_unix_micros = p.created_unix_micros();
  i.rows = p.rows();
  i.bytes = p.bytes();
  i.seconds = p.seconds();
  i.manifest_bytes = p.manifest_bytes();
  i.manifest_crc32c = p.manifest_crc32c();
  i.table_prefix = p.table_prefix();
  return i;
}

void ToProto(const CheckpointInfo& i, v1::CheckpointInfo* p) {
  p->set_dir(i.dir);
  p->set_shard_dir(i.shard_dir);
  p->set_incremental(i.incremental);
  p->set_base_dir(i.base_dir);
  p->set_step(i.step);
  p->set_wal_lsn(i.wal_lsn);
  p->set_created_unix_micros(i.created_unix_micros);
  p->set_rows(i.rows);
  p->set_bytes(i.bytes);
  p->set_seconds(i.seconds);
  p->set_manifest_bytes(i.manifest_bytes);
  p->set_manifest_crc32c(i.manifest_crc32c);
  p->set_table_prefix(i.table_prefix);
}

}  // namespace brook::ps
