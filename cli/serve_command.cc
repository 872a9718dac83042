// `brook serve`: a model server over an export or a directory of exports
// (serving/server/model_server.h; docs/serving.md). Binds, prints one
// machine-readable line to stdout
//   brook serve listening on http HOST:PORT grpc HOST:PORT metrics HOST:PORT
// (ports chosen with :0 are the bound ones; "off" for one turned off),
// serves until SIGTERM or SIGINT, then answers what it took and exits 0.
// Every flag can also come from BROOK_SERVE_<FLAG>.
#include <pthread.h>
#include <signal.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <iostream>
#include <memory>
#include <string>
#include <tuple>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "cli/address_flags.h"
#include "cli/commands.h"
#include "cli/security_flags.h"
#include "common/status_macros.h"
#include "ps/options.h"
#include "serving/server/model_server.h"

namespace brook::cli {
namespace {

struct ServeFlags {
  serving::ModelServerOptions server;
  std::string max_request_bytes = "4MiB";
  std::string memory_limit;  // ParseByteSize; "" or 0: none
  int64_t batch_timeout_micros = 2000;
  double poll_seconds = 2;
  double sync_seconds = 10;
  std::string follow_ps;  // host:port,... in shard order
  bool check_config = false;
  bool wait_for_model = false;
  security::TlsOptions ps_tls;
  TokenFlags ps_token;
};

absl::Status Resolve(ServeFlags* f) {
  serving::ModelServerOptions& o = f->server;
  absl::StatusOr<uint64_t> body = ps::ParseByteSize(f->max_request_bytes);
  if (!body.ok() || *body < 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max-request-bytes ", f->max_request_bytes, ": ",
                     body.ok() ? "below 1 KiB" : body.status().message(), "; e.g. 4MiB"));
  }
  o.max_request_bytes = *body;
  if (!f->memory_limit.empty()) {
    absl::StatusOr<uint64_t> limit = ps::ParseByteSize(f->memory_limit);
    if (!limit.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--memory-limit: ", limit.status().message()));
    }
    if (*limit > 0 && *limit < (uint64_t{1} << 20)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--memory-limit ", f->memory_limit,
                       ": below 1 MiB; give e.g. 512MiB, or 0 for no limit"));
    }
    o.servable.memory_limit_bytes = *limit;
    if (*limit > 0 && o.servable.data_dir.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--memory-limit ", f->memory_limit,
                       " needs --data-dir: the rows past it are kept in RocksDB there"));
    }
  }
  for (const auto& [flag, seconds, zero_ok] :
       {std::tuple{"--poll-seconds", f->poll_seconds, true},
        std::tuple{"--sync-seconds", f->sync_seconds, false}}) {
    if (!std::isfinite(seconds) || seconds > 1e6 ||
        (seconds < 0.01 && !(zero_ok && seconds == 0))) {
      return absl::InvalidArgumentError(absl::StrCat(
          flag, " ", seconds, ": give seconds between 0.01 and 1e6", zero_ok ? " (0: never)" : ""));
    }
  }
  if (o.model_name.empty() || o.model_name.size() > 128 ||
      !std::all_of(o.model_name.begin(), o.model_name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      })) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--model-name \"", o.model_name,
        "\": use letters, digits, '-', '_' and '.' (it is the NAME in /v1/models/NAME)"));
  }
  o.batching.max_wait = absl::Microseconds(f->batch_timeout_micros);
  o.poll_interval = absl::Seconds(f->poll_seconds);
  o.sync_interval = absl::Seconds(f->sync_seconds);
  o.follow_ps = absl::StrSplit(f->follow_ps, ',', absl::SkipEmpty());
  if (o.follow_ps.empty() && !f->follow_ps.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("--follow-ps \"", f->follow_ps, "\": no address in it (host:port,...)"));
  }
  for (const std::string& a : o.follow_ps) {
    if (const std::string why = ListenAddressProblem(a); !why.empty()) {
      return absl::InvalidArgumentError(absl::StrCat("--follow-ps ", a, ": ", why));
    }
    if (a.substr(a.rfind(':') + 1) == "0") {
      return absl::InvalidArgumentError(
          absl::StrCat("--follow-ps ", a, ": port 0 names no PS; give the port it listens on"));
    }
  }
  if (o.follow_ps.empty() && !o.follow_job.empty()) {
    return absl::InvalidArgumentError("--job names the job to follow: it needs --follow-ps");
  }
  RETURN_IF_ERROR(serving::ModelServer::CheckAddresses(o, /*bind_ports=*/false));
  RETURN_IF_ERROR(f->ps_tls.ValidateForClient());
  o.ps_tls = f->ps_tls;
  const TokenFlags no_chief_token;
  if (!o.follow_ps.empty()) {
    RETURN_IF_ERROR(
        CheckPsClientToken(f->ps_token, no_chief_token, "no other token", o.follow_ps, f->ps_tls));
  }
  ASSIGN_OR_RETURN(o.ps_token, ResolvePsClientToken(f->ps_token, no_chief_token, "no other token"));
  return absl::OkStatus();
}

