#include "bench/serve_bench.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>
#include <latch>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include <grpcpp/grpcpp.h>
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "bench/bench_util.h"
#include "bench/http_client.h"
#include "bench/paired_rate.h"
#include "brook/v1/serving.grpc.pb.h"
#include "chief/export/model_export.h"
#include "common/malloc_tuning.h"
#include "common/process_cpu.h"
#include "common/rpc/status_mapping.h"
#include "common/status_macros.h"
#include "common/usable_cpus.h"
#include "ps/client/local_ps_client.h"
#include "ps/client/prefixed_ps_client.h"
#include "serving/json_examples.h"
#include "serving/servable.h"
#include "serving/server/model_server.h"
#include "storage/tfrecord.h"
#include "trainer/input/sources.h"

namespace brook::bench {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;
using Json = nlohmann::json;

constexpr absl::Duration kRequestTimeout = absl::Seconds(30);
// Distinct requests built per shape; the clients cycle through them.
constexpr size_t kMaxPoolRequests = 1024;
// How long a placed version may take to answer before the bench gives up.
constexpr absl::Duration kSwapTimeout = absl::Seconds(120);

// The 1-minute load average (/proc/loadavg; -1 when unreadable): how busy
// the machine was besides this bench.
double LoadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = -1;
  if (!(in >> load)) return -1;
  return load;
}

double Since(Clock::time_point t0) {
  return std::chrono::duration<double>(Clock::now() - t0).count();
}

const char* Pass(bool ok) { return ok ? "PASS" : "MISS"; }

// Where the load goes.
struct Endpoints {
  std::string http;  // HOST:PORT
  std::string grpc;  // "" = none
};

// Requests built beforehand for one shape: `examples` records a request.
struct RequestPool {
  int examples = 1;
  std::vector<std::string> http;  // whole HTTP requests (headers and body)
  std::vector<v1::PredictRequest> grpc;
};

absl::StatusOr<RequestPool> BuildPool(const std::vector<std::string>& records, int per_request,
                                      const input::FeatureSpec& spec, const Endpoints& at,
                                      const std::string& model_name) {
  RequestPool pool;
  pool.examples = per_request;
  const size_t n = records.size();
  const size_t requests =
      std::clamp<size_t>(n / static_cast<size_t>(per_request), 1, kMaxPoolRequests);
  const std::string target = absl::StrCat("/v1/models/", model_name, ":predict");
  std::vector<std::string> batch;
  for (size_t r = 0; r < requests; ++r) {
    batch.clear();
    v1::PredictRequest g;
    g.set_model_name(model_name);
    for (int e = 0; e < per_request; ++e) {
      const std::string& rec = records[(r * static_cast<size_t>(per_request) + e) % n];
      batch.push_back(rec);
      g.add_examples(rec);
    }
    ASSIGN_OR_RETURN(std::string body, serving::PredictJsonFromExamples(batch, spec));
    pool.http.push_back(HttpClient::Post(at.http, target, body));
    if (!at.grpc.empty()) pool.grpc.push_back(std::move(g));
  }
  return pool;
}

// One client's connection: sends request i of its pool and waits.
class Caller {
 public:
  virtual ~Caller() = default;
  // The version that answered; an error for anything but a full answer.
  virtual absl::StatusOr<int64_t> Call(size_t i) = 0;
};

class HttpCaller final : public Caller {
 public:
  HttpCaller(std::string address, const RequestPool* pool)
      : address_(std::move(address)), pool_(pool) {}
  absl::StatusOr<int64_t> Call(size_t i) override {
    if (client_ == nullptr || !client_->open()) {
      ASSIGN_OR_RETURN(client_, HttpClient::Connect(address_, kRequestTimeout));
    }
    RETURN_IF_ERROR(client_->RoundTrip(pool_->http[i % pool_->http.size()], &reply_));
    if (reply_.status != 200) {
      return absl::InternalError(
          absl::StrCat("HTTP ", reply_.status, ": ", reply_.body.substr(0, 300)));
    }
    if (!absl::StartsWith(reply_.body, "{\"predictions\":[")) {
      return absl::DataLossError(
          absl::StrCat("HTTP 200 without predictions: ", reply_.body.substr(0, 300)));
    }
    return reply_.model_version;
  }

 private:
  const std::string address_;
  const RequestPool* const pool_;
  std::unique_ptr<HttpClient> client_;
  HttpClient::Response reply_;
};

class GrpcCaller final : public Caller {
 public:
  GrpcCaller(const std::string& address, const RequestPool* pool) : pool_(pool) {
    grpc::ChannelArguments args;
    // A connection of its own, as each HTTP client has.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    args.SetMaxReceiveMessageSize(-1);
    stub_ = v1::Predict::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  }
  absl::StatusOr<int64_t> Call(size_t i) override {
    const v1::PredictRequest& req = pool_->grpc[i % pool_->grpc.size()];
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kRequestTimeout));
    v1::PredictResponse resp;
    const grpc::Status st = stub_->Predict(&ctx, req, &resp);
    if (!st.ok()) return rpc::FromGrpcStatus(st);
    if (resp.scores_size() != req.examples_size()) {
      return absl::DataLossError(absl::StrCat("gRPC: ", resp.scores_size(), " scores for ",
                                              req.examples_size(), " examples"));
    }
    return resp.version();
  }

 private:
  const RequestPool* const pool_;
  std::unique_ptr<v1::Predict::Stub> stub_;
};

