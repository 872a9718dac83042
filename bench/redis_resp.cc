#include "bench/redis_resp.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <charconv>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

extern char** environ;

namespace brook::bench {
namespace {

// A port the kernel had free a moment ago (bind :0, read it, close).
absl::StatusOr<int> PickFreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return absl::InternalError("socket failed");
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ::close(fd);
    return absl::InternalError("bind 127.0.0.1:0 failed");
  }
  int port = ntohs(addr.sin_port);
  ::close(fd);
  return port;
}

void AppendBulk(std::string* out, absl::string_view s) {
  char num[24];
  auto r = std::to_chars(num, num + sizeof(num), s.size());
  out->push_back('$');
  out->append(num, r.ptr);
  out->append("\r\n");
  out->append(s.data(), s.size());
  out->append("\r\n");
}

void AppendKey(std::string* out, uint64_t key) {
  char num[24];
  auto r = std::to_chars(num, num + sizeof(num), key);
  AppendBulk(out, absl::string_view(num, r.ptr - num));
}

void AppendArrayHeader(std::string* out, size_t n) {
  char num[24];
  auto r = std::to_chars(num, num + sizeof(num), n);
  out->push_back('*');
  out->append(num, r.ptr);
  out->append("\r\n");
}

}  // namespace

std::string FindRedisServer() {
  const char* path = std::getenv("PATH");
  if (!path) return "";
  for (absl::string_view dir : absl::StrSplit(path, ':')) {
    if (dir.empty()) continue;
    std::string candidate = absl::StrCat(dir, "/redis-server");
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
  }
  return "";
}

