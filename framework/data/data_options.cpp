// load-data option parsing: resize "HxW", color, layout, per-channel mean/std lists, counts.
#include "framework/data/data_options.h"

#include <charconv>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "framework/data/preprocess.h"

namespace qflow {

namespace {

// Sides beyond this are surely a typo, and keep H*W*C far from overflowing.
constexpr int64_t kMaxSide = 1 << 15;

Status bad(const std::string& option, const std::string& requirement, const std::string& got) {
  return invalid_input("load-data option '" + option + "' must be " + requirement + ", got " + got);
}

std::string quoted(const std::string& text) { return "'" + text + "'"; }

std::string number_text(double value) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, end) : std::to_string(value);
}

bool parse_side(std::string_view text, int64_t& out) {
  if (text.empty()) return false;
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && out >= 1 && out <= kMaxSide;
}

bool parse_number(std::string_view text, double& out) {
  while (!text.empty() && text.front() == ' ') text.remove_prefix(1);
  while (!text.empty() && text.back() == ' ') text.remove_suffix(1);
  if (text.empty()) return false;
  if (text.front() == '+') text.remove_prefix(1);
  const auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
  return ec == std::errc() && ptr == text.data() + text.size() && std::isfinite(out);
}

// "a,b,c" (one per channel) or a single number.
Status parse_channels(const std::string& option, const std::string& text, int64_t channels, bool nonzero,
                      const std::string& color, std::vector<double>& out) {
  std::vector<double> values;
  std::size_t start = 0;
  bool ok = true;
  while (ok) {
    const std::size_t comma = text.find(',', start);
    double value = 0.0;
    ok = parse_number(std::string_view(text).substr(start, comma == std::string::npos ? std::string::npos : comma - start), value) &&
         (!nonzero || value != 0.0);
    values.push_back(value);
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  if (!ok || (values.size() != 1 && static_cast<int64_t>(values.size()) != channels)) {
    const std::string number = nonzero ? "non-zero number" : "number";
    const std::string requirement =
        channels == 1 ? "one " + number + " (color " + color + " has one channel)"
                      : "one " + number + " or " + std::to_string(channels) + " comma-separated " + number +
                            "s (one per channel, in " + color + " order)";
    return bad(option, requirement, quoted(text));
  }
  out = std::move(values);
  return Status::ok();
}

// A float option that may arrive as an int: options read back from a manifest come from
// JSON, which writes 2.0 as 2.
double float_option(const Options& options, const std::string& name) {
  if (const auto* whole = std::get_if<int64_t>(&options.values().at(name))) return static_cast<double>(*whole);
  return options.get_float(name);
}

}  // namespace

Expected<DataSpec> data_spec_from_options(const Options& options) {
  DataSpec spec;
  if (options.has("path")) spec.path = options.get_string("path");
  if (spec.path.empty()) return invalid_input("load-data option 'path' must name a .npy file or a folder, got ''");

  if (options.has("resize")) {
    const std::string text = options.get_string("resize");
    if (!text.empty()) {
      const std::size_t x = text.find('x');
      if (x == std::string::npos || !parse_side(std::string_view(text).substr(0, x), spec.resize_height) ||
          !parse_side(std::string_view(text).substr(x + 1), spec.resize_width)) {
        return bad("resize", "\"\" (keep the size) or HxW with sides 1.." + std::to_string(kMaxSide) + " (e.g. 224x224)",
                   quoted(text));
      }
    }
  }
  if (options.has("keep-ratio")) spec.keep_ratio = options.get_bool("keep-ratio");
  if (spec.keep_ratio && spec.resize_height == 0)
    return invalid_input("load-data option 'keep-ratio' needs option 'resize' (HxW), which is empty");
  if (options.has("pad-value")) {
    spec.pad_value = float_option(options, "pad-value");
    if (!std::isfinite(spec.pad_value)) return bad("pad-value", "a finite number", number_text(spec.pad_value));
  }
  std::string color_text = "rgb";
  if (options.has("color")) {
    color_text = options.get_string("color");
    if (color_text == "rgb") spec.color = ColorOrder::Rgb;
    else if (color_text == "bgr") spec.color = ColorOrder::Bgr;
    else if (color_text == "gray") spec.color = ColorOrder::Gray;
    else return bad("color", "rgb, bgr or gray", quoted(color_text));
  }
  if (options.has("scale")) {
    spec.scale = float_option(options, "scale");
    if (!std::isfinite(spec.scale) || spec.scale <= 0.0)
      return bad("scale", "a finite number greater than 0", number_text(spec.scale));
  }
  const int64_t channels = color_channels(spec.color);
  if (options.has("mean"))
    QFLOW_RETURN_IF_ERROR(parse_channels("mean", options.get_string("mean"), channels, false, color_text, spec.mean));
  if (options.has("std"))
    QFLOW_RETURN_IF_ERROR(parse_channels("std", options.get_string("std"), channels, true, color_text, spec.std));
  if (options.has("layout")) {
    const std::string text = options.get_string("layout");
    if (text == "nchw") spec.layout = SampleLayout::Nchw;
    else if (text == "nhwc") spec.layout = SampleLayout::Nhwc;
    else return bad("layout", "nchw or nhwc", quoted(text));
  }
  if (options.has("limit")) {
    spec.limit = options.get_int("limit");
    if (spec.limit < 0) return bad("limit", "0 (all samples) or a positive count", std::to_string(spec.limit));
  }
  if (options.has("batch-size")) {
    spec.batch_size = options.get_int("batch-size");
    if (spec.batch_size < 1) return bad("batch-size", "at least 1", std::to_string(spec.batch_size));
  }
  if (options.has("skip-nonfinite")) spec.skip_nonfinite = options.get_bool("skip-nonfinite");
  return spec;
}

}  // namespace qflow
