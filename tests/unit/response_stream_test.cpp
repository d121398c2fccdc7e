// ResponseStream: the origin's bytes cut into responses and matched in order
// to the forwarded requests, with bodies skipped exactly, interim responses,
// protocol switches, close-delimited bodies and the errors that stop framing.
#include <gtest/gtest.h>

#include <algorithm>
#include <ostream>
#include <random>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "head_harness.h"
#include "http/response_stream.h"

namespace sluice::http {

void PrintTo(ResponseError e, std::ostream* os) { *os << to_string(e); }

namespace {

using K = RequestKind;
using E = ResponseEvent;

// One event, with what a caller would look at when it comes.
struct Record {
  ResponseEvent event;
  ResponseError error = ResponseError::kNone;
  size_t offset = 0;       // absolute offset in the input just after the event (0 for kError;
                           // for kPassThrough, where the bridged bytes begin)
  uint16_t status = 0;     // for kHead
  bool interim = false;    // for kHead
  size_t outstanding = 0;  // after the event
  bool at_close = false;   // returned by close()
  // For kHead, the rest of what head() says, recorded by feed(): pieces that
  // take field lines whole and byte-by-byte pieces must read the same. An
  // expected record written by hand leaves it out (`detailed` false), and
  // is compared on the fields above only.
  bool detailed = false;
  ResponseBody body = ResponseBody::kNone;
  uint64_t content_length = 0;
  uint32_t head_bytes = 0;
  bool keep_alive = false, connection_close = false, has_usage = false;
  uint64_t usage = 0;

  bool operator==(const Record& o) const {
    const bool same = event == o.event && error == o.error && offset == o.offset && status == o.status &&
                      interim == o.interim && outstanding == o.outstanding && at_close == o.at_close;
    if (!same || !detailed || !o.detailed) return same;
    return body == o.body && content_length == o.content_length && head_bytes == o.head_bytes &&
           keep_alive == o.keep_alive && connection_close == o.connection_close && has_usage == o.has_usage &&
           usage == o.usage;
  }
};

void PrintTo(const Record& r, std::ostream* os) {
  *os << "{event " << static_cast<int>(r.event) << " " << to_string(r.error) << " at " << r.offset << " status "
      << r.status << (r.interim ? " interim" : "") << " outstanding " << r.outstanding
      << (r.at_close ? " at close" : "") << " body " << static_cast<int>(r.body) << " length " << r.content_length
      << " head bytes " << r.head_bytes << (r.keep_alive ? " keep-alive" : "") << (r.connection_close ? " close" : "")
      << (r.has_usage ? " usage " + std::to_string(r.usage) : "") << "}";
}

Record head_at(size_t offset, uint16_t status, size_t outstanding, bool interim = false) {
  return {E::kHead, ResponseError::kNone, offset, status, interim, outstanding, false};
}
Record end_at(size_t offset, size_t outstanding) {
  return {E::kResponseEnd, ResponseError::kNone, offset, 0, false, outstanding, false};
}
Record error_of(ResponseError e, size_t outstanding) { return {E::kError, e, 0, 0, false, outstanding, false}; }
// The events of the one response to the one request outstanding.
std::vector<Record> one_response(size_t head_end, uint16_t status, size_t end) {
  return {head_at(head_end, status, 1), end_at(end, 0)};
}

// Feeds `in` to `s` cut before each offset in `cuts` (ascending) and, if
// `fin`, reports the close at the end. Each piece lives in a scratch buffer
// that is overwritten once the piece is consumed, as the data plane reuses its
// segments: a stream that kept a view into a piece would read garbage.
std::vector<Record> feed(ResponseStream& s, std::string_view in, const std::vector<size_t>& cuts, bool fin) {
  std::vector<Record> events;
  std::vector<size_t> ends(cuts);
  ends.push_back(in.size());
  std::vector<char> scratch;
  size_t begin = 0;
  for (size_t end : ends) {
    if (end < begin) continue;
    scratch.assign(in.begin() + static_cast<ptrdiff_t>(begin), in.begin() + static_cast<ptrdiff_t>(end));
    size_t pos = 0;
    for (;;) {
      const ResponseStep step = s.next(std::span<const char>(scratch.data() + pos, scratch.size() - pos));
      EXPECT_LE(step.consumed, scratch.size() - pos);
      const size_t before = begin + pos;
      pos += step.consumed;
      if (step.event == E::kNeedMore) {
        EXPECT_EQ(pos, scratch.size()) << "kNeedMore must consume the whole piece";
        break;
      }
      if (step.event == E::kPassThrough) {
        EXPECT_EQ(pos, scratch.size()) << "pass-through consumes everything";
        if (events.empty() || events.back().event != E::kPassThrough) {
          // Its offset is where the tunnel begins.
          events.push_back({E::kPassThrough, ResponseError::kNone, before, 0, false, s.outstanding(), false});
        }
        break;
      }
      if (step.event == E::kError) {
        // Where in a piece an error is noticed is not part of the contract.
        events.push_back(error_of(step.error, s.outstanding()));
        return events;
      }
      Record r{step.event, ResponseError::kNone, begin + pos, 0, false, s.outstanding(), false};
      if (step.event == E::kHead) {
        const ResponseHead& h = s.head();
        r.detailed = true;
        r.status = h.status;
        r.interim = h.interim;
        r.body = h.body;
        r.content_length = h.content_length;
        r.head_bytes = h.head_bytes;
        r.keep_alive = h.keep_alive;
        r.connection_close = h.connection_close;
        r.has_usage = h.has_usage;
        r.usage = h.usage;
      }
      events.push_back(r);
    }
    std::fill(scratch.begin(), scratch.end(), 'X');
    begin = end;
  }
  if (fin) {
    const ResponseStep step = s.close();
    EXPECT_EQ(step.consumed, 0u);
    const size_t offset = step.event == E::kError ? 0 : in.size();
    events.push_back({step.event, step.error, offset, 0, false, s.outstanding(), true});
  }
  return events;
}

std::vector<Record> run(const std::vector<K>& kinds, std::string_view in, const std::vector<size_t>& cuts,
                        bool fin = false, ResponseLimits limits = {}) {
  ResponseStream s(limits);
  for (K k : kinds) EXPECT_TRUE(s.expect(k));
  return feed(s, in, cuts, fin);
}

std::vector<size_t> every_byte(std::string_view in) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < in.size(); ++i) cuts.push_back(i);
  return cuts;
}

// The events of `in` fed whole, byte by byte and in random pieces must agree;
// returns them.
std::vector<Record> events_every_way(const std::vector<K>& kinds, std::string_view in, bool fin = false,
                                     ResponseLimits limits = {}) {
  const std::vector<Record> whole = run(kinds, in, {}, fin, limits);
  EXPECT_EQ(run(kinds, in, every_byte(in), fin, limits), whole) << "byte by byte";
  std::mt19937 rng(static_cast<uint32_t>(in.size()));
  for (int round = 0; round < 10; ++round) {
    std::vector<size_t> cuts;
    for (size_t i = 1; i < in.size(); ++i) {
      if (rng() % 6 == 0) cuts.push_back(i);
    }
    EXPECT_EQ(run(kinds, in, cuts, fin, limits), whole) << "random cuts, round " << round;
  }
  return whole;
}

