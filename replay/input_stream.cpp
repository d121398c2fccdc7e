// See input_stream.h.
#include "replay/input_stream.h"

#include <lzma.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace sluice::replay {

namespace {

constexpr size_t kInBytes = 256 * 1024;

}  // namespace

// Each decoder's state, made for the compression the first bytes show.
struct InputStream::Codec {
  z_stream gz{};
  bool gz_open = false;
  lzma_stream xz = LZMA_STREAM_INIT;
  bool xz_open = false;
  ZSTD_DStream* zs = nullptr;
  size_t zs_left = 0;  // the last ZSTD_decompressStream result: 0 where a frame ended
  bool ended = false;  // the compressed data ended where it may (a gzip or xz stream's end)

  ~Codec() {
    if (gz_open) inflateEnd(&gz);
    if (xz_open) lzma_end(&xz);
    if (zs != nullptr) ZSTD_freeDStream(zs);
  }
};

Compression compression_of(std::span<const uint8_t> b) noexcept {
  if (b.size() >= 2 && b[0] == 0x1f && b[1] == 0x8b) return Compression::kGzip;
  static constexpr uint8_t kXz[6] = {0xfd, '7', 'z', 'X', 'Z', 0x00};
  if (b.size() >= 6 && std::equal(kXz, kXz + 6, b.begin())) return Compression::kXz;
  if (b.size() >= 4 && b[0] == 0x28 && b[1] == 0xb5 && b[2] == 0x2f && b[3] == 0xfd) return Compression::kZstd;
  return Compression::kNone;
}

const char* compression_name(Compression c) noexcept {
  switch (c) {
    case Compression::kNone: return "none";
    case Compression::kGzip: return "gzip";
    case Compression::kXz: return "xz";
    case Compression::kZstd: return "zstd";
  }
  return "?";
}

InputStream::InputStream(std::FILE* file) : file_(file), in_(kInBytes) {}

InputStream::~InputStream() {
  if (file_ != nullptr) std::fclose(file_);
}

std::unique_ptr<InputStream> InputStream::open(const std::string& path, std::string& error) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) {
    error = std::string("cannot open: ") + std::strerror(errno);
    return nullptr;
  }
  std::unique_ptr<InputStream> s(new InputStream(f));
  // The first bytes, read whatever the file is (a pipe cannot be read twice).
  (void)s->fill();
  if (s->failed()) {
    error = s->error();
    return nullptr;
  }
  s->compression_ = compression_of({s->in_.data(), s->in_len_});
  s->codec_ = std::make_unique<Codec>();
  Codec& c = *s->codec_;
  bool ok = true;
  switch (s->compression_) {
    case Compression::kNone: break;
    case Compression::kGzip:
      // 15 + 32: a gzip (or zlib) header, found by itself.
      ok = inflateInit2(&c.gz, 15 + 32) == Z_OK;
      c.gz_open = ok;
      break;
    case Compression::kXz:
      ok = lzma_stream_decoder(&c.xz, UINT64_MAX, LZMA_CONCATENATED) == LZMA_OK;
      c.xz_open = ok;
      break;
    case Compression::kZstd:
      c.zs = ZSTD_createDStream();
      ok = c.zs != nullptr && !ZSTD_isError(ZSTD_initDStream(c.zs));
      break;
  }
  if (!ok) {
    error = std::string("cannot start the ") + compression_name(s->compression_) + " decoder";
    return nullptr;
  }
  return s;
}

void InputStream::fail(std::string why) {
  if (error_.empty()) error_ = std::move(why);
}

bool InputStream::fill() {
  if (in_at_ < in_len_) return true;
  if (in_end_) return false;
  in_at_ = 0;
  in_len_ = std::fread(in_.data(), 1, in_.size(), file_);
  if (in_len_ < in_.size()) {
    in_end_ = true;
    if (std::ferror(file_)) fail(std::string("cannot read: ") + std::strerror(errno));
  }
  return in_len_ > 0;
}

size_t InputStream::read(char* out, size_t n) {
  if (peek_at_ < peeked_.size()) {
    const size_t k = std::min(n, peeked_.size() - peek_at_);
    std::memcpy(out, peeked_.data() + peek_at_, k);
    peek_at_ += k;
    if (peek_at_ == peeked_.size()) {
      peeked_.clear();
      peek_at_ = 0;
    }
    return k;
  }
  return read_more(out, n);
}

