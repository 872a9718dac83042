#include "bench/ps_target_bench.h"

#include <grpcpp/grpcpp.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/cleanup/cleanup.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "bench/bare_grpc.h"
#include "bench/bench_util.h"
#include "bench/interrupt_cleanup.h"
#include "bench/paired_rate.h"
#include "common/malloc_tuning.h"
#include "common/status_macros.h"
#include "common/usable_cpus.h"
#include "ps/client/grpc_ps_client.h"
#include "ps/wire/precision.h"

namespace brook::bench {
namespace {

using Clock = std::chrono::steady_clock;
constexpr float kLearningRate = 0.01f;
constexpr int kChannelsPerShard = 2;  // GrpcPsClientOptions::channels_per_shard default
// Issue 27's goals for two processes (dim 64, 4096 keys, 4 threads): the
// share of the bare gRPC ceiling's rows/s.
constexpr double kPullGoal = 0.6;
constexpr double kPushGoal = 0.5;
// A target or ceiling that does not answer in this long is an error.
constexpr absl::Duration kConnectTimeout = absl::Seconds(5);

const char* Pass(bool ok) { return ok ? "PASS" : "MISS"; }

// One figure: M rows/s, the cores this (the client) process kept busy, and
// the cores busy on the whole machine (every process and the kernel: the
// PS or ceiling when they run here, and whatever else does).
struct Figure {
  double mrows = 0;
  double cores = 0;
  double machine_cores = 0;
  // The server side's process (the PS shards, or the ceiling) when it runs
  // on this machine; -1 when it does not (not measured).
  double server_cores = -1;
  double CpuNanosPerRow() const { return mrows > 0 ? cores * 1e3 / mrows : 0; }
  double ServerCpuNanosPerRow() const {
    return mrows > 0 && server_cores >= 0 ? server_cores * 1e3 / mrows : -1;
  }
};

// The process on this machine (this network namespace) that listens on
// `address`'s port: the socket's inode from /proc/net/tcp{,6}, then the
// process holding it. nullopt when there is none here (a remote target) or
// /proc does not say (another user's process).
std::optional<pid_t> LocalPidListeningOn(const std::string& address) {
  const size_t colon = address.rfind(':');
  int port = 0;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port)) {
    return std::nullopt;
  }
  std::string inode;
  for (const char* table : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream in(table);
    std::string line;
    std::getline(in, line);  // the header
    while (inode.empty() && std::getline(in, line)) {
      // sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
      std::vector<std::string> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
      if (f.size() < 10 || f[3] != "0A") continue;  // 0A: LISTEN
      const size_t c = f[1].rfind(':');
      if (c == std::string::npos) continue;
      if (std::strtol(f[1].substr(c + 1).c_str(), nullptr, 16) == port) inode = f[9];
    }
  }
  if (inode.empty()) return std::nullopt;
  const std::string target = absl::StrCat("socket:[", inode, "]");
  std::error_code ec;
  for (const auto& proc : std::filesystem::directory_iterator("/proc", ec)) {
    pid_t pid = 0;
    if (!absl::SimpleAtoi(proc.path().filename().string(), &pid)) continue;
    std::error_code fd_ec;
    for (const auto& fd : std::filesystem::directory_iterator(proc.path() / "fd", fd_ec)) {
      std::error_code link_ec;
      if (std::filesystem::read_symlink(fd.path(), link_ec).string() == target) return pid;
    }
  }
  return std::nullopt;
}

// CPU seconds (user + system) process `pid` has used; 0 if unreadable.
double CpuSecondsOf(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/stat"));
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const size_t paren = stat.rfind(')');  // the name may hold spaces
  if (paren == std::string::npos) return 0;
  std::vector<std::string> f = absl::StrSplit(stat.substr(paren + 2), ' ', absl::SkipEmpty());
  // After the name: state is field 3 of stat(5), utime 14 and stime 15.
  uint64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime)) {
    return 0;
  }
  return static_cast<double>(utime + stime) / static_cast<double>(sysconf(_SC_CLK_TCK));
}

double CpuSecondsOf(const std::vector<pid_t>& pids) {
  double sum = 0;
  for (pid_t pid : pids) sum += CpuSecondsOf(pid);
  return sum;
}

