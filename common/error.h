// Typed exceptions and check macros shared by every lockstep library.
//
// Library code throws; only app/ catches, prints one line tagged with the
// rank, aborts the communicator and exits non-zero. Library code never calls
// exit().
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace lockstep {

// Base of every lockstep error. what() is one line, ready to print.
class Error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Bad user input: a config key, a data file, a checkpoint, a model spec.
class InputError : public Error {
 public:
  using Error::Error;
};

// A failure reported by an external library (MPI, CUDA, cuDNN, NCCL, zlib).
class LibraryError : public Error {
 public:
  using Error::Error;
};

// Ranks that disagree or fail while training together.
class DistributedError : public Error {
 public:
  using Error::Error;
};

namespace detail {
template <typename... Args>
std::string concat(const Args&... args) {
  std::ostringstream out;
  (out << ... << args);
  return out.str();
}
}  // namespace detail

// Throws InputError with the streamed arguments as its message.
template <typename... Args>
[[noreturn]] void fail_input(const Args&... args) {
  throw InputError(detail::concat(args...));
}

// Throws LibraryError for a failed call of an external library:
// "<library> call failed: <call> (<file>:<line>): <details...>".
template <typename... Details>
[[noreturn]] void fail_library_call(const char* library, const char* call, const char* file,
                                    int line, const Details&... details) {
  throw LibraryError(
      detail::concat(library, " call failed: ", call, " (", file, ":", line, "): ", details...));
}

}  // namespace lockstep

// Internal invariant: a failure here is a lockstep bug, not a user error.
#define LOCKSTEP_CHECK(cond, ...)                                                              \
  do {                                                                                         \
    if (!(cond)) {                                                                             \
      throw ::lockstep::Error(::lockstep::detail::concat("internal check failed: " #cond " (", \
                                                         __FILE__, ":", __LINE__,              \
                                                         ") " __VA_OPT__(, ) __VA_ARGS__));    \
    }                                                                                          \
  } while (0)

// The body of each library's check macro (CUDA_CHECK, MPI_CHECK, ...): runs
// `call` once and, unless it returns `success`, calls
// fail(status, text, __FILE__, __LINE__), which throws. `text` is the call as
// written (#expression in the library's macro).
#define LOCKSTEP_LIBRARY_CHECK(call, text, success, fail)                                \
  do {                                                                                   \
    const auto lockstep_status_ = (call);                                                \
    if (lockstep_status_ != (success)) fail(lockstep_status_, text, __FILE__, __LINE__); \
  } while (0)
