#include "ps/parameter_server.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "brook/v1/storage.pb.h"
#include "common/absl_compat.h"
#include "common/random_id.h"
#include "common/status_macros.h"
#include "ps/config_codec.h"
#include "ps/internal/dense_variable.h"
#include "ps/internal/mutex.h"
#include "ps/internal/ps_state.h"
#include "ps/internal/push_dedup.h"
#include "ps/internal/wal_records.h"
#include "ps/table.h"

namespace brook::ps {
namespace {

// The TableOptions fields in which `held` and `asked` differ, for the error
// of a CreateTable that names an existing table.
std::string DifferingFields(const TableOptions& held, const TableOptions& asked) {
  std::vector<std::string> out;
  auto note = [&](bool differs, const char* field) {
    if (differs) out.push_back(field);
  };
  if (held.dim != asked.dim) out.push_back(absl::StrCat("dim ", held.dim, " vs ", asked.dim));
  note(held.seed != asked.seed, "seed");
  note(!(held.initializer == asked.initializer), "initializer");
  note(held.optimizer.kind != asked.optimizer.kind, "optimizer");
  note(held.optimizer.kind == asked.optimizer.kind && !(held.optimizer == asked.optimizer),
       "optimizer settings");
  note(held.memory_budget_bytes != asked.memory_budget_bytes, "memory_budget");
  note(held.admission_min_count != asked.admission_min_count, "admission_min_count");
  note(held.max_pending_keys != asked.max_pending_keys, "max_pending_keys");
  note(held.ttl_steps != asked.ttl_steps, "ttl_steps");
  note(held.ttl_seconds != asked.ttl_seconds, "ttl_seconds");
  note(held.bad_gradient != asked.bad_gradient, "bad_gradient");
  note(held.gradient_clip != asked.gradient_clip, "gradient_clip");
  return out.empty() ? "its settings" : absl::StrJoin(out, ", ");
}

}  // namespace

absl::StatusOr<std::shared_ptr<Table>> ParameterServer::State::FindTable(
    std::string_view name) const {
  internal::ReaderLock lock(&mu);
  auto it = tables.find(AbslView(name));
  if (it == tables.end())
    return absl::NotFoundError(absl::StrCat("no table '", AbslView(name), "'"));
  return it->second;
}

absl::StatusOr<std::shared_ptr<internal::DenseVariable>> ParameterServer::State::FindDense(
    std::string_view name) const {
  internal::ReaderLock lock(&mu);
  auto it = dense.find(AbslView(name));
  if (it == dense.end())
    return absl::NotFoundError(absl::StrCat("no dense variable '", AbslView(name), "'"));
  return it->second;
}

uint64_t ParameterServer::State::Log(absl::FunctionRef<void(v1::WalEntry*)> fill) {
  if (wal == nullptr) return 0;
  v1::WalEntry entry;
  fill(&entry);
  return wal->Add(entry.SerializeAsString());
}

absl::Status ParameterServer::State::WalWritable() {
  if (wal == nullptr || !wal->failing()) return absl::OkStatus();
  return wal->Sync(std::numeric_limits<uint64_t>::max());
}

absl::Status ParameterServer::State::WalDurable() {
  if (wal == nullptr) return absl::OkStatus();
  return wal->Sync(std::numeric_limits<uint64_t>::max());
}

absl::Status ParameterServer::State::LogAndSync(absl::FunctionRef<void(v1::WalEntry*)> fill) {
  if (wal == nullptr) return absl::OkStatus();
  return wal->Sync(Log(fill));
}

namespace internal {

uint64_t WalPushLog::LogPart(const PushPart& part) {
  return wal_->AddInPlace(WalPushPartBytes(part), [&](char* dst) { EncodeWalPushPart(part, dst); });
}

}  // namespace internal

namespace {

using internal::FencedError;
using internal::TooManyKeys;

// Runs `apply` exactly once per (client, sequence); client 0 skips dedup.
// `apply` sets *changed once memory holds the update: if it then fails (the
// WAL could not be written yet), the sequence still counts as applied, so a
// retry is a duplicate, acknowledged only once the WAL has the record.
template <typename State, typename Apply>
absl::StatusOr<PushOutcome> Deduplicated(State& state, const PushContext& ctx,
                                         std::string_view kind, std::string_view name, Apply apply,
                                         bool* duplicate) {
  internal::PushDedup& dedup = state.dedup;
  *duplicate = false;
  RETURN_IF_ERROR(state.WalWritable());
  if (ctx.client_id == 0 && ctx.stream_id == 0) {
    bool changed = false;
    RETURN_IF_ERROR(apply(&changed));
    return PushOutcome::kApplied;
  }
  switch (internal::BeginPush(dedup, ctx, ctx.sequence)) {
    case internal::PushDedup::Claim::kDuplicate:
      *duplicate = true;
      RETURN_IF_ERROR(state.WalDurable());
      return PushOutcome::kDuplicate;
    case internal::PushDedup::Claim::kTooOld:
      return absl::FailedPreconditionError(
          absl::StrCat(AbslView(kind), " '", AbslView(name), "': push sequence ", ctx.sequence,
                       " of client ", ctx.client_id, " is older than the dedup window (",
                       dedup.window(), " sequences); cannot tell whether it was applied"));
    case internal::PushDedup::Claim::kFenced:
      return FencedError(ctx.client_id);
    case internal::PushDedup::Claim::kFresh:
      break;
  }
  bool changed = false;
  const absl::Status s = apply(&changed);
  internal::EndPush(dedup, ctx, ctx.sequence, s.ok() || changed);
  RETURN_IF_ERROR(s);
  return PushOutcome::kApplied;
}

}  // namespace

ParameterServer::ParameterServer(const ParameterServerOptions& options)
    : options_(options), state_(std::make_unique<State>(options)) {
  options_.data_dir.clear();  // memory only: Open() is the durable way in
  state_->startup.incarnation = RandomNonZeroId();
  state_->startup.started_unix_micros = absl::ToUnixMicros(absl::Now());
}

ParameterServer::~ParameterServer() = default;

absl::Status ParameterServer::CreateTable(const TableOptions& requested) {
  RETURN_IF_ERROR(requested.Validate());
  // The wire precision is the client's (TableOptions::wire): a table
  // re-declared by a client that sends bf16 is the same table.
  TableOptions options = requested;
  options.wire = WirePrecision::kFp32;
  internal::GateReader gate(&state_->gate);
  ASSIGN_OR_RETURN(bool created, CreateTableLocked(options, /*cold_rows_exist=*/false));
  if (!created) return absl::OkStatus();  // re-declared: nothing new to log
  return state_->LogAndSync([&](v1::WalEntry* e) { ToProto(options, e->mutable_create_table()); });
}

absl::StatusOr<bool> ParameterServer::CreateTableLocked(const TableOptions& requested,
                                                        bool cold_rows_exist) {
  TableOptions options = requested;
  if (options_.weights_only) options.optimizer = OptimizerOptions{};
  // One writer lock over check, stale-family drop and insert: a concurrent
  // creation of the same new table must not drop the family after this
  // table has spilled into it.
  internal::WriterLock lock(&state_->mu);
  auto it = state_->tables.find(options.name);
  if (it != state_->tables.end()) {
    if (it->second->options() == options) return false;
    return absl::AlreadyExistsError(absl::StrCat(
        "table '", options.name, "' exists with different options (",
        DifferingFields(it->second->options(), options),
        "): it belongs to an earlier run or another job on this PS. Drop it, restart the PS "
        "without its data dir, or give the table another name (jobs under a chief get their "
        "own)"));
  }
  TableTier tier;
  if (state_->db != nullptr) {
    tier.db = state_->db.get();
    tier.column_family = internal::TableFamily(options.name);
    tier.cold_rows_exist = cold_rows_exist;
    if (!cold_rows_exist) {
      // A family left by a dropped table of the same name holds stale rows.
      // Without one (the usual case) this is a map lookup: the family is
      // created by the table's first spill, not here (TieredRowStore), as
      // RocksDB rewrites its OPTIONS file, listing every family, on each
      // create and drop.
      RETURN_IF_ERROR(state_->db->DropColumnFamily(tier.column_family));
    }
  }
  ASSIGN_OR_RETURN(std::unique_ptr<Table> table,
                   Table::Create(options, options_.now, state_->db != nullptr ? &tier : nullptr,
                                 &state_->accountant));
  state_->tables.emplace(options.name, std::move(table));
  return true;
}

absl::Status ParameterServer::DropTable(std::string_view name) {
  internal::GateReader gate(&state_->gate);
  std::shared_ptr<Table> table;  // freed after the lock, when the last holder lets go
  {
    // Under the writer lock, as CreateTableLocked drops a stale family: a
    // new table of the name created meanwhile must not lose the family it
    // spills into to this drop.
    internal::WriterLock lock(&state_->mu);
    auto it = state_->tables.find(AbslView(name));
    if (it == state_->tables.end())
      return absl::NotFoundError(absl::StrCat("no table '", AbslView(name), "'"));
    // The family (if it spilled) goes with the table. A request still
    // holding the table finds RocksDB answering NOT_FOUND for it, which
    // fails that request, and cannot create the family again (retired) for
    // a new table of the name to find.
    table = std::move(it->second);
    table->RetireTier();
    state_->tables.erase(it);
    if (state_->db != nullptr) {
      RETURN_IF_ERROR(state_->db->DropColumnFamily(internal::TableFamily(std::string(name))));
    }
  }
  return state_->LogAndSync([&](v1::WalEntry* e) { e->set_drop_table(std::string(name)); });
}

absl::StatusOr<DroppedTables> ParameterServer::DropTablesWithPrefix(std::string_view prefix) {
  if (prefix.empty()) return absl::InvalidArgumentError("drop: an empty prefix names every table");
  std::vector<std::string> tables, dense;
  {
    internal::ReaderLock lock(&state_->mu);
    for (const auto& [name, t] : state_->tables) {
      if (absl::StartsWith(name, AbslView(prefix))) tables.emplace_back(name);
    }
    for (const auto& [name, d] : state_->dense) {
      if (absl::StartsWith(name, AbslView(prefix))) dense.emplace_back(name);
    }
  }
  DroppedTables dropped;
  // A concurrent drop of the same name is not an error: it is gone either way.
  for (const std::string& t : tables) {
    absl::Status s = DropTable(t);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    dropped.tables += s.ok() ? 1 : 0;
  }
  for (const std::string& d : dense) {
    absl::Status s = DropDense(d);
    if (!s.ok() && !absl::IsNotFound(s)) return s;
    dropped.dense += s.ok() ? 1 : 0;
  }
  return dropped;
}

absl::Status ParameterServer::Pull(std::string_view table, absl::Span<const uint64_t> keys,
                                   absl::Span<float> out, PartRunner* helpers) {
  ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(table));
  if (keys.size() > options_.max_keys_per_request) {
    return TooManyKeys("table", table, keys.size(), options_.max_keys_per_request);
  }
  return t->Pull(keys, out, helpers);
}

