#include "ps/client/prefixed_ps_client.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace brook::ps {

PrefixedPsClient::PrefixedPsClient(PsClient* inner, std::string prefix)
    : PsClient(inner->num_shards(), inner->client_id()),
      inner_(inner),
      prefix_(std::move(prefix)) {}

std::string PrefixedPsClient::Prefixed(std::string_view name) const {
  return absl::StrCat(prefix_, std::string(name));
}

absl::Status PrefixedPsClient::CreateTable(const TableOptions& options) {
  TableOptions o = options;
  o.name = Prefixed(options.name);
  return inner_->CreateTable(o);
}

absl::Status PrefixedPsClient::DropTable(std::string_view table) {
  return inner_->DropTable(Prefixed(table));
}

absl::StatusOr<DroppedTables> PrefixedPsClient::DropTablesWithPrefix(std::string_view prefix) {
  return inner_->DropTablesWithPrefix(Prefixed(prefix));
}

absl::Status PrefixedPsClient::Pull(std::string_view table, absl::Span<const uint64_t> keys,
                                    absl::Span<float> out) {
  return inner_->Pull(Prefixed(table), keys, out);
}

absl::Status PrefixedPsClient::Push(std::string_view table, absl::Span<const uint64_t> keys,
                                    absl::Span<const float> grads, int64_t step) {
  return inner_->Push(Prefixed(table), keys, grads, step);
}

absl::Status PrefixedPsClient::LocateDense(absl::Span<const DenseOptions> variables) {
  std::vector<DenseOptions> prefixed(variables.begin(), variables.end());
  for (DenseOptions& v : prefixed) v.name = Prefixed(v.name);
  return inner_->LocateDense(prefixed);
}

absl::Status PrefixedPsClient::CreateDense(absl::Span<const DenseOptions> variables) {
  std::vector<DenseOptions> prefixed(variables.begin(), variables.end());
  for (DenseOptions& v : prefixed) v.name = Prefixed(v.name);
  return inner_->CreateDense(prefixed);
}

absl::Status PrefixedPsClient::PullDense(std::string_view name, absl::Span<float> out) {
  return inner_->PullDense(Prefixed(name), out);
}

absl::Status PrefixedPsClient::PushDense(std::string_view name, absl::Span<const float> grads,
                                         int64_t step) {
  return inner_->PushDense(Prefixed(name), grads, step);
}

// The parts below hold string_views: every name is built first (the vectors
// are not resized afterwards), then viewed.
absl::Status PrefixedPsClient::PullBatch(absl::Span<const TablePull> tables,
                                         absl::Span<const DensePull> dense) {
  std::vector<std::string> names;
  names.reserve(tables.size() + dense.size());
  for (const TablePull& t : tables) names.push_back(Prefixed(t.table));
  for (const DensePull& d : dense) names.push_back(Prefixed(d.name));
  std::vector<TablePull> t2(tables.begin(), tables.end());
  std::vector<DensePull> d2(dense.begin(), dense.end());
  for (size_t i = 0; i < t2.size(); ++i) t2[i].table = names[i];
  for (size_t i = 0; i < d2.size(); ++i) d2[i].name = names[t2.size() + i];
  return inner_->PullBatch(t2, d2);
}

absl::Status PrefixedPsClient::PushBatch(absl::Span<const TablePush> tables,
                                         absl::Span<const DensePush> dense, int64_t step,
                                         float learning_rate_scale, const PushStream& stream) {
  std::vector<std::string> names;
  names.reserve(tables.size() + dense.size());
  for (const TablePush& t : tables) names.push_back(Prefixed(t.table));
  for (const DensePush& d : dense) names.push_back(Prefixed(d.name));
  std::vector<TablePush> t2(tables.begin(), tables.end());
  std::vector<DensePush> d2(dense.begin(), dense.end());
  for (size_t i = 0; i < t2.size(); ++i) t2[i].table = names[i];
  for (size_t i = 0; i < d2.size(); ++i) d2[i].name = names[t2.size() + i];
  return inner_->PushBatch(t2, d2, step, learning_rate_scale, stream);
}

absl::StatusOr<std::vector<ServerStats>> PrefixedPsClient::Stats() { return inner_->Stats(); }

absl::StatusOr<std::vector<CheckpointInfo>> PrefixedPsClient::Checkpoint(
    const CheckpointOptions& options) {
  return inner_->Checkpoint(options);
}

absl::StatusOr<std::vector<RestoreInfo>> PrefixedPsClient::Restore(const std::string& dir) {
  return inner_->Restore(dir);
}

absl::StatusOr<std::vector<ImportInfo>> PrefixedPsClient::ImportTables(
    const ImportOptions& options) {
  ImportOptions o = options;
  o.to_prefix = prefix_ + options.to_prefix;
  return inner_->ImportTables(o);
}

absl::StatusOr<std::vector<StartupInfo>> PrefixedPsClient::FenceClients(
    absl::Span<const uint64_t> client_ids) {
  return inner_->FenceClients(client_ids);
}

absl::StatusOr<ChangeSet> PrefixedPsClient::ChangesSince(std::string_view prefix,
                                                         const ChangeCursor& cursor,
                                                         uint64_t max_keys_per_shard) {
  // The inner client strips all of prefix_ + prefix: the caller's names
  // are without prefix_ already, and without `prefix` as it asked.
  return inner_->ChangesSince(Prefixed(prefix), cursor, max_keys_per_shard);
}

absl::Status PrefixedPsClient::ScanRows(std::string_view table, const ChunkFn& chunk) {
  return inner_->ScanRows(Prefixed(table), chunk);
}

}  // namespace brook::ps
