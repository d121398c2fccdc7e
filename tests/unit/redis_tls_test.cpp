// TLS to Redis (control/cluster/redis_tls.h) against Debian's redis-server
// with a TLS port on loopback, certificates made by the test: commands go
// through once the server's certificate verifies for its name; a server
// signed by another CA, a name its certificate does not carry, and a
// missing client certificate where Redis wants one are kTls, said with the
// reason, never a plain-text fallback; AUTH goes over the TLS connection.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "control/cluster/redis_link.h"
#include "control/cluster/redis_router.h"
#include "control/cluster/redis_tls.h"
#include "redis_server.h"
#include "tls_files.h"

namespace sluice::control {
namespace {

using namespace std::chrono_literals;
using Clock = RedisLink::Clock;

constexpr const char* kNeeds = "needs Debian's redis-server (with TLS) and openssl";

class RedisTls : public ::testing::Test {
 protected:
  // A server with a TLS port (and its Unix socket, for the helpers' PING),
  // requirepass, and client certificates wanted or not.
  void start(const char* client_certificates) {  // tls-auth-clients: no, yes or optional
    ASSERT_TRUE(files_.ok()) << kNeeds;
    const std::vector<uint16_t> ports = redis_processes::free_ports(1);
    ASSERT_EQ(ports.size(), 1u);
    port_ = ports[0];
    server_ = std::make_unique<RedisServer>(std::vector<std::string>{
        "--tls-port", std::to_string(port_), "--bind", "127.0.0.1", "--tls-cert-file", files_.file("server.crt"),
        "--tls-key-file", files_.file("server.key"), "--tls-ca-cert-file", files_.file("ca.crt"),
        "--tls-auth-clients", client_certificates, "--requirepass", "tls-secret"});
    ASSERT_TRUE(server_->start()) << kNeeds << ": " << server_->error();
  }
  [[nodiscard]] RedisEndpoint tls_endpoint(const char* host = "127.0.0.1") const { return {host, port_, {}}; }

  RedisLink::Options options(RedisTlsFiles f, std::string password = "tls-secret") {
    std::string error;
    RedisLink::Options o;
    o.connect_timeout = 500ms;
    o.command_timeout = 1000ms;
    o.password = std::move(password);
    o.tls = RedisTlsContext::make(f, error);
    EXPECT_TRUE(o.tls) << error;
    return o;
  }

