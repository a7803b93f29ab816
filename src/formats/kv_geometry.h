// The KV-cache shape of a model: per layer, how many KV heads of which size, and the sliding
// window (0 = full attention); and the model identity profiles and plans carry with it. This is all
// the estimator, the plan validator and the runtime need to know about a model, so `runtime/` never
// depends on `model/`.
//
//   kvplan::KvGeometry g = kvplan::KvGeometry::uniform("llama-3.1-8b", 32, 8, 128);
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace kvplan {

struct KvLayerGeometry {
  int n_kv_heads = 0;
  int head_dim = 0;
  int64_t sliding_window = 0;  // tokens kept; 0 = all
};

struct KvGeometry {
  std::string model_name;
  std::vector<KvLayerGeometry> layers;

  static KvGeometry uniform(std::string name, int n_layers, int n_kv_heads, int head_dim) {
    return {std::move(name), std::vector<KvLayerGeometry>(n_layers, {n_kv_heads, head_dim, 0})};
  }
  [[nodiscard]] int n_layers() const { return static_cast<int>(layers.size()); }
  // KV heads over every layer: the entries of a per-KV-head configuration.
  [[nodiscard]] int n_kv_heads_total() const {
    int n = 0;
    for (const KvLayerGeometry& l : layers) n += l.n_kv_heads;
    return n;
  }
};

// The model a profile or a plan is for: its identity, and the KV geometry its bytes are counted
// on (sliding windows included).
struct KvModel {
  std::string name;
  std::string architecture;
  std::string fingerprint;  // hex; the model fingerprint of src/model (tensors, not weights)
  int n_attention_heads = 0;
  KvGeometry geometry;
};

}  // namespace kvplan
