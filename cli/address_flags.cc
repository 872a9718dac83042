#include "cli/address_flags.h"

#include <cctype>

namespace brook::cli {

std::string ListenAddressProblem(const std::string& address) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos) {
    return "want HOST:PORT, e.g. 127.0.0.1:7000 or 0.0.0.0:0 (port 0: any free port)";
  }
  const std::string host = address.substr(0, colon), port = address.substr(colon + 1);
  if (host.empty() || host == "[]")
    return "the host before ':' is empty (e.g. 127.0.0.1 or 0.0.0.0)";
  if (host.find(':') != std::string::npos && (host.front() != '[' || host.back() != ']')) {
    return "an IPv6 host goes in brackets, e.g. [::1]:7000";
  }
  if (port.empty()) return "the port after ':' is empty (0: any free port)";
  if (port.size() > 5) return "port " + port + " is not in [0, 65535]";
  for (char c : port) {
    if (!std::isdigit(static_cast<unsigned char>(c))) {
      return "port " + port + " is not a number in [0, 65535]";
    }
  }
  if (std::stoi(port) > 65535) return "port " + port + " is not in [0, 65535]";
  return "";
}

CLI::Validator ListenAddress() {
  return CLI::Validator(
      [](std::string& value) {
        const std::string why = ListenAddressProblem(value);
        return why.empty() ? std::string() : "\"" + value + "\": " + why;
      },
      "HOST:PORT");
}

CLI::Validator ListenAddressOrEmpty() {
  return CLI::Validator(
      [](std::string& value) {
        if (value.empty()) return std::string();
        const std::string why = ListenAddressProblem(value);
        return why.empty() ? std::string() : "\"" + value + "\": " + why;
      },
      "HOST:PORT or empty");
}

}  // namespace brook::cli
