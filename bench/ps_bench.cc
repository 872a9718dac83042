#include "bench/ps_bench.h"

#include <grpcpp/grpcpp.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "bench/bare_grpc.h"
#include "bench/bench_util.h"
#include "bench/paired_rate.h"
#include "bench/ps_tier_bench.h"
#include "bench/redis_resp.h"
#include "common/malloc_tuning.h"
#include "common/status_macros.h"
#include "common/usable_cpus.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/parameter_server.h"
#include "ps/rpc/ps_server.h"

namespace brook::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr char kTable[] = "bench";
constexpr float kLearningRate = 0.01f;
constexpr int kPsChannels = 2;  // GrpcPsClientOptions::channels_per_shard default

// rows x dim floats on 2 MiB-aligned memory with MADV_HUGEPAGE, as the PS
// arena asks for (NOTES.md: huge pages make random gathers ~1.5x faster).
class PlainTable {
 public:
  PlainTable(int64_t rows, int dim) : dim_(dim) {
    constexpr size_t kHuge = 2u << 20;
    size_t want = static_cast<size_t>(rows) * dim * sizeof(float);
    bytes_ = (want + kHuge - 1) / kHuge * kHuge + kHuge;
    void* p = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      base_ = nullptr;
      return;
    }
    base_ = static_cast<char*>(p);
    auto aligned = (reinterpret_cast<uintptr_t>(base_) + kHuge - 1) / kHuge * kHuge;
    data_ = reinterpret_cast<float*>(aligned);
#ifdef MADV_HUGEPAGE
    madvise(data_, bytes_ - kHuge, MADV_HUGEPAGE);
#endif
    for (size_t i = 0; i < static_cast<size_t>(rows) * dim; ++i)
      data_[i] = static_cast<float>(i % 1000) * 1e-4f;
  }
  ~PlainTable() {
    if (base_) munmap(base_, bytes_);
  }
  bool ok() const { return base_ != nullptr; }
  void Gather(absl::Span<const uint64_t> keys, float* out) const {
    const size_t row_bytes = static_cast<size_t>(dim_) * sizeof(float);
    for (size_t i = 0; i < keys.size(); ++i)
      std::memcpy(out + i * dim_, data_ + keys[i] * dim_, row_bytes);
  }
  // SGD in place. Threads may hit the same row: relaxed atomic loads and
  // stores keep that defined (plain moves on x86; lost updates are fine here).
  void ScatterSgd(absl::Span<const uint64_t> keys, const float* grads) {
    for (size_t i = 0; i < keys.size(); ++i) {
      float* row = data_ + keys[i] * dim_;
      const float* g = grads + i * dim_;
      for (int j = 0; j < dim_; ++j) {
        std::atomic_ref<float> w(row[j]);
        w.store(w.load(std::memory_order_relaxed) - kLearningRate * g[j],
                std::memory_order_relaxed);
      }
    }
  }

 private:
  int dim_;
  size_t bytes_ = 0;
  char* base_ = nullptr;
  float* data_ = nullptr;
};

const char* Pass(bool ok) { return ok ? "PASS" : "MISS"; }

constexpr double kGrpcGoal = 0.7;  // (b): issue 3's share of the bare gRPC rate

// One figure of (a) or (b): M rows/s and the cores the process kept busy.
struct Figure {
  double mrows = 0;
  double cores = 0;
  // Process CPU per row; rows is mrows x 1e6, so ns = cores x 1e3 / mrows.
  double CpuNanosPerRow() const { return mrows > 0 ? cores * 1e3 / mrows : 0; }
};

// A figure and its ceiling from MeasurePairedCallRates.
struct FigurePair {
  Figure figure;
  Figure ceiling;
  RatioSpread ratio;  // figure / ceiling, slice pair by slice pair
};

// "; pairs 41-52%": how far the slice pairs' ratios spread around the median.
std::string SpreadNote(const RatioSpread& r) {
  return absl::StrFormat("; pairs %.0f-%.0f%%", 100 * r.low, 100 * r.high);
}

