#include "tests/testing/test_pki.h"

#include <gtest/gtest.h>

namespace brook::testing {

bool TestPki::Run(const std::string& shell_command) {
  const CommandResult r =
      RunCommand({"/bin/sh", "-c", "cd '" + dir_.path() + "' && " + shell_command}, 60);
  if (r.exit_code != 0) {
    ADD_FAILURE() << "openssl step failed (" << r.exit_code << "): " << shell_command << "\n"
                  << r.output;
    return false;
  }
  return true;
}

TestPki::TestPki() {
  // EC P-256 keys: fast to make (RSA 2048 takes ~100 ms each). Certificates
  // carry the extensions gRPC's TLS stack checks: CA:TRUE on the CAs, SANs
  // on the leaves (the CN alone is not matched against the host).
  const std::string key = "openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 -out ";
  const std::string ca = [&](const std::string& name, const std::string& cn) {
    return key + name + ".key && openssl req -x509 -new -key " + name +
           ".key -sha256 -days 2 -subj '/CN=" + cn +
           "' -addext basicConstraints=critical,CA:TRUE -addext "
           "keyUsage=critical,keyCertSign,cRLSign -out " +
           name + ".crt";
  }("ca", "brook test CA");
  auto leaf = [&](const std::string& name, const std::string& signer, const std::string& cn,
                  const std::string& ext) {
    return key + name + ".key && openssl req -new -key " + name + ".key -subj '/CN=" + cn +
           "' -out " + name + ".csr && printf '" + ext + "' > " + name +
           ".ext && openssl x509 -req -in " + name + ".csr -CA " + signer + ".crt -CAkey " +
           signer + ".key -CAcreateserial -days 2 -sha256 -extfile " + name + ".ext -out " + name +
           ".crt";
  };
  const std::string rogue_ca =
      key +
      "rogue-ca.key && openssl req -x509 -new -key rogue-ca.key -sha256 -days 2 -subj "
      "'/CN=rogue CA' -addext basicConstraints=critical,CA:TRUE -addext "
      "keyUsage=critical,keyCertSign,cRLSign -out rogue-ca.crt";
  ok_ = Run(ca) &&
        Run(leaf("server", "ca", "brook-server",
                 "subjectAltName=IP:127.0.0.1,DNS:localhost\\nextendedKeyUsage=serverAuth,"
                 "clientAuth\\n")) &&
        Run(leaf("client", "ca", "brook-client", "extendedKeyUsage=clientAuth\\n")) &&
        Run(rogue_ca) &&
        Run(leaf("rogue-client", "rogue-ca", "brook-client", "extendedKeyUsage=clientAuth\\n"));
}

}  // namespace brook::testing
