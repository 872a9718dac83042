// TableOptions, DenseOptions and CheckpointInfo <-> their brook.v1 messages:
// one definition for what the PS persists (its WAL, checkpoint MANIFESTs and
// state) and what travels on the wire (ps/wire/proto_convert.h adds the rest).
// An UNSPECIFIED enum takes the ps/options.h default; an unknown value (a
// newer writer) is INVALID_ARGUMENT rather than a silent default. Callers of
// FromProto validate the result (TableOptions::Validate). Thread-safe.
#pragma once

#include "absl/status/statusor.h"
#include "ps/options.h"
#include "ps/types.h"

namespace brook::v1 {
class InitializerConfig;
class OptimizerConfig;
class TableConfig;
class DenseConfig;
class CheckpointInfo;
}  // namespace brook::v1

namespace brook::ps {

absl::StatusOr<InitializerOptions> FromProto(const v1::InitializerConfig& p);
void ToProto(const InitializerOptions& o, v1::InitializerConfig* p);
absl::StatusOr<OptimizerOptions> FromProto(const v1::OptimizerConfig& p);
void ToProto(const OptimizerOptions& o, v1::OptimizerConfig* p);
absl::StatusOr<TableOptions> FromProto(const v1::TableConfig& p);
void ToProto(const TableOptions& o, v1::TableConfig* p);
absl::StatusOr<DenseOptions> FromProto(const v1::DenseConfig& p);
void ToProto(const DenseOptions& o, v1::DenseConfig* p);
CheckpointInfo FromProto(const v1::CheckpointInfo& p);
void ToProto(const CheckpointInfo& i, v1::CheckpointInfo* p);

}  // namespace brook::ps
