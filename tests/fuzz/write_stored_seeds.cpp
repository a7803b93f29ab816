// Writes seed chunks for fuzz_stored_object into a directory: a valid chunk as the runtime stores
// it, prefixed by the variant byte (0: as read; 1: headers resealed).
//
//   kvplan_fuzz_write_stored_seeds tests/fuzz/corpus/stored_object
#include <cstdio>
#include <filesystem>
#include <fstream>

#include "fuzz/stored_chunk_fixture.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
    return 2;
  }
  const kvplan::fuzz::StoredChunkFixture fixture;
  std::filesystem::create_directories(argv[1]);
  for (const uint8_t variant : {0, 1}) {
    const std::vector<std::byte> chunk = fixture.write(static_cast<uint8_t>(0x5a + variant));
    std::ofstream out(std::filesystem::path(argv[1]) / ("chunk-variant" + std::to_string(variant)),
                      std::ios::binary);
    out.put(static_cast<char>(variant));
    out.write(reinterpret_cast<const char*>(chunk.data()),
              static_cast<std::streamsize>(chunk.size()));
  }
  return 0;
}
