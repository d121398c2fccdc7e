// BodyFramer: where Content-Length and chunked bodies end, split anywhere,
// and the chunked syntax it refuses.
#include <gtest/gtest.h>

#include <string>

#include "http/body_framer.h"

namespace sluice::http {
namespace {

struct Framed {
  BodyStatus status;
  ParseError error;
  size_t consumed;
  bool operator==(const Framed&) const = default;
};

Framed frame_chunked(std::string_view in, const std::vector<size_t>& cuts = {}, BodyLimits limits = {}) {
  BodyFramer f(limits);
  f.start_chunked();
  size_t begin = 0;
  std::vector<size_t> ends(cuts);
  ends.push_back(in.size());
  BodyStep s{BodyStatus::kMore, ParseError::kNone, 0};
  for (size_t end : ends) {
    s = f.feed(in.substr(begin, end - begin));
    if (s.status != BodyStatus::kMore) return {s.status, s.error, begin + s.consumed};
    begin = end;
  }
  return {s.status, s.error, in.size()};
}

// Frames `in` whole and cut at every offset and every pair of offsets
// (bounded), checking they agree; returns the whole result.
Framed frame_every_way(std::string_view in) {
  const Framed whole = frame_chunked(in);
  for (size_t a = 1; a < in.size(); ++a) {
    EXPECT_EQ(frame_chunked(in, {a}), whole) << "cut at " << a;
    for (size_t b = a + 1; b < in.size() && b < a + 8; ++b) EXPECT_EQ(frame_chunked(in, {a, b}), whole);
  }
  std::vector<size_t> every;
  for (size_t i = 1; i < in.size(); ++i) every.push_back(i);
  EXPECT_EQ(frame_chunked(in, every), whole) << "byte by byte";
  return whole;
}

TEST(BodyFramer, ContentLengthEndsExactly) {
  BodyFramer f;
  f.start_length(10);
  BodyStep s = f.feed(std::string_view("0123"));
  EXPECT_EQ(s.status, BodyStatus::kMore);
  EXPECT_EQ(s.consumed, 4u);
  s = f.feed(std::string_view("456789GET / HTTP/1.1"));
  EXPECT_EQ(s.status, BodyStatus::kDone);
  EXPECT_EQ(s.consumed, 6u);
  EXPECT_TRUE(f.done());
}

TEST(BodyFramer, ZeroLengthIsDoneAtOnce) {
  BodyFramer f;
  f.start_length(0);
  EXPECT_TRUE(f.done());
}

TEST(BodyFramer, ChunkedEndsAfterTheLastChunkAndTrailers) {
  const std::string body = "5\r\nhello\r\n1a\r\nabcdefghijklmnopqrstuvwxyz\r\n0\r\n\r\n";
  const Framed r = frame_every_way(body + "NEXT");
  EXPECT_EQ(r.status, BodyStatus::kDone);
  EXPECT_EQ(r.consumed, body.size());
}

TEST(BodyFramer, ChunkExtensionsAndTrailersAreSkipped) {
  const std::string body =
      "4;name=value;flag ; q=\"a \\\"quoted\\\" ;x\"\r\nwxyz\r\n"
      "A \t;ext\r\n0123456789\r\n"
      "0;last\r\nChecksum: abc\r\nX-Usage-Tokens: 42\r\n\r\n";
  const Framed r = frame_every_way(body + "GET");
  EXPECT_EQ(r.status, BodyStatus::kDone);
  EXPECT_EQ(r.consumed, body.size());
}

TEST(BodyFramer, ChunkDataMayHoldAnything) {
  std::string data(300, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7);
  data.replace(10, 8, "\r\n0\r\n\r\nX");  // framing look-alikes inside data
  const std::string body = "12c\r\n" + data + "\r\n0\r\n\r\n";
  const Framed r = frame_every_way(body);
  EXPECT_EQ(r.status, BodyStatus::kDone);
  EXPECT_EQ(r.consumed, body.size());
}

TEST(BodyFramer, RefusesMalformedChunking) {
  const std::vector<std::string> bad = {
      "\r\n",                   // no size
      "x\r\n",                  // not hex
      "-1\r\n",                 // sign
      "0x5\r\nhello\r\n0\r\n\r\n",  // 0x prefix
      "5 \r\nhello\r\n0\r\n\r\n",   // whitespace without an extension
      "5\nhello\r\n0\r\n\r\n",      // bare LF after the size
      "5\r\nhello\n0\r\n\r\n",      // bare LF after the data
      "5\r\nhelloX\r\n0\r\n\r\n",   // data longer than its size
      "5\r\nhello\r\n0\r\n\n",      // bare LF at the end
      "5;\r\nhello\r\n0\r\n\r\n",   // ';' without a name
      "5;a=\r\nhello\r\n0\r\n\r\n",  // '=' without a value
      "5;a=\"x\r\nhello\r\n0\r\n\r\n",  // unterminated quoted string
      "5;a\x01\r\nhello\r\n0\r\n\r\n",  // control byte in an extension
      "11111111111111111\r\n",         // 17 hex digits
      "0\r\n X: folded\r\n\r\n",       // obs-fold in trailers
      "0\r\nX : y\r\n\r\n",            // whitespace before colon in a trailer
      "0\r\nX: a\x01\r\n\r\n",         // control byte in a trailer value
      "0\r\nX: a\r\r\n\r\n",           // bare CR in a trailer
  };
  for (const std::string& in : bad) {
    const Framed r = frame_chunked(in);
    EXPECT_EQ(r.status, BodyStatus::kError) << in;
    EXPECT_EQ(r.error, ParseError::kBadChunk) << in;
  }
}

TEST(BodyFramer, SizeLineAndTrailersAreBounded) {
  BodyLimits limits;
  limits.max_chunk_line = 32;
  limits.max_trailer_bytes = 40;
  limits.max_trailer_fields = 2;
  EXPECT_EQ(frame_chunked("5;" + std::string(40, 'a') + "\r\nhello\r\n0\r\n\r\n", {}, limits).error, ParseError::kBadChunk);
  EXPECT_EQ(frame_chunked("0\r\nX: " + std::string(60, 'a') + "\r\n\r\n", {}, limits).error, ParseError::kHeadTooLarge);
  EXPECT_EQ(frame_chunked("0\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n", {}, limits).error, ParseError::kTooManyFields);
  EXPECT_EQ(frame_chunked("0\r\nA: 1\r\nB: 2\r\n\r\n", {}, limits).status, BodyStatus::kDone);
}

TEST(BodyFramer, AFailedFramerStaysFailed) {
  BodyFramer f;
  f.start_chunked();
  EXPECT_EQ(f.feed(std::string_view("zz")).status, BodyStatus::kError);
  EXPECT_EQ(f.feed(std::string_view("0\r\n\r\n")).status, BodyStatus::kError);
}

}  // namespace
}  // namespace sluice::http
