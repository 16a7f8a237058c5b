// ScopedEnv: an environment variable set (or unset) for a test's scope, and
// put back as it was at the end: a CI lane may have set it for the whole
// test process (LOCKSTEP_CPU_ISA in cpu_tests_isa_avx2, LOCKSTEP_VERIFY_BUCKETS
// under TSan), and the tests after this one must still see that value.
#pragma once

#include <cstdlib>
#include <optional>
#include <string>

namespace lockstep::testing {

class ScopedEnv {
 public:
  // value null: unset.
  ScopedEnv(const char* name, const char* value) : name_(name) {
    if (const char* was = std::getenv(name)) saved_ = was;
    set(value);
  }
  ~ScopedEnv() { set(saved_ ? saved_->c_str() : nullptr); }
  ScopedEnv(const ScopedEnv&) = delete;
  ScopedEnv& operator=(const ScopedEnv&) = delete;

  // value null: unset.
  void set(const char* value) {
    if (value == nullptr) {
      ::unsetenv(name_.c_str());
    } else {
      ::setenv(name_.c_str(), value, 1);
    }
  }

 private:
  std::string name_;
  std::optional<std::string> saved_;
};

}  // namespace lockstep::testing
