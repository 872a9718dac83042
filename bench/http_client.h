// A small blocking HTTP/1.1 client for load generators (`brook bench
// serve`): one keep-alive connection, a whole pre-built request written at
// once, the reply read by Content-Length. Every wait is bounded by the
// timeout (poll), so a server that stops answering fails the call instead
// of hanging the bench. Not a general client: no chunked replies, no
// redirects, no TLS.
//
//   ASSIGN_OR_RETURN(auto c, HttpClient::Connect("127.0.0.1:8501", absl::Seconds(30)));
//   const std::string req = HttpClient::Post("127.0.0.1:8501", "/v1/models/m:predict", body);
//   HttpClient::Response r;
//   RETURN_IF_ERROR(c->RoundTrip(req, &r));   // r.status, r.body, r.model_version
//
// One thread at a time per client.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace brook::bench {

class HttpClient {
 public:
  struct Response {
    int status = 0;
    std::string body;
    int64_t model_version = 0;  // X-Brook-Model-Version; 0 when absent
  };

  // Connects to "HOST:PORT" (a name or an IPv4/IPv6 address; "[::1]:8501").
  // UNAVAILABLE naming the address when it cannot connect.
  static absl::StatusOr<std::unique_ptr<HttpClient>> Connect(const std::string& address,
                                                             absl::Duration timeout);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // A POST of a JSON body as the bytes RoundTrip sends (keep-alive).
  static std::string Post(const std::string& host, std::string_view target, std::string_view body);

  // Writes `request` (headers and body) and reads one reply. UNAVAILABLE
  // when the connection breaks or closes, DEADLINE_EXCEEDED past the
  // timeout, DATA_LOSS for a reply that does not parse; the connection is
  // unusable after any error (open a new one). A reply saying
  // "Connection: close" leaves it closed too: open() says so.
  absl::Status RoundTrip(std::string_view request, Response* out);
  bool open() const { return fd_ >= 0; }

 private:
  HttpClient(int fd, std::string address, absl::Duration timeout)
      : fd_(fd), address_(std::move(address)), timeout_(timeout) {}
  void Close();
  // Reads more bytes into buffer_; the error when none come.
  absl::Status ReadMore(absl::Time deadline);

  int fd_ = -1;
  const std::string address_;
  const absl::Duration timeout_;
  std::string buffer_;  // bytes read past the last reply
};

}  // namespace brook::bench
