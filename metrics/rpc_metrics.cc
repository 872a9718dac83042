#include "metrics/rpc_metrics.h"

#include "absl/strings/str_cat.h"
#include "prometheus/counter.h"
#include "prometheus/histogram.h"
#include "prometheus/registry.h"

namespace brook::metrics {

std::string_view StatusCodeName(int code) {
  static constexpr std::array<std::string_view, kNumStatusCodes> kNames = {
      "OK",
      "CANCELLED",
      "UNKNOWN",
      "INVALID_ARGUMENT",
      "DEADLINE_EXCEEDED",
      "NOT_FOUND",
      "ALREADY_EXISTS",
      "PERMISSION_DENIED",
      "RESOURCE_EXHAUSTED",
      "FAILED_PRECONDITION",
      "ABORTED",
      "OUT_OF_RANGE",
      "UNIMPLEMENTED",
      "INTERNAL",
      "UNAVAILABLE",
      "DATA_LOSS",
      "UNAUTHENTICATED",
  };
  if (code < 0 || code >= kNumStatusCodes) return "UNKNOWN";
  return kNames[code];
}

// Counters are created lazily per code (most codes never occur, and an
// exposition full of zero series for them is noise); the pointer is cached
// so later requests skip Family::Add's map lookup and mutex.
struct RpcMetrics::Method {
  std::string name;
  prometheus::Histogram* duration = nullptr;
  std::array<std::atomic<prometheus::Counter*>, kNumStatusCodes> by_code{};
};

std::vector<double> RpcMetrics::DurationBuckets() {
  return {0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
          0.05,    0.1,    0.25,    0.5,    1,     2.5,    5,     10};
}

RpcMetrics::RpcMetrics(prometheus::Registry& registry, std::string_view prefix,
                       std::vector<std::string> methods) {
  requests_ = &prometheus::BuildCounter()
                   .Name(absl::StrCat(std::string(prefix), "_requests_total"))
                   .Help("Requests finished, by method and gRPC status code")
                   .Register(registry);
  auto& durations = prometheus::BuildHistogram()
                        .Name(absl::StrCat(std::string(prefix), "_request_duration_seconds"))
                        .Help("Time from a request's arrival to its reply, by method")
                        .Register(registry);
  for (std::string& name : methods) {
    auto m = std::make_unique<Method>();
    m->name = std::move(name);
    m->duration = &durations.Add({{"method", m->name}}, DurationBuckets());
    m->by_code[0].store(&requests_->Add({{"method", m->name}, {"code", "OK"}}));
    methods_.push_back(std::move(m));
  }
}

RpcMetrics::~RpcMetrics() = default;

void RpcMetrics::Record(int method, int code, double seconds) {
  Method& m = *methods_[method];
  if (code < 0 || code >= kNumStatusCodes) code = 2;  // UNKNOWN
  prometheus::Counter* counter = m.by_code[code].load(std::memory_order_acquire);
  if (counter == nullptr) {
    // Family::Add is idempotent and thread-safe: racing threads get the same
    // counter, so storing it twice is harmless.
    counter = &requests_->Add({{"method", m.name}, {"code", std::string(StatusCodeName(code))}});
    m.by_code[code].store(counter, std::memory_order_release);
  }
  counter->Increment();
  m.duration->Observe(seconds);
}

}  // namespace brook::metrics