// The error a single response to one request of `kind` ends in, or kNone.
ResponseError error_of_response(std::string_view in, K kind = K::kOrdinary) {
  const std::vector<Record> events = events_every_way({kind}, in);
  if (events.empty() || events.back().event != E::kError) return ResponseError::kNone;
  return events.back().error;
}

TEST(ResponseStream, ContentLengthBodyEndsExactly) {
  // The body looks like a response of its own; it must be skipped as data.
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 19\r\n\r\n";
  const std::string in = head + "HTTP/1.1 404 Nope\r\n";
  ResponseStream s;
  ASSERT_TRUE(s.expect(K::kOrdinary));
  EXPECT_EQ(s.outstanding(), 1u);
  EXPECT_EQ(feed(s, in, {}, false), one_response(head.size(), 200, in.size()));
  EXPECT_EQ(s.head().body, ResponseBody::kLength);
  EXPECT_EQ(s.head().content_length, 19u);
  EXPECT_EQ(s.completed(), 1u);
  EXPECT_TRUE(s.at_boundary());
  EXPECT_TRUE(s.last_keep_alive());
  EXPECT_EQ(events_every_way({K::kOrdinary}, in), one_response(head.size(), 200, in.size()));
}

// Names of a framing field's length (Set-Cookie and Keep-Alive have
// Connection's) are looked at again after the bulk scan, at most eight a scan:
// the framing fields after a dozen of them, and a value too long to keep
// among them, read the same as byte by byte.
TEST(ResponseStream, FramingFieldsAfterManyNamesOfTheirLengthsReadTheSame) {
  std::string head = "HTTP/1.1 200 OK\r\n";
  for (int k = 0; k < 12; ++k) head += "Set-Cookie: c" + std::to_string(k) + "=v; Path=/\r\nKeep-Alive: timeout=5\r\n";
  head += "Content-Length: 5\r\nConnection: close\r\n\r\n";
  const std::string in = head + "hello";
  ResponseStream s;
  ASSERT_TRUE(s.expect(K::kOrdinary));
  EXPECT_EQ(feed(s, in, {}, false), one_response(head.size(), 200, in.size()));
  EXPECT_EQ(s.head().content_length, 5u);
  EXPECT_TRUE(s.head().connection_close);
  EXPECT_EQ(events_every_way({K::kOrdinary}, in), one_response(head.size(), 200, in.size()));

  const std::string too_long = "HTTP/1.1 200 OK\r\nSet-Cookie: a\r\nConnection: " +
                               std::string(ResponseStream::kMaxFramingValue + 1, 'x') + "\r\n\r\n";
  const std::vector<Record> events = events_every_way({K::kOrdinary}, too_long);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back(), error_of(ResponseError::kFramingFieldTooLong, 1));
}

TEST(ResponseStream, ChunkedBodyWithExtensionsAndTrailers) {
  const std::string head = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTrailer: X-Checksum\r\n\r\n";
  const std::string body =
      "5;name=value\r\nhello\r\n"
      "18\r\nHTTP/1.1 200 OK\r\n\r\n0\r\n\r\n\r\n"  // 24 bytes of data that look like framing
      "0\r\nX-Checksum: abc\r\nX-Other: 1\r\n\r\n";
  const std::string next = "HTTP/1.1 204 No Content\r\n\r\n";
  const std::string in = head + body + next;
  const std::vector<Record> events = events_every_way({K::kOrdinary, K::kOrdinary}, in);
  EXPECT_EQ(events, (std::vector<Record>{head_at(head.size(), 200, 2), end_at(head.size() + body.size(), 1),
                                         head_at(in.size(), 204, 1), end_at(in.size(), 0)}));
}

TEST(ResponseStream, BadChunkIsAnError) {
  EXPECT_EQ(error_of_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\nhello\r\n0\r\n\r\n"),
            ResponseError::kBadChunk);
  EXPECT_EQ(error_of_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n"), ResponseError::kBadChunk);
}

TEST(ResponseStream, CloseDelimitedBodyEndsAtClose) {
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n\r\n";
  const std::string in = head + "everything until the FIN\r\n\r\nHTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  ResponseStream s;
  ASSERT_TRUE(s.expect(K::kOrdinary));
  // Without the close, the response never ends: the look-alike head is body.
  EXPECT_EQ(feed(s, in, {}, false), (std::vector<Record>{head_at(head.size(), 200, 1)}));
  EXPECT_EQ(s.head().body, ResponseBody::kUntilClose);
  EXPECT_FALSE(s.head().keep_alive);
  EXPECT_EQ(s.outstanding(), 1u);
  const ResponseStep end = s.close();
  EXPECT_EQ(end.event, E::kResponseEnd);
  EXPECT_EQ(s.outstanding(), 0u);
  EXPECT_EQ(s.completed(), 1u);
  EXPECT_FALSE(s.last_keep_alive());

  Record closed = end_at(in.size(), 0);
  closed.at_close = true;
  EXPECT_EQ(events_every_way({K::kOrdinary}, in, true), (std::vector<Record>{head_at(head.size(), 200, 1), closed}));
}

TEST(ResponseStream, TransferEncodingWithoutChunkedLastRunsUntilClose) {
  for (const char* te : {"gzip", "chunked, gzip", "identity"}) {
    const std::string head =
        std::string("HTTP/1.1 200 OK\r\nTransfer-Encoding: ") + te + "\r\nContent-Length: 3\r\n\r\n";
    const std::string in = head + "abcdef";
    Record closed = end_at(in.size(), 0);
    closed.at_close = true;
    EXPECT_EQ(events_every_way({K::kOrdinary}, in, true), (std::vector<Record>{head_at(head.size(), 200, 1), closed}))
        << te;
  }
}

TEST(ResponseStream, TransferEncodingChunkedOverridesContentLength) {
  // The client reads such a response by its coding (RFC 9112 6.3), so must we.
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 100\r\nTransfer-Encoding: gzip, chunked\r\n\r\n";
  const std::string in = head + "3\r\nabc\r\n0\r\n\r\n";
  EXPECT_EQ(events_every_way({K::kOrdinary}, in), one_response(head.size(), 200, in.size()));
}

TEST(ResponseStream, HeadResponseConsumesNoBody) {
  const std::string first = "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\nContent-Type: text/html\r\n\r\n";
  const std::string second = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  const std::string in = first + second;
  EXPECT_EQ(events_every_way({K::kHead, K::kOrdinary}, in),
            (std::vector<Record>{head_at(first.size(), 200, 2), end_at(first.size(), 1),
                                 head_at(first.size() + second.size() - 2, 200, 1), end_at(in.size(), 0)}));
  // The same response to a GET would take the second one as its body.
  EXPECT_EQ(run({K::kOrdinary, K::kOrdinary}, in, {}), (std::vector<Record>{head_at(first.size(), 200, 2)}));
}

TEST(ResponseStream, NoBodyFor204And304) {
  const std::string r204 = "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n";
  const std::string r304 = "HTTP/1.1 304 Not Modified\r\nContent-Length: 5000\r\nETag: \"x\"\r\n\r\n";
  const std::string r200 = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  const std::string in = r204 + r304 + r200;
  size_t at = r204.size();
  EXPECT_EQ(events_every_way({K::kOrdinary, K::kOrdinary, K::kOrdinary}, in),
            (std::vector<Record>{head_at(at, 204, 3), end_at(at, 2), head_at(at + r304.size(), 304, 2),
                                 end_at(at + r304.size(), 1), head_at(in.size(), 200, 1), end_at(in.size(), 0)}));
}

TEST(ResponseStream, InterimResponsesPrecedeTheFinalOne) {
  const std::string r100 = "HTTP/1.1 100 Continue\r\n\r\n";
  const std::string r103 = "HTTP/1.1 103 Early Hints\r\nLink: </style.css>; rel=preload\r\nContent-Length: 9\r\n\r\n";
  const std::string r200 = "HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok";
  const std::string in = r100 + r103 + r200;
  EXPECT_EQ(events_every_way({K::kOrdinary}, in),
            (std::vector<Record>{head_at(r100.size(), 100, 1, true), head_at(r100.size() + r103.size(), 103, 1, true),
                                 head_at(in.size() - 2, 201, 1), end_at(in.size(), 0)}));
  ResponseStream s;
  ASSERT_TRUE(s.expect(K::kOrdinary));
  feed(s, r100, {}, false);
  EXPECT_TRUE(s.head().interim);
  EXPECT_EQ(s.completed(), 0u);
  EXPECT_EQ(s.outstanding(), 1u);
}

TEST(ResponseStream, SwitchingProtocolsAfterUpgradeRequest) {
  const std::string head =
      "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
      "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n";
  const std::string in = head + "\x81\x05hello" "HTTP/1.1 200 OK\r\n\r\n";
  const std::vector<Record> events = events_every_way({K::kUpgrade}, in);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], head_at(head.size(), 101, 1));
  EXPECT_EQ(events[1].event, E::kPassThrough);
  EXPECT_EQ(events[1].outstanding, 0u);

  ResponseStream s;
  ASSERT_TRUE(s.expect(K::kUpgrade));
  feed(s, in, {}, false);
  EXPECT_TRUE(s.head().switches);
  EXPECT_EQ(s.completed(), 1u);
  EXPECT_EQ(s.close().event, E::kPassThrough);
}

