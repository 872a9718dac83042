#include "ps/client/change_follow.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/hash.h"
#include "common/status_macros.h"

namespace brook::ps {
namespace {

// Every shard's head: where a follower that copies everything now reads on.
absl::StatusOr<ChangeSet> FullSync(int32_t num_shards, const ShardChangeReader& read) {
  std::vector<ShardChangeAsk> asks(num_shards);
  for (int32_t s = 0; s < num_shards; ++s) asks[s].shard = s;
  ASSIGN_OR_RETURN(std::vector<absl::StatusOr<ShardChanges>> heads, read(asks, true));
  ChangeSet out;
  out.full_sync_needed = true;
  out.cursor.next.resize(num_shards);
  std::vector<uint64_t> incarnations(num_shards);
  for (int32_t s = 0; s < num_shards; ++s) {
    if (!heads[s].ok()) return heads[s].status();
    out.cursor.next[s] = heads[s]->next;
    incarnations[s] = heads[s]->incarnation;
  }
  out.cursor.incarnation = CombineIncarnations(incarnations);
  return out;
}

}  // namespace

uint64_t CombineIncarnations(absl::Span<const uint64_t> incarnations) {
  uint64_t h = Mix64(0x6368616e67657321ULL, incarnations.size());
  for (uint64_t i : incarnations) h = Mix64(h, i);
  return h == 0 ? 1 : h;
}

absl::StatusOr<ChangeSet> FollowChanges(int32_t num_shards, std::string_view prefix,
                                        const ChangeCursor& cursor, int max_rounds,
                                        const ShardChangeReader& read) {
  if (cursor.incarnation == 0 || cursor.next.size() != static_cast<size_t>(num_shards)) {
    return FullSync(num_shards, read);
  }
  std::vector<uint64_t> next = cursor.next;
  std::vector<uint64_t> incarnations(num_shards);
  std::map<std::string, std::vector<uint64_t>, std::less<>> tables;
  std::set<std::string, std::less<>> dense;
  auto strip = [&](const std::string& name) {
    return absl::StartsWith(name, AbslView(prefix)) ? name.substr(prefix.size()) : name;
  };
  std::vector<ShardChangeAsk> asks(num_shards);
  for (int32_t s = 0; s < num_shards; ++s) asks[s] = {.shard = s, .since = next[s]};
  for (int round = 0; !asks.empty() && round < std::max(1, max_rounds); ++round) {
    ASSIGN_OR_RETURN(std::vector<absl::StatusOr<ShardChanges>> answers, read(asks, false));
    std::vector<ShardChangeAsk> again;
    for (size_t i = 0; i < asks.size(); ++i) {
      const int32_t s = asks[i].shard;
      if (absl::IsOutOfRange(answers[i].status())) return FullSync(num_shards, read);
      if (!answers[i].ok()) return answers[i].status();
      ShardChanges& a = *answers[i];
      if (round == 0) {
        incarnations[s] = a.incarnation;
      } else if (a.incarnation != incarnations[s]) {
        return FullSync(num_shards, read);  // restarted between two rounds
      }
      for (auto& [name, keys] : a.tables) {
        std::vector<uint64_t>& merged = tables[strip(name)];
        merged.insert(merged.end(), keys.begin(), keys.end());
      }
      for (const std::string& name : a.dense) dense.insert(strip(name));
      next[s] = a.next;
      if (a.more) again.push_back({.shard = s, .since = a.next});
    }
    // A shard that is not the process the cursor saw: its positions mean
    // nothing here.
    if (round == 0 && CombineIncarnations(incarnations) != cursor.incarnation) {
      return FullSync(num_shards, read);
    }
    asks = std::move(again);
  }
  ChangeSet out;
  out.cursor.incarnation = cursor.incarnation;
  out.cursor.next = std::move(next);
  out.tables.reserve(tables.size());
  for (auto& [name, keys] : tables) {
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    out.tables.emplace_back(name, std::move(keys));
  }
  out.dense.assign(dense.begin(), dense.end());
  return out;
}

}  // namespace brook::ps
