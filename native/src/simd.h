// The SIMD set-up every native fingerprint source shares. The hot functions are compiled three times
// (AVX-512F, AVX2 and baseline; no FMA: -ffp-contract=off) and picked at load time by the CPU
// (target_clones), so the binary stays portable and every build gives the same bits. OPTMARK_X86_SIMD is
// set where the hand-written AVX2 and AVX-512F paths are compiled too (GCC on x86-64 Linux); each tests
// the CPU once and does per element what the portable loop does.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define OPTMARK_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#define OPTMARK_X86_SIMD 1
// GCC 12's AVX-512 intrinsics warn of their own undefined inputs (-Wmaybe-uninitialized, GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#else
#define OPTMARK_CLONES
#endif