TEST(ResponseStream, UpgradeDeclinedIsFramedNormally) {
  const std::string first = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
  const std::string second = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  const std::string in = first + second;
  EXPECT_EQ(events_every_way({K::kUpgrade, K::kOrdinary}, in),
            (std::vector<Record>{head_at(first.size() - 3, 200, 2), end_at(first.size(), 1), head_at(in.size(), 200, 1),
                                 end_at(in.size(), 0)}));
}

TEST(ResponseStream, ConnectTunnelAfter2xx) {
  const std::string head = "HTTP/1.1 200 Connection Established\r\n\r\n";
  const std::string in = head + std::string("\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03 TLS bytes", 21);
  const std::vector<Record> events = events_every_way({K::kConnect}, in);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_EQ(events[0], head_at(head.size(), 200, 1));
  EXPECT_EQ(events[1].event, E::kPassThrough);
  EXPECT_EQ(events[1].outstanding, 0u);
}

TEST(ResponseStream, ConnectRefusedIsFramedNormally) {
  const std::string head = "HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 4\r\n\r\n";
  const std::string in = head + "deny";
  EXPECT_EQ(events_every_way({K::kConnect}, in), one_response(head.size(), 407, in.size()));
}

TEST(ResponseStream, SwitchWithoutUpgradeIsAnError) {
  const std::string in = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n";
  EXPECT_EQ(error_of_response(in, K::kOrdinary), ResponseError::kUnexpectedSwitch);
  EXPECT_EQ(error_of_response(in, K::kHead), ResponseError::kUnexpectedSwitch);
  EXPECT_EQ(error_of_response(in, K::kConnect), ResponseError::kUnexpectedSwitch);
  EXPECT_EQ(error_of_response(in, K::kUpgrade), ResponseError::kNone);
}

// Field lines that lie whole in a piece are read in one go, all others byte
// by byte (response_stream.h): the two must end every head the same way.
// Random heads of framing and other fields, in any case, with lists, OWS,
// obs-text, values at and past the framing limit, control bytes, bare CR or
// LF, a space before the colon, folds, past the head and field limits, and a
// usage field, after good and broken status lines: fed whole and byte by byte (and in random pieces), every
// event and everything head() says agree.
TEST(ResponseStream, AWholeFieldLineReadsAsByteByByte) {
  const std::vector<std::string> names = {
      "Content-Length", "content-LENGTH", "Transfer-Encoding", "transfer-encoding", "Connection", "CONNECTION",
      "X-Usage", "x-usage", "Date", "Server", "X-A", std::string(33, 'n'), "content-length-and-more-of-it-here",
      "Content-Lengt", "Bad Name", "Bad@Name", ""};
  const std::vector<std::string> values = {
      "5", " 5 ", "5, 5", "5,6", "x", "0", "chunked", "gzip, chunked", "chunked, chunked", "Chunked", "close",
      "keep-alive", "Close, Keep-Alive", "", " ", "\t12\t", "caf\xc3\xa9", std::string(256, '7'),
      std::string(257, 'a'), std::string(40, 'b'), "a\x01b", "a\nb", "a\x7f", "a\rb", "12345678901234567890",
      "1,,1"};
  const std::vector<std::string> status_lines = {"HTTP/1.1 200 OK", "HTTP/1.0 200 OK", "HTTP/1.1 204 No Content",
                                                 "HTTP/1.1 100 Continue", "HTTP/1.1 304", "HTTP/1.1 200 \xe9",
                                                 "HTTP/2.0 200 OK", "HTTP/1.1 200\n", "HTTP/1.1 20x OK",
                                                 "HTTP/1.1 600 Big", "HTTP/1.1 099 Small", "HTTP/1.1 200 O\x01K",
                                                 "HTTP/1.10 200 OK", "HTTP/1.1 200OK", "HTTP/1.1  200 OK",
                                                 "http/1.1 200 OK", "HTTP/1.1 101 Switching Protocols"};
  std::mt19937 rng(20261202);
  auto pick = [&](const auto& v) -> const auto& { return v[rng() % v.size()]; };
  for (int round = 0; round < 3000; ++round) {
    std::string in = pick(status_lines) + "\r\n";
    const int fields = static_cast<int>(rng() % 7);
    for (int f = 0; f < fields; ++f) {
      std::string line = pick(names);
      if (rng() % 25 == 0) line += " ";  // a space before the colon
      line += ":";
      if (rng() % 2) line += " ";
      line += pick(values);
      if (rng() % 3 == 0) line += "\t ";
      const unsigned end = rng() % 30;
      line += end == 0 ? "\n" : end == 1 ? "\r" : "\r\n";
      if (rng() % 40 == 0) line = " folded" + line;
      in += line;
    }
    in += "\r\n";
    in += std::string(rng() % 8, 'z');
    ResponseLimits limits;
    if (rng() % 4 == 0) limits.max_head_bytes = 40 + rng() % 200;
    if (rng() % 4 == 0) limits.max_fields = static_cast<uint16_t>(rng() % 4);
    const bool fin = rng() % 2;
    auto events = [&](const std::vector<size_t>& cuts) {
      ResponseStream s(limits);
      s.set_usage_field("x-usage");
      EXPECT_TRUE(s.expect(K::kOrdinary));
      return feed(s, in, cuts, fin);
    };
    const std::vector<Record> whole = events({});
    ASSERT_EQ(events(every_byte(in)), whole) << "round " << round << ": " << testing::PrintToString(in);
    std::vector<size_t> cuts;
    for (size_t i = 1; i < in.size(); ++i) {
      if (rng() % 9 == 0) cuts.push_back(i);
    }
    ASSERT_EQ(events(cuts), whole) << "round " << round << " in pieces: " << testing::PrintToString(in);
  }
}

