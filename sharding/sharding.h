// Where things live: key -> PS shard, dense variable -> PS shard, and data
// files -> work units. Pure functions with no I/O; the chief, the PS client
// and the PS itself all call these, so they must agree bit for bit.
// Thread-safe (no state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace brook::sharding {

// Lamping & Veach's jump consistent hash: maps `key` to [0, num_buckets),
// moving only ~1/n of keys when a bucket is added. REQUIRES: num_buckets > 0.
int32_t JumpConsistentHash(uint64_t key, int32_t num_buckets);

// A table's id on the wire and in key mixing: Hash64 of its name. Tables with
// different names spread their (often identical, small) keys differently.
uint64_t TableId(std::string_view table_name);

// shard = jump_consistent_hash(mix64(table_id, key), num_shards): docs/architecture.md "Sharding".
// REQUIRES: num_shards > 0.
int32_t ShardForKey(uint64_t table_id, uint64_t key, int32_t num_shards);

// Groups keys by shard: on return (*by_shard)[s] holds the positions (indexes
// into `keys`) of the keys that live on shard s, in input order.
void PartitionKeys(uint64_t table_id, absl::Span<const uint64_t> keys, int32_t num_shards,
                   std::vector<std::vector<uint32_t>>* by_shard);

struct DenseVariable {
  std::string name;
  uint64_t num_floats = 0;
};

// Places dense variables whole across shards, largest first onto the least
// loaded shard (ties: lowest shard, then name order), so placement depends
// only on the set of variables and the shard count. Returns the shard of each
// variable, parallel to `variables`. INVALID_ARGUMENT on duplicate names or
// num_shards <= 0.
absl::StatusOr<std::vector<int32_t>> PlaceDenseVariables(absl::Span<const DenseVariable> variables,
                                                         int32_t num_shards);

struct DataFile {
  std::string path;
  uint64_t records = 0;  // 0 = unknown: the file becomes one unit
};

// A work unit: records [begin, end) of one file (end == 0: to end of file).
struct WorkUnit {
  uint32_t id = 0;
  std::string path;
  uint64_t begin = 0;
  uint64_t end = 0;
};

// Splits files into work units of at most `records_per_unit` records (whole
// files when the count is unknown or records_per_unit is 0). Unit ids are
// dense and follow file order, so a plan is reproducible from its inputs.
std::vector<WorkUnit> PlanWorkUnits(absl::Span<const DataFile> files, uint64_t records_per_unit);

}  // namespace brook::sharding
