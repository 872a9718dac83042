// Fuzzes the job-spec parser (chief/job/job_spec.h): the input is a job file
// (YAML, or JSON, which is YAML's flow style), parsed with JobSpec::FromYaml
// the way `brook submit` and the chief read it, including the embedded
// feature and model specs. Relative paths resolve against a scratch
// directory that holds feature_spec.yaml and deepfm.yaml, so specs that refer
// to files (features: FILE, model_file: FILE) parse in full too. A spec that
// parses must also print (CanonicalJson, SpecHash) and convert to trainer
// options. Errors must be statuses: yaml-cpp's exceptions may not escape.
// Seeds: corpus/job_spec/ (the examples' jobs and the unit test's spec).
// BROOK_FUZZ_VERBOSE=1 prints each input's outcome (to check that seeds parse:
// ./job_spec_fuzzer -runs=0 tests/fuzz/corpus/job_spec).
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "chief/job/job_spec.h"

namespace {

constexpr char kFeatureSpec[] =
    "label: {name: label, type: float}\n"
    "features:\n"
    "  - {name: I1, type: float, length: 1, default: 0.0}\n"
    "  - {name: I2, type: float}\n"
    "  - {name: C1, type: int64, kind: varlen}\n"
    "  - {name: C2, type: int64, kind: varlen}\n"
    "  - {name: C3, type: bytes, kind: varlen, max_length: 4}\n";

constexpr char kModelSpec[] =
    "model:\n"
    "  type: deepfm\n"
    "  embedding_dim: 8\n"
    "  hidden: [16, 8]\n"
    "  activation: relu\n"
    "  loss: logloss\n"
    "sparse:\n"
    "  - {feature: C1}\n"
    "  - {feature: C2}\n"
    "  - {feature: C3, table: shared}\n"
    "dense:\n"
    "  - {feature: I1, transform: log1p}\n"
    "  - {feature: I2, transform: bucketize, boundaries: [0, 1, 10], dim: 8}\n";

void WriteFile(const std::string& path, const char* text) {
  FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) __builtin_trap();
  std::fputs(text, f);
  std::fclose(f);
}

std::string* base_dir = nullptr;
bool verbose = false;

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* /*argc*/, char*** /*argv*/) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/brook-job-spec-fuzz-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) __builtin_trap();
  base_dir = new std::string(templ);
  verbose = std::getenv("BROOK_FUZZ_VERBOSE") != nullptr;
  WriteFile(*base_dir + "/feature_spec.yaml", kFeatureSpec);
  WriteFile(*base_dir + "/deepfm.yaml", kModelSpec);
  std::atexit([] {
    std::error_code ec;
    std::filesystem::remove_all(*base_dir, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string yaml(reinterpret_cast<const char*>(data), size);
  absl::StatusOr<brook::chief::JobSpec> spec = brook::chief::JobSpec::FromYaml(yaml, *base_dir);
  if (verbose) std::fprintf(stderr, "job spec: %s\n", spec.status().ToString().c_str());
  if (!spec.ok()) {
    if (spec.status().message().empty()) __builtin_trap();  // errors say what is wrong
    return 0;
  }
  const std::string json = spec->CanonicalJson();
  if (json.empty() || spec->SpecHash().size() != 16) __builtin_trap();
  const brook::trainer::TrainerOptions options = spec->ToTrainerOptions();
  (void)options;
  for (const auto& [table, optimizer] : spec->table_optimizers) {
    if (&spec->OptimizerForTable(table) != &optimizer) __builtin_trap();
  }
  return 0;
}
