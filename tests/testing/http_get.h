// A minimal HTTP/1.0 client over a loopback socket, for scraping /metrics in
// tests without an HTTP library, and a wrapper around `promtool check
// metrics`.
#pragma once

#include <optional>
#include <string>

namespace brook::testing {

struct HttpResponse {
  int status = 0;       // e.g. 200
  std::string headers;  // raw header block
  std::string body;
};

// GET http://host:port/path. nullopt (with *error) on connect/IO failure or
// after `timeout_ms`. host must be a numeric IPv4 address.
std::optional<HttpResponse> HttpGet(const std::string& host, int port, const std::string& path,
                                    int timeout_ms, std::string* error);
// Any method with a body (sent with Content-Length unless GET), e.g. a
// POST of a predict request.
std::optional<HttpResponse> HttpRequest(const std::string& host, int port,
                                        const std::string& method, const std::string& path,
                                        const std::string& body, int timeout_ms,
                                        std::string* error);
// Same, with "host:port" in one string.
std::optional<HttpResponse> HttpGet(const std::string& address, const std::string& path,
                                    int timeout_ms, std::string* error);

// The value of one series ("name" or "name{label=\"v\",...}", exactly as
// the page writes it) on the /metrics page at `metrics_address`; nullopt
// when the page cannot be fetched (with *error) or has no such series.
std::optional<double> ScrapeMetric(const std::string& metrics_address, const std::string& series,
                                   std::string* error = nullptr);

// Path of `promtool` on $PATH, or empty if it is not installed.
std::string FindPromtool();

// Runs `promtool check metrics` on `exposition`. Returns its exit code and
// puts its output in *output. REQUIRES: !FindPromtool().empty().
int PromtoolCheckMetrics(const std::string& exposition, std::string* output);

}  // namespace brook::testing
