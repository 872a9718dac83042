#include "serving/http/http_server.h"

#include <atomic>
#include <chrono>
#include <optional>
#include <thread>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace brook::serving {

namespace net = boost::asio;
namespace beast = boost::beast;
namespace http = beast::http;
using tcp = net::ip::tcp;

namespace {

std::string_view View(beast::string_view s) { return {s.data(), s.size()}; }

// {"error": message}, escaped as JSON needs (no JSON library down here).
std::string ErrorJson(std::string_view message) {
  std::string out = "{\"error\": \"";
  for (char c : message) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (static_cast<unsigned char>(c) < 0x20) {
      out += absl::StrFormat("\\u%04x", static_cast<unsigned char>(c));
    } else {
      out += c;
    }
  }
  return out + "\"}";
}

}  // namespace

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  net::io_context ioc;
  tcp::acceptor acceptor{ioc};
  std::vector<std::thread> threads;
  int port = 0;
  // Requests read whose reply is not yet written: the destructor lets them
  // finish (a SIGTERM drain) before stopping the threads.
  std::atomic<int> in_flight{0};

  void Accept();
};

namespace {

class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, HttpServer::Impl* server)
      : stream_(std::move(socket)), server_(server) {}

  void Start() {
    net::dispatch(stream_.get_executor(), [self = shared_from_this()] { self->Read(); });
  }

 private:
  void Read() {
    parser_.emplace();
    parser_->body_limit(server_->options.max_body_bytes);
    parser_->header_limit(64 << 10);
    stream_.expires_after(std::chrono::seconds(server_->options.idle_timeout_seconds));
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return Write({413,
                    ErrorJson(absl::StrCat("request body larger than the limit of ",
                                           server_->options.max_body_bytes,
                                           " bytes (brook serve --max-request-bytes)")),
                    {}},
                   /*close=*/true);
    }
    if (ec && ec.category() == http::make_error_code(http::error::bad_method).category() &&
        ec != http::error::end_of_stream && ec != http::error::partial_message) {
      return Write({400, ErrorJson(absl::StrCat("malformed HTTP request: ", ec.message())), {}},
                   /*close=*/true);
    }
    if (ec) return Close();  // closed, timed out, reset
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    stream_.expires_never();
    read_done_ = absl::Now();
    server_->in_flight.fetch_add(1);
    counted_ = true;
    server_->handler(View(req.method_string()), View(req.target()), std::move(req.body()),
                     [self = shared_from_this()](HttpReply reply) {
                       net::post(self->stream_.get_executor(),
                                 [self, reply = std::move(reply)]() mutable {
                                   self->Write(std::move(reply), !self->keep_alive_);
                                 });
                     });
  }

  void Write(HttpReply reply, bool close) {
    auto res = std::make_shared<http::response<http::string_body>>(
        static_cast<http::status>(reply.status), version_);
    res->set(http::field::server, "brook-serve");
    res->set(http::field::content_type, "application/json");
    for (const auto& [name, value] : reply.headers) res->set(name, value);
    res->keep_alive(!close);
    res->body() = std::move(reply.body);
    res->prepare_payload();
    const int status = reply.status;
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, status](beast::error_code ec, size_t) {
                        if (self->counted_) {
                          self->counted_ = false;
                          self->server_->in_flight.fetch_sub(1);
                        }
                        if (self->server_->options.on_reply) {
                          self->server_->options.on_reply(
                              status, absl::ToDoubleSeconds(absl::Now() - self->read_done_));
                        }
                        if (ec || !res->keep_alive()) return self->Close();
                        self->Read();
                      });
  }

  void Close() {
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl* server_;
  bool keep_alive_ = true;
  bool counted_ = false;  // this request is in server_->in_flight
  unsigned version_ = 11;
  absl::Time read_done_;
};

}  // namespace

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    if (!acceptor.is_open()) return;
    if (!ec) {
      beast::error_code ignored;
      socket.set_option(tcp::no_delay(true), ignored);  // a reply is one small write
      std::make_shared<Session>(std::move(socket), this)->Start();
    }
    Accept();
  });
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              HttpServerOptions options,
                                                              Handler handler) {
  const size_t colon = address.rfind(':');
  int port = -1;
  if (colon == std::string::npos || !absl::SimpleAtoi(address.substr(colon + 1), &port) ||
      port < 0 || port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP address \"", address, "\": expected HOST:PORT, e.g. 127.0.0.1:8501"));
  }
  std::string host = address.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host == "localhost" || host.empty()) host = "127.0.0.1";
  beast::error_code ec;
  const net::ip::address ip = net::ip::make_address(host, ec);
  if (ec) {
    return absl::InvalidArgumentError(
        absl::StrCat("HTTP address \"", address, "\": \"", host, "\" is not an IP address"));
  }
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->handler = std::move(handler);
  const tcp::endpoint endpoint(ip, static_cast<uint16_t>(port));
  impl->acceptor.open(endpoint.protocol(), ec);
  if (!ec) impl->acceptor.set_option(net::socket_base::reuse_address(true), ec);
  if (!ec) impl->acceptor.bind(endpoint, ec);
  if (!ec) impl->acceptor.listen(net::socket_base::max_listen_connections, ec);
  if (ec) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen for HTTP on ", address, ": ", ec.message()));
  }
  impl->port = impl->acceptor.local_endpoint().port();
  impl->Accept();
  const int threads = impl->options.threads < 1 ? 1 : impl->options.threads;
  for (int i = 0; i < threads; ++i) {
    impl->threads.emplace_back([io = &impl->ioc] { io->run(); });
  }
  return std::unique_ptr<HttpServer>(new HttpServer(std::move(impl)));
}

HttpServer::HttpServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

HttpServer::~HttpServer() {
  Shutdown();
  const absl::Time give_up = absl::Now() + absl::Seconds(5);
  while (impl_->in_flight.load() > 0 && absl::Now() < give_up)
    absl::SleepFor(absl::Milliseconds(5));
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Shutdown() {
  net::post(impl_->ioc, [impl = impl_.get()] {
    beast::error_code ec;
    impl->acceptor.close(ec);
  });
}

}  // namespace brook::serving
