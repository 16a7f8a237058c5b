// The CPU baseline check of cpu_baseline.h: CPUID and XGETBV read directly
// (<cpuid.h>), C strings only. Compiled for plain x86-64 (see the header).
#include "app/platform/cpu_baseline.h"

#include <cpuid.h>

#include <cstdio>
#include <cstring>

namespace lockstep::app {
namespace {

enum Register { kEax, kEbx, kEcx, kEdx };
// Register state the OS must save for a feature: none, AVX (YMM), AVX-512.
enum State { kNoState, kYmm, kZmm };

struct FeatureBit {
  const char* name;
  unsigned leaf, subleaf;
  Register reg;
  int bit;
  State state;
};

constexpr FeatureBit kFeatureBits[] = {
    {"sse3", 1, 0, kEcx, 0, kNoState},
    {"pclmul", 1, 0, kEcx, 1, kNoState},
    {"ssse3", 1, 0, kEcx, 9, kNoState},
    {"fma", 1, 0, kEcx, 12, kYmm},
    {"cx16", 1, 0, kEcx, 13, kNoState},
    {"sse4.1", 1, 0, kEcx, 19, kNoState},
    {"sse4.2", 1, 0, kEcx, 20, kNoState},
    {"movbe", 1, 0, kEcx, 22, kNoState},
    {"popcnt", 1, 0, kEcx, 23, kNoState},
    {"aes", 1, 0, kEcx, 25, kNoState},
    {"xsave", 1, 0, kEcx, 26, kNoState},
    {"avx", 1, 0, kEcx, 28, kYmm},
    {"f16c", 1, 0, kEcx, 29, kYmm},
    {"rdrnd", 1, 0, kEcx, 30, kNoState},
    {"bmi", 7, 0, kEbx, 3, kNoState},
    {"avx2", 7, 0, kEbx, 5, kYmm},
    {"bmi2", 7, 0, kEbx, 8, kNoState},
    {"avx512f", 7, 0, kEbx, 16, kZmm},
    {"avx512dq", 7, 0, kEbx, 17, kZmm},
    {"rdseed", 7, 0, kEbx, 18, kNoState},
    {"adx", 7, 0, kEbx, 19, kNoState},
    {"avx512ifma", 7, 0, kEbx, 21, kZmm},
    {"avx512cd", 7, 0, kEbx, 28, kZmm},
    {"sha", 7, 0, kEbx, 29, kNoState},
    {"avx512bw", 7, 0, kEbx, 30, kZmm},
    {"avx512vl", 7, 0, kEbx, 31, kZmm},
    {"avx512vbmi", 7, 0, kEcx, 1, kZmm},
    {"avx512vbmi2", 7, 0, kEcx, 6, kZmm},
    {"gfni", 7, 0, kEcx, 8, kNoState},
    {"vaes", 7, 0, kEcx, 9, kYmm},
    {"vpclmulqdq", 7, 0, kEcx, 10, kYmm},
    {"avx512vnni", 7, 0, kEcx, 11, kZmm},
    {"avx512bitalg", 7, 0, kEcx, 12, kZmm},
    {"avx512vpopcntdq", 7, 0, kEcx, 14, kZmm},
    {"avxvnni", 7, 1, kEax, 4, kYmm},
    {"avx512bf16", 7, 1, kEax, 5, kZmm},
    {"lzcnt", 0x80000001u, 0, kEcx, 5, kNoState},
};

// The register state the OS saves (XCR0), when it supports XGETBV.
unsigned long long saved_state() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 27))) return 0;  // OSXSAVE
  unsigned lo = 0, hi = 0;
  __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<unsigned long long>(hi) << 32) | lo;
}

bool state_saved(State state, unsigned long long xcr0) {
  if (state == kYmm) return (xcr0 & 0x6) == 0x6;    // XMM, YMM
  if (state == kZmm) return (xcr0 & 0xe6) == 0xe6;  // + opmask, ZMM upper halves, ZMM16-31
  return true;
}

bool contains(const char* const* names, size_t count, const char* name) {
  for (size_t i = 0; i < count; ++i) {
    if (std::strcmp(names[i], name) == 0) return true;
  }
  return false;
}

// True when `name` is one of the comma-separated names in `list`.
bool listed(const char* list, const char* name) {
  const size_t length = std::strlen(name);
  for (const char* p = list; *p != '\0';) {
    const char* end = std::strchr(p, ',');
    const size_t n = end ? static_cast<size_t>(end - p) : std::strlen(p);
    if (n == length && std::strncmp(p, name, n) == 0) return true;
    p += end ? n + 1 : n;
  }
  return false;
}

}  // namespace

size_t detect_cpu_features(const char** names, size_t cap) {
  const unsigned long long xcr0 = saved_state();
  size_t count = 0;
  for (const FeatureBit& f : kFeatureBits) {
    unsigned r[4] = {};
    if (!__get_cpuid_count(f.leaf, f.subleaf, &r[kEax], &r[kEbx], &r[kEcx], &r[kEdx])) continue;
    if ((r[f.reg] >> f.bit) & 1u && state_saved(f.state, xcr0) && count < cap) {
      names[count++] = f.name;
    }
  }
  return count;
}

size_t hide_cpu_features(const char** names, size_t count, const char* hidden) {
  size_t kept = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!listed(hidden, names[i])) names[kept++] = names[i];
  }
  return kept;
}

bool cpu_baseline_problem(const char* const* built_for, const char* target,
                          const char* const* present, size_t count, char* out, size_t cap) {
  char missing[512] = "";
  size_t used = 0;
  for (const char* const* f = built_for; *f != nullptr; ++f) {
    if (contains(present, count, *f)) continue;
    const int n =
        std::snprintf(missing + used, sizeof missing - used, "%s%s", used == 0 ? "" : ", ", *f);
    if (n > 0) used = std::strlen(missing);
  }
  if (used == 0) return false;
  const bool portable = std::strncmp(target, "x86-64", 6) == 0;
  std::snprintf(out, cap, "lockstep: this binary was built for %s, and this CPU lacks %s: %s",
                target, missing,
                portable ? "rebuild lockstep on this node with cmake -DLOCKSTEP_NATIVE=ON "
                           "(code for this CPU)"
                         : "rebuild lockstep without -DLOCKSTEP_NATIVE (portable x86-64-v3: "
                           "AVX2, FMA, BMI2, F16C, MOVBE), or with it on this node");
  return true;
}

}  // namespace lockstep::app
