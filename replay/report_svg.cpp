// The HTML report's text helpers and inline SVG plots (see report_svg.h).
// Plots are drawn in a fixed viewBox and scaled by CSS, so they fit a narrow
// screen and print; axes use round tick steps (1, 2, 5 x 10^k; UTC times in
// seconds, minutes, hours or days).
#include "replay/report_svg.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <ctime>

namespace sluice::replay::html {
namespace {

constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD
constexpr time::Nanos kMs = 1'000'000, kS = 1000 * kMs, kMin = 60 * kS, kH = 60 * kMin, kDay = 24 * kH;

// A lead byte's sequence length (0: not a lead byte) and its second byte's range.
struct Lead {
  size_t length;
  unsigned char low, high;
};
Lead lead_of(unsigned char c) {
  if (c >= 0xC2 && c <= 0xDF) return {2, 0x80, 0xBF};
  if (c == 0xE0) return {3, 0xA0, 0xBF};  // no overlong forms
  if (c == 0xED) return {3, 0x80, 0x9F};  // no surrogates
  if (c >= 0xE1 && c <= 0xEF) return {3, 0x80, 0xBF};
  if (c == 0xF0) return {4, 0x90, 0xBF};
  if (c == 0xF4) return {4, 0x80, 0x8F};  // up to U+10FFFF
  if (c >= 0xF1 && c <= 0xF3) return {4, 0x80, 0xBF};
  return {0, 0, 0};
}

// The UTF-8 sequence at text[i]: its length when well formed; otherwise the
// length of its longest valid beginning (at least 1), which reads as one
// U+FFFD, as JSON's writer (nlohmann's "replace") and browsers count them.
struct Utf8 {
  size_t length;
  bool valid;
};
Utf8 utf8_at(std::string_view text, size_t i) {
  const auto byte = [&](size_t k) { return static_cast<unsigned char>(text[k]); };
  if (byte(i) < 0x80) return {1, true};
  const Lead lead = lead_of(byte(i));
  if (lead.length == 0) return {1, false};
  for (size_t k = 1; k < lead.length; ++k) {
    const unsigned char low = k == 1 ? lead.low : 0x80, high = k == 1 ? lead.high : 0xBF;
    if (i + k >= text.size() || byte(i + k) < low || byte(i + k) > high) return {k, false};
  }
  return {lead.length, true};
}

const char* reference(char c) {
  switch (c) {
    case '&':
      return "&amp;";
    case '<':
      return "&lt;";
    case '>':
      return "&gt;";
    case '"':
      return "&quot;";
    case '\'':
      return "&#39;";
    default:
      return nullptr;
  }
}

// A coordinate: one decimal, 0 for what is not finite.
std::string at(double v) {
  return decimal(v, 1);
}

// Appends SVG elements; every text and tooltip is escaped here.
class Svg {
 public:
  Svg(double width, double height, std::string_view title) {
    out_ = "<svg viewBox=\"0 0 " + at(width) + " " + at(height) + "\" role=\"img\"><title>";
    append_escaped(out_, title);
    out_ += "</title>";
  }
  void rect(double x, double y, double w, double h, std::string_view fill, std::string_view tip = {}) {
    out_ += "<rect x=\"" + at(x) + "\" y=\"" + at(y) + "\" width=\"" + at(std::max(w, 0.0)) + "\" height=\"" +
            at(std::max(h, 0.0)) + "\" fill=\"" + std::string(fill) + "\"";
    if (tip.empty()) {
      out_ += "/>";
      return;
    }
    out_ += "><title>";
    append_escaped(out_, tip);
    out_ += "</title></rect>";
  }
  void line(double x1, double y1, double x2, double y2, std::string_view cls) {
    out_ += "<line class=\"" + std::string(cls) + "\" x1=\"" + at(x1) + "\" y1=\"" + at(y1) + "\" x2=\"" + at(x2) +
            "\" y2=\"" + at(y2) + "\"/>";
  }
  void text(double x, double y, std::string_view anchor, std::string_view cls, std::string_view text) {
    out_ += "<text class=\"" + std::string(cls) + "\" x=\"" + at(x) + "\" y=\"" + at(y) + "\" text-anchor=\"" +
            std::string(anchor) + "\">";
    append_escaped(out_, text);
    out_ += "</text>";
  }
  // A square of `colour` and a label after it.
  void key(double x, double y, std::string_view colour, std::string_view label) {
    rect(x, y - 9, 10, 10, colour);
    text(x + 14, y, "start", "label", label);
  }
  [[nodiscard]] std::string finish() && { return std::move(out_) + "</svg>"; }

