// Status and Expected<T> for the device runtime's .hbm reader and writer.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace qflow::hbm {

// The runtime cannot include the framework's Status (it ships without it), so it keeps its
// own: a one-line message, empty when the operation succeeded.
class Status {
 public:
  static Status ok() { return Status(); }
  static Status error(std::string message) { return Status(std::move(message), true); }

  bool is_ok() const { return !failed_; }
  explicit operator bool() const { return is_ok(); }
  const std::string& message() const { return message_; }

 private:
  Status() = default;
  Status(std::string message, bool failed) : message_(std::move(message)), failed_(failed) {}

  std::string message_;
  bool failed_ = false;
};

// A value or the Status saying why there is none.
template <typename T>
class Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}  // NOLINT: implicit by design
  // An ok Status carries no value to hold, so it is turned into an error rather than
  // produce an Expected that has neither.
  Expected(Status status)  // NOLINT: implicit by design
      : state_(status.is_ok() ? Status::error("hbm: internal error: no value and no error")
                              : std::move(status)) {}

  bool has_value() const { return std::holds_alternative<T>(state_); }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<T>(state_); }
  const T& value() const& { return std::get<T>(state_); }
  T&& value() && { return std::get<T>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; an ok Status when a value is held.
  Status status() const { return has_value() ? Status::ok() : std::get<Status>(state_); }
  const std::string& message() const {
    static const std::string none;
    return has_value() ? none : std::get<Status>(state_).message();
  }

 private:
  std::variant<T, Status> state_;
};

}  // namespace qflow::hbm