struct ClientSpec {
  bool grpc = false;
  const RequestPool* pool = nullptr;
};

std::vector<ClientSpec> Clients(int n, bool grpc, const RequestPool* pool) {
  return std::vector<ClientSpec>(static_cast<size_t>(n), ClientSpec{grpc, pool});
}

struct LoadResult {
  int64_t requests = 0;  // answered in the timed part
  int64_t examples = 0;
  int64_t failed = 0;  // any call that did not answer in full, warm-up included
  double seconds = 0;
  double cores_busy = 0;              // process CPU seconds per wall second
  std::vector<int64_t> latencies_ns;  // of the answered requests, sorted
  std::string first_failure;

  double PercentileMs(double p) const {
    if (latencies_ns.empty()) return 0;
    const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(latencies_ns.size())));
    return static_cast<double>(latencies_ns[std::clamp<size_t>(rank, 1, latencies_ns.size()) - 1]) /
           1e6;
  }
  // `other`'s requests and time added to these (slices of one figure).
  void Add(LoadResult other) {
    requests += other.requests;
    examples += other.examples;
    failed += other.failed;
    cores_busy =
        (cores_busy * seconds + other.cores_busy * other.seconds) / (seconds + other.seconds);
    seconds += other.seconds;
    if (first_failure.empty()) first_failure = std::move(other.first_failure);
    latencies_ns.insert(latencies_ns.end(), other.latencies_ns.begin(), other.latencies_ns.end());
    std::sort(latencies_ns.begin(), latencies_ns.end());
  }
  double RequestsPerSecond() const {
    return seconds > 0 ? static_cast<double>(requests) / seconds : 0;
  }
  double ExamplesPerSecond() const {
    return seconds > 0 ? static_cast<double>(examples) / seconds : 0;
  }
};

void RaiseTo(std::atomic<int64_t>* v, int64_t x) {
  int64_t now = v->load();
  while (now < x && !v->compare_exchange_weak(now, x)) {
  }
}

// Runs one closed-loop client per spec (each a warm-up call first, untimed)
// while `drive` runs on this thread; stops them when it returns. Every
// answer raises *newest to the version that gave it.
absl::StatusOr<LoadResult> RunLoad(const Endpoints& at, const std::vector<ClientSpec>& specs,
                                   const std::function<absl::Status()>& drive,
                                   std::atomic<int64_t>* newest) {
  const int n = static_cast<int>(specs.size());
  std::vector<std::unique_ptr<Caller>> callers;
  for (const ClientSpec& s : specs) {
    if (s.grpc) {
      callers.push_back(std::make_unique<GrpcCaller>(at.grpc, s.pool));
    } else {
      callers.push_back(std::make_unique<HttpCaller>(at.http, s.pool));
    }
  }
  std::atomic<bool> stop{false};
  std::mutex mu;
  LoadResult result;
  std::latch ready(n + 1);
  std::vector<std::thread> threads;
  for (int t = 0; t < n; ++t) {
    threads.emplace_back([&, t] {
      const ClientSpec& spec = specs[static_cast<size_t>(t)];
      const size_t pool_size = spec.grpc ? spec.pool->grpc.size() : spec.pool->http.size();
      size_t i = static_cast<size_t>(t) * pool_size / static_cast<size_t>(n);
      Caller& caller = *callers[static_cast<size_t>(t)];
      std::vector<int64_t> latencies;
      latencies.reserve(1 << 16);
      int64_t failed = 0;
      std::string first_failure;
      auto fail = [&](const absl::Status& st) {
        ++failed;
        if (first_failure.empty()) first_failure = st.ToString();
      };
      absl::StatusOr<int64_t> warm = caller.Call(i++);
      if (warm.ok()) {
        RaiseTo(newest, *warm);
      } else {
        fail(warm.status());
      }
      ready.arrive_and_wait();
      while (!stop.load(std::memory_order_relaxed)) {
        const auto t0 = Clock::now();
        absl::StatusOr<int64_t> v = caller.Call(i++);
        const auto t1 = Clock::now();
        if (!v.ok()) {
          fail(v.status());
          continue;
        }
        RaiseTo(newest, *v);
        // A call that ends after the stop is not in the rate.
        if (!stop.load(std::memory_order_relaxed)) {
          latencies.push_back(
              std::chrono::duration_cast<std::chrono::nanoseconds>(t1 - t0).count());
        }
      }
      std::lock_guard<std::mutex> lock(mu);
      result.requests += static_cast<int64_t>(latencies.size());
      result.examples += static_cast<int64_t>(latencies.size()) * spec.pool->examples;
      result.failed += failed;
      if (result.first_failure.empty()) result.first_failure = first_failure;
      result.latencies_ns.insert(result.latencies_ns.end(), latencies.begin(), latencies.end());
    });
  }
  ready.arrive_and_wait();
  const auto t0 = Clock::now();
  const double cpu0 = ProcessCpuSeconds();
  const absl::Status driven = drive();
  stop.store(true);
  result.seconds = Since(t0);
  result.cores_busy = (ProcessCpuSeconds() - cpu0) / result.seconds;
  for (std::thread& t : threads) t.join();
  RETURN_IF_ERROR(driven);
  std::sort(result.latencies_ns.begin(), result.latencies_ns.end());
  return result;
}

