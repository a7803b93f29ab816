// Large copies that bypass the cache. A store to the host tier (or a load into a device page) is
// not read again soon, so non-temporal stores write each destination line once, without first
// reading it into the cache (the read-for-ownership a plain store pays): one read and one write per
// byte, as glibc's memcpy does for copies larger than the cache, but at any size.
//
// One core reaches its copy bandwidth only with several read streams in flight: each step copies
// four 4 KiB pages row by row (a 128-byte row of each page in turn) and prefetches the next step
// as it goes, which is what lets the hardware keep four page streams open.
//
//   kvplan::copy_nontemporal(dst, src, n);   // any alignment, any n
//   kvplan::fence_nontemporal_stores();      // before another thread may read dst
//
//   // Hash while copying, one pass over memory: each step is seen while it is still in cache.
//   kvplan::copy_nontemporal_visiting(dst, src, n,
//       [&](const std::byte* piece, size_t len) { hasher.update_raw({piece, len}); });
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

namespace kvplan {

// Bytes one interleaved step copies (four pages).
inline constexpr size_t kStreamStepBytes = size_t{16} << 10;

// Copies n bytes. The bulk is written with non-temporal stores, which are weakly ordered: call
// fence_nontemporal_stores() before publishing dst (unlocking a mutex does not order them).
void copy_nontemporal(std::byte* dst, const std::byte* src, size_t n);

// Orders every earlier non-temporal store before later stores (sfence on x86; a no-op elsewhere,
// where copy_nontemporal uses plain stores).
void fence_nontemporal_stores();

namespace detail {
// Bytes to copy with plain stores before dst reaches the alignment non-temporal stores need.
size_t nontemporal_head_bytes(const std::byte* dst, size_t n);
// Copies one step of at most kStreamStepBytes to an aligned dst with non-temporal stores and
// prefetches the kStreamStepBytes that follow src.
void copy_nontemporal_step(std::byte* dst, const std::byte* src, size_t n);
}  // namespace detail

// copy_nontemporal that also calls visit(piece, length) on every byte of src, in order and in
// pieces of at most kStreamStepBytes, each just before it is copied: the step was prefetched while
// the previous one was copied, so visiting reads it from cache and src is read from memory once.
template <typename Visit>
void copy_nontemporal_visiting(std::byte* dst, const std::byte* src, size_t n, Visit&& visit) {
  size_t done = detail::nontemporal_head_bytes(dst, n);
  if (done > 0) {
    visit(src, done);
    copy_nontemporal(dst, src, done);
  }
  while (done < n) {
    const size_t m = std::min(kStreamStepBytes, n - done);
    visit(src + done, m);
    detail::copy_nontemporal_step(dst + done, src + done, m);
    done += m;
  }
}

}  // namespace kvplan
