// A small HTTP/1.1 server on Boost.Beast (Boost.Asio underneath): keep-alive
// connections, a body size limit, idle timeouts, and a handler that may
// answer later from another thread (a predict answers from a batcher
// worker). It knows no API: `brook serve` gives it RestApi::Handle.
//
//   ASSIGN_OR_RETURN(auto http, HttpServer::Start("127.0.0.1:8501", {}, handler));
//   std::cout << "HTTP on port " << http->port() << "\n";
//
// A body over max_body_bytes is answered 413, a request line or header that
// does not parse 400, a POST without Content-Length 411, all in TF
// Serving's {"error": ...} shape, and the connection closed. "Expect:
// 100-continue" is answered. A failed accept (out of descriptors) backs off. Thread-safe; the
// destructor closes every connection.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace brook::serving {

struct HttpReply {
  int status = 200;
  std::string body;  // sent as application/json
  std::vector<std::pair<std::string, std::string>> headers;
};

struct HttpServerOptions {
  int threads = 2;
  uint64_t max_body_bytes = 4 << 20;
  // A connection that sends nothing for this long is closed.
  int idle_timeout_seconds = 60;
  // After every reply is written: its status and the seconds from the
  // request's last byte to the reply's last byte.
  std::function<void(int status, double seconds)> on_reply;
};

class HttpServer {
 public:
  using Reply = std::function<void(HttpReply)>;
  // Called once per request, on a server thread; must call `reply` once.
  using Handler = std::function<void(std::string_view method, std::string_view target,
                                     std::string body, Reply reply)>;

  // Binds "host:port" (port 0: any free one) and starts serving. UNAVAILABLE
  // naming the address when it cannot be bound; INVALID_ARGUMENT for an
  // address that does not parse.
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(const std::string& address,
                                                           HttpServerOptions options,
                                                           Handler handler);
  // Start's INVALID_ARGUMENT for `address`, without listening: HOST:PORT
  // with an IP address (or localhost) as HOST.
  static absl::Status CheckAddress(const std::string& address);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  int port() const;
  // Stops accepting, after taking the connections the kernel already
  // accepted. Requests read from now on are answered and their connections
  // closed; idle keep-alive connections stay open until destruction.
  void Shutdown();
  // Waits until no request is in progress and no new connection has gone
  // 2 s without sending its request (after Shutdown: the drain); false if
  // some still were after `timeout`. The destructor waits up to 5 s unless
  // a drain ran; then it closes what is left at once.
  bool WaitIdle(absl::Duration timeout);

  struct Impl;  // http_server.cc's; its sessions reach it

 private:
  explicit HttpServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace brook::serving
