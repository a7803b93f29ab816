// Large copies that bypass the cache. A store to the host tier (or a load into a device page) is
// not read again soon, so non-temporal stores write each destination line once, without first
// reading it into the cache (the read-for-ownership a plain store pays): one read and one write per
// byte, as glibc's memcpy does for copies larger than the cache, but at any size and in pieces
// small enough to hash each one while it is still in L1.
//
//   kvplan::copy_nontemporal(dst, src, n);   // any alignment, any n
//   kvplan::fence_nontemporal_stores();      // before another thread may read dst
#pragma once

#include <cstddef>

namespace kvplan {

// Copies n bytes. The bulk is written with non-temporal stores, which are weakly ordered: call
// fence_nontemporal_stores() before publishing dst (unlocking a mutex does not order them).
void copy_nontemporal(std::byte* dst, const std::byte* src, size_t n);

// Orders every earlier non-temporal store before later stores (sfence on x86; a no-op elsewhere,
// where copy_nontemporal uses plain stores).
void fence_nontemporal_stores();

}  // namespace kvplan
