#include "core/stream_copy.h"

#include <cstring>

#if defined(__x86_64__) || defined(_M_X64)
#include <immintrin.h>
#define KVPLAN_HAVE_NT_STORES 1
#endif

namespace kvplan {

#if KVPLAN_HAVE_NT_STORES

namespace {

// The widest vector the build targets; a 64-byte store fills a whole write-combining line at once.
#if defined(__AVX512F__)
using Vec = __m512i;
inline Vec load(const std::byte* p) {
  return _mm512_loadu_si512(p);
}
inline void stream(std::byte* p, Vec v) {
  _mm512_stream_si512(reinterpret_cast<Vec*>(p), v);
}
#elif defined(__AVX2__)
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
constexpr size_t kRowBytes = 128;  // two cache lines of one page per turn
constexpr size_t kPageBytes = 4096;
constexpr size_t kPagesPerStep = kStreamStepBytes / kPageBytes;
static_assert(kPagesPerStep * kPageBytes == kStreamStepBytes);
static_assert(kRowBytes % kVec == 0 && kPageBytes % kRowBytes == 0);

inline void copy_row(std::byte* dst, const std::byte* src) {
  Vec v[kRowBytes / kVec];
  for (size_t k = 0; k < kRowBytes / kVec; ++k) v[k] = load(src + k * kVec);
  for (size_t k = 0; k < kRowBytes / kVec; ++k) stream(dst + k * kVec, v[k]);
}

inline void prefetch_row(const std::byte* p) {
  // Prefetches never fault, so running past the end of the source is harmless.
  _mm_prefetch(reinterpret_cast<const char*>(p), _MM_HINT_T0);
  _mm_prefetch(reinterpret_cast<const char*>(p + 64), _MM_HINT_T0);
}

}  // namespace

namespace detail {

size_t nontemporal_head_bytes(const std::byte* dst, size_t n) {
  const size_t misalign = reinterpret_cast<uintptr_t>(dst) % kVec;
  return std::min(n, misalign == 0 ? 0 : kVec - misalign);
}

void copy_nontemporal_step(std::byte* dst, const std::byte* src, size_t n) {
  if (n == kStreamStepBytes) {
    for (size_t row = 0; row < kPageBytes; row += kRowBytes) {
      for (size_t page = 0; page < kPagesPerStep; ++page) {
        const size_t at = page * kPageBytes + row;
        prefetch_row(src + kStreamStepBytes + at);
        copy_row(dst + at, src + at);
      }
    }
    return;
  }
  size_t i = 0;
  for (; i + kRowBytes <= n; i += kRowBytes) copy_row(dst + i, src + i);
  std::memcpy(dst + i, src + i, n - i);
}

}  // namespace detail

void copy_nontemporal(std::byte* dst, const std::byte* src, size_t n) {
  const size_t head = detail::nontemporal_head_bytes(dst, n);
  std::memcpy(dst, src, head);
  for (size_t done = head; done < n; done += kStreamStepBytes) {
    detail::copy_nontemporal_step(dst + done, src + done, std::min(kStreamStepBytes, n - done));
  }
}

void fence_nontemporal_stores() {
  _mm_sfence();
}

#else

namespace detail {
size_t nontemporal_head_bytes(const std::byte*, size_t) {
  return 0;
}
void copy_nontemporal_step(std::byte* dst, const std::byte* src, size_t n) {
  std::memcpy(dst, src, n);
}
}  // namespace detail

void copy_nontemporal(std::byte* dst, const std::byte* src, size_t n) {
  std::memcpy(dst, src, n);
}
void fence_nontemporal_stores() {}

#endif

}  // namespace kvplan
