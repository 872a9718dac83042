// `brook ps`: one parameter-server shard. Binds, prints one machine-readable
// line to stdout
//   brook ps listening on 127.0.0.1:PORT metrics on 127.0.0.1:MPORT
// (tests and `brook local` parse it; ports chosen with :0 are the bound
// ones), serves until SIGTERM or SIGINT, then drains and exits 0.
// Every flag can also come from BROOK_PS_<FLAG> (e.g. BROOK_PS_LISTEN).
// Off loopback a PS needs mutual TLS or a token (--auth-token-file,
// $BROOK_PS_TOKEN), or --allow-unauthenticated: it refuses to start (exit 2)
// rather than take writes from anyone who can reach it.
// Under a TFJob, TF_CONFIG (task.type ps) gives the listen port, shard index
// and shard count; flags and BROOK_PS_* override it.
#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "chief/client/cluster_spec.h"
#include "cli/address_flags.h"
#include "cli/commands.h"
#include "cli/security_flags.h"
#include "common/status_macros.h"
#include "ps/options.h"
#include "ps/rpc/ps_server.h"
#include "security/server_auth.h"

namespace brook::cli {
namespace {

constexpr int kDefaultRocksDbCacheMib = 256;
constexpr int kDefaultRocksDbWriteBufferMib = 64;

struct PsFlags {
  ps::rpc::PsServerOptions server;
  double drain_seconds = 10;
  double evict_interval_seconds = 10;
  int max_message_mib = 64;
  int rocksdb_cache_mib = kDefaultRocksDbCacheMib;
  int rocksdb_write_buffer_mib = kDefaultRocksDbWriteBufferMib;
  bool no_wal = false;
  std::string memory_limit;    // ParseByteSize; "" or 0: none
  double change_log_mib = 64;  // ParameterServerOptions::change_log_bytes
  TokenFlags token;
  // Given on the command line or by BROOK_PS_*: these win over TF_CONFIG.
  bool listen_given = false, shard_index_given = false, num_shards_given = false;
};

// TF_CONFIG's part for a PS: with task.type ps, listen on 0.0.0.0 at the
// port of cluster.ps[task.index] (its host is how others reach this pod),
// shard task.index of len(cluster.ps). Flags given win. InvalidArgument for
// a malformed TF_CONFIG or another task type; nothing without TF_CONFIG or
// when flags give all three (e.g. `brook local`'s children in a TFJob pod).
absl::Status ApplyTfConfig(PsFlags* f) {
  if (f->listen_given && f->shard_index_given && f->num_shards_given) return absl::OkStatus();
  absl::StatusOr<chief::ClusterSpec> tf = chief::ClusterFromEnvironment();
  if (absl::IsNotFound(tf.status())) return absl::OkStatus();
  if (!tf.ok()) return tf.status();
  if (tf->task_type != "ps") {
    return absl::InvalidArgumentError(absl::StrCat(
        "TF_CONFIG: task.type is \"", tf->task_type.empty() ? "(none)" : tf->task_type,
        "\" but `brook ps` runs a PS task: set task.type to ps (and task.index to this "
        "shard), or unset TF_CONFIG and pass --listen, --shard-index and --num-shards"));
  }
  if (tf->ps.empty()) return absl::InvalidArgumentError("TF_CONFIG: cluster.ps is empty");
  const std::string& own = tf->ps[static_cast<size_t>(tf->task_index)];
  if (!f->listen_given) f->server.listen = absl::StrCat("0.0.0.0:", own.substr(own.rfind(':') + 1));
  if (!f->shard_index_given) f->server.ps.shard_index = tf->task_index;
  if (!f->num_shards_given) f->server.ps.num_shards = static_cast<int32_t>(tf->ps.size());
  return absl::OkStatus();
}

// Resolves what the flags leave to TF_CONFIG and --memory-limit's spelling.
absl::Status ResolvePsFlags(PsFlags* f) {
  RETURN_IF_ERROR(ApplyTfConfig(f));
  if (!f->memory_limit.empty()) {
    absl::StatusOr<uint64_t> limit = ps::ParseByteSize(f->memory_limit);
    if (!limit.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--memory-limit: ", limit.status().message()));
    }
    if (*limit > 0 && *limit < (uint64_t{1} << 20)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "--memory-limit ", f->memory_limit, ": ", *limit,
          " bytes is below 1 MiB, less than the tables' own first blocks; give e.g. 512MiB, or 0 "
          "for no limit"));
    }
    f->server.ps.memory_limit_bytes = *limit;
  }
  f->server.ps.change_log_bytes = static_cast<uint64_t>(f->change_log_mib * (1 << 20));
  if (f->server.ps.data_dir.empty() &&
      (f->rocksdb_cache_mib != kDefaultRocksDbCacheMib ||
       f->rocksdb_write_buffer_mib != kDefaultRocksDbWriteBufferMib)) {
    std::cerr << "brook ps: warning: --rocksdb-cache-mib and --rocksdb-write-buffer-mib size the "
                 "RocksDB tier, which only a --data-dir has: ignored\n";
  }
  ASSIGN_OR_RETURN(f->server.auth_token, f->token.Resolve());
  return absl::OkStatus();
}

