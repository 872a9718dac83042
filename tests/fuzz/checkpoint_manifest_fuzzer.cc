// Fuzzes the PS checkpoint manifest (ps/internal/checkpoint_files.h): the
// input becomes the MANIFEST of a checkpoint part on disk, which is read back
// (ReadManifest, ReadCheckpoint, ReadChain) and restored into a fresh
// in-process ParameterServer (ParameterServer::Restore, the path the Restore
// RPC and a restarting PS take), so the manifest's tables, dense variables,
// shard layout and base chain all drive real restore code. Only statuses may
// come back: no crash, no hang, no unbounded allocation.
//
// At start-up the fuzzer writes, with the real checkpoint code, into a
// scratch directory (its working directory from then on):
//   base/shard-00000-of-00001/   a full checkpoint (two tables, a dense variable)
//   ckpt/shard-00000-of-00001/   an incremental one on top (rows, deletes)
// and each input replaces ckpt/shard-00000-of-00001/MANIFEST. (Paths given
// on the command line are made absolute first; see AbsolutizeArgs.)
// Input: byte 0, then the manifest.
//   bit 0     1: the rest is the manifest body (brook.v1.CheckpointManifest);
//             magic and CRC are added, so mutations reach the parser and
//             restore. 0: the rest is the MANIFEST file as is.
//   bits 1-2  shard count of the restoring PS - 1 (0..3 -> 1..4 shards)
//   bits 3-4  its shard index (mod the count): resharding paths
// Seeds (corpus/checkpoint_manifest/) are the two real manifests in both
// forms; BROOK_FUZZ_WRITE_SEEDS=DIR makes the fuzzer write them to DIR again
// (e.g. after a manifest format change): ./checkpoint_manifest_fuzzer -runs=0
// BROOK_FUZZ_VERBOSE=1 prints each input's read and restore outcome.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <string_view>
#include <vector>

#include <google/protobuf/stubs/logging.h>

#include "brook/v1/storage.pb.h"
#include "ps/internal/checkpoint_files.h"
#include "ps/parameter_server.h"
#include "storage/crc32c.h"

namespace {

namespace fs = std::filesystem;
namespace v1 = brook::v1;
namespace ps = brook::ps;

// A manifest may legitimately declare a dense variable of up to
// ps::kMaxDenseFloats (1 GiB plus optimizer slots), which a restore
// allocates: a real allocation a fuzzer must not make. Such inputs only go
// through the read checks here; the PS itself would accept them.
constexpr uint64_t kMaxFuzzDenseFloats = 1u << 22;

const char kPart[] = "ckpt/shard-00000-of-00001";
std::string* scratch = nullptr;
bool verbose = false;

void Check(const absl::Status& st) {
  if (!st.ok()) {
    std::fprintf(stderr, "checkpoint_manifest_fuzzer setup: %s\n", st.ToString().c_str());
    std::abort();
  }
}

std::string ReadAll(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  if (f == nullptr) std::abort();
  std::string out;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof(buf), f)) > 0;) out.append(buf, n);
  std::fclose(f);
  return out;
}

void WriteAll(const std::string& path, const char* data, size_t size) {
  FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (size > 0 && std::fwrite(data, 1, size, f) != size) __builtin_trap();
  std::fclose(f);
}

// The real checkpoint code writes base/ (full) and ckpt/ (incremental).
void WriteCheckpoints() {
  ps::ParameterServer server(ps::ParameterServerOptions{});
  ps::TableOptions emb;
  emb.name = "emb";
  emb.dim = 4;
  emb.seed = 1;
  emb.optimizer.kind = ps::OptimizerKind::kAdagrad;
  emb.ttl_steps = 5;
  Check(server.CreateTable(emb));
  ps::TableOptions wide;
  wide.name = "emb_wide";
  wide.dim = 1;
  wide.optimizer.kind = ps::OptimizerKind::kFtrl;
  wide.admission_min_count = 2;
  Check(server.CreateTable(wide));
  ps::DenseOptions dense;
  dense.name = "mlp/w0";
  dense.shape = {3, 2};
  dense.optimizer.kind = ps::OptimizerKind::kAdam;
  Check(server.CreateDense(dense));

  auto push = [&](const char* table, std::vector<uint64_t> keys, int dim, int64_t step) {
    std::vector<float> grads(keys.size() * dim, 0.25f);
    ps::PushContext ctx;
    ctx.step = step;
    Check(server.Push(table, keys, grads, ctx).status());
  };
  push("emb", {1, 2, 3, 1ull << 40}, 4, 1);
  push("emb_wide", {1, 2}, 1, 1);
  push("emb_wide", {1, 2}, 1, 1);
  Check(server.PushDense("mlp/w0", std::vector<float>(6, 0.5f), ps::PushContext{}).status());
  ps::CheckpointOptions full;
  full.dir = "base";
  full.step = 1;
  full.shard_addresses = {"127.0.0.1:7000"};
  Check(server.Checkpoint(full).status());

  push("emb", {7, 8}, 4, 10);
  (void)server.Evict(10);  // rows last pushed at step 1 go: the increment records deletes
  push("emb_wide", {3}, 1, 10);
  ps::CheckpointOptions inc = full;
  inc.dir = "ckpt";
  inc.incremental = true;
  inc.step = 10;
  Check(server.Checkpoint(inc).status());
}

