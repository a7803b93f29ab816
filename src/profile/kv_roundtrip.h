// The K or V rows a quantized KV cache gives back for exact rows: the captured [T, n_kv * head_dim]
// matrix pushed through a real model/kv_cache.h layer (its pages of packed bytes, the mode's
// grouping, kivi's full-precision residual window) in one prefill chunk, as the harness would.
//
//   RowMatrix k_hat = kvplan::kv_roundtrip(k, KvSide::kKey, Format::parse("int4"), settings,
//                                          layer, n_kv_heads, head_dim);
#pragma once

#include <vector>

#include "formats/format.h"
#include "formats/kv_page_layout.h"
#include "formats/quant_settings.h"
#include "model/model_weights.h"

namespace kvplan {

// `fp8_head_scales` ([n_kv_heads], FP8 formats only; empty = 1) are the side's per-head scales.
// Throws Error(kInvalidArgument) naming the layer and format when it cannot pack these rows.
RowMatrix kv_roundtrip(const RowMatrix& rows, KvSide side, Format format,
                       const QuantSettings& settings, int layer, int n_kv_heads, int head_dim,
                       const std::vector<float>& fp8_head_scales = {});

}  // namespace kvplan