// "auth: bearer token", or the risk that --allow-unauthenticated accepted.
std::string AuthLine(const ps::rpc::PsServerOptions& o) {
  const bool has_token = !o.auth_token.empty();
  if (security::OpenToNetwork(o.listen, o.tls, has_token)) {
    return absl::StrCat("warning: --allow-unauthenticated: ", o.listen,
                        " serves anyone who can reach it (no token, no mutual TLS): they can "
                        "create, overwrite, restore and drop tables");
  }
  return absl::StrCat("auth: ", security::AuthMode(o.listen, o.tls, has_token));
}

int RunPs(const PsFlags& flags) {
  // Block the shutdown signals before any thread starts so every gRPC and
  // metrics thread inherits the mask and only sigwait() below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  ps::rpc::PsServerOptions options = flags.server;
  options.ps.wal = !flags.no_wal;
  options.max_message_bytes = flags.max_message_mib << 20;
  options.evict_interval = absl::Seconds(flags.evict_interval_seconds);
  options.ps.rocksdb.block_cache_bytes = static_cast<uint64_t>(flags.rocksdb_cache_mib) << 20;
  options.ps.rocksdb.write_buffer_bytes = static_cast<uint64_t>(flags.rocksdb_write_buffer_mib)
                                          << 20;
  if (!options.ps.data_dir.empty()) {
    // A large data dir takes a while (rows read back, the log replayed):
    // say so before the long silence, not only once it listens.
    std::cerr << "brook ps: opening data dir " << options.ps.data_dir
              << ": its last checkpoint is restored and its WAL replayed before the PS listens"
              << std::endl;
  }
  const absl::Time start = absl::Now();
  absl::StatusOr<std::unique_ptr<ps::rpc::PsServer>> server = ps::rpc::PsServer::Start(options);
  if (!server.ok()) {
    std::cerr << "brook ps: " << server.status().message() << "\n";
    return absl::IsInvalidArgument(server.status()) ? kExitUsage : kExitFailed;
  }
  // What the start worked around (a LATEST naming a checkpoint that is
  // gone or outside the data dir), before anything else is said.
  const ps::StartupInfo& startup = (*server)->parameter_server()->startup();
  for (const std::string& note : startup.notes) std::cerr << "brook ps: " << note << "\n";
  if (startup.data_dir) {
    std::cerr << "brook ps: data dir opened in "
              << absl::StrFormat("%.1f", absl::ToDoubleSeconds(absl::Now() - start)) << " s: "
              << (startup.restored_checkpoint.empty()
                      ? std::string("no checkpoint")
                      : absl::StrCat("checkpoint ", startup.restored_checkpoint, " (step ",
                                     startup.restored_step, ")"))
              << ", " << startup.wal_records_replayed << " WAL records replayed\n";
  }
  std::cerr << "brook ps: " << AuthLine(options) << "\n";
  std::cout << "brook ps listening on " << (*server)->address() << " metrics on "
            << ((*server)->metrics_port() ? (*server)->metrics_address() : "off") << std::endl;
  std::cerr << "brook ps: shard " << options.ps.shard_index << " of " << options.ps.num_shards
            << (options.tls.enabled() ? (options.tls.mutual ? ", mutual TLS" : ", TLS")
                                      : ", plaintext")
            << ", " << (options.threads ? std::to_string(options.threads) : "gRPC")
            << " handler threads"
            << (options.ps.memory_limit_bytes == 0
                    ? std::string(", no memory limit")
                    : ", memory limit " + std::to_string(options.ps.memory_limit_bytes) + " bytes")
            << (options.ps.data_dir.empty()
                    ? std::string(", memory only")
                    : ", data dir " + options.ps.data_dir +
                          (options.ps.wal ? (options.ps.wal_fsync ? ", WAL fsync" : ", WAL")
                                          : ", no WAL"))
            << (options.ps.change_log_bytes == 0
                    ? std::string(", no change log")
                    : absl::StrCat(", change log ", options.ps.change_log_bytes, " bytes"))
            << "\n";

  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "brook ps: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", draining for up to "
            << flags.drain_seconds << " s\n";
  (*server)->Shutdown(absl::Seconds(flags.drain_seconds));
  server->reset();
  std::cerr << "brook ps: stopped\n";
  return kExitOk;
}

}  // namespace

