#include "bench/ps_bench.h"

#include <grpcpp/grpcpp.h>
#include <sys/mman.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <latch>
#include <memory>
#include <optional>
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
#include "bench/ps_target_bench.h"
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
  bool ran() const { return status == "ran"; }
};

// (d)'s cluster: step_shards PS shards in this process, one client over them,
// and step_tables tables ("C1", "C2", ...) with step_rows rows each.
struct StepCluster {
  std::vector<std::unique_ptr<ps::rpc::PsServer>> servers;
  std::unique_ptr<ps::GrpcPsClient> client;
  std::vector<std::string> names;  // of the tables
};

absl::Status StartStepCluster(const PsBenchOptions& o, StepCluster* c) {
  const int tables = o.step_tables, dim = o.step_dim;
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
    c->servers.push_back(std::move(server));
  }
  ASSIGN_OR_RETURN(c->client, ps::GrpcPsClient::Create(co));
  RETURN_IF_ERROR(c->client->WaitForReady(absl::Seconds(10)));
  c->names.resize(tables);
  for (int t = 0; t < tables; ++t) {
    c->names[t] = absl::StrCat("C", t + 1);
    ps::TableOptions to;
    to.name = c->names[t];
    to.dim = dim;
    to.seed = 7 + t;
    to.optimizer.kind = ps::OptimizerKind::kSgd;
    to.optimizer.learning_rate = kLearningRate;
    RETURN_IF_ERROR(c->client->CreateTable(to));
    std::vector<uint64_t> populate(std::min<int64_t>(o.step_rows, 4096));
    for (int64_t k0 = 0; k0 < o.step_rows; k0 += static_cast<int64_t>(populate.size())) {
      const size_t n = static_cast<size_t>(std::min<int64_t>(populate.size(), o.step_rows - k0));
      for (size_t i = 0; i < n; ++i) populate[i] = static_cast<uint64_t>(k0) + i;
      RETURN_IF_ERROR(c->client->Push(c->names[t], absl::MakeConstSpan(populate.data(), n),
                                      std::vector<float>(n * dim, 1e-3f), 0));
    }
  }
  return absl::OkStatus();
}

// (d)'s figures, M rows/s.
struct StepRates {
  double seq_pull = 0;
  double batch_pull = 0;
  double seq_push = 0;
  double batch_push = 0;
};

absl::StatusOr<StepRates> MeasureStepRates(const PsBenchOptions& o, ps::GrpcPsClient* client,
                                           const std::vector<std::string>& names) {
  const int tables = o.step_tables, keys = o.step_keys, dim = o.step_dim;
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
  StepRates r;
  ASSIGN_OR_RETURN(
      r.seq_pull, rate([&](int, int64_t i) -> absl::Status {
        for (int t = 0; t < tables; ++t) {
          RETURN_IF_ERROR(client->Pull(names[t], keys_of(i, t), absl::MakeSpan(rows[t])));
        }
        return absl::OkStatus();
      }));
  ASSIGN_OR_RETURN(r.batch_pull, rate([&](int, int64_t i) {
                     for (int t = 0; t < tables; ++t) {
                       pulls[t] = {names[t], keys_of(i, t), absl::MakeSpan(rows[t])};
                     }
                     return client->PullBatch(pulls, {});
                   }));
  ASSIGN_OR_RETURN(r.seq_push, rate([&](int, int64_t i) -> absl::Status {
                     for (int t = 0; t < tables; ++t) {
                       RETURN_IF_ERROR(client->Push(names[t], keys_of(i, t), grads, i));
                     }
                     return absl::OkStatus();
                   }));
  ASSIGN_OR_RETURN(r.batch_push, rate([&](int, int64_t i) {
                     for (int t = 0; t < tables; ++t) pushes[t] = {names[t], keys_of(i, t), grads};
                     return client->PushBatch(pushes, {}, i, 1.0f);
                   }));
  return r;
}

