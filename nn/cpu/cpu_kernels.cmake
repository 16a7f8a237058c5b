# The CPU kernels of nn/cpu, compiled once per instruction set into object
# libraries, each in its own inline namespace (nn/cpu/isa_namespace.h);
# nn/cpu/cpu_backend_factory.cpp picks one at run time (nn/cpu_isa.h).
#
#   baseline (all other code): x86-64-v3 (AVX2, FMA, F16C, BMI2), or
#                              -march=native with LOCKSTEP_NATIVE=ON
#   lockstep_cpu_avx2:   the baseline flags (under LOCKSTEP_NATIVE, minus AVX-512)
#   lockstep_cpu_avx512: + AVX-512 F/BW/VL/DQ, 512-bit vectors preferred
#
# Files listed in lockstep_cpu_common_sources are compiled once, at baseline.
set(lockstep_cpu_common_sources
    nn/cpu/cpu_backend_factory.cpp nn/cpu/cpu_isa.cpp nn/cpu/dense_eigen.cpp nn/cpu/scratch.cpp
    nn/cpu/thread_pool.cpp nn/cpu/winograd_filters.cpp)
file(GLOB lockstep_cpu_kernel_sources CONFIGURE_DEPENDS nn/cpu/*.cpp)
list(TRANSFORM lockstep_cpu_common_sources PREPEND ${CMAKE_CURRENT_SOURCE_DIR}/)
list(REMOVE_ITEM lockstep_cpu_kernel_sources ${lockstep_cpu_common_sources})

# -Wno-psabi: 64-byte vectors passed by value between the inline functions
# of the avx2 build (all compiled with the same flags) draw GCC's note that
# their ABI differs from an AVX-512 build's; the namespaces keep them apart.
# lockstep_build_target names the baseline in the start-up CPU check.
if(LOCKSTEP_NATIVE)
  set(lockstep_baseline_flags -march=native ${lockstep_native_tune})
  set(lockstep_build_target "the CPU of the build machine (-march=native)")
  set(lockstep_avx2_flags -mno-avx512f -Wno-psabi)
else()
  set(lockstep_baseline_flags -march=x86-64-v3)
  set(lockstep_build_target "x86-64-v3")
  set(lockstep_avx2_flags -Wno-psabi)
endif()
set(lockstep_avx512_flags -mavx512f -mavx512bw -mavx512vl -mavx512dq -mprefer-vector-width=512)

foreach(isa avx2 avx512)
  add_library(lockstep_cpu_${isa} OBJECT ${lockstep_cpu_kernel_sources})
  target_link_libraries(lockstep_cpu_${isa} PRIVATE lockstep_flags Threads::Threads)
  target_compile_definitions(lockstep_cpu_${isa} PRIVATE LOCKSTEP_CPU_ISA=${isa})
  target_compile_options(lockstep_cpu_${isa} PRIVATE ${lockstep_${isa}_flags})
endforeach()

# The bf16 register tile on vdpbf16ps: AVX512_BF16 in the avx512 build only
# (the file compiles to nothing elsewhere; it is called only on CPUs with it).
set_source_files_properties(nn/cpu/gemm_bf16_dot.cpp PROPERTIES COMPILE_OPTIONS
  "$<$<STREQUAL:$<TARGET_PROPERTY:NAME>,lockstep_cpu_avx512>:-mavx512bf16>")

# The Winograd filter transforms round each double result once: without
# contraction, the bits do not depend on the compiler's choice of fused
# multiply-adds (GCC's and clang's defaults differ, and change with the loop
# shape), nor on -march=native.
set_source_files_properties(nn/cpu/winograd_filters.cpp PROPERTIES COMPILE_OPTIONS
  -ffp-contract=off)
