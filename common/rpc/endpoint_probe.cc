#include "common/rpc/endpoint_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>
#include <optional>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"

namespace brook::rpc {
namespace {

// The HTTP/2 client connection preface, then an empty SETTINGS frame.
constexpr char kPreface[] = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n";
constexpr unsigned char kEmptySettings[] = {0, 0, 0, 4, 0, 0, 0, 0, 0};

std::string Preface() {
  return std::string(kPreface) +
         std::string(reinterpret_cast<const char*>(kEmptySettings), sizeof(kEmptySettings));
}

struct HostPort {
  std::string host;
  std::string port;
};

// "host:port", "[v6]:port", optionally behind gRPC's "dns:///" or "ipv4:".
std::optional<HostPort> Split(std::string address) {
  absl::string_view a = address;
  absl::ConsumePrefix(&a, "dns:///");
  absl::ConsumePrefix(&a, "ipv4:");
  absl::ConsumePrefix(&a, "ipv6:");
  const size_t colon = a.rfind(':');
  if (colon == absl::string_view::npos || colon == 0) return std::nullopt;
  absl::string_view host = a.substr(0, colon);
  const absl::string_view port = a.substr(colon + 1);
  int port_number = 0;
  if (!absl::SimpleAtoi(port, &port_number) || port_number <= 0 || port_number > 65535) {
    return std::nullopt;
  }
  if (absl::ConsumePrefix(&host, "[") && !absl::ConsumeSuffix(&host, "]")) return std::nullopt;
  if (host.empty() || absl::StrContains(host, "/")) return std::nullopt;
  return HostPort{std::string(host), std::string(port)};
}

class Fd {
 public:
  explicit Fd(int fd = -1) : fd_(fd) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

int MillisLeft(absl::Time deadline) {
  const int64_t ms = absl::ToInt64Milliseconds(deadline - absl::Now());
  return ms <= 0 ? 0 : static_cast<int>(std::min<int64_t>(ms, 60000));
}

// A connected blocking socket whose reads and writes time out at
// `deadline`, or fd -1 with *transport and *detail saying why.
int Connect(const HostPort& hp, absl::Time deadline, Transport* transport, std::string* detail) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(hp.host.c_str(), hp.port.c_str(), &hints, &found); rc != 0) {
    *transport = Transport::kUnresolved;
    *detail = gai_strerror(rc);
    return -1;
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> list(found, &freeaddrinfo);
  *transport = Transport::kNoConnect;
  *detail = "no address";
  for (addrinfo* ai = list.get(); ai != nullptr; ai = ai->ai_next) {
    const int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) continue;
    const int flags = fcntl(fd, F_GETFL, 0);
    fcntl(fd, F_SETFL, flags | O_NONBLOCK);
    int rc = connect(fd, ai->ai_addr, ai->ai_addrlen);
    int err = rc == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      rc = poll(&p, 1, MillisLeft(deadline));
      if (rc <= 0) {
        err = ETIMEDOUT;
      } else {
        socklen_t len = sizeof(err);
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      }
    }
    if (err == 0) {
      fcntl(fd, F_SETFL, flags);
      const int64_t ms = std::max(1, MillisLeft(deadline));
      timeval tv{static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
      setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
      setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
      return fd;
    }
    close(fd);
    *transport = err == ECONNREFUSED ? Transport::kRefused : Transport::kNoConnect;
    *detail = std::strerror(err);
    if (err == ECONNREFUSED) continue;  // another address of the name may listen
  }
  return -1;
}

Transport Classify(const std::string& bytes) {
  if (absl::StartsWith(bytes, "HTTP/")) return Transport::kHttp1;
  const auto b = [&](size_t i) { return static_cast<unsigned char>(bytes[i]); };
  // A TLS record: content type alert (21) or handshake (22), version 3.x.
  if (bytes.size() >= 2 && (b(0) == 21 || b(0) == 22) && b(1) == 3) return Transport::kTls;
  // An HTTP/2 frame header: 3 bytes length, type SETTINGS (4) or GOAWAY (7).
  if (bytes.size() >= 4 && (b(3) == 4 || b(3) == 7)) return Transport::kHttp2;
  return Transport::kOther;
}

// OpenSSL writes with write(2): a server that hung up would raise SIGPIPE
// and end the process. Blocked on this thread for the probe; one raised
// meanwhile is taken before the old mask returns.
class ScopedNoSigpipe {
 public:
  ScopedNoSigpipe() {
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &old_);
  }
  ~ScopedNoSigpipe() {
    const timespec zero{0, 0};
    while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &old_, nullptr);
  }
  ScopedNoSigpipe(const ScopedNoSigpipe&) = delete;
  ScopedNoSigpipe& operator=(const ScopedNoSigpipe&) = delete;

 private:
  sigset_t pipe_;
  sigset_t old_;
};