absl::StatusOr<PushOutcome> ParameterServer::Push(std::string_view table,
                                                  absl::Span<const uint64_t> keys,
                                                  absl::Span<const float> grads,
                                                  const PushContext& ctx) {
  ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(table));
  if (keys.size() > options_.max_keys_per_request) {
    return TooManyKeys("table", table, keys.size(), options_.max_keys_per_request);
  }
  RETURN_IF_ERROR(CheckLearningRateScale(ctx.learning_rate_scale));
  // Every stateless check happens before the dedup claim, so a bad request
  // neither changes rows nor consumes its sequence number.
  ASSIGN_OR_RETURN(PreparedPush prepared, t->PreparePush(keys, grads));
  prepared.helpers = ctx.helpers;
  internal::GateReader gate(&state_->gate);
  bool duplicate = false;
  absl::StatusOr<PushOutcome> out = Deduplicated(
      *state_, ctx, "table", table,
      [&](bool* changed) -> absl::Status {
        uint64_t lsn = 0;
        const absl::Status applied = state_->ApplyTablePush(*t, prepared, ctx, &lsn);
        state_->RecordPush(applied, internal::ChangePart{.name = table, .keys = keys});
        RETURN_IF_ERROR(applied);
        *changed = true;
        // Acknowledged only once logged: what kill -9 cannot take back.
        return state_->wal == nullptr ? absl::OkStatus() : state_->wal->Sync(lsn);
      },
      &duplicate);
  if (duplicate) t->CountDuplicate();
  return out;
}

