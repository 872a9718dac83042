// `brook bench soak --minutes N`: a local cluster (PS shards with their WAL,
// a chief, trainers) under a full push/pull load and a training job at once.
// Every few seconds it samples the load's rows/s, the job's examples/s, every
// process's RSS and the errors so far; at the end it prints the series and
// the verdict of bench/soak.h (throughput holds, RSS flat after the warm-up,
// zero errors) and exits 0 only on a pass.
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "bench/soak.h"
#include "brook/v1/chief.pb.h"
#include "chief/client/chief_client.h"
#include "chief/client/job_format.h"
#include "chief/job/job_spec.h"
#include "cli/commands.h"
#include "cli/local_cluster.h"
#include "cli/security_flags.h"
#include "common/status_macros.h"
#include "ps/client/grpc_ps_client.h"

namespace brook::cli {
namespace {

struct SoakFlags {
  double minutes = 2;
  std::string work_dir;
  int ps = 2;
  int trainers = 1;
  int load_threads = 2;
  double sample_seconds = 5;
  int keys = 200000;      // the load's key space: bounded, so its rows plateau
  int batch_keys = 2048;  // keys per pull and per push
  std::string output = "table";
  bench::SoakCriteria criteria;
};

// A DeepFM job over the generated data with far more epochs than the run
// lasts: it trains for the whole soak and is cancelled at the end.
std::string SoakJobYaml(int trainers) {
  std::string sparse, dense;
  for (int i = 1; i <= 26; ++i) absl::StrAppend(&sparse, "  - {feature: C", i, "}\n");
  for (int i = 1; i <= 13; ++i)
    absl::StrAppend(&dense, "  - {feature: I", i, ", transform: log1p}\n");
  return absl::StrCat(
      "# Written by `brook bench soak`.\n"
      "name: soak\n"
      "data:\n  train: [data/train-*.tfrecord]\n  records_per_unit: 20000\n"
      "features: data/feature_spec.yaml\n"
      "model: {type: deepfm, embedding_dim: 8, hidden: [64], activation: relu, loss: logloss}\n"
      "sparse:\n",
      sparse, "dense:\n", dense,
      "optimizer:\n  embedding: {type: adagrad, learning_rate: 0.05}\n"
      "  dense: {type: adam, learning_rate: 0.001}\n"
      "training: {batch_size: 256, epochs: 100000, staleness: 2, seed: 1}\n"
      "trainers: ",
      trainers,
      "\n"
      "checkpoint: {dir: ckpt, interval_seconds: 30, keep: 2}\n");
}

// VmRSS of a process in bytes; 0 if it is gone.
double RssBytes(pid_t pid) {
  std::ifstream in(absl::StrCat("/proc/", pid, "/status"));
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("VmRSS:", 0) == 0) return std::stod(line.substr(6)) * 1024;  // "  1234 kB"
  }
  return 0;
}

// Pull then push `batch_keys` random keys of the load table, in a loop on
// each thread, until `stop`; rows and failed calls are counted.
class Load {
 public:
  Load(const SoakFlags& f, ps::PsClient* client) : f_(f), client_(client) {}
  void Start() {
    for (int t = 0; t < f_.load_threads; ++t) threads_.emplace_back([this, t] { Loop(t); });
  }
  void Stop() {
    stop_.store(true);
    for (auto& th : threads_) th.join();
    threads_.clear();
  }
  uint64_t rows() const { return rows_.load(); }
  uint64_t errors() const { return errors_.load(); }
  std::string first_error() {
    std::lock_guard<std::mutex> lock(mu_);
    return first_error_;
  }