int RunServe(ServeFlags& f) {
  // Block the shutdown signals before any thread starts so only sigwait()
  // below sees them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  f.server.log = [](const std::string& line) { std::cerr << "brook serve: " << line << std::endl; };
  absl::StatusOr<std::unique_ptr<serving::ModelServer>> server =
      serving::ModelServer::Start(f.server);
  bool said_waiting = false;
  while (f.wait_for_model && absl::IsNotFound(server.status())) {
    if (!said_waiting) {
      // Not waiting, perhaps for hours, for an export a taken port could
      // never serve.
      if (absl::Status ports = serving::ModelServer::CheckAddresses(f.server, true); !ports.ok()) {
        server = ports;
        break;
      }
      std::cerr << "brook serve: " << server.status().message()
                << "; waiting for an export (--wait-for-model)" << std::endl;
      said_waiting = true;
    }
    // A SIGTERM while waiting stops the wait.
    const double seconds = f.poll_seconds > 0 ? f.poll_seconds : 1;
    const timespec wait{
        static_cast<time_t>(seconds),
        static_cast<long>((seconds - static_cast<double>(static_cast<time_t>(seconds))) * 1e9)};
    if (sigtimedwait(&signals, nullptr, &wait) > 0) return kExitOk;
    server = serving::ModelServer::Start(f.server);
  }
  if (!server.ok()) {
    std::cerr << "brook serve: " << server.status().message() << "\n";
    const absl::StatusCode c = server.status().code();
    return c == absl::StatusCode::kInvalidArgument || c == absl::StatusCode::kNotFound
               ? kExitUsage
               : kExitFailed;
  }
  const serving::ModelServer& s = **server;
  auto host = [](const std::string& listen) { return listen.substr(0, listen.rfind(':')); };
  std::cout << "brook serve listening on http " << host(f.server.http_listen) << ":"
            << s.http_port() << " grpc "
            << (f.server.grpc_listen.empty()
                    ? std::string("off")
                    : absl::StrCat(host(f.server.grpc_listen), ":", s.grpc_port()))
            << " metrics "
            << (s.metrics_port() == 0
                    ? std::string("off")
                    : absl::StrCat(host(f.server.metrics_listen), ":", s.metrics_port()))
            << std::endl;
  std::cerr << "brook serve: model \"" << f.server.model_name << "\" at POST /v1/models/"
            << f.server.model_name << ":predict; batches of up to " << f.server.batching.max_batch
            << " examples on " << f.server.batching.workers << " workers"
            << (f.server.follow_ps.empty()
                    ? std::string()
                    : absl::StrCat("; following the PS every ", f.sync_seconds, " s"))
            << "\n";
  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "brook serve: " << (sig == SIGINT ? "SIGINT" : "SIGTERM")
            << ", answering the requests taken and stopping\n";
  server->reset();
  std::cerr << "brook serve: stopped\n";
  return kExitOk;
}

}  // namespace

