// The kernels of nn/cpu are compiled once per instruction set, each time
// inside its own inline namespace (lockstep::nn::cpu::avx2,
// lockstep::nn::cpu::avx512) named by LOCKSTEP_CPU_ISA, so that the copies,
// inline functions and templates included, never share a symbol. A file
// compiled outside those builds (a test, a benchmark) sees the avx2 kernels,
// which run on every CPU the build targets.
#pragma once

#ifndef LOCKSTEP_CPU_ISA
#define LOCKSTEP_CPU_ISA avx2
#endif
