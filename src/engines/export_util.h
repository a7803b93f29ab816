// What several exporters share: the engine format nearest a plan's, a layer's one dtype on an
// engine that stores one for K and V, the losses a changed side adds, and an engine's name of a
// dtype. Internal to src/engines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "engines/exporters.h"

namespace kvplan {

// Adds a loss when `exported` differs from `planned`: `why_same` when the engine stores the
// planned format (the layer structure forced the change), else that it does not store it.
void note_side_loss(PlanExport& e, const EngineSpec& engine, int layer, const char* side,
                    const Format& planned, const Format& exported, const char* why_same);

// Each layer's one dtype for an engine that stores one per layer (the wider side's, mapped to
// the engine's formats), with the pairs it runs and every side that changes.
std::vector<Format> one_dtype_per_layer(PlanExport& e, const EngineSpec& engine, const Plan& plan,
                                        const char* why_same);

// An engine's name of a dtype it stores (formats/kv_format_table.h, KVPLAN_ENGINE_SPELLINGS).
std::string spelled(uint32_t engine, const Format& f);

}  // namespace kvplan
