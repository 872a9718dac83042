#include "bench/ps_tier_bench.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "bench/bench_util.h"
#include "bench/paired_rate.h"
#include "bench/rocks_ceiling.h"
#include "common/status_macros.h"
#include "ps/parameter_server.h"
#include "storage/file.h"

namespace brook::bench {
namespace {

namespace fs = std::filesystem;
constexpr char kTable[] = "tier";
using storage::ErrnoError;

double Since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

ps::TableOptions SgdTable(int dim, uint64_t budget_rows) {
  ps::TableOptions t;
  t.name = kTable;
  t.dim = dim;
  t.seed = 7;
  t.optimizer.kind = ps::OptimizerKind::kSgd;
  t.optimizer.learning_rate = 0.01f;
  t.memory_budget_bytes = budget_rows * static_cast<uint64_t>(dim) * sizeof(float);
  return t;
}

absl::StatusOr<std::unique_ptr<ps::ParameterServer>> OpenPs(const std::string& dir, bool wal,
                                                            bool fsync,
                                                            const storage::RocksDbOptions& rocks) {
  ps::ParameterServerOptions o;
  o.data_dir = dir;
  o.wal = wal;
  o.wal_fsync = fsync;
  o.rocksdb = rocks;
  return ps::ParameterServer::Open(o);
}

// Pushes every key of [0, rows) once, in batches.
absl::Status Populate(ps::ParameterServer& ps, int64_t rows, int dim, int batch) {
  std::vector<uint64_t> keys(batch);
  const std::vector<float> grads(static_cast<size_t>(batch) * dim, 1e-3f);
  for (int64_t k0 = 0; k0 < rows; k0 += batch) {
    const int n = static_cast<int>(std::min<int64_t>(batch, rows - k0));
    for (int i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(k0 + i);
    RETURN_IF_ERROR(ps.Push(kTable, absl::MakeConstSpan(keys.data(), n),
                            absl::MakeConstSpan(grads.data(), static_cast<size_t>(n) * dim),
                            ps::PushContext{})
                        .status());
  }
  return absl::OkStatus();
}

const char* Pass(bool ok) { return ok ? "PASS" : "MISS"; }

// A bare log: appends of `bytes`, each followed by fdatasync, to a fresh
// file. What the disk allows a log that syncs every `bytes`.
class BareSyncedLog {
 public:
  static absl::StatusOr<std::unique_ptr<BareSyncedLog>> Create(const std::string& path,
                                                               size_t bytes) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_APPEND | O_CLOEXEC, 0644);
    if (fd < 0) return ErrnoError(errno, "create", path);
    return std::unique_ptr<BareSyncedLog>(new BareSyncedLog(path, fd, bytes));
  }
  ~BareSyncedLog() {
    ::close(fd_);
    ::unlink(path_.c_str());
  }
  absl::Status Append() {
    if (::write(fd_, data_.data(), data_.size()) != static_cast<ssize_t>(data_.size())) {
      return ErrnoError(errno, "write", path_);
    }
    if (::fdatasync(fd_) != 0) return ErrnoError(errno, "fdatasync", path_);
    return absl::OkStatus();
  }

 private:
  BareSyncedLog(std::string path, int fd, size_t bytes)
      : path_(std::move(path)), fd_(fd), data_(bytes, 'w') {}
  const std::string path_;
  const int fd_;
  const std::string data_;
};

double RssBytes() {
  long pages = 0, resident = 0;
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == nullptr) return 0;
  const int n = fscanf(f, "%ld %ld", &pages, &resident);
  fclose(f);
  return n == 2 ? static_cast<double>(resident) * static_cast<double>(sysconf(_SC_PAGESIZE)) : 0;
}

struct Churn {
  double first_per_s = 0;  // tables created (and pushed once) a second, the first 100
  double last_per_s = 0;   // the same, the last 100
  double drop_per_s = 0;
  double rss_per_table = 0;  // RSS growth over the creations, per table
};