std::function<absl::Status()> Sleep(double seconds) {
  return [seconds] {
    absl::SleepFor(absl::Seconds(seconds));
    return absl::OkStatus();
  };
}

// The first `limit` records of `files`, in order.
absl::StatusOr<std::vector<std::string>> ReadRecords(const std::vector<std::string>& files,
                                                     std::optional<storage::Compression> c,
                                                     int64_t limit) {
  std::vector<std::string> records;
  for (const std::string& f : files) {
    storage::TFRecordReaderOptions o;
    o.compression = c.value_or(storage::CompressionFromPath(f));
    ASSIGN_OR_RETURN(std::unique_ptr<storage::TFRecordReader> reader,
                     storage::TFRecordReader::Open(f, o));
    std::string_view rec;
    for (;;) {
      if (static_cast<int64_t>(records.size()) >= limit) return records;
      ASSIGN_OR_RETURN(bool more, reader->Next(&rec));
      if (!more) break;
      records.emplace_back(rec);
    }
  }
  return records;
}

// `brook predict`'s scoring, timed: chief::ScoreModel over `files` on the
// export restored once into an in-process PS (the restore is not timed).
class OfflineScorer {
 public:
  static absl::StatusOr<std::unique_ptr<OfflineScorer>> Restore(const chief::LoadedExport* loaded,
                                                                std::vector<std::string> files,
                                                                int threads) {
    std::unique_ptr<OfflineScorer> s(new OfflineScorer(loaded, std::move(files), threads));
    RETURN_IF_ERROR(
        s->cluster_.client->Restore((fs::path(loaded->dir) / chief::kExportTablesDir).string())
            .status());
    s->job_ = std::make_unique<ps::PrefixedPsClient>(s->cluster_.client.get(),
                                                     loaded->manifest.table_prefix);
    return s;
  }

  // Examples/s of whole passes over the files at `batch` examples a step
  // (backend and parse threads: `threads`), pass after pass for at least
  // `seconds`.
  absl::StatusOr<double> ExamplesPerSecond(int batch, double seconds) {
    chief::ScoreOptions o;
    o.batch_size = batch;
    o.num_threads = threads_;
    o.parse_threads = threads_;
    int64_t examples = 0;
    const auto t0 = Clock::now();
    do {
      ASSIGN_OR_RETURN(trainer::EvalResult r,
                       chief::ScoreModel(job_.get(), loaded_->spec, files_, o));
      examples += r.examples;
    } while (Since(t0) < seconds);
    return static_cast<double>(examples) / Since(t0);
  }

 private:
  OfflineScorer(const chief::LoadedExport* loaded, std::vector<std::string> files, int threads)
      : loaded_(loaded), files_(std::move(files)), threads_(threads), cluster_(1) {}
  const chief::LoadedExport* const loaded_;
  const std::vector<std::string> files_;
  const int threads_;
  ps::LocalPsCluster cluster_;
  std::unique_ptr<ps::PrefixedPsClient> job_;
};

// Where a served request's time goes, on one thread with no transport:
// microseconds per example of each step the server takes for a request of
// `batch` examples (serving/rest_api.cc, serving/rpc/predict_service.cc).
struct StepCosts {
  double json_us = 0;   // HTTP only: the JSON body to tf.Examples
  double score_us = 0;  // the batch's model step: parse, row lookups, forward
};

absl::StatusOr<StepCosts> MeasureStepCosts(const std::string& model, bool fill_missing,
                                           const std::vector<std::string>& records, int batch,
                                           double seconds) {
  serving::ServableOptions so;
  so.fill_missing = fill_missing;
  ASSIGN_OR_RETURN(std::unique_ptr<serving::Servable> servable,
                   serving::Servable::Load(model, 1, so));
  std::vector<std::string> part;
  for (size_t i = 0; i < static_cast<size_t>(batch); ++i)
    part.push_back(records[i % records.size()]);
  ASSIGN_OR_RETURN(std::string body, serving::PredictJsonFromExamples(part, servable->features()));
  const std::vector<std::string_view> views(part.begin(), part.end());
  std::vector<float> scores;
  // Microseconds per example of `step`, repeated for `seconds`.
  auto time = [&](const std::function<absl::Status()>& step) -> absl::StatusOr<double> {
    int64_t rounds = 0;
    const auto t0 = Clock::now();
    do {
      RETURN_IF_ERROR(step());
      ++rounds;
    } while (Since(t0) < seconds);
    return 1e6 * Since(t0) / static_cast<double>(rounds * batch);
  };
  StepCosts c;
  ASSIGN_OR_RETURN(c.json_us, time([&]() -> absl::Status {
                     return serving::ExamplesFromPredictJson(body, servable->features()).status();
                   }));
  ASSIGN_OR_RETURN(c.score_us, time([&] { return servable->Score(views, &scores); }));
  return c;
}

