#include "serving/http/http_server.h"

#include <atomic>
#include <chrono>
#include <future>
#include <optional>
#include <thread>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>
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

class Session;

struct HttpServer::Impl {
  HttpServerOptions options;
  Handler handler;
  net::io_context ioc;
  // Keeps the threads running while no socket operation is pending: a
  // request waiting for its batch has none, and once the acceptor closes
  // (shutdown) nothing else would; its reply must still be written.
  net::executor_work_guard<net::io_context::executor_type> work{ioc.get_executor()};
  tcp::acceptor acceptor{ioc};
  net::steady_timer accept_backoff{ioc};
  std::vector<std::thread> threads;
  int port = 0;
  // Requests whose header arrived and whose reply is not yet written:
  // WaitIdle (a SIGTERM drain) waits for them.
  std::atomic<int> in_flight{0};
  // Connections accepted whose first request header has not been read: a
  // client that connected just before a SIGTERM has usually sent it already.
  std::atomic<int> fresh{0};
  std::atomic<bool> shutting_down{false};
  // A WaitIdle after Shutdown ran: the owner's drain, whose budget the
  // destructor does not add to.
  std::atomic<bool> drained{false};

  void Accept();
  void StartSession(tcp::socket socket);
};

namespace {

bool IsHttpParseError(const beast::error_code& ec) {
  return ec.category() == http::make_error_code(http::error::bad_method).category() &&
         ec != http::error::end_of_stream && ec != http::error::partial_message;
}

}  // namespace

// One connection: read a header (a request starts), maybe answer
// "100 Continue", read the body, hand it to the handler, write its reply,
// and again while the connection is kept alive.
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
    http::async_read_header(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnHeader(ec); });
  }

  void OnHeader(beast::error_code ec) {
    NotFresh();
    if (ec && !IsHttpParseError(ec) && ec != http::error::body_limit) return Close();
    Count();
    read_done_ = absl::Now();
    if (ec) return Refuse(ec);
    const auto& req = parser_->get();
    version_ = req.version();
    if (req.method() == http::verb::post && !parser_->content_length() && !parser_->chunked()) {
      return Write({411, ErrorJson("a POST needs a Content-Length (or chunked) body"), {}},
                   /*close=*/true);
    }
    if (beast::iequals(req[http::field::expect], "100-continue")) {
      // curl waits a second for this before sending a body over 1 MiB.
      auto cont =
          std::make_shared<http::response<http::empty_body>>(http::status::continue_, version_);
      return http::async_write(stream_, *cont,
                               [self = shared_from_this(), cont](beast::error_code ec, size_t) {
                                 if (ec) return self->Close();
                                 self->ReadBody();
                               });
    }
    ReadBody();
  }

  void ReadBody() {
    http::async_read(
        stream_, buffer_, *parser_,
        [self = shared_from_this()](beast::error_code ec, size_t) { self->OnRead(ec); });
  }

  // A request that cannot be read: 413 or 400, then the connection closes.
  void Refuse(beast::error_code ec) {
    if (ec == http::error::body_limit) {
      return Write({413,
                    ErrorJson(absl::StrCat("request body larger than the limit of ",
                                           server_->options.max_body_bytes,
                                           " bytes (brook serve --max-request-bytes)")),
                    {}},
                   /*close=*/true);
    }
    Write({400, ErrorJson(absl::StrCat("malformed HTTP request: ", ec.message())), {}},
          /*close=*/true);
  }

  void OnRead(beast::error_code ec) {
    if (ec == http::error::body_limit || (ec && IsHttpParseError(ec))) return Refuse(ec);
    if (ec) return Close();  // closed, timed out, reset
    http::request<http::string_body> req = parser_->release();
    keep_alive_ = req.keep_alive();
    version_ = req.version();
    stream_.expires_never();
    read_done_ = absl::Now();
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
    res->keep_alive(!close && !server_->shutting_down.load());
    res->body() = std::move(reply.body);
    res->prepare_payload();
    const int status = reply.status;
    stream_.expires_after(std::chrono::seconds(server_->options.idle_timeout_seconds));
    http::async_write(stream_, *res,
                      [self = shared_from_this(), res, status](beast::error_code ec, size_t) {
                        if (self->server_->options.on_reply) {
                          self->server_->options.on_reply(
                              status, absl::ToDoubleSeconds(absl::Now() - self->read_done_));
                        }
                        self->Uncount();
                        if (ec || !res->keep_alive()) return self->Close();
                        self->Read();
                      });
  }

  void Count() {
    if (counted_) return;
    counted_ = true;
    server_->in_flight.fetch_add(1);
  }

  void Uncount() {
    if (!counted_) return;
    counted_ = false;
    server_->in_flight.fetch_sub(1);
  }

  void NotFresh() {
    if (!fresh_) return;
    fresh_ = false;
    server_->fresh.fetch_sub(1);
  }

  void Close() {
    NotFresh();
    Uncount();
    beast::error_code ec;
    stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
    stream_.socket().close(ec);
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  HttpServer::Impl* server_;
  bool keep_alive_ = true;
  bool counted_ = false;  // this request is in server_->in_flight
  bool fresh_ = true;     // counted in server_->fresh
  unsigned version_ = 11;
  absl::Time read_done_;
};

