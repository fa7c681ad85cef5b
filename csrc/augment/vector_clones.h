// The attribute that compiles a kernel three times, for x86-64-v4 (AVX-512),
// AVX2 and the baseline, the one the CPU runs picked when the library loads.
// The augmentation units are built with -ffp-contract=off (CMakeLists.txt):
// no fused multiply-add is formed, so every copy rounds each operation as
// the source writes it and gives the same bytes.
#ifndef SDS_LOADER_AUGMENT_VECTOR_CLONES_H_
#define SDS_LOADER_AUGMENT_VECTOR_CLONES_H_

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__) && defined(__has_attribute)
#if __has_attribute(target_clones)
#define SDSL_VECTOR_CLONES __attribute__((target_clones("arch=x86-64-v4", "avx2", "default")))
#endif
#endif
#ifndef SDSL_VECTOR_CLONES
#define SDSL_VECTOR_CLONES
#endif

#endif  // SDS_LOADER_AUGMENT_VECTOR_CLONES_H_
