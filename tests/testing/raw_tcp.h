// Raw TCP for tests that misbehave on purpose: garbage bytes, half-sent
// requests, connections held open. Every connect, send and read is bounded,
// so a server that stops answering fails the test instead of hanging it.
// Plus a bounded GET over such a connection (http_get.h's HttpGet bounds the
// reply but not the connect, which waits out TCP retransmits when a listener's
// accept queue is full -- exactly what these tests provoke).
//
// Thread-compatible.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "tests/testing/http_get.h"

namespace brook::testing {

class RawConnection {
 public:
  // Connects to "A.B.C.D:PORT" within `timeout`. nullptr (with *error set)
  // on failure.
  static std::unique_ptr<RawConnection> Connect(const std::string& address,
                                                std::chrono::milliseconds timeout,
                                                std::string* error);
  ~RawConnection();
  RawConnection(const RawConnection&) = delete;
  RawConnection& operator=(const RawConnection&) = delete;

  // Sends all of `bytes` within `timeout`; false if the peer stopped taking
  // them (closed, reset, or not reading).
  bool Send(std::string_view bytes,
            std::chrono::milliseconds timeout = std::chrono::milliseconds(3000));
  // Sends one byte if the socket takes it now; never blocks, ignores errors.
  void SendByteNow(char c);
  // shutdown(SHUT_WR): the peer reads EOF.
  void ShutdownWrite();
  // Reads until the peer closes (or resets) the connection or `timeout`
  // passes. Returns whether it closed; what arrived is appended to *got.
  bool ReadUntilClosed(std::chrono::milliseconds timeout, std::string* got = nullptr);

 private:
  explicit RawConnection(int fd) : fd_(fd) {}
  const int fd_;
};

// GET `path` over HTTP/1.0 from "A.B.C.D:PORT", connect included, all within
// `timeout`. nullopt (with *error set) on failure or timeout.
std::optional<HttpResponse> BoundedHttpGet(const std::string& address, const std::string& path,
                                           std::chrono::milliseconds timeout, std::string* error);

}  // namespace brook::testing