// The server processes found on this machine: every target's and the
// ceiling's, or empty lists when one is elsewhere (then not counted).
struct LocalServers {
  std::vector<pid_t> ps;
  std::vector<pid_t> ceiling;
};

LocalServers FindLocalServers(const PsBenchOptions& o) {
  LocalServers servers;
  for (const std::string& t : o.targets) {
    std::optional<pid_t> pid = LocalPidListeningOn(t);
    if (!pid.has_value()) return LocalServers{{}, servers.ceiling};
    servers.ps.push_back(*pid);
  }
  for (const std::string& c : o.ceiling_targets) {
    std::optional<pid_t> pid = LocalPidListeningOn(c);
    if (!pid.has_value()) return LocalServers{servers.ps, {}};
    servers.ceiling.push_back(*pid);
  }
  return servers;
}

// CPU seconds the whole machine has been busy (user, nice, system, irq,
// softirq of /proc/stat's "cpu" line); 0 if it cannot be read.
double MachineBusyCpuSeconds() {
  std::ifstream stat("/proc/stat");
  std::string cpu;
  uint64_t user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
  if (!(stat >> cpu >> user >> nice >> system >> idle >> iowait >> irq >> softirq) ||
      cpu != "cpu") {
    return 0;
  }
  return static_cast<double>(user + nice + system + irq + softirq) /
         static_cast<double>(sysconf(_SC_CLK_TCK));
}

struct FigurePair {
  Figure figure;
  Figure ceiling;
  RatioSpread ratio;  // figure / ceiling, slice pair by slice pair
};

absl::Status ValidateTargetOptions(const PsBenchOptions& o) {
  if (o.ceiling_targets.empty()) {
    return absl::InvalidArgumentError(
        "--target needs the bare gRPC ceiling's address (--ceiling-target HOST:PORT of a "
        "`brook bench grpc-ceiling`)");
  }
  if (o.ceiling_targets.size() != 1 && o.ceiling_targets.size() != o.targets.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--ceiling-target has ", o.ceiling_targets.size(), " addresses for ",
                     o.targets.size(), " --target shards: give one for all, or one per shard"));
  }
  for (const auto& [flag, list] :
       {std::pair<const char*, const std::vector<std::string>&>{"--target", o.targets},
        {"--ceiling-target", o.ceiling_targets}}) {
    for (const std::string& t : list) {
      if (t.empty() || t.rfind(':') == std::string::npos) {
        return absl::InvalidArgumentError(absl::StrCat(flag, " '", t, "' is not HOST:PORT"));
      }
    }
  }
  if (o.rows <= 0 || o.batch <= 0 || o.seconds <= 0 || o.dims.empty() || o.threads.empty() ||
      o.slices <= 0) {
    return absl::InvalidArgumentError(
        "--rows, --batch, --seconds, --slices, --dims, --threads must be set and positive");
  }
  for (int d : o.dims) {
    if (d <= 0 || d > ps::kMaxDim) {
      return absl::InvalidArgumentError(
          absl::StrCat("--dims ", d, " is outside [1, ", ps::kMaxDim, "]"));
    }
  }
  for (int t : o.threads) {
    if (t <= 0 || t > 256) return absl::InvalidArgumentError("--threads must be in [1, 256]");
  }
  if (o.rows < o.batch) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rows ", o.rows, " is below --batch ", o.batch));
  }
  return absl::OkStatus();
}

// The client of the targets, ready: every shard answers as a PS, in the
// shard order given.
absl::StatusOr<std::unique_ptr<ps::GrpcPsClient>> ConnectTargets(const PsBenchOptions& o) {
  const std::string targets = absl::StrJoin(o.targets, ",");
  ps::GrpcPsClientOptions co;
  co.addresses = o.targets;
  co.channels_per_shard = kChannelsPerShard;
  co.tls = o.tls;
  co.token = o.token;
  // A PS that goes away mid-run fails the benchmark soon, not after the
  // default 30 s retry window.
  co.deadline = absl::Seconds(10);
  absl::StatusOr<std::unique_ptr<ps::GrpcPsClient>> client = ps::GrpcPsClient::Create(co);
  if (!client.ok()) {
    return absl::Status(client.status().code(),
                        absl::StrCat("--target ", targets, ": ", client.status().message()));
  }
  absl::Status st = (*client)->WaitForReady(kConnectTimeout);
  if (st.ok()) st = (*client)->CheckShards(kConnectTimeout, /*shard_order=*/true);
  if (!st.ok()) {
    return absl::UnavailableError(absl::StrCat("--target ", targets, ": ", st.message()));
  }
  return client;
}