struct Equality {
  int64_t examples = 0;
  double http_max_diff = 0;
  double grpc_max_diff = -1;  // -1: not measured
  bool pass = false;
};

// Served scores of `records` (in requests of `batch`) vs chief::ScoreExport's.
absl::StatusOr<Equality> CheckEquality(const chief::LoadedExport& loaded,
                                       const std::vector<std::string>& files,
                                       const std::vector<std::string>& records, int batch,
                                       int threads, const Endpoints& at,
                                       const std::string& model_name) {
  std::vector<float> want;
  chief::ScoreOptions o;
  o.num_threads = threads;
  o.on_example = [&](float, float score, const tf::Feature*) {
    if (want.size() < records.size()) want.push_back(score);
    return absl::OkStatus();
  };
  RETURN_IF_ERROR(chief::ScoreExport(loaded, files, o).status());
  if (want.size() != records.size()) {
    return absl::InternalError(
        absl::StrCat("brook predict scored ", want.size(), " of the ", records.size(), " records"));
  }
  Equality eq;
  eq.examples = static_cast<int64_t>(records.size());
  const std::string target = absl::StrCat("/v1/models/", model_name, ":predict");
  ASSIGN_OR_RETURN(std::unique_ptr<HttpClient> http, HttpClient::Connect(at.http, kRequestTimeout));
  std::unique_ptr<v1::Predict::Stub> stub;
  if (!at.grpc.empty()) {
    stub = v1::Predict::NewStub(grpc::CreateChannel(at.grpc, grpc::InsecureChannelCredentials()));
    eq.grpc_max_diff = 0;
  }
  const size_t step = static_cast<size_t>(batch);
  for (size_t at_record = 0; at_record < records.size(); at_record += step) {
    const size_t end = std::min(records.size(), at_record + step);
    const std::vector<std::string> part(records.begin() + static_cast<std::ptrdiff_t>(at_record),
                                        records.begin() + static_cast<std::ptrdiff_t>(end));
    ASSIGN_OR_RETURN(std::string body,
                     serving::PredictJsonFromExamples(part, loaded.spec.features));
    HttpClient::Response r;
    RETURN_IF_ERROR(http->RoundTrip(HttpClient::Post(at.http, target, body), &r));
    if (r.status != 200) {
      return absl::InternalError(absl::StrCat("equality check: HTTP ", r.status, ": ", r.body));
    }
    const Json got = Json::parse(r.body, nullptr, false);
    if (got.is_discarded() || !got.contains("predictions") ||
        got["predictions"].size() != part.size()) {
      return absl::DataLossError(
          absl::StrCat("equality check: unexpected reply ", r.body.substr(0, 300)));
    }
    for (size_t i = 0; i < part.size(); ++i) {
      eq.http_max_diff = std::max(
          eq.http_max_diff,
          std::abs(got["predictions"][i].get<double>() - static_cast<double>(want[at_record + i])));
    }
    if (stub == nullptr) continue;
    v1::PredictRequest req;
    req.set_model_name(model_name);
    for (const std::string& e : part) req.add_examples(e);
    v1::PredictResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + kRequestTimeout));
    const grpc::Status st = stub->Predict(&ctx, req, &resp);
    if (!st.ok()) return rpc::FromGrpcStatus(st);
    if (resp.scores_size() != req.examples_size()) {
      return absl::DataLossError("equality check: gRPC answered a wrong number of scores");
    }
    for (int i = 0; i < resp.scores_size(); ++i) {
      eq.grpc_max_diff =
          std::max(eq.grpc_max_diff,
                   std::abs(static_cast<double>(resp.scores(i)) -
                            static_cast<double>(want[at_record + static_cast<size_t>(i)])));
    }
  }
  eq.pass = eq.http_max_diff <= 1e-6 && eq.grpc_max_diff <= 1e-6;
  return eq;
}

// The largest positive integer naming a directory in `dir` (0: none).
int64_t LargestVersionIn(const std::string& dir) {
  int64_t largest = 0;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t v = 0;
    if (absl::SimpleAtoi(it->path().filename().string(), &v)) largest = std::max(largest, v);
  }
  return largest;
}

