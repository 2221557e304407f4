// ProgressBar: items done/total (samples, by default), rate and ETA on one stderr line, only
// when stderr is a terminal; silent otherwise, so logs and golden outputs never see it. Long
// stages other than observe (sensitivity, precision search, compare, verify, report) draw
// theirs through the same class.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <string_view>

namespace qflow {

class ProgressBar {
 public:
  using Clock = std::chrono::steady_clock;
  using Sink = std::function<void(std::string_view text)>;

  // Draws on stderr when isatty(2), else stays silent.
  ProgressBar(std::string label, int64_t total);
  // Draws into `sink` (tests); a null sink is silent.
  ProgressBar(std::string label, int64_t total, Sink sink);
  ~ProgressBar();  // finish()
  ProgressBar(const ProgressBar&) = delete;
  ProgressBar& operator=(const ProgressBar&) = delete;

  // Counts `n` more items done; redraws at most every 100 ms. Thread-safe.
  void advance(int64_t n = 1);
  // Draws the final state and ends the line; later calls do nothing.
  void finish();
  // A new phase on a fresh line: ends the current one if it was drawn, then counts from zero
  // again as "<label> <phase>" in `unit` up to `total` (<= 0: unknown, no ETA). Thread-safe.
  void restart(std::string_view phase, std::string unit, int64_t total);

  // One line without the '\r': "label  120/1000 samples  35.2/s  ETA 0:25"; a total <= 0 is
  // unknown: "label  12 models  0.5/s  0:24 elapsed".
  static std::string format(std::string_view label, int64_t done, int64_t total, double seconds,
                            std::string_view unit = "samples");

 private:
  void draw(Clock::time_point now);
  std::string base_label_;
  std::string label_;
  std::string unit_ = "samples";
  int64_t total_ = 0;
  Sink sink_;
  std::mutex mutex_;
  int64_t done_ = 0;
  Clock::time_point start_;
  Clock::time_point last_draw_;
  bool drawn_ = false;
  bool finished_ = false;
};

}  // namespace qflow