// A long-lived PS's jobs: `tables` tables, 24 a job, each created and pushed
// once (256 keys, under its budget: no row spills), then all dropped. A
// durable PS once made one RocksDB column family per table, and RocksDB
// rewrites its OPTIONS file, listing every family, on each create and drop:
// the last 100 creations then ran many times slower than the first 100.
absl::StatusOr<Churn> TableChurn(ps::ParameterServer& ps, int tables) {
  constexpr int kChurnDim = 16, kChurnKeys = 256;
  std::vector<uint64_t> keys(kChurnKeys);
  for (int i = 0; i < kChurnKeys; ++i) keys[i] = static_cast<uint64_t>(i) * 7919;
  const std::vector<float> grads(kChurnKeys * kChurnDim, 1e-3f);
  auto name = [](int i) { return absl::StrCat("churn-", i / 24, "/t", i); };
  std::vector<double> seconds(tables);
  const double rss0 = RssBytes();
  for (int i = 0; i < tables; ++i) {
    ps::TableOptions t;
    t.name = name(i);
    t.dim = kChurnDim;
    t.seed = static_cast<uint64_t>(i);
    t.optimizer.kind = ps::OptimizerKind::kAdagrad;
    t.memory_budget_bytes = uint64_t{4} * kChurnKeys * 2 * kChurnDim * sizeof(float);
    const auto t0 = std::chrono::steady_clock::now();
    RETURN_IF_ERROR(ps.CreateTable(t));
    RETURN_IF_ERROR(ps.Push(t.name, keys, grads, ps::PushContext{}).status());
    seconds[i] = Since(t0);
  }
  Churn c;
  c.rss_per_table = (RssBytes() - rss0) / tables;
  double first = 0, last = 0;
  for (int i = 0; i < 100; ++i) {
    first += seconds[i];
    last += seconds[tables - 1 - i];
  }
  c.first_per_s = 100 / first;
  c.last_per_s = 100 / last;
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < tables; ++i) RETURN_IF_ERROR(ps.DropTable(name(i)));
  c.drop_per_s = tables / Since(t0);
  return c;
}

}  // namespace

