// The PROXY protocol header as net::read_proxy_header reads it: v1 and v2
// with the addresses they name, the LOCAL and UNKNOWN forms, headers cut
// short (incomplete, never a guess), and the malformed ones a strict
// reader refuses; bytes that are not a header at all (HTTP, WebDAV's
// PROPFIND) are kNone.
#include <gtest/gtest.h>

#include <string>

#include "net/proxy_header.h"

namespace sluice::test {
namespace {

using net::ProxyHeader;
using Status = ProxyHeader::Status;

ProxyHeader read(const std::string& s) { return net::read_proxy_header({s.data(), s.size()}); }

const std::string kSig("\r\n\r\n\0\r\nQUIT\n", 12);

// A v2 header: command (0 LOCAL, 1 PROXY), family byte, the address block
// and `tlv` extra bytes.
std::string v2(uint8_t command, uint8_t family, const std::string& block, size_t tlv = 0) {
  std::string h = kSig;
  h += static_cast<char>(0x20 | command);
  h += static_cast<char>(family);
  const size_t len = block.size() + tlv;
  h += static_cast<char>(len >> 8);
  h += static_cast<char>(len & 0xff);
  h += block;
  h += std::string(tlv, '\x01');
  return h;
}

std::string v4_block() {
  return std::string("\xc6\x12\x07\x09" "\xc6\x13\x00\x01" "\x9c\x40" "\x00\x50", 12);  // 198.18.7.9:40000 -> 198.19.0.1:80
}

TEST(ProxyHeader, V1NamesTheClient) {
  const std::string head = "PROXY TCP4 198.18.7.9 198.19.0.1 40000 80\r\n";
  const ProxyHeader h = read(head + "GET / HTTP/1.1\r\n");
  ASSERT_EQ(h.status, Status::kRelayed);
  EXPECT_EQ(h.version, 1);
  EXPECT_EQ(h.length, head.size());
  EXPECT_EQ(h.source, *net::parse_ip("198.18.7.9"));
  EXPECT_EQ(h.source_port, 40000);
  const ProxyHeader six = read("PROXY TCP6 2001:db8::7 2001:db8::1 1 443\r\n");
  ASSERT_EQ(six.status, Status::kRelayed);
  EXPECT_EQ(six.source, *net::parse_ip("2001:db8::7"));
  EXPECT_EQ(read("PROXY UNKNOWN\r\n").status, Status::kLocal);
  EXPECT_EQ(read("PROXY UNKNOWN ffff::1 ffff::2 1 2\r\n").status, Status::kLocal);
}

TEST(ProxyHeader, V2NamesTheClient) {
  const std::string head = v2(1, 0x11, v4_block());
  const ProxyHeader h = read(head + "GET / HTTP/1.1\r\n");
  ASSERT_EQ(h.status, Status::kRelayed);
  EXPECT_EQ(h.version, 2);
  EXPECT_EQ(h.length, head.size());
  EXPECT_EQ(h.source, *net::parse_ip("198.18.7.9"));
  EXPECT_EQ(h.source_port, 40000);
  // TLVs after the addresses are part of the header.
  EXPECT_EQ(read(v2(1, 0x11, v4_block(), 40)).length, 16u + 12u + 40u);
  std::string six(36, '\0');
  six[0] = '\x20', six[1] = '\x01', six[2] = '\x0d', six[3] = '\xb8', six[15] = '\x07';
  six[32] = '\x30', six[33] = '\x39';
  const ProxyHeader h6 = read(v2(1, 0x21, six));
  ASSERT_EQ(h6.status, Status::kRelayed);
  EXPECT_EQ(h6.source, *net::parse_ip("2001:db8::7"));
  EXPECT_EQ(h6.source_port, 12345);
  EXPECT_EQ(read(v2(0, 0x00, "")).status, Status::kLocal);
  EXPECT_EQ(read(v2(0, 0x11, v4_block())).status, Status::kLocal);
}

TEST(ProxyHeader, CutShortIsIncompleteAtEveryLength) {
  for (const std::string& whole : {std::string("PROXY TCP4 198.18.7.9 198.19.0.1 40000 80\r\n"), v2(1, 0x11, v4_block(), 8)}) {
    for (size_t n = 1; n < whole.size(); ++n) {
      EXPECT_EQ(read(whole.substr(0, n)).status, Status::kIncomplete) << n << " of " << whole.size();
    }
    EXPECT_NE(read(whole).status, Status::kIncomplete);
  }
}

TEST(ProxyHeader, NotAHeader) {
  EXPECT_EQ(read("GET / HTTP/1.1\r\n").status, Status::kNone);
  EXPECT_EQ(read("PROPFIND /dav HTTP/1.1\r\n").status, Status::kNone);
  EXPECT_EQ(read("\r\n\r\nGET / HTTP/1.1\r\n").status, Status::kNone);
  EXPECT_EQ(read("").status, Status::kNone);
}

TEST(ProxyHeader, MalformedHeadersAreRefused) {
  for (const char* bad : {
           "PROXY TCP4 198.18.7.9 198.19.0.1 40000 80\n",        // LF alone
           "PROXY TCP4  198.18.7.9 198.19.0.1 40000 80\r\n",     // two spaces
           "PROXY TCP4 198.18.7.9 198.19.0.1 40000 80 \r\n",     // a trailing space
           "PROXY TCP4 198.18.7.9 198.19.0.1 040000 80\r\n",     // a leading zero
           "PROXY TCP4 198.18.7.9 198.19.0.1 65536 80\r\n",      // past 65535
           "PROXY TCP4 2001:db8::7 198.19.0.1 1 80\r\n",         // the wrong family
           "PROXY TCP6 ::ffff:198.18.7.9 2001:db8::1 1 80\r\n",  // an IPv4 client in IPv6 clothing
           "PROXY TCP4 198.018.7.9 198.19.0.1 1 80\r\n",         // not the plain form
           "PROXY UDP4 198.18.7.9 198.19.0.1 1 80\r\n",
           "PROXY TCP4 198.18.7.9 198.19.0.1 1\r\n",             // a field short
           "PROXY UNKNOWNX\r\n",
       }) {
    EXPECT_EQ(read(bad).status, Status::kMalformed) << bad;
  }
  EXPECT_EQ(read("PROXY TCP4 " + std::string(120, '1')).status, Status::kMalformed) << "no CRLF within 107 bytes";
  std::string wrong_version = v2(1, 0x11, v4_block());
  wrong_version[12] = '\x11';
  EXPECT_EQ(read(wrong_version).status, Status::kMalformed);
  EXPECT_EQ(read(v2(2, 0x11, v4_block())).status, Status::kMalformed) << "an unknown command";
  EXPECT_EQ(read(v2(1, 0x12, v4_block())).status, Status::kMalformed) << "UDP";
  EXPECT_EQ(read(v2(1, 0x00, "")).status, Status::kMalformed) << "PROXY with no address";
  EXPECT_EQ(read(v2(1, 0x11, v4_block().substr(0, 8))).status, Status::kMalformed) << "a short address block";
  EXPECT_EQ(read(v2(1, 0x11, v4_block(), 2000)).status, Status::kMalformed) << "past kMaxProxyHeader";
}

}  // namespace
}  // namespace sluice::test
