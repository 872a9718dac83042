#include "ps/client/batch_plan.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "sharding/sharding.h"

namespace brook::ps {
namespace {

// The caller's buffer of a part: rows to fill (pull) or gradients (push).
size_t Floats(const TablePull& p) { return p.out.size(); }
size_t Floats(const TablePush& p) { return p.grads.size(); }
size_t Floats(const DensePull& p) { return p.out.size(); }
size_t Floats(const DensePush& p) { return p.grads.size(); }

}  // namespace

template <typename TablePart, typename DensePart>
absl::StatusOr<BatchPlan> BatchPlan::Build(absl::Span<const TablePart> tables,
                                           absl::Span<const DensePart> dense,
                                           const DenseDirectory& directory, int32_t num_shards,
                                           std::string_view what) {
  BatchPlan plan;
  plan.tables_.resize(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const TablePart& part = tables[i];
    ASSIGN_OR_RETURN(plan.tables_[i].dim,
                     InferDim(part.table, part.keys.size(), Floats(part), what));
  }
  plan.dense_shard_.resize(dense.size());
  for (size_t d = 0; d < dense.size(); ++d) {
    ASSIGN_OR_RETURN(DenseDirectory::Entry e, directory.Find(dense[d].name));
    if (Floats(dense[d]) != e.num_floats) {
      return absl::InvalidArgumentError(
          absl::StrCat("dense ", std::string(what), " of '", std::string(dense[d].name), "' with ",
                       Floats(dense[d]), " floats; the variable has ", e.num_floats));
    }
    plan.dense_shard_[d] = e.shard;
  }
  // Routing last: nothing is hashed for a batch that fails its checks.
  for (size_t i = 0; i < tables.size(); ++i) {
    if (tables[i].keys.empty()) continue;
    plan.tables_[i].plan.emplace(sharding::TableId(tables[i].table), tables[i].keys, num_shards);
  }
  return plan;
}

absl::StatusOr<BatchPlan> BatchPlan::ForPull(absl::Span<const TablePull> tables,
                                             absl::Span<const DensePull> dense,
                                             const DenseDirectory& directory, int32_t num_shards) {
  return Build(tables, dense, directory, num_shards, "pull");
}

absl::StatusOr<BatchPlan> BatchPlan::ForPush(absl::Span<const TablePush> tables,
                                             absl::Span<const DensePush> dense,
                                             const DenseDirectory& directory, int32_t num_shards) {
  return Build(tables, dense, directory, num_shards, "push");
}

}  // namespace brook::ps