void HttpServer::Impl::StartSession(tcp::socket socket) {
  beast::error_code ignored;
  socket.set_option(tcp::no_delay(true), ignored);  // a reply is one small write
  fresh.fetch_add(1);
  std::make_shared<Session>(std::move(socket), this)->Start();
}

void HttpServer::Impl::Accept() {
  acceptor.async_accept(net::make_strand(ioc), [this](beast::error_code ec, tcp::socket socket) {
    // An accept the reactor completed before Shutdown closed the acceptor
    // still holds a client's request: serve it, or the drain drops it.
    if (!ec) StartSession(std::move(socket));
    if (!acceptor.is_open()) return;
    if (ec) {
      // Out of file descriptors (or another transient error): back off
      // instead of spinning on an accept that fails at once.
      accept_backoff.expires_after(std::chrono::milliseconds(50));
      accept_backoff.async_wait([this](beast::error_code) {
        if (acceptor.is_open()) Accept();
      });
      return;
    }
    Accept();
  });
}

namespace {

absl::StatusOr<tcp::endpoint> ParseEndpoint(const std::string& address) {
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
    return absl::InvalidArgumentError(absl::StrCat("HTTP address \"", address, "\": \"", host,
                                                   "\" is not an IP address (nor localhost)"));
  }
  return tcp::endpoint(ip, static_cast<uint16_t>(port));
}

}  // namespace

absl::Status HttpServer::CheckAddress(const std::string& address) {
  return ParseEndpoint(address).status();
}

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(const std::string& address,
                                                              HttpServerOptions options,
                                                              Handler handler) {
  absl::StatusOr<tcp::endpoint> parsed = ParseEndpoint(address);
  if (!parsed.ok()) return parsed.status();
  const tcp::endpoint endpoint = *parsed;
  beast::error_code ec;
  auto impl = std::make_unique<Impl>();
  impl->options = std::move(options);
  impl->handler = std::move(handler);
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
  if (!impl_->drained.load()) WaitIdle(absl::Seconds(5));
  impl_->work.reset();
  impl_->ioc.stop();
  for (std::thread& t : impl_->threads) t.join();
}

int HttpServer::port() const { return impl_->port; }

void HttpServer::Shutdown() {
  if (impl_->shutting_down.exchange(true)) return;
  std::promise<void> closed;
  net::post(impl_->ioc, [impl = impl_.get(), &closed] {
    // Connections the kernel accepted already hold requests clients sent:
    // take them before closing, so the drain answers them too.
    beast::error_code ec;
    impl->acceptor.non_blocking(true, ec);
    while (!ec) {
      tcp::socket socket(net::make_strand(impl->ioc));
      impl->acceptor.accept(socket, ec);
      if (!ec) impl->StartSession(std::move(socket));
    }
    impl->acceptor.close(ec);
    impl->accept_backoff.cancel();
    closed.set_value();
  });
  closed.get_future().wait();
}

bool HttpServer::WaitIdle(absl::Duration timeout) {
  // Idle = nothing in progress for a while: a request the client already
  // sent on an open connection is read within it. A new connection is
  // waited for a little longer (its request is on its way, or it is a
  // client that connected and sends nothing: not worth more than that).
  if (impl_->shutting_down.load()) impl_->drained.store(true);
  const absl::Time start = absl::Now();
  const absl::Time give_up = start + timeout;
  const absl::Time fresh_grace = start + absl::Seconds(2);
  absl::Time quiet_since = start;
  while (absl::Now() - quiet_since < absl::Milliseconds(200)) {
    if (impl_->in_flight.load() > 0 || (impl_->fresh.load() > 0 && absl::Now() < fresh_grace)) {
      quiet_since = absl::Now();
    }
    if (absl::Now() >= give_up) return false;
    absl::SleepFor(absl::Milliseconds(2));
  }
  return true;
}

}  // namespace brook::serving
