// The credential file (RF04: every credential of a user shares that user's
// buckets; the file holds only the keyed hashes): its text form, what it
// tolerates, and that every mistake is named by line and column and leaves
// nothing to apply.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "control/credential_file.h"
#include "scratch_dir.h"

namespace sluice::control {
namespace {

constexpr const char* kA = "0123456789abcdef0011223344556677";
constexpr const char* kB = "fedcba9876543210ffeeddccbbaa9988";
constexpr const char* kC = "00000000000000000000000000000001";

limiter::Digest digest(const char* hex) {
  return *parse_digest_hex(hex);
}

// The one error a text yields.
std::string only_error(std::string_view text) {
  const CredentialFile f = parse_credential_file(text, "creds");
  EXPECT_TRUE(f.entries.empty()) << text;
  EXPECT_EQ(f.errors.size(), 1u) << text;
  return f.errors.empty() ? "" : f.errors.front();
}

TEST(CredentialFileRF04, DigestHexIsHiThenLoLowercase) {
  const limiter::Digest d{0x0011223344556677ull, 0x0123456789ABCDEFull};
  EXPECT_EQ(digest_hex(d), "0123456789abcdef0011223344556677");
  EXPECT_EQ(parse_digest_hex("0123456789ABCDEF0011223344556677"), d);
  EXPECT_EQ(digest_hex(limiter::Digest{0, 0}), std::string(32, '0'));
  for (const limiter::Digest x : {limiter::Digest{~0ull, ~0ull}, limiter::Digest{1, 0}, limiter::Digest{0, 1},
                                  limiter::Digest{0x8000000000000000ull, 0x7fffffffffffffffull}}) {
    EXPECT_EQ(parse_digest_hex(digest_hex(x)), x);
  }
}

TEST(CredentialFileRF04, DigestHexRefusesAnythingElse) {
  for (const char* bad :
       {"", "0123456789abcdef001122334455667", "0123456789abcdef00112233445566778", "0123456789abcdef001122334455667g",
        "0x23456789abcdef0011223344556677", " 123456789abcdef0011223344556677", "-123456789abcdef0011223344556677"}) {
    EXPECT_FALSE(parse_digest_hex(bad)) << bad;
  }
}

TEST(CredentialFileRF04, UserNames) {
  EXPECT_TRUE(valid_user_name("alice"));
  EXPECT_TRUE(valid_user_name("svc.ci-runner_2+build:eu@example.org"));
  EXPECT_TRUE(valid_user_name(std::string(kMaxUserLength, 'u')));
  EXPECT_FALSE(valid_user_name(""));
  EXPECT_FALSE(valid_user_name(std::string(kMaxUserLength + 1, 'u')));
  for (const char* bad : {"a b", "a/b", "a#b", "a\"b", "ålice", "a\x01"}) EXPECT_FALSE(valid_user_name(bad)) << bad;
}

TEST(CredentialFileRF04, SeveralHashesOfOneUserRoundTrip) {
  const std::vector<CredentialEntry> in = {{digest(kB), "bob"}, {digest(kA), "alice"}, {digest(kC), "bob"}};
  const std::string text = format_credential_file(in);
  EXPECT_EQ(text.rfind("# ", 0), 0u);
  EXPECT_NE(text.find("sluicectl credential hash"), std::string::npos);
  const CredentialFile back = parse_credential_file(text, "creds");
  ASSERT_TRUE(back.errors.empty()) << back.errors.front();
  // Sorted by user, then by hash.
  const std::vector<CredentialEntry> sorted = {{digest(kA), "alice"}, {digest(kC), "bob"}, {digest(kB), "bob"}};
  EXPECT_EQ(back.entries, sorted);
  EXPECT_EQ(format_credential_file(back.entries), text);
  EXPECT_EQ(text.substr(text.find('\n') + 1), std::string(kA) + " alice\n" + kC + " bob\n" + kB + " bob\n");
}

TEST(CredentialFileRF04, EmptyFileHasNoEntriesAndNoErrors) {
  const CredentialFile f = parse_credential_file(format_credential_file({}), "creds");
  EXPECT_TRUE(f.entries.empty());
  EXPECT_TRUE(f.errors.empty());
  EXPECT_TRUE(parse_credential_file("", "creds").errors.empty());
}

TEST(CredentialFileRF04, CommentsBlankLinesCrlfAndSpacing) {
  const std::string text = std::string("\xEF\xBB\xBF# users of the staging cluster\r\n") +  // a BOM, then a comment
                           "\r\n" +                                                         // blank
                           "   \t\n" +                                                      // only whitespace
                           "\t" + kA + "\t\talice   \r\n" +                                 // tabs, trailing space
                           "  # indented comment\n" +                                       //
                           kB + " bob # bob's laptop\n" +                                   // trailing comment
                           kC + " carol";                                                   // no final newline
  const CredentialFile f = parse_credential_file(text, "creds");
  ASSERT_TRUE(f.errors.empty()) << f.errors.front();
  const std::vector<CredentialEntry> want = {{digest(kA), "alice"}, {digest(kB), "bob"}, {digest(kC), "carol"}};
  EXPECT_EQ(f.entries, want);
}

TEST(CredentialFileRF04, UppercaseHexIsReadAndWrittenBackLowercase) {
  const std::string upper = "0123456789ABCDEF0011223344556677";
  const CredentialFile f = parse_credential_file(upper + " alice\n", "creds");
  ASSERT_EQ(f.entries.size(), 1u);
  EXPECT_EQ(f.entries[0].hash, digest(kA));
  EXPECT_NE(format_credential_file(f.entries).find(std::string(kA) + " alice"), std::string::npos);
}

TEST(CredentialFileRF04, BadHexIsNamedAtItsColumnWithoutQuotingIt) {
  // A raw credential pasted where the hash goes: named, never echoed.
  const std::string e = only_error(std::string(kA) + " alice\n  sk-live-SECRET123 bob\n");
  EXPECT_EQ(e.rfind("creds:2:3: not a credential hash", 0), 0u) << e;
  EXPECT_EQ(e.find("SECRET"), std::string::npos) << e;
  EXPECT_EQ(only_error("0123456789abcdef001122334455667 alice\n"),
            "creds:1:1: a credential hash is 32 hex digits; this one has 31");
  EXPECT_EQ(only_error("\t0123456789abcdef00112233445566778 alice\n"),
            "creds:1:2: a credential hash is 32 hex digits; this one has 33");
}

TEST(CredentialFileRF04, MissingUserIsNamedWhereItShouldBe) {
  EXPECT_EQ(only_error("\n" + std::string(kA) + "\n"), "creds:2:33: a hash with no user (a line is HASH USER)");
  EXPECT_EQ(only_error("  " + std::string(kA) + "   # who?\r\n"),
            "creds:1:35: a hash with no user (a line is HASH USER)");
}

TEST(CredentialFileRF04, BadUserCharactersAreNamed) {
  EXPECT_EQ(only_error(std::string(kA) + "  ali/ce\n"),
            "creds:1:35: user names hold only A-Z a-z 0-9 . _ @ + : - (found '/')");
  EXPECT_EQ(only_error(std::string(kA) + " \xC3\xA5lice\n"),
            "creds:1:34: user names hold only A-Z a-z 0-9 . _ @ + : - (found a non-ASCII character)");
  EXPECT_EQ(only_error(std::string(kA) + " al\x7Fice\n"),
            "creds:1:34: user names hold only A-Z a-z 0-9 . _ @ + : - (found byte 0x7f)");
  // A lone CR inside a line is not a line ending.
  EXPECT_EQ(only_error(std::string(kA) + " alice\rbob\n"),
            "creds:1:34: user names hold only A-Z a-z 0-9 . _ @ + : - (found byte 0x0d)");
  EXPECT_EQ(only_error(std::string(kA) + " " + std::string(kMaxUserLength + 1, 'u') + "\n"),
            "creds:1:34: user name is 65 characters long; at most 64");
}

TEST(CredentialFileRF04, ExtraFieldsAreNamed) {
  EXPECT_EQ(only_error(std::string(kA) + " alice admin\n"),
            "creds:1:40: a third field where the line should end (a line is HASH USER; comments start with #)");
}

TEST(CredentialFileRF04, AByteOrderMarkDoesNotShiftColumns) {
  EXPECT_EQ(only_error("\xEF\xBB\xBF" + std::string(kA) + " alice x\n"),
            "creds:1:40: a third field where the line should end (a line is HASH USER; comments start with #)");
}

TEST(CredentialFileRF04, DuplicateHashIsNamedAtTheSecondWithTheFirstLine) {
  const std::string text = std::string(kA) + " alice\n" + kB + " bob\n# moved\n" + kA + " mallory\n";
  EXPECT_EQ(only_error(text), "creds:4:1: hash already listed on line 1 (a credential has one user)");
  // Listed twice for the same user is still a mistake, and case does not hide it.
  EXPECT_EQ(only_error(std::string(kA) + " alice\n  0123456789ABCDEF0011223344556677 alice\n"),
            "creds:2:3: hash already listed on line 1 (a credential has one user)");
}

TEST(CredentialFileRF04, AnyErrorMeansNoEntriesAndEveryBadLineIsListed) {
  const std::string text = std::string(kA) + " alice\nnot-a-hash bob\n" + kB + " bob\n" + kC + "\n";
  const CredentialFile f = parse_credential_file(text, "/etc/sluice/credentials");
  EXPECT_TRUE(f.entries.empty());
  ASSERT_EQ(f.errors.size(), 2u);
  EXPECT_EQ(f.errors[0].rfind("/etc/sluice/credentials:2:1: ", 0), 0u) << f.errors[0];
  EXPECT_EQ(f.errors[1].rfind("/etc/sluice/credentials:4:33: ", 0), 0u) << f.errors[1];
}

TEST(CredentialFileRF04, AFileOfGarbageIsNotListedLineByLine) {
  std::string text;
  for (int i = 0; i < 1000; ++i) text += "garbage\n";
  const CredentialFile f = parse_credential_file(text, "creds");
  ASSERT_EQ(f.errors.size(), 101u);
  EXPECT_EQ(f.errors.back(), "creds: 900 more errors not shown");
}

class CredentialFileOnDisk : public ::testing::Test {
 protected:
  test::ScratchDir scratch_{"sluice-credential-test"};
  void write(const std::string& text) {
    FILE* f = std::fopen((dir_ + "/creds").c_str(), "wb");
    ASSERT_NE(f, nullptr);
    ASSERT_EQ(std::fwrite(text.data(), 1, text.size(), f), text.size());
    std::fclose(f);
  }
  std::string dir_ = scratch_.path();
};

TEST_F(CredentialFileOnDisk, LoadsWhatFormatWroteRF04) {
  const std::vector<CredentialEntry> entries = {{digest(kA), "alice"}, {digest(kB), "alice"}};
  write(format_credential_file(entries));
  const CredentialFile f = load_credential_file(dir_ + "/creds");
  ASSERT_TRUE(f.errors.empty()) << f.errors.front();
  EXPECT_EQ(f.entries, entries);
  write(std::string(kA) + " alice extra\n");
  const CredentialFile bad = load_credential_file(dir_ + "/creds");
  ASSERT_EQ(bad.errors.size(), 1u);
  EXPECT_EQ(bad.errors[0].rfind(dir_ + "/creds:1:40: ", 0), 0u) << bad.errors[0];
}

TEST_F(CredentialFileOnDisk, UnreadableFileIsOneError) {
  const CredentialFile missing = load_credential_file(dir_ + "/absent");
  ASSERT_EQ(missing.errors.size(), 1u);
  EXPECT_EQ(missing.errors[0], dir_ + "/absent: cannot read: No such file or directory");
  const CredentialFile directory = load_credential_file(dir_);
  ASSERT_EQ(directory.errors.size(), 1u);
  EXPECT_EQ(directory.errors[0], dir_ + ": cannot read: Is a directory");
}

TEST_F(CredentialFileOnDisk, OversizedFileIsRefusedUnparsed) {
  // Harmless lines up to just past the limit: refused for its size alone.
  std::string text;
  text.reserve(kMaxCredentialFileBytes + 64);
  while (text.size() <= kMaxCredentialFileBytes) text += "# padding padding padding padding padding padding\n";
  write(text);
  const CredentialFile f = load_credential_file(dir_ + "/creds");
  ASSERT_EQ(f.errors.size(), 1u);
  EXPECT_EQ(f.errors[0], dir_ + "/creds: larger than 16 MiB, the most a credential file may be");
  EXPECT_TRUE(f.entries.empty());
}

}  // namespace
}  // namespace sluice::control