void WriteSeeds(const std::string& dir) {
  fs::create_directories(dir);
  int n = 0;
  for (const char* part : {"base/shard-00000-of-00001", kPart}) {
    const std::string file = ReadAll(std::string(part) + "/MANIFEST");
    const std::string body = file.substr(8);
    for (uint8_t mode : {0x00, 0x01, 0x03, 0x0D}) {  // raw, body; 2 shards; 3 shards, index 1
      std::string seed(1, static_cast<char>(mode));
      seed += (mode & 1) ? body : file;
      WriteAll(dir + "/seed_" + std::to_string(n++), seed.data(), seed.size());
    }
  }
}

// The fuzzer works inside its scratch directory (the manifests name their
// parts by relative paths), so the paths on libFuzzer's command line (corpus
// directories, -artifact_prefix=, -dict=, ...) are made absolute first;
// libFuzzer reads its flags after LLVMFuzzerInitialize.
void AbsolutizeArgs(int argc, char** argv, const fs::path& cwd) {
  static constexpr std::string_view kPathFlags[] = {
      "-artifact_prefix=",       "-exact_artifact_path=",  "-dict=",
      "-merge_control_file=",    "-features_dir=",         "-data_flow_trace=",
      "-load_coverage_summary=", "-save_coverage_summary="};
  for (int i = 1; i < argc; ++i) {
    std::string_view arg(argv[i]);
    std::string_view flag;
    if (!arg.empty() && arg[0] == '-') {
      for (std::string_view f : kPathFlags) {
        if (arg.substr(0, f.size()) == f) flag = f;
      }
      if (flag.empty()) continue;  // not a path
    }
    const std::string_view value = arg.substr(flag.size());
    if (value.empty() || value[0] == '/') continue;
    // cwd / "crash-" keeps -artifact_prefix's file-name prefix a prefix.
    const std::string abs = std::string(flag) + (cwd / std::string(value)).string();
    argv[i] = strdup(abs.c_str());  // lives as long as the process
  }
}

bool TooLarge(const v1::CheckpointManifest& m) {
  for (const v1::DenseConfig& d : m.dense()) {
    uint64_t n = 1;
    for (int64_t x : d.shape()) {
      if (x <= 0) break;
      if (static_cast<uint64_t>(x) > kMaxFuzzDenseFloats) return true;
      n *= static_cast<uint64_t>(x);
      if (n > kMaxFuzzDenseFloats) return true;
    }
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int* argc, char*** argv) {
  const char* tmp = std::getenv("TMPDIR");
  std::string templ = std::string(tmp != nullptr ? tmp : "/tmp") + "/brook-manifest-fuzz-XXXXXX";
  if (::mkdtemp(templ.data()) == nullptr) std::abort();
  scratch = new std::string(templ);
  verbose = std::getenv("BROOK_FUZZ_VERBOSE") != nullptr;
  // protobuf logs every invalid-UTF-8 string it meets: a fuzzer's every input.
  google::protobuf::SetLogHandler(nullptr);
  const fs::path cwd = fs::current_path();
  AbsolutizeArgs(*argc, *argv, cwd);
  fs::current_path(*scratch);
  WriteCheckpoints();
  if (const char* out = std::getenv("BROOK_FUZZ_WRITE_SEEDS"); out != nullptr) {
    WriteSeeds(fs::path(out).is_absolute() ? std::string(out) : (cwd / out).string());
  }
  std::atexit([] {
    std::error_code ec;
    fs::remove_all(*scratch, ec);
  });
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const uint8_t mode = data[0];
  const char* rest = reinterpret_cast<const char*>(data) + 1;
  std::string file;
  if (mode & 1) {
    const std::string_view body(rest, size - 1);
    const uint32_t crc = brook::storage::crc32c::Mask(brook::storage::crc32c::Value(body));
    file = "BRKM";
    file.append(reinterpret_cast<const char*>(&crc), 4);
    file.append(body);
  } else {
    file.assign(rest, size - 1);
  }
  WriteAll(std::string(kPart) + "/MANIFEST", file.data(), file.size());

  absl::StatusOr<v1::CheckpointManifest> m = ps::internal::ReadManifest(kPart);
  if (verbose) std::fprintf(stderr, "read: %s\n", m.status().ToString().c_str());
  if (!m.ok()) return 0;  // the restore would stop at the same check
  absl::StatusOr<std::vector<v1::CheckpointManifest>> parts = ps::internal::ReadCheckpoint("ckpt");
  if (parts.ok()) {
    if (parts->size() != 1) __builtin_trap();  // one part on disk
    (void)ps::internal::ReadChain(parts->front());
  }
  // A manifest naming a RocksDB part would have the restore open (and
  // RocksDB create a LOG under) whatever directory it names: not from a
  // fuzzer. Nor the 1 GiB dense variables above.
  if (m->has_rocksdb() || TooLarge(*m)) return 0;

  ps::ParameterServerOptions options;
  options.num_shards = 1 + ((mode >> 1) & 0x3);
  options.shard_index = ((mode >> 3) & 0x3) % options.num_shards;
  ps::ParameterServer server(options);
  absl::StatusOr<ps::RestoreInfo> restored = server.Restore("ckpt");
  if (verbose) {
    std::fprintf(stderr, "restore on shard %d of %d: %s, %lu rows, %lu dense\n",
                 options.shard_index, options.num_shards, restored.status().ToString().c_str(),
                 restored.ok() ? static_cast<unsigned long>(restored->rows) : 0ul,
                 restored.ok() ? static_cast<unsigned long>(restored->dense) : 0ul);
  }
  return 0;
}