void ReportStepRates(const PsBenchOptions& o, const StepRates& r, std::ostream& out,
                     nlohmann::json* result) {
  const int tables = o.step_tables, keys = o.step_keys, dim = o.step_dim;
  const double rows_per_step = static_cast<double>(tables) * keys;
  const double gb = static_cast<double>(dim) * sizeof(float) / 1e3;  // M rows/s -> GB/s
  out << absl::StrFormat(
      "\n(d) one training step over gRPC (127.0.0.1, %d PS shard%s in this process, 1 client "
      "thread): %d tables x %d keys (repeats allowed, uniform over %d rows each), dim %d, SGD\n",
      o.step_shards, o.step_shards == 1 ? "" : "s", tables, keys, o.step_rows, dim);
  out << absl::StrFormat("    %-56s %9s %7s %9s   %s\n", "", "M rows/s", "GB/s", "steps/s",
                         "vs per-table calls");
  auto line = [&](const std::string& name, double rate, const std::string& note) {
    out << absl::StrFormat("    %-56s %9.3f %7.3f %9.0f   %s\n", name, rate, rate * gb,
                           rate * 1e6 / rows_per_step, note);
  };
  line(absl::StrCat(tables, " x GrpcPsClient::Pull, one after another"), r.seq_pull, "baseline");
  line("GrpcPsClient::PullBatch (one RPC per shard)", r.batch_pull,
       absl::StrFormat("%.1fx", r.batch_pull / r.seq_pull));
  line(absl::StrCat(tables, " x GrpcPsClient::Push, one after another"), r.seq_push, "baseline");
  line("GrpcPsClient::PushBatch (one RPC per shard)", r.batch_push,
       absl::StrFormat("%.1fx", r.batch_push / r.seq_push));
  if (result != nullptr) {
    *result = {{"tables", tables},
               {"keys_per_table", keys},
               {"dim", dim},
               {"shards", o.step_shards},
               {"sequential_pull_mrows_s", r.seq_pull},
               {"batch_pull_mrows_s", r.batch_pull},
               {"pull_batch_speedup", r.batch_pull / r.seq_pull},
               {"sequential_push_mrows_s", r.seq_push},
               {"batch_push_mrows_s", r.batch_push},
               {"push_batch_speedup", r.batch_push / r.seq_push}};
  }
}

// (d): a training step's tables over gRPC, one call per table in sequence
// (what a trainer did before the batch RPCs) vs one PullBatch / PushBatch.
absl::Status RunStepBench(const PsBenchOptions& o, std::ostream& out, nlohmann::json* result) {
  if (o.step_keys <= 0 || o.step_dim <= 0 || o.step_dim > ps::kMaxDim || o.step_shards <= 0 ||
      o.step_rows <= 0) {
    return absl::InvalidArgumentError(
        "step benchmark: keys, dim, shards and rows must be positive");
  }
  StepCluster cluster;
  RETURN_IF_ERROR(StartStepCluster(o, &cluster));
  ASSIGN_OR_RETURN(const StepRates rates, MeasureStepRates(o, cluster.client.get(), cluster.names));
  ReportStepRates(o, rates, out, result);
  cluster.client.reset();
  for (auto& server : cluster.servers) server->Shutdown(absl::Seconds(1));
  return absl::OkStatus();
}