 private:
  static constexpr int kDim = 16;
  void Loop(int thread) {
    std::mt19937_64 rng(1000 + thread);
    std::uniform_int_distribution<uint64_t> key(1, static_cast<uint64_t>(f_.keys));
    std::vector<uint64_t> keys(f_.batch_keys);
    std::vector<float> rows(keys.size() * kDim), grads(keys.size() * kDim, 0.001f);
    int64_t step = 0;
    while (!stop_.load()) {
      for (uint64_t& k : keys) k = key(rng);
      absl::Status s = client_->Pull("soak_load", keys, absl::MakeSpan(rows));
      if (s.ok()) s = client_->Push("soak_load", keys, grads, ++step);
      if (s.ok()) {
        rows_.fetch_add(2 * keys.size());
      } else {
        errors_.fetch_add(1);
        std::lock_guard<std::mutex> lock(mu_);
        if (first_error_.empty()) first_error_ = std::string(s.message());
      }
    }
  }

  const SoakFlags& f_;
  ps::PsClient* const client_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> rows_{0}, errors_{0};
  std::mutex mu_;
  std::string first_error_;
};

void PrintTable(const std::vector<bench::SoakSample>& samples) {
  if (samples.empty()) return;
  std::cout << absl::StrFormat("%8s %14s %14s", "t (s)", "load rows/s", "train ex/s");
  for (const auto& [name, rss] : samples.front().rss_bytes) {
    std::cout << absl::StrFormat(" %12s", name + " MiB");
  }
  std::cout << absl::StrFormat(" %7s\n", "errors");
  for (const bench::SoakSample& s : samples) {
    std::cout << absl::StrFormat("%8.0f %14.0f %14.0f", s.seconds, s.load_rows_per_second,
                                 s.train_examples_per_second);
    for (const auto& [name, rss] : s.rss_bytes)
      std::cout << absl::StrFormat(" %12.0f", rss / (1 << 20));
    std::cout << absl::StrFormat(" %7d\n", s.errors);
  }
}

