// How much memory kvplan may use: $KVPLAN_MEMORY_LIMIT (bytes) when set, else the kernel's
// MemAvailable (what can be allocated without swapping). Checked before a large allocation
// (a model's weights) so that an oversized model is refused with what it needs, not killed by the
// kernel half-way through loading.
//
//   if (auto avail = kvplan::available_memory_bytes(); avail && need > *avail) ...
#pragma once

#include <cstdint>
#include <optional>
#include <string>

namespace kvplan {

// nullopt when neither is known (no /proc/meminfo). Throws Error(kInvalidArgument) for a
// KVPLAN_MEMORY_LIMIT that is not a positive whole number of bytes.
std::optional<uint64_t> available_memory_bytes();

// The machine's physical memory (sysconf), for sizing caches that must leave room for the rest;
// nullopt when unknown.
std::optional<uint64_t> physical_memory_bytes();

// This process's resident memory now (/proc/self/statm); nullopt when unknown. Benchmarks measure
// what a structure really holds as the difference of two readings.
std::optional<uint64_t> resident_memory_bytes();

// Where available_memory_bytes() came from, for messages: "MemAvailable" or "KVPLAN_MEMORY_LIMIT".
std::string available_memory_source();

}  // namespace kvplan