// Copied beside, then renamed in: the server never sees half a copy.
absl::Status PlaceVersion(const std::string& export_dir, const std::string& staging,
                          const std::string& parent, int64_t version) {
  const fs::path from = fs::path(staging) / absl::StrCat("v", version);
  const fs::path to = fs::path(parent) / std::to_string(version);
  std::error_code ec;
  fs::copy(export_dir, from, fs::copy_options::recursive, ec);
  if (!ec) fs::rename(from, to, ec);
  if (ec) {
    return absl::InternalError(
        absl::StrCat("placing version ", version, " at ", to.string(), ": ", ec.message()));
  }
  return absl::OkStatus();
}

Json PhaseJson(const std::string& protocol, int clients, int per_request, const LoadResult& r) {
  return {{"protocol", protocol},
          {"clients", clients},
          {"examples_per_request", per_request},
          {"seconds", r.seconds},
          {"requests", r.requests},
          {"failed", r.failed},
          {"requests_per_second", r.RequestsPerSecond()},
          {"examples_per_second", r.ExamplesPerSecond()},
          {"p50_ms", r.PercentileMs(0.50)},
          {"p99_ms", r.PercentileMs(0.99)},
          {"max_ms", r.PercentileMs(1.0)},
          {"cores_busy", r.cores_busy},
          {"first_failure", r.first_failure}};
}

std::string Row(const std::string& phase, const std::string& protocol, int clients, int per_request,
                const LoadResult& r) {
  return absl::StrFormat("%-24s %-5s %7d %6d %11.0f %11.0f %7.2f %7.2f %6d %5.2f\n", phase,
                         protocol, clients, per_request, r.RequestsPerSecond(),
                         r.ExamplesPerSecond(), r.PercentileMs(0.5), r.PercentileMs(0.99), r.failed,
                         r.cores_busy);
}