struct SslCtxFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
};
struct SslFree {
  void operator()(SSL* s) const { SSL_free(s); }
};

// What the message callback saw of the handshake.
struct Seen {
  bool certificate_request = false;
  std::string alert;
};

void OnMessage(int write_p, int /*version*/, int content_type, const void* buf, size_t len,
               SSL* /*ssl*/, void* arg) {
  if (write_p != 0 || arg == nullptr) return;
  auto* seen = static_cast<Seen*>(arg);
  const auto* b = static_cast<const unsigned char*>(buf);
  if (content_type == SSL3_RT_HANDSHAKE && len > 0 && b[0] == SSL3_MT_CERTIFICATE_REQUEST) {
    seen->certificate_request = true;
  }
  if (content_type == SSL3_RT_ALERT && len >= 2 && b[0] == 2 && seen->alert.empty()) {
    seen->alert = SSL_alert_desc_string_long(b[1]);
  }
}

std::string OpenSslErrors() {
  std::string out;
  while (unsigned long e = ERR_get_error()) {
    char buf[256];
    ERR_error_string_n(e, buf, sizeof(buf));
    if (!out.empty()) out += "; ";
    out += buf;
  }
  return out;
}

}  // namespace

const char* TransportName(Transport t) {
  switch (t) {
    case Transport::kUnparsed:
      return "not host:port";
    case Transport::kUnresolved:
      return "host not found";
    case Transport::kRefused:
      return "connection refused";
    case Transport::kNoConnect:
      return "no connection";
    case Transport::kSilent:
      return "no reply";
    case Transport::kClosed:
      return "closed without a reply";
    case Transport::kHttp1:
      return "HTTP/1";
    case Transport::kHttp2:
      return "HTTP/2";
    case Transport::kTls:
      return "TLS";
    case Transport::kOther:
      return "unknown protocol";
  }
  return "?";
}

PlaintextProbe ProbePlaintext(const std::string& address, absl::Duration timeout) {
  PlaintextProbe out;
  std::optional<HostPort> hp = Split(address);
  if (!hp.has_value()) return out;
  const absl::Time deadline = absl::Now() + timeout;
  Fd fd(Connect(*hp, deadline, &out.transport, &out.detail));
  if (fd.get() < 0) return out;
  const std::string preface = Preface();
  if (send(fd.get(), preface.data(), preface.size(), MSG_NOSIGNAL) < 0) {
    out.transport = Transport::kClosed;
    out.detail = std::strerror(errno);
    return out;
  }
  char buf[64];
  const ssize_t n = recv(fd.get(), buf, sizeof(buf), 0);
  if (n > 0) {
    const std::string got(buf, static_cast<size_t>(n));
    out.transport = Classify(got);
    out.detail = absl::CHexEscape(got.substr(0, 16));
  } else if (n == 0 || errno == ECONNRESET || errno == EPIPE) {
    out.transport = Transport::kClosed;
    out.detail = n == 0 ? "EOF" : std::strerror(errno);
  } else {
    out.transport = Transport::kSilent;
    out.detail = std::strerror(errno);
  }
  return out;
}

