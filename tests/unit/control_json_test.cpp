// The control protocol's JSON (control/json.h on nlohmann-json): what
// sluicectl and the control thread read and write, including the malformed
// lines a client may send, and the argument readers of the command table.
#include <gtest/gtest.h>

#include <cstdint>
#include <string>

#include "control/command_table.h"
#include "control/json.h"
#include "control/protocol.h"

namespace sluice::control {
namespace {

TEST(ControlJson, ReadsARequest) {
  std::string error;
  const auto v = parse_json(R"( {"v": 1, "cmd": "stats", "n": -2.5e1, "list": [true, false, null, "x"], "o": {}} )",
                            error);
  ASSERT_TRUE(v) << error;
  EXPECT_EQ(*member(*v, "cmd"), "stats");
  EXPECT_EQ(whole_number(*member(*v, "v")), 1u);
  EXPECT_EQ(member(*v, "n")->get<double>(), -25.0);
  ASSERT_TRUE(member(*v, "list")->is_array());
  EXPECT_EQ(member(*v, "list")->size(), 4u);
  EXPECT_TRUE(member(*v, "o")->is_object());
  EXPECT_EQ(member(*v, "missing"), nullptr);
  EXPECT_EQ(member(*member(*v, "list"), "cmd"), nullptr) << "an array has no members";
}

TEST(ControlJson, MembersKeepTheOrderTheyWereWrittenIn) {
  Json w = response_head(true);
  w["zeta"] = 1;
  w["alpha"] = 2;
  EXPECT_EQ(dump_json(w), R"({"v":1,"ok":true,"zeta":1,"alpha":2})");
  std::string error;
  const auto v = parse_json(R"({"b":1,"a":2,"c":3})", error);
  ASSERT_TRUE(v) << error;
  EXPECT_EQ(dump_json(*v), R"({"b":1,"a":2,"c":3})");
}

// Integers are never doubles: 2^64-1 and 2^53+1 (a double holds neither)
// come back exactly, both ways.
TEST(ControlJson, IntegersAreExact) {
  std::string error;
  for (const uint64_t n : {UINT64_MAX, (uint64_t{1} << 53) + 1, uint64_t{0}}) {
    Json w = Json::object();
    w["n"] = n;
    const std::string text = dump_json(w);
    EXPECT_EQ(text, R"({"n":)" + std::to_string(n) + "}");
    const auto v = parse_json(text, error);
    ASSERT_TRUE(v) << error;
    EXPECT_EQ(whole_number(*member(*v, "n")), n) << text;
  }
  const auto negative = parse_json("-9223372036854775808", error);
  ASSERT_TRUE(negative) << error;
  EXPECT_EQ(negative->get<int64_t>(), INT64_MIN);
  EXPECT_EQ(whole_number(*negative), std::nullopt);
}

TEST(ControlJson, WholeNumberTakesOnlyIntegersFromZero) {
  std::string error;
  for (const char* text : {"1.5", "-1", "1e3", "1.0", "18446744073709551616", "\"7\"", "true", "null", "[1]"}) {
    const auto v = parse_json(text, error);
    ASSERT_TRUE(v) << text << ": " << error;
    EXPECT_EQ(whole_number(*v), std::nullopt) << text;
  }
  const auto zero = parse_json("-0", error);
  ASSERT_TRUE(zero) << error;
  EXPECT_EQ(whole_number(*zero), 0u) << "-0 is the integer zero";
}

TEST(ControlJson, StringEscapesRoundTrip) {
  Json w = Json::object();
  const std::string tricky = "quote \" backslash \\ newline \n tab \t bell \x07 nul " + std::string(1, '\0') + " é";
  w["s"] = tricky;
  const std::string text = dump_json(w);
  EXPECT_EQ(text.find('\n'), std::string::npos) << "one line: " << text;
  std::string error;
  const auto v = parse_json(text, error);
  ASSERT_TRUE(v) << error << " in " << text;
  EXPECT_EQ(*member(*v, "s"), tricky);
  const auto u = parse_json(R"("\u00e9\ud83d\ude00")", error);
  ASSERT_TRUE(u) << error;
  EXPECT_EQ(u->get<std::string>(), "é\xF0\x9F\x98\x80");
}

TEST(ControlJson, MalformedTextIsRefusedAtItsByte) {
  for (const char* bad : {"", "{", "{\"a\":}", "{\"a\" 1}", "[1,]", "{\"a\":1} x", "\"\x01\"", "\"\\q\"", "01x", "01",
                          "-01", "1.", ".5", "+1", "0x10", "1e400", "{'a':1}", "[1] [2]", "tru", "nan", "Infinity",
                          "\"\\ud800\"", "{\"a\":\"\\ud800\\u0041\"}", "\"\\udc00\"", "\"\xff\"", "\"\xc0\xaf\"",
                          "\"\xed\xa0\x80\"", "/* c */ 1", "{\"a\":1,}"}) {
    std::string error;
    EXPECT_FALSE(parse_json(bad, error)) << bad;
    EXPECT_NE(error.find("(at byte "), std::string::npos) << bad << ": " << error;
  }
  std::string error;
  EXPECT_FALSE(parse_json("01", error));
  EXPECT_NE(error.find("(at byte 2)"), std::string::npos) << error;
}

// The library alone keeps the last of two equal keys, so a request could
// say two things and mean the last: refused, at any depth, at the second.
TEST(ControlJson, ADuplicateKeyIsRefusedAtAnyDepth) {
  std::string error;
  EXPECT_FALSE(parse_json(R"({"token":"a","token":"b"})", error));
  EXPECT_EQ(error, R"(duplicate key "token" (at byte 20))");
  EXPECT_FALSE(parse_json(R"({"v":1,"o":{"a":1,"b":[{"x":1,"x":2}]}})", error));
  EXPECT_NE(error.find(R"(duplicate key "x")"), std::string::npos) << error;
  EXPECT_FALSE(parse_json(R"([{"a":1}, {"b":1,"b":1}])", error));
  EXPECT_NE(error.find(R"(duplicate key "b")"), std::string::npos) << error;
  // "\u0061" is "a": equal keys however they are written.
  EXPECT_FALSE(parse_json(R"({"a":1,"\u0061":2})", error));
  EXPECT_NE(error.find("duplicate key"), std::string::npos) << error;
  // The same key in sibling or nested objects is no duplicate.
  const auto v = parse_json(R"({"a":{"a":1},"b":[{"a":1},{"a":2}]})", error);
  ASSERT_TRUE(v) << error;
  EXPECT_EQ(dump_json(*v), R"({"a":{"a":1},"b":[{"a":1},{"a":2}]})");
  const std::string long_key(1000, 'k');
  EXPECT_FALSE(parse_json("{\"" + long_key + "\":1,\"" + long_key + "\":2}", error));
  EXPECT_LT(error.size(), 80u) << "a key is quoted bounded: " << error;
}

TEST(ControlJson, NestingPastTheLimitIsRefused) {
  std::string error;
  const std::string deepest = std::string(kMaxJsonDepth, '[') + std::string(kMaxJsonDepth, ']');
  EXPECT_TRUE(parse_json(deepest, error)) << error;
  const std::string deeper = std::string(kMaxJsonDepth + 1, '[') + std::string(kMaxJsonDepth + 1, ']');
  EXPECT_FALSE(parse_json(deeper, error));
  EXPECT_EQ(error, "nested deeper than 32 (at byte 33)");
  std::string objects;
  for (size_t i = 0; i <= kMaxJsonDepth; ++i) objects += "{\"a\":";
  EXPECT_FALSE(parse_json(objects + "1" + std::string(kMaxJsonDepth + 1, '}'), error));
  EXPECT_NE(error.find("nested deeper"), std::string::npos) << error;
  // Far past it: refused as soon as the limit is passed, nothing recursed.
  EXPECT_FALSE(parse_json(std::string(100000, '['), error));
  EXPECT_EQ(error, "nested deeper than 32 (at byte 33)");
}

// Names that came from files (a policy's, a credentials file's) may hold
// any bytes: written with U+FFFD, never an exception, still one line.
TEST(ControlJson, InvalidUtf8IsWrittenReplacedNotThrown) {
  Json w = Json::object();
  w["name"] = std::string("bad \xff\xfe byte, cut \xe2\x82 and \xed\xa0\x80 surrogate");
  std::string text;
  ASSERT_NO_THROW(text = dump_json(w));
  std::string error;
  const auto v = parse_json(text, error);
  ASSERT_TRUE(v) << error << " in " << text;
  const std::string back = member(*v, "name")->get<std::string>();
  EXPECT_EQ(back.find('\xff'), std::string::npos);
  EXPECT_NE(back.find("\xef\xbf\xbd"), std::string::npos) << "U+FFFD in place of the bad bytes";
  EXPECT_TRUE(is_utf8("plain, é, \xF0\x9F\x98\x80"));
  EXPECT_FALSE(is_utf8("\xff"));
  EXPECT_FALSE(is_utf8("\xed\xa0\x80"));
}

TEST(ControlJson, ErrorResponsesCarryAStableCode) {
  std::string error;
  const auto v = parse_json(error_response(ErrorCode::kUnknownCommand, "no \"such\" command"), error);
  ASSERT_TRUE(v) << error;
  EXPECT_EQ(*member(*v, "ok"), false);
  EXPECT_EQ(*member(*member(*v, "error"), "code"), "unknown_command");
  EXPECT_EQ(*member(*member(*v, "error"), "message"), "no \"such\" command");
  EXPECT_EQ(whole_number(*member(*v, "v")), uint64_t{kProtocolVersion});
  EXPECT_EQ(invalid_policy_response("p.yaml is not usable", {"p.yaml:4:3: bad", "p.yaml:5:1: worse"}),
            R"({"v":1,"ok":false,"error":{"code":"invalid_policy","message":"p.yaml is not usable"},)"
            R"("errors":["p.yaml:4:3: bad","p.yaml:5:1: worse"]})");
}

// ------------------------------------------------------------ command table

std::optional<uint64_t> read_uint(const std::string& request, uint64_t max, std::string& error) {
  std::string parse_error;
  const auto v = parse_json(request, parse_error);
  EXPECT_TRUE(v) << parse_error;
  error.clear();
  return v ? uint_arg(*v, "n", max, error) : std::nullopt;
}

// uint_arg takes JSON integers only: a real number is refused even when it
// is whole (`1e3`, `1.0`), as are a negative and anything past the maximum.
TEST(CommandTableArgs, UintArgIsAnExactIntegerInRange) {
  std::string error;
  EXPECT_EQ(read_uint(R"({"n":18446744073709551615})", UINT64_MAX, error), UINT64_MAX);
  EXPECT_EQ(error, "");
  EXPECT_EQ(read_uint(R"({"n":9007199254740993})", UINT64_MAX, error), 9007199254740993u);
  EXPECT_EQ(read_uint(R"({"n":1000})", 1000, error), 1000u);
  EXPECT_EQ(read_uint(R"({"n":0})", 1000, error), 0u);
  EXPECT_EQ(read_uint(R"({})", 1000, error), std::nullopt);
  EXPECT_EQ(error, "") << "absent is not an error";
  for (const char* bad : {R"({"n":1001})", R"({"n":-1})", R"({"n":"5"})", R"({"n":true})", R"({"n":null})"}) {
    EXPECT_EQ(read_uint(bad, 1000, error), std::nullopt) << bad;
    EXPECT_EQ(error, "\"n\" must be a whole number from 0 to 1000") << bad;
  }
  for (const char* real : {R"({"n":1.5})", R"({"n":1e3})", R"({"n":1.0})", R"({"n":18446744073709551616})"}) {
    EXPECT_EQ(read_uint(real, UINT64_MAX, error), std::nullopt) << real;
    EXPECT_EQ(error, "\"n\" must be a whole number from 0 to 18446744073709551615, written without a fraction or exponent")
        << real;
  }
  // The maximum is exact too: 2^53+1 is not 2^53.
  EXPECT_EQ(read_uint(R"({"n":9007199254740993})", (uint64_t{1} << 53), error), std::nullopt);
}

TEST(CommandTableArgs, StringArgIsAString) {
  std::string error;
  const auto v = parse_json(R"({"s":"x","n":1})", error);
  ASSERT_TRUE(v) << error;
  EXPECT_EQ(string_arg(*v, "s", error), "x");
  EXPECT_EQ(string_arg(*v, "missing", error), std::nullopt);
  EXPECT_EQ(error, "");
  EXPECT_EQ(string_arg(*v, "n", error), std::nullopt);
  EXPECT_EQ(error, "\"n\" must be a string");
}

TEST(CommandTableArgs, DispatchAnswersWithTheCommandsMembersInOrder) {
  CommandTable table;
  table.add("echo", [](const Json& request, Json& response) -> std::optional<std::string> {
    std::string error;
    const std::optional<uint64_t> n = uint_arg(request, "n", UINT64_MAX, error);
    if (!error.empty()) return error_response(ErrorCode::kBadRequest, error);
    response["n"] = n.value_or(0);
    return std::nullopt;
  });
  std::string error;
  const auto ok = parse_json(R"({"v":1,"cmd":"echo","n":18446744073709551615})", error);
  ASSERT_TRUE(ok) << error;
  EXPECT_EQ(table.dispatch(*ok), R"({"v":1,"ok":true,"n":18446744073709551615})");
  const auto real = parse_json(R"({"v":1,"cmd":"echo","n":2.5})", error);
  ASSERT_TRUE(real) << error;
  EXPECT_NE(table.dispatch(*real).find(R"("code":"bad_request")"), std::string::npos);
  const auto unknown = parse_json(R"({"v":1,"cmd":"nope"})", error);
  ASSERT_TRUE(unknown) << error;
  EXPECT_EQ(table.dispatch(*unknown),
            R"j({"v":1,"ok":false,"error":{"code":"unknown_command","message":"unknown command 'nope' (this sluiced knows echo)"}})j");
  const auto no_cmd = parse_json(R"({"v":1,"cmd":7})", error);
  ASSERT_TRUE(no_cmd) << error;
  EXPECT_NE(table.dispatch(*no_cmd).find(R"("code":"bad_request")"), std::string::npos);
}

}  // namespace
}  // namespace sluice::control