// Everything one dim needs: the table on the targets and the requests of
// the ceiling (one per shard, as GrpcPsClient fans a call out).
struct TargetDim {
  int dim = 0;
  int64_t rows = 0;
  size_t row_bytes = 0;       // fp32: the ceiling's
  size_t wire_row_bytes = 0;  // in the PS calls' wire precision
  std::string table;
  KeyPool pool;
  std::vector<float> grads;              // of one batch, for every push
  std::vector<std::vector<float>> outs;  // per thread
  grpc::ByteBuffer pull_request;         // a shard's part
  grpc::ByteBuffer push_request;         // a shard's part
  double populate_s = 0;
};

// Pushes every row the pulls will read once (SGD from the initializer).
absl::Status Populate(const PsBenchOptions& o, ps::GrpcPsClient* client, TargetDim* d) {
  const auto t0 = Clock::now();
  std::vector<uint64_t> keys(o.batch);
  for (int64_t k0 = 0; k0 < d->rows; k0 += o.batch) {
    const int n = static_cast<int>(std::min<int64_t>(o.batch, d->rows - k0));
    for (int i = 0; i < n; ++i) keys[i] = static_cast<uint64_t>(k0 + i);
    RETURN_IF_ERROR(
        client->Push(d->table, absl::MakeConstSpan(keys.data(), n),
                     absl::MakeConstSpan(d->grads.data(), static_cast<size_t>(n) * d->dim), 0));
  }
  d->populate_s = std::chrono::duration<double>(Clock::now() - t0).count();
  return absl::OkStatus();
}

// MeasurePairedCallRates (bench/paired_rate.h), slice by slice here so each
// slice also reads how busy the whole machine was: with the PS and the
// ceiling in other processes, this process's CPU alone does not say whether
// the cores ran out.
absl::StatusOr<FigurePair> MeasurePair(const PsBenchOptions& o, const LocalServers& servers,
                                       int threads, auto figure_fn, auto ceiling_fn) {
  const double slice_seconds = o.seconds / o.slices;
  struct Side {
    const std::vector<pid_t>* servers;
    std::vector<double> rate, cores, machine, server;
  } sides[2] = {{&servers.ps, {}, {}, {}, {}}, {&servers.ceiling, {}, {}, {}, {}}};
  for (int i = 0; i < o.slices; ++i) {
    for (int half = 0; half < 2; ++half) {
      const bool run_a = (half == 0) == PairRunsAFirst(i);
      Side& side = sides[run_a ? 0 : 1];
      const double busy0 = MachineBusyCpuSeconds();
      const double server0 = CpuSecondsOf(*side.servers);
      const auto t0 = Clock::now();
      absl::StatusOr<MeasuredRate> r = run_a ? MeasureCallRate(threads, slice_seconds, figure_fn)
                                             : MeasureCallRate(threads, slice_seconds, ceiling_fn);
      if (!r.ok()) return r.status();
      const double wall = std::chrono::duration<double>(Clock::now() - t0).count();
      side.rate.push_back(r->calls_per_second);
      side.cores.push_back(r->cores_busy);
      side.machine.push_back((MachineBusyCpuSeconds() - busy0) / wall);
      side.server.push_back((CpuSecondsOf(*side.servers) - server0) / wall);
    }
  }
  auto mean = [](const std::vector<double>& v) {
    double sum = 0;
    for (double x : v) sum += x;
    return sum / static_cast<double>(v.size());
  };
  auto figure = [&](const Side& side) {
    return Figure{mean(side.rate) * o.batch / 1e6, mean(side.cores), mean(side.machine),
                  side.servers->empty() ? -1.0 : mean(side.server)};
  };
  return FigurePair{figure(sides[0]), figure(sides[1]), SliceRatios(sides[0].rate, sides[1].rate)};
}

