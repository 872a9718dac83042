// ParameterServer: what a follower uses (docs/architecture.md "Change log"):
// the change log (ChangesSince, ChangeLogHead), a copy of every row
// (ScanRows), and, on the follower's own PS, setting weights (AssignRows,
// AssignDense) and removing rows the followed PS no longer holds (EraseRows).
#include <memory>
#include <string>

#include "absl/functional/function_ref.h"
#include "absl/strings/str_cat.h"
#include "common/absl_compat.h"
#include "common/status_macros.h"
#include "ps/internal/change_log.h"
#include "ps/internal/dense_variable.h"
#include "ps/internal/ps_state.h"
#include "ps/parameter_server.h"
#include "ps/table.h"

namespace brook::ps {

absl::StatusOr<Changes> ParameterServer::ChangesSince(std::string_view prefix, uint64_t since,
                                                      uint64_t max_keys) const {
  ASSIGN_OR_RETURN(Changes changes, state_->changes.Since(prefix, since, max_keys));
  changes.incarnation = state_->startup.incarnation;
  return changes;
}

uint64_t ParameterServer::ChangeLogHead() const { return state_->changes.head(); }

absl::Status ParameterServer::ScanRows(std::string_view table, size_t chunk_rows,
                                       const ChunkVisitor& fn) const {
  if (chunk_rows == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("table '", AbslView(table), "': scan in chunks of 0 rows"));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(table));
  return t->ScanWeights(chunk_rows,
                        [&](absl::Span<const uint64_t> keys, absl::Span<const float> weights) {
                          return fn(keys, weights);
                        });
}

absl::Status ParameterServer::WriteRows(std::string_view table, absl::Span<const uint64_t> keys,
                                        absl::FunctionRef<absl::Status(Table&)> write) {
  ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(table));
  if (keys.size() > options_.max_keys_per_request) {
    return internal::TooManyKeys("table", table, keys.size(), options_.max_keys_per_request);
  }
  absl::Status s;
  {
    internal::GateReader gate(&state_->gate);
    s = write(*t);
  }
  if (s.ok() || absl::IsUnavailable(s)) {
    state_->changes.Append(internal::ChangePart{.name = table, .keys = keys});
  }
  return s;
}

absl::Status ParameterServer::AssignRows(std::string_view table, absl::Span<const uint64_t> keys,
                                         absl::Span<const float> weights) {
  return WriteRows(table, keys, [&](Table& t) { return t.AssignRows(keys, weights); });
}

absl::Status ParameterServer::EraseRows(std::string_view table, absl::Span<const uint64_t> keys) {
  return WriteRows(table, keys, [&](Table& t) { return t.ImportDeletes(keys); });
}

absl::Status ParameterServer::AssignDense(std::string_view name, absl::Span<const float> values) {
  ASSIGN_OR_RETURN(std::shared_ptr<internal::DenseVariable> v, state_->FindDense(name));
  {
    internal::GateReader gate(&state_->gate);
    RETURN_IF_ERROR(v->Assign(values));
  }
  state_->changes.Append(internal::ChangePart{.name = name, .dense = true});
  return absl::OkStatus();
}

}  // namespace brook::ps