  test::TlsFiles files_;
  std::unique_ptr<RedisServer> server_;
  uint16_t port_ = 0;
};

TEST_F(RedisTls, CommandsGoThroughOnceTheCertificateVerifiesForItsName) {
  start("no");
  RedisLink link(tls_endpoint(), options({files_.file("ca.crt"), "", "", ""}));
  const std::string_view set[] = {"SET", "sluice:tls", "42"}, get[] = {"GET", "sluice:tls"};
  const RedisLink::Result s = link.command(set, Clock::now());
  ASSERT_EQ(s.error, RedisError::kNone) << s.detail;
  const RedisLink::Result g = link.command(get, Clock::now());
  ASSERT_EQ(g.error, RedisError::kNone) << g.detail;
  EXPECT_EQ(g.reply.text(), "42");
  // One connection for every command: no handshake (nor AUTH) per command.
  EXPECT_EQ(link.connects(), 1u);
  // A big reply comes in several TLS records.
  const std::string big(200 * 1024, 'x');
  const std::string_view set_big[] = {"SET", "sluice:big", big}, get_big[] = {"GET", "sluice:big"};
  ASSERT_EQ(link.command(set_big, Clock::now()).error, RedisError::kNone);
  EXPECT_EQ(link.command(get_big, Clock::now()).reply.text().size(), big.size());
  EXPECT_EQ(link.connects(), 1u);
  // The name given in place of the endpoint's host (a cluster's nodes by address, one certificate).
  RedisLink named(tls_endpoint(), options({files_.file("ca.crt"), "", "", "redis.test"}));
  EXPECT_EQ(named.command(get, Clock::now()).error, RedisError::kNone);
}

TEST_F(RedisTls, AServerSignedByAnotherCaIsRefusedWithTheReason) {
  start("no");
  RedisLink link(tls_endpoint(), options({files_.file("other-ca.crt"), "", "", ""}));
  const std::string_view ping[] = {"PING"};
  const RedisLink::Result r = link.command(ping, Clock::now());
  EXPECT_EQ(r.error, RedisError::kTls);
  EXPECT_NE(r.detail.find("TLS handshake failed: the server's certificate: "), std::string::npos) << r.detail;
  EXPECT_FALSE(link.connected());
  EXPECT_EQ(link.command(ping, Clock::now()).error, RedisError::kBackingOff);
}

TEST_F(RedisTls, ANameTheCertificateDoesNotCarryIsRefused) {
  start("no");
  RedisLink link(tls_endpoint(), options({files_.file("ca.crt"), "", "", "elsewhere.test"}));
  const std::string_view ping[] = {"PING"};
  const RedisLink::Result r = link.command(ping, Clock::now());
  EXPECT_EQ(r.error, RedisError::kTls);
  EXPECT_NE(r.detail.find("elsewhere.test"), std::string::npos) << r.detail;
}

TEST_F(RedisTls, AClientCertificateWhereRedisWantsOne) {
  start("yes");
  const std::string_view ping[] = {"PING"};
  RedisLink without(tls_endpoint(), options({files_.file("ca.crt"), "", "", ""}));
  const RedisLink::Result refused = without.command(ping, Clock::now());
  // Under TLS 1.3 the refusal comes after the handshake, as an alert or a
  // reset: either way kTls, saying what the server wanted.
  EXPECT_EQ(refused.error, RedisError::kTls) << refused.detail;
  EXPECT_NE(refused.detail.find("the server wants a client certificate"), std::string::npos) << refused.detail;
  RedisLink with(tls_endpoint(),
                 options({files_.file("ca.crt"), files_.file("client.crt"), files_.file("client.key"), ""}));
  const RedisLink::Result ok = with.command(ping, Clock::now());
  EXPECT_EQ(ok.error, RedisError::kNone) << ok.detail;
}

// A plain-text Redis waits for a command line that a TLS hello never
// ends: the handshake times out, said as such, and no command is ever sent
// in plain text.
TEST_F(RedisTls, APlainTextServerIsNeverSpokenToInPlainText) {
  ASSERT_TRUE(files_.ok()) << kNeeds;
  const std::vector<uint16_t> ports = redis_processes::free_ports(1);
  ASSERT_EQ(ports.size(), 1u);
  RedisServer plain({"--port", std::to_string(ports[0]), "--bind", "127.0.0.1"});
  ASSERT_TRUE(plain.start()) << kNeeds << ": " << plain.error();
  // The PINGs it has answered (the helper's, at start).
  const auto pings = [&plain] {
    const RedisLink::Result stats = redis_processes::query(plain.endpoint(), {"INFO", "commandstats"});
    const std::string_view text = stats.reply.text();
    const size_t at = text.find("cmdstat_ping:calls=");
    return at == std::string_view::npos ? std::string("0") : std::string(text.substr(at, text.find(',', at) - at));
  };
  const std::string before = pings();
  RedisLink link(RedisEndpoint{"127.0.0.1", ports[0], {}}, options({files_.file("ca.crt"), "", "", ""}));
  const std::string_view ping[] = {"PING"};
  const RedisLink::Result r = link.command(ping, Clock::now());
  EXPECT_EQ(r.error, RedisError::kUnreachable) << r.detail;
  EXPECT_NE(r.detail.find("TLS handshake failed: no TLS answer within the command timeout"), std::string::npos)
      << r.detail;
  EXPECT_FALSE(link.connected());
  // The server never ran our PING.
  EXPECT_EQ(pings(), before);
}

TEST_F(RedisTls, AnOptionalClientCertificateMayBeLeftOut) {
  start("optional");
  RedisLink without(tls_endpoint(), options({files_.file("ca.crt"), "", "", ""}));
  const std::string_view ping[] = {"PING"};
  const RedisLink::Result r = without.command(ping, Clock::now());
  EXPECT_EQ(r.error, RedisError::kNone) << r.detail;
}

TEST_F(RedisTls, AuthGoesOverTlsAndAWrongPasswordIsStillAnAuthError) {
  start("no");
  RedisLink wrong(tls_endpoint(), options({files_.file("ca.crt"), "", "", ""}, "not-it"));
  const std::string_view ping[] = {"PING"};
  EXPECT_EQ(wrong.command(ping, Clock::now()).error, RedisError::kAuth);
  RedisRouter router({tls_endpoint()}, options({files_.file("ca.crt"), "", "", ""}));
  const RedisLink::Result probe = router.probe(Clock::now());
  EXPECT_EQ(probe.error, RedisError::kNone) << probe.detail;
}

TEST(RedisTlsFiles, FilesThatCannotBeLoadedAreSaidAtOnce) {
  std::string error;
  EXPECT_FALSE(RedisTlsContext::make({"/nonexistent/ca.crt", "", "", ""}, error));
  EXPECT_NE(error.find("cluster tls ca_file /nonexistent/ca.crt: cannot be loaded"), std::string::npos) << error;
  test::TlsFiles files;
  ASSERT_TRUE(files.ok()) << kNeeds;
  error.clear();
  EXPECT_FALSE(RedisTlsContext::make({files.file("ca.crt"), files.file("client.crt"), files.file("server.key"), ""},
                                     error));
  EXPECT_NE(error.find("is not cert_file's key"), std::string::npos) << error;
}

}  // namespace
}  // namespace sluice::control