struct TargetFigures {
  FigurePair pull;
  FigurePair push;
};

absl::StatusOr<TargetFigures> MeasureTargetFigures(const PsBenchOptions& o,
                                                   const LocalServers& servers, int threads,
                                                   ps::GrpcPsClient* client, BareGrpcClient* bare,
                                                   TargetDim* d) {
  const int shards = static_cast<int>(o.targets.size());
  auto keys_for = [&](int t, int64_t i) { return d->pool.Batch(d->pool.Start(t, threads) + i); };
  TargetFigures f;
  ASSIGN_OR_RETURN(f.pull, MeasurePair(
                               o, servers, threads,
                               [&](int t, int64_t i) {
                                 return client->Pull(d->table, keys_for(t, i),
                                                     absl::MakeSpan(d->outs[t]));
                               },
                               [&](int, int64_t) {
                                 return bare->CallFanOut(kBarePullMethod, d->pull_request, shards);
                               }));
  ASSIGN_OR_RETURN(f.push, MeasurePair(
                               o, servers, threads,
                               [&](int t, int64_t i) {
                                 return client->Push(d->table, keys_for(t, i), d->grads, 0);
                               },
                               [&](int, int64_t) {
                                 return bare->CallFanOut(kBarePushMethod, d->push_request, shards);
                               }));
  return f;
}

void PrintTargetFigures(const TargetDim& d, int threads, const TargetFigures& f,
                        std::ostream& out) {
  // M rows/s -> GB/s of row bytes: the PS calls' in their wire precision.
  const double gb = static_cast<double>(d.row_bytes) / 1e3;
  const double wire_gb = static_cast<double>(d.wire_row_bytes) / 1e3;
  out << absl::StrFormat("  dim %d, %d thread%s %38s %9s %7s %6s %6s %6s   %s\n", d.dim, threads,
                         threads == 1 ? " " : "s", "", "M rows/s", "GB/s", "client", "server",
                         "host", "vs ceiling");
  auto line = [&](const std::string& name, const Figure& fig, double row_gb,
                  const std::string& note) {
    const std::string server =
        fig.server_cores >= 0 ? absl::StrFormat("%.2f", fig.server_cores) : "-";
    out << absl::StrFormat("    %-56s %9.2f %7.2f %6.2f %6s %6.2f   %s\n", name, fig.mrows,
                           fig.mrows * row_gb, fig.cores, server, fig.machine_cores, note);
  };
  // CPU per row of each process: what the cores went to, once the host
  // column says they ran out.
  auto cpu_line = [&](const FigurePair& p) {
    if (p.figure.server_cores < 0 || p.ceiling.server_cores < 0) return;
    out << absl::StrFormat(
        "        CPU per row: client %.0f + PS %.0f = %.0f ns; bare: client %.0f + ceiling %.0f = "
        "%.0f ns\n",
        p.figure.CpuNanosPerRow(), p.figure.ServerCpuNanosPerRow(),
        p.figure.CpuNanosPerRow() + p.figure.ServerCpuNanosPerRow(), p.ceiling.CpuNanosPerRow(),
        p.ceiling.ServerCpuNanosPerRow(),
        p.ceiling.CpuNanosPerRow() + p.ceiling.ServerCpuNanosPerRow());
  };
  auto pair_lines = [&](const char* name, const FigurePair& p, double goal) {
    const RatioSpread& r = p.ratio;
    // One decimal: a median just under the goal must not print as the goal.
    line(name, p.figure, wire_gb,
         absl::StrFormat("%.1f%% of bare gRPC [goal >= %.0f%%] %s; pairs %.0f-%.0f%%",
                         100 * r.median, 100 * goal, Pass(r.median >= goal), 100 * r.low,
                         100 * r.high));
    line("    bare gRPC, own process, fp32 bytes (ceiling)", p.ceiling, gb, "ceiling");
    cpu_line(p);
  };
  pair_lines("GrpcPsClient::Pull -> brook ps (own process)", f.pull, kPullGoal);
  pair_lines("GrpcPsClient::Push (SGD) -> brook ps (own process)", f.push, kPushGoal);
}