absl::StatusOr<int> RunSoak(const SoakFlags& f) {
  ASSIGN_OR_RETURN(const std::string work, MakeWorkDir(f.work_dir, "soak"));
  std::cerr << "brook bench soak: " << f.minutes << " min, work directory " << work << "\n";
  LocalCluster cluster(work);

  ASSIGN_OR_RETURN(
      ChildProcess * gen,
      cluster.Start("data-gen", {"data", "gen", "--out", work + "/data", "--train", "200000",
                                 "--test", "1000", "--shards", "4", "--test-shards", "1", "--seed",
                                 "5", "--cardinality-max", "1000"}));
  if (gen->Wait(absl::Minutes(10)) != 0) {
    return absl::InternalError(absl::StrCat("brook data gen failed:\n", gen->StderrTail()));
  }
  const std::string job_path = work + "/job.yaml";
  std::ofstream(job_path) << SoakJobYaml(f.trainers);
  ASSIGN_OR_RETURN(chief::JobSpec spec, chief::JobSpec::FromYamlFile(job_path));

  LocalClusterOptions nodes;
  nodes.ps = f.ps;
  nodes.trainers = f.trainers;
  RETURN_IF_ERROR(cluster.StartNodes(nodes));
  ASSIGN_OR_RETURN(auto chief, chief::ChiefClient::Connect(cluster.chief_address()));
  v1::SubmitJobRequest submit;
  submit.set_spec_json(spec.CanonicalJson());
  ASSIGN_OR_RETURN(v1::SubmitJobResponse submitted, chief->SubmitJob(submit));
  const std::string job_id = submitted.job().id();

  ps::GrpcPsClientOptions po;
  po.addresses = cluster.ps_addresses();
  // The PS children inherit $BROOK_PS_TOKEN(_FILE): send what they require.
  TokenFlags ps_token{.env_var = "BROOK_PS_TOKEN", .flag = "$BROOK_PS_TOKEN_FILE"};
  if (const char* file = std::getenv("BROOK_PS_TOKEN_FILE")) ps_token.file = file;
  ASSIGN_OR_RETURN(po.token.token, ps_token.Resolve());
  po.token.source = ps_token.Source();
  ASSIGN_OR_RETURN(auto ps_client, ps::GrpcPsClient::Create(po));
  RETURN_IF_ERROR(ps_client->WaitForReady(absl::Seconds(30)));
  ps::TableOptions table;
  table.name = "soak_load";
  table.dim = 16;
  table.optimizer.kind = ps::OptimizerKind::kAdagrad;
  RETURN_IF_ERROR(ps_client->CreateTable(table));
  Load load(f, ps_client.get());
  load.Start();

  std::vector<bench::SoakSample> samples;
  const absl::Time start = absl::Now();
  const absl::Time end = start + absl::Seconds(f.minutes * 60);
  absl::Time last = start;
  uint64_t last_rows = 0, last_examples = 0;
  uint64_t process_errors = 0;
  std::string job_state = "RUNNING";
  bool first_job_sample = true;
  while (absl::Now() < end) {
    absl::SleepFor(std::min(absl::Seconds(f.sample_seconds), end - absl::Now()));
    const absl::Time now = absl::Now();
    v1::GetJobRequest get;
    get.set_job_id(job_id);
    absl::StatusOr<v1::JobStatus> job = chief->GetJob(get);
    uint64_t examples = last_examples;
    if (job.ok()) {
      examples = job->examples_trained();
      job_state = job->state();
    } else {
      ++process_errors;
      std::cerr << "brook bench soak: GetJob: " << job.status().message() << "\n";
    }
    if (job_state != "RUNNING" && job_state != "QUEUED") {
      ++process_errors;
      std::cerr << "brook bench soak: the job ended: " << job_state << "\n";
    }
    if (const ChildProcess* dead = cluster.Dead(/*include_trainers=*/true)) {
      ++process_errors;
      std::cerr << "brook bench soak: " << dead->name() << " died:\n" << dead->StderrTail() << "\n";
    }
    const double dt = absl::ToDoubleSeconds(now - last);
    bench::SoakSample s;
    s.seconds = absl::ToDoubleSeconds(now - start);
    const uint64_t rows = load.rows();
    s.load_rows_per_second = static_cast<double>(rows - last_rows) / dt;
    // The first interval includes the job's start (registering, leasing).
    s.train_examples_per_second =
        first_job_sample ? 0 : static_cast<double>(examples - last_examples) / dt;
    first_job_sample = false;
    for (ChildProcess* c : cluster.children()) {
      if (c->name() != "data-gen") s.rss_bytes[c->name()] = RssBytes(c->pid());
    }
    s.errors = load.errors() + process_errors;
    samples.push_back(s);
    last = now;
    last_rows = rows;
    last_examples = examples;
    std::cerr << absl::StrFormat(
        "brook bench soak: %4.0f s  load %9.0f rows/s  train %7.0f ex/s  errors %d\n", s.seconds,
        s.load_rows_per_second, s.train_examples_per_second, s.errors);
    if (process_errors > 0) break;  // a dead process or an ended job: judging more is moot
  }
  load.Stop();
  v1::CancelJobRequest cancel;
  cancel.set_job_id(job_id);
  cancel.set_reason("soak finished");
  chief->CancelJob(cancel).IgnoreError();
  cluster.StopAll();
  if (load.errors() > 0)
    std::cerr << "brook bench soak: first load error: " << load.first_error() << "\n";

  // The first sample's training rate is 0 by construction (job start-up):
  // the warm-up absorbs it.
  const bench::SoakVerdict v = bench::JudgeSoak(samples, f.criteria);
  if (f.output == "json") {
    nlohmann::json j;
    j["pass"] = v.pass;
    j["failures"] = v.failures;
    j["load_rows_per_second"] = {{"early", v.load_early}, {"late", v.load_late}};
    j["train_examples_per_second"] = {{"early", v.train_early}, {"late", v.train_late}};
    j["errors"] = v.errors;
    for (const auto& [name, rss] : v.rss)
      j["rss_bytes"][name] = {{"warm", rss.first}, {"late_max", rss.second}};
    for (const bench::SoakSample& s : samples) {
      j["samples"].push_back({{"seconds", s.seconds},
                              {"load_rows_per_second", s.load_rows_per_second},
                              {"train_examples_per_second", s.train_examples_per_second},
                              {"rss_bytes", s.rss_bytes},
                              {"errors", s.errors}});
    }
    std::cout << j.dump() << "\n";
  } else {
    PrintTable(samples);
    std::cout << absl::StrFormat(
        "load: early %.0f rows/s, late %.0f rows/s (%.2f of early; bar %.2f)\n", v.load_early,
        v.load_late, v.load_early > 0 ? v.load_late / v.load_early : 0,
        f.criteria.min_throughput_ratio);
    std::cout << absl::StrFormat(
        "training: early %.0f ex/s, late %.0f ex/s (%.2f of early; bar %.2f)\n", v.train_early,
        v.train_late, v.train_early > 0 ? v.train_late / v.train_early : 0,
        f.criteria.min_throughput_ratio);
    for (const auto& [name, rss] : v.rss) {
      std::cout << absl::StrFormat("RSS %-10s %6.0f MiB after warm-up, late max %6.0f MiB\n", name,
                                   rss.first / (1 << 20), rss.second / (1 << 20));
    }
    std::cout << "errors: " << v.errors << "\n";
    std::cout << (v.pass ? "soak PASSED" : "soak FAILED") << "\n";
    for (const std::string& why : v.failures) std::cout << "  " << why << "\n";
  }
  return v.pass ? kExitOk : kExitFailed;
}

}  // namespace

