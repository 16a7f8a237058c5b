// MPI_CHECK(expr): runs an MPI call and throws LibraryError when it does not
// return MPI_SUCCESS, naming the call, the file and line, and MPI's own
// error string (on one line). Errors only come back as return codes on
// communicators whose error handler is MPI_ERRORS_RETURN; every communicator
// lockstep creates sets it.
#pragma once

#include <fcntl.h>
#include <mpi.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "common/error.h"

namespace lockstep::distributed {

// MPI's text for an error code, folded onto one line.
inline std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING] = {};
  int length = 0;
  if (MPI_Error_string(code, text, &length) != MPI_SUCCESS) {
    return "unknown MPI error code " + std::to_string(code);
  }
  // MPICH puts its error stack on separate lines: join them with "; ".
  std::string out;
  char pending = 0;  // separator owed before the next visible character
  for (int i = 0; i < length; ++i) {
    const char c = text[i];
    if (c == '\n' || c == '\r') {
      if (!out.empty()) pending = ';';
    } else if (c == ' ' || c == '\t') {
      if (!out.empty() && pending == 0) pending = ' ';
    } else {
      if (pending == ';') out += out.back() == ':' ? " " : "; ";
      if (pending == ' ') out += ' ';
      pending = 0;
      out += c;
    }
  }
  return out;
}

[[noreturn]] inline void throw_mpi_error(int code, const char* expression, const char* file,
                                         int line) {
  fail_library_call("MPI", expression, file, line, mpi_error_string(code));
}

// Points stderr at /dev/null, just before MPI_Abort (whose own banner would
// follow the one line that already said why).
inline void silence_stderr() noexcept {
  std::fflush(stderr);
  const int null_fd = ::open("/dev/null", O_WRONLY | O_CLOEXEC);
  if (null_fd >= 0) ::dup2(null_fd, STDERR_FILENO);
}

}  // namespace lockstep::distributed

#define MPI_CHECK(expression)                                  \
  LOCKSTEP_LIBRARY_CHECK(expression, #expression, MPI_SUCCESS, \
                         ::lockstep::distributed::throw_mpi_error)