struct RedisState {
  std::string status = "skipped";  // "ran", "skipped", "failed: ..."
  std::unique_ptr<RedisProcess> process;
  std::vector<std::unique_ptr<RedisConnection>> conns;
};

// (d): a training step's tables over gRPC, one call per table in sequence
// (what a trainer did before the batch RPCs) vs one PullBatch / PushBatch.
absl::Status RunStepBench(const PsBenchOptions& o, std::ostream& out, nlohmann::json* result) {
  if (o.step_keys <= 0 || o.step_dim <= 0 || o.step_dim > ps::kMaxDim || o.step_shards <= 0 ||
      o.step_rows <= 0) {
    return absl::InvalidArgumentError(
        "step benchmark: keys, dim, shards and rows must be positive");
  }
  const int tables = o.step_tables, keys = o.step_keys, dim = o.step_dim;
  std::vector<std::unique_ptr<ps::rpc::PsServer>> servers;
  ps::GrpcPsClientOptions co;
  co.channels_per_shard = kPsChannels;
  for (int s = 0; s < o.step_shards; ++s) {
    ps::rpc::PsServerOptions so;
    so.listen = "127.0.0.1:0";
    so.metrics_listen = "";
    so.evict_interval = absl::ZeroDuration();
    so.ps.shard_index = s;
    so.ps.num_shards = o.step_shards;
    ASSIGN_OR_RETURN(auto server, ps::rpc::PsServer::Start(so));
    co.addresses.push_back(server->address());
    servers.push_back(std::move(server));
  }
  ASSIGN_OR_RETURN(auto client, ps::GrpcPsClient::Create(co));
  RETURN_IF_ERROR(client->WaitForReady(absl::Seconds(10)));
  std::vector<std::string> names(tables);
  for (int t = 0; t < tables; ++t) {
    names[t] = absl::StrCat("C", t + 1);
    ps::TableOptions to;
    to.name = names[t];
    to.dim = dim;
    to.seed = 7 + t;
    to.optimizer.kind = ps::OptimizerKind::kSgd;
    to.optimizer.learning_rate = kLearningRate;
    RETURN_IF_ERROR(client->CreateTable(to));
    std::vector<uint64_t> populate(std::min<int64_t>(o.step_rows, 4096));
    for (int64_t k0 = 0; k0 < o.step_rows; k0 += static_cast<int64_t>(populate.size())) {
      const size_t n = static_cast<size_t>(std::min<int64_t>(populate.size(), o.step_rows - k0));
      for (size_t i = 0; i < n; ++i) populate[i] = static_cast<uint64_t>(k0) + i;
      RETURN_IF_ERROR(client->Push(names[t], absl::MakeConstSpan(populate.data(), n),
                                   std::vector<float>(n * dim, 1e-3f), 0));
    }
  }
  // Pre-drawn steps: per table `keys` keys, uniform (repeats allowed, as in
  // a real batch), so drawing costs nothing in the loops.
  constexpr int kSteps = 32;
  std::mt19937_64 rng(o.seed);
  std::uniform_int_distribution<uint64_t> pick(0, static_cast<uint64_t>(o.step_rows - 1));
  std::vector<std::vector<uint64_t>> step_keys(static_cast<size_t>(kSteps) * tables);
  for (auto& k : step_keys) {
    k.resize(keys);
    for (auto& key : k) key = pick(rng);
  }
  std::vector<std::vector<float>> rows(tables, std::vector<float>(static_cast<size_t>(keys) * dim));
  const std::vector<float> grads(static_cast<size_t>(keys) * dim, 1e-3f);
  auto keys_of = [&](int64_t step, int t) -> absl::Span<const uint64_t> {
    return step_keys[static_cast<size_t>(step % kSteps) * tables + t];
  };
  std::vector<ps::TablePull> pulls(tables);
  std::vector<ps::TablePush> pushes(tables);
  const double rows_per_step = static_cast<double>(tables) * keys;
  auto rate = [&](auto fn) -> absl::StatusOr<double> {
    ASSIGN_OR_RETURN(double steps, CallsPerSecond(1, o.seconds, fn));
    return steps * rows_per_step / 1e6;  // M rows/s
  };
  ASSIGN_OR_RETURN(double seq_pull, rate([&](int, int64_t i) -> absl::Status {
                     for (int t = 0; t < tables; ++t) {
                       RETURN_IF_ERROR(
                           client->Pull(names[t], keys_of(i, t), absl::MakeSpan(rows[t])));
                     }
                     return absl::OkStatus();
                   }));
  ASSIGN_OR_RETURN(double batch_pull, rate([&](int, int64_t i) {
                     for (int t = 0; t < tables; ++t) {
                       pulls[t] = {names[t], keys_of(i, t), absl::MakeSpan(rows[t])};
                     }
                     return client->PullBatch(pulls, {});
                   }));
  ASSIGN_OR_RETURN(double seq_push, rate([&](int, int64_t i) -> absl::Status {
                     for (int t = 0; t < tables; ++t) {
                       RETURN_IF_ERROR(client->Push(names[t], keys_of(i, t), grads, i));
                     }
                     return absl::OkStatus();
                   }));
  ASSIGN_OR_RETURN(double batch_push, rate([&](int, int64_t i) {
                     for (int t = 0; t < tables; ++t) pushes[t] = {names[t], keys_of(i, t), grads};
                     return client->PushBatch(pushes, {}, i, 1.0f);
                   }));
  const double gb = static_cast<double>(dim) * sizeof(float) / 1e3;  // M rows/s -> GB/s
  out << absl::StrFormat(
      "\n(d) one training step over gRPC (127.0.0.1, %d PS shard%s in this process, 1 client "
      "thread): %d tables x %d keys (repeats allowed, uniform over %d rows each), dim %d, SGD\n",
      o.step_shards, o.step_shards == 1 ? "" : "s", tables, keys, o.step_rows, dim);
  out << absl::StrFormat("    %-56s %9s %7s %9s   %s\n", "", "M rows/s", "GB/s", "steps/s",
                         "vs per-table calls");
  auto line = [&](const std::string& name, double r, const std::string& note) {
    out << absl::StrFormat("    %-56s %9.3f %7.3f %9.0f   %s\n", name, r, r * gb,
                           r * 1e6 / rows_per_step, note);
  };
  line(absl::StrCat(tables, " x GrpcPsClient::Pull, one after another"), seq_pull, "baseline");
  line("GrpcPsClient::PullBatch (one RPC per shard)", batch_pull,
       absl::StrFormat("%.1fx", batch_pull / seq_pull));
  line(absl::StrCat(tables, " x GrpcPsClient::Push, one after another"), seq_push, "baseline");
  line("GrpcPsClient::PushBatch (one RPC per shard)", batch_push,
       absl::StrFormat("%.1fx", batch_push / seq_push));
  if (result != nullptr) {
    *result = {{"tables", tables},
               {"keys_per_table", keys},
               {"dim", dim},
               {"shards", o.step_shards},
               {"sequential_pull_mrows_s", seq_pull},
               {"batch_pull_mrows_s", batch_pull},
               {"pull_batch_speedup", batch_pull / seq_pull},
               {"sequential_push_mrows_s", seq_push},
               {"batch_push_mrows_s", batch_push},
               {"push_batch_speedup", batch_push / seq_push}};
  }
  client.reset();
  for (auto& server : servers) server->Shutdown(absl::Seconds(1));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunPsBench(const PsBenchOptions& options, std::ostream& out, nlohmann::json* result) {
  if (options.rows <= 0 || options.batch <= 0 || options.seconds <= 0 || options.dims.empty() ||
      options.threads.empty() || options.slices <= 0)
    return absl::InvalidArgumentError("--rows, --batch, --seconds, --slices, --dims, --threads "
                                      "must be set and positive");
  for (int d : options.dims)
    if (d <= 0 || d > ps::kMaxDim) return absl::InvalidArgumentError("bad --dims value");
  for (int t : options.threads)
    if (t <= 0 || t > 256) return absl::InvalidArgumentError("--threads must be in [1, 256]");
  if (options.rows < options.batch)
    return absl::InvalidArgumentError(
        absl::StrCat("--rows ", options.rows, " is below --batch ", options.batch));
  if (options.tier.rows > 0 && options.tier.rows < 10 * static_cast<int64_t>(options.tier.batch)) {
    return absl::InvalidArgumentError(absl::StrCat("--tier-rows ", options.tier.rows,
                                                   " is below 10 x --batch (", options.tier.batch,
                                                   "); 0 skips (c)"));
  }
  const int max_threads = *std::max_element(options.threads.begin(), options.threads.end());
  const int batch = options.batch;
  const auto wall0 = Clock::now();

  out << absl::StrFormat(
      "brook bench ps: batches of %d distinct keys drawn uniformly at random from the populated "
      "rows (%d pre-drawn batches max), %.1f s per figure, %d cores, allocator: %s\n",
      batch, kMaxPoolBatches, options.seconds, UsableCpus(),
      MallocDescription());
  out << absl::StrFormat(
      "  each figure and its ceiling alternate in %d slice pairs (A B, B A, ...); a ratio is the "
      "median pair's, with the lowest and highest pair after it\n",
      options.slices);
  out << "  (a) in process: ParameterServer::Pull/Push on the core (SGD), no client layer; "
         "ceiling: memcpy gather of the same rows from a plain huge-page float array\n"
         "  (b) gRPC: PsServer in this process on 127.0.0.1:0, GrpcPsClient (1 shard, 2 "
         "connections) shared by the threads; ceiling: generic ByteBuffer service answering "
         "pre-built payloads of the same bytes, GenericStub over 2 connections\n"
         "  (d) gRPC: one training step's tables, a Pull / Push per table in sequence vs one "
         "PullBatch / PushBatch (one RPC per shard)\n"
         "  rows/s are M rows/s; GB/s counts row payload only (rows x dim x 4 B); cores: process "
         "CPU seconds (user + system, client and server alike) per wall second\n";

  // Redis, started once for the whole run.
  RedisState redis;
  if (options.redis) {
    std::string bin = FindRedisServer();
    if (bin.empty()) {
      out << "  Redis: SKIPPED (redis-server not installed; apt-get install redis-server)\n";
    } else {
      auto proc = RedisProcess::Start(bin);
      absl::Status st = proc.status();
      if (st.ok()) {
        redis.process = std::move(*proc);
        for (int i = 0; i < max_threads && st.ok(); ++i) {
          auto c = RedisConnection::Connect(redis.process->port(), absl::Seconds(10));
          if (!c.ok()) st = c.status();
          else redis.conns.push_back(std::move(*c));
        }
      }
      if (st.ok()) {
        redis.status = "ran";
        out << "  Redis: " << bin << " on 127.0.0.1:" << redis.process->port()
            << " (no persistence), RESP over TCP, one connection per thread\n";
      } else {
        redis.status = absl::StrCat("failed: ", st.message());
        out << "  Redis: FAILED (" << st.message() << ")\n";
        redis.conns.clear();
        redis.process.reset();
      }
    }
  } else {
    out << "  Redis: SKIPPED (--no-redis)\n";
  }
  const bool use_redis = redis.status == "ran";

  nlohmann::json runs = nlohmann::json::array();
  for (int dim : options.dims) {
    const int64_t rows =
        std::min<int64_t>(options.rows, static_cast<int64_t>((512ull << 20) / (dim * 4ull)));
    if (rows < batch)
      return absl::InvalidArgumentError(absl::StrCat("--rows ", rows, " is below --batch ", batch));
    const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
    const KeyPool pool = MakeKeyPool(rows, batch, options.seed + dim);

    // The PS: core + gRPC server in this process (they share one malloc).
    ps::rpc::PsServerOptions so;
    so.listen = "127.0.0.1:0";
    so.metrics_listen = "";
    so.evict_interval = absl::ZeroDuration();
    so.helpers = options.helpers;
    ASSIGN_OR_RETURN(auto server, ps::rpc::PsServer::Start(so));
    ps::ParameterServer* core = server->parameter_server();
    ps::TableOptions to;
    to.name = kTable;
    to.dim = dim;
    to.seed = 7;
    to.optimizer.kind = ps::OptimizerKind::kSgd;
    to.optimizer.learning_rate = kLearningRate;
    to.memory_budget_bytes = 8ull << 30;
    RETURN_IF_ERROR(core->CreateTable(to));
    std::vector<float> grads(static_cast<size_t>(batch) * dim, 1e-3f);
    {  // populate: push every key once
      std::vector<uint64_t> keys(batch);
      for (int64_t k0 = 0; k0 < rows; k0 += batch) {
        const int n = static_cast<int>(std::min<int64_t>(batch, rows - k0));
        for (int i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(k0 + i);
        auto pushed = core->Push(kTable, absl::MakeConstSpan(keys.data(), n),
                                 absl::MakeConstSpan(grads.data(), static_cast<size_t>(n) * dim),
                                 ps::PushContext{});
        if (!pushed.ok()) return pushed.status();
      }
    }
    ps::GrpcPsClientOptions co;
    co.addresses = {server->address()};
    co.channels_per_shard = kPsChannels;
    ASSIGN_OR_RETURN(auto client, ps::GrpcPsClient::Create(co));
    RETURN_IF_ERROR(client->WaitForReady(absl::Seconds(10)));

    // Ceilings.
    PlainTable plain(rows, dim);
    if (!plain.ok()) return absl::ResourceExhaustedError("cannot map the plain table");
    ASSIGN_OR_RETURN(auto bare_server, BareGrpcServer::Start(static_cast<size_t>(batch) * row_bytes));
    ASSIGN_OR_RETURN(auto bare_client, BareGrpcClient::Create(bare_server->port(), kPsChannels));
    const grpc::ByteBuffer pull_request = MakePayload(static_cast<size_t>(batch) * 8);
    const grpc::ByteBuffer push_request =
        MakePayload(static_cast<size_t>(batch) * (8 + row_bytes));

    // Redis: the same rows, dim x 4-byte values.
    double redis_populate_s = 0;
    if (use_redis) {
      auto r0 = Clock::now();
      RETURN_IF_ERROR(redis.conns[0]->Simple({"FLUSHALL"}));
      std::vector<uint64_t> keys(batch);
      std::vector<char> values(static_cast<size_t>(batch) * row_bytes, '\x01');
      for (int64_t k0 = 0; k0 < rows; k0 += batch) {
        const int n = static_cast<int>(std::min<int64_t>(batch, rows - k0));
        for (int i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(k0 + i);
        RETURN_IF_ERROR(
            redis.conns[0]->MSet(absl::MakeConstSpan(keys.data(), n), values.data(), row_bytes));
      }
      redis_populate_s = std::chrono::duration<double>(Clock::now() - r0).count();
    }

    out << absl::StrFormat(
        "\ndim %d: %d rows (%.0f MB of weights), %d B per row, pull reply %.2f MB, push request "
        "%.2f MB; (b) PS helper threads: %d\n",
        dim, rows, static_cast<double>(rows) * row_bytes / 1e6, row_bytes,
        static_cast<double>(batch) * row_bytes / 1e6,
        static_cast<double>(batch) * (8 + row_bytes) / 1e6, server->helpers());

    std::vector<std::vector<float>> outs(max_threads,
                                         std::vector<float>(static_cast<size_t>(batch) * dim));
    std::vector<std::vector<char>> redis_outs(
        use_redis ? max_threads : 0, std::vector<char>(static_cast<size_t>(batch) * row_bytes));
    std::vector<char> redis_values(static_cast<size_t>(batch) * row_bytes, '\x02');

    for (int threads : options.threads) {
      auto keys_for = [&](int t, int64_t i) { return pool.Batch(pool.Start(t, threads) + i); };
      auto rate = [&](auto fn) -> absl::StatusOr<Figure> {
        ASSIGN_OR_RETURN(MeasuredRate r, MeasureCallRate(threads, options.seconds, fn));
        return Figure{r.calls_per_second * batch / 1e6, r.cores_busy};
      };
      // A figure and its ceiling, alternating slice by slice.
      auto paired = [&](auto figure_fn, auto ceiling_fn) -> absl::StatusOr<FigurePair> {
        ASSIGN_OR_RETURN(PairedRates p, MeasurePairedCallRates(threads, options.seconds,
                                                               options.slices, figure_fn,
                                                               ceiling_fn));
        return FigurePair{Figure{p.a.calls_per_second * batch / 1e6, p.a.cores_busy},
                          Figure{p.b.calls_per_second * batch / 1e6, p.b.cores_busy}, p.ratio};
      };
      ASSIGN_OR_RETURN(
          const FigurePair a_pull_pair,
          paired(
              [&](int t, int64_t i) {
                return core->Pull(kTable, keys_for(t, i), absl::MakeSpan(outs[t]));
              },
              [&](int t, int64_t i) {
                plain.Gather(keys_for(t, i), outs[t].data());
                return absl::OkStatus();
              }));
      ASSIGN_OR_RETURN(
          const FigurePair a_push_pair,
          paired(
              [&](int t, int64_t i) {
                return core->Push(kTable, keys_for(t, i), grads, ps::PushContext{}).status();
              },
              [&](int t, int64_t i) {
                plain.ScatterSgd(keys_for(t, i), grads.data());
                return absl::OkStatus();
              }));
      ASSIGN_OR_RETURN(
          const FigurePair b_pull_pair,
          paired(
              [&](int t, int64_t i) {
                return client->Pull(kTable, keys_for(t, i), absl::MakeSpan(outs[t]));
              },
              [&](int, int64_t) { return bare_client->Call(kBarePullMethod, pull_request); }));
      ASSIGN_OR_RETURN(
          const FigurePair b_push_pair,
          paired([&](int t, int64_t i) { return client->Push(kTable, keys_for(t, i), grads, 0); },
                 [&](int, int64_t) { return bare_client->Call(kBarePushMethod, push_request); }));
      const Figure& a_pull = a_pull_pair.figure;
      const Figure& gather = a_pull_pair.ceiling;
      const Figure& a_push = a_push_pair.figure;
      const Figure& scatter = a_push_pair.ceiling;
      const Figure& b_pull = b_pull_pair.figure;
      const Figure& bare_pull = b_pull_pair.ceiling;
      const Figure& b_push = b_push_pair.figure;
      const Figure& bare_push = b_push_pair.ceiling;
      Figure mget, mset;
      if (use_redis) {
        ASSIGN_OR_RETURN(mget, rate([&](int t, int64_t i) {
                           return redis.conns[t]->MGet(keys_for(t, i), row_bytes,
                                                       redis_outs[t].data());
                         }));
        ASSIGN_OR_RETURN(mset, rate([&](int t, int64_t i) {
                           return redis.conns[t]->MSet(keys_for(t, i), redis_values.data(),
                                                       row_bytes);
                         }));
      }

      const double gb = static_cast<double>(row_bytes) / 1e3;  // M rows/s -> GB/s
      const double a_ratio = a_pull_pair.ratio.median,
                   a_push_ratio = a_push_pair.ratio.median;
      const double b_ratio = b_pull_pair.ratio.median, b_push_ratio = b_push_pair.ratio.median;
      // What (b) can reach if the PS's own work (the in-process figure) runs
      // after the transport's (the bare figure) rather than beside it: their
      // times per row add. A request's lookup only overlaps another's
      // transport when there are cores to spare (BENCHMARKS.md).
      const double pull_bound = 1.0 / (1.0 / a_pull.mrows + 1.0 / bare_pull.mrows);
      const double push_bound = 1.0 / (1.0 / a_push.mrows + 1.0 / bare_push.mrows);
      out << absl::StrFormat("  dim %d, %d thread%s %38s %9s %7s %6s   %s\n", dim, threads,
                             threads == 1 ? " " : "s", "", "M rows/s", "GB/s", "cores",
                             "vs ceiling");
      auto line = [&](const char* name, const Figure& f, const std::string& note) {
        out << absl::StrFormat("    %-56s %9.2f %7.2f %6.2f   %s\n", name, f.mrows, f.mrows * gb,
                               f.cores, note);
      };
      auto bound_line = [&](const char* name, double r, const std::string& note) {
        out << absl::StrFormat("    %-56s %9.2f %7.2f %6s   %s\n", name, r, r * gb, "", note);
      };
      // Where the cores went, per row: once every core is busy (the cores
      // column at the machine's count) the ratio to bare gRPC is the ratio of
      // CPU per row, so 70% leaves the PS path bare x (1/0.7 - 1) of CPU on
      // top of the transport's, and its in-process lookup alone needs what the
      // (a) line shows.
      auto cpu_line = [&](const char* what, const Figure& ps, const Figure& bare,
                          const Figure& inproc) {
        out << absl::StrFormat(
            "        CPU per row: %s %.0f ns = bare %.0f + %.0f ns; 70%% allows + %.0f ns; the "
            "in-process %s alone uses %.0f ns (information)\n",
            what, ps.CpuNanosPerRow(), bare.CpuNanosPerRow(),
            ps.CpuNanosPerRow() - bare.CpuNanosPerRow(),
            bare.CpuNanosPerRow() * (1 / kGrpcGoal - 1),
            what, inproc.CpuNanosPerRow());
      };
      line("(a) in process: ParameterServer::Pull", a_pull,
           absl::StrFormat("%.0f%% of gather [goal >= 50%%] %s%s", 100 * a_ratio,
                           Pass(a_ratio >= 0.5), SpreadNote(a_pull_pair.ratio)));
      line("    gather from a plain array (ceiling)", gather, "ceiling");
      line("(a) in process: ParameterServer::Push (SGD)", a_push,
           absl::StrFormat("%.0f%% of scatter (information)%s", 100 * a_push_ratio,
                           SpreadNote(a_push_pair.ratio)));
      line("    scatter-SGD into a plain array (ceiling)", scatter, "ceiling");
      line("(b) gRPC 127.0.0.1: GrpcPsClient::Pull", b_pull,
           absl::StrFormat("%.0f%% of bare gRPC [goal >= 70%%] %s%s", 100 * b_ratio,
                           Pass(b_ratio >= kGrpcGoal), SpreadNote(b_pull_pair.ratio)));
      line("    bare gRPC, same bytes, pre-built ByteBuffer (ceiling)", bare_pull, "ceiling");
      bound_line("    bound if the PS's pull adds to the transport", pull_bound,
                 absl::StrFormat("%.0f%% of bare gRPC (information)",
                                 100 * pull_bound / bare_pull.mrows));
      cpu_line("pull", b_pull, bare_pull, a_pull);
      line("(b) gRPC 127.0.0.1: GrpcPsClient::Push (SGD)", b_push,
           absl::StrFormat("%.0f%% of bare gRPC [goal >= 70%%] %s%s", 100 * b_push_ratio,
                           Pass(b_push_ratio >= kGrpcGoal), SpreadNote(b_push_pair.ratio)));
      line("    bare gRPC, same bytes, pre-built ByteBuffer (ceiling)", bare_push, "ceiling");
      bound_line("    bound if the PS's push adds to the transport", push_bound,
                 absl::StrFormat("%.0f%% of bare gRPC (information)",
                                 100 * push_bound / bare_push.mrows));
      cpu_line("push", b_push, bare_push, a_push);
      nlohmann::json run = {{"dim", dim},
                            {"threads", threads},
                            {"rows", rows},
                            {"inproc_pull_vs_gather", a_ratio},
                            {"inproc_push_vs_scatter", a_push_ratio},
                            {"grpc_pull_gb_s", b_pull.mrows * gb},
                            {"grpc_pull_vs_bare", b_ratio},
                            {"grpc_push_vs_bare", b_push_ratio},
                            {"grpc_pull_serial_bound_vs_bare", pull_bound / bare_pull.mrows},
                            {"grpc_push_serial_bound_vs_bare", push_bound / bare_push.mrows},
                            {"slice_pairs", options.slices},
                            {"helpers", server->helpers()}};
      // Each ratio's lowest and highest slice pair beside its median.
      for (const auto& [key, pair] :
           {std::pair<const char*, const FigurePair&>{"inproc_pull_vs_gather", a_pull_pair},
            {"inproc_push_vs_scatter", a_push_pair},
            {"grpc_pull_vs_bare", b_pull_pair},
            {"grpc_push_vs_bare", b_push_pair}}) {
        run[absl::StrCat(key, "_low")] = pair.ratio.low;
        run[absl::StrCat(key, "_high")] = pair.ratio.high;
      }
      // Every figure's rate, cores busy and CPU per row: "<figure>_mrows_s",
      // "<figure>_cores", "<figure>_cpu_ns_per_row".
      for (const auto& [key, f] : {std::pair<const char*, const Figure&>{"inproc_pull", a_pull},
                                   {"gather", gather},
                                   {"inproc_push", a_push},
                                   {"scatter", scatter},
                                   {"grpc_pull", b_pull},
                                   {"bare_grpc_pull", bare_pull},
                                   {"grpc_push", b_push},
                                   {"bare_grpc_push", bare_push}}) {
        run[absl::StrCat(key, "_mrows_s")] = f.mrows;
        run[absl::StrCat(key, "_cores")] = f.cores;
        run[absl::StrCat(key, "_cpu_ns_per_row")] = f.CpuNanosPerRow();
      }
      if (use_redis) {
        const double pull_x = b_pull.mrows / mget.mrows, push_x = b_push.mrows / mset.mrows;
        line("Redis MGET (baseline)", mget,
             absl::StrFormat("Brook gRPC pull = %.1fx [goal >= 3x] %s", pull_x,
                             Pass(pull_x >= 3.0)));
        line("Redis MSET (baseline)", mset,
             absl::StrFormat("Brook gRPC push = %.1fx [goal >= 3x] %s", push_x,
                             Pass(push_x >= 3.0)));
        run["redis_mget_mrows_s"] = mget.mrows;
        run["redis_mset_mrows_s"] = mset.mrows;
        run["grpc_pull_vs_redis_mget"] = pull_x;
        run["grpc_push_vs_redis_mset"] = push_x;
        run["redis_populate_s"] = redis_populate_s;
      }
      runs.push_back(std::move(run));
    }
    client.reset();
    server->Shutdown(absl::Seconds(1));
  }
  nlohmann::json step;
  if (options.step_tables > 0) {
    RETURN_IF_ERROR(RunStepBench(options, out, &step));
  } else {
    out << "\n(d) training step over gRPC: SKIPPED (step_tables 0)\n";
  }
  nlohmann::json tier;
  if (options.tier.rows > 0) {
    RETURN_IF_ERROR(RunPsTierBench(options.tier, out, &tier));
  } else {
    out << "\n(c) RocksDB tier: SKIPPED (--tier-rows 0)\n";
  }
  const double wall = std::chrono::duration<double>(Clock::now() - wall0).count();
  out << absl::StrFormat("\nwall time %.0f s\n", wall);
  if (result) {
    *result = {{"allocator", MallocDescription()},
               {"cores", UsableCpus()},
               {"batch", batch},
               {"seconds_per_figure", options.seconds},
               {"keys", "distinct per batch, uniform over the populated rows"},
               {"redis", redis.status},
               {"wall_s", wall},
               {"runs", std::move(runs)},
               {"step", std::move(step)},
               {"tier", std::move(tier)}};
  }
  return absl::OkStatus();
}

}  // namespace brook::bench