absl::Status RunPsTierBench(const PsTierBenchOptions& options, std::ostream& out,
                            nlohmann::json* result) {
  if (options.churn_tables < 200) {
    return absl::InvalidArgumentError(
        absl::StrCat("tier bench: churn_tables must be at least 200, not ", options.churn_tables));
  }
  if (options.slices < 1 || options.wal_threads < 1) {
    return absl::InvalidArgumentError(absl::StrCat("tier bench: slices (", options.slices,
                                                   ") and wal_threads (", options.wal_threads,
                                                   ") must be at least 1"));
  }
  if (options.rows < 10 * static_cast<int64_t>(options.batch) || options.dim <= 0 ||
      options.batch <= 0 || options.seconds <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("tier bench: --tier-rows must be at least 10 x --batch (", options.rows,
                     " < 10 x ", options.batch, ")"));
  }
  ASSIGN_OR_RETURN(ScratchDir work, ScratchDir::Make(options.work_dir, "brook-bench-tier"));
  const int dim = options.dim, batch = options.batch;
  const int64_t rows = options.rows;
  const size_t stored_bytes = 16 + static_cast<size_t>(dim) * sizeof(float);  // SGD: no slots
  const double data_gb = static_cast<double>(rows) * stored_bytes / 1e9;
  // RocksDB's block cache also gets a tenth of the data: memory, not the
  // cache, is what the budget is about, and a cache holding everything
  // would measure memory again.
  storage::RocksDbOptions rocks;
  rocks.block_cache_bytes = std::max<uint64_t>(1 << 20, rows * stored_bytes / 10);
  const KeyPool pool = MakeKeyPool(rows, batch, options.seed);
  std::vector<float> outv(static_cast<size_t>(batch) * dim);
  const std::vector<float> grads(static_cast<size_t>(batch) * dim, 1e-3f);
  auto rate = [&](auto fn) -> absl::StatusOr<double> {
    ASSIGN_OR_RETURN(double cps, CallsPerSecond(1, options.seconds, fn));
    return cps * batch / 1e6;
  };

  out << absl::StrFormat(
      "\n(c) RocksDB tier: dim %d, %d rows (%.0f MB stored), memory budget %d rows (a tenth), "
      "RocksDB block cache %.0f MB (a tenth), 1 thread, WAL off; ceiling: storage::RocksDb "
      "MultiGet / WriteBatch of the same rows, same options, compacted\n",
      dim, rows, data_gb * 1e3, rows / 10, rocks.block_cache_bytes / 1e6);

  // The tiered PS.
  ASSIGN_OR_RETURN(std::unique_ptr<ps::ParameterServer> tiered,
                   OpenPs(work.path() + "/tiered", /*wal=*/false, false, rocks));
  RETURN_IF_ERROR(tiered->CreateTable(SgdTable(dim, rows / 10)));
  auto t0 = std::chrono::steady_clock::now();
  RETURN_IF_ERROR(Populate(*tiered, rows, dim, batch));
  RETURN_IF_ERROR(tiered->CompactStorage());
  const double populate_s = Since(t0);
  ASSIGN_OR_RETURN(double c_pull, rate([&](int, int64_t i) {
                     return tiered->Pull(kTable, pool.Batch(i), absl::MakeSpan(outv));
                   }));
  ps::TableStats after_pull;
  for (const ps::TableStats& t : tiered->Stats().tables) after_pull = t;
  ASSIGN_OR_RETURN(double c_push, rate([&](int, int64_t i) {
                     return tiered->Push(kTable, pool.Batch(i), grads, ps::PushContext{}).status();
                   }));
  const double lookups =
      static_cast<double>(after_pull.hot_hits + after_pull.cold_hits + after_pull.cold_misses);
  const double hit_ratio = lookups > 0 ? after_pull.hot_hits / lookups : 0;
  // The full checkpoint of the tiered table: hot rows written out, cold
  // rows hard-linked.
  t0 = std::chrono::steady_clock::now();
  ps::CheckpointOptions tiered_ckpt;
  tiered_ckpt.dir = work.path() + "/ckpt-tiered";
  ASSIGN_OR_RETURN(ps::CheckpointInfo tiered_info, tiered->Checkpoint(tiered_ckpt));
  tiered.reset();

  ASSIGN_OR_RETURN(RocksCeiling ceiling,
                   MeasureRocksCeiling(work.path() + "/ceiling", rocks, rows, stored_bytes, batch,
                                       options.seconds, options.seed));
  const double multiget = ceiling.multiget_rows_per_s / 1e6;
  const double writebatch = ceiling.writebatch_rows_per_s / 1e6;
  auto line = [&](const std::string& name, double r, const std::string& note) {
    out << absl::StrFormat("    %-56s %9.3f   %s\n", name, r, note);
  };
  out << absl::StrFormat("  %-58s %9s   %s\n", "", "M rows/s", "vs ceiling");
  line("(c) tiered ParameterServer::Pull (90% of rows cold)", c_pull,
       absl::StrFormat("%.0f%% of bare MultiGet [goal >= 50%%] %s; memory hit ratio %.2f",
                       100 * c_pull / multiget, Pass(c_pull >= 0.5 * multiget), hit_ratio));
  line("    bare RocksDB MultiGet, same rows (ceiling)", multiget, "ceiling");
  line("(c) tiered ParameterServer::Push (SGD; brings rows in)", c_push,
       absl::StrFormat("%.0f%% of bare WriteBatch (information: a push reads, updates, evicts "
                       "and writes)",
                       100 * c_push / writebatch));
  line("    bare RocksDB WriteBatch, same rows (ceiling)", writebatch, "ceiling");
  out << absl::StrFormat("    populate: PS %.1f s (pushes + evictions + compaction), bare %.1f s\n",
                         populate_s, ceiling.populate_seconds);

  // The WAL's cost on pushes: a table that fits in memory, pushed in place,
  // on three PSes open at once (WAL off, on, on with fdatasync) so that each
  // WAL figure alternates with WAL off in paired slices.
  const int64_t wal_rows = std::min<int64_t>(rows, 200000);
  const KeyPool wal_pool = MakeKeyPool(wal_rows, batch, options.seed + 1);
  std::unique_ptr<ps::ParameterServer> wal_ps[3];  // off, on (write), on + fdatasync
  for (int m = 0; m < 3; ++m) {
    ASSIGN_OR_RETURN(wal_ps[m],
                     OpenPs(work.path() + "/wal-" + std::to_string(m), m > 0, m == 2, rocks));
    RETURN_IF_ERROR(wal_ps[m]->CreateTable(SgdTable(dim, 4 * wal_rows)));
    RETURN_IF_ERROR(Populate(*wal_ps[m], wal_rows, dim, batch));
  }
  // Pushes with exactly-once identities, as a trainer's: a client per
  // thread, its own sequence.
  const int max_threads = std::max(1, options.wal_threads);
  std::vector<uint64_t> sequences(3 * static_cast<size_t>(max_threads));
  auto pusher = [&](int m, int threads) {
    return [&, m, threads](int t, int64_t i) {
      ps::PushContext ctx{.client_id = 42 + static_cast<uint64_t>(t),
                          .sequence = ++sequences[static_cast<size_t>(m * max_threads + t)],
                          .step = i};
      return wal_ps[m]
          ->Push(kTable, wal_pool.Batch(wal_pool.Start(t, threads) + i), grads, ctx)
          .status();
    };
  };
  auto paired = [&](int m, int threads) {
    return MeasurePairedCallRates(threads, options.seconds, options.slices, pusher(m, threads),
                                  pusher(0, threads));
  };
  // A push's log bytes: its keys and gradients (the record's other fields
  // and the frames are a few bytes a stripe).
  const size_t push_log_bytes = static_cast<size_t>(batch) * (8 + dim * sizeof(float));
  // The fdatasync figures' ceiling: a bare log syncing every push's bytes
  // (one thread: a push waits for its own sync), or every `threads` pushes'
  // (group commit at its best).
  ASSIGN_OR_RETURN(std::unique_ptr<BareSyncedLog> bare_one,
                   BareSyncedLog::Create(work.path() + "/bare-1", push_log_bytes));
  ASSIGN_OR_RETURN(std::unique_ptr<BareSyncedLog> bare_group,
                   BareSyncedLog::Create(work.path() + "/bare-n", max_threads * push_log_bytes));
  ASSIGN_OR_RETURN(PairedRates wal_write, paired(1, 1));
  // That log's GBs are dirty pages the kernel would write back during the
  // fdatasync figures (and slow them): deleted, they never reach the disk.
  wal_ps[1].reset();
  std::error_code removed;
  fs::remove_all(work.path() + "/wal-1", removed);
  ASSIGN_OR_RETURN(PairedRates wal_fsync, paired(2, 1));
  ASSIGN_OR_RETURN(PairedRates fsync_vs_bare,
                   MeasurePairedCallRates(1, options.seconds, options.slices, pusher(2, 1),
                                          [&](int, int64_t) { return bare_one->Append(); }));
  ASSIGN_OR_RETURN(PairedRates wal_group, paired(2, max_threads));
  // Not paired: its calls (each max_threads pushes' bytes) on one thread.
  ASSIGN_OR_RETURN(
      const double bare_group_syncs_per_s,
      CallsPerSecond(1, options.seconds, [&](int, int64_t) { return bare_group->Append(); }));
  bare_one.reset();
  bare_group.reset();
  std::unique_ptr<ps::ParameterServer> kept = std::move(wal_ps[0]);  // for the checkpoint below
  wal_ps[2].reset();
  fs::remove_all(work.path() + "/wal-2", removed);
  auto mrows = [&](double calls_per_s) { return calls_per_s * batch / 1e6; };
  auto spread = [](const PairedRates& r) {
    return absl::StrFormat("%.0f%% (pairs %.0f-%.0f%%)", 100 * r.ratio.median, 100 * r.ratio.low,
                           100 * r.ratio.high);
  };
  const double bare_group_mrows = mrows(bare_group_syncs_per_s * max_threads);
  out << absl::StrFormat(
      "  WAL cost, dim %d, %d rows in memory; each WAL figure alternates with its partner in %d "
      "slice pairs %s\n",
      dim, wal_rows, options.slices, "M rows/s");
  line("    push, WAL off, 1 thread", mrows(wal_write.b.calls_per_second), "");
  line("    push, WAL on (write), 1 thread", mrows(wal_write.a.calls_per_second),
       absl::StrFormat("%s of WAL off [goal >= 60%%] %s", spread(wal_write),
                       Pass(wal_write.ratio.median >= 0.6)));
  line("    push, WAL on + fdatasync, 1 thread", mrows(wal_fsync.a.calls_per_second),
       absl::StrFormat("%s of WAL off; %s of the bare synced log", spread(wal_fsync),
                       spread(fsync_vs_bare)));
  line(absl::StrFormat("      bare write + fdatasync of each push's %.2f MB (ceiling)",
                       push_log_bytes / 1e6),
       mrows(fsync_vs_bare.b.calls_per_second),
       absl::StrFormat("ceiling: a push waits for its own sync, %.1f ms each here",
                       1e3 / fsync_vs_bare.b.calls_per_second));
  line(absl::StrFormat("    push, WAL off, %d threads", max_threads),
       mrows(wal_group.b.calls_per_second), "");
  line(absl::StrFormat("    push, WAL on + fdatasync, %d threads", max_threads),
       mrows(wal_group.a.calls_per_second),
       absl::StrFormat("%s of WAL off [goal >= 40%%] %s; %.0f%% of the bare group log",
                       spread(wal_group), Pass(wal_group.ratio.median >= 0.4),
                       100 * mrows(wal_group.a.calls_per_second) / bare_group_mrows));
  line(absl::StrFormat("      bare write + fdatasync of %d pushes' %.1f MB (ceiling, unpaired)",
                       max_threads, max_threads * push_log_bytes / 1e6),
       bare_group_mrows,
       absl::StrFormat("ceiling: group commit at its best; the disk takes %.0f MB/s synced",
                       bare_group_syncs_per_s * max_threads * push_log_bytes / 1e6));

  // Checkpoint and restore per GB (rows in memory).
  ps::CheckpointOptions mem_ckpt;
  mem_ckpt.dir = work.path() + "/ckpt-mem";
  ASSIGN_OR_RETURN(ps::CheckpointInfo mem_info, kept->Checkpoint(mem_ckpt));
  kept.reset();
  ps::ParameterServer fresh({});
  t0 = std::chrono::steady_clock::now();
  ASSIGN_OR_RETURN(ps::RestoreInfo restored, fresh.Restore(mem_ckpt.dir));
  const double restore_s = Since(t0);
  const double mem_gb = static_cast<double>(mem_info.bytes) / 1e9;
  out << absl::StrFormat(
      "  checkpoint, %d rows in memory: %.3f GB in %.2f s = %.2f GB/s (pushes wait this long); "
      "restore into a fresh PS %.2f s = %.2f GB/s (%d rows)\n",
      wal_rows, mem_gb, mem_info.seconds, mem_gb / mem_info.seconds, restore_s, mem_gb / restore_s,
      restored.rows);
  out << absl::StrFormat(
      "  checkpoint, tiered table: %.3f GB (hot rows written, RocksDB files hard-linked) in "
      "%.2f s\n",
      tiered_info.bytes / 1e9, tiered_info.seconds);

  // Table churn, a durable PS (WAL on, as `brook ps --data-dir`) beside a
  // memory-only one.
  Churn durable_churn, mem_churn;
  {
    ASSIGN_OR_RETURN(std::unique_ptr<ps::ParameterServer> p,
                     OpenPs(work.path() + "/churn", /*wal=*/true, /*fsync=*/false, rocks));
    ASSIGN_OR_RETURN(durable_churn, TableChurn(*p, options.churn_tables));
  }
  {
    ps::ParameterServer p({});
    ASSIGN_OR_RETURN(mem_churn, TableChurn(p, options.churn_tables));
  }
  out << absl::StrFormat(
      "  table churn, %d tables (24 a job, each pushed once, none spills), tables/s:\n"
      "    %-22s %9s %9s %9s %12s\n",
      options.churn_tables, "", "first 100", "last 100", "drops", "RSS/table");
  const std::pair<const char*, const Churn*> churns[] = {{"data dir (WAL on)", &durable_churn},
                                                         {"memory only", &mem_churn}};
  for (const auto& [what, churn] : churns) {
    const Churn& c = *churn;
    out << absl::StrFormat("    %-22s %9.0f %9.0f %9.0f %9.1f KiB   last/first %.2f\n", what,
                           c.first_per_s, c.last_per_s, c.drop_per_s, c.rss_per_table / 1024,
                           c.last_per_s / c.first_per_s);
  }

  if (result != nullptr) {
    *result = {{"dim", dim},
               {"rows", rows},
               {"memory_budget_rows", rows / 10},
               {"block_cache_bytes", rocks.block_cache_bytes},
               {"tier_pull_mrows_s", c_pull},
               {"tier_push_mrows_s", c_push},
               {"bare_multiget_mrows_s", multiget},
               {"bare_writebatch_mrows_s", writebatch},
               {"tier_pull_vs_multiget", c_pull / multiget},
               {"memory_hit_ratio", hit_ratio},
               {"push_wal_off_mrows_s", mrows(wal_write.b.calls_per_second)},
               {"push_wal_on_mrows_s", mrows(wal_write.a.calls_per_second)},
               {"push_wal_on_vs_off", wal_write.ratio.median},
               {"push_wal_fsync_mrows_s", mrows(wal_fsync.a.calls_per_second)},
               {"push_wal_fsync_vs_off", wal_fsync.ratio.median},
               {"push_wal_fsync_vs_bare_synced_log", fsync_vs_bare.ratio.median},
               {"bare_synced_log_mrows_s", mrows(fsync_vs_bare.b.calls_per_second)},
               {"bare_group_synced_log_mrows_s", bare_group_mrows},
               {"wal_threads", max_threads},
               {"push_wal_off_threads_mrows_s", mrows(wal_group.b.calls_per_second)},
               {"push_wal_fsync_threads_mrows_s", mrows(wal_group.a.calls_per_second)},
               {"push_wal_fsync_threads_vs_off", wal_group.ratio.median},
               {"checkpoint_gb_s", mem_gb / mem_info.seconds},
               {"restore_gb_s", mem_gb / restore_s},
               {"tiered_checkpoint_s", tiered_info.seconds},
               {"churn_tables", options.churn_tables},
               {"churn_data_dir_first100_tables_s", durable_churn.first_per_s},
               {"churn_data_dir_last100_tables_s", durable_churn.last_per_s},
               {"churn_data_dir_drops_s", durable_churn.drop_per_s},
               {"churn_data_dir_rss_per_table_bytes", durable_churn.rss_per_table},
               {"churn_memory_first100_tables_s", mem_churn.first_per_s},
               {"churn_memory_last100_tables_s", mem_churn.last_per_s},
               {"churn_memory_drops_s", mem_churn.drop_per_s},
               {"churn_memory_rss_per_table_bytes", mem_churn.rss_per_table}};
  }
  return absl::OkStatus();
}

}  // namespace brook::bench
