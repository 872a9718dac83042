// Where a client's dense variables live: name -> (shard, size), filled by
// PsClient::CreateDense from sharding::PlaceDenseVariables. Shared by the
// gRPC and the local client. Thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "ps/options.h"

namespace brook::ps {

class DenseDirectory {
 public:
  struct Entry {
    int32_t shard = 0;
    uint64_t num_floats = 0;
  };

  // Validates the options, places the set and records it; returns each
  // variable's shard, parallel to `variables`. INVALID_ARGUMENT for a bad
  // variable or duplicate names; FAILED_PRECONDITION if a name recorded
  // earlier would now get another shard or size (nothing is recorded then).
  absl::StatusOr<std::vector<int32_t>> Place(absl::Span<const DenseOptions> variables,
                                             int32_t num_shards);
  // NOT_FOUND for a name never placed.
  absl::StatusOr<Entry> Find(std::string_view name) const;

 private:
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace brook::ps