TEST(ResponseStream, PipelinedResponsesSameEventsInAnyPieces) {
  const std::string r1 = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nfirst";
  const std::string r2 = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n6\r\nsecond\r\n0\r\n\r\n";
  const std::string r3 = "HTTP/1.1 429 Too Many Requests\r\nContent-Length: 5\r\nRetry-After: 1\r\n\r\nthird";
  const std::string in = r1 + r2 + r3;
  const std::vector<Record> expected = {
      head_at(r1.size() - 5, 200, 3), end_at(r1.size(), 2),
      head_at(r1.size() + r2.find("\r\n\r\n") + 4, 200, 2), end_at(r1.size() + r2.size(), 1),
      head_at(in.size() - 5, 429, 1), end_at(in.size(), 0)};
  const std::vector<K> kinds = {K::kOrdinary, K::kOrdinary, K::kOrdinary};
  EXPECT_EQ(run(kinds, in, {}), expected) << "one piece";
  EXPECT_EQ(run(kinds, in, every_byte(in)), expected) << "1-byte pieces";
  EXPECT_EQ(events_every_way(kinds, in), expected);
}

TEST(ResponseStream, UnsolicitedResponseIsAnError) {
  const std::string in = "HTTP/1.1 408 Request Timeout\r\nConnection: close\r\n\r\n";
  EXPECT_EQ(events_every_way({}, in), (std::vector<Record>{error_of(ResponseError::kUnsolicited, 0)}));
  // One more response than requests: the first is framed, the second refused.
  const std::string ok = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  EXPECT_EQ(events_every_way({K::kOrdinary}, ok + in),
            (std::vector<Record>{head_at(ok.size(), 200, 1), end_at(ok.size(), 0),
                                 error_of(ResponseError::kUnsolicited, 0)}));
  // Nothing to frame, nothing to refuse.
  ResponseStream s;
  EXPECT_EQ(s.next({}).event, E::kNeedMore);
}

TEST(ResponseStream, DuplicateIdenticalContentLengthAccepted) {
  for (const char* fields : {"Content-Length: 4\r\nContent-Length: 4\r\n", "Content-Length: 4, 4\r\n",
                             "Content-Length:4 \r\n", "content-length: 4\r\nCONTENT-LENGTH:  4,4\r\n"}) {
    const std::string head = std::string("HTTP/1.1 200 OK\r\n") + fields + "\r\n";
    const std::string in = head + "body";
    EXPECT_EQ(events_every_way({K::kOrdinary}, in), one_response(head.size(), 200, in.size()))
        << fields;
  }
}

TEST(ResponseStream, ConflictingContentLengthIsAnError) {
  EXPECT_EQ(error_of_response("HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\nbody!"),
            ResponseError::kConflictingContentLength);
  EXPECT_EQ(error_of_response("HTTP/1.1 200 OK\r\nContent-Length: 4, 40\r\n\r\nbody"),
            ResponseError::kConflictingContentLength);
}

TEST(ResponseStream, InvalidContentLengthIsAnError) {
  for (const char* value : {"", "-1", "+4", "4 4", "0x10", "4,", "1234567890123456789", "4;q"}) {
    EXPECT_EQ(error_of_response(std::string("HTTP/1.1 200 OK\r\nContent-Length: ") + value + "\r\n\r\n"),
              ResponseError::kBadContentLength)
        << '"' << value << '"';
  }
}

TEST(ResponseStream, TransferEncodingErrors) {
  EXPECT_EQ(error_of_response("HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n"),
            ResponseError::kTransferEncodingInHttp10);
  EXPECT_EQ(error_of_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n"),
            ResponseError::kBadTransferEncoding);
  EXPECT_EQ(error_of_response("HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked, gzip, chunked\r\n\r\n"),
            ResponseError::kBadTransferEncoding);
  // A framing value of kMaxFramingValue bytes (leading whitespace aside) is
  // read; one byte more is not.
  const std::string longest = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip," +
                              std::string(ResponseStream::kMaxFramingValue - 13, ' ') + "chunked \r\n\r\n";
  EXPECT_EQ(events_every_way({K::kOrdinary}, longest + "0\r\n\r\n"),
            one_response(longest.size(), 200, longest.size() + 5));
  const std::string too_long = "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip," +
                               std::string(ResponseStream::kMaxFramingValue - 12, ' ') + "chunked \r\n\r\n";
  EXPECT_EQ(error_of_response(too_long), ResponseError::kFramingFieldTooLong);
}

TEST(ResponseStream, MalformedStatusLinesAreErrors) {
  struct Case {
    const char* line;
    ResponseError error;
  };
  for (const Case& c : std::vector<Case>{
           {"HTTP/2.0 200 OK", ResponseError::kBadVersion},
           {"HTTP/0.9 200 OK", ResponseError::kBadVersion},
           {"http/1.1 200 OK", ResponseError::kBadStatusLine},
           {"HTTP/1.1  200 OK", ResponseError::kBadStatusLine},
           {"HTTP/1.1 20 OK", ResponseError::kBadStatusLine},
           {"HTTP/1.1 2000 OK", ResponseError::kBadStatusLine},
           {"HTTP/1.1 600 Nope", ResponseError::kBadStatusLine},
           {"HTTP/1.1 099 Low", ResponseError::kBadStatusLine},
           {"HTTP/1.1 200 O\x01K", ResponseError::kBadStatusLine},
           {"HTTP/1.1 2x0 OK", ResponseError::kBadStatusLine},
           {"HTTP/11 200 OK", ResponseError::kBadStatusLine},
           {"\r\nHTTP/1.1 200 OK", ResponseError::kBadStatusLine},
       }) {
    EXPECT_EQ(error_of_response(std::string(c.line) + "\r\nContent-Length: 0\r\n\r\n"), c.error) << c.line;
  }
  EXPECT_EQ(error_of_response("HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n"), ResponseError::kBadLineEnding);
  EXPECT_EQ(error_of_response("HTTP/1.1 200 OK\r\rContent-Length: 0\r\n\r\n"), ResponseError::kBadLineEnding);
}

