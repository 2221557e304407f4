// Status and Expected<T>: how qflow code reports errors without exceptions crossing layers.
// One type for the device runtime and the host alike: it lives with the runtime (which ships
// alone) and the SDK installs it unchanged, so it depends on the standard library only.
#pragma once

#include <string>
#include <utility>
#include <variant>

namespace qflow {

// Broad classes of failure; the CLI maps them to exit codes (InvalidInput -> 2).
enum class StatusCode {
  Ok = 0,
  InvalidInput,   // a file, model, option or tensor the user gave is malformed
  Unsupported,    // well-formed but beyond what qflow implements (op, dtype, opset)
  NotFound,       // a named file, value, op or component does not exist
  Internal,       // a bug in qflow: an invariant did not hold
  IoError,        // the operating system refused a read or write
};

class [[nodiscard]] Status {
 public:
  Status() = default;
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  static Status ok() { return {}; }
  bool is_ok() const { return code_ == StatusCode::Ok; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }

  // Prefixes context ("while importing x.onnx: ") to the message; keeps the code.
  Status with_context(const std::string& context) const {
    if (is_ok()) return *this;
    return {code_, context + ": " + message_};
  }

 private:
  StatusCode code_ = StatusCode::Ok;
  std::string message_;
};

inline Status invalid_input(std::string message) { return {StatusCode::InvalidInput, std::move(message)}; }
inline Status unsupported(std::string message) { return {StatusCode::Unsupported, std::move(message)}; }
inline Status not_found(std::string message) { return {StatusCode::NotFound, std::move(message)}; }
inline Status internal_error(std::string message) { return {StatusCode::Internal, std::move(message)}; }
inline Status io_error(std::string message) { return {StatusCode::IoError, std::move(message)}; }

// A value or the Status explaining why there is none.
template <typename T>
class [[nodiscard]] Expected {
 public:
  Expected(T value) : state_(std::move(value)) {}
  // An ok Status carries no value to hold, so it becomes an internal error rather than an
  // Expected that holds neither.
  Expected(Status status)
      : state_(status.is_ok() ? internal_error("no value and no error") : std::move(status)) {}

  bool has_value() const { return state_.index() == 0; }
  explicit operator bool() const { return has_value(); }

  T& value() & { return std::get<0>(state_); }
  const T& value() const& { return std::get<0>(state_); }
  T&& value() && { return std::get<0>(std::move(state_)); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

  // The error; Status::ok() when a value is held.
  Status status() const { return has_value() ? Status::ok() : std::get<1>(state_); }
  // The error's message; empty when a value is held.
  const std::string& message() const {
    static const std::string none;
    return has_value() ? none : std::get<1>(state_).message();
  }

 private:
  std::variant<T, Status> state_;
};

}  // namespace qflow

// Early-return helpers used throughout qflow's own code.
#define QFLOW_CONCAT_INNER(a, b) a##b
#define QFLOW_CONCAT(a, b) QFLOW_CONCAT_INNER(a, b)

#define QFLOW_RETURN_IF_ERROR(expr)                 \
  do {                                              \
    ::qflow::Status qflow_status_ = (expr);         \
    if (!qflow_status_.is_ok()) return qflow_status_; \
  } while (0)

#define QFLOW_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                \
  if (!tmp.has_value()) return tmp.status();        \
  lhs = std::move(tmp).value()

#define QFLOW_ASSIGN_OR_RETURN(lhs, expr) \
  QFLOW_ASSIGN_OR_RETURN_IMPL(QFLOW_CONCAT(qflow_expected_, __LINE__), lhs, expr)