absl::Status Validate(const ServeBenchOptions& o) {
  if (o.model.empty()) return absl::InvalidArgumentError("--model EXPORT is required");
  if (o.seconds <= 0) return absl::InvalidArgumentError("--seconds must be positive");
  if (o.max_examples < 1) return absl::InvalidArgumentError("--max-examples must be at least 1");
  if (o.batch < 1 || o.batch_clients < 1 || o.swap_clients < 1 || o.workers < 1 ||
      o.http_threads < 1 || o.max_batch < 1 || o.offline_batch < 1) {
    return absl::InvalidArgumentError(
        "--batch, --batch-clients, --swap-clients, --workers, --http-threads, --max-batch and "
        "--offline-batch must be at least 1");
  }
  if (o.slices < 1) return absl::InvalidArgumentError("--slices must be at least 1");
  if (o.swaps < 0) return absl::InvalidArgumentError("--swaps must be 0 or more");
  for (int c : o.concurrency) {
    if (c < 1) return absl::InvalidArgumentError("--concurrency values must be at least 1");
  }
  if (o.target.empty() && (!o.grpc_target.empty() || !o.swap_dir.empty())) {
    return absl::InvalidArgumentError("--grpc-target and --swap-dir go with --target");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status RunServeBench(const ServeBenchOptions& options, std::ostream& out, Json* result) {
  RETURN_IF_ERROR(Validate(options));
  ASSIGN_OR_RETURN(chief::LoadedExport loaded, chief::ReadExport(options.model));
  std::vector<std::string> files;
  for (const std::string& pattern : options.data) {
    absl::StatusOr<std::vector<std::string>> matched = input::internal::ExpandGlob(pattern);
    if (!matched.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--data ", pattern, ": matches no file"));
    }
    files.insert(files.end(), matched->begin(), matched->end());
  }
  if (files.empty()) {
    for (const chief::ExportedFile& f : loaded.manifest.eval_files) files.push_back(f.path);
  }
  if (files.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("export ", options.model, " recorded no eval files: pass --data"));
  }
  ASSIGN_OR_RETURN(std::vector<std::string> records,
                   ReadRecords(files, loaded.spec.data.compression, options.max_examples));
  if (records.empty()) return absl::InvalidArgumentError("--data holds no records");

  // The server: in this process, watching a directory of versions when
  // there are swaps to do; or the target.
  ASSIGN_OR_RETURN(ScratchDir scratch, ScratchDir::Make(options.work_dir, "brook-bench-serve"));
  const bool in_process = options.target.empty();
  std::string parent = options.swap_dir;  // where versions go
  const int swaps = in_process || !options.swap_dir.empty() ? options.swaps : 0;
  std::unique_ptr<serving::ModelServer> server;
  Endpoints at;
  if (in_process) {
    serving::ModelServerOptions so;
    so.model_path = options.model;
    if (swaps > 0) {
      parent = scratch.path() + "/models";
      fs::create_directories(parent);
      RETURN_IF_ERROR(PlaceVersion(options.model, scratch.path(), parent, 1));
      so.model_path = parent;
    }
    so.model_name = options.model_name;
    so.http_listen = "127.0.0.1:0";
    so.grpc_listen = "127.0.0.1:0";
    so.metrics_listen = "";
    so.http_threads = options.http_threads;
    so.batching.max_batch = options.max_batch;
    so.batching.max_wait = absl::Microseconds(options.batch_timeout_micros);
    so.batching.workers = options.workers;
    so.servable.fill_missing = options.fill_missing;
    so.poll_interval = swaps > 0 ? absl::Seconds(options.poll_seconds) : absl::ZeroDuration();
    ASSIGN_OR_RETURN(server, serving::ModelServer::Start(so));
    at.http = absl::StrCat("127.0.0.1:", server->http_port());
    at.grpc = absl::StrCat("127.0.0.1:", server->grpc_port());
  } else {
    at.http = options.target;
    at.grpc = options.grpc_target;
  }
  const bool grpc = !at.grpc.empty();

  out << absl::StrFormat(
      "brook bench serve: export %s (job %s, step %d), %d records of %d file(s); %s; %.1f s per "
      "phase, %d cores (load average %.2f), allocator: %s\n",
      loaded.dir, loaded.manifest.job_id, loaded.manifest.step, records.size(), files.size(),
      in_process
          ? absl::StrFormat("server in this process on 127.0.0.1 (%d workers, %d HTTP threads, "
                            "max batch %d, batch timeout %d us); clients over loopback",
                            options.workers, options.http_threads, options.max_batch,
                            options.batch_timeout_micros)
          : absl::StrCat("server: brook serve at http ", at.http, " grpc ",
                         grpc ? at.grpc : std::string("(none)")),
      options.seconds, UsableCpus(), LoadAverage(), MallocDescription());
  out << "  closed loop: each client sends a request and waits for its reply; HTTP: TF Serving "
         "JSON over keep-alive connections; gRPC: brook.v1.Predict, a connection per client\n";
  out.flush();

  Json json;
  json["allocator"] = MallocDescription();
  json["cores"] = UsableCpus();
  json["load_average_at_start"] = LoadAverage();
  json["seconds_per_phase"] = options.seconds;
  json["model"] = {
      {"dir", loaded.dir}, {"job_id", loaded.manifest.job_id}, {"step", loaded.manifest.step}};
  json["data"] = {{"files", files}, {"records", records.size()}};
  json["server"] = {{"in_process", in_process},
                    {"http", at.http},
                    {"grpc", at.grpc},
                    {"workers", options.workers},
                    {"http_threads", options.http_threads},
                    {"max_batch", options.max_batch},
                    {"batch_timeout_micros", options.batch_timeout_micros}};

  // Equality first: a server answering wrong scores makes the rest moot.
  absl::StatusOr<Equality> checked =
      CheckEquality(loaded, files, records, options.batch, options.workers, at, options.model_name);
  if (!checked.ok()) {
    return absl::Status(
        checked.status().code(),
        absl::StrCat("the first requests (the equality check) failed: ", checked.status().message(),
                     in_process ? "" : " (is --target a brook serve?)"));
  }
  const Equality eq = *checked;
  json["equality"] = {{"examples", eq.examples},
                      {"http_max_abs_diff", eq.http_max_diff},
                      {"grpc_max_abs_diff", grpc ? Json(eq.grpc_max_diff) : Json(nullptr)},
                      {"tolerance", 1e-6},
                      {"pass", eq.pass}};

  std::atomic<int64_t> newest{0};
  Json phases = Json::object();
  int64_t failed = 0;
  std::string first_failure;
  auto note = [&](const std::string& name, const std::string& protocol, int clients,
                  int per_request, const LoadResult& r) {
    phases[name] = PhaseJson(protocol, clients, per_request, r);
    failed += r.failed;
    if (first_failure.empty()) first_failure = r.first_failure;
    out << Row(name, protocol, clients, per_request, r);
    out.flush();
  };
  out << absl::StrFormat("\n%-24s %-5s %7s %6s %11s %11s %7s %7s %6s %5s\n", "phase", "proto",
                         "clients", "ex/req", "requests/s", "examples/s", "p50 ms", "p99 ms",
                         "failed", "cores");

  // Latency: one example a request, at each concurrency.
  ASSIGN_OR_RETURN(RequestPool single,
                   BuildPool(records, 1, loaded.spec.features, at, options.model_name));
  for (int c : options.concurrency) {
    for (bool g : {false, true}) {
      if (g && !grpc) continue;
      ASSIGN_OR_RETURN(LoadResult r,
                       RunLoad(at, Clients(c, g, &single), Sleep(options.seconds), &newest));
      note(absl::StrCat(g ? "grpc" : "http", "_c", c), g ? "gRPC" : "HTTP", c, 1, r);
    }
  }

  // Throughput: `batch` examples a request, beside the offline ceiling in
  // alternating slices (paired_rate.h): served, offline, offline, served, ...
  // The ratio is the median pair's.
  ASSIGN_OR_RETURN(std::unique_ptr<OfflineScorer> offline_scorer,
                   OfflineScorer::Restore(&loaded, files, options.workers));
  ASSIGN_OR_RETURN(RequestPool batched,
                   BuildPool(records, options.batch, loaded.spec.features, at, options.model_name));
  const std::string batch_name = absl::StrCat("_batch", options.batch);
  const double slice = options.seconds / options.slices;
  double served_http = 0, served_grpc = 0, offline_sum = 0;
  int offline_slices = 0;
  RatioSpread ratio_http, ratio_grpc;
  for (bool g : {false, true}) {
    if (g && !grpc) continue;
    LoadResult all;
    std::vector<double> served_rates, offline_rates;
    for (int i = 0; i < options.slices; ++i) {
      for (int side = 0; side < 2; ++side) {
        if ((side == 0) == PairRunsAFirst(i)) {
          ASSIGN_OR_RETURN(LoadResult r, RunLoad(at, Clients(options.batch_clients, g, &batched),
                                                 Sleep(slice), &newest));
          served_rates.push_back(r.ExamplesPerSecond());
          all.Add(std::move(r));
        } else {
          ASSIGN_OR_RETURN(double rate,
                           offline_scorer->ExamplesPerSecond(options.offline_batch, slice));
          offline_rates.push_back(rate);
          offline_sum += rate;
          ++offline_slices;
        }
      }
    }
    note(absl::StrCat(g ? "grpc" : "http", batch_name), g ? "gRPC" : "HTTP", options.batch_clients,
         options.batch, all);
    (g ? served_grpc : served_http) = all.ExamplesPerSecond();
    (g ? ratio_grpc : ratio_http) = SliceRatios(served_rates, offline_rates);
  }
  const double offline = offline_slices > 0 ? offline_sum / offline_slices : 0;
  // Information: brook predict at the requests' batch, the part of the gap
  // that is batch size alone.
  ASSIGN_OR_RETURN(double offline_small,
                   offline_scorer->ExamplesPerSecond(options.batch, options.seconds / 2));
  offline_scorer.reset();
  json["offline"] = {{"examples_per_second", offline},
                     {"batch_size", options.offline_batch},
                     {"threads", options.workers},
                     {"slice_pairs", options.slices},
                     {"examples_per_second_at_request_batch", offline_small},
                     {"request_batch", options.batch}};

  // Information: the server's steps alone, one thread, no transport.
  ASSIGN_OR_RETURN(StepCosts costs, MeasureStepCosts(options.model, options.fill_missing, records,
                                                     options.batch, options.seconds / 8));
  ASSIGN_OR_RETURN(StepCosts single_costs, MeasureStepCosts(options.model, options.fill_missing,
                                                            records, 1, options.seconds / 8));
  json["server_steps_us_per_example"] = {
      {"request_batch", options.batch},
      {"json_to_examples", costs.json_us},
      {"score", costs.score_us},
      {"single", {{"json_to_examples", single_costs.json_us}, {"score", single_costs.score_us}}}};

  // Swaps under load, beside the same load without.
  std::vector<ClientSpec> mix;
  for (int c = 0; c < options.swap_clients; ++c) mix.push_back({grpc && c % 2 == 1, &single});
  Json swap_json;
  if (swaps > 0) {
    ASSIGN_OR_RETURN(LoadResult steady, RunLoad(at, mix, Sleep(options.seconds), &newest));
    note("mix_steady", grpc ? "both" : "HTTP", options.swap_clients, 1, steady);
    const int64_t first = std::max(LargestVersionIn(parent), newest.load()) + 1;
    std::vector<double> waits;
    auto drive = [&]() -> absl::Status {
      for (int64_t v = first; v < first + swaps; ++v) {
        const auto placed = Clock::now();
        RETURN_IF_ERROR(PlaceVersion(options.model, scratch.path(), parent, v));
        const absl::Time give_up = absl::Now() + kSwapTimeout;
        while (newest.load() < v) {
          if (absl::Now() > give_up) {
            return absl::DeadlineExceededError(absl::StrCat(
                "version ", v, " placed in ", parent, " was not served within ",
                absl::FormatDuration(kSwapTimeout), " (newest seen: ", newest.load(), ")"));
          }
          absl::SleepFor(absl::Milliseconds(1));
        }
        waits.push_back(Since(placed));
      }
      return absl::OkStatus();
    };
    ASSIGN_OR_RETURN(LoadResult swapping, RunLoad(at, mix, drive, &newest));
    note("mix_swaps", grpc ? "both" : "HTTP", options.swap_clients, 1, swapping);
    double mean_wait = 0, max_wait = 0;
    for (double w : waits) {
      mean_wait += w / static_cast<double>(waits.size());
      max_wait = std::max(max_wait, w);
    }
    swap_json = {{"swaps", waits.size()},
                 {"first_version", first},
                 {"last_version", first + swaps - 1},
                 {"failed", swapping.failed},
                 {"requests", swapping.requests},
                 {"p99_ms", swapping.PercentileMs(0.99)},
                 {"p99_ms_without", steady.PercentileMs(0.99)},
                 {"seconds_to_serve_mean", mean_wait},
                 {"seconds_to_serve_max", max_wait}};
  } else {
    swap_json = {{"swaps", 0}};
  }
  json["phases"] = phases;
  json["swaps"] = swap_json;
  json["failed_requests"] = failed;
  json["first_failure"] = first_failure;

  // The figures against their goals.
  out << absl::StrFormat(
      "\noffline ceiling: brook predict (chief::ScoreModel, batch %d, %d backend + %d parse "
      "threads) %.0f examples/s, in %d slices alternating with each batched phase's; at batch %d "
      "%.0f examples/s\n",
      options.offline_batch, options.workers, options.workers, offline, options.slices,
      options.batch, offline_small);
  out << absl::StrFormat(
      "server steps per example, one thread, no transport: JSON -> tf.Example (HTTP only), "
      "model step (parse, lookups, forward): at %d a request %.1f + %.1f us; "
      "a single-example request %.1f + %.1f us\n",
      options.batch, costs.json_us, costs.score_us, single_costs.json_us, single_costs.score_us);
  Json goals = Json::object();
  out << "goals:\n";
  if (phases.contains("http_c1")) {
    const double p99 = phases["http_c1"]["p99_ms"].get<double>();
    out << absl::StrFormat("  HTTP, 1 example, concurrency 1: p99 %.2f ms [goal < 2 ms] %s\n", p99,
                           Pass(p99 < 2.0));
    goals["http_c1_p99_ms"] = {{"value", p99}, {"goal", "< 2"}, {"pass", p99 < 2.0}};
  }
  Json ratios = Json::object();
  for (bool g : {false, true}) {
    if (g && !grpc) continue;
    const double served = g ? served_grpc : served_http;
    const RatioSpread& r = g ? ratio_grpc : ratio_http;
    const std::string name = g ? "grpc" : "http";
    ratios[name + batch_name + "_vs_offline"] = r.median;
    ratios[name + batch_name + "_vs_offline_low"] = r.low;
    ratios[name + batch_name + "_vs_offline_high"] = r.high;
    out << absl::StrFormat(
        "  %s, %d examples a request, %d clients: %.0f examples/s = %.0f%% of the offline "
        "ceiling [goal >= 50%%] %s; pairs %.0f-%.0f%% (%.0f%% of offline at batch %d)\n",
        g ? "gRPC" : "HTTP", options.batch, options.batch_clients, served, 100 * r.median,
        Pass(r.median >= 0.5), 100 * r.low, 100 * r.high,
        offline_small > 0 ? 100 * served / offline_small : 0, options.batch);
    goals[name + "_batched_vs_offline"] = {
        {"value", r.median}, {"goal", ">= 0.5"}, {"pass", r.median >= 0.5}};
  }
  json["ratios"] = ratios;
  out << absl::StrFormat(
      "  failed requests, every phase: %d [goal 0] %s%s\n", failed, failed == 0 ? "PASS" : "FAIL",
      first_failure.empty() ? "" : absl::StrCat(" (first: ", first_failure, ")"));
  goals["failed_requests"] = {{"value", failed}, {"goal", "0"}, {"pass", failed == 0}};
  out << absl::StrFormat(
      "  scores vs brook predict over %d records: max |diff| HTTP %.3g%s [goal <= 1e-6] %s\n",
      eq.examples, eq.http_max_diff,
      grpc ? absl::StrFormat(", gRPC %.3g", eq.grpc_max_diff) : std::string(),
      eq.pass ? "PASS" : "FAIL");
  goals["scores_equal"] = {{"value", std::max(eq.http_max_diff, eq.grpc_max_diff)},
                           {"goal", "<= 1e-6"},
                           {"pass", eq.pass}};
  if (swaps > 0) {
    const int64_t swap_failed = swap_json["failed"].get<int64_t>();
    out << absl::StrFormat(
        "  %d versions swapped in under load (%d clients): failed requests %d [goal 0] %s; p99 "
        "%.2f ms during swaps vs %.2f ms without; each served %.2f s after its rename (max "
        "%.2f)\n",
        swaps, options.swap_clients, swap_failed, swap_failed == 0 ? "PASS" : "FAIL",
        swap_json["p99_ms"].get<double>(), swap_json["p99_ms_without"].get<double>(),
        swap_json["seconds_to_serve_mean"].get<double>(),
        swap_json["seconds_to_serve_max"].get<double>());
    goals["failed_requests_during_swaps"] = {
        {"value", swap_failed}, {"goal", "0"}, {"pass", swap_failed == 0}};
  } else {
    out << "  swaps: not run"
        << (in_process ? " (--swaps 0)" : " (a target needs --swap-dir, the directory it watches)")
        << "\n";
  }
  json["goals"] = goals;
  out.flush();
  server.reset();
  *result = std::move(json);
  return absl::OkStatus();
}

}  // namespace brook::bench
