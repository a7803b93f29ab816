// A layer's (key format, value format) pair and its names.
//
// Pair names follow KVTuner: "KV8" = int8 keys and values, "K8V4" = int8 keys, int4 values,
// "K4V2", "KV2", ...; 16 means bf16 (unquantized). Explicit pairs are "KEY/VALUE" with any format
// names ("q8_0/q4_0", "fp8_e4m3/int4"). A slot ("slot:134") covers K and V together, so its pair
// is written "slot:134" and both members are that slot.
//
//   kvplan::KvPair p = kvplan::KvPair::parse("K8V4");
//   p.key.name();  // "int8"
//   p.name();      // "K8V4"
#pragma once

#include <string>
#include <string_view>

#include "formats/format.h"

namespace kvplan {

struct KvPair {
  Format key;
  Format value;

  // Throws Error(kInvalidArgument) naming the text and the accepted forms.
  static KvPair parse(std::string_view text);
  static KvPair uniform(Format f) { return {f, f}; }

  // "K8V4"-style for int/bf16 pairs, "slot:N" for slots, "KEY/VALUE" otherwise.
  [[nodiscard]] std::string name() const;
  [[nodiscard]] bool is_slot() const { return key.is_slot(); }
  // KVTuner's equivalent bits of the layer: (k_bits + v_bits) / 2 (a slot: its bits per value).
  [[nodiscard]] double nominal_bits(int head_dim) const;

  bool operator==(const KvPair&) const = default;
  auto operator<=>(const KvPair&) const = default;  // an order for maps keyed by pairs
};

}  // namespace kvplan
