// ProgressLine: how a long computation inside a stage (a sensitivity ranking, a precision
// search) says how far it got, one line at a time; empty: nobody listens.
#pragma once

#include <chrono>
#include <functional>
#include <string>

namespace qflow {

using ProgressLine = std::function<void(const std::string& line)>;

// Passes a line on at most once per `period` (the first one at once), so a loop over
// hundreds of items can report every item without flooding a log.
class ThrottledProgress {
 public:
  using Clock = std::chrono::steady_clock;
  ThrottledProgress(ProgressLine sink, Clock::duration period) : sink_(std::move(sink)), period_(period) {}
  bool wants_line() const { return sink_ && (!said_ || Clock::now() - last_ >= period_); }
  void say(const std::string& line) {
    if (!sink_) return;
    sink_(line);
    said_ = true;
    last_ = Clock::now();
  }
  double seconds() const { return std::chrono::duration<double>(Clock::now() - start_).count(); }

 private:
  ProgressLine sink_;
  Clock::duration period_;
  Clock::time_point start_ = Clock::now();
  Clock::time_point last_{};
  bool said_ = false;
};

}  // namespace qflow
