#include "ps/client/ps_client.h"

#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/random_id.h"
#include "ps/wire/precision.h"

namespace brook::ps {

PsClient::PsClient(int32_t num_shards, uint64_t client_id)
    : num_shards_(num_shards), client_id_(client_id != 0 ? client_id : RandomNonZeroId()) {}

WirePrecision PsClient::WireOf(std::string_view table) const {
  if (!any_wire_.load(std::memory_order_acquire)) return WirePrecision::kFp32;
  absl::ReaderMutexLock lock(&wire_mu_);
  auto it = wire_.find(absl::string_view(table.data(), table.size()));
  return it == wire_.end() ? WirePrecision::kFp32 : it->second;
}

void PsClient::RememberWire(const TableOptions& options) {
  absl::MutexLock lock(&wire_mu_);
  if (options.wire == WirePrecision::kFp32) {
    wire_.erase(options.name);
    return;
  }
  wire_[options.name] = options.wire;
  any_wire_.store(true, std::memory_order_release);
}

absl::StatusOr<ChangeSet> PsClient::ChangesSince(std::string_view /*prefix*/,
                                                 const ChangeCursor& /*cursor*/,
                                                 uint64_t /*max_keys_per_shard*/) {
  return absl::UnimplementedError("this PS client cannot read the PS change log");
}

absl::Status PsClient::ScanRows(std::string_view /*table*/, const ChunkFn& /*chunk*/) {
  return absl::UnimplementedError("this PS client cannot scan rows");
}

absl::Status PsClient::LocateDense(absl::Span<const DenseOptions> /*variables*/) {
  return absl::UnimplementedError("this PS client cannot locate dense variables");
}

void PsClient::CountPull(size_t keys, size_t values, WirePrecision precision) {
  const size_t value_bytes = wire::WireValueBytes(precision);
  pull_bytes_.fetch_add(keys * sizeof(uint64_t) + values * value_bytes, std::memory_order_relaxed);
}

void PsClient::CountPush(size_t keys, size_t values, WirePrecision precision) {
  const size_t value_bytes = wire::WireValueBytes(precision);
  push_bytes_.fetch_add(keys * sizeof(uint64_t) + values * value_bytes, std::memory_order_relaxed);
}

absl::StatusOr<uint64_t> PsClient::PartSequences::Next(int32_t shard) {
  if (stream_.id == 0) return client_->NextSequence();
  if (stream_.step >= (uint64_t{1} << (64 - kStreamPartBits))) {
    return absl::InvalidArgumentError(
        absl::StrCat("push batch: stream step ", stream_.step, " is too large"));
  }
  uint64_t& part = next_part_[static_cast<size_t>(shard)];
  if (part >= kMaxStreamParts) {
    return absl::InvalidArgumentError(
        absl::StrCat("push batch: more than ", kMaxStreamParts, " parts for PS shard ", shard,
                     " in one stream step (fewer tables, or a larger max_request_bytes)"));
  }
  return stream_.step << kStreamPartBits | part++;
}

absl::StatusOr<size_t> InferDim(std::string_view table, size_t num_keys, size_t floats,
                                std::string_view what) {
  if (num_keys == 0) {
    if (floats != 0) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(what), " of table '",
                                                     std::string(table), "': ", floats,
                                                     " floats for 0 keys"));
    }
    return 0;
  }
  if (floats == 0 || floats % num_keys != 0) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(what), " of table '",
                                                   std::string(table), "': ", floats,
                                                   " floats is not ", num_keys, " keys x dim"));
  }
  if (num_keys > UINT32_MAX) {
    return absl::ResourceExhaustedError(absl::StrCat(std::string(what), " of ", num_keys, " keys"));
  }
  return floats / num_keys;
}

absl::Status CheckPushScale(float learning_rate_scale) {
  const absl::Status st = CheckLearningRateScale(learning_rate_scale);
  if (st.ok()) return st;
  return absl::Status(st.code(), absl::StrCat("push batch: ", st.message()));
}

}  // namespace brook::ps