void RegisterServe(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ServeFlags>();
  serving::ModelServerOptions& o = f->server;
  CLI::App* cmd = app.add_subcommand(
      "serve",
      "Serve a model export over HTTP (TensorFlow Serving's REST API) and gRPC, loading newer "
      "exports as they appear and, with --follow-ps, fresh weights from a training job's PS");
  cmd->add_option("--model", o.model_path,
                  "An export directory (holding manifest.json), or a directory of exports "
                  "(MODEL/<version>/ or a chief's export dir): the newest is served and newer "
                  "ones are swapped in")
      ->envname("BROOK_SERVE_MODEL")
      ->required();
  cmd->add_option("--model-name", o.model_name, "The NAME in /v1/models/NAME")
      ->envname("BROOK_SERVE_MODEL_NAME")
      ->capture_default_str();
  cmd->add_option("--http", o.http_listen, "HTTP host:port (0: any free port, printed on stdout)")
      ->envname("BROOK_SERVE_HTTP")
      ->check(ListenAddress())
      ->capture_default_str();
  cmd->add_option("--grpc", o.grpc_listen, "gRPC (brook.v1.Predict) host:port; empty turns it off")
      ->envname("BROOK_SERVE_GRPC")
      ->check(ListenAddressOrEmpty())
      ->capture_default_str();
  cmd->add_option("--metrics-listen", o.metrics_listen,
                  "Prometheus /metrics host:port; empty turns it off")
      ->envname("BROOK_SERVE_METRICS_LISTEN")
      ->check(ListenAddressOrEmpty())
      ->capture_default_str();
  cmd->add_option("--max-batch", o.batching.max_batch,
                  "Most examples scored in one model step (concurrent requests are batched)")
      ->envname("BROOK_SERVE_MAX_BATCH")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--batch-timeout-micros", f->batch_timeout_micros,
                  "Under load, how long a batch waits to fill; a lone request never waits")
      ->envname("BROOK_SERVE_BATCH_TIMEOUT_MICROS")
      ->check(CLI::Range(int64_t{0}, int64_t{1000000}))
      ->capture_default_str();
  cmd->add_option("--workers", o.batching.workers, "Threads scoring batches")
      ->envname("BROOK_SERVE_WORKERS")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--http-threads", o.http_threads, "Threads reading and writing HTTP")
      ->envname("BROOK_SERVE_HTTP_THREADS")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  cmd->add_option("--max-request-bytes", f->max_request_bytes,
                  "Largest request body (HTTP: 413 past it; gRPC: RESOURCE_EXHAUSTED)")
      ->envname("BROOK_SERVE_MAX_REQUEST_BYTES")
      ->capture_default_str();
  cmd->add_option("--max-queued-examples", o.batching.max_queued_examples,
                  "Examples waiting for a batch past which requests are refused (HTTP 429, "
                  "RESOURCE_EXHAUSTED) instead of queueing without bound; also the most "
                  "examples one request may carry (more: HTTP 400)")
      ->envname("BROOK_SERVE_MAX_QUEUED_EXAMPLES")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--poll-seconds", f->poll_seconds,
                  "How often --model is looked at for a newer export; 0: never")
      ->envname("BROOK_SERVE_POLL_SECONDS")
      ->capture_default_str();
  cmd->add_option("--memory-limit", f->memory_limit,
                  "Bytes of embedding rows held in memory, e.g. 2GiB, counted as brook ps "
                  "counts them (header, weights and index entry: a served row keeps no optimizer "
                  "slots; each table's arena adds a fixed overhead); past it rows live in RocksDB "
                  "under --data-dir. Empty or 0: "
                  "every row in memory")
      ->envname("BROOK_SERVE_MEMORY_LIMIT");
  cmd->add_option("--data-dir", o.servable.data_dir,
                  "Scratch directory for the RocksDB tier of --memory-limit (one subdirectory "
                  "per loaded version, removed when it is unloaded)")
      ->envname("BROOK_SERVE_DATA_DIR");
  cmd->add_flag("--fill-missing", o.servable.fill_missing,
                "A feature an example lacks gets its spec's default as in training; without "
                "it such an example is refused naming the feature")
      ->envname("BROOK_SERVE_FILL_MISSING");
  cmd->add_option("--follow-ps", f->follow_ps,
                  "PS addresses host:port,... (shard order) of the cluster training the model: "
                  "rows and dense variables changed there are pulled every --sync-seconds")
      ->envname("BROOK_SERVE_FOLLOW_PS");
  cmd->add_option("--job", o.follow_job,
                  "With --follow-ps: the job whose tables to follow (default: the export's job)")
      ->envname("BROOK_SERVE_JOB");
  cmd->add_option("--sync-seconds", f->sync_seconds, "With --follow-ps: seconds between syncs")
      ->envname("BROOK_SERVE_SYNC_SECONDS")
      ->capture_default_str();
  AddTlsFlags(cmd, &f->ps_tls, TlsRole::kClient);
  AddPsClientTokenFlags(cmd, &f->ps_token);
  cmd->add_flag("--check-config", f->check_config,
                "Validate the flags as the command would, print `config ok` and exit 0 (2 on an "
                "error) without loading the model or listening");
  cmd->add_flag("--wait-for-model", f->wait_for_model,
                "While --model holds no export yet, wait for one (checking every "
                "--poll-seconds, or every second) instead of exiting 2: a server deployed "
                "before its first export")
      ->envname("BROOK_SERVE_WAIT_FOR_MODEL");
  cmd->callback([f, exit_code] {
    if (absl::Status s = Resolve(f.get()); !s.ok()) {
      std::cerr << "brook serve: " << s.message() << "\n";
      *exit_code = kExitUsage;
      return;
    }
    if (f->check_config) {
      std::cout << "config ok" << std::endl;
      *exit_code = kExitOk;
      return;
    }
    *exit_code = RunServe(*f);
  });
}

}  // namespace brook::cli