nlohmann::json TargetFiguresJson(const PsBenchOptions& o, const TargetDim& d, int threads,
                                 const TargetFigures& f) {
  // M rows/s -> GB/s of the PS calls' row bytes (their wire precision).
  const double gb = static_cast<double>(d.wire_row_bytes) / 1e3;
  nlohmann::json run = {{"dim", d.dim},
                        {"threads", threads},
                        {"wire", std::string(ps::WirePrecisionName(o.wire))},
                        {"rows", d.rows},
                        {"table", d.table},
                        {"shards", o.targets.size()},
                        {"slice_pairs", o.slices},
                        {"populate_s", d.populate_s},
                        {"grpc_pull_gb_s", f.pull.figure.mrows * gb},
                        {"grpc_push_gb_s", f.push.figure.mrows * gb},
                        {"grpc_pull_goal_vs_bare", kPullGoal},
                        {"grpc_push_goal_vs_bare", kPushGoal}};
  for (const auto& [key, pair] :
       {std::pair<const char*, const FigurePair&>{"grpc_pull", f.pull}, {"grpc_push", f.push}}) {
    const std::string ratio = absl::StrCat(key, "_vs_bare");
    run[ratio] = pair.ratio.median;
    run[ratio + "_low"] = pair.ratio.low;
    run[ratio + "_high"] = pair.ratio.high;
    // "<figure>_client_cores": this process only (the PS and the ceiling
    // are others), as "<figure>_client_cpu_ns_per_row".
    for (const auto& [name, fig] : {std::pair<std::string, const Figure&>{key, pair.figure},
                                    {absl::StrCat("bare_", key), pair.ceiling}}) {
      run[name + "_mrows_s"] = fig.mrows;
      run[name + "_client_cores"] = fig.cores;
      run[name + "_client_cpu_ns_per_row"] = fig.CpuNanosPerRow();
      run[name + "_machine_cores"] = fig.machine_cores;
      // The PS's (or the ceiling's) process, when it runs on this machine.
      if (fig.server_cores >= 0) {
        run[name + "_server_cores"] = fig.server_cores;
        run[name + "_server_cpu_ns_per_row"] = fig.ServerCpuNanosPerRow();
      }
    }
  }
  return run;
}

// Sets up `dim` on the targets, measures every thread count, drops the
// table (also when a step fails: the error is then the step's).
// Each shard's incarnation (random per process start): a figure measured
// across a restart mixes two processes (and the server CPU read the dead
// one), so the run checks that none changed.
absl::StatusOr<std::vector<uint64_t>> Incarnations(ps::GrpcPsClient* client) {
  ASSIGN_OR_RETURN(const std::vector<ps::ServerStats> stats, client->Stats());
  std::vector<uint64_t> out;
  for (const ps::ServerStats& s : stats) out.push_back(s.startup.incarnation);
  return out;
}

absl::Status CheckNoRestart(const PsBenchOptions& o, ps::GrpcPsClient* client,
                            const std::vector<uint64_t>& before) {
  ASSIGN_OR_RETURN(const std::vector<uint64_t> now, Incarnations(client));
  for (size_t i = 0; i < now.size() && i < before.size(); ++i) {
    if (now[i] == before[i]) continue;
    return absl::AbortedError(absl::StrCat(
        "the PS at ", o.targets[i], " (shard ", i, ") restarted during the run (incarnation ",
        absl::Hex(before[i]), " -> ", absl::Hex(now[i]),
        "): its figures would mix two processes, so none are reported; run the bench again"));
  }
  return absl::OkStatus();
}

