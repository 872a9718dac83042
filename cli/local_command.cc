// `brook local [JOB.yaml]`: the whole cluster on this machine. Starts N PS
// shards, a chief and M trainers as child processes on 127.0.0.1 (ports
// chosen at run time, logs under WORK_DIR/logs: their paths printed at the
// start, and `brook logs JOB --trainer trainer-N` prints a trainer's), submits
// the job, streams a progress line, prints the final metrics and the export path, stops every
// child (also on Ctrl-C) and exits 0 only if the job succeeded.
//
// With no job file it runs the built-in demo: generate Criteo-shaped data
// with a known ground truth (`brook data gen`), train DeepFM on it, and print
// the test AUC beside the Bayes-optimal AUC of the generating model.
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/time/time.h"
#include "brook/v1/chief.pb.h"
#include "chief/client/chief_client.h"
#include "chief/client/job_format.h"
#include "chief/job/job_spec.h"
#include "cli/address_flags.h"
#include "cli/child_process.h"
#include "cli/commands.h"
#include "cli/local_cluster.h"
#include "common/status_macros.h"
#include "serving/json_examples.h"
#include "serving/server/model_server.h"
#include "storage/tfrecord.h"

namespace brook::cli {
namespace {

struct LocalFlags {
  std::string job;
  int ps = 2;
  int trainers = 2;
  std::string work_dir;
  std::string demo_train = "3000000";
  std::string demo_test = "100000";
  double lease_seconds = 5;
  int cpu_threads = 1;
  double timeout_minutes = 60;
  std::string output = "table";
  bool serve = false;
  std::string serve_http = "127.0.0.1:8501";
};

// The demo's model: DeepFM over the generator's 26 categorical and 13 count
// features (examples/criteo/deepfm.yaml), with the optimizer settings its
// quality test uses, one epoch of fresh examples.
std::string DemoJobYaml(int trainers, int64_t train_examples) {
  std::string sparse, dense;
  for (int i = 1; i <= 26; ++i) absl::StrAppend(&sparse, "  - {feature: C", i, "}\n");
  for (int i = 1; i <= 13; ++i)
    absl::StrAppend(&dense, "  - {feature: I", i, ", transform: log1p}\n");
  const int64_t steps = std::max<int64_t>(1, train_examples / 256);
  return absl::StrCat(
      "# Written by `brook local` (the built-in demo).\n"
      "name: demo-deepfm\n"
      "data:\n"
      "  train: [data/train-*.tfrecord]\n"
      "  eval: [data/test-*.tfrecord]\n"
      "  records_per_unit: 25000\n"
      "features: data/feature_spec.yaml\n"
      "model: {type: deepfm, embedding_dim: 8, hidden: [128, 64], activation: relu, loss: "
      "logloss}\n"
      "sparse:\n",
      sparse, "dense:\n", dense,
      "optimizer:\n"
      "  embedding: {type: adam, learning_rate: 0.003}\n"
      "  dense: {type: adam, learning_rate: 0.003}\n"
      "  schedule: {decay: cosine, decay_steps: ",
      steps / trainers,
      "}\n"
      "training: {batch_size: 256, epochs: 1, staleness: 2, seed: 1}\n"
      "trainers: ",
      trainers,
      "\n"
      "checkpoint: {dir: ckpt, interval_seconds: 60, keep: 2}\n"
      "export: {dir: export}\n");
}

std::atomic<bool> g_interrupted{false};

// The job file read and checked as the chief would, data included: a bad one
// is refused before the work directory or any process exists.
absl::StatusOr<chief::JobSpec> CheckLocalJob(const std::string& job_path) {
  ASSIGN_OR_RETURN(chief::JobSpec spec, chief::JobSpec::FromYamlFile(job_path));
  if (spec.training.steps > 0) return absl::InvalidArgumentError(chief::kChiefRefusesSteps);
  ASSIGN_OR_RETURN(std::vector<chief::JobSpec::GlobMatches> matches, spec.CheckData());
  ASSIGN_OR_RETURN(input::DataCheckResult checked, spec.CheckDataContents(matches));
  for (const std::string& w : checked.warnings) std::cerr << "brook local: warning: " << w << "\n";
  return spec;
}

// One request body for the served model: the first example of the job's
// eval data as a TF Serving instance.
absl::StatusOr<std::string> ExampleRequest(const chief::LoadedExport& e) {
  if (e.manifest.eval_files.empty()) {
    return absl::NotFoundError("the export records no eval data to make an example from");
  }
  const std::string& path = e.manifest.eval_files[0].path;
  storage::TFRecordReaderOptions o;
  o.compression = e.spec.data.compression.value_or(storage::CompressionFromPath(path));
  ASSIGN_OR_RETURN(std::unique_ptr<storage::TFRecordReader> reader,
                   storage::TFRecordReader::Open(path, o));
  std::string_view record;
  ASSIGN_OR_RETURN(bool got, reader->Next(&record));
  if (!got) return absl::NotFoundError(absl::StrCat(path, " holds no example"));
  const std::string one[] = {std::string(record)};
  return serving::PredictJsonFromExamples(one, e.spec.features);
}

// `--serve`: the job's export answering requests in this process (as
// `brook serve --model EXPORT` would) until Ctrl-C.
absl::Status ServeExport(const LocalFlags& f, const std::string& export_dir) {
  serving::ModelServerOptions o;
  o.model_path = export_dir;
  o.http_listen = f.serve_http;
  o.grpc_listen = "";
  o.metrics_listen = "";
  o.poll_interval = absl::ZeroDuration();
  o.log = [](const std::string& line) { std::cerr << "brook local: serve: " << line << "\n"; };
  ASSIGN_OR_RETURN(std::unique_ptr<serving::ModelServer> server, serving::ModelServer::Start(o));
  const std::shared_ptr<const serving::Servable> s = server->repository().Current();
  ASSIGN_OR_RETURN(std::string body, ExampleRequest(s->loaded()));
  const std::string host = f.serve_http.substr(0, f.serve_http.rfind(':'));
  const std::string url = absl::StrCat("http://", host, ":", server->http_port(), "/v1/models/",
                                       o.model_name, ":predict");
  std::cout << "serving: " << url << "   (Ctrl-C stops it; the same as brook serve --model "
            << export_dir << ")\n"
            << "  curl -s " << url << " -d '" << body << "'" << std::endl;
  while (!g_interrupted.load()) absl::SleepFor(absl::Milliseconds(100));
  std::cerr << "brook local: serve: stopping\n";
  return absl::OkStatus();
}

absl::StatusOr<int> RunLocal(const LocalFlags& f) {
  std::optional<chief::JobSpec> user_spec;
  if (!f.job.empty()) {
    ASSIGN_OR_RETURN(user_spec, CheckLocalJob(f.job));
  }
  ASSIGN_OR_RETURN(const std::string work, MakeWorkDir(f.work_dir, "local"));
  std::cerr << "brook local: work directory " << work << " (logs in " << work << "/logs)\n";
  LocalCluster cluster(work);

  // The job: the user's, or the demo's on freshly generated data.
  std::string job_path = f.job;
  std::optional<double> bayes_auc;
  if (job_path.empty()) {
    std::cerr << "brook local: demo: generating " << f.demo_train << " train + " << f.demo_test
              << " test Criteo-shaped examples (known ground truth)...\n";
    ASSIGN_OR_RETURN(
        ChildProcess * gen,
        cluster.Start("data-gen", {"data", "gen", "--out", work + "/data", "--train", f.demo_train,
                                   "--test", f.demo_test, "--shards", "8", "--test-shards", "2",
                                   "--seed", "3", "--cardinality-max", "1000"}));
    const int rc = gen->Wait(absl::Minutes(30));
    if (rc != 0) {
      return absl::InternalError(absl::StrCat("brook data gen failed:\n", gen->StderrTail()));
    }
    std::ifstream truth_in(work + "/data/ground_truth.json");
    const nlohmann::json truth = nlohmann::json::parse(truth_in, nullptr, false);
    if (truth.is_object() && truth.contains("test"))
      bayes_auc = truth["test"]["bayes_auc"].get<double>();
    const int64_t train_examples = static_cast<int64_t>(std::stod(f.demo_train));
    job_path = work + "/job.yaml";
    std::ofstream(job_path) << DemoJobYaml(f.trainers, train_examples);
  }
  if (!user_spec.has_value()) {
    ASSIGN_OR_RETURN(user_spec, CheckLocalJob(job_path));  // the demo's
  }
  const chief::JobSpec& spec = *user_spec;
  if (spec.trainers > f.trainers) {
    std::cerr << "brook local: the job wants " << spec.trainers << " trainers; starting "
              << f.trainers << " (--trainers)\n";
  }

  LocalClusterOptions nodes;
  nodes.ps = f.ps;
  nodes.trainers = f.trainers;
  nodes.lease_seconds = f.lease_seconds;
  nodes.cpu_threads = f.cpu_threads;
  RETURN_IF_ERROR(cluster.StartNodes(nodes));
  const std::string chief_address = cluster.chief_address();
  const std::vector<std::string>& ps_addresses = cluster.ps_addresses();
  std::cerr << "brook local: chief " << chief_address << ", PS " << absl::StrJoin(ps_addresses, ",")
            << ", " << f.trainers << " trainers\n";
  std::cerr << "brook local: process logs (stderr; stdout beside it in .out):\n";
  for (const ChildProcess* c : cluster.children()) {
    if (c->name() == "data-gen") continue;
    std::cerr << absl::StrFormat("  %-10s %s.err\n", c->name(), cluster.LogPrefix(c->name()));
  }

  ASSIGN_OR_RETURN(auto client, chief::ChiefClient::Connect(chief_address));
  v1::SubmitJobRequest submit;
  submit.set_spec_json(spec.CanonicalJson());
  ASSIGN_OR_RETURN(v1::SubmitJobResponse submitted, client->SubmitJob(submit));
  const std::string job_id = submitted.job().id();
  std::cerr << "brook local: submitted job " << job_id << "; from another terminal: brook logs "
            << job_id << " --follow --chief " << chief_address << " (a trainer's own log: add "
            << "--trainer trainer-0)\n";

  const bool tty = isatty(STDERR_FILENO);
  const absl::Time deadline = absl::Now() + absl::Seconds(f.timeout_minutes * 60);
  v1::JobStatus job = submitted.job();
  absl::Time last_line = absl::InfinitePast();
  for (;;) {
    if (g_interrupted.load()) {
      std::cerr << "\nbrook local: interrupted; cancelling " << job_id << " and stopping\n";
      v1::CancelJobRequest cancel;
      cancel.set_job_id(job_id);
      cancel.set_reason("brook local interrupted");
      client->CancelJob(cancel).IgnoreError();
      cluster.StopAll();
      return 130;
    }
    if (const ChildProcess* dead = cluster.Dead(/*include_trainers=*/false)) {
      return absl::InternalError(
          absl::StrCat(dead->name(), " exited unexpectedly; its stderr:\n", dead->StderrTail()));
    }
    v1::GetJobRequest get;
    get.set_job_id(job_id);
    absl::StatusOr<v1::JobStatus> got = client->GetJob(get);
    if (got.ok()) job = *got;
    const absl::Time now = absl::Now();
    if (chief::IsFinishedState(job.state())) break;
    if (now - last_line >= (tty ? absl::Seconds(1) : absl::Seconds(5))) {
      std::cerr << (tty ? "\r\033[K" : "") << chief::ProgressLine(job, now) << (tty ? "" : "\n")
                << std::flush;
      last_line = now;
    }
    if (now > deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("job ", job_id, " did not finish within ", f.timeout_minutes, " minutes"));
    }
    absl::SleepFor(absl::Milliseconds(250));
  }
  if (tty) std::cerr << "\n";
  std::cerr << chief::JobSummary(job, absl::Now());
  const bool ok = job.state() == "SUCCEEDED";
  if (f.output == "json") {
    std::cout << chief::ToJson(job) << "\n";
  } else {
    std::cout << "job " << job_id << " " << job.state();
    if (!job.message().empty()) std::cout << ": " << job.message();
    std::cout << "\n";
    if (job.eval().done()) {
      std::cout << absl::StrFormat("test AUC %.4f  logloss %.4f  on %d examples", job.eval().auc(),
                                   job.eval().logloss(), job.eval().examples());
      if (bayes_auc.has_value()) {
        std::cout << absl::StrFormat("   Bayes-optimal AUC %.4f (gap %.4f)", *bayes_auc,
                                     *bayes_auc - job.eval().auc());
      }
      std::cout << "\n";
    }
    std::cout << "logs: " << work << "/logs (chief, ps-N, trainer-N .err and .out)\n";
    if (!job.export_dir().empty()) {
      std::cout << "export: " << job.export_dir() << "   (score it: brook predict --model "
                << job.export_dir() << " --data FILES; serve it: brook serve --model "
                << job.export_dir() << ")\n";
    }
  }
  cluster.StopAll();
  if (ok && f.serve) {
    if (job.export_dir().empty()) {
      std::cerr << "brook local: --serve: the job wrote no export (its spec has no export.dir)\n";
      return kExitFailed;
    }
    RETURN_IF_ERROR(ServeExport(f, job.export_dir()));
  }
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

void RegisterLocal(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<LocalFlags>();
  CLI::App* cmd = app.add_subcommand(
      "local",
      "Run a job on a whole cluster on this machine (chief, PS, trainers as processes); with no "
      "job file, the built-in DeepFM demo on generated data");
  cmd->add_option("job", f->job, "Job spec YAML (omit for the demo)");
  cmd->add_option("--ps", f->ps, "PS shards")->check(CLI::Range(1, 64))->capture_default_str();
  cmd->add_option("--trainers", f->trainers, "Trainer processes")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--work-dir", f->work_dir,
                  "Where data (demo), PS state, chief state, logs, checkpoints go (default: a new "
                  "/tmp/brook-local-*)");
  cmd->add_option("--demo-train", f->demo_train, "Demo: train examples")->capture_default_str();
  cmd->add_option("--demo-test", f->demo_test, "Demo: test examples")->capture_default_str();
  cmd->add_option("--lease-seconds", f->lease_seconds,
                  "A trainer silent this long loses its work units")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--cpu-threads", f->cpu_threads, "CPU backend threads per trainer")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  cmd->add_option("--timeout-minutes", f->timeout_minutes, "Give up after this long")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_flag("--serve", f->serve,
                "After the job, serve its export over HTTP (as `brook serve`) and print an "
                "example request; Ctrl-C stops it");
  cmd->add_option("--serve-http", f->serve_http, "With --serve: HTTP host:port (0: any free)")
      ->check(ListenAddress())
      ->capture_default_str();
  cmd->add_option("--output", f->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd->callback([f, exit_code] {
    sigset_t signals;
    sigemptyset(&signals);
    sigaddset(&signals, SIGINT);
    sigaddset(&signals, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &signals, nullptr);
    std::thread([signals] {
      int sig = 0;
      sigwait(&signals, &sig);
      g_interrupted.store(true);
    }).detach();
    absl::StatusOr<int> rc = RunLocal(*f);
    if (!rc.ok()) {
      std::cerr << "brook local: " << rc.status().message() << "\n";
      *exit_code = absl::IsInvalidArgument(rc.status()) || absl::IsNotFound(rc.status())
                       ? kExitUsage
                       : kExitFailed;
      return;
    }
    *exit_code = *rc;
  });
}

}  // namespace brook::cli
