// An input's bytes as sluice-replay reads them: from a file or a pipe,
// with the compression its first bytes show (gzip, as logrotate writes
// it; xz; zstd) undone as they are read, a buffer at a time, so that a
// compressed log of any size costs the same memory as a plain one and is
// never copied whole. Damaged or cut-short compressed data is an error that
// says where, never a silent end. zlib, liblzma and libzstd do the work.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace sluice::replay {

enum class Compression : uint8_t { kNone, kGzip, kXz, kZstd };

// What `first` (an input's first bytes, at least 6 where the input has
// them) says the input is compressed with.
[[nodiscard]] Compression compression_of(std::span<const uint8_t> first) noexcept;
[[nodiscard]] const char* compression_name(Compression c) noexcept;

class InputStream {
 public:
  // `path` opened for reading; null, and `error` saying why, if it cannot be.
  [[nodiscard]] static std::unique_ptr<InputStream> open(const std::string& path, std::string& error);
  ~InputStream();
  InputStream(const InputStream&) = delete;
  InputStream& operator=(const InputStream&) = delete;

  // Up to `n` bytes into `out`, decompressed; 0 at the end, or on an error
  // (failed() then, error() says why).
  [[nodiscard]] size_t read(char* out, size_t n);
  // The first `n` bytes still to be read (fewer at the end), decompressed,
  // left for read() to hand out: what an input is can be told from its
  // first bytes even when it is a pipe, which cannot be read twice.
  [[nodiscard]] std::string_view peek(size_t n);
  [[nodiscard]] bool failed() const noexcept { return !error_.empty(); }
  [[nodiscard]] const std::string& error() const noexcept { return error_; }
  [[nodiscard]] Compression compression() const noexcept { return compression_; }
  // The file (its size hints at how many records a plain log holds).
  [[nodiscard]] std::FILE* file() const noexcept { return file_; }

 private:
  struct Codec;  // the decompressor's state (input_stream.cpp)
  explicit InputStream(std::FILE* file);
  // More compressed bytes once those taken are used up; false at the end.
  bool fill();
  size_t read_more(char* out, size_t n);
  size_t decompress(char* out, size_t n);
  void fail(std::string why);

  std::FILE* file_;
  Compression compression_ = Compression::kNone;
  std::vector<uint8_t> in_;
  size_t in_at_ = 0, in_len_ = 0;
  bool in_end_ = false;  // the file has nothing more
  uint64_t consumed_ = 0;  // compressed bytes taken, for messages
  std::string error_;
  std::unique_ptr<Codec> codec_;
  std::string peeked_;  // read ahead by peek(), from peek_at_ on not handed out yet
  size_t peek_at_ = 0;
};

}  // namespace sluice::replay
