// A throwaway redis-server for `brook bench ps` and a minimal RESP client
// (plain TCP, no hiredis): MSET / MGET of binary rows keyed by the decimal
// key. Only what the benchmark needs.
//
// A RedisConnection is used by one thread at a time.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>
#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "absl/types/span.h"

namespace brook::bench {

// Path of redis-server on PATH, or "" when it is not installed.
std::string FindRedisServer();

// redis-server on 127.0.0.1 at a free port, no persistence; SIGTERM + wait
// on destruction.
class RedisProcess {
 public:
  static absl::StatusOr<std::unique_ptr<RedisProcess>> Start(const std::string& binary);
  ~RedisProcess();
  RedisProcess(const RedisProcess&) = delete;
  RedisProcess& operator=(const RedisProcess&) = delete;
  int port() const { return port_; }

 private:
  RedisProcess(pid_t pid, int port) : pid_(pid), port_(port) {}
  pid_t pid_;
  int port_;
};

class RedisConnection {
 public:
  // Retries connecting until `timeout` (the server may still be starting).
  static absl::StatusOr<std::unique_ptr<RedisConnection>> Connect(int port, absl::Duration timeout);
  ~RedisConnection();
  RedisConnection(const RedisConnection&) = delete;
  RedisConnection& operator=(const RedisConnection&) = delete;

  // MSET key_i -> values[i*value_bytes, (i+1)*value_bytes).
  absl::Status MSet(absl::Span<const uint64_t> keys, const char* values, size_t value_bytes);
  // MGET of keys into out (keys.size() x value_bytes); a missing key or a
  // value of another size is an error.
  absl::Status MGet(absl::Span<const uint64_t> keys, size_t value_bytes, char* out);
  // A command answered with a simple string (PING, FLUSHALL).
  absl::Status Simple(const std::vector<std::string>& args);

 private:
  explicit RedisConnection(int fd) : fd_(fd) {}
  absl::Status SendAll();
  absl::StatusOr<absl::string_view> ReadLine();  // without "\r\n"; valid until the next read
  absl::Status ReadBytes(size_t n, char* dst);
  absl::Status Fill();

  int fd_;
  std::string wbuf_;
  std::vector<char> rbuf_ = std::vector<char>(1 << 20);
  size_t rpos_ = 0, rend_ = 0;
};

}  // namespace brook::bench
