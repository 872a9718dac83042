// A throwaway public-key infrastructure for TLS tests, made with the real
// `openssl` command line: a CA, a server certificate for 127.0.0.1 and
// localhost (usable as a client certificate too, as a node that both serves
// and dials needs), a client-only certificate from the same CA, and a second, unrelated
// CA with a client certificate of its own (one a server must refuse).
#pragma once

#include <string>

#include "tests/testing/test_util.h"

namespace brook::testing {

class TestPki {
 public:
  // Writes every file into a fresh temporary directory; fails the current
  // test (ADD_FAILURE) and leaves ok() false if openssl fails.
  TestPki();
  bool ok() const { return ok_; }

  std::string ca_cert() const { return dir_.Join("ca.crt"); }
  std::string server_cert() const { return dir_.Join("server.crt"); }
  std::string server_key() const { return dir_.Join("server.key"); }
  std::string client_cert() const { return dir_.Join("client.crt"); }
  std::string client_key() const { return dir_.Join("client.key"); }
  // Signed by another CA: valid-looking, but not trusted by ca_cert().
  std::string rogue_ca_cert() const { return dir_.Join("rogue-ca.crt"); }
  std::string rogue_client_cert() const { return dir_.Join("rogue-client.crt"); }
  std::string rogue_client_key() const { return dir_.Join("rogue-client.key"); }
  std::string Join(const std::string& name) const { return dir_.Join(name); }

 private:
  bool Run(const std::string& shell_command);

  TempDir dir_;
  bool ok_ = false;
};

}  // namespace brook::testing