void RegisterBenchSoak(CLI::App& bench, int* exit_code) {
  auto f = std::make_shared<SoakFlags>();
  CLI::App* cmd = bench.add_subcommand(
      "soak",
      "A local cluster under a full push/pull load and a training job at once: throughput, RSS "
      "and errors over time; passes when throughput holds, RSS is flat after warm-up and errors "
      "are zero");
  cmd->add_option("--minutes", f->minutes, "How long to run")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--work-dir", f->work_dir,
                  "Data, PS and chief state, logs (default: /tmp/brook-soak-*)");
  cmd->add_option("--ps", f->ps, "PS shards")->check(CLI::Range(1, 16))->capture_default_str();
  cmd->add_option("--trainers", f->trainers, "Trainer processes")
      ->check(CLI::Range(1, 16))
      ->capture_default_str();
  cmd->add_option("--load-threads", f->load_threads, "Threads pulling and pushing the load table")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
  cmd->add_option("--sample-seconds", f->sample_seconds, "Seconds between samples")
      ->check(CLI::PositiveNumber)
      ->capture_default_str();
  cmd->add_option("--keys", f->keys, "Distinct keys of the load table")
      ->check(CLI::Range(1000, 100000000))
      ->capture_default_str();
  cmd->add_option("--batch-keys", f->batch_keys, "Keys per load pull and push")
      ->check(CLI::Range(1, 65536))
      ->capture_default_str();
  cmd->add_option("--warmup-fraction", f->criteria.warmup_fraction, "Share of the run not judged")
      ->check(CLI::Range(0.0, 0.9))
      ->capture_default_str();
  cmd->add_option("--min-throughput-ratio", f->criteria.min_throughput_ratio,
                  "Late throughput must be at least this share of early")
      ->capture_default_str();
  cmd->add_option("--max-rss-growth", f->criteria.max_rss_growth,
                  "Allowed RSS growth after the warm-up (relative, plus 64 MiB)")
      ->capture_default_str();
  cmd->add_option("--output", f->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  cmd->callback([f, exit_code] {
    // Ctrl-C ends this process; the children follow (PR_SET_PDEATHSIG).
    absl::StatusOr<int> rc = RunSoak(*f);
    if (!rc.ok()) {
      std::cerr << "brook bench soak: " << rc.status().message() << "\n";
      *exit_code = kExitFailed;
      return;
    }
    *exit_code = *rc;
  });
}

}  // namespace brook::cli
