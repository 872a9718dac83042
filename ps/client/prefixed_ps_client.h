// A PsClient that puts one job's tables and dense variables under a name
// prefix on shared parameter servers: table T is "<prefix>T" on the PS, and
// so is dense variable V. The trainer (and anything else written against
// PsClient with a model's plain names) runs unchanged on top of it, while
// jobs sharing the PS never see each other's rows.
//
//   PrefixedPsClient job_ps(shared_ps.get(), chief::TablePrefix(job_id));
//   ASSIGN_OR_RETURN(auto trainer, trainer::Trainer::Create(&job_ps, ...));
//
// Stats, Checkpoint and Restore act on whole shards (every job's tables) and
// pass through unchanged. Errors are the inner client's; they name the
// prefixed table or variable, as the PS knows it.
//
// Thread-safe if the inner client is (every PsClient is).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "ps/client/ps_client.h"

namespace brook::ps {

class PrefixedPsClient final : public PsClient {
 public:
  // `inner` is not owned and must outlive this client. Pushes use the inner
  // client's id and sequence numbers, so exactly-once holds across every
  // PrefixedPsClient sharing one inner client.
  PrefixedPsClient(PsClient* inner, std::string prefix);
  PrefixedPsClient(const PrefixedPsClient&) = delete;
  PrefixedPsClient& operator=(const PrefixedPsClient&) = delete;

  const std::string& prefix() const { return prefix_; }
  PsClient* inner() const { return inner_; }
  // prefix() + name: what the PS calls the table or variable `name`.
  std::string Prefixed(std::string_view name) const;

  absl::Status CreateTable(const TableOptions& options) override;
  absl::Status DropTable(std::string_view table) override;
  absl::StatusOr<DroppedTables> DropTablesWithPrefix(std::string_view prefix) override;
  absl::Status Pull(std::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<float> out) override;
  absl::Status Push(std::string_view table, absl::Span<const uint64_t> keys,
                    absl::Span<const float> grads, int64_t step) override;
  absl::Status CreateDense(absl::Span<const DenseOptions> variables) override;
  absl::Status LocateDense(absl::Span<const DenseOptions> variables) override;
  absl::Status PullDense(std::string_view name, absl::Span<float> out) override;
  absl::Status PushDense(std::string_view name, absl::Span<const float> grads,
                         int64_t step) override;
  absl::Status PullBatch(absl::Span<const TablePull> tables,
                         absl::Span<const DensePull> dense) override;
  using PsClient::PushBatch;
  absl::Status PushBatch(absl::Span<const TablePush> tables, absl::Span<const DensePush> dense,
                         int64_t step, float learning_rate_scale,
                         const PushStream& stream) override;
  // Whole shards: every job's tables and variables, with their PS names.
  absl::StatusOr<std::vector<ServerStats>> Stats() override;
  absl::StatusOr<std::vector<CheckpointInfo>> Checkpoint(const CheckpointOptions& options) override;
  absl::StatusOr<std::vector<RestoreInfo>> Restore(const std::string& dir) override;
  // Imports under prefix() + options.to_prefix.
  absl::StatusOr<std::vector<ImportInfo>> ImportTables(const ImportOptions& options) override;
  absl::StatusOr<std::vector<StartupInfo>> FenceClients(
      absl::Span<const uint64_t> client_ids) override;
  // Under prefix() + prefix; the names come back without either.
  absl::StatusOr<ChangeSet> ChangesSince(std::string_view prefix, const ChangeCursor& cursor,
                                         uint64_t max_keys_per_shard) override;
  absl::Status ScanRows(std::string_view table, const ChunkFn& chunk) override;
  // The inner client's: every prefix's calls through it.
  PsTraffic Traffic() const override { return inner_->Traffic(); }

 private:
  PsClient* const inner_;  // not owned
  const std::string prefix_;
};

}  // namespace brook::ps
