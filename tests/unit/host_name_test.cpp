// Host validation and the key spelling of a host (lib/net/authority.h, and
// HTTP/1's use of it in lib/http/host_name.h), tested directly, so that one
// host spelt several ways never makes several buckets, and a host two
// parsers read apart is never judged as one of them.
#include "http/host_name.h"

#include <gtest/gtest.h>

#include <array>
#include <string>

namespace sluice::http {
namespace {

std::string normalised(std::string_view authority, uint16_t default_port = 80) {
  std::array<char, 64> out{};
  const size_t n = net::normalise_authority(authority, default_port, out);
  return std::string(out.data(), n);
}

TEST(HostName, ValidHosts) {
  for (const std::string_view host :
       {"", "a", "api.example.com", "API.example.com.", "api.example.com:80", "api.example.com:", "a:0", "a:65535",
        "a:00080", "127.0.0.1", "127.0.0.1:8080", "[::1]", "[::1]:443", "[2001:db8::ff00:42:8329]", "[::ffff:1.2.3.4]",
        "a-b.c_d~e", "a!$&'()*+,;=b", "%41pi.example", "xn--bcher-kva.example"}) {
    EXPECT_EQ(validate_host(host), ParseError::kNone) << host;
  }
}

TEST(HostName, InvalidHosts) {
  for (const std::string_view host : {"a b",
                                      "a/b",
                                      "user@a",
                                      "a, b",
                                      "a:xx",
                                      "a:1x",
                                      "a:-1",
                                      "a:+80",
                                      "a:65536",
                                      "a:99999",
                                      "a:000080",
                                      "a:1:2",
                                      ":80",
                                      ":",
                                      "[::1",
                                      "[zz]",
                                      "[::1]x",
                                      "[::1]:x",
                                      "[1.2.3.4]",
                                      "[fe80::1%25eth0]",
                                      "[v1.fe]",
                                      "[]",
                                      "a?b",
                                      "a#b",
                                      "a\"b",
                                      "a<b",
                                      "a%",
                                      "a%4",
                                      "a%zz",
                                      "a\\b",
                                      "a[b",
                                      "a]b",
                                      "\xc3\xa9.example",
                                      "a\tb"}) {
    EXPECT_EQ(validate_host(host), ParseError::kBadHost) << host;
  }
}

TEST(HostName, PortOfAnAuthority) {
  EXPECT_EQ(net::authority_port("a:443"), "443");
  EXPECT_EQ(net::authority_port("a:"), "");
  EXPECT_EQ(net::authority_port("a"), "");
  EXPECT_EQ(net::authority_port("[::1]:8080"), "8080");
  EXPECT_EQ(net::authority_port("[::1]"), "");
}

TEST(HostName, OneSpellingPerHost) {
  for (const std::string_view host :
       {"api.example.com", "API.Example.Com", "api.example.com.", "API.EXAMPLE.COM.", "api.example.com:80",
        "api.example.com:080", "api.example.com:00080", "api.example.com:", "api.example.com.:80", "%61pi.example.com",
        "%41PI.example.com", "api%2Eexample.com"}) {
    EXPECT_EQ(normalised(host), "api.example.com") << host;
  }
  // Another port is another service.
  EXPECT_EQ(normalised("api.example.com:8080"), "api.example.com:8080");
  EXPECT_EQ(normalised("API.example.com.:08080"), "api.example.com:8080");
  EXPECT_EQ(normalised("api.example.com:0"), "api.example.com:0");
  // Only one trailing dot is the fully qualified form.
  EXPECT_EQ(normalised("api.example.com.."), "api.example.com.");
  // An escape of a byte that is not unreserved stays escaped, in one case.
  EXPECT_EQ(normalised("a%2cb"), "a%2Cb");
  EXPECT_EQ(normalised("a,b"), "a,b");
  // IPv6 literals: one text per address.
  EXPECT_EQ(normalised("[::1]"), "[0:0:0:0:0:0:0:1]");
  EXPECT_EQ(normalised("[0:0::1]:80"), "[0:0:0:0:0:0:0:1]");
  EXPECT_EQ(normalised("[::1]:8080"), "[0:0:0:0:0:0:0:1]:8080");
  EXPECT_EQ(normalised("[2001:DB8::1]"), "[2001:db8:0:0:0:0:0:1]");
}

TEST(HostName, DefaultPortFollowsTheScheme) {
  EXPECT_EQ(normalised("api.example.com:443", 443), "api.example.com");
  EXPECT_EQ(normalised("api.example.com:80", 443), "api.example.com:80");
  EXPECT_EQ(normalised("api.example.com:443", 80), "api.example.com:443");

  RequestHead h;
  h.method_kind = Method::kGet;
  h.target = "/x";
  EXPECT_EQ(default_port(h), 80);
  h.target = "https://api.example.com/x";
  h.authority = "api.example.com";
  EXPECT_EQ(default_port(h), 443);
  h.target = "HTTPS://api.example.com/x";
  EXPECT_EQ(default_port(h), 443);
  h.target = "http://api.example.com/x";
  EXPECT_EQ(default_port(h), 80);
  h.method_kind = Method::kConnect;
  h.target = h.authority = "s.example:443";
  EXPECT_EQ(default_port(h), 80);
}

TEST(HostName, NoHostOrNoRoomGivesNothing) {
  EXPECT_EQ(normalised(""), "");
  EXPECT_EQ(normalised(":80"), "");
  EXPECT_EQ(normalised("."), "");
  EXPECT_EQ(normalised("[::1"), "");
  std::array<char, 8> small{};
  EXPECT_EQ(net::normalise_authority("api.example.com", 80, small), 0u);
  EXPECT_EQ(net::normalise_authority("abcdefgh", 80, small), 8u);
  EXPECT_EQ(net::normalise_authority("abcdefgh:8080", 80, small), 0u);
  EXPECT_EQ(net::normalise_authority("abcdefgh.", 80, small), 8u);  // the dot that did not fit is the one removed
}

}  // namespace
}  // namespace sluice::http
