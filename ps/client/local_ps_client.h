// PsClient over N in-process ParameterServers (shard i = shards[i]): the same
// routing, dedup, gradient summing and sequence numbers as GrpcPsClient, with
// no network, so a whole training step runs inside a unit test.
// Shards are called one after another on the caller's thread.
//
// Thread-safe (ParameterServer is).
#pragma once

#include <memory>
#include <string_view>
#include <vector>

#include "ps/client/dense_directory.h"
#include "ps/client/ps_client.h"
#include "ps/parameter_server.h"

namespace brook::ps {

class LocalPsClient final : public PsClient {
 public:
  // Every shard must outlive the client; shards[i]->options().shard_index
  // should be i. client_id 0 draws a random one.
  explicit LocalPsClient(std::vector<ParameterServer*> shards, uint64_t client_id = 0);

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
  absl::StatusOr<std::vector<ServerStats>> Stats() override;
  absl::StatusOr<std::vector<CheckpointInfo>> Checkpoint(const CheckpointOptions& options) override;
  absl::StatusOr<std::vector<RestoreInfo>> Restore(const std::string& dir) override;
  absl::StatusOr<std::vector<ImportInfo>> ImportTables(const ImportOptions& options) override;
  absl::StatusOr<std::vector<StartupInfo>> FenceClients(
      absl::Span<const uint64_t> client_ids) override;
  absl::StatusOr<ChangeSet> ChangesSince(std::string_view prefix, const ChangeCursor& cursor,
                                         uint64_t max_keys_per_shard) override;
  absl::Status ScanRows(std::string_view table, const ChunkFn& chunk) override;

 private:
  const std::vector<ParameterServer*> shards_;  // not owned
  DenseDirectory dense_;
};

// N fresh in-memory shards (ParameterServerOptions defaults, shard i of N)
// and a LocalPsClient over them: a whole PS in this process, for
// `brook trainer --local-ps`, benchmarks and tests.
struct LocalPsCluster {
  explicit LocalPsCluster(int num_shards);
  std::vector<std::unique_ptr<ParameterServer>> shards;
  std::unique_ptr<LocalPsClient> client;
};

}  // namespace brook::ps
