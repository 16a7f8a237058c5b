// The start-up check that this CPU has every instruction-set feature the
// binary was compiled for (x86-64-v3 by default, the build machine's with
// LOCKSTEP_NATIVE), so that a CPU below it gets one line naming what it
// lacks and the remedy instead of "Illegal instruction".
//
// cpu_baseline.cpp is compiled for plain x86-64 and uses no C++ library
// templates or inline functions (whose one linked copy may come from a file
// compiled for the baseline): it runs before any other code of lockstep,
// from app/platform/cpu_guard.cpp's constructor (in the lockstep binary only).
// Feature names are GCC's -m option names (avx2, bmi2, sse4.2, avx512bw).
#pragma once

#include <cstddef>

namespace lockstep::app {

// The features the build was compiled for (null-terminated) and the name
// of its target ("x86-64-v3", or the -march=native build's): constant data
// of cpu_build_features.cpp, compiled with the build's own flags.
extern const char* const kCpuBuildFeatures[];
extern const char kCpuBuildTarget[];

// Writes the names of the features this CPU (and its OS, for the AVX and
// AVX-512 register state) supports into names; returns how many, at most cap.
size_t detect_cpu_features(const char** names, size_t cap);

// names[0..count) less those in `hidden` (comma-separated), in order; returns
// the new count. (A test hook: LOCKSTEP_TEST_HIDE_CPU_FEATURES.)
size_t hide_cpu_features(const char** names, size_t count, const char* hidden);

// When some of `built_for` (null-terminated) is not among `present` (count
// names), writes the one-line message (no newline) into out (NUL-terminated,
// cut at cap) and returns true; else returns false.
bool cpu_baseline_problem(const char* const* built_for, const char* target,
                          const char* const* present, size_t count, char* out, size_t cap);

}  // namespace lockstep::app
