// bench/http_client.h against a scripted server on 127.0.0.1: replies split
// across writes and two replies in one write are read whole, the model
// version header is picked up, "Connection: close" and a server that closes
// mid-body leave the client closed, a reply with no Content-Length is
// refused, and a server that never answers fails the call within the
// timeout instead of hanging it.
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "bench/http_client.h"
#include "gtest/gtest.h"

namespace brook::bench {
namespace {

// Accepts one connection and runs `script` on it (the fd), then closes it.
class HcScriptedServer {
 public:
  explicit HcScriptedServer(std::function<void(int fd)> script) {
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(::bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
    EXPECT_EQ(::listen(listen_fd_, 4), 0);
    socklen_t len = sizeof(addr);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    address_ = absl::StrCat("127.0.0.1:", ntohs(addr.sin_port));
    thread_ = std::thread([this, script = std::move(script)] {
      const int fd = ::accept(listen_fd_, nullptr, nullptr);
      if (fd < 0) return;
      script(fd);
      ::close(fd);
    });
  }
  ~HcScriptedServer() {
    ::shutdown(listen_fd_, SHUT_RDWR);
    thread_.join();
    ::close(listen_fd_);
  }
  const std::string& address() const { return address_; }

 private:
  int listen_fd_ = -1;
  std::string address_;
  std::thread thread_;
};

// Reads one request (headers and a Content-Length body) from `fd`.
std::string HcReadRequest(int fd) {
  std::string got;
  char buf[4096];
  for (;;) {
    const size_t end = got.find("\r\n\r\n");
    if (end != std::string::npos) {
      const size_t cl = got.find("Content-Length: ");
      const size_t length = cl == std::string::npos ? 0 : std::stoul(got.substr(cl + 16));
      if (got.size() >= end + 4 + length) return got;
    }
    const ssize_t n = ::recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return got;
    got.append(buf, static_cast<size_t>(n));
  }
}

void HcSend(int fd, const std::string& bytes) {
  ASSERT_EQ(::send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(bytes.size()));
}

std::string HcReply(const std::string& body, const std::string& extra_headers = "") {
  return absl::StrCat("HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n", extra_headers,
                      "Content-Length: ", body.size(), "\r\n\r\n", body);
}

TEST(HttpClientTest, ReadsRepliesSplitAcrossWritesAndTwoInOneWrite) {
  const std::string body = R"({"predictions":[0.25]})";
  std::string first_request;
  HcScriptedServer server([&](int fd) {
    first_request = HcReadRequest(fd);
    // The first reply in three pieces, with a pause between.
    const std::string r = HcReply(body, "X-Brook-Model-Version: 7\r\n");
    HcSend(fd, r.substr(0, 10));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    HcSend(fd, r.substr(10, 40));
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    HcSend(fd, r.substr(50));
    // The next two replies in one write.
    HcReadRequest(fd);
    HcSend(fd, HcReply("{\"a\":1}", "x-brook-model-version:  8 \r\n") + HcReply("{\"b\":2}"));
    HcReadRequest(fd);
  });
  auto client = HttpClient::Connect(server.address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok()) << client.status();
  const std::string request = HttpClient::Post(server.address(), "/v1/models/m:predict", "{}");
  HttpClient::Response r;
  ASSERT_TRUE((*client)->RoundTrip(request, &r).ok());
  EXPECT_EQ(r.status, 200);
  EXPECT_EQ(r.body, body);
  EXPECT_EQ(r.model_version, 7);
  EXPECT_NE(first_request.find("POST /v1/models/m:predict HTTP/1.1\r\n"), std::string::npos);
  EXPECT_NE(first_request.find("Content-Length: 2\r\n\r\n{}"), std::string::npos);
  ASSERT_TRUE((*client)->RoundTrip(request, &r).ok());
  EXPECT_EQ(r.body, "{\"a\":1}");
  EXPECT_EQ(r.model_version, 8);                        // header names are case-insensitive
  ASSERT_TRUE((*client)->RoundTrip(request, &r).ok());  // the second reply was buffered
  EXPECT_EQ(r.body, "{\"b\":2}");
  EXPECT_EQ(r.model_version, 0);  // none sent
  EXPECT_TRUE((*client)->open());
}

TEST(HttpClientTest, ConnectionCloseAndAnErrorStatusAreReported) {
  HcScriptedServer server([](int fd) {
    HcReadRequest(fd);
    HcSend(fd,
           "HTTP/1.1 429 Too Many Requests\r\nConnection: close\r\nContent-Length: 9\r\n\r\n"
           "{\"e\": 1}\n");
  });
  auto client = HttpClient::Connect(server.address(), absl::Seconds(10));
  ASSERT_TRUE(client.ok()) << client.status();
  HttpClient::Response r;
  ASSERT_TRUE((*client)->RoundTrip(HttpClient::Post("h", "/", "{}"), &r).ok());
  EXPECT_EQ(r.status, 429);
  EXPECT_EQ(r.body, "{\"e\": 1}\n");
  EXPECT_FALSE((*client)->open());
  EXPECT_TRUE(absl::IsUnavailable((*client)->RoundTrip(HttpClient::Post("h", "/", "{}"), &r)));
}

TEST(HttpClientTest, ABodyCutShortOrNoLengthIsAnErrorAndClosesTheClient) {
  {
    HcScriptedServer server([](int fd) {
      HcReadRequest(fd);
      HcSend(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\n{\"cut");
    });
    auto client = HttpClient::Connect(server.address(), absl::Seconds(10));
    ASSERT_TRUE(client.ok());
    HttpClient::Response r;
    const absl::Status st = (*client)->RoundTrip(HttpClient::Post("h", "/", "{}"), &r);
    EXPECT_TRUE(absl::IsUnavailable(st)) << st;
    EXPECT_NE(st.message().find(server.address()), std::string::npos) << st;
    EXPECT_FALSE((*client)->open());
  }
  {
    HcScriptedServer server([](int fd) {
      HcReadRequest(fd);
      HcSend(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\n{}\r\n0\r\n\r\n");
    });
    auto client = HttpClient::Connect(server.address(), absl::Seconds(10));
    ASSERT_TRUE(client.ok());
    HttpClient::Response r;
    const absl::Status st = (*client)->RoundTrip(HttpClient::Post("h", "/", "{}"), &r);
    EXPECT_TRUE(absl::IsDataLoss(st)) << st;
    EXPECT_FALSE((*client)->open());
  }
}

TEST(HttpClientTest, AServerThatNeverAnswersFailsWithinTheTimeout) {
  HcScriptedServer server([](int fd) {
    HcReadRequest(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  });
  auto client = HttpClient::Connect(server.address(), absl::Milliseconds(300));
  ASSERT_TRUE(client.ok());
  HttpClient::Response r;
  const absl::Time t0 = absl::Now();
  const absl::Status st = (*client)->RoundTrip(HttpClient::Post("h", "/", "{}"), &r);
  EXPECT_TRUE(absl::IsDeadlineExceeded(st)) << st;
  EXPECT_LT(absl::Now() - t0, absl::Seconds(1.2));
}

TEST(HttpClientTest, NothingListeningIsUnavailableNamingTheAddress) {
  // A port just released: nothing listens there.
  std::string address;
  {
    HcScriptedServer server([](int) {});
    address = server.address();
    auto c = HttpClient::Connect(address, absl::Seconds(1));  // lets the server thread finish
  }
  auto client = HttpClient::Connect(address, absl::Seconds(1));
  ASSERT_FALSE(client.ok());
  EXPECT_TRUE(absl::IsUnavailable(client.status())) << client.status();
  EXPECT_NE(client.status().message().find(address), std::string::npos);
  EXPECT_TRUE(absl::IsInvalidArgument(HttpClient::Connect("no-port", absl::Seconds(1)).status()));
}

}  // namespace
}  // namespace brook::bench
