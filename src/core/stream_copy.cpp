#include "core/stream_copy.h"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define KVPLAN_HAVE_NT_STORES 1
#endif

namespace kvplan {

#if KVPLAN_HAVE_NT_STORES

namespace {

#if defined(__AVX2__)
using Vec = __m256i;
inline Vec load(const std::byte* p) {
  return _mm256_loadu_si256(reinterpret_cast<const Vec*>(p));
}
inline void stream(std::byte* p, Vec v) {
  _mm256_stream_si256(reinterpret_cast<Vec*>(p), v);
}
#else
using Vec = __m128i;
inline Vec load(const std::byte* p) {
  return _mm_loadu_si128(reinterpret_cast<const Vec*>(p));
}
inline void stream(std::byte* p, Vec v) {
  _mm_stream_si128(reinterpret_cast<Vec*>(p), v);
}
#endif
constexpr size_t kVec = sizeof(Vec);
constexpr size_t kUnroll = 4;  // one 128-byte step = two cache lines per iteration (AVX2)

}  // namespace

void copy_nontemporal(std::byte* dst, const std::byte* src, size_t n) {
  // Non-temporal stores need an aligned destination: copy the head up to the next vector
  // boundary with memcpy, then whole unrolled steps, then the tail.
  const size_t misalign = reinterpret_cast<uintptr_t>(dst) % kVec;
  size_t head = misalign == 0 ? 0 : kVec - misalign;
  if (head > n) head = n;
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + kUnroll * kVec <= n; i += kUnroll * kVec) {
    const Vec a = load(src + i);
    const Vec b = load(src + i + kVec);
    const Vec c = load(src + i + 2 * kVec);
    const Vec d = load(src + i + 3 * kVec);
    stream(dst + i, a);
    stream(dst + i + kVec, b);
    stream(dst + i + 2 * kVec, c);
    stream(dst + i + 3 * kVec, d);
  }
  std::memcpy(dst + i, src + i, n - i);
}

void fence_nontemporal_stores() {
  _mm_sfence();
}

#else

void copy_nontemporal(std::byte* dst, const std::byte* src, size_t n) {
  std::memcpy(dst, src, n);
}
void fence_nontemporal_stores() {}

#endif

}  // namespace kvplan
