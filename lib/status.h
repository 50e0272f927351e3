// The one way the project reports failure (LevelDB's include/leveldb/status.h is the model).
// A Status is OK or carries a code and a message for a person; a StatusOr<T> is a T or a failed
// Status. Both are [[nodiscard]], and neither converts to bool, so `if (Parse(...))` cannot be
// misread: callers write `if (!s.ok())`.
//
//   Status s = json::ParseUntrusted(text, doc);
//   if (!s.ok()) return Errored(400, "not JSON: " + s.message());
//
//   StatusOr<Lifecycle> l = ParseLifecycle(text);
//   if (!l.ok()) return l.status();
//   Use(*l);
//
// Thread safety: values; a Status or StatusOr may be copied and read from any thread, but one
// object is not written from two threads at once.
#pragma once

#include <cassert>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

namespace iw {

class [[nodiscard]] Status {
 public:
  enum class Code {
    kOk,
    kInvalidArgument,  // the input is malformed or breaks a rule (bad JSON, a wrong field type)
    kTooLarge,         // the input exceeds a bound (too many JSON values, a body over the limit)
    kNotFound,         // what was asked for does not exist (a file, a key)
    kIOError,          // the system or a peer failed (a read, a write, a TLS call)
    kInternal,         // a bug or a state that should not happen
  };

  // OK.
  Status() = default;
  static Status Ok() { return Status(); }
  static Status InvalidArgument(std::string message) {
    return Status(Code::kInvalidArgument, std::move(message));
  }
  static Status TooLarge(std::string message) {
    return Status(Code::kTooLarge, std::move(message));
  }
  static Status NotFound(std::string message) {
    return Status(Code::kNotFound, std::move(message));
  }
  static Status IOError(std::string message) { return Status(Code::kIOError, std::move(message)); }
  static Status Internal(std::string message) {
    return Status(Code::kInternal, std::move(message));
  }

  bool ok() const { return code_ == Code::kOk; }
  Code code() const { return code_; }
  bool IsTooLarge() const { return code_ == Code::kTooLarge; }
  bool IsNotFound() const { return code_ == Code::kNotFound; }
  // What went wrong, for a person; empty when ok().
  const std::string& message() const { return message_; }
  // The same failure with `context` in front of the message ("context: message"); OK stays OK.
  Status Prefixed(std::string_view context) const {
    if (ok()) return *this;
    return Status(code_, std::string(context) + ": " + message_);
  }

  friend bool operator==(const Status&, const Status&) = default;

 private:
  Status(Code code, std::string message) : code_(code), message_(std::move(message)) {
    assert(code != Code::kOk);
  }

  Code code_ = Code::kOk;
  std::string message_;
};

// A value of type T, or the failed Status that explains why there is none.
template <typename T>
class [[nodiscard]] StatusOr {
 public:
  // A value (implicit, so `return value;` works).
  StatusOr(T value) : value_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  // A failure; `status` must not be OK (implicit, so `return Status::InvalidArgument(...)` works).
  StatusOr(Status status) : status_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!status_.ok());
    if (status_.ok()) status_ = Status::Internal("StatusOr made from an OK Status without a value");
  }

  bool ok() const { return value_.has_value(); }
  // OK when there is a value.
  const Status& status() const { return status_; }

  // The value; only when ok().
  T& value() & {
    assert(ok());
    return *value_;
  }
  const T& value() const& {
    assert(ok());
    return *value_;
  }
  T&& value() && {
    assert(ok());
    return std::move(*value_);
  }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }
  T&& operator*() && { return std::move(*this).value(); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }

 private:
  std::optional<T> value_;
  Status status_;
};

}  // namespace iw