TEST(ResponseStream, StatusLineVariantsThatFrameTheSame) {
  // An empty reason, with or without its SP, and obs-text in a reason.
  for (const char* line : {"HTTP/1.1 200 ", "HTTP/1.1 200", "HTTP/1.1 200 D\xe9j\xe0 vu", "HTTP/1.0 599 x"}) {
    const std::string head = std::string(line) + "\r\nContent-Length: 1\r\n\r\n";
    const std::vector<Record> events = events_every_way({K::kOrdinary}, head + "z");
    ASSERT_EQ(events.size(), 2u) << line;
    EXPECT_EQ(events[1], end_at(head.size() + 1, 0)) << line;
  }
}

TEST(ResponseStream, MalformedFieldLinesAreErrors) {
  struct Case {
    const char* fields;
    ResponseError error;
  };
  for (const Case& c : std::vector<Case>{
           {"Content-Length : 0\r\n", ResponseError::kBadField},    // space before ':'
           {"X-A: 1\r\n folded\r\n", ResponseError::kBadField},     // obs-fold
           {" Content-Length: 0\r\n", ResponseError::kBadField},    // whitespace-led first line
           {": empty\r\n", ResponseError::kBadField},               // empty name
           {"No colon here\r\n", ResponseError::kBadField},
           {"X-A: a\x01z\r\n", ResponseError::kBadField},           // control byte, skipped field
           {"Connection: a\x7fz\r\n", ResponseError::kBadField},    // control byte, framing field
           {"X-A: 1\n", ResponseError::kBadLineEnding},
           {"X-A: 1\r\r\n", ResponseError::kBadLineEnding},
           {"X-A\n", ResponseError::kBadLineEnding},
       }) {
    EXPECT_EQ(error_of_response(std::string("HTTP/1.1 200 OK\r\n") + c.fields + "\r\n"), c.error) << c.fields;
  }
  EXPECT_EQ(error_of_response("HTTP/1.1 200 OK\r\nX-A: 1\r\n\n"), ResponseError::kBadLineEnding);
}

TEST(ResponseStream, OversizedHeadIsAnError) {
  const ResponseLimits limits;
  // A head of exactly the limit is framed, one byte more is not.
  const std::string start = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-Pad: ";
  const std::string end = "\r\n\r\n";
  const std::string fits = start + std::string(limits.max_head_bytes - start.size() - end.size(), 'p') + end;
  ASSERT_EQ(fits.size(), 64u * 1024);
  EXPECT_EQ(run({K::kOrdinary}, fits, {}), one_response(fits.size(), 200, fits.size()));
  const std::string over = start + std::string(limits.max_head_bytes - start.size() - end.size() + 1, 'p') + end;
  EXPECT_EQ(run({K::kOrdinary}, over, {}), (std::vector<Record>{error_of(ResponseError::kHeadTooLarge, 1)}));
  EXPECT_EQ(run({K::kOrdinary}, over, every_byte(over)),
            (std::vector<Record>{error_of(ResponseError::kHeadTooLarge, 1)}));
  // Many short lines, never ending: the size bound holds without an end.
  std::string endless = "HTTP/1.1 200 OK\r\n";
  while (endless.size() < 200 * 1024) endless += "Set-Cookie: a=b\r\n";
  EXPECT_EQ(run({K::kOrdinary}, endless, {}, false, {.max_head_bytes = 1 << 20, .max_fields = 20000}),
            (std::vector<Record>{}));
  EXPECT_EQ(run({K::kOrdinary}, endless, {}, false, {.max_fields = 20000}),
            (std::vector<Record>{error_of(ResponseError::kHeadTooLarge, 1)}));
  EXPECT_EQ(run({K::kOrdinary}, endless, {}), (std::vector<Record>{error_of(ResponseError::kTooManyFields, 1)}));
}

TEST(ResponseStream, TooManyFieldLinesIsAnError) {
  std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n";
  for (int i = 1; i < 256; ++i) head += "X: 1\r\n";
  EXPECT_EQ(error_of_response(head + "\r\n"), ResponseError::kNone) << "256 lines";
  EXPECT_EQ(error_of_response(head + "X: 1\r\n\r\n"), ResponseError::kTooManyFields) << "257 lines";
}

TEST(ResponseStream, ConnectionCloseAndKeepAlive) {
  struct Case {
    const char* head;
    bool close, keep_alive;
  };
  for (const Case& c : std::vector<Case>{
           {"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n", false, true},
           {"HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", true, false},
           {"HTTP/1.1 200 OK\r\nConnection: Keep-Alive, CLOSE\r\nContent-Length: 0\r\n\r\n", true, false},
           {"HTTP/1.0 200 OK\r\nContent-Length: 0\r\n\r\n", false, false},
           {"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 0\r\n\r\n", false, true},
           {"HTTP/1.1 200 OK\r\nConnection: closed\r\nContent-Length: 0\r\n\r\n", false, true},
       }) {
    ResponseStream s;
    ASSERT_TRUE(s.expect(K::kOrdinary));
    const std::vector<Record> events = feed(s, c.head, {}, false);
    ASSERT_EQ(events.size(), 2u) << c.head;
    EXPECT_EQ(events[1].event, E::kResponseEnd) << c.head;
    EXPECT_EQ(s.last_connection_close(), c.close) << c.head;
    EXPECT_EQ(s.last_keep_alive(), c.keep_alive) << c.head;
  }
}

TEST(ResponseStream, TruncatedByCloseIsAnError) {
  for (const char* in : {"HTTP/1.1 200 OK\r\nContent-Le", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nshort",
                         "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"}) {
    std::vector<Record> events = events_every_way({K::kOrdinary}, in, true);
    ASSERT_FALSE(events.empty()) << in;
    EXPECT_EQ(events.back(), (Record{E::kError, ResponseError::kTruncated, 0, 0, false, 1, true})) << in;
  }
}

TEST(ResponseStream, CloseBetweenResponsesLeavesRequestsOutstanding) {
  const std::string r1 = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";
  ResponseStream s;
  ASSERT_TRUE(s.expect(K::kOrdinary));
  ASSERT_TRUE(s.expect(K::kOrdinary));
  Record closed{E::kNeedMore, ResponseError::kNone, r1.size(), 0, false, 1, true};
  EXPECT_EQ(feed(s, r1, {}, true), (std::vector<Record>{head_at(r1.size() - 2, 200, 2), end_at(r1.size(), 1), closed}));
  EXPECT_EQ(s.outstanding(), 1u);
  EXPECT_EQ(s.close().event, E::kNeedMore) << "close is idempotent";
  // Bytes after the FIN cannot be the origin's.
  EXPECT_EQ(s.next(std::string_view("HTTP/1.1 200 OK\r\n")).event, E::kError);
  EXPECT_EQ(s.error(), ResponseError::kDataAfterClose);
}

