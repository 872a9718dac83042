#include "ps/parameter_server.h"

#include <algorithm>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "ps/internal/dense_variable.h"
#include "ps/internal/mutex.h"
#include "ps/internal/push_dedup.h"
#include "ps/table.h"

namespace brook::ps {
namespace {

// Debian's abseil has its own string_view type.
absl::string_view Av(std::string_view s) { return absl::string_view(s.data(), s.size()); }

}  // namespace

// Tables and dense variables are held by shared_ptr because ownership really
// is shared: the registry, and every request in flight (DropTable while a
// pull runs frees the table when that pull ends).
struct ParameterServer::State {
  explicit State(const ParameterServerOptions& o) : dedup(std::max<uint32_t>(o.dedup_window, 1)) {}

  internal::PushDedup dedup;

  mutable internal::RwMutex mu;
  absl::flat_hash_map<std::string, std::shared_ptr<Table>> tables ABSL_GUARDED_BY(mu);
  absl::flat_hash_map<std::string, std::shared_ptr<internal::DenseVariable>> dense
      ABSL_GUARDED_BY(mu);

  absl::StatusOr<std::shared_ptr<Table>> FindTable(std::string_view name) const {
    internal::ReaderLock lock(&mu);
    auto it = tables.find(Av(name));
    if (it == tables.end()) return absl::NotFoundError(absl::StrCat("no table '", Av(name), "'"));
    return it->second;
  }
  absl::StatusOr<std::shared_ptr<internal::DenseVariable>> FindDense(std::string_view name) const {
    internal::ReaderLock lock(&mu);
    auto it = dense.find(Av(name));
    if (it == dense.end())
      return absl::NotFoundError(absl::StrCat("no dense variable '", Av(name), "'"));
    return it->second;
  }
};

namespace {

absl::Status TooManyKeys(std::string_view what, std::string_view name, size_t n, uint64_t limit) {
  return absl::ResourceExhaustedError(absl::StrCat(Av(what), " '", Av(name), "': request of ", n,
                                                   " exceeds max_keys_per_request ", limit));
}

// Runs `apply` exactly once per (client, sequence); client 0 skips dedup.
template <typename Apply>
absl::StatusOr<PushOutcome> Deduplicated(internal::PushDedup& dedup, const PushContext& ctx,
                                         std::string_view kind, std::string_view name, Apply apply,
                                         bool* duplicate) {
  *duplicate = false;
  if (ctx.client_id == 0) {
    RETURN_IF_ERROR(apply());
    return PushOutcome::kApplied;
  }
  switch (dedup.Begin(ctx.client_id, ctx.sequence)) {
    case internal::PushDedup::Claim::kDuplicate:
      *duplicate = true;
      return PushOutcome::kDuplicate;
    case internal::PushDedup::Claim::kTooOld:
      return absl::FailedPreconditionError(
          absl::StrCat(Av(kind), " '", Av(name), "': push sequence ", ctx.sequence, " of client ",
                       ctx.client_id, " is older than the dedup window (", dedup.window(),
                       " sequences); cannot tell whether it was applied"));
    case internal::PushDedup::Claim::kFresh:
      break;
  }
  const absl::Status s = apply();
  dedup.End(ctx.client_id, ctx.sequence, s.ok());
  RETURN_IF_ERROR(s);
  return PushOutcome::kApplied;
}

}  // namespace

ParameterServer::ParameterServer(const ParameterServerOptions& options)
    : options_(options), state_(std::make_unique<State>(options)) {}

ParameterServer::~ParameterServer() = default;

absl::Status ParameterServer::CreateTable(const TableOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  internal::WriterLock lock(&state_->mu);
  auto it = state_->tables.find(options.name);
  if (it != state_->tables.end()) {
    if (it->second->options() == options) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("table '", options.name, "' exists with different options"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Table> table, Table::Create(options, options_.now));
  state_->tables.emplace(options.name, std::move(table));
  return absl::OkStatus();
}

absl::Status ParameterServer::DropTable(std::string_view name) {
  internal::WriterLock lock(&state_->mu);
  auto it = state_->tables.find(Av(name));
  if (it == state_->tables.end())
    return absl::NotFoundError(absl::StrCat("no table '", Av(name), "'"));
  state_->tables.erase(it);
  return absl::OkStatus();
}

absl::Status ParameterServer::Pull(std::string_view table, absl::Span<const uint64_t> keys,
                                   absl::Span<float> out) {
  ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(table));
  if (keys.size() > options_.max_keys_per_request) {
    return TooManyKeys("table", table, keys.size(), options_.max_keys_per_request);
  }
  return t->Pull(keys, out);
}

absl::StatusOr<PushOutcome> ParameterServer::Push(std::string_view table,
                                                  absl::Span<const uint64_t> keys,
                                                  absl::Span<const float> grads,
                                                  const PushContext& ctx) {
  ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(table));
  if (keys.size() > options_.max_keys_per_request) {
    return TooManyKeys("table", table, keys.size(), options_.max_keys_per_request);
  }
  // Every stateless check happens before the dedup claim, so a bad request
  // neither changes rows nor consumes its sequence number.
  ASSIGN_OR_RETURN(PreparedPush prepared, t->PreparePush(keys, grads));
  bool duplicate = false;
  absl::StatusOr<PushOutcome> out = Deduplicated(
      state_->dedup, ctx, "table", table, [&] { return t->ApplyPush(prepared, ctx.step); },
      &duplicate);
  if (duplicate) t->CountDuplicate();
  return out;
}

