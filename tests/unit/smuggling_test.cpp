// Request smuggling: inputs that two HTTP/1.1 parsers could frame differently
// (CL.TE, TE.CL, TE.TE obfuscations, duplicate lengths, line-ending tricks,
// chunk-size tricks). The appliance must refuse each one with the right kind,
// whole or cut anywhere, and never let a second request out of the first.
#include <gtest/gtest.h>

#include <string>

#include "head_harness.h"
#include "reference_parser.h"

namespace sluice::http {
namespace {

struct Attack {
  const char* name;
  std::string bytes;
  ParseError expected;
};

const std::string kPost = "POST /api/claims HTTP/1.1\r\nHost: api\r\n";

std::vector<Attack> attacks() {
  return {
      // CL.TE and TE.CL: both framings present.
      {"cl_te", kPost + "Content-Length: 13\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nSMUGGLED",
       ParseError::kContentLengthWithTransferEncoding},
      {"te_cl", kPost + "Transfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\n8\r\nSMUGGLED\r\n0\r\n\r\n",
       ParseError::kContentLengthWithTransferEncoding},
      {"te_cl_zero", kPost + "Content-Length: 0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nGET /\r\n0\r\n\r\n",
       ParseError::kContentLengthWithTransferEncoding},
      // TE.TE: obfuscated Transfer-Encoding that one side may not recognise.
      {"te_xchunked", kPost + "Transfer-Encoding: xchunked\r\n\r\n", ParseError::kTransferEncodingNotChunked},
      {"te_space_before_colon", kPost + "Transfer-Encoding : chunked\r\n\r\n", ParseError::kWhitespaceBeforeColon},
      {"te_tab_before_colon", kPost + "Transfer-Encoding\t: chunked\r\n\r\n", ParseError::kWhitespaceBeforeColon},
      {"te_second_line_bogus", kPost + "Transfer-Encoding: chunked\r\nTransfer-Encoding: x\r\n\r\n",
       ParseError::kTransferEncodingNotChunked},
      {"te_quoted", kPost + "Transfer-Encoding: \"chunked\"\r\n\r\n", ParseError::kTransferEncodingNotChunked},
      {"te_chunked_then_identity", kPost + "Transfer-Encoding: chunked, identity\r\n\r\n",
       ParseError::kTransferEncodingNotChunked},
      {"te_identity_then_chunked", kPost + "Transfer-Encoding: identity, chunked\r\n\r\n",
       ParseError::kUnknownTransferCoding},
      {"te_with_parameter", kPost + "Transfer-Encoding: chunked;q=1\r\n\r\n", ParseError::kTransferEncodingNotChunked},
      {"te_truncated", kPost + "Transfer-Encoding: chunk\r\n\r\n", ParseError::kTransferEncodingNotChunked},
      {"te_chunked_twice", kPost + "Transfer-Encoding: chunked, chunked\r\n\r\n", ParseError::kTransferEncodingNotChunked},
      {"te_vertical_tab", kPost + "Transfer-Encoding: \x0b" "chunked\r\n\r\n", ParseError::kBadFieldValue},
      {"te_form_feed", kPost + "Transfer-Encoding:\x0c" "chunked\r\n\r\n", ParseError::kBadFieldValue},
      {"te_nul", kPost + std::string("Transfer-Encoding: chunked\0\r\n\r\n", 31), ParseError::kBadFieldValue},
      {"te_obs_fold", kPost + "Transfer-Encoding:\r\n chunked\r\n\r\n", ParseError::kObsFold},
      {"te_leading_space", kPost + " Transfer-Encoding: chunked\r\n\r\n", ParseError::kObsFold},
      {"te_bare_lf_before_colon", kPost + "Transfer-Encoding\n: chunked\r\n\r\n", ParseError::kBareLF},
      {"te_hidden_after_bare_lf", kPost + "X: y\nTransfer-Encoding: chunked\r\n\r\n", ParseError::kBareLF},
      {"te_hidden_after_bare_cr", kPost + "X: y\rTransfer-Encoding: chunked\r\n\r\n", ParseError::kBareCR},
      {"te_http10", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", ParseError::kTransferEncodingInHttp10},
      {"te_non_ascii_name", kPost + "Transfer-Encodi\xC5\x84g: chunked\r\n\r\n", ParseError::kBadFieldName},
      // Content-Length tricks.
      {"cl_duplicate_differs", kPost + "Content-Length: 0\r\nContent-Length: 44\r\n\r\n", ParseError::kConflictingContentLength},
      {"cl_list", kPost + "Content-Length: 5, 5\r\n\r\nhello", ParseError::kBadContentLength},
      {"cl_plus", kPost + "Content-Length: +5\r\n\r\nhello", ParseError::kBadContentLength},
      {"cl_hex", kPost + "Content-Length: 0x5\r\n\r\nhello", ParseError::kBadContentLength},
      {"cl_inner_space", kPost + "Content-Length: 1 0\r\n\r\n", ParseError::kBadContentLength},
      {"cl_overflow", kPost + "Content-Length: 18446744073709551621\r\n\r\n", ParseError::kBadContentLength},
      {"cl_space_before_colon", kPost + "Content-Length : 5\r\n\r\nhello", ParseError::kWhitespaceBeforeColon},
      {"cl_obs_fold", kPost + "Content-Length: 0\r\n 5\r\n\r\nhello", ParseError::kObsFold},
      // Who the request is for, twice.
      {"host_twice", "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", ParseError::kDuplicateField},
      {"authorization_twice", kPost + "Authorization: Bearer a\r\nAuthorization: Bearer b\r\n\r\n", ParseError::kDuplicateField},
      // Line endings a lenient parser would accept.
      {"request_line_bare_lf", "GET / HTTP/1.1\nHost: a\r\n\r\n", ParseError::kBareLF},
      {"head_ends_bare_lf", "GET / HTTP/1.1\r\nHost: a\n\n", ParseError::kBareLF},
      {"request_line_bare_cr", "GET / HTTP/1.1\rHost: a\r\n\r\n", ParseError::kBareCR},
  };
}

// What the appliance judges must be what the origin executes. A
// fragment the origin cuts off, a Host two parsers split differently, a
// CONNECT with a body: each is refused before any rule sees it.
std::vector<Attack> issue13_attacks() {
  return {
      {"fragment_hides_path", "POST /v1/chat/completions#x HTTP/1.1\r\nHost: api\r\n\r\n",
       ParseError::kFragmentInTarget},
      {"fragment_in_authority", "GET http://api.example.com#junk/v1/chat/completions HTTP/1.1\r\nHost: api\r\n\r\n",
       ParseError::kFragmentInTarget},
      {"fragment_after_query", "GET /v1/a?x=1#/v1/b HTTP/1.1\r\nHost: api\r\n\r\n", ParseError::kFragmentInTarget},
      {"host_with_space", "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", ParseError::kBadHost},
      {"host_with_path", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", ParseError::kBadHost},
      {"host_with_userinfo", "GET / HTTP/1.1\r\nHost: user@a\r\n\r\n", ParseError::kBadHost},
      {"host_list", "GET / HTTP/1.1\r\nHost: a, b\r\n\r\n", ParseError::kBadHost},
      {"host_port_not_digits", "GET / HTTP/1.1\r\nHost: a:xx\r\n\r\n", ParseError::kBadHost},
      {"host_port_too_large", "GET / HTTP/1.1\r\nHost: a:65536\r\n\r\n", ParseError::kBadHost},
      {"host_port_six_digits", "GET / HTTP/1.1\r\nHost: a:000080\r\n\r\n", ParseError::kBadHost},
      {"host_ipv6_unclosed", "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", ParseError::kBadHost},
      {"host_ipv6_not_hex", "GET / HTTP/1.1\r\nHost: [zz]\r\n\r\n", ParseError::kBadHost},
      {"host_bad_under_authority", "GET http://api/ HTTP/1.1\r\nHost: a b\r\n\r\n", ParseError::kBadHost},
      {"authority_port_not_digits", "GET http://api:x/ HTTP/1.1\r\nHost: api\r\n\r\n", ParseError::kBadHost},
      {"connect_content_length",
       "CONNECT api:443 HTTP/1.1\r\nHost: api:443\r\nContent-Length: 31\r\n\r\nGET /admin HTTP/1.1\r\nHost: a\r\n\r\n",
       ParseError::kConnectWithContent},
      {"connect_chunked", "CONNECT api:443 HTTP/1.1\r\nHost: api:443\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
       ParseError::kConnectWithContent},
  };
}

void expect_refused_whole_and_cut_anywhere(const std::vector<Attack>& list) {
  for (const Attack& a : list) {
    test::HeadHarness h;
    const test::HeadOutcome whole = h.whole(a.bytes);
    EXPECT_EQ(whole.status, HeadStatus::kError) << a.name;
    EXPECT_EQ(whole.error, a.expected) << a.name << ": got " << to_string(whole.error);
    EXPECT_NE(status_for(whole.error), 0) << a.name;
    EXPECT_EQ(test::reference_parse(a.bytes), whole) << a.name;
    for (size_t cut = 1; cut < a.bytes.size(); ++cut) {
      ASSERT_EQ(h.run(a.bytes, {cut}), whole) << a.name << " cut at " << cut;
    }
    EXPECT_EQ(h.bytewise(a.bytes), whole) << a.name;

    // Through the stream, the attack is the first and only event: no head is
    // ever handed to the limiter, so nothing is forwarded.
    const std::vector<test::StreamRecord> events = test::run_stream(a.bytes, {});
    ASSERT_EQ(events.size(), 1u) << a.name;
    EXPECT_EQ(events[0].event, StreamEvent::kError) << a.name;
  }
}

TEST(Smuggling, EveryAttackIsRefusedWithItsKindWholeAndCutAnywhere) {
  expect_refused_whole_and_cut_anywhere(attacks());
}

TEST(Smuggling, FragmentsBadHostsAndConnectBodiesAreRefusedWholeAndCutAnywhere) {
  expect_refused_whole_and_cut_anywhere(issue13_attacks());
  for (const Attack& a : issue13_attacks()) EXPECT_EQ(status_for(a.expected), 400) << a.name;
  // With CONNECT allowed too: the head never reaches the limiter.
  StreamConfig config;
  config.allow_connect = true;
  for (const Attack& a : issue13_attacks()) {
    const std::vector<test::StreamRecord> events = test::run_stream(a.bytes, {}, config);
    ASSERT_EQ(events.size(), 1u) << a.name;
    EXPECT_EQ(events[0].error, a.expected) << a.name;
  }
}

// Attacks inside a chunked body: the head is fine, so the request is handed to
// the limiter, but the stream stops at the bad framing, and what follows is
// never parsed as a request.
TEST(Smuggling, ChunkedBodyTricksStopTheConnection) {
  const std::string head = kPost + "Transfer-Encoding: chunked\r\n\r\n";
  const std::string next = "GET /admin HTTP/1.1\r\nHost: api\r\n\r\n";
  const std::vector<std::pair<const char*, std::string>> bodies = {
      {"size_overflow", "10000000000000005\r\nhello\r\n0\r\n\r\n"},
      {"size_negative", "-5\r\nhello\r\n0\r\n\r\n"},
      {"size_bare_lf", "5\nhello\r\n0\r\n\r\n"},
      {"data_bare_lf", "5\r\nhello\n0\r\n\r\n"},
      {"data_too_long", "3\r\nhello\r\n0\r\n\r\n"},
      {"ext_bare_lf", "5;a=b\nhello\r\n0\r\n\r\n"},
      {"size_space_no_ext", "5 \r\nhello\r\n0\r\n\r\n"},
      {"size_underscore", "5_0\r\nhello\r\n0\r\n\r\n"},
      {"last_chunk_bare_lf", "5\r\nhello\r\n0\n\r\n"},
      {"trailer_obs_fold", "0\r\nX: a\r\n b\r\n\r\n"},
  };
  for (const auto& [name, body] : bodies) {
    const std::string in = head + body + next;
    for (size_t cut = 0; cut < in.size(); cut += 3) {
      const std::vector<test::StreamRecord> events = test::run_stream(in, cut ? std::vector<size_t>{cut} : std::vector<size_t>{});
      ASSERT_EQ(events.size(), 2u) << name;
      EXPECT_EQ(events[0].event, StreamEvent::kHead) << name;
      EXPECT_EQ(events[1].event, StreamEvent::kError) << name;
      EXPECT_EQ(events[1].error, ParseError::kBadChunk) << name;
    }
  }
}

// The same bytes framed correctly: exactly the requests a strict origin sees.
TEST(Smuggling, ValidChunkedRequestsFrameExactly) {
  const std::string in = kPost + "Transfer-Encoding: CHUNKED\r\n\r\n" + "8\r\nGET /x\r\n\r\n0\r\n\r\n" +
                         "GET /next HTTP/1.1\r\nHost: api\r\n\r\n";
  const std::vector<test::StreamRecord> events = test::run_stream(in, {});
  ASSERT_EQ(events.size(), 4u);
  EXPECT_EQ(events[2].request_line, "GET /next");
}

}  // namespace
}  // namespace sluice::http