 private:
  std::string out_;
};

// The plot area inside a viewBox.
struct Frame {
  double left, top, width, height;
  [[nodiscard]] double bottom() const { return top + height; }
  [[nodiscard]] double right() const { return left + width; }
};

// A round step (1, 2, 5 x 10^k) that cuts 0..max into at most `ticks` parts.
uint64_t round_step(uint64_t max, uint64_t ticks) {
  const uint64_t wanted = std::max<uint64_t>(1, (max + ticks - 1) / ticks);
  for (uint64_t p = 1;; p *= 10) {
    for (uint64_t m : {1, 2, 5}) {
      if (m * p >= wanted) return m * p;
    }
    if (p > UINT64_MAX / 100) return wanted;
  }
}

// A count axis: 0 at the bottom, `top` at the top; grid lines and labels.
struct CountScale {
  uint64_t step, top;
  explicit CountScale(uint64_t max) : step(round_step(max, 4)), top(((max + step - 1) / step) * step) {
    if (top == 0) top = step;
  }
  [[nodiscard]] double fraction(uint64_t v) const { return static_cast<double>(v) / static_cast<double>(top); }
};

void count_axis_left(Svg& svg, const Frame& f, const CountScale& s) {
  for (uint64_t v = 0; v <= s.top; v += s.step) {
    const double y = f.bottom() - s.fraction(v) * f.height;
    svg.line(f.left, y, f.right(), y, v == 0 ? "axis" : "grid");
    svg.text(f.left - 6, y + 4, "end", "tick", std::to_string(v));
  }
}

void count_axis_bottom(Svg& svg, const Frame& f, const CountScale& s) {
  for (uint64_t v = 0; v <= s.top; v += s.step) {
    const double x = f.left + s.fraction(v) * f.width;
    svg.line(x, f.top, x, f.bottom(), v == 0 ? "axis" : "grid");
    svg.text(x, f.bottom() + 16, "middle", "tick", std::to_string(v));
  }
}

constexpr std::array<time::Nanos, 34> kTimeSteps = {
    kMs,       2 * kMs,   5 * kMs,   10 * kMs,  20 * kMs,  50 * kMs,   100 * kMs, 200 * kMs, 500 * kMs,
    kS,        2 * kS,    5 * kS,    10 * kS,   15 * kS,   30 * kS,    kMin,      2 * kMin,  5 * kMin,
    10 * kMin, 15 * kMin, 30 * kMin, kH,        2 * kH,    3 * kH,     6 * kH,    12 * kH,   kDay,
    2 * kDay,  7 * kDay,  14 * kDay, 28 * kDay, 56 * kDay, 112 * kDay, 364 * kDay};

std::string_view time_format(time::Nanos step) {
  if (step < kS) return "%H:%M:%S.%L";
  if (step < kMin) return "%H:%M:%S";
  if (step < kDay) return "%H:%M";
  return "%m-%d";
}

// UTC ticks at round multiples of a step, at most 7; the dates below.
void time_axis(Svg& svg, const Frame& f, time::Nanos start, time::Nanos span) {
  span = std::max<time::Nanos>(span, 1);
  const auto* step =
      std::find_if(kTimeSteps.begin(), kTimeSteps.end() - 1, [&](time::Nanos s) { return span / s <= 6; });
  const time::Nanos first = (start + *step - 1) / *step * *step;
  for (time::Nanos t = first; t <= start + span && t >= first; t += *step) {
    const double x = f.left + static_cast<double>(t - start) / static_cast<double>(span) * f.width;
    svg.line(x, f.bottom(), x, f.bottom() + 4, "axis");
    svg.text(x, f.bottom() + 16, "middle", "tick", utc_text(t, time_format(*step)));
  }
  std::string dates = "UTC, " + utc_text(start, "%Y-%m-%d");
  const std::string end_date = utc_text(start + span - 1, "%Y-%m-%d");
  if (end_date != utc_text(start, "%Y-%m-%d")) dates += " to " + end_date;
  svg.text(f.right(), f.bottom() + 32, "end", "label", dates);
}

}  // namespace

void append_escaped(std::string& out, std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const Utf8 u = utf8_at(text, i);
    if (!u.valid || u.length > 1) {
      if (u.valid)
        out.append(text.substr(i, u.length));
      else
        out += kReplacement;
      i += u.length;
      continue;
    }
    const char c = text[i++];
    if (const char* ref = reference(c))
      out += ref;
    else if ((static_cast<unsigned char>(c) < 0x20 && c != '\t') || c == 0x7F)
      out += kReplacement;
    else
      out += c;
  }
}