void RegisterPs(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<PsFlags>();
  CLI::App* cmd = app.add_subcommand("ps", "Run one parameter-server shard");
  CLI::Option* listen =
      cmd->add_option("--listen", flags->server.listen,
                      "gRPC host:port (port 0: pick a free one; printed on stdout); default "
                      "under TF_CONFIG: 0.0.0.0 and the port of cluster.ps[task.index]")
          ->envname("BROOK_PS_LISTEN")
          ->check(ListenAddress())
          ->capture_default_str();
  cmd->add_option("--metrics-listen", flags->server.metrics_listen,
                  "Prometheus /metrics host:port; empty turns it off")
      ->envname("BROOK_PS_METRICS_LISTEN")
      ->check(ListenAddressOrEmpty())
      ->capture_default_str();
  CLI::Option* shard_index =
      cmd->add_option("--shard-index", flags->server.ps.shard_index,
                      "This PS's shard, 0-based (default under TF_CONFIG: task.index)")
          ->envname("BROOK_PS_SHARD_INDEX")
          ->capture_default_str();
  CLI::Option* num_shards =
      cmd->add_option("--num-shards", flags->server.ps.num_shards,
                      "PS shards in the cluster (default under TF_CONFIG: len(cluster.ps))")
          ->envname("BROOK_PS_NUM_SHARDS")
          ->capture_default_str();
  cmd->add_option("--memory-limit", flags->memory_limit,
                  "Bytes of rows all tables of all jobs on this PS may hold in memory, e.g. 8GiB "
                  "or 512MiB (each table's own memory_budget also applies). Past it rows move to "
                  "RocksDB with --data-dir; without one, pushes that would create rows are "
                  "refused (RESOURCE_EXHAUSTED). Empty or 0: no limit")
      ->envname("BROOK_PS_MEMORY_LIMIT");
  cmd->add_option("--change-log-mib", flags->change_log_mib,
                  "MiB of the change log: which rows each push changed, newest kept, so that a "
                  "model server following this PS copies only those (older changes past it: the "
                  "follower copies everything again). Fractions allowed; 0: off")
      ->envname("BROOK_PS_CHANGE_LOG_MIB")
      ->check(CLI::Range(0.0, 1048576.0))
      ->capture_default_str();
  cmd->add_option("--threads", flags->server.threads,
                  "Request handler threads; 0 runs handlers on gRPC's own threads")
      ->envname("BROOK_PS_THREADS")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_option("--helpers", flags->server.helpers,
                  "Threads a large pull or push is split over while no other one runs; -1: "
                  "usable cores (within a cgroup CPU limit) / 2 - 1, at most 7; 0: none")
      ->envname("BROOK_PS_HELPERS")
      ->check(CLI::Range(-1, 64))
      ->capture_default_str();
  cmd->add_option("--max-message-mib", flags->max_message_mib, "Largest request or reply in MiB")
      ->envname("BROOK_PS_MAX_MESSAGE_MIB")
      ->check(CLI::Range(1, 1024))
      ->capture_default_str();
  cmd->add_option("--max-keys-per-request", flags->server.ps.max_keys_per_request,
                  "Larger pulls/pushes are RESOURCE_EXHAUSTED")
      ->envname("BROOK_PS_MAX_KEYS_PER_REQUEST")
      ->capture_default_str();
  cmd->add_option("--dedup-window", flags->server.ps.dedup_window,
                  "Recent push sequence numbers remembered per client")
      ->envname("BROOK_PS_DEDUP_WINDOW")
      ->capture_default_str();
  cmd->add_option("--evict-interval-seconds", flags->evict_interval_seconds,
                  "How often rows past their TTL are dropped; 0 never")
      ->envname("BROOK_PS_EVICT_INTERVAL_SECONDS")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  cmd->add_option("--data-dir", flags->server.ps.data_dir,
                  "Directory for the RocksDB tier, the WAL and checkpoints; a restart over it "
                  "serves what was acknowledged. Empty: memory only")
      ->envname("BROOK_PS_DATA_DIR")
      ->capture_default_str();
  // A plain flag, not CLI11's "!--no-wal" into `wal`: CLI11 applies the
  // environment variable of a negated flag the wrong way round
  // (BROOK_PS_NO_WAL=true kept the WAL on).
  cmd->add_flag("--no-wal", flags->no_wal,
                "With --data-dir: do not log pushes (a crash returns to the last checkpoint)")
      ->envname("BROOK_PS_NO_WAL");
  cmd->add_flag("--wal-fsync", flags->server.ps.wal_fsync,
                "fdatasync every WAL write: survive power loss, not only a killed process")
      ->envname("BROOK_PS_WAL_FSYNC");
  cmd->add_option("--rocksdb-cache-mib", flags->rocksdb_cache_mib,
                  "RocksDB block cache for rows past the tables' memory budgets")
      ->envname("BROOK_PS_ROCKSDB_CACHE_MIB")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--rocksdb-write-buffer-mib", flags->rocksdb_write_buffer_mib,
                  "RocksDB memtables of all tables together: rows spilled to RocksDB gather "
                  "here before they are written out (larger: fewer, larger files to compact)")
      ->envname("BROOK_PS_ROCKSDB_WRITE_BUFFER_MIB")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--drain-seconds", flags->drain_seconds,
                  "On SIGTERM, how long in-flight requests may finish")
      ->envname("BROOK_PS_DRAIN_SECONDS")
      ->check(CLI::NonNegativeNumber)
      ->capture_default_str();
  AddTlsFlags(cmd, &flags->server.tls, TlsRole::kServer);
  AddPsTokenFlags(cmd, &flags->token);
  cmd->add_flag("--allow-unauthenticated", flags->server.allow_unauthenticated,
                "Serve a non-loopback address with neither a token nor mutual TLS (anyone who "
                "can reach the port may write and drop tables); without it such a PS refuses "
                "to start")
      ->envname("BROOK_PS_ALLOW_UNAUTHENTICATED");
  auto check_config = std::make_shared<bool>(false);
  cmd->add_flag("--check-config", *check_config,
                "Validate the flags as the command would, print `config ok` and exit 0 (2 on an "
                "error) without binding ports or opening the data dir");
  cmd->callback([flags, exit_code, check_config, listen, shard_index, num_shards] {
    flags->listen_given = listen->count() > 0;
    flags->shard_index_given = shard_index->count() > 0;
    flags->num_shards_given = num_shards->count() > 0;
    if (absl::Status s = ResolvePsFlags(flags.get()); !s.ok()) {
      std::cerr << "brook ps: " << s.message() << "\n";
      *exit_code = kExitUsage;
      return;
    }
    if (*check_config) {
      ps::rpc::PsServerOptions options = flags->server;
      options.max_message_bytes = flags->max_message_mib << 20;
      if (absl::Status s = options.Validate(); !s.ok()) {
        std::cerr << "brook ps: " << s.message() << "\n";
        *exit_code = kExitUsage;
        return;
      }
      std::cerr << "brook ps: " << AuthLine(options) << "\n";
      std::cout << "config ok" << std::endl;
      *exit_code = kExitOk;
      return;
    }
    *exit_code = RunPs(*flags);
  });
}

}  // namespace brook::cli
