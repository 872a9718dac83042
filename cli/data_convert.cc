// `brook data convert FILE... --schema S --out DIR`: CSV/TSV text (plain or
// gzipped) to sharded TFRecord of tf.train.Example plus feature_spec.yaml.
// Presets spare a schema file for the two reference formats:
//   brook data convert adult.train.csv --schema adult --out data/adult --shards 4
//   brook data convert day_0.gz --format criteo --out data/criteo --shards 64
// `--print-schema adult` prints a preset to start a schema of one's own from.
// The schema format is in README.md ("Converting CSV") and convert_schema.h.
#include <filesystem>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/ascii.h"
#include "cli/commands.h"
#include "cli/progress.h"
#include "datatools/convert_schema.h"
#include "datatools/csv_convert.h"

namespace brook::cli {
namespace {

struct ConvertFlags {
  std::vector<std::string> inputs;
  std::string schema;
  std::string format;
  std::string out;
  std::string prefix = "train";
  int shards = 1;
  std::string compression = "NONE";
  bool skip_bad_rows = false;
  std::string print_schema;
  std::optional<bool> header;
  double test_fraction = 0;
  int test_shards = 0;
};

int Fail(int code, const std::string& message) {
  std::cerr << "brook data convert: " << message << "\n";
  return code;
}

absl::StatusOr<datatools::ConvertSchema> LoadSchema(const ConvertFlags& f) {
  if (f.schema.empty()) {
    if (absl::AsciiStrToLower(f.format) == "criteo")
      return datatools::ConvertSchema::Preset("criteo");
    return absl::InvalidArgumentError(
        "--schema is required (a YAML file or a preset: adult, criteo), unless --format criteo");
  }
  auto schema = datatools::ConvertSchema::Load(f.schema);
  if (!schema.ok() || f.format.empty()) return schema;
  // --format overrides how the schema's file is tokenized.
  auto format = datatools::ParseTextFormat(f.format);
  if (!format.ok()) return format.status();
  schema->format = *format;
  return schema;
}

int RunConvert(const ConvertFlags& f) {
  if (!f.print_schema.empty()) {
    const std::string_view yaml = datatools::PresetYaml(f.print_schema);
    if (yaml.empty())
      return Fail(kExitUsage, "--print-schema: unknown preset (have adult, criteo)");
    std::cout << yaml;
    return kExitOk;
  }
  if (f.inputs.empty()) return Fail(kExitUsage, "no input files");
  auto schema = LoadSchema(f);
  if (!schema.ok()) return Fail(kExitUsage, std::string(schema.status().message()));
  auto compression = storage::ParseCompression(f.compression);
  if (!compression.ok()) return Fail(kExitUsage, std::string(compression.status().message()));

  datatools::ConvertOptions options;
  options.out_dir = f.out;
  options.prefix = f.prefix;
  options.shards = f.shards;
  options.compression = *compression;
  options.skip_bad_rows = f.skip_bad_rows;
  options.header = f.header;
  options.detect_delimiter = f.format.empty();
  options.test_fraction = f.test_fraction;
  options.test_shards = f.test_shards;
  ProgressOptions po;
  po.label = "brook data convert";
  po.unit = "rows";
  for (const std::string& in : f.inputs) {
    std::error_code ec;
    const auto size = std::filesystem::file_size(in, ec);
    po.bytes_total += ec ? 0 : static_cast<int64_t>(size);
  }
  ProgressPrinter progress(po);
  options.progress_rows = progress.items();
  options.progress_bytes = progress.bytes();
  auto converter = datatools::CsvConverter::Open(*std::move(schema), f.inputs, options);
  if (!converter.ok()) return Fail(kExitUsage, std::string(converter.status().message()));
  progress.Start();
  auto result = (*converter)->Run();
  progress.Finish();
  if (!result.ok()) return Fail(kExitFailed, std::string(result.status().message()));

  const datatools::ConvertResult& r = *result;
  std::cout << "converted " << r.examples_written << " of " << r.rows_read << " rows from "
            << f.inputs.size() << " file(s) into " << f.shards << " shard(s), dealt round-robin:\n";
  for (size_t i = 0; i < r.shard_paths.size(); ++i) {
    std::cout << "  " << r.shard_paths[i] << "  " << r.shard_records[i] << " examples\n";
  }
  if (!r.test_shard_paths.empty()) {
    std::cout << "test split (--test-fraction " << f.test_fraction
              << ", by a hash of each row): " << r.test_examples << " examples\n";
    for (size_t i = 0; i < r.test_shard_paths.size(); ++i) {
      std::cout << "  " << r.test_shard_paths[i] << "  " << r.test_shard_records[i]
                << " examples\n";
    }
  }
  std::string missing;
  for (const datatools::ColumnCounts& c : r.columns) {
    if (c.missing > 0) missing += " " + c.name + "=" + std::to_string(c.missing);
  }
  if (!missing.empty()) std::cout << "missing values (features omitted):" << missing << "\n";
  if (!r.feature_spec_path.empty()) std::cout << "feature spec: " << r.feature_spec_path << "\n";
  if (r.bad_rows > 0) {
    std::cerr << "skipped " << r.bad_rows << " bad row(s); the first:\n";
    for (const std::string& s : r.bad_row_samples) std::cerr << "  " << s << "\n";
  }
  return kExitOk;
}

}  // namespace

void RegisterDataConvert(CLI::App& data, int* exit_code) {
  auto f = std::make_shared<ConvertFlags>();
  CLI::App* cmd = data.add_subcommand(
      "convert", "Convert CSV/TSV (or Criteo TSV) to sharded TFRecord plus a feature spec");
  cmd->add_option("inputs", f->inputs, "CSV/TSV files, plain or .gz");
  cmd->add_option("--schema", f->schema, "Convert schema: a YAML file or a preset (adult, criteo)")
      ->envname("BROOK_CONVERT_SCHEMA");
  cmd->add_option("--format", f->format,
                  "csv, tsv or criteo; overrides the schema's, and --format criteo alone needs "
                  "no schema")
      ->envname("BROOK_CONVERT_FORMAT");
  cmd->add_option("--out", f->out, "Output directory (created if absent)")
      ->envname("BROOK_CONVERT_OUT");
  cmd->add_option("--prefix", f->prefix, "Shard file name prefix")->envname("BROOK_CONVERT_PREFIX");
  cmd->add_option("--shards", f->shards, "Number of output shards (rows dealt round-robin)")
      ->envname("BROOK_CONVERT_SHARDS");
  cmd->add_option("--compression", f->compression, "NONE, GZIP or ZLIB")
      ->envname("BROOK_CONVERT_COMPRESSION");
  cmd->add_flag("--skip-bad-rows", f->skip_bad_rows,
                "Skip and count rows that do not parse, instead of stopping at the first")
      ->envname("BROOK_CONVERT_SKIP_BAD_ROWS");
  cmd->add_option("--print-schema", f->print_schema,
                  "Print a preset schema (adult, criteo) and exit");
  cmd->add_flag_function(
         "--header,!--no-header", [f](int64_t n) { f->header = n > 0; },
         "The first line of every input is (--header) or is not (--no-header) a header naming "
         "the columns. Default: the schema's `header:`; a schema without a header (the criteo "
         "preset) still detects one: a first line made of exactly its column names")
      ->envname("BROOK_CONVERT_HEADER");
  cmd->add_option("--test-fraction", f->test_fraction,
                  "Write this fraction of rows, chosen by a hash of the row (deterministic), to "
                  "test-*.tfrecord shards beside the train ones")
      ->envname("BROOK_CONVERT_TEST_FRACTION");
  cmd->add_option("--test-shards", f->test_shards, "Test shards (0: as many as --shards)")
      ->envname("BROOK_CONVERT_TEST_SHARDS");
  cmd->footer(
      "A schema (YAML; see README.md, \"Converting CSV\") names the format (csv, tsv, criteo), "
      "whether there is a header, the missing-value tokens, the label column and each column's "
      "type (numeric, categorical, ignore; a categorical column with `separator: \"|\"` becomes "
      "a list). Without --format, a file whose first line has no tab but splits on commas into "
      "the schema's columns is read as CSV (and the other way round), so --schema criteo reads "
      "a Criteo CSV. Progress goes to stderr: a live line on a terminal, a log line every 5 s "
      "otherwise.");
  cmd->callback([f, exit_code] { *exit_code = RunConvert(*f); });
}

}  // namespace brook::cli
