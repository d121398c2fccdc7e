// HeadParser: what it yields for valid heads, the error kind for each rule it
// enforces (RFC 9112), its limits, and that the way the bytes are cut into
// pieces never changes the result.
#include <gtest/gtest.h>

#include <string>

#include "head_harness.h"
#include "reference_parser.h"
#include "http/head_parser.h"

namespace sluice::http {
namespace {

using test::HeadHarness;
using test::HeadOutcome;

// Parses `input` whole, byte by byte and at every single cut, and checks all
// agree; returns the whole-piece outcome.
HeadOutcome parse_every_way(std::string_view input, HeadLimits limits = {}) {
  HeadHarness h(best_isa(), limits);
  const HeadOutcome whole = h.whole(input);
  EXPECT_EQ(test::reference_parse(input, limits), whole) << "the plain reading of the grammar differs for: " << input;
  EXPECT_EQ(h.bytewise(input), whole) << "byte by byte differs for: " << input;
  for (size_t cut = 1; cut < input.size(); ++cut) {
    const HeadOutcome split = h.run(input, {cut});
    EXPECT_EQ(split, whole) << "cut at " << cut << ": " << test::describe(split) << " vs " << test::describe(whole);
    if (split != whole) break;
  }
  return whole;
}

ParseError error_of(std::string_view input, HeadLimits limits = {}) {
  const HeadOutcome o = parse_every_way(input, limits);
  EXPECT_EQ(o.status, HeadStatus::kError) << input;
  return o.error;
}

std::string tracked(const HeadOutcome& o, KnownField f) { return o.tracked[id_of(f)].first; }
int tracked_count(const HeadOutcome& o, KnownField f) { return o.tracked[id_of(f)].second; }

TEST(HeadParser, ParsesRequestLineAndFields) {
  const std::string in =
      "GET /v1/items?limit=10&x=y HTTP/1.1\r\nHost: api.example\r\nAccept: */*\r\nX-Empty:\r\n\r\n";
  const HeadOutcome o = parse_every_way(in);
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.consumed, in.size());
  EXPECT_EQ(o.head_bytes, in.size());
  EXPECT_EQ(o.method, "GET");
  EXPECT_EQ(o.target, "/v1/items?limit=10&x=y");
  EXPECT_EQ(o.path, "/v1/items");
  EXPECT_TRUE(o.has_query);
  EXPECT_EQ(o.query, "limit=10&x=y");
  EXPECT_EQ(o.version, static_cast<int>(Version::kHttp11));
  ASSERT_EQ(o.fields.size(), 3u);
  EXPECT_EQ(o.fields[0], (std::pair<std::string, std::string>{"Host", "api.example"}));
  EXPECT_EQ(o.fields[1], (std::pair<std::string, std::string>{"Accept", "*/*"}));
  EXPECT_EQ(o.fields[2], (std::pair<std::string, std::string>{"X-Empty", ""}));
  EXPECT_EQ(tracked(o, KnownField::kHost), "api.example");
  EXPECT_EQ(o.body, static_cast<int>(BodyKind::kNone));
  EXPECT_TRUE(o.keep_alive);
}

TEST(HeadParser, StopsAtTheEndOfTheHead) {
  const std::string head = "POST /a HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\n\r\n";
  const HeadOutcome o = parse_every_way(head + "hello" + "GET / HTTP/1.1\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.consumed, head.size());
  EXPECT_EQ(o.body, static_cast<int>(BodyKind::kLength));
  EXPECT_EQ(o.content_length, 5u);
}

TEST(HeadParser, ViewsPointIntoTheInputWhenFedWhole) {
  const std::string in = "GET /zero-copy HTTP/1.1\r\nHost: h\r\nAuthorization: Bearer abc\r\n\r\n";
  HeadHarness h;
  ASSERT_EQ(h.whole(in).status, HeadStatus::kComplete);
  const RequestHead& head = h.parser().head();
  const auto inside = [&](std::string_view v) { return v.data() >= in.data() && v.data() + v.size() <= in.data() + in.size(); };
  EXPECT_TRUE(inside(head.method));
  EXPECT_TRUE(inside(head.path));
  EXPECT_TRUE(inside(head.value(KnownField::kAuthorization)));
  EXPECT_EQ(head.value(KnownField::kAuthorization), "Bearer abc");
}

TEST(HeadParser, TrimsOptionalWhitespaceAroundValues) {
  const HeadOutcome o = parse_every_way("GET / HTTP/1.1\r\nHost:\t h \t\r\nX-A:  a b  \r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.fields[0].second, "h");
  EXPECT_EQ(o.fields[1].second, "a b");
}

TEST(HeadParser, LocatesEveryKnownFieldInOnePass) {
  const HeadOutcome o = parse_every_way(
      "POST /v1/x HTTP/1.1\r\n"
      "host: api\r\n"
      "AUTHORIZATION: Bearer t\r\n"
      "Origin: https://app.example\r\n"
      "X-Forwarded-For: 198.18.0.1, 198.18.0.2\r\n"
      "X-Real-IP: 198.18.0.3\r\n"
      "CF-Connecting-IP: 2001:db8::1\r\n"
      "Content-Length: 0\r\n"
      "Connection: keep-alive, Upgrade\r\n"
      "Upgrade: websocket\r\n"
      "Expect: 100-continue\r\n"
      "\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete) << to_string(o.error);
  EXPECT_EQ(tracked(o, KnownField::kHost), "api");
  EXPECT_EQ(tracked(o, KnownField::kAuthorization), "Bearer t");
  EXPECT_EQ(tracked(o, KnownField::kOrigin), "https://app.example");
  EXPECT_EQ(tracked(o, KnownField::kXForwardedFor), "198.18.0.1, 198.18.0.2");
  EXPECT_EQ(tracked(o, KnownField::kXRealIp), "198.18.0.3");
  EXPECT_EQ(tracked(o, KnownField::kCfConnectingIp), "2001:db8::1");
  EXPECT_EQ(tracked(o, KnownField::kContentLength), "0");
  EXPECT_EQ(tracked(o, KnownField::kConnection), "keep-alive, Upgrade");
  EXPECT_EQ(tracked(o, KnownField::kUpgrade), "websocket");
  EXPECT_EQ(tracked(o, KnownField::kExpect), "100-continue");
  EXPECT_TRUE(o.upgrade);
  EXPECT_TRUE(o.expect_continue);
  EXPECT_EQ(o.body, static_cast<int>(BodyKind::kNone));
}

TEST(HeadParser, LocatesFieldsAPolicyAsksFor) {
  FieldSet fields;
  const auto deployment = fields.add("X-Deployment");
  const auto tenant = fields.add("x-tenant-id");
  ASSERT_TRUE(deployment.id && tenant.id);
  HeadHarness h(best_isa(), {}, &fields);
  const std::string in = "GET / HTTP/1.1\r\nHost: h\r\nx-deployment: gpt-eu-1\r\nX-TENANT-ID: t42\r\nX-Other: 1\r\n\r\n";
  const HeadOutcome o = h.whole(in);
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.tracked[*deployment.id].first, "gpt-eu-1");
  EXPECT_EQ(o.tracked[*tenant.id].first, "t42");
  EXPECT_EQ(h.bytewise(in), o);
}

TEST(HeadParser, ListFieldsMayRepeatAndAreCounted) {
  const HeadOutcome o = parse_every_way(
      "GET / HTTP/1.1\r\nHost: h\r\nX-Forwarded-For: 198.18.0.1\r\nX-Forwarded-For: 198.18.0.2\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(tracked(o, KnownField::kXForwardedFor), "198.18.0.1");
  EXPECT_EQ(tracked_count(o, KnownField::kXForwardedFor), 2);
}

TEST(HeadParser, SkipsEmptyLinesBeforeTheRequestLine) {
  // RFC 9112 2.2: a server SHOULD ignore at least one empty line before the request line.
  const HeadOutcome o = parse_every_way("\r\n\r\nGET / HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.method, "GET");
}

TEST(HeadParser, ReportsIncompleteUntilTheEmptyLine) {
  HeadHarness h;
  for (std::string_view partial : {"G", "GET / HTTP/1.1\r", "GET / HTTP/1.1\r\nHost: h\r\n", "GET / HTTP/1.1\r\nHost: h\r\n\r"}) {
    EXPECT_EQ(h.whole(partial).status, HeadStatus::kIncomplete) << partial;
  }
}

TEST(HeadParser, RequestTargetForms) {
  HeadOutcome o = parse_every_way("GET http://api.example:8080/v1/a?b=c HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.authority, "api.example:8080");
  EXPECT_EQ(o.path, "/v1/a");
  EXPECT_EQ(o.query, "b=c");

  o = parse_every_way("GET https://api.example?q HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.path, "/");
  EXPECT_EQ(o.query, "q");

  o = parse_every_way("OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.path, "*");

  o = parse_every_way("CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.authority, "api.example:443");

  EXPECT_EQ(error_of("GET * HTTP/1.1\r\nHost: x\r\n\r\n"), ParseError::kBadTarget);
  EXPECT_EQ(error_of("GET ftp://x/ HTTP/1.1\r\nHost: x\r\n\r\n"), ParseError::kBadTarget);
  EXPECT_EQ(error_of("GET http://user@x/ HTTP/1.1\r\nHost: x\r\n\r\n"), ParseError::kBadTarget);
  EXPECT_EQ(error_of("CONNECT /x HTTP/1.1\r\nHost: x\r\n\r\n"), ParseError::kBadTarget);
}

TEST(HeadParser, HttpTenDefaultsToClose) {
  HeadOutcome o = parse_every_way("GET / HTTP/1.0\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.version, static_cast<int>(Version::kHttp10));
  EXPECT_FALSE(o.keep_alive);
  o = parse_every_way("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n");
  EXPECT_TRUE(o.keep_alive);
  o = parse_every_way("GET / HTTP/1.1\r\nHost: h\r\nConnection: close\r\n\r\n");
  EXPECT_FALSE(o.keep_alive);
}

// --- one test per rule the parser enforces ---------------------------------

TEST(HeadParserRules, MethodMustBeAToken) {
  EXPECT_EQ(error_of("G(T / HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadMethod);
  EXPECT_EQ(error_of(" GET / HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadMethod);
  EXPECT_EQ(error_of("GET\t/ HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadMethod);
  EXPECT_EQ(error_of("G\xC3\x89T / HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadMethod);
}

TEST(HeadParserRules, TargetMustBeVisibleAscii) {
  EXPECT_EQ(error_of("GET /a\x7f HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadTarget);
  EXPECT_EQ(error_of("GET /\xC3\xA9 HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadTarget);
  EXPECT_EQ(error_of("GET  / HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadTarget);  // two spaces: empty target
  EXPECT_EQ(error_of("GET\r\nHost: h\r\n\r\n"), ParseError::kBadTarget);
}

TEST(HeadParserRules, OnlyHttp10And11) {
  EXPECT_EQ(error_of("GET / HTTP/1.2\r\nHost: h\r\n\r\n"), ParseError::kUnsupportedVersion);
  EXPECT_EQ(error_of("GET / HTTP/2.0\r\nHost: h\r\n\r\n"), ParseError::kUnsupportedVersion);
  EXPECT_EQ(error_of("GET / HTTP/0.9\r\nHost: h\r\n\r\n"), ParseError::kUnsupportedVersion);
  EXPECT_EQ(error_of("GET / http/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadVersion);
  EXPECT_EQ(error_of("GET / HTTP/1.1 \r\nHost: h\r\n\r\n"), ParseError::kBadVersion);
  EXPECT_EQ(error_of("GET / HTTP/11\r\nHost: h\r\n\r\n"), ParseError::kBadVersion);
  EXPECT_EQ(error_of("GET /\r\nHost: h\r\n\r\n"), ParseError::kBadVersion);
  EXPECT_EQ(error_of("GET / HTTP/1.1\x01\r\nHost: h\r\n\r\n"), ParseError::kBadVersion);
  EXPECT_EQ(status_for(ParseError::kUnsupportedVersion), 505);
}

TEST(HeadParserRules, FieldNameMustBeAToken) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX(y): 1\r\n\r\n"), ParseError::kBadFieldName);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\n: empty\r\n\r\n"), ParseError::kBadFieldName);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX y: 1\r\n\r\n"), ParseError::kBadFieldName);
  EXPECT_EQ(error_of(std::string("GET / HTTP/1.1\r\nHost: h\r\nX\0: 1\r\n\r\n", 34)), ParseError::kBadFieldName);
  EXPECT_EQ(status_for(ParseError::kBadFieldName), 400);
}

TEST(HeadParserRules, NoWhitespaceBetweenNameAndColon) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost : h\r\n\r\n"), ParseError::kWhitespaceBeforeColon);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX-A\t: 1\r\n\r\n"), ParseError::kWhitespaceBeforeColon);
}

TEST(HeadParserRules, NoObsFold) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n 2\r\n\r\n"), ParseError::kObsFold);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX-A: 1\r\n\t2\r\n\r\n"), ParseError::kObsFold);
  // Whitespace between the request line and the first field (RFC 9112 2.2).
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\n Host: h\r\n\r\n"), ParseError::kObsFold);
}

TEST(HeadParserRules, EveryFieldLineHasAColon) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nNoColon\r\n\r\n"), ParseError::kMissingColon);
}

TEST(HeadParserRules, NoControlBytesInValues) {
  EXPECT_EQ(error_of(std::string("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\0b\r\n\r\n", 37)), ParseError::kBadFieldValue);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x7f\r\n\r\n"), ParseError::kBadFieldValue);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\x0b\r\n\r\n"), ParseError::kBadFieldValue);
  // HTAB and obs-text are allowed.
  EXPECT_EQ(parse_every_way("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\tb \xC3\xA9\r\n\r\n").status, HeadStatus::kComplete);
}

TEST(HeadParserRules, NoBareCR) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX-A: a\rb\r\n\r\n"), ParseError::kBareCR);
  EXPECT_EQ(error_of("GET / HTTP/1.1\rHost: h\r\n\r\n"), ParseError::kBareCR);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\n\rX\r\n"), ParseError::kBareCR);
  EXPECT_EQ(error_of("\rGET / HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBareCR);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nX-A\r: 1\r\nHost: h\r\n\r\n"), ParseError::kBareCR);
}

TEST(HeadParserRules, NoBareLF) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\nHost: h\r\n\r\n"), ParseError::kBareLF);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\n\r\n"), ParseError::kBareLF);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\n\n"), ParseError::kBareLF);
  EXPECT_EQ(error_of("\nGET / HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBareLF);
}

TEST(HeadParserRules, ContentLengthIsDigitsOnly) {
  for (std::string_view v : {"-1", "+5", "5 5", "0x10", "1,1", "", "12a", "1234567890123456789"}) {
    EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: " + std::string(v) + "\r\n\r\n"),
              ParseError::kBadContentLength)
        << v;
  }
  const HeadOutcome o = parse_every_way("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 007\r\n\r\n");
  EXPECT_EQ(o.content_length, 7u);
}

TEST(HeadParserRules, SeveralContentLengthsMustAgree) {
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n"),
            ParseError::kConflictingContentLength);
  const HeadOutcome same = parse_every_way("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\n");
  ASSERT_EQ(same.status, HeadStatus::kComplete);
  EXPECT_EQ(same.content_length, 5u);
}

TEST(HeadParserRules, TransferEncodingWithContentLengthIsRefused) {
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"),
            ParseError::kContentLengthWithTransferEncoding);
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"),
            ParseError::kContentLengthWithTransferEncoding);
}

TEST(HeadParserRules, FinalTransferCodingMustBeChunked) {
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip\r\n\r\n"), ParseError::kTransferEncodingNotChunked);
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked, gzip\r\n\r\n"),
            ParseError::kTransferEncodingNotChunked);
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
            ParseError::kTransferEncodingNotChunked);
  EXPECT_EQ(error_of("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: br, chunked\r\n\r\n"),
            ParseError::kUnknownTransferCoding);
  EXPECT_EQ(status_for(ParseError::kUnknownTransferCoding), 501);
  const HeadOutcome o = parse_every_way("POST / HTTP/1.1\r\nHost: h\r\nTransfer-Encoding: gzip, Chunked\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.body, static_cast<int>(BodyKind::kChunked));
}

TEST(HeadParserRules, TransferEncodingInHttp10IsRefused) {
  EXPECT_EQ(error_of("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n"), ParseError::kTransferEncodingInHttp10);
}

TEST(HeadParserRules, Http11NeedsExactlyOneHost) {
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nAccept: */*\r\n\r\n"), ParseError::kMissingHost);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n"), ParseError::kDuplicateField);
  EXPECT_EQ(parse_every_way("GET / HTTP/1.0\r\n\r\n").status, HeadStatus::kComplete);
}

// A request-target has no fragment (RFC 9112 3.2). Kept, '#' put
// the fragment into the path the rules matched (or into the authority).
TEST(HeadParserRules, FragmentInTargetIsRefused) {
  for (const std::string& target : std::vector<std::string>{
           "/v1/chat/completions#x", "/#", "/a?b=c#d", "/a#b?c", "#", "http://api.example.com#junk/v1/chat/completions",
           "http://api.example.com/v1#x", "https://api.example.com?q#f"}) {
    EXPECT_EQ(error_of("POST " + target + " HTTP/1.1\r\nHost: api.example.com\r\n\r\n"), ParseError::kFragmentInTarget)
        << target;
  }
  EXPECT_EQ(error_of("CONNECT a#b:443 HTTP/1.1\r\nHost: a\r\n\r\n"), ParseError::kFragmentInTarget);
  EXPECT_EQ(status_for(ParseError::kFragmentInTarget), 400);
  EXPECT_EQ(to_string(ParseError::kFragmentInTarget), "fragment_in_target");
  // '#' elsewhere in the head is no target's business.
  EXPECT_EQ(parse_every_way("GET /a%23b HTTP/1.1\r\nHost: h\r\nX-Tag: #1\r\n\r\n").status, HeadStatus::kComplete);
}

// RFC 9112 3.2, a Host with an invalid value is a 400.
TEST(HeadParserRules, InvalidHostIsRefused) {
  for (const std::string& host :
       std::vector<std::string>{"a b", "a/b", "user@a", "a, b", "a:xx", "a:1:2", "[::1", "[zz]", "[::1]x", "a:65536",
                                "a:000080", ":80", "a?b", "a\"b", "a%zz", "a%4", "[fe80::1%25eth0]", "[v1.x]"}) {
    EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: " + host + "\r\n\r\n"), ParseError::kBadHost) << host;
    // Also where the absolute-form authority overrides it: the origin may read either.
    EXPECT_EQ(error_of("GET http://api.example/ HTTP/1.1\r\nHost: " + host + "\r\n\r\n"), ParseError::kBadHost) << host;
    // And in HTTP/1.0, which needs no Host but may not send a bad one.
    EXPECT_EQ(error_of("GET / HTTP/1.0\r\nHost: " + host + "\r\n\r\n"), ParseError::kBadHost) << host;
  }
  EXPECT_EQ(status_for(ParseError::kBadHost), 400);
  EXPECT_EQ(to_string(ParseError::kBadHost), "bad_host");

  for (const std::string& host : std::vector<std::string>{
           "api.example.com", "API.Example.COM.", "api.example.com:80", "api.example.com:", "api.example.com:08080",
           "127.0.0.1:65535", "[::1]", "[2001:db8::1]:443", "a-b_c~d!$&'()*+,;=", "%41pi.example"}) {
    const HeadOutcome o = parse_every_way("GET / HTTP/1.1\r\nHost: " + host + "\r\n\r\n");
    EXPECT_EQ(o.status, HeadStatus::kComplete) << host << ": " << to_string(o.error);
  }
  // An empty Host stays valid: HTTP/1.1 sends it when the target URI has no
  // authority (RFC 9112 3.2).
  EXPECT_EQ(parse_every_way("GET / HTTP/1.1\r\nHost:\r\n\r\n").status, HeadStatus::kComplete);
}

// The authority of an absolute-form target is held to the same
// grammar, and wins over Host for the keys.
TEST(HeadParserRules, InvalidAuthorityInAbsoluteFormIsRefused) {
  for (const std::string& authority :
       std::vector<std::string>{"a:xx", "a\"b", "[::1", "[zz]", "a:65536", "a:123456", ":80", "a%zz", "a;b:c"}) {
    EXPECT_EQ(error_of("GET http://" + authority + "/v1 HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadHost)
        << authority;
  }
  // userinfo stays what it was: a bad target.
  EXPECT_EQ(error_of("GET http://user@a/ HTTP/1.1\r\nHost: h\r\n\r\n"), ParseError::kBadTarget);
  HeadOutcome o = parse_every_way("GET http://api.example:/v1 HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.authority, "api.example:");
  o = parse_every_way("GET http://[::1]:8080/v1 HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.authority, "[::1]:8080");
  EXPECT_EQ(o.path, "/v1");
}

// CONNECT names host and port, both valid, the port not empty
// (RFC 9110 9.3.6).
TEST(HeadParserRules, ConnectAuthorityNeedsAValidHostAndPort) {
  for (const std::string& target :
       std::vector<std::string>{"a:", "a:xx", "a:99999", "[::1]", "[::1]:", "a%zz:443", "a]:443", ":443"}) {
    EXPECT_EQ(error_of("CONNECT " + target + " HTTP/1.1\r\nHost: a\r\n\r\n"), ParseError::kBadHost) << target;
  }
  const HeadOutcome o = parse_every_way("CONNECT [::1]:443 HTTP/1.1\r\nHost: [::1]:443\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(o.authority, "[::1]:443");
}

// A CONNECT request has no content (RFC 9110 9.3.6); framed as if
// it had, its "body" would be tunnel bytes or a request nobody judged.
TEST(HeadParserRules, ConnectWithContentLengthOrTransferEncodingIsRefused) {
  const std::string connect = "CONNECT api.example:443 HTTP/1.1\r\nHost: api.example:443\r\n";
  EXPECT_EQ(error_of(connect + "Content-Length: 5\r\n\r\n"), ParseError::kConnectWithContent);
  EXPECT_EQ(error_of(connect + "Content-Length: 0\r\n\r\n"), ParseError::kConnectWithContent);
  EXPECT_EQ(error_of(connect + "Transfer-Encoding: chunked\r\n\r\n"), ParseError::kConnectWithContent);
  EXPECT_EQ(status_for(ParseError::kConnectWithContent), 400);
  EXPECT_EQ(to_string(ParseError::kConnectWithContent), "connect_with_content");
  EXPECT_EQ(parse_every_way(connect + "\r\n").status, HeadStatus::kComplete);
}

TEST(HeadParserRules, IdentityFieldsMustNotRepeat) {
  for (std::string_view name : {"Authorization", "Origin", "X-Real-IP", "CF-Connecting-IP"}) {
    const std::string n(name);
    EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\n" + n + ": a\r\n" + n + ": b\r\n\r\n"), ParseError::kDuplicateField)
        << name;
  }
}

TEST(HeadParserLimits, HeadSizeLimitGives431) {
  HeadLimits limits;
  limits.max_head_bytes = 64;
  const std::string fits = "GET / HTTP/1.1\r\nHost: h\r\nX-Pad: " + std::string(64 - 36, 'a') + "\r\n\r\n";
  ASSERT_EQ(fits.size(), 64u);
  EXPECT_EQ(parse_every_way(fits, limits).status, HeadStatus::kComplete);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nX-Pad: " + std::string(64 - 35, 'a') + "\r\n\r\n", limits),
            ParseError::kHeadTooLarge);
  EXPECT_EQ(status_for(ParseError::kHeadTooLarge), 431);
}

TEST(HeadParserLimits, DefaultHeadLimitIs16KiB) {
  const std::string big = "GET / HTTP/1.1\r\nHost: h\r\nCookie: " + std::string(16 * 1024, 'c') + "\r\n\r\n";
  HeadHarness h;
  EXPECT_EQ(h.whole(big).error, ParseError::kHeadTooLarge);
  EXPECT_EQ(h.bytewise(big).error, ParseError::kHeadTooLarge);
  const std::string ok = "GET / HTTP/1.1\r\nHost: h\r\nCookie: " + std::string(15 * 1024, 'c') + "\r\n\r\n";
  EXPECT_EQ(h.whole(ok).status, HeadStatus::kComplete);
  EXPECT_EQ(h.random_cuts(ok, 7).status, HeadStatus::kComplete);
}

TEST(HeadParserLimits, AHeadThatNeverEndsStopsAtTheLimit) {
  HeadHarness h;
  h.parser().reset();
  const std::string chunk(1000, 'a');
  ASSERT_EQ(h.parser().feed(std::span<const char>("GET /", 5)).status, HeadStatus::kIncomplete);
  FeedResult r{};
  int pieces = 0;
  do {
    r = h.parser().feed(chunk);
    ++pieces;
  } while (r.status == HeadStatus::kIncomplete && pieces < 100);
  EXPECT_EQ(r.error, ParseError::kHeadTooLarge);
  EXPECT_EQ(pieces, 17);  // 16 KiB in 1000-byte pieces
}

TEST(HeadParserLimits, FieldCountLimitGives431) {
  HeadLimits limits;
  limits.max_fields = 3;
  EXPECT_EQ(parse_every_way("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n", limits).status, HeadStatus::kComplete);
  EXPECT_EQ(error_of("GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", limits), ParseError::kTooManyFields);
  EXPECT_EQ(status_for(ParseError::kTooManyFields), 431);
}

TEST(HeadParserLimits, DefaultFieldLimitIs100) {
  std::string in = "GET / HTTP/1.1\r\nHost: h\r\n";
  for (int i = 0; i < 99; ++i) in += "X-" + std::to_string(i) + ": v\r\n";
  HeadHarness h;
  EXPECT_EQ(h.whole(in + "\r\n").status, HeadStatus::kComplete);
  EXPECT_EQ(h.whole(in + "X-last: v\r\n\r\n").error, ParseError::kTooManyFields);
}

TEST(HeadParser, EmptyPiecesChangeNothing) {
  HeadHarness h;
  h.parser().reset();
  EXPECT_EQ(h.parser().feed(std::span<const char>()).status, HeadStatus::kIncomplete);
  EXPECT_FALSE(h.parser().started());
  const std::string in = "GET / HTTP/1.1\r\nHost: h\r\n\r\n";
  EXPECT_EQ(h.parser().feed(std::span<const char>(in.data(), 5)).status, HeadStatus::kIncomplete);
  EXPECT_EQ(h.parser().feed(std::span<const char>()).status, HeadStatus::kIncomplete);
  const FeedResult r = h.parser().feed(std::span<const char>(in.data() + 5, in.size() - 5));
  EXPECT_EQ(r.status, HeadStatus::kComplete);
  EXPECT_EQ(h.parser().head().path, "/");
}

TEST(HeadParser, ResetStartsANewHead) {
  HeadHarness h;
  EXPECT_EQ(h.whole("GET /a HTTP/1.1\r\nHost: h\r\nAuthorization: x\r\n\r\n").status, HeadStatus::kComplete);
  const HeadOutcome o = h.whole("GET /b HTTP/1.1\r\nHost: h\r\n\r\n");
  ASSERT_EQ(o.status, HeadStatus::kComplete);
  EXPECT_EQ(tracked_count(o, KnownField::kAuthorization), 0);
  EXPECT_EQ(o.path, "/b");
}

TEST(HeadParser, ASmallFieldStoreStillCountsEveryField) {
  static const FieldSet fields;
  std::vector<FieldLine> store(1);
  std::vector<char> spill(1024);
  HeadParser p(fields, {}, store, spill);
  const std::string in = "GET / HTTP/1.1\r\nHost: h\r\nA: 1\r\nB: 2\r\n\r\n";
  ASSERT_EQ(p.feed(in).status, HeadStatus::kComplete);
  EXPECT_EQ(p.head().field_count, 3);
  EXPECT_EQ(p.fields().size(), 1u);
}

}  // namespace
}  // namespace sluice::http
