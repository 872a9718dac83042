// brook_export_diff WANT GOT: exit 0 when the two exports hold the same model
// bit for bit (every row, optimizer slot and dense variable, by the model's
// names, whatever the job ids), 1 when they differ (saying where), 2 when one
// does not read. The network-fault cluster tests call it on the exports of a
// disturbed job and its undisturbed reference.
#include <iostream>

#include "tests/cluster/exported_model.h"

int main(int argc, char** argv) {
  if (argc != 3) {
    std::cerr << "usage: brook_export_diff WANT_EXPORT_DIR GOT_EXPORT_DIR\n";
    return 2;
  }
  absl::StatusOr<brook::testing::ExportedModel> want = brook::testing::LoadExportedModel(argv[1]);
  absl::StatusOr<brook::testing::ExportedModel> got = brook::testing::LoadExportedModel(argv[2]);
  for (const auto* m : {&want, &got}) {
    if (!m->ok()) {
      std::cerr << "brook_export_diff: " << m->status().message() << "\n";
      return 2;
    }
  }
  const std::string diff = brook::testing::DiffExportedModels(*want, *got);
  if (!diff.empty()) {
    std::cout << "differ: " << diff << "\n";
    return 1;
  }
  std::cout << "identical: step " << want->step << ", " << want->row_count() << " rows in "
            << want->rows.size() << " tables, " << want->dense.size() << " dense variables\n";
  return 0;
}
