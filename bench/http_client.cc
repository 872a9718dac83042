#include "bench/http_client.h"

#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace brook::bench {

namespace {

std::string Errno() { return std::strerror(errno); }

// Milliseconds left until `deadline` for poll(), at least 0.
int MillisLeft(absl::Time deadline) {
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return ms < 0 ? 0 : static_cast<int>(ms > 1 << 30 ? 1 << 30 : ms);
}

// Splits "HOST:PORT" ("[v6]:PORT" too).
bool SplitHostPort(const std::string& address, std::string* host, std::string* port) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon + 1 == address.size()) return false;
  *host = address.substr(0, colon);
  *port = address.substr(colon + 1);
  if (host->size() >= 2 && host->front() == '[' && host->back() == ']') {
    *host = host->substr(1, host->size() - 2);
  }
  return !host->empty();
}

}  // namespace

absl::StatusOr<std::unique_ptr<HttpClient>> HttpClient::Connect(const std::string& address,
                                                                absl::Duration timeout) {
  std::string host, port;
  if (!SplitHostPort(address, &host, &port)) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP address \"", address, "\": expected HOST:PORT"));
  }
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_family = AF_UNSPEC;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", address, ": ", gai_strerror(rc)));
  }
  std::string last_error = "no address";
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      last_error = Errno();
      continue;
    }
    if (::connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      last_error = Errno();
      ::close(fd);
      fd = -1;
    }
  }
  freeaddrinfo(found);
  if (fd < 0) {
    return absl::UnavailableError(absl::StrCat("cannot connect to ", address, ": ", last_error));
  }
  const int one = 1;
  ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // a request is one write
  return std::unique_ptr<HttpClient>(new HttpClient(fd, address, timeout));
}

HttpClient::~HttpClient() { Close(); }

void HttpClient::Close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
  buffer_.clear();
}

std::string HttpClient::Post(const std::string& host, std::string_view target,
                             std::string_view body) {
  return absl::StrCat("POST ", absl::string_view(target.data(), target.size()),
                      " HTTP/1.1\r\nHost: ", host,
                      "\r\nContent-Type: application/json\r\nContent-Length: ", body.size(),
                      "\r\n\r\n", absl::string_view(body.data(), body.size()));
}

absl::Status HttpClient::ReadMore(absl::Time deadline) {
  for (;;) {
    pollfd p{fd_, POLLIN, 0};
    const int ready = ::poll(&p, 1, MillisLeft(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready < 0) return absl::UnavailableError(absl::StrCat(address_, ": poll: ", Errno()));
    if (ready == 0) {
      return absl::DeadlineExceededError(
          absl::StrCat(address_, ": no reply within ", absl::FormatDuration(timeout_)));
    }
    char chunk[64 << 10];
    const ssize_t n = ::recv(fd_, chunk, sizeof(chunk), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n < 0) return absl::UnavailableError(absl::StrCat(address_, ": recv: ", Errno()));
    if (n == 0) {
      return absl::UnavailableError(absl::StrCat(address_, ": the server closed the connection"));
    }
    buffer_.append(chunk, static_cast<size_t>(n));
    return absl::OkStatus();
  }
}

absl::Status HttpClient::RoundTrip(std::string_view request, Response* out) {
  if (fd_ < 0) return absl::UnavailableError(absl::StrCat(address_, ": connection closed"));
  const absl::Time deadline = absl::Now() + timeout_;
  absl::Status st = [&]() -> absl::Status {
    size_t sent = 0;
    while (sent < request.size()) {
      const ssize_t n = ::send(fd_, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return absl::UnavailableError(absl::StrCat(address_, ": send: ", Errno()));
      sent += static_cast<size_t>(n);
    }
    size_t end;
    while ((end = buffer_.find("\r\n\r\n")) == std::string::npos) {
      if (buffer_.size() > (64 << 10)) {
        return absl::DataLossError(absl::StrCat(address_, ": reply headers over 64 KiB"));
      }
      if (absl::Status r = ReadMore(deadline); !r.ok()) return r;
    }
    const absl::string_view head(buffer_.data(), end);
    std::vector<absl::string_view> lines = absl::StrSplit(head, "\r\n");
    // "HTTP/1.1 200 OK"
    std::vector<absl::string_view> status_line = absl::StrSplit(lines[0], absl::MaxSplits(' ', 2));
    if (status_line.size() < 2 || !absl::StartsWith(status_line[0], "HTTP/1.") ||
        !absl::SimpleAtoi(status_line[1], &out->status)) {
      return absl::DataLossError(absl::StrCat(address_, ": bad status line \"", lines[0], "\""));
    }
    int64_t length = -1;
    bool close = absl::StartsWith(status_line[0], "HTTP/1.0");
    out->model_version = 0;
    for (size_t i = 1; i < lines.size(); ++i) {
      const size_t colon = lines[i].find(':');
      if (colon == absl::string_view::npos) continue;
      const absl::string_view name = lines[i].substr(0, colon);
      const absl::string_view value = absl::StripAsciiWhitespace(lines[i].substr(colon + 1));
      if (absl::EqualsIgnoreCase(name, "content-length")) {
        if (!absl::SimpleAtoi(value, &length) || length < 0) {
          return absl::DataLossError(
              absl::StrCat(address_, ": bad Content-Length \"", value, "\""));
        }
      } else if (absl::EqualsIgnoreCase(name, "x-brook-model-version")) {
        if (!absl::SimpleAtoi(value, &out->model_version)) out->model_version = 0;
      } else if (absl::EqualsIgnoreCase(name, "connection")) {
        close = absl::EqualsIgnoreCase(value, "close");
      } else if (absl::EqualsIgnoreCase(name, "transfer-encoding")) {
        return absl::DataLossError(absl::StrCat(address_, ": chunked replies are not supported"));
      }
    }
    if (length < 0) {
      return absl::DataLossError(absl::StrCat(address_, ": reply without Content-Length"));
    }
    const size_t body_at = end + 4;
    while (buffer_.size() < body_at + static_cast<size_t>(length)) {
      if (absl::Status r = ReadMore(deadline); !r.ok()) return r;
    }
    out->body.assign(buffer_, body_at, static_cast<size_t>(length));
    buffer_.erase(0, body_at + static_cast<size_t>(length));
    if (close) Close();
    return absl::OkStatus();
  }();
  if (!st.ok()) Close();
  return st;
}

}  // namespace brook::bench