absl::Status ValidatePsBenchOptions(const PsBenchOptions& options) {
  if (options.rows <= 0 || options.batch <= 0 || options.seconds <= 0 || options.dims.empty() ||
      options.threads.empty() || options.slices <= 0)
    return absl::InvalidArgumentError(
        "--rows, --batch, --seconds, --slices, --dims, --threads "
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
  return absl::OkStatus();
}

// What is measured, and how.
void PrintPreamble(const PsBenchOptions& options, std::ostream& out) {
  out << absl::StrFormat(
      "brook bench ps: batches of %d distinct keys drawn uniformly at random from the populated "
      "rows (%d pre-drawn batches max), %.1f s per figure, %d cores, allocator: %s\n",
      options.batch, kMaxPoolBatches, options.seconds, UsableCpus(), MallocDescription());
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
}

// Redis, started once for the whole run: one connection per thread of the
// largest thread count. Says on `out` whether it runs.
RedisState StartRedis(const PsBenchOptions& options, int max_threads, std::ostream& out) {
  RedisState redis;
  if (!options.redis) {
    out << "  Redis: SKIPPED (--no-redis)\n";
    return redis;
  }
  std::string bin = FindRedisServer();
  if (bin.empty()) {
    out << "  Redis: SKIPPED (redis-server not installed; apt-get install redis-server)\n";
    return redis;
  }
  auto proc = RedisProcess::Start(bin);
  absl::Status st = proc.status();
  if (st.ok()) {
    redis.process = std::move(*proc);
    for (int i = 0; i < max_threads && st.ok(); ++i) {
      auto c = RedisConnection::Connect(redis.process->port(), absl::Seconds(10));
      if (!c.ok())
        st = c.status();
      else
        redis.conns.push_back(std::move(*c));
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
  return redis;
}

// (a) and (b) at one dim: the PS (core + gRPC server in this process; they
// share one malloc) with a populated table and a client, the ceilings beside
// it, Redis holding the same rows, and each thread's buffers. Members in the
// order they are set up; they are torn down in reverse.
struct DimBench {
  int dim = 0;
  int64_t rows = 0;
  size_t row_bytes = 0;
  KeyPool pool;
  std::unique_ptr<ps::rpc::PsServer> server;
  ps::ParameterServer* core = nullptr;  // server's
  std::vector<float> grads;             // of one batch, for every push
  std::unique_ptr<ps::GrpcPsClient> client;
  std::optional<PlainTable> plain;
  std::unique_ptr<BareGrpcServer> bare_server;
  std::unique_ptr<BareGrpcClient> bare_client;
  grpc::ByteBuffer pull_request;
  grpc::ByteBuffer push_request;
  double redis_populate_s = 0;
  std::vector<std::vector<float>> outs;       // per thread
  std::vector<std::vector<char>> redis_outs;  // per thread, when Redis runs
  std::vector<char> redis_values;
};

// The PS and its client, the table populated: push every key once.
absl::Status StartDimPs(const PsBenchOptions& options, DimBench* d) {
  const int batch = options.batch, dim = d->dim;
  ps::rpc::PsServerOptions so;
  so.listen = "127.0.0.1:0";
  so.metrics_listen = "";
  so.evict_interval = absl::ZeroDuration();
  so.helpers = options.helpers;
  ASSIGN_OR_RETURN(d->server, ps::rpc::PsServer::Start(so));
  d->core = d->server->parameter_server();
  ps::TableOptions to;
  to.name = kTable;
  to.dim = dim;
  to.seed = 7;
  to.optimizer.kind = ps::OptimizerKind::kSgd;
  to.optimizer.learning_rate = kLearningRate;
  to.memory_budget_bytes = 8ull << 30;
  RETURN_IF_ERROR(d->core->CreateTable(to));
  d->grads.assign(static_cast<size_t>(batch) * dim, 1e-3f);
  {
    std::vector<uint64_t> keys(batch);
    for (int64_t k0 = 0; k0 < d->rows; k0 += batch) {
      const int n = static_cast<int>(std::min<int64_t>(batch, d->rows - k0));
      for (int i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(k0 + i);
      const size_t floats = static_cast<size_t>(n) * dim;
      auto pushed = d->core->Push(kTable, absl::MakeConstSpan(keys.data(), n),
                                  absl::MakeConstSpan(d->grads.data(), floats), ps::PushContext{});
      if (!pushed.ok()) return pushed.status();
    }
  }
  ps::GrpcPsClientOptions co;
  co.addresses = {d->server->address()};
  co.channels_per_shard = kPsChannels;
  ASSIGN_OR_RETURN(d->client, ps::GrpcPsClient::Create(co));
  RETURN_IF_ERROR(d->client->WaitForReady(absl::Seconds(10)));
  to.wire = options.wire;  // the client's side of the table: its requests' precision
  return d->client->CreateTable(to);
}

// The ceilings: a plain array of the same rows for (a), a bare gRPC service
// moving the same bytes for (b).
absl::Status StartDimCeilings(const PsBenchOptions& options, DimBench* d) {
  const int batch = options.batch;
  d->plain.emplace(d->rows, d->dim);
  if (!d->plain->ok()) return absl::ResourceExhaustedError("cannot map the plain table");
  ASSIGN_OR_RETURN(d->bare_server, BareGrpcServer::Start());
  ASSIGN_OR_RETURN(d->bare_client, BareGrpcClient::Create(d->bare_server->address(), kPsChannels));
  d->pull_request =
      MakePullRequest(static_cast<size_t>(batch) * 8, static_cast<uint64_t>(batch) * d->row_bytes);
  d->push_request = MakePayload(static_cast<size_t>(batch) * (8 + d->row_bytes));
  return absl::OkStatus();
}

// Redis: the same rows, dim x 4-byte values.
absl::Status PopulateRedis(const PsBenchOptions& options, RedisState* redis, DimBench* d) {
  const int batch = options.batch;
  auto r0 = Clock::now();
  RETURN_IF_ERROR(redis->conns[0]->Simple({"FLUSHALL"}));
  std::vector<uint64_t> keys(batch);
  std::vector<char> values(static_cast<size_t>(batch) * d->row_bytes, '\x01');
  for (int64_t k0 = 0; k0 < d->rows; k0 += batch) {
    const int n = static_cast<int>(std::min<int64_t>(batch, d->rows - k0));
    for (int i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(k0 + i);
    RETURN_IF_ERROR(
        redis->conns[0]->MSet(absl::MakeConstSpan(keys.data(), n), values.data(), d->row_bytes));
  }
  d->redis_populate_s = std::chrono::duration<double>(Clock::now() - r0).count();
  return absl::OkStatus();
}

// Sets up *d for `dim` and prints its heading.
absl::Status SetUpDim(const PsBenchOptions& options, int dim, int max_threads, RedisState* redis,
                      std::ostream& out, DimBench* d) {
  const int batch = options.batch;
  d->dim = dim;
  d->rows = std::min<int64_t>(options.rows, static_cast<int64_t>((512ull << 20) / (dim * 4ull)));
  if (d->rows < batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rows ", d->rows, " is below --batch ", batch));
  }
  d->row_bytes = static_cast<size_t>(dim) * sizeof(float);
  d->pool = MakeKeyPool(d->rows, batch, options.seed + dim);
  RETURN_IF_ERROR(StartDimPs(options, d));
  RETURN_IF_ERROR(StartDimCeilings(options, d));
  if (redis->ran()) RETURN_IF_ERROR(PopulateRedis(options, redis, d));

  const size_t row_bytes = d->row_bytes;
  out << absl::StrFormat(
      "\ndim %d: %d rows (%.0f MB of weights), %d B per row, pull reply %.2f MB, push request "
      "%.2f MB (fp32); (b) PS helper threads: %d, wire %s\n",
      dim, d->rows, static_cast<double>(d->rows) * row_bytes / 1e6, row_bytes,
      static_cast<double>(batch) * row_bytes / 1e6,
      static_cast<double>(batch) * (8 + row_bytes) / 1e6, d->server->helpers(),
      std::string(ps::WirePrecisionName(options.wire)));

  d->outs.assign(max_threads, std::vector<float>(static_cast<size_t>(batch) * dim));
  d->redis_outs.assign(redis->ran() ? max_threads : 0,
                       std::vector<char>(static_cast<size_t>(batch) * row_bytes));
  d->redis_values.assign(static_cast<size_t>(batch) * row_bytes, '\x02');
  return absl::OkStatus();
}

// Every figure at one dim and thread count, each of (a) and (b) with its
// ceiling; Redis's when it runs.
struct ThreadFigures {
  FigurePair a_pull;  // ceiling: gather
  FigurePair a_push;  // ceiling: scatter
  FigurePair b_pull;  // ceiling: bare gRPC
  FigurePair b_push;  // ceiling: bare gRPC
  Figure mget, mset;
};

absl::StatusOr<ThreadFigures> MeasureFigures(const PsBenchOptions& options, int threads,
                                             RedisState* redis, DimBench* d) {
  const int batch = options.batch;
  const KeyPool& pool = d->pool;
  auto keys_for = [&](int t, int64_t i) { return pool.Batch(pool.Start(t, threads) + i); };
  auto rate = [&](auto fn) -> absl::StatusOr<Figure> {
    ASSIGN_OR_RETURN(MeasuredRate r, MeasureCallRate(threads, options.seconds, fn));
    return Figure{r.calls_per_second * batch / 1e6, r.cores_busy};
  };
  // A figure and its ceiling, alternating slice by slice.
  auto paired = [&](auto figure_fn, auto ceiling_fn) -> absl::StatusOr<FigurePair> {
    ASSIGN_OR_RETURN(PairedRates p, MeasurePairedCallRates(threads, options.seconds, options.slices,
                                                           figure_fn, ceiling_fn));
    return FigurePair{Figure{p.a.calls_per_second * batch / 1e6, p.a.cores_busy},
                      Figure{p.b.calls_per_second * batch / 1e6, p.b.cores_busy}, p.ratio};
  };
  ThreadFigures f;
  ASSIGN_OR_RETURN(f.a_pull, paired(
                                 [&](int t, int64_t i) {
                                   return d->core->Pull(kTable, keys_for(t, i),
                                                        absl::MakeSpan(d->outs[t]));
                                 },
                                 [&](int t, int64_t i) {
                                   d->plain->Gather(keys_for(t, i), d->outs[t].data());
                                   return absl::OkStatus();
                                 }));
  ASSIGN_OR_RETURN(
      f.a_push,
      paired(
          [&](int t, int64_t i) {
            return d->core->Push(kTable, keys_for(t, i), d->grads, ps::PushContext{}).status();
          },
          [&](int t, int64_t i) {
            d->plain->ScatterSgd(keys_for(t, i), d->grads.data());
            return absl::OkStatus();
          }));
  ASSIGN_OR_RETURN(
      f.b_pull,
      paired(
          [&](int t, int64_t i) {
            return d->client->Pull(kTable, keys_for(t, i), absl::MakeSpan(d->outs[t]));
          },
          [&](int, int64_t) { return d->bare_client->Call(kBarePullMethod, d->pull_request); }));
  ASSIGN_OR_RETURN(
      f.b_push,
      paired([&](int t, int64_t i) { return d->client->Push(kTable, keys_for(t, i), d->grads, 0); },
             [&](int, int64_t) { return d->bare_client->Call(kBarePushMethod, d->push_request); }));
  if (redis->ran()) {
    const size_t row_bytes = d->row_bytes;
    ASSIGN_OR_RETURN(f.mget, rate([&](int t, int64_t i) {
                       return redis->conns[t]->MGet(keys_for(t, i), row_bytes,
                                                    d->redis_outs[t].data());
                     }));
    ASSIGN_OR_RETURN(f.mset, rate([&](int t, int64_t i) {
                       return redis->conns[t]->MSet(keys_for(t, i), d->redis_values.data(),
                                                    row_bytes);
                     }));
  }
  return f;
}

// What (b) can reach if the PS's own work (the in-process figure) runs
// after the transport's (the bare figure) rather than beside it: their
// times per row add. A request's lookup only overlaps another's
// transport when there are cores to spare (BENCHMARKS.md).
double SerialBound(const Figure& inproc, const Figure& bare) {
  return 1.0 / (1.0 / inproc.mrows + 1.0 / bare.mrows);
}

// The table of one dim and thread count: each figure beside its ceiling.
void PrintFigures(const DimBench& d, int threads, const ThreadFigures& f, bool redis_ran,
                  std::ostream& out) {
  const Figure& a_pull = f.a_pull.figure;
  const Figure& a_push = f.a_push.figure;
  const double gb = static_cast<double>(d.row_bytes) / 1e3;  // M rows/s -> GB/s
  out << absl::StrFormat("  dim %d, %d thread%s %38s %9s %7s %6s   %s\n", d.dim, threads,
                         threads == 1 ? " " : "s", "", "M rows/s", "GB/s", "cores", "vs ceiling");
  auto line = [&](const char* name, const Figure& fig, const std::string& note) {
    out << absl::StrFormat("    %-56s %9.2f %7.2f %6.2f   %s\n", name, fig.mrows, fig.mrows * gb,
                           fig.cores, note);
  };
  auto bound_line = [&](const std::string& name, double r, const std::string& note) {
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
        ps.CpuNanosPerRow() - bare.CpuNanosPerRow(), bare.CpuNanosPerRow() * (1 / kGrpcGoal - 1),
        what, inproc.CpuNanosPerRow());
  };
  // (b)'s lines for pulls or pushes (`what`): the figure beside bare gRPC,
  // the serial bound and where the CPU went.
  auto grpc_lines = [&](const char* name, const char* what, const FigurePair& b,
                        const Figure& inproc) {
    const double ratio = b.ratio.median;
    const double bound = SerialBound(inproc, b.ceiling);
    line(name, b.figure,
         absl::StrFormat("%.0f%% of bare gRPC [goal >= 70%%] %s%s", 100 * ratio,
                         Pass(ratio >= kGrpcGoal), SpreadNote(b.ratio)));
    line("    bare gRPC, same bytes, pre-built ByteBuffer (ceiling)", b.ceiling, "ceiling");
    bound_line(absl::StrCat("    bound if the PS's ", what, " adds to the transport"), bound,
               absl::StrFormat("%.0f%% of bare gRPC (information)", 100 * bound / b.ceiling.mrows));
    cpu_line(what, b.figure, b.ceiling, inproc);
  };
  const double a_ratio = f.a_pull.ratio.median;
  line("(a) in process: ParameterServer::Pull", a_pull,
       absl::StrFormat("%.0f%% of gather [goal >= 50%%] %s%s", 100 * a_ratio, Pass(a_ratio >= 0.5),
                       SpreadNote(f.a_pull.ratio)));
  line("    gather from a plain array (ceiling)", f.a_pull.ceiling, "ceiling");
  line("(a) in process: ParameterServer::Push (SGD)", a_push,
       absl::StrFormat("%.0f%% of scatter (information)%s", 100 * f.a_push.ratio.median,
                       SpreadNote(f.a_push.ratio)));
  line("    scatter-SGD into a plain array (ceiling)", f.a_push.ceiling, "ceiling");
  grpc_lines("(b) gRPC 127.0.0.1: GrpcPsClient::Pull", "pull", f.b_pull, a_pull);
  grpc_lines("(b) gRPC 127.0.0.1: GrpcPsClient::Push (SGD)", "push", f.b_push, a_push);
  if (redis_ran) {
    const double pull_x = f.b_pull.figure.mrows / f.mget.mrows;
    const double push_x = f.b_push.figure.mrows / f.mset.mrows;
    line("Redis MGET (baseline)", f.mget,
         absl::StrFormat("Brook gRPC pull = %.1fx [goal >= 3x] %s", pull_x, Pass(pull_x >= 3.0)));
    line("Redis MSET (baseline)", f.mset,
         absl::StrFormat("Brook gRPC push = %.1fx [goal >= 3x] %s", push_x, Pass(push_x >= 3.0)));
  }
}

// One entry of the JSON's "runs": the figures of one dim and thread count.
nlohmann::json FiguresJson(const PsBenchOptions& options, const DimBench& d, int threads,
                           const ThreadFigures& f, bool redis_ran) {
  const Figure& b_pull = f.b_pull.figure;
  const Figure& bare_pull = f.b_pull.ceiling;
  const Figure& b_push = f.b_push.figure;
  const Figure& bare_push = f.b_push.ceiling;
  const double gb = static_cast<double>(d.row_bytes) / 1e3;  // M rows/s -> GB/s
  nlohmann::json run = {
      {"dim", d.dim},
      {"threads", threads},
      {"rows", d.rows},
      {"inproc_pull_vs_gather", f.a_pull.ratio.median},
      {"inproc_push_vs_scatter", f.a_push.ratio.median},
      {"grpc_pull_gb_s", b_pull.mrows * gb},
      {"grpc_pull_vs_bare", f.b_pull.ratio.median},
      {"grpc_push_vs_bare", f.b_push.ratio.median},
      {"grpc_pull_serial_bound_vs_bare", SerialBound(f.a_pull.figure, bare_pull) / bare_pull.mrows},
      {"grpc_push_serial_bound_vs_bare", SerialBound(f.a_push.figure, bare_push) / bare_push.mrows},
      {"slice_pairs", options.slices},
      {"helpers", d.server->helpers()}};
  // Each ratio's lowest and highest slice pair beside its median.
  for (const auto& [key, pair] :
       {std::pair<const char*, const FigurePair&>{"inproc_pull_vs_gather", f.a_pull},
        {"inproc_push_vs_scatter", f.a_push},
        {"grpc_pull_vs_bare", f.b_pull},
        {"grpc_push_vs_bare", f.b_push}}) {
    run[absl::StrCat(key, "_low")] = pair.ratio.low;
    run[absl::StrCat(key, "_high")] = pair.ratio.high;
  }
  // Every figure's rate, cores busy and CPU per row: "<figure>_mrows_s",
  // "<figure>_cores", "<figure>_cpu_ns_per_row".
  for (const auto& [key, fig] :
       {std::pair<const char*, const Figure&>{"inproc_pull", f.a_pull.figure},
        {"gather", f.a_pull.ceiling},
        {"inproc_push", f.a_push.figure},
        {"scatter", f.a_push.ceiling},
        {"grpc_pull", b_pull},
        {"bare_grpc_pull", bare_pull},
        {"grpc_push", b_push},
        {"bare_grpc_push", bare_push}}) {
    run[absl::StrCat(key, "_mrows_s")] = fig.mrows;
    run[absl::StrCat(key, "_cores")] = fig.cores;
    run[absl::StrCat(key, "_cpu_ns_per_row")] = fig.CpuNanosPerRow();
  }
  if (redis_ran) {
    run["redis_mget_mrows_s"] = f.mget.mrows;
    run["redis_mset_mrows_s"] = f.mset.mrows;
    run["grpc_pull_vs_redis_mget"] = b_pull.mrows / f.mget.mrows;
    run["grpc_push_vs_redis_mset"] = b_push.mrows / f.mset.mrows;
    run["redis_populate_s"] = d.redis_populate_s;
  }
  return run;
}

// (a), (b) and Redis at one dim, for every thread count: the table on `out`,
// one entry per thread count appended to *runs.
absl::Status RunDim(const PsBenchOptions& options, int dim, int max_threads, RedisState* redis,
                    std::ostream& out, nlohmann::json* runs) {
  DimBench d;
  RETURN_IF_ERROR(SetUpDim(options, dim, max_threads, redis, out, &d));
  for (int threads : options.threads) {
    ASSIGN_OR_RETURN(const ThreadFigures figures, MeasureFigures(options, threads, redis, &d));
    PrintFigures(d, threads, figures, redis->ran(), out);
    runs->push_back(FiguresJson(options, d, threads, figures, redis->ran()));
  }
  d.client.reset();
  d.server->Shutdown(absl::Seconds(1));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunPsBench(const PsBenchOptions& options, std::ostream& out, nlohmann::json* result) {
  if (!options.targets.empty()) return RunPsTargetBench(options, out, result);
  RETURN_IF_ERROR(ValidatePsBenchOptions(options));
  const int max_threads = *std::max_element(options.threads.begin(), options.threads.end());
  const auto wall0 = Clock::now();
  PrintPreamble(options, out);
  RedisState redis = StartRedis(options, max_threads, out);

  nlohmann::json runs = nlohmann::json::array();
  for (int dim : options.dims) {
    RETURN_IF_ERROR(RunDim(options, dim, max_threads, &redis, out, &runs));
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
               {"batch", options.batch},
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
