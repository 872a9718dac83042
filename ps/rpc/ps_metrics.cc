#include "ps/rpc/ps_metrics.h"

#include <chrono>
#include <map>
#include <string>

#include "common/part_runner.h"
#include "metrics/collector.h"
#include "prometheus/counter.h"
#include "prometheus/registry.h"
#include "ps/parameter_server.h"

namespace brook::ps::rpc {

std::shared_ptr<prometheus::Collectable> NewPsStatsCollector(const ParameterServer* ps,
                                                             const PartRunner* helpers) {
  return std::make_shared<metrics::FunctionCollector>([ps, helpers] {
    const ServerStats stats = ps->Stats();
    metrics::FamilySet set;
    auto* shard = set.Gauge("brook_ps_shard_info", "This PS's place in the shard map; always 1");
    set.Add(shard,
            {{"shard_index", std::to_string(ps->options().shard_index)},
             {"num_shards", std::to_string(ps->options().num_shards)}},
            1);

    set.Add(set.Gauge("brook_ps_memory_limit_bytes",
                      "Bytes of rows all tables of this PS may hold in memory (--memory-limit); "
                      "0 = no limit"),
            {}, static_cast<double>(stats.memory_limit_bytes));
    set.Add(set.Gauge("brook_ps_memory_used_bytes",
                      "Bytes of rows all tables of this PS hold in memory, as counted against "
                      "--memory-limit (row bytes plus index entry per row)"),
            {}, static_cast<double>(stats.memory_used_bytes));
    set.Add(set.Gauge("brook_ps_memory_bookkeeping_bytes",
                      "Of brook_ps_memory_used_bytes: keys of rows moved to RocksDB while "
                      "changed since the last checkpoint, kept for the next incremental one (at "
                      "most an eighth of --memory-limit; past it the next checkpoint is full)"),
            {}, static_cast<double>(stats.memory_bookkeeping_bytes));
    set.Add(set.Counter("brook_ps_memory_limit_rejections_total",
                        "Pushes refused (RESOURCE_EXHAUSTED) because the PS memory limit was full "
                        "and the PS has no RocksDB tier"),
            {}, static_cast<double>(stats.memory_limit_rejections));

    set.Add(set.Gauge("brook_ps_change_log_bytes",
                      "Bytes the change log holds (which rows each push changed, for followers; "
                      "at most --change-log-mib)"),
            {}, static_cast<double>(stats.change_log.bytes));
    set.Add(set.Gauge("brook_ps_change_log_oldest_sequence",
                      "The oldest change-log sequence a follower may still read from (older "
                      "cursors copy everything again)"),
            {}, static_cast<double>(stats.change_log.oldest_sequence));
    set.Add(set.Gauge("brook_ps_change_log_next_sequence",
                      "The sequence the next change-log record gets"),
            {}, static_cast<double>(stats.change_log.next_sequence));

    auto* pulled = set.Counter("brook_ps_rows_pulled_total", "Rows read by pulls");
    auto* pushed = set.Counter("brook_ps_rows_pushed_total", "Rows updated by pushes");
    auto* admissions = set.Counter("brook_ps_admissions_total", "Keys admitted as trained rows");
    auto* evictions = set.Counter("brook_ps_evictions_total", "Rows dropped by TTL eviction");
    auto* rejected = set.Counter("brook_ps_rejected_gradients_total",
                                 "Pushes refused or values zeroed for NaN/Inf gradients");
    auto* duplicates = set.Counter("brook_ps_duplicate_pushes_total",
                                   "Retried pushes acknowledged without being applied again");
    auto* rows = set.Gauge("brook_ps_table_rows", "Admitted rows held");
    auto* pending = set.Gauge("brook_ps_table_pending_keys", "Keys seen but not yet admitted");
    auto* memory = set.Gauge("brook_ps_table_memory_bytes",
                             "Bytes the table holds: rows, optimizer slots and index");
    auto* index_grows = set.Counter(
        "brook_ps_index_grows_total",
        "Times a stripe's row index was rebuilt larger (requests to the stripe wait meanwhile)");
    auto* budget = set.Gauge("brook_ps_table_memory_budget_bytes",
                             "The table's memory budget (TableOptions.memory_budget_bytes)");
    auto* forgotten = set.Counter("brook_ps_pending_forgotten_total",
                                  "Pending keys forgotten past max_pending_keys");
    auto* budget_rejections = set.Counter("brook_ps_budget_rejections_total",
                                          "Pushes refused because of the memory budget");
    auto* budget_deferred =
        set.Counter("brook_ps_budget_deferred_total",
                    "New keys left pending because the budget was taken concurrently");
    for (const TableStats& t : stats.tables) {
      const metrics::Labels labels = {{"table", t.name}};
      set.Add(pulled, labels, static_cast<double>(t.rows_pulled));
      set.Add(pushed, labels, static_cast<double>(t.rows_pushed));
      set.Add(admissions, labels, static_cast<double>(t.admissions));
      set.Add(evictions, labels, static_cast<double>(t.evictions));
      set.Add(rejected, labels, static_cast<double>(t.rejected_gradients));
      set.Add(duplicates, labels, static_cast<double>(t.duplicate_pushes));
      set.Add(rows, labels, static_cast<double>(t.rows));
      set.Add(pending, labels, static_cast<double>(t.pending_keys));
      set.Add(memory, labels, static_cast<double>(t.memory_bytes));
      set.Add(index_grows, labels, static_cast<double>(t.index_grows));
      set.Add(budget, labels, static_cast<double>(t.memory_budget_bytes));
      set.Add(forgotten, labels, static_cast<double>(t.pending_forgotten));
      set.Add(budget_rejections, labels, static_cast<double>(t.budget_rejections));
      set.Add(budget_deferred, labels, static_cast<double>(t.budget_deferred));
    }

    auto* lookups = set.Counter(
        "brook_ps_tier_lookups_total",
        "Keys looked up in a RocksDB-tiered table, by where they were found: hot (memory), "
        "cold (RocksDB), absent (asked RocksDB, not there); hit ratio = hot / all");
    auto* cold_rows = set.Gauge("brook_ps_table_cold_rows",
                                "Rows RocksDB holds for the table (RocksDB's estimate)");
    auto* tier_moves = set.Counter("brook_ps_tier_rows_moved_total",
                                   "Rows moved between memory and RocksDB, by direction");
    auto* tier_errors =
        set.Counter("brook_ps_tier_errors_total", "Failed RocksDB reads or writes of the row tier");
    for (const TableStats& t : stats.tables) {
      if (!t.tiered) continue;
      set.Add(lookups, {{"table", t.name}, {"found", "hot"}}, static_cast<double>(t.hot_hits));
      set.Add(lookups, {{"table", t.name}, {"found", "cold"}}, static_cast<double>(t.cold_hits));
      set.Add(lookups, {{"table", t.name}, {"found", "absent"}},
              static_cast<double>(t.cold_misses));
      set.Add(cold_rows, {{"table", t.name}}, static_cast<double>(t.cold_rows));
      set.Add(tier_moves, {{"table", t.name}, {"direction", "to_rocksdb"}},
              static_cast<double>(t.tier_evictions));
      set.Add(tier_moves, {{"table", t.name}, {"direction", "to_memory"}},
              static_cast<double>(t.tier_promotions));
      set.Add(tier_errors, {{"table", t.name}}, static_cast<double>(t.tier_errors));
    }

    // Per job, for a cluster shared by jobs: a job's tables are named
    // "<job id>/<table>" (chief TablePrefix), so what a job holds here is
    // what its names hold; job "" gathers names outside any job. Memory: its
    // tables' memory_bytes plus its dense variables' weights.
    struct JobUsage {
      uint64_t tables = 0;
      uint64_t memory_bytes = 0;
    };
    std::map<std::string, JobUsage> jobs;
    auto job_of = [](const std::string& name) {
      const size_t slash = name.find('/');
      return slash == std::string::npos ? std::string() : name.substr(0, slash);
    };
    for (const TableStats& t : stats.tables) {
      JobUsage& u = jobs[job_of(t.name)];
      ++u.tables;
      u.memory_bytes += t.memory_bytes;
    }
    for (const DenseStats& d : stats.dense) {
      jobs[job_of(d.name)].memory_bytes += d.num_floats * sizeof(float);
    }
    auto* job_tables = set.Gauge("brook_ps_job_tables",
                                 "Embedding tables of the job (names '<job>/...') on this PS");
    auto* job_memory = set.Gauge(
        "brook_ps_job_memory_bytes",
        "Bytes the job's tables (rows, slots, index) and dense weights hold in memory on this PS");
    for (const auto& [job, u] : jobs) {
      set.Add(job_tables, {{"job", job}}, static_cast<double>(u.tables));
      set.Add(job_memory, {{"job", job}}, static_cast<double>(u.memory_bytes));
    }

    const std::vector<CheckpointInfo>& checkpoints = stats.checkpoints;
    auto* ckpt_count = set.Counter("brook_ps_checkpoints_total",
                                   "Complete checkpoints this PS wrote (since its data dir began)");
    set.Add(ckpt_count, {}, static_cast<double>(checkpoints.size()));
    if (!checkpoints.empty()) {
      const CheckpointInfo& last = checkpoints.back();
      const std::string kind = last.incremental ? "incremental" : "full";
      set.Add(set.Gauge("brook_ps_last_checkpoint_seconds",
                        "Duration of the last checkpoint (pushes wait this long)"),
              {{"kind", kind}}, last.seconds);
      set.Add(set.Gauge("brook_ps_last_checkpoint_bytes", "Bytes on disk of the last checkpoint"),
              {{"kind", kind}}, static_cast<double>(last.bytes));
      const double now =
          std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch())
              .count();
      set.Add(set.Gauge("brook_ps_last_checkpoint_age_seconds",
                        "Seconds since the last checkpoint was taken"),
              {}, now - static_cast<double>(last.created_unix_micros) * 1e-6);
    }

    auto* dense_pushes =
        set.Counter("brook_ps_dense_pushes_total", "Pushes applied to a dense variable");
    auto* dense_rejected = set.Counter("brook_ps_dense_rejected_gradients_total",
                                       "Dense pushes refused or zeroed for NaN/Inf gradients");
    auto* dense_floats = set.Gauge("brook_ps_dense_floats", "Floats in a dense variable");
    for (const DenseStats& d : stats.dense) {
      const metrics::Labels labels = {{"variable", d.name}};
      set.Add(dense_pushes, labels, static_cast<double>(d.pushes));
      set.Add(dense_rejected, labels, static_cast<double>(d.rejected_gradients));
      set.Add(dense_floats, labels, static_cast<double>(d.num_floats));
    }

    set.Add(set.Gauge("brook_ps_fenced_clients",
                      "Push client ids fenced by the chief (trainers whose lease expired)"),
            {}, static_cast<double>(stats.fenced_clients));
    set.Add(set.Counter("brook_ps_fenced_pushes_total",
                        "Pushes (batch parts) refused because their client was fenced: a "
                        "paused trainer's late gradients"),
            {}, static_cast<double>(stats.fenced_pushes));
    set.Add(set.Gauge("brook_ps_helper_threads",
                      "Threads a large pull or push is split over when idle (--helpers)"),
            {}, helpers == nullptr ? 0.0 : static_cast<double>(helpers->helpers()));
    set.Add(set.Counter("brook_ps_split_requests_total",
                        "Pull lookups and table pushes that ran in parts, on the handler "
                        "thread and on idle helper threads"),
            {}, helpers == nullptr ? 0.0 : static_cast<double>(helpers->split_runs()));
    set.Add(set.Counter("brook_ps_helper_parts_total",
                        "Parts of split requests that ran on helper threads (per split: the "
                        "helpers that were idle)"),
            {}, helpers == nullptr ? 0.0 : static_cast<double>(helpers->helper_parts()));
    set.Add(set.Gauge("brook_ps_push_streams",
                      "Work-unit push streams this PS deduplicates steps of (one per job, "
                      "unit and data epoch trained)"),
            {}, static_cast<double>(stats.push_streams));

    if (stats.rocksdb.has_value()) {
      const storage::RocksDb::Stats& r = *stats.rocksdb;
      auto* cache = set.Counter("brook_ps_rocksdb_block_cache_lookups_total",
                                "RocksDB block cache lookups by result (hit ratio = hit / all)");
      set.Add(cache, {{"result", "hit"}}, static_cast<double>(r.block_cache_hits));
      set.Add(cache, {{"result", "miss"}}, static_cast<double>(r.block_cache_misses));
      set.Add(set.Counter("brook_ps_rocksdb_read_bytes_total", "Bytes RocksDB returned to reads"),
              {}, static_cast<double>(r.bytes_read));
      set.Add(set.Counter("brook_ps_rocksdb_written_bytes_total", "Bytes written to RocksDB"), {},
              static_cast<double>(r.bytes_written));
      set.Add(set.Gauge("brook_ps_rocksdb_sst_bytes", "Bytes of RocksDB's SST files"), {},
              static_cast<double>(r.sst_bytes));
      set.Add(set.Gauge("brook_ps_rocksdb_pending_compaction_bytes",
                        "Bytes RocksDB estimates compaction still has to rewrite; writes slow "
                        "down and then stall as it grows"),
              {}, static_cast<double>(r.pending_compaction_bytes));
      auto* memory = set.Gauge("brook_ps_rocksdb_memory_bytes",
                               "Memory RocksDB holds beside the rows in memory, by kind: "
                               "block_cache (data, index and filter blocks; pinned included), "
                               "memtables, table_readers");
      set.Add(memory, {{"kind", "block_cache"}}, static_cast<double>(r.block_cache_bytes));
      set.Add(memory, {{"kind", "memtables"}}, static_cast<double>(r.memtable_bytes));
      set.Add(memory, {{"kind", "table_readers"}}, static_cast<double>(r.table_reader_bytes));
      set.Add(set.Gauge("brook_ps_rocksdb_block_cache_pinned_bytes",
                        "Of the block cache, bytes pinned (index and filter blocks of open "
                        "files); they stay past the cache's capacity"),
              {}, static_cast<double>(r.block_cache_pinned_bytes));
      set.Add(set.Counter("brook_ps_rocksdb_stall_seconds_total",
                          "Time writes to RocksDB were held back by write stalls"),
              {}, static_cast<double>(r.stall_micros) * 1e-6);
    }
    if (stats.wal.has_value()) {
      const storage::WalStats& w = *stats.wal;
      set.Add(set.Counter("brook_ps_wal_records_total", "Records written to the write-ahead log"),
              {}, static_cast<double>(w.records));
      set.Add(set.Counter("brook_ps_wal_written_bytes_total",
                          "Bytes written to the write-ahead log, framing included"),
              {}, static_cast<double>(w.bytes));
      set.Add(set.Counter("brook_ps_wal_write_errors_total",
                          "Failed write-ahead log writes (out of space included); the pushes "
                          "they carried were refused"),
              {}, static_cast<double>(w.write_errors));
      set.Add(set.Gauge("brook_ps_wal_out_of_space",
                        "1 while the write-ahead log cannot be written for want of space: pushes "
                        "are refused until space returns"),
              {}, w.failing ? 1.0 : 0.0);
      set.Add(set.Gauge("brook_ps_wal_segments", "Segment files of the write-ahead log"), {},
              static_cast<double>(w.segments));
    }
    return set.Take();
  });
}

std::vector<prometheus::Counter*> NewUnauthenticatedCounters(
    prometheus::Registry& registry, const std::vector<std::string>& methods) {
  auto& family = prometheus::BuildCounter()
                     .Name("brook_ps_unauthenticated_requests_total")
                     .Help("PS calls refused for a missing or wrong bearer token, by method")
                     .Register(registry);
  std::vector<prometheus::Counter*> counters;
  for (const std::string& m : methods) counters.push_back(&family.Add({{"method", m}}));
  return counters;
}

}  // namespace brook::ps::rpc