absl::StatusOr<std::unique_ptr<RedisProcess>> RedisProcess::Start(const std::string& binary) {
  auto port = PickFreePort();
  if (!port.ok()) return port.status();
  std::string port_s = std::to_string(*port);
  std::vector<std::string> args = {binary,   "--port", port_s,         "--bind",     "127.0.0.1",
                                   "--save", "",       "--appendonly", "no",         "--daemonize",
                                   "no",     "--dir",  "/tmp",         "--loglevel", "warning"};
  std::vector<char*> argv;
  for (auto& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = 0;
  int rc = posix_spawn(&pid, binary.c_str(), &fa, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0)
    return absl::InternalError(absl::StrCat("cannot start ", binary, ": ", strerror(rc)));
  return std::unique_ptr<RedisProcess>(new RedisProcess(pid, *port));
}

RedisProcess::~RedisProcess() {
  ::kill(pid_, SIGTERM);
  for (int i = 0; i < 100; ++i) {  // up to ~5 s, then SIGKILL
    if (::waitpid(pid_, nullptr, WNOHANG) == pid_) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(pid_, SIGKILL);
  ::waitpid(pid_, nullptr, 0);
}

absl::StatusOr<std::unique_ptr<RedisConnection>> RedisConnection::Connect(int port,
                                                                          absl::Duration timeout) {
  absl::Time deadline = absl::Now() + timeout;
  while (true) {
    int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0) return absl::InternalError("socket failed");
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(port));
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0) {
      int one = 1;
      ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
      auto conn = std::unique_ptr<RedisConnection>(new RedisConnection(fd));
      // Redis accepts before it has loaded; PING until it answers.
      absl::Status st = conn->Simple({"PING"});
      if (st.ok()) return conn;
    } else {
      ::close(fd);
    }
    if (absl::Now() > deadline)
      return absl::UnavailableError(absl::StrCat("redis on 127.0.0.1:", port, " not answering"));
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

RedisConnection::~RedisConnection() { ::close(fd_); }

absl::Status RedisConnection::SendAll() {
  size_t off = 0;
  while (off < wbuf_.size()) {
    ssize_t n = ::send(fd_, wbuf_.data() + off, wbuf_.size() - off, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return absl::UnavailableError(absl::StrCat("redis send: ", strerror(errno)));
    }
    off += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::Fill() {
  if (rpos_ > 0) {  // compact
    std::memmove(rbuf_.data(), rbuf_.data() + rpos_, rend_ - rpos_);
    rend_ -= rpos_;
    rpos_ = 0;
  }
  if (rend_ == rbuf_.size()) rbuf_.resize(rbuf_.size() * 2);
  while (true) {
    ssize_t n = ::recv(fd_, rbuf_.data() + rend_, rbuf_.size() - rend_, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return absl::UnavailableError("redis connection closed");
    rend_ += static_cast<size_t>(n);
    return absl::OkStatus();
  }
}

absl::StatusOr<absl::string_view> RedisConnection::ReadLine() {
  size_t scanned = rpos_;
  while (true) {
    for (size_t i = scanned; i + 1 < rend_; ++i) {
      if (rbuf_[i] == '\r' && rbuf_[i + 1] == '\n') {
        absl::string_view line(rbuf_.data() + rpos_, i - rpos_);
        rpos_ = i + 2;
        return line;
      }
    }
    size_t consumed_before = rend_ - rpos_;
    absl::Status st = Fill();  // moves the data to the front
    if (!st.ok()) return st;
    scanned = consumed_before > 0 ? consumed_before - 1 : 0;
  }
}

absl::Status RedisConnection::ReadBytes(size_t n, char* dst) {
  while (n > 0) {
    if (rpos_ == rend_) {
      rpos_ = rend_ = 0;
      absl::Status st = Fill();
      if (!st.ok()) return st;
    }
    size_t take = std::min(n, rend_ - rpos_);
    if (dst) {
      std::memcpy(dst, rbuf_.data() + rpos_, take);
      dst += take;
    }
    rpos_ += take;
    n -= take;
  }
  return absl::OkStatus();
}

absl::Status RedisConnection::Simple(const std::vector<std::string>& args) {
  wbuf_.clear();
  AppendArrayHeader(&wbuf_, args.size());
  for (const auto& a : args) AppendBulk(&wbuf_, a);
  if (auto st = SendAll(); !st.ok()) return st;
  auto line = ReadLine();
  if (!line.ok()) return line.status();
  if (line->empty() || (*line)[0] != '+')
    return absl::InternalError(absl::StrCat("redis answered ", *line));
  return absl::OkStatus();
}

absl::Status RedisConnection::MSet(absl::Span<const uint64_t> keys, const char* values,
                                   size_t value_bytes) {
  wbuf_.clear();
  AppendArrayHeader(&wbuf_, 1 + 2 * keys.size());
  AppendBulk(&wbuf_, "MSET");
  for (size_t i = 0; i < keys.size(); ++i) {
    AppendKey(&wbuf_, keys[i]);
    AppendBulk(&wbuf_, absl::string_view(values + i * value_bytes, value_bytes));
  }
  if (auto st = SendAll(); !st.ok()) return st;
  auto line = ReadLine();
  if (!line.ok()) return line.status();
  if (*line != "+OK") return absl::InternalError(absl::StrCat("redis MSET answered ", *line));
  return absl::OkStatus();
}

absl::Status RedisConnection::MGet(absl::Span<const uint64_t> keys, size_t value_bytes, char* out) {
  wbuf_.clear();
  AppendArrayHeader(&wbuf_, 1 + keys.size());
  AppendBulk(&wbuf_, "MGET");
  for (uint64_t k : keys) AppendKey(&wbuf_, k);
  if (auto st = SendAll(); !st.ok()) return st;
  auto header = ReadLine();
  if (!header.ok()) return header.status();
  if (*header != absl::StrCat("*", keys.size()))
    return absl::InternalError(absl::StrCat("redis MGET answered ", *header));
  const std::string want = absl::StrCat("$", value_bytes);
  for (size_t i = 0; i < keys.size(); ++i) {
    auto line = ReadLine();
    if (!line.ok()) return line.status();
    if (*line != want)
      return absl::InternalError(
          absl::StrCat("redis MGET value ", i, " (key ", keys[i], "): ", *line, ", want ", want));
    // The value is copied out, as a client would; then its "\r\n".
    if (auto st = ReadBytes(value_bytes, out + i * value_bytes); !st.ok()) return st;
    if (auto st = ReadBytes(2, nullptr); !st.ok()) return st;
  }
  return absl::OkStatus();
}

}  // namespace brook::bench
