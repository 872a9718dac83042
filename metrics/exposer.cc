#include "metrics/exposer.h"

#include <sys/resource.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <exception>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/version.h"
#include "metrics/collector.h"
#include "prometheus/exposer.h"
#include "prometheus/gauge.h"
#include "prometheus/registry.h"

namespace brook::metrics {
namespace {

double NowUnixSeconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}

// /proc/self/stat field 22 is the start time in clock ticks after boot;
// /proc/stat "btime" is the boot time in unix seconds.
bool ReadProcStartTime(double* out) {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (!std::getline(stat, line)) return false;
  // The command name (field 2) may contain spaces; fields resume after ')'.
  size_t close = line.rfind(')');
  if (close == std::string::npos) return false;
  std::istringstream rest(line.substr(close + 2));
  std::string field;
  // Field 3 is the first after ')'; field 22 is the 20th from there.
  for (int i = 3; i <= 22; ++i) {
    if (!(rest >> field)) return false;
  }
  uint64_t start_ticks = 0;
  if (!absl::SimpleAtoi(field, &start_ticks)) return false;
  std::ifstream proc_stat("/proc/stat");
  uint64_t btime = 0;
  while (std::getline(proc_stat, line)) {
    if (line.rfind("btime ", 0) == 0 && absl::SimpleAtoi(line.substr(6), &btime)) break;
  }
  long ticks_per_second = sysconf(_SC_CLK_TCK);
  if (btime == 0 || ticks_per_second <= 0) return false;
  *out = static_cast<double>(btime) + static_cast<double>(start_ticks) / ticks_per_second;
  return true;
}

// Fields 3.. of /proc/self/stat (after the command name, which may hold
// spaces); empty on failure.
std::vector<std::string> ProcStatFields() {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  std::vector<std::string> fields;
  if (!std::getline(stat, line)) return fields;
  const size_t close = line.rfind(')');
  if (close == std::string::npos || close + 2 > line.size()) return fields;
  std::istringstream rest(line.substr(close + 2));
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

// The process_* families every Prometheus client library exports, read at
// scrape time: CPU seconds, resident and virtual memory, open and max fds.
std::vector<prometheus::MetricFamily> CollectProcessMetrics() {
  FamilySet set;
  const std::vector<std::string> f = ProcStatFields();  // f[0] is field 3
  const long ticks = sysconf(_SC_CLK_TCK);
  const long page = sysconf(_SC_PAGESIZE);
  uint64_t utime = 0, stime = 0, vsize = 0, rss_pages = 0;
  if (f.size() > 21 && ticks > 0 && absl::SimpleAtoi(f[11], &utime) &&
      absl::SimpleAtoi(f[12], &stime) && absl::SimpleAtoi(f[20], &vsize) &&
      absl::SimpleAtoi(f[21], &rss_pages)) {
    set.Add(
        set.Counter("process_cpu_seconds_total", "Total user and system CPU time spent in seconds"),
        {}, static_cast<double>(utime + stime) / static_cast<double>(ticks));
    set.Add(set.Gauge("process_virtual_memory_bytes", "Virtual memory size in bytes"), {},
            static_cast<double>(vsize));
    set.Add(set.Gauge("process_resident_memory_bytes", "Resident memory size in bytes"), {},
            static_cast<double>(rss_pages) * static_cast<double>(page));
  }
  std::error_code ec;
  size_t fds = 0;
  for (auto it = std::filesystem::directory_iterator("/proc/self/fd", ec);
       !ec && it != std::filesystem::directory_iterator(); it.increment(ec)) {
    ++fds;
  }
  if (!ec) {
    set.Add(set.Gauge("process_open_fds", "Number of open file descriptors"), {},
            static_cast<double>(fds));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    set.Add(set.Gauge("process_max_fds", "Maximum number of open file descriptors"), {},
            static_cast<double>(limit.rlim_cur));
  }
  return set.Take();
}

bool SplitHostPort(const std::string& address, std::string* host, int* port) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  return absl::SimpleAtoi(address.substr(colon + 1), port) && *port >= 0 && *port < 65536;
}

// Opens and closes one TCP connection to host:port (IPv4 only; a wildcard
// host means loopback). Failures are ignored: this only wakes a poll().
void Poke(const std::string& host, int port) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const std::string target =
      (host.empty() || host == "0.0.0.0" || host == "localhost") ? "127.0.0.1" : host;
  if (inet_pton(AF_INET, target.c_str(), &addr.sin_addr) != 1) return;
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return;
  // The result does not matter: an accepted or refused connection both end
  // the listener's poll.
  (void)connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  close(fd);
}

}  // namespace

double ProcessStartTimeSeconds() {
  static const double start = [] {
    double t = 0;
    return ReadProcStartTime(&t) ? t : NowUnixSeconds();
  }();
  return start;
}

