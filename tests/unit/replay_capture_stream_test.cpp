// sluice-replay's streamed capture reading (replay/capture_input.h's
// CaptureStream, capture_file.h's PacketReader): a packet at a time, what
// a flow keeps past a packet copied (heads split across segments of many
// flows at once), a response's end a record of its own at its own time,
// flows forgotten on the appliance's timeouts so memory follows what is
// live, and the streamed reader equal to the one over a whole image.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "limiter_harness.h"
#include "pcap_writer.h"
#include "replay/capture_file.h"
#include "replay/capture_input.h"
#include "scratch_dir.h"

namespace sluice::test {
namespace {

using replay::RequestRecord;

std::string get(const std::string& path, const std::string& fields = "") {
  return "GET " + path + " HTTP/1.1\r\nHost: router\r\n" + fields + "\r\n";
}
const std::string kOk = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok";

class CaptureStreamTest : public ::testing::Test {
 protected:
  CaptureStreamTest() { options.service_ports.set(80); }

  uint64_t add(const TcpSegment& s, uint64_t step = 1'000'000) {
    packets.push_back({clock, frame_of(s, Link::kEthernet)});
    clock += step;
    return packets.back().at;
  }
  void handshake(Conversation& c) { add(c.syn()), add(c.syn_ack()), add(c.ack()); }

  // Every record the stream gives, heads and response ends, in its order.
  std::vector<RequestRecord> stream_all() {
    write_file(path, pcap_file(packets, 1, false, true));
    replay::InputResult* to[] = {&result};
    replay::CaptureStream stream({{path, 0}}, {}, options, to);
    std::vector<RequestRecord> out;
    while (stream.next(out)) {
    }
    most_flows = stream.most_flows();
    return out;
  }
  static std::vector<RequestRecord> requests(const std::vector<RequestRecord>& all) {
    std::vector<RequestRecord> r;
    for (const RequestRecord& x : all) {
      if (x.kind == RequestRecord::Kind::kRequest) r.push_back(x);
    }
    return r;
  }

