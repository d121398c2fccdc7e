// The control protocol's JSON: what sluicectl and the control thread read
// and write, including the malformed lines a client may send.
#include <gtest/gtest.h>

#include "control/json.h"
#include "control/protocol.h"

namespace sluice::control {
namespace {

TEST(ControlJson, ReadsARequest) {
  std::string error;
  const auto v = parse_json(R"( {"v": 1, "cmd": "stats", "n": -2.5e1, "list": [true, false, null, "x"], "o": {}} )",
                            error);
  ASSERT_TRUE(v) << error;
  EXPECT_EQ(*v->get("cmd")->string(), "stats");
  EXPECT_EQ(v->get("v")->number(), 1.0);
  EXPECT_EQ(v->get("n")->number(), -25.0);
  ASSERT_NE(v->get("list")->array(), nullptr);
  EXPECT_EQ(v->get("list")->array()->size(), 4u);
  EXPECT_NE(v->get("o")->object(), nullptr);
  EXPECT_EQ(v->get("missing"), nullptr);
}

TEST(ControlJson, StringEscapesRoundTrip) {
  JsonWriter w;
  const std::string tricky = "quote \" backslash \\ newline \n tab \t bell \x07 é";
  w.begin_object().key("s").value(tricky).key("n").value(uint64_t{18446744073709551615ull}).end_object();
  std::string error;
  const auto v = parse_json(w.str(), error);
  ASSERT_TRUE(v) << error << " in " << w.str();
  EXPECT_EQ(*v->get("s")->string(), tricky);
  const auto u = parse_json(R"("\u00e9\ud83d\ude00")", error);
  ASSERT_TRUE(u) << error;
  EXPECT_EQ(*u->string(), "é\xF0\x9F\x98\x80");
}

TEST(ControlJson, MalformedTextIsNamed) {
  for (const char* bad : {"", "{", "{\"a\":}", "{\"a\" 1}", "[1,]", "{\"a\":1} x", "\"\x01\"", "\"\\q\"", "01x",
                          "{\"a\":\"\\ud800\\u0041\"}", "tru", "nan"}) {
    std::string error;
    EXPECT_FALSE(parse_json(bad, error)) << bad;
    EXPECT_NE(error.find("at byte"), std::string::npos) << bad;
  }
  std::string deep(100, '[');
  std::string error;
  EXPECT_FALSE(parse_json(deep, error));
}

TEST(ControlJson, ErrorResponsesCarryAStableCode) {
  std::string error;
  const auto v = parse_json(error_response(ErrorCode::kUnknownCommand, "no \"such\" command"), error);
  ASSERT_TRUE(v) << error;
  EXPECT_EQ(v->get("ok")->v, JsonValue{false}.v);
  EXPECT_EQ(*v->get("error")->get("code")->string(), "unknown_command");
  EXPECT_EQ(*v->get("error")->get("message")->string(), "no \"such\" command");
  EXPECT_EQ(v->get("v")->number(), double{kProtocolVersion});
}

}  // namespace
}  // namespace sluice::control
