#include "sharding/sharding.h"

#include <algorithm>
#include <numeric>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace brook::sharding {

int32_t JumpConsistentHash(uint64_t key, int32_t num_buckets) {
  // From the paper (arXiv:1406.2294): a linear congruential step picks the
  // next candidate bucket; expected O(ln n) iterations.
  int64_t b = -1, j = 0;
  while (j < num_buckets) {
    b = j;
    key = key * 2862933555777941757ULL + 1;
    j = static_cast<int64_t>(static_cast<double>(b + 1) * (static_cast<double>(1LL << 31) /
                                                           static_cast<double>((key >> 33) + 1)));
  }
  return static_cast<int32_t>(b);
}

uint64_t TableId(std::string_view table_name) { return Hash64(table_name); }

int32_t ShardForKey(uint64_t table_id, uint64_t key, int32_t num_shards) {
  return JumpConsistentHash(Mix64(table_id, key), num_shards);
}

void PartitionKeys(uint64_t table_id, absl::Span<const uint64_t> keys, int32_t num_shards,
                   std::vector<std::vector<uint32_t>>* by_shard) {
  by_shard->resize(num_shards);
  for (auto& v : *by_shard) v.clear();
  for (uint32_t i = 0; i < keys.size(); ++i)
    (*by_shard)[ShardForKey(table_id, keys[i], num_shards)].push_back(i);
}

absl::StatusOr<std::vector<int32_t>> PlaceDenseVariables(absl::Span<const DenseVariable> variables,
                                                         int32_t num_shards) {
  if (num_shards <= 0)
    return absl::InvalidArgumentError(absl::StrCat("num_shards must be > 0, got ", num_shards));
  absl::flat_hash_set<std::string> seen;
  for (const auto& v : variables)
    if (!seen.insert(v.name).second)
      return absl::InvalidArgumentError(absl::StrCat("duplicate dense variable \"", v.name, "\""));
  std::vector<size_t> order(variables.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](size_t a, size_t b) {
    if (variables[a].num_floats != variables[b].num_floats)
      return variables[a].num_floats > variables[b].num_floats;
    return variables[a].name < variables[b].name;
  });
  std::vector<uint64_t> load(num_shards, 0);
  std::vector<int32_t> placement(variables.size(), 0);
  for (size_t i : order) {
    int32_t best = static_cast<int32_t>(std::min_element(load.begin(), load.end()) - load.begin());
    placement[i] = best;
    load[best] += variables[i].num_floats;
  }
  return placement;
}

std::vector<WorkUnit> PlanWorkUnits(absl::Span<const DataFile> files, uint64_t records_per_unit) {
  std::vector<WorkUnit> units;
  uint32_t next_id = 0;
  for (const auto& f : files) {
    if (records_per_unit == 0 || f.records == 0) {
      units.push_back({next_id++, f.path, 0, f.records});
      continue;
    }
    for (uint64_t begin = 0; begin < f.records; begin += records_per_unit)
      units.push_back({next_id++, f.path, begin, std::min(f.records, begin + records_per_unit)});
  }
  return units;
}

}  // namespace brook::sharding