std::string_view InputStream::peek(size_t n) {
  while (peeked_.size() - peek_at_ < n) {
    const size_t old = peeked_.size();
    peeked_.resize(peek_at_ + n);
    const size_t k = read_more(peeked_.data() + old, peeked_.size() - old);
    peeked_.resize(old + k);
    if (k == 0) break;
  }
  return std::string_view(peeked_).substr(peek_at_, n);
}

size_t InputStream::read_more(char* out, size_t n) {
  if (failed() || n == 0) return 0;
  if (compression_ == Compression::kNone) {
    if (!fill()) return 0;
    const size_t k = std::min(n, in_len_ - in_at_);
    std::memcpy(out, in_.data() + in_at_, k);
    in_at_ += k;
    return k;
  }
  return decompress(out, n);
}

// Until `out` holds something, or the data ends: what the decoder makes of
// the compressed bytes taken so far.
size_t InputStream::decompress(char* out, size_t n) {
  Codec& c = *codec_;
  const char* what = compression_name(compression_);
  for (;;) {
    const bool more = fill();
    if (failed()) return 0;
    const size_t avail = in_len_ - in_at_;
    size_t made = 0;
    size_t used = 0;
    // With nothing left to give, only xz's decoder is asked once more (to
    // finish); the others have said all they will.
    const Compression step = avail == 0 && compression_ != Compression::kXz ? Compression::kNone : compression_;
    switch (step) {
      case Compression::kGzip: {
        if (c.ended && avail != 0) {
          // Another gzip member follows (files concatenated, as `cat a.gz b.gz`).
          inflateReset(&c.gz);
          c.ended = false;
        }
        c.gz.next_in = in_.data() + in_at_;
        c.gz.avail_in = static_cast<uInt>(avail);
        c.gz.next_out = reinterpret_cast<Bytef*>(out);
        c.gz.avail_out = static_cast<uInt>(std::min<size_t>(n, UINT32_MAX));
        const int rc = inflate(&c.gz, Z_NO_FLUSH);
        used = avail - c.gz.avail_in;
        made = n - c.gz.avail_out;
        if (rc == Z_STREAM_END) {
          c.ended = true;
        } else if (rc != Z_OK && !(rc == Z_BUF_ERROR && avail == 0)) {
          fail(std::string(what) + ": damaged data after " + std::to_string(consumed_ + used) + " compressed bytes (" +
               (c.gz.msg != nullptr ? c.gz.msg : "zlib error " + std::to_string(rc)) + ")");
          return 0;
        }
        break;
      }
      case Compression::kXz: {
        c.xz.next_in = in_.data() + in_at_;
        c.xz.avail_in = avail;
        c.xz.next_out = reinterpret_cast<uint8_t*>(out);
        c.xz.avail_out = n;
        const lzma_ret rc = lzma_code(&c.xz, more ? LZMA_RUN : LZMA_FINISH);
        used = avail - c.xz.avail_in;
        made = n - c.xz.avail_out;
        if (rc == LZMA_STREAM_END) {
          c.ended = true;
        } else if (rc != LZMA_OK && !(rc == LZMA_BUF_ERROR && !more)) {
          fail(std::string(what) + ": damaged data after " + std::to_string(consumed_ + used) +
               " compressed bytes (liblzma error " + std::to_string(static_cast<int>(rc)) + ")");
          return 0;
        }
        break;
      }
      case Compression::kZstd: {
        ZSTD_inBuffer in{in_.data() + in_at_, avail, 0};
        ZSTD_outBuffer o{out, n, 0};
        const size_t rc = ZSTD_decompressStream(c.zs, &o, &in);
        used = in.pos;
        made = o.pos;
        if (ZSTD_isError(rc)) {
          fail(std::string(what) + ": damaged data after " + std::to_string(consumed_ + used) + " compressed bytes (" +
               ZSTD_getErrorName(rc) + ")");
          return 0;
        }
        c.zs_left = rc;
        c.ended = rc == 0;
        break;
      }
      case Compression::kNone: break;
    }
    in_at_ += used;
    consumed_ += used;
    if (made != 0) return made;
    if (!more && in_at_ >= in_len_) {
      // The file is over: the compressed data must have ended with it.
      if (!c.ended) fail(std::string(what) + ": the data ends in the middle of a compressed stream (" +
                         std::to_string(consumed_) + " bytes): a file cut short?");
      return 0;
    }
    if (used == 0 && c.ended && compression_ != Compression::kGzip) {
      return 0;  // xz: trailing garbage is its decoder's business; zstd: a frame's end with nothing after
    }
  }
}

}  // namespace sluice::replay
