// FS_CLONES: build a kernel for the baseline ISA and for AVX2/AVX-512, picked at load
// time (GCC's ifunc). Its loops are the whole kernel, and a portable build (any x86-64,
// no -march=native) must still vectorise them on the machine it runs on.
#pragma once

#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__)
#define FS_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))
#else
#define FS_CLONES
#endif