std::string escaped(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  append_escaped(out, text);
  return out;
}

std::string shortened(std::string_view text, size_t max_chars) {
  size_t chars = 0;
  for (size_t i = 0; i < text.size(); ++chars) {
    if (chars == max_chars) return std::string(text.substr(0, i)) + "\xE2\x80\xA6";
    i += utf8_at(text, i).length;
  }
  return std::string(text);
}

std::string decimal(double value, int decimals) {
  if (!std::isfinite(value)) return "0";
  char buf[64];
  const int n = std::snprintf(buf, sizeof buf, "%.*f", decimals, value);
  return n > 0 && static_cast<size_t>(n) < sizeof buf ? std::string(buf) : "0";
}

std::string seconds_text(time::Nanos ns) {
  std::string out = std::to_string(ns / kS);
  if (ns % kS == 0) return out;
  char frac[16];
  std::snprintf(frac, sizeof frac, "%09llu", static_cast<unsigned long long>(ns % kS));
  std::string digits(frac);
  digits.erase(digits.find_last_not_of('0') + 1);
  return out + "." + digits;
}

std::string utc_text(time::Nanos t, std::string_view format) {
  std::string fmt(format);
  if (const size_t pos = fmt.find("%L"); pos != std::string::npos) {
    char ms[8];
    std::snprintf(ms, sizeof ms, "%03u", static_cast<unsigned>(t / kMs % 1000));
    fmt.replace(pos, 2, ms);
  }
  const std::time_t seconds = static_cast<std::time_t>(t / kS);
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char buf[64];
  const size_t n = std::strftime(buf, sizeof buf, fmt.c_str(), &tm);
  return std::string(buf, n);
}

std::string rule_display(std::string_view rule) {
  return rule.empty() ? "(no rule)" : std::string(rule);
}

RulePalette::RulePalette(const std::vector<RuleCounts>& rules) {
  for (const RuleCounts& r : rules) rules_.push_back(r.rule);
}

const char* RulePalette::colour(std::string_view rule) const {
  // Cool and grey hues only: the warm one belongs to refusals.
  static constexpr std::array<const char*, 8> kColours = {"#4c72b0", "#3f9b8f", "#8172b2", "#5f8a4e",
                                                          "#2f5d8a", "#8c8cb8", "#6a9fb5", "#4f6d5e"};
  if (rule.empty()) return "#a3abb5";
  const auto it = std::find(rules_.begin(), rules_.end(), rule);
  if (it == rules_.end()) return kNeutralColour;
  return kColours[static_cast<size_t>(it - rules_.begin()) % kColours.size()];
}

std::string series_plot(const TimeSeries& series, const TimeSeries::Rule& rule, const char* colour) {
  const size_t bins = std::max<size_t>(rule.requests.size(), 1);
  const Frame f{64, 30, 850, 120};
  Svg svg(960, 192, "Requests and refusals over time: " + rule_display(rule.rule));
  svg.key(f.left, 16, colour, rule_display(rule.rule) + ": requests");
  svg.key(f.right() - 150, 16, kRefusedColour, "refused");
  uint64_t max = 0;
  for (size_t i = 0; i < rule.requests.size(); ++i) {
    max = std::max({max, rule.requests[i], i < rule.refused.size() ? rule.refused[i] : 0});
  }
  const CountScale scale(max);
  count_axis_left(svg, f, scale);
  const double width = f.width / static_cast<double>(bins), gap = width > 4 ? 1 : 0;
  for (size_t i = 0; i < rule.requests.size(); ++i) {
    const uint64_t refused = i < rule.refused.size() ? rule.refused[i] : 0;
    const uint64_t other = rule.requests[i] - std::min(rule.requests[i], refused);
    const double x = f.left + static_cast<double>(i) * width;
    const double h_ref = scale.fraction(refused) * f.height, h_other = scale.fraction(other) * f.height;
    const std::string tip = utc_text(series.start + i * series.bin, "%Y-%m-%d %H:%M:%S.%L UTC: ") +
                            std::to_string(rule.requests[i]) + " requests, " + std::to_string(refused) + " refused";
    if (refused > 0) svg.rect(x, f.bottom() - h_ref, width - gap, h_ref, kRefusedColour, tip);
    if (other > 0) svg.rect(x, f.bottom() - h_ref - h_other, width - gap, h_other, colour, tip);
  }
  time_axis(svg, f, series.start, series.bin * bins);
  return std::move(svg).finish();
}

