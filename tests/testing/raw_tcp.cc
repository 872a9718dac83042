#include "tests/testing/raw_tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace brook::testing {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

int LeftMs(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
  return left <= 0 ? 0 : static_cast<int>(left);
}

}  // namespace

std::unique_ptr<RawConnection> RawConnection::Connect(const std::string& address,
                                                      milliseconds timeout, std::string* error) {
  const size_t colon = address.rfind(':');
  int port = 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port <= 0 || port > 65535 ||
      inet_pton(AF_INET, address.substr(0, colon).c_str(), &addr.sin_addr) != 1) {
    *error = "not IPv4 host:port: " + address;
    return nullptr;
  }
  addr.sin_port = htons(static_cast<uint16_t>(port));
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<RawConnection> c(new RawConnection(fd));
  // Non-blocking connect: a listener whose accept queue is full drops the
  // SYN, and a blocking connect would wait out TCP's retransmits.
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    if (errno != EINPROGRESS) {
      *error = std::string("connect: ") + std::strerror(errno);
      return nullptr;
    }
    pollfd p{fd, POLLOUT, 0};
    if (poll(&p, 1, static_cast<int>(timeout.count())) != 1) {
      *error = absl::StrCat("connect to ", address, " took over ", timeout.count(), " ms");
      return nullptr;
    }
    int so_error = 0;
    socklen_t len = sizeof(so_error);
    getsockopt(fd, SOL_SOCKET, SO_ERROR, &so_error, &len);
    if (so_error != 0) {
      *error = std::string("connect: ") + std::strerror(so_error);
      return nullptr;
    }
  }
  return c;
}

RawConnection::~RawConnection() { close(fd_); }

bool RawConnection::Send(std::string_view bytes, milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  while (!bytes.empty()) {
    const ssize_t n = send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
    if (n > 0) {
      bytes.remove_prefix(static_cast<size_t>(n));
      continue;
    }
    if (n < 0 && errno != EAGAIN && errno != EINTR) return false;
    if (Clock::now() >= deadline) return false;
    pollfd p{fd_, POLLOUT, 0};
    poll(&p, 1, LeftMs(deadline));
  }
  return true;
}

void RawConnection::SendByteNow(char c) { (void)send(fd_, &c, 1, MSG_NOSIGNAL | MSG_DONTWAIT); }

void RawConnection::ShutdownWrite() { shutdown(fd_, SHUT_WR); }

bool RawConnection::ReadUntilClosed(milliseconds timeout, std::string* got) {
  const auto deadline = Clock::now() + timeout;
  char buf[16384];
  while (true) {
    const ssize_t n = recv(fd_, buf, sizeof(buf), 0);
    if (n == 0) return true;
    if (n > 0) {
      if (got != nullptr) got->append(buf, static_cast<size_t>(n));
      continue;
    }
    if (errno != EAGAIN && errno != EINTR) return true;  // reset: closed too
    if (Clock::now() >= deadline) return false;
    pollfd p{fd_, POLLIN, 0};
    poll(&p, 1, LeftMs(deadline));
  }
}

std::optional<HttpResponse> BoundedHttpGet(const std::string& address, const std::string& path,
                                           milliseconds timeout, std::string* error) {
  const auto deadline = Clock::now() + timeout;
  std::unique_ptr<RawConnection> conn = RawConnection::Connect(address, timeout, error);
  if (conn == nullptr) return std::nullopt;
  if (!conn->Send(absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", address, "\r\n\r\n"),
                  milliseconds(LeftMs(deadline)))) {
    *error = "sending the request failed";
    return std::nullopt;
  }
  std::string raw;
  if (!conn->ReadUntilClosed(milliseconds(LeftMs(deadline)), &raw)) {
    *error = absl::StrCat("no complete reply within ", timeout.count(), " ms (got ", raw.size(),
                          " bytes)");
    return std::nullopt;
  }
  const size_t split = raw.find("\r\n\r\n");
  int status = 0;
  if (split == std::string::npos || raw.compare(0, 5, "HTTP/") != 0 || raw.size() < 12 ||
      !absl::SimpleAtoi(raw.substr(9, 3), &status)) {
    *error = "not an HTTP reply: " + raw.substr(0, 200);
    return std::nullopt;
  }
  HttpResponse r;
  r.status = status;
  r.headers = raw.substr(0, split);
  r.body = raw.substr(split + 4);
  return r;
}

}  // namespace brook::testing