absl::Status RunTargetDim(const PsBenchOptions& o, const LocalServers& servers, int dim,
                          int max_threads, ps::GrpcPsClient* client, BareGrpcClient* bare,
                          std::ostream& out, nlohmann::json* runs) {
  const int shards = static_cast<int>(o.targets.size());
  TargetDim d;
  d.dim = dim;
  d.rows = std::min<int64_t>(o.rows, static_cast<int64_t>((512ull << 20) / (dim * 4ull)));
  if (d.rows < o.batch) {
    return absl::InvalidArgumentError(absl::StrCat("--rows ", d.rows, " (capped at 512 MiB at dim ",
                                                   dim, ") is below --batch ", o.batch));
  }
  d.row_bytes = static_cast<size_t>(dim) * sizeof(float);
  d.wire_row_bytes = static_cast<size_t>(dim) * ps::wire::WireValueBytes(o.wire);
  d.table = TargetBenchTableName(dim);
  d.pool = MakeKeyPool(d.rows, o.batch, o.seed + dim);
  d.grads.assign(static_cast<size_t>(o.batch) * dim, 1e-3f);
  d.outs.assign(max_threads, std::vector<float>(static_cast<size_t>(o.batch) * dim));
  // A shard's part of a batch (keys spread evenly over the shards).
  const size_t part = (static_cast<size_t>(o.batch) + shards - 1) / shards;
  d.pull_request = MakePullRequest(part * 8, part * d.row_bytes);
  d.push_request = MakePayload(part * (8 + d.row_bytes));

  ps::TableOptions to;
  to.name = d.table;
  to.dim = dim;
  to.seed = 7;
  to.optimizer.kind = ps::OptimizerKind::kSgd;
  to.optimizer.learning_rate = kLearningRate;
  to.memory_budget_bytes = 8ull << 30;
  to.wire = o.wire;
  absl::Status st = client->CreateTable(to);
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat("creating table ", d.table, ": ", st.message()));
  }
  // Ctrl-C or SIGTERM mid-run drops it too (bench/interrupt_cleanup.h).
  const std::string table = d.table;
  const std::string targets = absl::StrJoin(o.targets, ",");
  const int on_interrupt = InterruptCleanup::Install().Add([client, table, targets] {
    const absl::Status drop = client->DropTable(table);
    std::cerr << "brook bench ps: table " << table << " on " << targets
              << (drop.ok() ? " dropped" : absl::StrCat(" NOT dropped: ", drop.message())) << "\n";
  });
  bool dropped = false;
  absl::Cleanup drop_on_error = [&] {
    InterruptCleanup::Install().Remove(on_interrupt);
    if (dropped) return;
    absl::Status drop = client->DropTable(d.table);
    if (!drop.ok()) {
      std::cerr << "brook bench ps: could not drop table " << d.table << " on "
                << absl::StrJoin(o.targets, ",") << ": " << drop.message() << "\n";
    }
  };
  ASSIGN_OR_RETURN(const std::vector<uint64_t> incarnations, Incarnations(client));
  RETURN_IF_ERROR(Populate(o, client, &d));
  out << absl::StrFormat(
      "\ndim %d: table %s, %d rows (%.0f MB of weights) on %d shard%s, populated in %.1f s; %d B "
      "per row on the wire (%s), pull reply %.2f MB, push request %.2f MB (a ceiling call per "
      "shard, fp32: %.2f / %.2f MB)\n",
      dim, d.table, d.rows, static_cast<double>(d.rows) * d.row_bytes / 1e6, shards,
      shards == 1 ? "" : "s", d.populate_s, d.wire_row_bytes,
      std::string(ps::WirePrecisionName(o.wire)),
      static_cast<double>(o.batch) * d.wire_row_bytes / 1e6,
      static_cast<double>(o.batch) * (8 + d.wire_row_bytes) / 1e6,
      static_cast<double>(part) * d.row_bytes / 1e6,
      static_cast<double>(part) * (8 + d.row_bytes) / 1e6);
  out.flush();  // a reader of a pipe sees the table's name before the long run
  for (int threads : o.threads) {
    ASSIGN_OR_RETURN(const TargetFigures f,
                     MeasureTargetFigures(o, servers, threads, client, bare, &d));
    RETURN_IF_ERROR(CheckNoRestart(o, client, incarnations));
    PrintTargetFigures(d, threads, f, out);
    runs->push_back(TargetFiguresJson(o, d, threads, f));
  }
  dropped = true;
  st = client->DropTable(d.table);
  if (!st.ok()) {
    return absl::Status(st.code(), absl::StrCat("dropping table ", d.table, ": ", st.message()));
  }
  out << "  table " << d.table << " dropped\n";
  return absl::OkStatus();
}

}  // namespace

std::string TargetBenchTableName(int dim) { return absl::StrCat("bench-", getpid(), "-", dim); }

