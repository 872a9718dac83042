// ParameterServer::PullBatch / PushBatch: everything one training step pulls
// or pushes on this shard, in one call (docs/decisions.md "PS wire and
// client"). A batch is checked whole before anything happens, then its parts
// run as the single-table calls would; a push batch's parts keep their own
// exactly-once sequence numbers and share one checkpoint gate and one WAL
// sync.
#include <algorithm>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/status_macros.h"
#include "ps/internal/key_batch.h"
#include "ps/internal/ps_state.h"
#include "ps/parameter_server.h"
#include "ps/table.h"

namespace brook::ps {
namespace {

// A prepared push keeps its grouped keys in a KeyBatch until it is applied,
// so a batch of parts prepared together needs one each. Per thread, grown to
// the most parts a batch on this thread has had; reused after that.
std::vector<std::unique_ptr<internal::KeyBatch>>& ThreadBatches(size_t n) {
  thread_local std::vector<std::unique_ptr<internal::KeyBatch>> batches;
  while (batches.size() < n) batches.push_back(std::make_unique<internal::KeyBatch>());
  return batches;
}

}  // namespace

absl::Status ParameterServer::PullBatch(absl::Span<const TablePull> tables,
                                        absl::Span<const DensePull> dense) {
  const uint64_t limit = options_.max_keys_per_request;
  std::vector<std::shared_ptr<Table>> found_tables(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const TablePull& part = tables[i];
    ASSIGN_OR_RETURN(found_tables[i], state_->FindTable(part.table));
    if (part.keys.size() > limit) {
      return internal::TooManyKeys("table", part.table, part.keys.size(), limit);
    }
    RETURN_IF_ERROR(found_tables[i]->CheckPullSize(part.keys.size(), part.out.size()));
  }
  std::vector<std::shared_ptr<internal::DenseVariable>> found_dense(dense.size());
  for (size_t i = 0; i < dense.size(); ++i) {
    ASSIGN_OR_RETURN(found_dense[i], state_->FindDense(dense[i].name));
    RETURN_IF_ERROR(found_dense[i]->CheckPullSize(dense[i].out.size()));
  }
  // Every part is checked before the first is read.
  for (size_t i = 0; i < tables.size(); ++i) {
    RETURN_IF_ERROR(found_tables[i]->PullChecked(tables[i].keys, tables[i].out));
  }
  for (size_t i = 0; i < dense.size(); ++i) {
    RETURN_IF_ERROR(found_dense[i]->Pull(dense[i].out));
  }
  return absl::OkStatus();
}

absl::StatusOr<PushBatchOutcome> ParameterServer::PushBatch(absl::Span<const TablePushPart> tables,
                                                            absl::Span<const DensePushPart> dense,
                                                            const PushContext& ctx) {
  // Stage 1: every check that needs no row state, for every part, before
  // anything is claimed or applied.
  RETURN_IF_ERROR(CheckLearningRateScale(ctx.learning_rate_scale));
  const uint64_t limit = options_.max_keys_per_request;
  std::vector<std::unique_ptr<internal::KeyBatch>>& batches = ThreadBatches(tables.size());
  std::vector<std::shared_ptr<Table>> found_tables(tables.size());
  std::vector<PreparedPush> prepared(tables.size());
  for (size_t i = 0; i < tables.size(); ++i) {
    const TablePushPart& part = tables[i];
    ASSIGN_OR_RETURN(found_tables[i], state_->FindTable(part.table));
    if (part.keys.size() > limit) {
      return internal::TooManyKeys("table", part.table, part.keys.size(), limit);
    }
    ASSIGN_OR_RETURN(prepared[i],
                     found_tables[i]->PreparePush(part.keys, part.grads, batches[i].get()));
    prepared[i].helpers = ctx.helpers;
  }
  std::vector<std::shared_ptr<internal::DenseVariable>> found_dense(dense.size());
  std::vector<uint64_t> nonfinite(dense.size());
  for (size_t i = 0; i < dense.size(); ++i) {
    const DensePushPart& part = dense[i];
    ASSIGN_OR_RETURN(found_dense[i], state_->FindDense(part.name));
    if (part.grads.size() > limit) {
      return internal::TooManyKeys("dense variable", part.name, part.grads.size(), limit);
    }
    ASSIGN_OR_RETURN(nonfinite[i], found_dense[i]->Check(part.grads));
  }
  // Parts in increasing sequence order (tables first, then dense, for
  // client 0): claims are taken in one global order, so two batches sharing
  // sequences cannot each hold one the other waits for.
  const size_t n = tables.size() + dense.size();
  auto sequence_of = [&](size_t p) {
    return p < tables.size() ? tables[p].sequence : dense[p - tables.size()].sequence;
  };
  auto name_of = [&](size_t p) {
    return p < tables.size()
               ? absl::StrCat("table '", AbslView(tables[p].table), "'")
               : absl::StrCat("dense variable '", AbslView(dense[p - tables.size()].name), "'");
  };
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  const bool dedup = ctx.client_id != 0 || ctx.stream_id != 0;
  if (dedup) {
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return sequence_of(a) < sequence_of(b); });
    for (size_t k = 1; k < n; ++k) {
      if (sequence_of(order[k]) == sequence_of(order[k - 1])) {
        return absl::InvalidArgumentError(
            absl::StrCat("push batch: ", name_of(order[k - 1]), " and ", name_of(order[k]),
                         " share sequence ", sequence_of(order[k]), " (each part needs its own)"));
      }
    }
  }

  // Stage 2: apply, part by part, each exactly once.
  PushBatchOutcome outcome;
  outcome.tables.assign(tables.size(), PushOutcome::kApplied);
  outcome.dense.assign(dense.size(), PushOutcome::kApplied);
  RETURN_IF_ERROR(state_->WalWritable());
  internal::GateReader gate(&state_->gate);
  std::vector<uint64_t> claimed;  // settled after the WAL sync
  claimed.reserve(n);
  std::vector<internal::ChangePart> changed;  // one change-log record for the batch
  if (state_->changes.enabled()) changed.reserve(n);
  uint64_t max_lsn = 0;
  bool saw_duplicate = false;
  absl::Status error;
  for (size_t p : order) {
    PushContext part_ctx = ctx;
    part_ctx.sequence = sequence_of(p);
    if (dedup) {
      const internal::PushDedup::Claim claim =
          internal::BeginPush(state_->dedup, ctx, part_ctx.sequence);
      if (claim == internal::PushDedup::Claim::kDuplicate) {
        saw_duplicate = true;
        if (p < tables.size()) {
          outcome.tables[p] = PushOutcome::kDuplicate;
          found_tables[p]->CountDuplicate();
        } else {
          outcome.dense[p - tables.size()] = PushOutcome::kDuplicate;
        }
        continue;
      }
      if (claim == internal::PushDedup::Claim::kFenced) {
        error = internal::FencedError(ctx.client_id);
        break;
      }
      if (claim == internal::PushDedup::Claim::kTooOld) {
        error = absl::FailedPreconditionError(
            absl::StrCat(name_of(p), ": push sequence ", part_ctx.sequence, " of client ",
                         ctx.client_id, " is older than the dedup window (", state_->dedup.window(),
                         " sequences); cannot tell whether it was applied"));
        break;
      }
    }
    absl::Status applied;
    uint64_t lsn = 0;
    if (p < tables.size()) {
      applied = state_->ApplyTablePush(*found_tables[p], prepared[p], part_ctx, &lsn);
      // As Push: a part refused for room changed nothing.
      if (state_->changes.enabled() && !absl::IsResourceExhausted(applied)) {
        changed.push_back({.name = tables[p].table, .keys = tables[p].keys});
      }
    } else {
      const size_t d = p - tables.size();
      lsn = state_->ApplyDensePush(*found_dense[d], dense[d].name, dense[d].grads, nonfinite[d],
                                   part_ctx);
      if (state_->changes.enabled()) changed.push_back({.name = dense[d].name, .dense = true});
    }
    if (!applied.ok()) {
      if (dedup) internal::EndPush(state_->dedup, ctx, part_ctx.sequence, false);
      error = std::move(applied);
      break;
    }
    if (dedup) claimed.push_back(part_ctx.sequence);
    max_lsn = std::max(max_lsn, lsn);
  }
  state_->changes.Append(changed);
  // Acknowledged only once logged (as a single push): one write for the batch.
  // A duplicate part is acknowledged only once its first copy is logged.
  absl::Status synced;
  if (saw_duplicate) {
    synced = state_->WalDurable();
  } else if (state_->wal != nullptr && max_lsn > 0) {
    synced = state_->wal->Sync(max_lsn);
  }
  // Claimed parts are in memory whether or not the WAL has them yet: a retry
  // must be a duplicate (acknowledged once logged), never a second update.
  for (uint64_t sequence : claimed) internal::EndPush(state_->dedup, ctx, sequence, true);
  RETURN_IF_ERROR(error);
  RETURN_IF_ERROR(synced);
  return outcome;
}

}  // namespace brook::ps
