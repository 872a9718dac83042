#include "ps/wire/proto_convert.h"

#include "brook/v1/ps.pb.h"
#include "ps/config_codec.h"

namespace brook::ps::wire {

void ToProto(const StartupInfo& s, v1::PsStartup* p) {
  p->set_incarnation(s.incarnation);
  p->set_started_unix_micros(s.started_unix_micros);
  p->set_data_dir(s.data_dir);
  p->set_wal(s.wal);
  p->set_restored_checkpoint(s.restored_checkpoint);
  p->set_restored_step(s.restored_step);
  p->set_restored_created_unix_micros(s.restored_created_unix_micros);
  p->set_wal_records_replayed(s.wal_records_replayed);
}

StartupInfo FromProto(const v1::PsStartup& p) {
  StartupInfo s;
  s.incarnation = p.incarnation();
  s.started_unix_micros = p.started_unix_micros();
  s.data_dir = p.data_dir();
  s.wal = p.wal();
  s.restored_checkpoint = p.restored_checkpoint();
  s.restored_step = p.restored_step();
  s.restored_created_unix_micros = p.restored_created_unix_micros();
  s.wal_records_replayed = p.wal_records_replayed();
  return s;
}

void ToProto(const ServerStats& s, v1::StatsResponse* p) {
  ToProto(s.startup, p->mutable_startup());
  p->set_fenced_clients(s.fenced_clients);
  p->set_fenced_pushes(s.fenced_pushes);
  for (const TableStats& t : s.tables) {
    v1::TableStats* pt = p->add_tables();
    pt->set_name(t.name);
    pt->set_dim(t.dim < 0 ? 0 : static_cast<uint32_t>(t.dim));
    pt->set_rows(t.rows);
    pt->set_pending_keys(t.pending_keys);
    pt->set_memory_bytes(t.memory_bytes);
    pt->set_rows_pulled(t.rows_pulled);
    pt->set_rows_pushed(t.rows_pushed);
    pt->set_admissions(t.admissions);
    pt->set_evictions(t.evictions);
    pt->set_rejected_gradients(t.rejected_gradients);
    pt->set_duplicate_pushes(t.duplicate_pushes);
    pt->set_memory_budget_bytes(t.memory_budget_bytes);
    pt->set_pending_forgotten(t.pending_forgotten);
    pt->set_budget_rejections(t.budget_rejections);
    pt->set_budget_deferred(t.budget_deferred);
    pt->set_tiered(t.tiered);
    pt->set_hot_hits(t.hot_hits);
    pt->set_cold_hits(t.cold_hits);
    pt->set_cold_misses(t.cold_misses);
    pt->set_cold_rows(t.cold_rows);
    pt->set_tier_evictions(t.tier_evictions);
    pt->set_tier_promotions(t.tier_promotions);
    pt->set_tier_errors(t.tier_errors);
  }
  for (const CheckpointInfo& c : s.checkpoints) ps::ToProto(c, p->add_checkpoints());
  for (const DenseStats& d : s.dense) {
    v1::DenseStats* pd = p->add_dense();
    pd->set_name(d.name);
    pd->set_num_floats(d.num_floats);
    pd->set_pushes(d.pushes);
    pd->set_rejected_gradients(d.rejected_gradients);
  }
}

ServerStats FromProto(const v1::StatsResponse& p) {
  ServerStats s;
  s.startup = FromProto(p.startup());
  s.fenced_clients = p.fenced_clients();
  s.fenced_pushes = p.fenced_pushes();
  for (const v1::TableStats& pt : p.tables()) {
    TableStats t;
    t.name = pt.name();
    t.dim = static_cast<int>(pt.dim());
    t.rows = pt.rows();
    t.pending_keys = pt.pending_keys();
    t.memory_bytes = pt.memory_bytes();
    t.bytes_per_row = t.rows ? static_cast<double>(t.memory_bytes) / t.rows : 0;
    t.rows_pulled = pt.rows_pulled();
    t.rows_pushed = pt.rows_pushed();
    t.admissions = pt.admissions();
    t.evictions = pt.evictions();
    t.rejected_gradients = pt.rejected_gradients();
    t.duplicate_pushes = pt.duplicate_pushes();
    t.memory_budget_bytes = pt.memory_budget_bytes();
    t.pending_forgotten = pt.pending_forgotten();
    t.budget_rejections = pt.budget_rejections();
    t.budget_deferred = pt.budget_deferred();
    t.tiered = pt.tiered();
    t.hot_hits = pt.hot_hits();
    t.cold_hits = pt.cold_hits();
    t.cold_misses = pt.cold_misses();
    t.cold_rows = pt.cold_rows();
    t.tier_evictions = pt.tier_evictions();
    t.tier_promotions = pt.tier_promotions();
    t.tier_errors = pt.tier_errors();
    s.tables.push_back(std::move(t));
  }
  for (const v1::DenseStats& pd : p.dense()) {
    DenseStats d;
    d.name = pd.name();
    d.num_floats = pd.num_floats();
    d.pushes = pd.pushes();
    d.rejected_gradients = pd.rejected_gradients();
    s.dense.push_back(std::move(d));
  }
  for (const v1::CheckpointInfo& c : p.checkpoints()) s.checkpoints.push_back(ps::FromProto(c));
  return s;
}

}  // namespace brook::ps::wire
