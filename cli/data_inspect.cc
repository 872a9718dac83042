// `brook data inspect FILE...`: reads every record (verifying both CRCs of
// every frame), decodes each as a tf.train.Example and summarises the
// features: which kinds they carry, in how many records, how many values,
// listed in natural order of their names.
#include <algorithm>
#include <cstdint>
#include <iomanip>
#include <iostream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "datatools/natural_order.h"
#include "storage/tfrecord.h"
#include "tensorflow/example.pb.h"

namespace brook::cli {
namespace {

struct FeatureSummary {
  uint64_t records_with = 0;
  uint64_t values = 0;
  uint64_t min_values = UINT64_MAX;
  uint64_t max_values = 0;
  std::map<std::string, uint64_t> kinds;  // "int64" / "float" / "bytes" / "empty"
};

struct InspectOptions {
  std::vector<std::string> files;
  std::string compression = "auto";
  bool skip_corrupt = false;
  bool json = false;
};

int RunInspect(const InspectOptions& opts) {
  // Natural order: C1, C2, ..., C10, not C1, C10, C11.
  std::map<std::string, FeatureSummary, datatools::NaturalLessFn> features;
  uint64_t total_records = 0, total_bytes = 0, not_examples = 0, skipped_regions = 0;
  nlohmann::json files_json = nlohmann::json::array();
  bool failed = false;
  brook::tf::Example example;
  for (const auto& path : opts.files) {
    storage::TFRecordReaderOptions ro;
    ro.skip_corrupt = opts.skip_corrupt;
    if (opts.compression == "auto") {
      ro.compression = storage::CompressionFromPath(path);
    } else {
      auto c = storage::ParseCompression(opts.compression);
      if (!c.ok()) {
        std::cerr << "brook data inspect: --compression: " << c.status().message() << "\n";
        return kExitUsage;
      }
      ro.compression = *c;
    }
    auto reader = storage::TFRecordReader::Open(path, ro);
    if (!reader.ok()) {
      std::cerr << "brook data inspect: " << reader.status().message() << "\n";
      return kExitUsage;
    }
    uint64_t records = 0;
    std::string_view record;
    absl::Status error;
    while (true) {
      auto more = (*reader)->Next(&record);
      if (!more.ok()) {
        error = more.status();
        break;
      }
      if (!*more) break;
      ++records;
      if (!example.ParseFromArray(record.data(), static_cast<int>(record.size()))) {
        ++not_examples;
        continue;
      }
      for (const auto& [name, feature] : example.features().feature()) {
        FeatureSummary& s = features[name];
        uint64_t n = 0;
        std::string kind;
        switch (feature.kind_case()) {
          case brook::tf::Feature::kInt64List:
            kind = "int64";
            n = feature.int64_list().value_size();
            break;
          case brook::tf::Feature::kFloatList:
            kind = "float";
            n = feature.float_list().value_size();
            break;
          case brook::tf::Feature::kBytesList:
            kind = "bytes";
            n = feature.bytes_list().value_size();
            break;
          default:
            kind = "empty";
            break;
        }
        ++s.records_with;
        s.values += n;
        s.min_values = std::min(s.min_values, n);
        s.max_values = std::max(s.max_values, n);
        ++s.kinds[kind];
      }
    }
    const auto& st = (*reader)->stats();
    total_records += records;
    total_bytes += st.bytes;
    skipped_regions += st.skipped_regions;
    files_json.push_back({{"file", path},
                          {"records", records},
                          {"bytes", st.bytes},
                          {"skipped_regions", st.skipped_regions},
                          {"skipped_bytes", st.skipped_bytes},
                          {"error", error.ok() ? "" : std::string(error.message())}});
    if (!opts.json) {
      std::cout << path << ": " << records << " records, " << st.bytes << " bytes"
                << (error.ok() ? ", CRCs ok" : "");
      if (st.skipped_regions)
        std::cout << ", SKIPPED " << st.skipped_regions << " corrupt regions (" << st.skipped_bytes
                  << " bytes)";
      std::cout << "\n";
    }
    if (!error.ok()) {
      std::cerr << "brook data inspect: " << error.message() << "\n";
      failed = true;
    }
  }

  if (opts.json) {
    nlohmann::json out;
    out["files"] = files_json;
    out["records"] = total_records;
    out["not_examples"] = not_examples;
    for (const auto& [name, s] : features) {
      out["features"][name] = {{"records_with", s.records_with},
                               {"values", s.values},
                               {"min_values", s.min_values},
                               {"max_values", s.max_values},
                               {"kinds", s.kinds}};
    }
    std::cout << out.dump(2) << "\n";
  } else {
    std::cout << "total: " << total_records << " records in " << opts.files.size() << " file(s), "
              << total_bytes << " bytes";
    if (not_examples) std::cout << ", " << not_examples << " records are not tf.train.Example";
    if (skipped_regions) std::cout << ", " << skipped_regions << " corrupt regions skipped";
    std::cout << "\n\n"
              << std::left << std::setw(24) << "feature" << std::setw(14) << "kind" << std::right
              << std::setw(10) << "records" << std::setw(12) << "values" << std::setw(8) << "min"
              << std::setw(8) << "max"
              << "\n";
    for (const auto& [name, s] : features) {
      std::string kinds;
      for (const auto& [k, n] : s.kinds) kinds += (kinds.empty() ? "" : "+") + k;
      std::cout << std::left << std::setw(24) << name << std::setw(14) << kinds << std::right
                << std::setw(10) << s.records_with << std::setw(12) << s.values << std::setw(8)
                << s.min_values << std::setw(8) << s.max_values << "\n";
    }
  }
  return failed ? kExitFailed : kExitOk;
}

}  // namespace

void RegisterDataInspect(CLI::App& data, int* exit_code) {
  auto opts = std::make_shared<InspectOptions>();
  CLI::App* cmd = data.add_subcommand(
      "inspect", "Count records, verify CRCs, and list the features of TFRecord files");
  cmd->add_option("files", opts->files, "TFRecord files")->required();
  cmd->add_option("--compression", opts->compression,
                  "auto (from the file suffix), NONE, GZIP or ZLIB")
      ->envname("BROOK_DATA_COMPRESSION");
  cmd->add_flag("--skip-corrupt", opts->skip_corrupt,
                "Skip corrupt regions (counted and reported) instead of stopping");
  cmd->add_flag("--json", opts->json, "Print JSON instead of a table");
  cmd->callback([opts, exit_code] { *exit_code = RunInspect(*opts); });
}

}  // namespace brook::cli
