// Certificates for the TLS tests, made by the openssl command (Debian's
// openssl) in a fresh directory removed with the object: a CA, a server
// certificate it signed for 127.0.0.1 and "redis.test", a client
// certificate it signed, and a second CA that signed none of them.
#pragma once

#include <cstdlib>
#include <filesystem>
#include <string>

#include "redis_processes.h"

namespace sluice::test {

class TlsFiles {
 public:
  TlsFiles() : dir_(control::redis_processes::make_dir("sluice-tls")) {
    if (dir_.empty()) return;
    const std::string d = dir_;
    const std::string script =
        "cd '" + d + "' && "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout ca.key -out ca.crt -days 2 -subj /CN=sluice-test-ca && "
        "openssl req -x509 -newkey rsa:2048 -nodes -keyout other-ca.key -out other-ca.crt -days 2 -subj /CN=other-ca && "
        "openssl req -newkey rsa:2048 -nodes -keyout server.key -out server.csr -subj /CN=redis.test && "
        "printf 'subjectAltName=DNS:redis.test,IP:127.0.0.1\\n' > server.ext && "
        "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out server.crt -days 2 "
        "-extfile server.ext && "
        "openssl req -newkey rsa:2048 -nodes -keyout client.key -out client.csr -subj /CN=sluice && "
        "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 2";
    ok_ = std::system(("( " + script + " ) >'" + d + "/openssl.log' 2>&1").c_str()) == 0;
  }
  ~TlsFiles() {
    std::error_code ec;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ec);
  }
  TlsFiles(const TlsFiles&) = delete;
  TlsFiles& operator=(const TlsFiles&) = delete;

  [[nodiscard]] bool ok() const noexcept { return ok_; }
  [[nodiscard]] std::string file(const char* name) const { return dir_ + "/" + name; }

 private:
  std::string dir_;
  bool ok_ = false;
};

}  // namespace sluice::test
