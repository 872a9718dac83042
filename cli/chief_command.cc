// `brook chief`: the chief daemon. Binds, prints one machine-readable line
//   brook chief listening on 127.0.0.1:PORT metrics on 127.0.0.1:MPORT
// (tests and `brook local` parse it), serves until SIGTERM or SIGINT, then
// drains and exits 0. Its job queue lives in RocksDB under --state-dir: a
// chief restarted over the same directory resumes every job.
//
// Where the PS nodes are (first that applies): --ps; the DNS names of the
// chart's PS StatefulSet (--ps-statefulset with --ps-replicas); TF_CONFIG's
// cluster.ps. Every flag can also come from BROOK_CHIEF_<FLAG>.
#include <pthread.h>
#include <signal.h>

#include <iostream>
#include <memory>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "chief/client/cluster_spec.h"
#include "chief/service/chief_server.h"
#include "cli/address_flags.h"
#include "cli/commands.h"
#include "cli/security_flags.h"
#include "common/status_macros.h"

namespace brook::cli {
namespace {

struct ChiefFlags {
  chief::ChiefServerOptions server;
  std::string ps;
  std::string ps_statefulset, ps_service, ps_namespace = "default";
  int ps_replicas = 0;
  int ps_port = 7070;
  double lease_seconds = 10;
  double drain_seconds = 5;
  bool listen_given = false;
  TokenFlags token;
  TokenFlags ps_token;  // default: `token`
};

absl::Status ResolvePs(ChiefFlags* f) {
  if (!f->ps.empty()) {
    ASSIGN_OR_RETURN(f->server.chief.ps_addresses, chief::ParseAddressList(f->ps));
    return absl::OkStatus();
  }
  if (!f->ps_statefulset.empty()) {
    if (f->ps_replicas < 1) {
      return absl::InvalidArgumentError("--ps-replicas must be >= 1 with --ps-statefulset");
    }
    f->server.chief.ps_addresses = chief::HeadlessServiceAddresses(
        f->ps_statefulset, f->ps_service.empty() ? f->ps_statefulset : f->ps_service,
        f->ps_namespace, f->ps_replicas, f->ps_port);
    return absl::OkStatus();
  }
  absl::StatusOr<chief::ClusterSpec> tf = chief::ClusterFromEnvironment();
  if (absl::IsNotFound(tf.status())) {
    return absl::InvalidArgumentError(
        "no PS nodes: pass --ps HOST:PORT,..., --ps-statefulset NAME --ps-replicas N, or set "
        "TF_CONFIG");
  }
  if (!tf.ok()) return tf.status();
  if (tf->ps.empty()) return absl::InvalidArgumentError("TF_CONFIG: cluster.ps is empty");
  f->server.chief.ps_addresses = tf->ps;
  // Under a TFJob the chief serves on its own cluster address's port.
  if (!f->listen_given && tf->task_type == "chief" && !tf->chief.empty()) {
    f->server.listen = absl::StrCat("0.0.0.0:", tf->chief.substr(tf->chief.rfind(':') + 1));
  }
  return absl::OkStatus();
}

int RunChief(ChiefFlags flags) {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  if (absl::Status s = ResolvePs(&flags); !s.ok()) {
    std::cerr << "brook chief: " << s.message() << "\n";
    return kExitUsage;
  }
  absl::StatusOr<std::string> token = flags.token.Resolve();
  if (!token.ok()) {
    std::cerr << "brook chief: " << token.status().message() << "\n";
    return kExitUsage;
  }
  flags.server.auth_token = *token;
  absl::StatusOr<security::ClientToken> ps_token =
      ResolvePsClientToken(flags.ps_token, flags.token, "the chief token");
  if (!ps_token.ok()) {
    std::cerr << "brook chief: " << ps_token.status().message() << "\n";
    return kExitUsage;
  }
  flags.server.ps_token = *ps_token;
  flags.server.chief.lease_duration = absl::Seconds(flags.lease_seconds);
  absl::StatusOr<std::unique_ptr<chief::ChiefServer>> server =
      chief::ChiefServer::Start(flags.server);
  if (!server.ok()) {
    std::cerr << "brook chief: " << server.status().message() << "\n";
    return absl::IsInvalidArgument(server.status()) ? kExitUsage : kExitFailed;
  }
  std::cout << "brook chief listening on " << (*server)->address() << " metrics on "
            << ((*server)->metrics_address().empty() ? "off" : (*server)->metrics_address())
            << std::endl;
  std::cerr << "brook chief: state in " << flags.server.chief.state_dir << ", PS "
            << absl::StrJoin(flags.server.chief.ps_addresses, ",")
            << (flags.server.tls.enabled() ? (flags.server.tls.mutual ? ", mutual TLS" : ", TLS")
                                           : ", plaintext")
            << (flags.server.auth_token.empty() ? ", no token" : ", token required")
            << (flags.server.ps_token.token.empty()
                    ? std::string(", no PS token")
                    : ", PS token from " + flags.server.ps_token.source)
            << "\n";
  int sig = 0;
  sigwait(&signals, &sig);
  std::cerr << "brook chief: " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", stopping\n";
  (*server)->Shutdown(absl::Seconds(flags.drain_seconds));
  server->reset();
  std::cerr << "brook chief: stopped\n";
  return kExitOk;
}

}  // namespace

void RegisterChief(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<ChiefFlags>();
  CLI::App* cmd =
      app.add_subcommand("chief", "Run the chief: job queue, work leases, checkpoints, export");
  CLI::Option* listen =
      cmd->add_option("--listen", flags->server.listen, "gRPC host:port (port 0: pick a free one)")
          ->envname("BROOK_CHIEF_LISTEN")
          ->check(ListenAddress())
          ->capture_default_str();
  cmd->add_option("--metrics-listen", flags->server.metrics_listen,
                  "Prometheus /metrics host:port; empty turns it off")
      ->envname("BROOK_CHIEF_METRICS_LISTEN")
      ->check(ListenAddressOrEmpty())
      ->capture_default_str();
  cmd->add_option("--state-dir", flags->server.chief.state_dir,
                  "RocksDB directory of the job queue; a restart over it resumes every job")
      ->envname("BROOK_CHIEF_STATE_DIR")
      ->required();
  cmd->add_option("--ps", flags->ps, "PS nodes, host:port,... in shard order")
      ->envname("BROOK_CHIEF_PS");
  cmd->add_option("--ps-statefulset", flags->ps_statefulset,
                  "PS StatefulSet name: its pods' DNS names are the PS nodes")
      ->envname("BROOK_CHIEF_PS_STATEFULSET");
  cmd->add_option("--ps-service", flags->ps_service,
                  "Headless Service of the PS set (default: the set's name)")
      ->envname("BROOK_CHIEF_PS_SERVICE");
  cmd->add_option("--ps-namespace", flags->ps_namespace, "Namespace of the PS set")
      ->envname("BROOK_CHIEF_PS_NAMESPACE")
      ->capture_default_str();
  cmd->add_option("--ps-replicas", flags->ps_replicas, "PS pods in the set")
      ->envname("BROOK_CHIEF_PS_REPLICAS");
  cmd->add_option("--ps-port", flags->ps_port, "PS gRPC port")
      ->envname("BROOK_CHIEF_PS_PORT")
      ->capture_default_str();
  cmd->add_option("--lease-seconds", flags->lease_seconds,
                  "A trainer silent this long loses its work units to others")
      ->envname("BROOK_CHIEF_LEASE_SECONDS")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--max-running-jobs", flags->server.chief.max_running_jobs,
                  "Jobs running at once on the shared PS nodes")
      ->envname("BROOK_CHIEF_MAX_RUNNING_JOBS")
      ->check(CLI::Range(1, 1000))
      ->capture_default_str();
  AddTlsFlags(cmd, &flags->server.tls, TlsRole::kBoth);
  AddChiefTokenFlags(cmd, &flags->token);
  AddPsClientTokenFlags(cmd, &flags->ps_token);
  auto check_config = std::make_shared<bool>(false);
  cmd->add_flag("--check-config", *check_config,
                "Validate the flags as the command would (state dir given, PS list resolves), "
                "print `config ok` and exit 0 (2 on an error) without binding or opening anything");
  cmd->callback([flags, exit_code, listen, check_config] {
    flags->listen_given = listen->count() > 0 || std::getenv("BROOK_CHIEF_LISTEN") != nullptr;
    if (*check_config) {
      ChiefFlags resolved = *flags;
      absl::Status s = resolved.server.chief.state_dir.empty()
                           ? absl::InvalidArgumentError("--state-dir is empty")
                           : ResolvePs(&resolved);
      if (s.ok()) s = resolved.server.tls.ValidateForServer();
      if (s.ok()) s = resolved.token.Resolve().status();
      if (s.ok()) {
        s = CheckPsClientToken(resolved.ps_token, resolved.token, "the chief token",
                               resolved.server.chief.ps_addresses, resolved.server.tls);
      }
      if (!s.ok()) {
        std::cerr << "brook chief: " << s.message() << "\n";
        *exit_code = kExitUsage;
        return;
      }
      std::cout << "config ok" << std::endl;
      *exit_code = kExitOk;
      return;
    }
    *exit_code = RunChief(*flags);
  });
}

}  // namespace brook::cli
