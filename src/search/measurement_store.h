// Measured cells of held-out KL kept in a file (`kvplan search|tune --measurements FILE`), so that
// a search that was stopped and is run again, or one at another budget of the same model, texts and
// rules, measures nothing twice. A cell is one configuration on one prompt: its KL sum, NLL sum and
// argmax agreements, exactly as HeldOutKl::measure_all would compute them (doubles are written in
// their shortest round-trip form, so a cell read back has the bits it was written with).
//
// The key of a cell is a 64-bit XXH3 of everything its bits depend on: the store's context (the
// kvplan version and build record the caller names), the cache rules, the prompt's tokens, the
// exact model's reference on it (each position's log-sum-exp and argmax: another model, weights or
// numerics give other keys) and the configuration. A key that is not in the file is measured.
//
// The file is JSON lines, appended as cells are measured and flushed one by one:
//   {"kvplan_measurements": 1}
//   {"key": "9f0c...", "kl": 0.0123, "nll": 812.5, "agree": 1011}
// A last line cut short (a run killed mid-write) is dropped with a warning and the file truncated
// to its last whole line; any other malformed line is refused.
//
//   MeasurementStore store("runs/gemma.measurements.jsonl", "kvplan 0.9.0 x86-64-v3 ...");
//   HeldOutKl kl(model, prompts, rules, std::nullopt, &store);
#pragma once

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>

namespace kvplan::search {

class MeasurementStore {
 public:
  struct Cell {
    double kl = 0;      // sum of KL(exact || quantized) over the prompt's scored positions, nats
    double nll = 0;     // sum of the quantized model's NLL of the prompt's next tokens
    int64_t agree = 0;  // positions whose argmax matches the exact model's
    bool operator==(const Cell&) const = default;
  };

  // Opens `path`, or creates it (with its directory missing: Error(kNotFound)). `context` names
  // what the cells' bits depend on besides their inputs (tool version, build); it enters every key.
  // Throws Error(kInvalidArgument) "<path>:<line>: ..." for a malformed line or another format
  // version, Error(kIo) when the file cannot be read or written.
  MeasurementStore(std::filesystem::path path, std::string context);
  ~MeasurementStore();
  MeasurementStore(const MeasurementStore&) = delete;
  MeasurementStore& operator=(const MeasurementStore&) = delete;

  [[nodiscard]] const std::string& context() const { return context_; }
  [[nodiscard]] const std::filesystem::path& path() const { return path_; }
  [[nodiscard]] size_t size() const;

  // Thread-safe. A cell with a non-finite sum is not kept (find never returns it).
  [[nodiscard]] std::optional<Cell> find(uint64_t key) const;
  // Appends the cell and flushes it; a key already present keeps its first cell. Thread-safe.
  // Throws Error(kIo) naming the file when the write fails.
  void add(uint64_t key, const Cell& cell);

 private:
  std::filesystem::path path_;
  std::string context_;
  mutable std::mutex mutex_;
  std::unordered_map<uint64_t, Cell> cells_;
  std::FILE* file_ = nullptr;
};

}  // namespace kvplan::search
