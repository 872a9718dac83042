// The routing of one PullBatch / PushBatch, shared by every PsClient: every
// part checked before anything is sent (a table's buffer against its keys,
// a dense variable against the client's directory), and each table's
// KeyPlan (dedup, shard of every unique key, the way back to the caller's
// order). Built once per call.
//
// Thread-compatible (build one per call).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/client/dense_directory.h"
#include "ps/client/key_plan.h"
#include "ps/client/ps_client.h"

namespace brook::ps {

class BatchPlan {
 public:
  // INVALID_ARGUMENT (naming the table / variable) for a buffer that is not
  // keys x dim or not the variable's size; NOT_FOUND for a dense variable
  // the directory does not know.
  static absl::StatusOr<BatchPlan> ForPull(absl::Span<const TablePull> tables,
                                           absl::Span<const DensePull> dense,
                                           const DenseDirectory& directory, int32_t num_shards);
  static absl::StatusOr<BatchPlan> ForPush(absl::Span<const TablePush> tables,
                                           absl::Span<const DensePush> dense,
                                           const DenseDirectory& directory, int32_t num_shards);

  size_t num_tables() const { return tables_.size(); }
  size_t num_dense() const { return dense_shard_.size(); }
  // Table i's dim (0 when it has no keys) and plan (null when it has none).
  size_t dim(size_t i) const { return tables_[i].dim; }
  const KeyPlan* plan(size_t i) const {
    return tables_[i].plan.has_value() ? &*tables_[i].plan : nullptr;
  }
  // The shard holding dense variable d.
  int32_t dense_shard(size_t d) const { return dense_shard_[d]; }

 private:
  template <typename TablePart, typename DensePart>
  static absl::StatusOr<BatchPlan> Build(absl::Span<const TablePart> tables,
                                         absl::Span<const DensePart> dense,
                                         const DenseDirectory& directory, int32_t num_shards,
                                         std::string_view what);

  struct Table {
    size_t dim = 0;
    std::optional<KeyPlan> plan;
  };
  std::vector<Table> tables_;
  std::vector<int32_t> dense_shard_;
};

}  // namespace brook::ps