TEST(ResponseStream, ErrorsAreSticky) {
  ResponseStream s;
  ASSERT_TRUE(s.expect(K::kOrdinary));
  ASSERT_TRUE(s.expect(K::kOrdinary));
  const ResponseStep bad = s.next(std::string_view("HTTP/1.1 200 OK\r\nBad Name: 1\r\n\r\n"));
  EXPECT_EQ(bad.event, E::kError);
  EXPECT_EQ(bad.consumed, 0u);
  const ResponseStep again = s.next(std::string_view("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"));
  EXPECT_EQ(again.event, E::kError);
  EXPECT_EQ(again.error, ResponseError::kBadField);
  EXPECT_EQ(s.close().event, E::kError);
  EXPECT_EQ(s.outstanding(), 2u);
}

TEST(ResponseStream, QueueIsBoundedAndReusedInOrder) {
  ResponseStream s;
  for (size_t i = 0; i < ResponseStream::kMaxOutstanding; ++i) ASSERT_TRUE(s.expect(K::kOrdinary)) << i;
  EXPECT_FALSE(s.expect(K::kOrdinary));
  EXPECT_EQ(s.outstanding(), ResponseStream::kMaxOutstanding);
  // Many times around the ring, the kinds kept in order: every third request
  // is a HEAD whose response carries a Content-Length but no body.
  const std::string get = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc";
  const std::string head = "HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\n";
  s.reset();
  for (int i = 0; i < 200; ++i) {
    const bool is_head = i % 3 == 0;
    while (s.outstanding() < ResponseStream::kMaxOutstanding) {
      const int n = i + static_cast<int>(s.outstanding());
      ASSERT_TRUE(s.expect(n % 3 == 0 ? K::kHead : K::kOrdinary));
    }
    const std::vector<Record> events = feed(s, is_head ? head : get, {}, false);
    ASSERT_EQ(events.size(), 2u) << "response " << i;
    EXPECT_EQ(events[1], end_at(is_head ? head.size() : get.size(), ResponseStream::kMaxOutstanding - 1))
        << "response " << i;
  }
  EXPECT_EQ(s.completed(), 200u);
}

// The data plane inserts the RateLimit fields right after a final response's
// status line: asked to, the stream stops there, once per status line
// (interim ones included, with their code), wherever the segments are cut;
// by default it does not.
TEST(ResponseStream, ReportsWhereEachStatusLineEndsWhenAsked) {
  const std::string input =
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
      "HTTP/1.1 204\r\n\r\n";
  const size_t first_lf = std::string("HTTP/1.1 100 Continue\r\n").size();
  const size_t second_lf = input.find("OK\r\n") + 4;
  const size_t third_lf = input.find("204\r\n") + 5;
  for (size_t cut : {input.size(), size_t{1}, size_t{7}}) {  // whole, byte by byte, in sevens
    ResponseStream s;
    s.report_status_lines(true);
    ASSERT_TRUE(s.expect(K::kOrdinary));
    ASSERT_TRUE(s.expect(K::kOrdinary));
    std::vector<std::pair<size_t, uint16_t>> lines;
    size_t heads = 0, ends = 0;
    for (size_t pos = 0; pos < input.size();) {
      const size_t len = std::min(cut, input.size() - pos);
      size_t off = 0;
      for (;;) {
        const ResponseStep st = s.next(std::span<const char>(input.data() + pos + off, len - off));
        off += st.consumed;
        if (st.event == E::kStatusLine) lines.emplace_back(pos + off, s.status_line_code());
        if (st.event == E::kHead) ++heads;
        if (st.event == E::kResponseEnd) ++ends;
        ASSERT_NE(st.event, E::kError) << to_string(st.error);
        if (st.event == E::kNeedMore) break;
      }
      pos += len;
    }
    const std::vector<std::pair<size_t, uint16_t>> want = {{first_lf, 100}, {second_lf, 200}, {third_lf, 204}};
    EXPECT_EQ(lines, want) << "cut " << cut;
    EXPECT_EQ(heads, 3u);
    EXPECT_EQ(ends, 2u);
  }
  ResponseStream quiet;
  ASSERT_TRUE(quiet.expect(K::kOrdinary));
  EXPECT_EQ(quiet.next(std::string_view("HTTP/1.1 200 OK\r\nContent-Le")).event, E::kNeedMore);
}

// DQ05 from the responses: the tokens a request used, reported by the origin
// in a field of the response head, whatever the case of its name; a value
// that is not a number charges nothing and breaks nothing; interim heads and
// other responses carry none.
TEST(ResponseStream, DQ05_ReadsTheUsageFieldOfAHead) {
  ResponseStream s;
  s.set_usage_field("x-pi-usage-tokens");
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(s.expect(K::kOrdinary));
  const std::string input =
      "HTTP/1.1 100 Continue\r\n\r\n"
      "HTTP/1.1 200 OK\r\nX-Pi-Usage-Tokens: 1234\r\nContent-Length: 2\r\n\r\nok"
      "HTTP/1.1 200 OK\r\nx-pi-usage-tokens: lots\r\nContent-Length: 0\r\n\r\n"
      "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
  std::vector<std::pair<bool, uint64_t>> heads;
  for (size_t off = 0; off < input.size();) {
    const ResponseStep st = s.next(std::span<const char>(input.data() + off, input.size() - off));
    off += st.consumed;
    ASSERT_NE(st.event, E::kError) << to_string(st.error);
    if (st.event == E::kHead) heads.emplace_back(s.head().has_usage, s.head().usage);
    if (st.event == E::kNeedMore) break;
  }
  const std::vector<std::pair<bool, uint64_t>> want = {{false, 0}, {true, 1234}, {false, 0}, {false, 0}};
  EXPECT_EQ(heads, want);
}

