#include "core/build_record.h"

#include <fmt/format.h>
#include <Eigen/Core>

#ifndef KVPLAN_ISA
#error "the build passes KVPLAN_ISA (cmake/KvplanOptions.cmake)"
#endif

namespace kvplan {
namespace {

std::string vector_extensions() {
  std::string s;
  const auto add = [&s](const char* name) { s += s.empty() ? name : fmt::format(" {}", name); };
#ifdef __AVX512F__
  add("AVX-512F");
#endif
#ifdef __AVX512BW__
  add("AVX-512BW");
#endif
#ifdef __AVX512VL__
  add("AVX-512VL");
#endif
#ifdef __AVX2__
  add("AVX2");
#endif
#ifdef __FMA__
  add("FMA");
#endif
#ifdef __F16C__
  add("F16C");
#endif
#if defined(__SSE4_2__) && !defined(__AVX2__)
  add("SSE4.2");
#endif
#if defined(__ARM_NEON) || defined(__ARM_NEON__)
  add("NEON");
#endif
  return s.empty() ? "none beyond the architecture's baseline" : s;
}

std::string compiler() {
#if defined(__clang__)
  return fmt::format("Clang {}.{}.{}", __clang_major__, __clang_minor__, __clang_patchlevel__);
#elif defined(__GNUC__)
  return fmt::format("GCC {}.{}.{}", __GNUC__, __GNUC_MINOR__, __GNUC_PATCHLEVEL__);
#else
  return "unknown";
#endif
}

}  // namespace

BuildRecord this_build() {
  return {KVPLAN_ISA[0] != '\0' ? KVPLAN_ISA : "compiler default", vector_extensions(), compiler(),
          fmt::format("{}.{}.{}", EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION, EIGEN_MINOR_VERSION)};
}

nlohmann::ordered_json build_record_to_json(const BuildRecord& b) {
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  j["isa"] = b.isa;
  j["vector_extensions"] = b.vector_extensions;
  j["compiler"] = b.compiler;
  j["eigen"] = b.eigen;
  return j;
}

BuildRecord build_record_from_json(const JsonFields& f) {
  if (!f.value().is_object()) f.expected("a JSON object");
  return {f.optional_string("isa").value_or(""),
          f.optional_string("vector_extensions").value_or(""),
          f.optional_string("compiler").value_or(""), f.optional_string("eigen").value_or("")};
}

}  // namespace kvplan