absl::Status ParameterServer::CreateDense(const DenseOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  if (options.num_floats() > options_.max_keys_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense variable '", options.name, "': shape has ", options.num_floats(),
                     " floats, more than max_keys_per_request ", options_.max_keys_per_request,
                     "; it could never be pushed"));
  }
  internal::WriterLock lock(&state_->mu);
  auto it = state_->dense.find(options.name);
  if (it != state_->dense.end()) {
    if (it->second->options() == options) return absl::OkStatus();
    return absl::AlreadyExistsError(
        absl::StrCat("dense variable '", options.name, "' exists with different options"));
  }
  ASSIGN_OR_RETURN(std::unique_ptr<internal::DenseVariable> v,
                   internal::DenseVariable::Create(options));
  state_->dense.emplace(options.name, std::move(v));
  return absl::OkStatus();
}

absl::Status ParameterServer::DropDense(std::string_view name) {
  internal::WriterLock lock(&state_->mu);
  auto it = state_->dense.find(Av(name));
  if (it == state_->dense.end()) {
    return absl::NotFoundError(absl::StrCat("no dense variable '", Av(name), "'"));
  }
  state_->dense.erase(it);
  return absl::OkStatus();
}

absl::Status ParameterServer::PullDense(std::string_view name, absl::Span<float> out) {
  ASSIGN_OR_RETURN(std::shared_ptr<internal::DenseVariable> v, state_->FindDense(name));
  return v->Pull(out);
}

absl::StatusOr<PushOutcome> ParameterServer::PushDense(std::string_view name,
                                                       absl::Span<const float> grads,
                                                       const PushContext& ctx) {
  ASSIGN_OR_RETURN(std::shared_ptr<internal::DenseVariable> v, state_->FindDense(name));
  if (grads.size() > options_.max_keys_per_request) {
    return TooManyKeys("dense variable", name, grads.size(), options_.max_keys_per_request);
  }
  ASSIGN_OR_RETURN(uint64_t nonfinite, v->Check(grads));
  bool duplicate = false;
  return Deduplicated(
      state_->dedup, ctx, "dense variable", name,
      [&] {
        v->Apply(grads, nonfinite);
        return absl::OkStatus();
      },
      &duplicate);
}

uint64_t ParameterServer::Evict(int64_t current_step) {
  std::vector<std::shared_ptr<Table>> tables;
  {
    internal::ReaderLock lock(&state_->mu);
    for (const auto& [name, t] : state_->tables) tables.push_back(t);
  }
  uint64_t evicted = 0;
  for (const auto& t : tables) evicted += t->Evict(current_step);
  return evicted;
}

absl::Status ParameterServer::ScanTable(std::string_view table, const RowVisitor& fn) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(table));
  t->Scan(
      [&](uint64_t key, absl::Span<const float> w, absl::Span<const float> s) { fn(key, w, s); });
  return absl::OkStatus();
}

ServerStats ParameterServer::Stats() const {
  std::vector<std::shared_ptr<Table>> tables;
  std::vector<std::shared_ptr<internal::DenseVariable>> dense;
  {
    internal::ReaderLock lock(&state_->mu);
    for (const auto& [name, t] : state_->tables) tables.push_back(t);
    for (const auto& [name, v] : state_->dense) dense.push_back(v);
  }
  ServerStats s;
  for (const auto& t : tables) s.tables.push_back(t->Stats());
  for (const auto& v : dense) s.dense.push_back(v->Stats());
  std::sort(s.tables.begin(), s.tables.end(),
            [](const TableStats& a, const TableStats& b) { return a.name < b.name; });
  std::sort(s.dense.begin(), s.dense.end(),
            [](const DenseStats& a, const DenseStats& b) { return a.name < b.name; });
  return s;
}

}  // namespace brook::ps
