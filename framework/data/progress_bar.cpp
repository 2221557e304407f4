// ProgressBar: throttled '\r' redraws of a one-line status on a terminal.
#include "framework/data/progress_bar.h"

#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace qflow {

namespace {

constexpr auto kRedrawInterval = std::chrono::milliseconds(100);

std::string clock_text(double seconds) {
  const auto total = static_cast<int64_t>(std::llround(seconds));
  char buffer[48];
  if (total >= 3600)
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld:%02lld", static_cast<long long>(total / 3600),
                  static_cast<long long>(total / 60 % 60), static_cast<long long>(total % 60));
  else
    std::snprintf(buffer, sizeof buffer, "%lld:%02lld", static_cast<long long>(total / 60), static_cast<long long>(total % 60));
  return buffer;
}

ProgressBar::Sink stderr_sink() {
  if (!::isatty(2)) return {};
  return [](std::string_view text) {
    std::fwrite(text.data(), 1, text.size(), stderr);
    std::fflush(stderr);
  };
}

}  // namespace

ProgressBar::ProgressBar(std::string label, int64_t total) : ProgressBar(std::move(label), total, stderr_sink()) {}

ProgressBar::ProgressBar(std::string label, int64_t total, Sink sink)
    : base_label_(label), label_(std::move(label)), total_(total), sink_(std::move(sink)), start_(Clock::now()),
      last_draw_(start_) {}

ProgressBar::~ProgressBar() { finish(); }

std::string ProgressBar::format(std::string_view label, int64_t done, int64_t total, double seconds,
                                std::string_view unit) {
  std::string line(label);
  line += "  ";
  line += std::to_string(done);
  if (total > 0) {
    line += '/';
    line += std::to_string(total);
  }
  line += ' ';
  line += unit;
  if (seconds > 0.0 && done > 0) {
    const double rate = static_cast<double>(done) / seconds;
    char buffer[48];
    std::snprintf(buffer, sizeof buffer, "  %.1f/s", rate);
    line += buffer;
    if (total > 0) line += "  ETA " + clock_text(static_cast<double>(std::max<int64_t>(total - done, 0)) / rate);
    else line += "  " + clock_text(seconds) + " elapsed";
  }
  return line;
}

void ProgressBar::draw(Clock::time_point now) {
  const double seconds = std::chrono::duration<double>(now - start_).count();
  std::string line = "\r";
  line += format(label_, done_, total_, seconds, unit_);
  // Erase-to-end-of-line clears what a longer previous line left behind.
  line += "\033[K";
  sink_(line);
  last_draw_ = now;
  drawn_ = true;
}

void ProgressBar::advance(int64_t n) {
  std::lock_guard<std::mutex> lock(mutex_);
  done_ += n;
  if (!sink_ || finished_) return;
  const Clock::time_point now = Clock::now();
  if (!drawn_ || now - last_draw_ >= kRedrawInterval) draw(now);
}

void ProgressBar::restart(std::string_view phase, std::string unit, int64_t total) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sink_ && drawn_ && !finished_) {
    draw(Clock::now());
    sink_("\n");
  }
  label_ = base_label_;
  if (!phase.empty()) {
    label_ += ' ';
    label_ += phase;
  }
  unit_ = std::move(unit);
  total_ = total;
  done_ = 0;
  start_ = last_draw_ = Clock::now();
  drawn_ = finished_ = false;
}

void ProgressBar::finish() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (finished_) return;
  finished_ = true;
  // A bar that was given nothing to count (a calibrate stage whose calibrator scored no
  // table) leaves no line behind.
  if (!sink_ || (!drawn_ && done_ == 0 && total_ <= 0)) return;
  draw(Clock::now());
  sink_("\n");
}

}  // namespace qflow