// DQ05 from a chunked response's trailer section (what an upstream that
// streams its answer knows only at the end): read when the response ends,
// whatever the case of the name, fed whole or a byte at a time; the last
// such field counts; a value that is not a whole number, another field, a
// field that only begins like it, or a Content-Length response after a
// chunked one carry none.
TEST(ResponseStream, DQ05_ReadsTheUsageFieldOfAChunkedTrailer) {
  struct Case {
    std::string response;
    bool has;
    uint64_t usage;
  };
  const std::vector<Case> cases = {
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nok\r\n0\r\nX-Pi-Usage-Tokens: 4321\r\n\r\n", true, 4321},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nx-pi-usage-tokens:\t 7 \r\n\r\n", true, 7},
      {"HTTP/1.1 200 OK\r\nX-Pi-Usage-Tokens: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Pi-Usage-Tokens: 9\r\n\r\n",
       true, 9},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Pi-Usage-Tokens: 3\r\nX-Pi-Usage-Tokens: 4\r\n\r\n",
       true, 4},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Pi-Usage-Tokens: 3\r\nX-Pi-Usage-Tokens: x\r\n\r\n",
       false, 0},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Pi-Usage-Tokens: 12a\r\n\r\n", false, 0},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Pi-Usage-Tokens: 1234567890123456789\r\n\r\n", false, 0},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Pi-Usage-Tokens-2: 8\r\n\r\n", false, 0},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\nX-Pi-Usage: 8\r\n\r\n", false, 0},
      {"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", false, 0},
  };
  for (const Case& c : cases) {
    for (const bool bytewise : {false, true}) {
      ResponseStream s;
      s.set_usage_field("x-pi-usage-tokens");
      s.reset();  // keeps the field, as a parse context's reuse does
      ASSERT_TRUE(s.expect(K::kOrdinary));
      ASSERT_TRUE(s.expect(K::kOrdinary));
      // The response, then one with a length (which must not inherit the trailer's number).
      const std::string input = c.response + "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\nx";
      std::vector<std::pair<bool, uint64_t>> ends;
      size_t off = 0;
      while (off < input.size()) {
        const size_t len = bytewise ? 1 : input.size() - off;
        const ResponseStep st = s.next(std::span<const char>(input.data() + off, len));
        off += st.consumed;
        ASSERT_NE(st.event, E::kError) << to_string(st.error) << " in " << c.response;
        if (st.event == E::kResponseEnd) ends.emplace_back(s.head().has_usage, s.head().usage);
      }
      ASSERT_EQ(ends.size(), 2u) << c.response;
      EXPECT_EQ(ends[0], std::make_pair(c.has, c.usage)) << c.response << (bytewise ? " (byte by byte)" : "");
      EXPECT_EQ(ends[1], std::make_pair(false, uint64_t{0})) << c.response;
    }
  }
}

TEST(ResponseStream, ResetStartsAFreshFlow) {
  ResponseStream s;
  ASSERT_TRUE(s.expect(K::kOrdinary));
  EXPECT_EQ(s.next(std::string_view("HTTP/1.1 200 OK\r\nContent-Le")).event, E::kNeedMore);
  s.reset();
  EXPECT_EQ(s.outstanding(), 0u);
  EXPECT_EQ(s.completed(), 0u);
  EXPECT_TRUE(s.at_boundary());
  // The half head is forgotten: this is a new response, for a new request.
  EXPECT_EQ(s.next(std::string_view("HTTP/1.1 200 OK\r\n\r\n")).event, E::kError) << "nothing expected yet";
  s.reset();
  ASSERT_TRUE(s.expect(K::kHead));
  const std::string in = "HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n";
  EXPECT_EQ(feed(s, in, {}, false), (std::vector<Record>{head_at(in.size(), 200, 1), end_at(in.size(), 0)}));
}

TEST(ResponseStream, RequestKindOfParsedRequests) {
  struct Case {
    const char* request;
    RequestKind kind;
  };
  for (const Case& c : std::vector<Case>{
           {"GET / HTTP/1.1\r\nHost: h\r\n\r\n", K::kOrdinary},
           {"HEAD / HTTP/1.1\r\nHost: h\r\n\r\n", K::kHead},
           {"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n", K::kConnect},
           {"GET /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", K::kUpgrade},
           {"GET /ws HTTP/1.1\r\nHost: h\r\nUpgrade: websocket\r\n\r\n", K::kOrdinary},  // not in Connection
           {"HEAD /ws HTTP/1.1\r\nHost: h\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", K::kHead},
       }) {
    test::HeadHarness harness;
    const test::HeadOutcome outcome = harness.whole(c.request);
    ASSERT_EQ(outcome.status, HeadStatus::kComplete) << c.request;
    EXPECT_EQ(request_kind(harness.parser().head()), c.kind) << c.request;
  }
}

TEST(ResponseStream, EveryErrorHasItsOwnName) {
  std::vector<std::string_view> names;
  for (int e = 0; e <= static_cast<int>(ResponseError::kDataAfterClose); ++e) {
    const std::string_view name = to_string(static_cast<ResponseError>(e));
    EXPECT_NE(name, "unknown") << e;
    EXPECT_EQ(std::count(names.begin(), names.end(), name), 0) << name;
    names.push_back(name);
  }
  EXPECT_EQ(to_string(ResponseError::kUnsolicited), "unsolicited");
}

TEST(ResponseStream, FixedSizeNoexceptAndOwnsNothing) {
  static_assert(std::is_trivially_destructible_v<ResponseStream>);
  static_assert(noexcept(std::declval<ResponseStream&>().next(std::span<const char>())));
  static_assert(noexcept(std::declval<ResponseStream&>().close()));
  static_assert(noexcept(std::declval<ResponseStream&>().expect(K::kOrdinary)));
  EXPECT_LE(sizeof(ResponseStream), 512u);
}