  replay::CaptureOptions options;
  std::vector<CapPacket> packets;
  uint64_t clock = kStart;
  replay::InputResult result;
  size_t most_flows = 0;
  ScratchDir dir{"sluice-capture-stream"};
  std::string path = dir.path() + "/in.pcap";
};

// Heads split across segments, of several flows at once, interleaved with
// whole heads of others and with more than the reader's read-ahead of
// other traffic: each split head is parsed from its own copy on buffers of
// its own, so neither the reader's refills nor another flow's parse change
// what it read (its Content-Length frames its body; the head after the
// body is read whole).
TEST_F(CaptureStreamTest, HeadsSplitAcrossSegmentsOfManyFlowsAtOnceKeepTheirOwnBytes) {
  std::vector<Conversation> split, whole;
  for (uint16_t i = 0; i < 4; ++i) split.emplace_back("198.18.0." + std::to_string(10 + i), 40000 + i, "198.19.0.1", 80);
  for (uint16_t i = 0; i < 4; ++i) whole.emplace_back("198.18.1." + std::to_string(10 + i), 41000 + i, "198.19.0.1", 80);
  Conversation bulk("198.18.3.1", 42000, "198.19.0.1", 8080);  // another port: only read past
  for (auto& c : split) handshake(c);
  for (auto& c : whole) handshake(c);
  std::vector<std::string> heads;
  for (size_t i = 0; i < split.size(); ++i) {
    std::string fields = "Content-Length: " + std::to_string(11 * (i + 1)) + "\r\n";
    for (int f = 0; f < 20; ++f) fields += "X-Field-" + std::to_string(f) + ": flow " + std::to_string(i) + " value " + std::to_string(f) + "\r\n";
    heads.push_back("POST /split/" + std::to_string(i) + " HTTP/1.1\r\nHost: router\r\n" + fields + "\r\n");
  }
  // Three pieces each: cut inside the Content-Length value (after a digit
  // each flow has its own), then inside a
  // field line; a whole head of another flow and 1.5 MiB of other traffic
  // after every piece; the last piece carries the body and the next head.
  for (size_t piece = 0; piece < 3; ++piece) {
    for (size_t i = 0; i < split.size(); ++i) {
      const std::string& h = heads[i];
      const size_t cuts[] = {0, h.find("Content-Length: ") + 17, h.size() / 2 + i, h.size()};
      std::string part = h.substr(cuts[piece], cuts[piece + 1] - cuts[piece]);
      if (piece == 2) part += std::string(11 * (i + 1), 'b') + get("/after/" + std::to_string(i));
      add(split[i].client(part));
      add(whole[i].client(get("/whole/" + std::to_string(i) + "/" + std::to_string(piece),
                              "Content-Length: 0\r\nX-Other: " + std::string(100, 'z') + "\r\n")));
    }
    for (int k = 0; k < 1100; ++k) add(bulk.client(std::string(1400, 'x')), 1000);
  }
  const std::vector<RequestRecord> all = requests(stream_all());
  ASSERT_EQ(result.problem_count, 0u) << (result.problems.empty() ? "" : result.problems[0].to_string());
  ASSERT_EQ(all.size(), 20u);
  size_t split_seen = 0, after_seen = 0;
  for (const RequestRecord& r : all) {
    EXPECT_EQ(r.parse_error, http::ParseError::kNone);
    if (r.head.find("/after/") != std::string::npos) ++after_seen;
    if (r.head.find("/split/") == std::string::npos) continue;
    const size_t i = static_cast<size_t>(r.head[12] - '0');
    ASSERT_LT(i, heads.size());
    EXPECT_EQ(r.head, heads[i]);
    ++split_seen;
  }
  EXPECT_EQ(split_seen, 4u);
  EXPECT_EQ(after_seen, 4u);
}

// A response's end comes when it ends, as a record naming its request,
// with the tokens it reported; the request's own record comes at its head.
TEST_F(CaptureStreamTest, AResponsesEndIsARecordOfItsOwnAtItsOwnTime) {
  options.usage_field = "x-usage-tokens";
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  handshake(c);
  const uint64_t head = add(c.client(get("/1")));
  const uint64_t second = add(c.client(get("/2")));
  const uint64_t first_end = add(c.origin("HTTP/1.1 200 OK\r\nX-Usage-Tokens: 42\r\nContent-Length: 2\r\n\r\nok"));
  const uint64_t second_end = add(c.origin(kOk));
  const std::vector<RequestRecord> all = stream_all();
  ASSERT_EQ(all.size(), 5u);
  EXPECT_EQ(all[0].kind, RequestRecord::Kind::kRequest);
  EXPECT_EQ(all[0].at, head);
  EXPECT_FALSE(all[0].has_usage);  // not known yet
  EXPECT_EQ(all[1].at, second);
  ASSERT_NE(all[0].response, 0u);
  ASSERT_NE(all[1].response, 0u);
  EXPECT_NE(all[0].response, all[1].response);
  EXPECT_EQ(all[2].kind, RequestRecord::Kind::kResponseEnd);
  EXPECT_EQ(all[2].response, all[0].response);
  EXPECT_EQ(all[2].at, first_end);
  EXPECT_TRUE(all[2].has_usage);
  EXPECT_EQ(all[2].usage_tokens, 42u);
  EXPECT_EQ(all[3].response, all[1].response);
  EXPECT_EQ(all[3].at, second_end);
  EXPECT_FALSE(all[3].has_usage);
  EXPECT_EQ(all[3].connection, all[0].connection);
  // The connection's end, at the capture's: what was kept of it can go.
  EXPECT_EQ(all[4].kind, RequestRecord::Kind::kConnectionEnd);
  EXPECT_EQ(all[4].connection, all[0].connection);
  EXPECT_EQ(all[4].at, second_end);
}

// Requests whose responses never come end where the connection ends: at
// its reset, or at the capture's end.
TEST_F(CaptureStreamTest, WaitsEndAtAResetAndAtTheCapturesEnd) {
  Conversation reset("198.18.0.10", 40000, "198.19.0.1", 80), open("198.18.0.11", 40001, "198.19.0.1", 80);
  handshake(reset), handshake(open);
  add(reset.client(get("/a")));
  add(open.client(get("/b")));
  const uint64_t rst = add(reset.client_rst());
  const uint64_t last = add(open.ack());
  std::vector<RequestRecord> all = stream_all();
  std::erase_if(all, [](const RequestRecord& r) { return r.kind == RequestRecord::Kind::kConnectionEnd; });
  ASSERT_EQ(all.size(), 4u);
  EXPECT_EQ(all[2].kind, RequestRecord::Kind::kResponseEnd);
  EXPECT_EQ(all[2].response, all[0].response);
  EXPECT_EQ(all[2].at, rst);
  EXPECT_EQ(all[3].kind, RequestRecord::Kind::kResponseEnd);
  EXPECT_EQ(all[3].response, all[1].response);
  EXPECT_EQ(all[3].at, last);
}

// A flow is forgotten when the appliance's flow table would forget it:
// closed ones 5 s after their last segment, so a long capture of short
// connections holds a few flows at a time, not all of them.
TEST_F(CaptureStreamTest, ClosedFlowsAreForgottenSoMemoryFollowsWhatIsLive) {
  for (uint16_t i = 0; i < 2000; ++i) {
    Conversation c("198.18.2." + std::to_string(1 + i % 200), static_cast<uint16_t>(20000 + i), "198.19.0.1", 80);
    handshake(c);
    add(c.client(get("/" + std::to_string(i))));
    add(c.origin_fin(kOk));
    add(c.client_fin(), 200'000'000);  // a connection every 0.2 s
  }
  const std::vector<RequestRecord> all = requests(stream_all());
  EXPECT_EQ(all.size(), 2000u);
  EXPECT_EQ(result.problem_count, 0u);
  EXPECT_LE(most_flows, 40u);  // about 5 s of connections, and one sweep's lag
  EXPECT_GT(most_flows, 10u);
}

// An established flow quiet for more than the appliance's 600 s is
// forgotten: what comes later on the tuple is a new connection, adopted at
// a request head. Quiet for less, it is the same connection.
TEST_F(CaptureStreamTest, AnIdleFlowIsForgottenAfterTheAppliancesIdleTimeout) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  Conversation busy("198.18.0.11", 40001, "198.19.0.1", 80);  // keeps the capture's clock moving
  handshake(c), handshake(busy);
  add(c.client(get("/1")));
  add(c.origin(kOk));
  for (int s = 0; s < 500; ++s) add(busy.ack(), 1'000'000'000);
  add(c.client(get("/2")));  // 500 s later: the same connection
  add(c.origin(kOk));
  for (int s = 0; s < 700; ++s) add(busy.ack(), 1'000'000'000);
  add(c.client(get("/3")));  // 700 s later: a new one
  const std::vector<RequestRecord> all = requests(stream_all());
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].connection, all[1].connection);
  EXPECT_NE(all[1].connection, all[2].connection);
  EXPECT_EQ(all[2].head, get("/3"));
}

// The streamed reader gives what the reader over a whole image gives, for
// a capture many times its read-ahead, with blocks across its refills.
TEST_F(CaptureStreamTest, TheStreamedReaderEqualsTheImageReader) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  handshake(c);
  for (int i = 0; i < 3000; ++i) add(c.client(get("/" + std::to_string(i), "X-Pad: " + std::string(700 + i % 300, 'p') + "\r\n")));
  for (const bool ng : {false, true}) {
    const std::string bytes = ng ? pcapng_file(packets, {{1, 9}}) : pcap_file(packets, 1, true, true);
    ASSERT_GT(bytes.size(), size_t{2} << 20);
    write_file(path, bytes);
    const std::span<const uint8_t> image(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
    const replay::CaptureIndex index = replay::index_capture(image, path);
    std::string error;
    replay::PacketReader streamed(replay::InputStream::open(path, error), path);
    replay::CapturedPacket p;
    size_t n = 0;
    while (streamed.next(p)) {
      ASSERT_LT(n, index.packets.size());
      const replay::CapturedPacket& want = index.packets[n++];
      EXPECT_EQ(p.at, want.at);
      EXPECT_EQ(p.number, want.number);
      ASSERT_TRUE(std::equal(p.data.begin(), p.data.end(), want.data.begin(), want.data.end())) << "packet " << n;
    }
    EXPECT_EQ(n, index.packets.size());
    EXPECT_EQ(n, packets.size());
    EXPECT_EQ(streamed.packet_count(), index.packet_count);
    EXPECT_TRUE(streamed.take_problems().empty());
    EXPECT_TRUE(streamed.stream_error().empty());
  }
}

// A block that claims more than any packet needs is lost framing, said as
// such, not a buffer of that size.
TEST_F(CaptureStreamTest, AHugeBlockLengthIsAProblemNotAnAllocation) {
  Conversation c("198.18.0.10", 40000, "198.19.0.1", 80);
  handshake(c);
  std::string bytes = pcapng_file(packets, {{1, 6}});
  // A fourth block (after the section header and the interface) claiming 1 GiB.
  std::string huge("\x06\x00\x00\x00\x00\x00\x00\x40", 8);
  bytes += huge + std::string(64, '\0');
  write_file(path, bytes);
  std::string error;
  replay::PacketReader streamed(replay::InputStream::open(path, error), path);
  replay::CapturedPacket p;
  size_t n = 0;
  while (streamed.next(p)) ++n;
  EXPECT_EQ(n, 3u);
  const std::vector<replay::CaptureProblem> problems = streamed.take_problems();
  ASSERT_EQ(problems.size(), 1u);
  EXPECT_NE(problems[0].problem.message.find("a block length of 1073741824 bytes"), std::string::npos)
      << problems[0].problem.message;
}

}  // namespace
}  // namespace sluice::test