absl::Status ParameterServer::State::ApplyTablePush(Table& t, const PreparedPush& push,
                                                    const PushContext& ctx, uint64_t* lsn) {
  *lsn = 0;
  if (wal == nullptr) return t.ApplyPush(push, ctx.step, ctx.learning_rate_scale);
  PushPart part;
  part.push_id = next_push_id.fetch_add(1, std::memory_order_relaxed);
  part.client_id = ctx.client_id;
  part.sequence = ctx.sequence;
  part.stream_id = ctx.stream_id;
  part.learning_rate_scale = ctx.learning_rate_scale;
  return t.ApplyPush(push, ctx.step, ctx.learning_rate_scale, &push_log, &part, lsn);
}

uint64_t ParameterServer::State::ApplyDensePush(internal::DenseVariable& v, std::string_view name,
                                                absl::Span<const float> grads, uint64_t nonfinite,
                                                const PushContext& ctx) {
  const float scale = ctx.learning_rate_scale;
  if (wal == nullptr) return v.Apply(grads, nonfinite, scale);
  const internal::DensePushRecord record{.name = name,
                                         .step = ctx.step,
                                         .client_id = ctx.client_id,
                                         .sequence = ctx.sequence,
                                         .stream_id = ctx.stream_id,
                                         .learning_rate_scale = scale,
                                         .grads = grads};
  return v.Apply(grads, nonfinite, scale, [&] {
    return wal->AddInPlace(internal::WalDensePushBytes(record),
                           [&](char* dst) { internal::EncodeWalDensePush(record, dst); });
  });
}