absl::Status RunPsTargetBench(const PsBenchOptions& o, std::ostream& out, nlohmann::json* result) {
  RETURN_IF_ERROR(ValidateTargetOptions(o));
  const int max_threads = *std::max_element(o.threads.begin(), o.threads.end());
  const int shards = static_cast<int>(o.targets.size());
  const auto wall0 = Clock::now();
  ASSIGN_OR_RETURN(std::unique_ptr<ps::GrpcPsClient> client, ConnectTargets(o));
  ASSIGN_OR_RETURN(
      std::unique_ptr<BareGrpcClient> bare,
      BareGrpcClient::Create(o.ceiling_targets, kChannelsPerShard * shards /
                                                    static_cast<int>(o.ceiling_targets.size())));
  RETURN_IF_ERROR(bare->WaitForReady(kConnectTimeout));

  const LocalServers servers = FindLocalServers(o);
  const std::string targets = absl::StrJoin(o.targets, ",");
  out << absl::StrFormat(
      "brook bench ps --target: the PS and the ceiling in processes of their own, batches of %d "
      "distinct keys drawn uniformly at "
      "random from the populated rows (%d pre-drawn batches max), %.1f s per figure, %d cores "
      "here, allocator: %s\n",
      o.batch, kMaxPoolBatches, o.seconds, UsableCpus(), MallocDescription());
  out << absl::StrFormat(
      "  PS: brook ps at %s (%d shard%s), GrpcPsClient shared by the threads, %d connections per "
      "shard, %s%s\n",
      targets, shards, shards == 1 ? "" : "s", kChannelsPerShard,
      o.tls.enabled() ? "TLS" : "plaintext",
      o.token.token.empty() ? "" : absl::StrCat(", token from ", o.token.source));
  out << absl::StrFormat(
      "  ceiling: brook bench grpc-ceiling at %s (%s), answering pre-built payloads of the same "
      "bytes, GenericStub over %d connections, one call per shard at once%s\n",
      absl::StrJoin(o.ceiling_targets, ","),
      o.ceiling_targets.size() == 1 ? "one process of its own" : "a process per shard",
      kChannelsPerShard * shards,
      o.tls.enabled() ? " (plaintext: the PS's TLS costs count against it)" : "");
  out << absl::StrFormat(
      "  each figure and its ceiling alternate in %d slice pairs (A B, B A, ...); a ratio is the "
      "median pair's, with the lowest and highest pair after it\n"
      "  cores: client = this process's CPU seconds per wall second (the PS and the ceiling are "
      "other processes); host = the whole machine's busy CPU seconds per wall second (every "
      "process, kernel included: the PS or ceiling when they run here, and any other load); "
      "server = the PS's processes (or the ceiling's) when they run on this machine: %s\n"
      "  (a), (c), (d) and Redis are in-process figures: run without --target for them\n",
      o.slices,
      servers.ps.empty() || servers.ceiling.empty()
          ? "not found here, not measured"
          : absl::StrCat("PS pid ", absl::StrJoin(servers.ps, ","), ", ceiling pid ",
                         absl::StrJoin(servers.ceiling, ",")));

  nlohmann::json runs = nlohmann::json::array();
  std::vector<std::string> tables;
  for (int dim : o.dims) {
    RETURN_IF_ERROR(
        RunTargetDim(o, servers, dim, max_threads, client.get(), bare.get(), out, &runs));
    tables.push_back(TargetBenchTableName(dim));
  }
  const double wall = std::chrono::duration<double>(Clock::now() - wall0).count();
  out << absl::StrFormat("\nwall time %.0f s\n", wall);
  if (result != nullptr) {
    *result = {{"mode", "target"},
               {"targets", o.targets},
               {"ceiling_targets", o.ceiling_targets},
               {"allocator", MallocDescription()},
               {"cores", UsableCpus()},
               {"batch", o.batch},
               {"seconds_per_figure", o.seconds},
               {"keys", "distinct per batch, uniform over the populated rows"},
               {"tls", o.tls.enabled()},
               {"tables_dropped", tables},
               {"wall_s", wall},
               {"runs", std::move(runs)}};
  }
  return absl::OkStatus();
}

}  // namespace brook::bench