void RegisterProcessMetrics(prometheus::Registry& registry) {
  prometheus::BuildGauge()
      .Name("brook_build_info")
      .Help("Brook build: version and git commit as labels; always 1")
      .Register(registry)
      .Add({{"version", Version()}, {"commit", GitCommit()}})
      .Set(1);
  prometheus::BuildGauge()
      .Name("process_start_time_seconds")
      .Help("Start time of the process since unix epoch in seconds")
      .Register(registry)
      .Add({})
      .Set(ProcessStartTimeSeconds());
}

std::shared_ptr<prometheus::Registry> MetricsExposer::NewRegistry() {
  auto registry = std::make_shared<prometheus::Registry>();
  RegisterProcessMetrics(*registry);
  return registry;
}

absl::Status MetricsExposer::CheckAddress(const std::string& bind_address) {
  std::string host;
  int port = 0;
  if (!SplitHostPort(bind_address, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics address '", bind_address, "' is not host:port"));
  }
  // civetweb (prometheus-cpp's server, Debian's build) binds IPv4 only and
  // reads an address in full dotted form: anything else fails deep inside
  // it with "null context when constructing CivetServer".
  const bool numeric = !host.empty() && host.find_first_not_of("0123456789.") == std::string::npos;
  in_addr parsed{};
  if (host.find(':') != std::string::npos || host.find('[') != std::string::npos ||
      (numeric && inet_pton(AF_INET, host.c_str(), &parsed) != 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "metrics address '", bind_address,
        "': the metrics server takes an IPv4 address in full (a.b.c.d; 0.0.0.0: all) or a host "
        "name, not IPv6 or a short form such as 127.1"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<MetricsExposer>> MetricsExposer::Start(
    const std::string& bind_address) {
  if (absl::Status s = CheckAddress(bind_address); !s.ok()) return s;
  std::unique_ptr<MetricsExposer> m(new MetricsExposer());
  int requested_port = 0;
  SplitHostPort(bind_address, &m->host_, &requested_port);
  m->registry_ = NewRegistry();
  try {
    // civetweb serves one connection per worker thread, from accept until the
    // request is answered, and its default request timeout is 30 s. With the
    // 2 threads we used to ask for, two idle TCP connections (a port scan, a
    // half-open health check, a stuck or hostile client) held both workers
    // and every scrape waited 30 s behind them; 50 held connections starved
    // /metrics for minutes. So: a request that has not fully arrived within
    // kExposerRequestTimeoutMs is dropped (civetweb bounds the whole request,
    // so a client dribbling a byte a second is dropped too), and enough
    // workers that tens of held connections leave threads for real scrapes.
    // Prometheus sends its request in one packet; the timeout also bounds
    // writing the reply, which a live scraper reads at once. Idle workers
    // block on a condition variable and cost only their (lazily touched)
    // stacks. Keep-alive stays off (civetweb's default) so no scraper keeps a
    // worker between scrapes.
    std::vector<std::string> options = {
        "listening_ports",    bind_address,
        "num_threads",        std::to_string(kExposerThreads),
        "request_timeout_ms", std::to_string(kExposerRequestTimeoutMs),
        "enable_keep_alive",  "no",
    };
    m->exposer_ = std::make_unique<prometheus::Exposer>(std::move(options));
  } catch (const std::exception& e) {
    // civetweb reports a failed bind by throwing from the CivetServer ctor.
    return absl::UnavailableError(
        absl::StrCat("cannot serve metrics on ", bind_address, ": ", e.what()));
  }
  std::vector<int> ports = m->exposer_->GetListeningPorts();
  if (ports.empty()) {
    return absl::UnavailableError(
        absl::StrCat("metrics exposer on ", bind_address, " bound no port"));
  }
  m->port_ = ports.front();
  m->exposer_->RegisterCollectable(m->registry_);
  m->process_collector_ = std::make_shared<FunctionCollector>(CollectProcessMetrics);
  m->exposer_->RegisterCollectable(m->process_collector_);
  return m;
}

MetricsExposer::~MetricsExposer() {
  if (!exposer_) return;
  // civetweb's listener thread polls its sockets in 2 s quanta and only then
  // notices it was told to stop, so a plain destruction takes up to 2 s
  // (every PS shutdown, every test). Connecting to the port while the
  // destructor waits wakes the poll at once (measured: 1.7 s -> 0.02 s).
  std::atomic<bool> stopped{false};
  std::thread poker([this, &stopped] {
    while (!stopped.load(std::memory_order_acquire)) {
      Poke(host_, port_);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  });
  exposer_.reset();
  stopped.store(true, std::memory_order_release);
  poker.join();
}

void MetricsExposer::RegisterCollectable(
    const std::weak_ptr<prometheus::Collectable>& collectable) {
  exposer_->RegisterCollectable(collectable);
}

std::string MetricsExposer::address() const { return absl::StrCat(host_, ":", port_); }

}  // namespace brook::metrics