absl::Status ParameterServer::CreateDense(const DenseOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  internal::GateReader gate(&state_->gate);
  if (options.num_floats() > options_.max_keys_per_request) {
    return absl::InvalidArgumentError(
        absl::StrCat("dense variable '", options.name, "': shape has ", options.num_floats(),
                     " floats, more than max_keys_per_request ", options_.max_keys_per_request,
                     "; it could never be pushed"));
  }
  {
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
  }
  return state_->LogAndSync([&](v1::WalEntry* e) { ToProto(options, e->mutable_create_dense()); });
}

absl::Status ParameterServer::DropDense(std::string_view name) {
  internal::GateReader gate(&state_->gate);
  {
    internal::WriterLock lock(&state_->mu);
    auto it = state_->dense.find(AbslView(name));
    if (it == state_->dense.end()) {
      return absl::NotFoundError(absl::StrCat("no dense variable '", AbslView(name), "'"));
    }
    state_->dense.erase(it);
  }
  return state_->LogAndSync([&](v1::WalEntry* e) { e->set_drop_dense(std::string(name)); });
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
  RETURN_IF_ERROR(CheckLearningRateScale(ctx.learning_rate_scale));
  ASSIGN_OR_RETURN(uint64_t nonfinite, v->Check(grads));
  internal::GateReader gate(&state_->gate);
  bool duplicate = false;
  return Deduplicated(
      *state_, ctx, "dense variable", name,
      [&](bool* changed) -> absl::Status {
        const uint64_t lsn = state_->ApplyDensePush(*v, name, grads, nonfinite, ctx);
        state_->changes.Append(internal::ChangePart{.name = name, .dense = true});
        *changed = true;
        return state_->wal == nullptr ? absl::OkStatus() : state_->wal->Sync(lsn);
      },
      &duplicate);
}

uint64_t ParameterServer::FenceClients(absl::Span<const uint64_t> client_ids) {
  uint64_t fenced = 0;
  for (uint64_t id : client_ids) {
    if (id != 0 && state_->dedup.Fence(id)) ++fenced;
  }
  return fenced;
}

uint64_t ParameterServer::fenced_clients() const { return state_->dedup.fenced_clients(); }

const StartupInfo& ParameterServer::startup() const { return state_->startup; }

uint64_t ParameterServer::Evict(int64_t current_step) {
  internal::GateReader gate(&state_->gate);
  std::vector<std::shared_ptr<Table>> tables;
  {
    internal::ReaderLock lock(&state_->mu);
    for (const auto& [name, t] : state_->tables) tables.push_back(t);
  }
  uint64_t evicted = 0;
  std::vector<uint64_t> keys;  // of one table, for the change log
  for (const auto& t : tables) {
    keys.clear();
    evicted += t->Evict(current_step, state_->changes.enabled() ? &keys : nullptr);
    // Evicted rows read their initial values again: a follower pulls those.
    state_->changes.Append(internal::ChangePart{.name = t->options().name, .keys = keys});
  }
  return evicted;
}

absl::Status ParameterServer::ScanTable(std::string_view table, const RowVisitor& fn) const {
  ASSIGN_OR_RETURN(std::shared_ptr<Table> t, state_->FindTable(table));
  return t->Scan(
      [&](uint64_t key, absl::Span<const float> w, absl::Span<const float> s) { fn(key, w, s); });
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
  s.startup = state_->startup;
  s.fenced_clients = state_->dedup.fenced_clients();
  s.fenced_pushes = state_->dedup.fenced_refusals();
  s.push_streams = state_->dedup.streams();
  s.memory_limit_bytes = state_->accountant.limit();
  s.memory_used_bytes = state_->accountant.used();
  s.memory_limit_rejections = state_->accountant.rejections();
  s.memory_bookkeeping_bytes = state_->accountant.bookkeeping();
  s.change_log = state_->changes.Stats();
  for (const auto& t : tables) s.tables.push_back(t->Stats());
  for (const auto& v : dense) s.dense.push_back(v->Stats());
  std::sort(s.tables.begin(), s.tables.end(),
            [](const TableStats& a, const TableStats& b) { return a.name < b.name; });
  std::sort(s.dense.begin(), s.dense.end(),
            [](const DenseStats& a, const DenseStats& b) { return a.name < b.name; });
  s.checkpoints = Checkpoints();
  if (state_->db != nullptr) s.rocksdb = state_->db->GetStats();
  if (state_->wal != nullptr) s.wal = state_->wal->stats();
  return s;
}

}  // namespace brook::ps