TlsProbe ProbeTls(const std::string& address, const security::TlsOptions& tls,
                  absl::Duration timeout) {
  TlsProbe out;
  std::optional<HostPort> hp = Split(address);
  if (!hp.has_value()) return out;
  std::unique_ptr<SSL_CTX, SslCtxFree> ctx(SSL_CTX_new(TLS_client_method()));
  if (ctx == nullptr) {
    out.transport = Transport::kOther;
    out.detail = OpenSslErrors();
    return out;
  }
  // Verification is judged after the handshake (server_verified), so a
  // probe with an untrusted server still learns what else went wrong.
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  if (!tls.ca_file.empty()) {
    SSL_CTX_load_verify_locations(ctx.get(), tls.ca_file.c_str(), nullptr);
  }
  if (!tls.cert_file.empty() && !tls.key_file.empty()) {
    SSL_CTX_use_certificate_chain_file(ctx.get(), tls.cert_file.c_str());
    SSL_CTX_use_PrivateKey_file(ctx.get(), tls.key_file.c_str(), SSL_FILETYPE_PEM);
  }
  static constexpr unsigned char kAlpn[] = {2, 'h', '2'};
  SSL_CTX_set_alpn_protos(ctx.get(), kAlpn, sizeof(kAlpn));
  ERR_clear_error();

  const absl::Time deadline = absl::Now() + timeout;
  ScopedNoSigpipe no_sigpipe;
  Fd fd(Connect(*hp, deadline, &out.transport, &out.detail));
  if (fd.get() < 0) return out;
  std::unique_ptr<SSL, SslFree> ssl(SSL_new(ctx.get()));
  Seen seen;
  SSL_set_msg_callback(ssl.get(), &OnMessage);
  SSL_set_msg_callback_arg(ssl.get(), &seen);
  const std::string name = tls.server_name.empty() ? hp->host : tls.server_name;
  in6_addr ip{};
  const bool is_ip =
      inet_pton(AF_INET, name.c_str(), &ip) == 1 || inet_pton(AF_INET6, name.c_str(), &ip) == 1;
  X509_VERIFY_PARAM* param = SSL_get0_param(ssl.get());
  if (is_ip) {
    X509_VERIFY_PARAM_set1_ip_asc(param, name.c_str());
  } else {
    SSL_set_tlsext_host_name(ssl.get(), name.c_str());
    X509_VERIFY_PARAM_set1_host(param, name.c_str(), 0);
  }
  SSL_set_fd(ssl.get(), fd.get());
  const int connected = SSL_connect(ssl.get());
  const bool got_server_hello = SSL_get0_peer_certificate(ssl.get()) != nullptr;
  out.asked_for_client_cert = seen.certificate_request;
  if (connected != 1) {
    out.detail = OpenSslErrors();
    out.server_alert = seen.alert;
    // A server that sent a certificate or an alert speaks TLS.
    out.transport = got_server_hello || !seen.alert.empty() ? Transport::kTls : Transport::kClosed;
    if (!got_server_hello && seen.alert.empty() && absl::StrContains(out.detail, "wrong version")) {
      out.transport = Transport::kOther;
    }
    return out;
  }
  out.transport = Transport::kTls;
  if (!tls.ca_file.empty()) {
    const long verify = SSL_get_verify_result(ssl.get());
    out.server_verified = verify == X509_V_OK;
    if (!out.server_verified) out.verify_error = X509_verify_cert_error_string(verify);
  }
  const std::string preface = Preface();
  char buf[64];
  if (SSL_write(ssl.get(), preface.data(), static_cast<int>(preface.size())) > 0 &&
      SSL_read(ssl.get(), buf, sizeof(buf)) > 0) {
    out.accepted = true;
  } else {
    out.detail = OpenSslErrors();
  }
  out.server_alert = seen.alert;
  out.asked_for_client_cert = seen.certificate_request;
  return out;
}

}  // namespace brook::rpc
