#include "tests/testing/http_get.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <sstream>

#include "tests/testing/test_util.h"

namespace brook::testing {

std::optional<HttpResponse> HttpGet(const std::string& host, int port, const std::string& path,
                                    int timeout_ms, std::string* error) {
  return HttpRequest(host, port, "GET", path, "", timeout_ms, error);
}

std::optional<HttpResponse> HttpRequest(const std::string& host, int port,
                                        const std::string& method, const std::string& path,
                                        const std::string& body, int timeout_ms,
                                        std::string* error) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(timeout_ms);
  auto remaining_ms = [&] {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
                    deadline - std::chrono::steady_clock::now())
                    .count();
    return static_cast<int>(left < 0 ? 0 : left);
  };
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(static_cast<uint16_t>(port));
  if (inet_pton(AF_INET, host.c_str(), &addr.sin_addr) != 1) {
    *error = "not an IPv4 address: " + host;
    return std::nullopt;
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return std::nullopt;
  }
  struct Closer {
    int fd;
    ~Closer() { close(fd); }
  } closer{fd};
  // Loopback connects complete at once or are refused; no need for async.
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    *error = std::string("connect: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::string request =
      method + " " + path + " HTTP/1.0\r\nHost: " + host + ":" + std::to_string(port) + "\r\n";
  if (method != "GET") request += "Content-Length: " + std::to_string(body.size()) + "\r\n";
  request += "\r\n" + body;
  if (send(fd, request.data(), request.size(), MSG_NOSIGNAL) !=
      static_cast<ssize_t>(request.size())) {
    *error = std::string("send: ") + std::strerror(errno);
    return std::nullopt;
  }
  std::string raw;
  char buf[16384];
  while (true) {
    pollfd pfd{fd, POLLIN, 0};
    int ready = poll(&pfd, 1, remaining_ms());
    if (ready == 0) {
      *error = "timed out reading the response";
      return std::nullopt;
    }
    if (ready < 0) {
      if (errno == EINTR) continue;
      *error = std::string("poll: ") + std::strerror(errno);
      return std::nullopt;
    }
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n == 0) break;  // HTTP/1.0: the server closes after the body
    if (n < 0) {
      if (errno == EINTR) continue;
      *error = std::string("recv: ") + std::strerror(errno);
      return std::nullopt;
    }
    raw.append(buf, static_cast<size_t>(n));
  }
  size_t split = raw.find("\r\n\r\n");
  if (split == std::string::npos || raw.compare(0, 5, "HTTP/") != 0) {
    *error = "malformed HTTP response: " + raw.substr(0, 200);
    return std::nullopt;
  }
  HttpResponse r;
  r.headers = raw.substr(0, split);
  r.body = raw.substr(split + 4);
  size_t sp = raw.find(' ');
  r.status = std::atoi(raw.c_str() + sp + 1);
  return r;
}

std::optional<HttpResponse> HttpGet(const std::string& address, const std::string& path,
                                    int timeout_ms, std::string* error) {
  size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    *error = "not host:port: " + address;
    return std::nullopt;
  }
  return HttpGet(address.substr(0, colon), std::atoi(address.c_str() + colon + 1), path, timeout_ms,
                 error);
}

std::string FindPromtool() {
  const char* path = std::getenv("PATH");
  std::stringstream dirs(path ? path : "/usr/local/bin:/usr/bin:/bin");
  std::string dir;
  while (std::getline(dirs, dir, ':')) {
    if (dir.empty()) continue;
    std::string candidate = dir + "/promtool";
    if (access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

int PromtoolCheckMetrics(const std::string& exposition, std::string* output) {
  TempDir dir;
  const std::string file = dir.Join("scrape.txt");
  WriteFileOrDie(file, exposition);
  CommandResult r =
      RunCommand({"/bin/sh", "-c", "'" + FindPromtool() + "' check metrics < '" + file + "'"}, 60);
  *output = r.output;
  return r.exit_code;
}

std::optional<double> ScrapeMetric(const std::string& metrics_address, const std::string& series,
                                   std::string* error) {
  std::string ignored;
  std::optional<HttpResponse> page =
      HttpGet(metrics_address, "/metrics", 5000, error != nullptr ? error : &ignored);
  if (!page.has_value()) return std::nullopt;
  const std::string needle = "\n" + series + " ";
  const std::string body = "\n" + page->body;
  const size_t at = body.find(needle);
  if (at == std::string::npos) return std::nullopt;
  const size_t start = at + needle.size();
  char* end = nullptr;
  const std::string value = body.substr(start, body.find('\n', start) - start);
  const double v = std::strtod(value.c_str(), &end);
  if (end == value.c_str()) return std::nullopt;
  return v;
}

}  // namespace brook::testing
