#include "ps/client/ps_client.h"

#include "absl/strings/str_cat.h"
#include "common/random_id.h"

namespace brook::ps {

PsClient::PsClient(int32_t num_shards, uint64_t client_id)
    : num_shards_(num_shards), client_id_(client_id != 0 ? client_id : RandomNonZeroId()) {}

absl::StatusOr<uint64_t> PsClient::PartSequences::Next(int32_t shard) {
  if (stream_.id == 0) return client_->NextSequence();
  if (stream_.step >= (uint64_t{1} << (64 - kStreamPartBits))) {
    return absl::InvalidArgumentError(
        absl::StrCat("push batch: stream step ", stream_.step, " is too large"));
  }
  uint64_t& part = next_part_[static_cast<size_t>(shard)];
  if (part >= kMaxStreamParts) {
    return absl::InvalidArgumentError(absl::StrCat(
        "push batch: more than ", kMaxStreamParts, " parts for PS shard ", shard,
        " in one stream step (fewer tables, or a larger max_request_bytes)"));
  }
  return stream_.step << kStreamPartBits | part++;
}

}  // namespace brook::ps
