// What a binary was built with, as far as it decides the bits of a result. The same inputs give
// the same bits under the same record on any CPU that runs the binary (docs/determinism.md says
// why and what is fixed for it); two records that differ may give different bits. plan.json
// (provenance.build) and profile.json (timings.build) keep the record of the binary that wrote
// them, so a reference check that drifts can say whether the builds differed.
//
//   const kvplan::BuildRecord b = kvplan::this_build();
//   b.isa;                // "x86-64-v3": the -march of the build ("native": the build machine's)
//   b.vector_extensions;  // "AVX2 FMA": what the compiler could use
#pragma once

#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "core/json_fields.h"

namespace kvplan {

struct BuildRecord {
  std::string isa;
  std::string vector_extensions;
  std::string compiler;  // "GCC 12.2.0"
  std::string eigen;     // "3.4.0"

  bool operator==(const BuildRecord&) const = default;
};

BuildRecord this_build();

// {"isa": ..., "vector_extensions": ..., "compiler": ..., "eigen": ...}
nlohmann::ordered_json build_record_to_json(const BuildRecord& b);
// Throws Error(kInvalidArgument) naming the field for a value that is not a string.
BuildRecord build_record_from_json(const JsonFields& f);

}  // namespace kvplan