// Four pipelined requests to nginx 1.22.1 (Debian 12) on one connection, and
// the exact bytes it answered: GET /index.html (Content-Length), HEAD
// /index.html (Content-Length, no body), GET /missing (404), and GET
// /data.json with Accept-Encoding: gzip and Connection: close (gzip, chunked,
// Connection: close). Captured from a socket on 2026-11-30; the gzip chunk's
// 958 bytes are kept as hex.
std::string nginx_capture() {
  static constexpr std::string_view kText =
    "HTTP/1.1 200 OK\r\n"
    "Server: nginx/1.22.1\r\n"
    "Date: Mon, 30 Nov 2026 00:52:39 GMT\r\n"
    "Content-Type: text/html\r\n"
    "Content-Length: 615\r\n"
    "Last-Modified: Mon, 30 Nov 2026 00:52:35 GMT\r\n"
    "Connection: keep-alive\r\n"
    "ETag: \"6b0cc8d3-267\"\r\n"
    "Accept-Ranges: bytes\r\n"
    "\r\n"
    "<!DOCTYPE html>\n"
    "<html>\n"
    "<head>\n"
    "<title>Welcome to nginx!</title>\n"
    "<style>\n"
    "html { color-scheme: light dark; }\n"
    "body { width: 35em; margin: 0 auto;\n"
    "font-family: Tahoma, Verdana, Arial, sans-serif; }\n"
    "</style>\n"
    "</head>\n"
    "<body>\n"
    "<h1>Welcome to nginx!</h1>\n"
    "<p>If you see this page, the nginx web server is successfully installed and\n"
    "working. Further configuration is required.</p>\n"
    "\n"
    "<p>For online documentation and support please refer to\n"
    "<a href=\"http://nginx.org/\">nginx.org</a>.<br/>\n"
    "Commercial support is available at\n"
    "<a href=\"http://nginx.com/\">nginx.com</a>.</p>\n"
    "\n"
    "<p><em>Thank you for using nginx.</em></p>\n"
    "</body>\n"
    "</html>\n"
    "HTTP/1.1 200 OK\r\n"
    "Server: nginx/1.22.1\r\n"
    "Date: Mon, 30 Nov 2026 00:52:39 GMT\r\n"
    "Content-Type: text/html\r\n"
    "Content-Length: 615\r\n"
    "Last-Modified: Mon, 30 Nov 2026 00:52:35 GMT\r\n"
    "Connection: keep-alive\r\n"
    "ETag: \"6b0cc8d3-267\"\r\n"
    "Accept-Ranges: bytes\r\n"
    "\r\n"
    "HTTP/1.1 404 Not Found\r\n"
    "Server: nginx/1.22.1\r\n"
    "Date: Mon, 30 Nov 2026 00:52:39 GMT\r\n"
    "Content-Type: text/html\r\n"
    "Content-Length: 153\r\n"
    "Connection: keep-alive\r\n"
    "\r\n"
    "<html>\r\n"
    "<head><title>404 Not Found</title></head>\r\n"
    "<body>\r\n"
    "<center><h1>404 Not Found</h1></center>\r\n"
    "<hr><center>nginx/1.22.1</center>\r\n"
    "</body>\r\n"
    "</html>\r\n"
    "HTTP/1.1 200 OK\r\n"
    "Server: nginx/1.22.1\r\n"
    "Date: Mon, 30 Nov 2026 00:52:39 GMT\r\n"
    "Content-Type: application/json\r\n"
    "Last-Modified: Mon, 30 Nov 2026 00:52:35 GMT\r\n"
    "Transfer-Encoding: chunked\r\n"
    "Connection: close\r\n"
    "ETag: W/\"6b0cc8d3-18f7\"\r\n"
    "Content-Encoding: gzip\r\n"
    "\r\n"
    "3be\r\n";
  static constexpr std::string_view kGzipHex =
    "1f8b08000000000004036dd7bd8e5d451444e157b12636d2a9fe6f5e051120e1c0814920b3fcee6c9083aabb6e34a36a6907df9c60d6f78f"
    "afff7cf9f6f7c7af9f7efbfef1f5cffaf97cfef4f1d71fdfbed4afffbffdf27cfcf8fce9e7a35e1f658fedf5b1d9637f7decf6385e1f873d"
    "ced7c7698febf571d9e37e7ddcf6785e1f8f3dded7c76b8f0291c28848ae2430c99d0428b9944025b712b0e45a0297dc4b00938b09647233"
    "014daed6a0d65cad41adb95a835a73b506b5e66a0d6acdd51ad49aab35a835576b506baed6a0d65cad41adb95a875a77b50eb5ee6a1d6add"
    "d53ad4baab75a87557eb50ebaed6a1d65dad43adbb5a875a77b50eb5ee6a036ac3d506d486ab0da80d571b501bae36a0365c6d406db8da80"
    "da70b501b5e16a036ac3d506d486ab4da84d579b509bae36a1365d6d426dbada84da74b509b5e96a136ad3d526d4a6ab4da84d579b509bae"
    "b6a0b65c6d416db9da82da72b505b5e56a0b6acbd516d496ab2da82d575b505baeb6a0b65c6d416db9da86da76b50db5ed6a1b6adbd536d4"
    "b6ab6da86d57db50dbaeb6a1b65d6d436dbbda86da76b50db5ed6a076ac7d50ed48eab1da81d573b503bae76a0765ced40edb8da81da71b5"
    "03b5e36a076ac7d50ed48eab5da85d57bb50bbae76a1765ded42edbada85da75b50bb5eb6a176ad7d52ed4aeab5da85d57bb50bbaea6076c"
    "35c5bfc180d3e3727a4057535c009e1ed7d303be9ae20200f5b8a01e10d6141780a8c715f580b1a6b800483d21f926185e8a81920ac937d1"
    "90d5f0261bb21bde844396c39b74c87678130f590f6ff221fbe14d406441bc4988680831226af2bf053342d1116248d41417f84d464b8831"
    "51535ce037193d2106454d7181df643485181535c5057e93d1156258d4e41798168ab610e3a2a6b840c9e80b31306a8a0b948cc61023a3a6"
    "b840c9e80c31346a8a0b948cd61063a326bfc0dc50f486181c35c5054a467388d151535ca0647487181e35c5054a467b88f151535ca064f4"
    "87182035f9052688a241c408a9292e50323a440c919ae20225a345c418a9292e50327a440c929ae20225a349c428a9c92f304b145d228649"
    "4d718192d126629cd4141728197d22064a4d718192d12862a4d4141728199d22864a4d7e81a9a2681531566a8a0b948c5e1183a5a6b840c9"
    "6816315a6a8a0b948c6e11c3a5a6b840c96817315e6af20bcc1745bf880153535ca064348c183135c5054a46c7882153535ca064b48c1833"
    "35c5054a46cf884153935f60d2289a468c9a9ae20225a36bc4b0a9292e5032da468c9b9ae20225a36fc4c0a9292e50f2bfc6f9fdc7bf061c"
    "8a21f7180000";
  std::string out(kText);
  for (size_t i = 0; i + 1 < kGzipHex.size(); i += 2) {
    out.push_back(static_cast<char>(std::stoi(std::string(kGzipHex.substr(i, 2)), nullptr, 16)));
  }
  out += "\r\n0\r\n\r\n";
  return out;
}

TEST(ResponseStream, RealNginxResponses) {
  const std::string in = nginx_capture();
  ASSERT_EQ(in.size(), 2621u);
  // Each response starts where the one before ends.
  std::vector<size_t> starts;
  for (size_t at = in.find("HTTP/1.1 "); at != std::string::npos; at = in.find("HTTP/1.1 ", at + 1)) {
    starts.push_back(at);
  }
  ASSERT_EQ(starts.size(), 4u);
  auto head_end = [&](size_t start) { return in.find("\r\n\r\n", start) + 4; };
  const std::vector<Record> expected = {
      head_at(head_end(starts[0]), 200, 4), end_at(starts[1], 3),
      head_at(head_end(starts[1]), 200, 3), end_at(starts[2], 2),  // HEAD: the head is the whole response
      head_at(head_end(starts[2]), 404, 2), end_at(starts[3], 1),
      head_at(head_end(starts[3]), 200, 1), end_at(in.size(), 0),
  };
  const std::vector<K> kinds = {K::kOrdinary, K::kHead, K::kOrdinary, K::kOrdinary};
  EXPECT_EQ(events_every_way(kinds, in), expected);

  ResponseStream s;
  for (K k : kinds) ASSERT_TRUE(s.expect(k));
  ASSERT_EQ(feed(s, in, {}, false), expected);
  EXPECT_EQ(s.head().body, ResponseBody::kChunked);
  EXPECT_TRUE(s.last_connection_close());
  EXPECT_FALSE(s.last_keep_alive());
  EXPECT_EQ(s.completed(), 4u);
  // nginx closes after "Connection: close": a clean end.
  EXPECT_EQ(s.close().event, E::kNeedMore);
}

}  // namespace
}  // namespace sluice::http