std::string rate_plot(const RateDistribution& rate, const char* colour) {
  const size_t bins = std::max<size_t>(rate.keys_by_ratio.size(), 1);
  const Frame f{64, 30, 850, 130};
  Svg svg(960, 200, "Keys by busiest period against the limit: " + rule_display(rate.rule));
  svg.key(f.left, 16, colour, rule_display(rate.rule) + ": keys below the limit");
  svg.key(f.right() - 250, 16, kRefusedColour, "at or above the limit");
  const uint64_t max =
      rate.keys_by_ratio.empty() ? 0 : *std::max_element(rate.keys_by_ratio.begin(), rate.keys_by_ratio.end());
  const CountScale scale(max);
  count_axis_left(svg, f, scale);
  const double width = f.width / static_cast<double>(bins);
  const auto limit_bin = static_cast<size_t>(std::lround(1.0 / RateDistribution::kBinWidth));
  for (size_t i = 0; i < rate.keys_by_ratio.size(); ++i) {
    const double low = static_cast<double>(i) * RateDistribution::kBinWidth;
    const bool last = i + 1 == rate.keys_by_ratio.size();
    const std::string range = last ? decimal(low, 1) + " and above"
                                   : decimal(low, 1) + " to " + decimal(low + RateDistribution::kBinWidth, 1);
    const double h = scale.fraction(rate.keys_by_ratio[i]) * f.height;
    if (rate.keys_by_ratio[i] > 0) {
      svg.rect(f.left + static_cast<double>(i) * width, f.bottom() - h, width - 1, h,
               i >= limit_bin ? kRefusedColour : colour,
               std::to_string(rate.keys_by_ratio[i]) + " keys at " + range + " times the limit");
    }
    if (i % 5 == 0 || last) {
      svg.text(f.left + static_cast<double>(i) * width, f.bottom() + 16, "middle", "tick",
               decimal(low, 1) + (last ? "+" : ""));
    }
  }
  const double limit_x = f.left + static_cast<double>(limit_bin) * width;
  svg.line(limit_x, f.top - 4, limit_x, f.bottom(), "limit");
  svg.text(limit_x + 4, f.top + 8, "start", "label", "limit");
  svg.text(f.right(), f.bottom() + 32, "end", "label", "busiest period / limit");
  return std::move(svg).finish();
}

std::string top_keys_plot(const std::vector<RefusedKey>& keys, const RulePalette& palette) {
  constexpr double kRow = 22;
  const Frame f{340, 14, 460, kRow * static_cast<double>(std::max<size_t>(keys.size(), 1))};
  Svg svg(960, f.bottom() + 40, "The most refused keys");
  uint64_t max = 0;
  for (const RefusedKey& k : keys) max = std::max(max, k.refused);
  const CountScale scale(max);
  count_axis_bottom(svg, f, scale);
  for (size_t i = 0; i < keys.size(); ++i) {
    const RefusedKey& k = keys[i];
    const double y = f.top + static_cast<double>(i) * kRow;
    const std::string first = utc_text(k.first_refusal, "%Y-%m-%d %H:%M:%S.%L UTC");
    svg.rect(8, y + 6, 10, 10, palette.colour(k.rule), rule_display(k.rule));
    svg.text(24, y + 15, "start", "label", shortened(k.key, 40));
    svg.rect(f.left, y + 3, scale.fraction(k.refused) * f.width, kRow - 6, kRefusedColour,
             k.key + " (" + rule_display(k.rule) + "): " + std::to_string(k.refused) + " refused of " +
                 std::to_string(k.requests) + ", first at " + first);
    svg.text(f.left + scale.fraction(k.refused) * f.width + 4, y + 15, "start", "tick", std::to_string(k.refused));
    svg.text(952, y + 15, "end", "tick", "first " + utc_text(k.first_refusal, "%H:%M:%S"));
  }
  svg.text(f.right(), f.bottom() + 32, "end", "label", "requests refused");
  return std::move(svg).finish();
}

}  // namespace sluice::replay::html
