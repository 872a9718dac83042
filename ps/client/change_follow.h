// PsClient::ChangesSince over any transport: the clients give it a way to
// read shards' change logs (ShardChangeReader), it does the rest: the cursor
// and its incarnation check, OUT_OF_RANGE as "copy everything", rounds while
// a shard has more, the prefix stripped and keys merged over shards.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "ps/client/ps_client.h"

namespace brook::ps {

// One shard's answer to a change-log read (ParameterServer::ChangesSince).
struct ShardChanges {
  uint64_t incarnation = 0;
  uint64_t next = 0;  // head_only: the shard's ChangeLogHead()
  bool more = false;
  std::vector<std::pair<std::string, std::vector<uint64_t>>> tables;  // names as on the PS
  std::vector<std::string> dense;
};

struct ShardChangeAsk {
  int32_t shard = 0;
  uint64_t since = 0;
};

// Reads the asked shards (all at once if it can): one result per ask, in
// ask order, each its shard's answer or error (OUT_OF_RANGE: the position is
// no longer held). With head_only only incarnation and next (the head) are
// read. An error of the whole read fails the call.
using ShardChangeReader = std::function<absl::StatusOr<std::vector<absl::StatusOr<ShardChanges>>>(
    absl::Span<const ShardChangeAsk> asks, bool head_only)>;

// PsClient::ChangesSince's contract, over `read`; at most max_rounds reads
// of any shard.
absl::StatusOr<ChangeSet> FollowChanges(int32_t num_shards, std::string_view prefix,
                                        const ChangeCursor& cursor, int max_rounds,
                                        const ShardChangeReader& read);

// The cursor's incarnation for these shards' incarnations (never 0).
uint64_t CombineIncarnations(absl::Span<const uint64_t> incarnations);

}  // namespace brook::ps
