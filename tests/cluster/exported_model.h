// A model export read back whole, by the model's names (not the job's PS
// names), so two runs of one spec under different job ids compare row by
// row, bit for bit. Used by the determinism tests and the network-fault
// cluster tests (through brook_export_diff).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace brook::testing {

struct ExportedModel {
  int64_t step = 0;
  // table -> key -> weights then optimizer slots.
  std::map<std::string, std::map<uint64_t, std::vector<float>>> rows;
  std::map<std::string, std::vector<float>> dense;
  size_t row_count() const;
};

// Every embedding row and dense variable of the export at `dir`. An error
// when it does not read, or when it holds a table or dense variable of
// another job (an export holds its own job's only).
absl::StatusOr<ExportedModel> LoadExportedModel(const std::string& dir);

// "" when both hold the same step, tables, keys and dense variables with
// every float's bits equal; else what differs first and how many rows do.
std::string DiffExportedModels(const ExportedModel& want, const ExportedModel& got);

}  // namespace brook::testing
