#include "ps/client/dense_directory.h"

#include "absl/strings/str_cat.h"
#include "sharding/sharding.h"

namespace brook::ps {

absl::StatusOr<std::vector<int32_t>> DenseDirectory::Place(absl::Span<const DenseOptions> variables,
                                                           int32_t num_shards) {
  std::vector<sharding::DenseVariable> vars;
  vars.reserve(variables.size());
  for (const DenseOptions& v : variables) {
    if (absl::Status st = v.Validate(); !st.ok()) return st;
    vars.push_back({v.name, v.num_floats()});
  }
  absl::StatusOr<std::vector<int32_t>> shards = sharding::PlaceDenseVariables(vars, num_shards);
  if (!shards.ok()) return shards.status();
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < vars.size(); ++i) {
    auto it = entries_.find(vars[i].name);
    if (it != entries_.end() &&
        (it->second.shard != (*shards)[i] || it->second.num_floats != vars[i].num_floats)) {
      return absl::FailedPreconditionError(absl::StrCat(
          "dense variable '", vars[i].name, "' was declared before with ", it->second.num_floats,
          " floats on shard ", it->second.shard, "; now ", vars[i].num_floats, " floats on shard ",
          (*shards)[i], " (declare the full set once)"));
    }
  }
  for (size_t i = 0; i < vars.size(); ++i) {
    entries_[vars[i].name] = Entry{(*shards)[i], vars[i].num_floats};
  }
  return shards;
}

absl::StatusOr<DenseDirectory::Entry> DenseDirectory::Find(std::string_view name) const {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(std::string(name));
  if (it == entries_.end()) {
    return absl::NotFoundError(
        absl::StrCat("dense variable '", std::string(name), "' was not declared with CreateDense"));
  }
  return it->second;
}

}  // namespace brook::ps
