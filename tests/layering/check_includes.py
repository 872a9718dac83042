#!/usr/bin/env python3
"""Fails when an #include crosses Brook's layers (docs/architecture.md, "Layers").

Usage: check_includes.py [--root DIR]
Prints `file:line: <include> crosses <from> -> <to>: <rule>` for every forbidden include,
then a count; exits 1 if there was any. Reads the tracked C++/CUDA sources of DIR (default:
this checkout); needs no build.
"""
import argparse
import fnmatch
import os
import re
import subprocess
import sys

# The layers, as data. A file (or an included path) belongs to the first layer one of whose
# globs matches it (fnmatch: `*` crosses `/` too). A layer may include itself and what
# `may_include` names: layers, or globs of included paths. The first three layers are
# include-only: generated protobuf headers and the third-party libraries a folder must ask for.
LAYERS = [
    # (layer, globs, may_include, why)
    ("proto", ["brook/v1/*.pb.h", "tensorflow/*.pb.h"], [], "generated"),
    ("grpc", ["grpcpp/*", "grpc/*"], [], "third-party"),
    ("prometheus", ["prometheus/*"], [], "third-party"),
    ("tests", ["tests/*"], ["*"], "test code; nothing outside tests/ includes it"),
    ("common/rpc", ["common/rpc/*"], ["common", "security", "proto", "grpc"],
     "what gRPC servers and clients share"),
    ("common", ["common/*"], [], "common/ is abseil only"),
    ("sharding", ["sharding/*"], ["common"], "sharding/ is pure functions over common/"),
    ("storage", ["storage/*"], ["common"], "storage/ is files and RocksDB over common/"),
    ("security", ["security/*"], ["common", "grpc"], "security/ sits beside common/"),
    ("metrics", ["metrics/*"], ["common", "prometheus"], "metrics/ is the Prometheus seam"),
    ("features", ["features/*"], ["common", "storage", "proto"],
     "the feature spec knows no trainer, PS or chief"),
    ("ps/types", ["ps/types.h", "ps/options.*", "ps/config_codec.*"],
     ["common", "proto", "storage/storage_stats.h"],
     "what the PS's users share with the core: plain values and their codec"),
    ("ps/wire", ["ps/wire/*"], ["common", "ps/types", "proto", "grpc"],
     "the wire format both sides speak, over ps/types.h"),
    ("ps/rpc", ["ps/rpc/*"],
     ["common", "common/rpc", "security", "metrics", "ps", "ps/types", "ps/wire", "proto", "grpc",
      "prometheus"], "the PS service is a thin adapter over the core"),
    ("ps/local_client", ["ps/client/local_ps_client.*"],
     ["common", "common/rpc", "security", "sharding", "storage", "ps", "ps/types", "ps/wire",
      "ps/client", "proto", "grpc"], "the in-process client, over the PS core"),
    ("ps/client", ["ps/client/*"],
     ["common", "common/rpc", "security", "sharding", "ps/types", "ps/wire", "proto", "grpc"],
     "the PS client links no PS core (no RocksDB, no WAL)"),
    ("ps", ["ps/*"], ["common", "sharding", "storage", "ps/types", "proto"],
     "the PS core knows no RPC, client, trainer or chief"),
    ("trainer/backend/cuda", ["trainer/backend/cuda/*"], ["trainer/backend", "common/status_macros.h"],
     "the CUDA plugin (dlopen) sees only the backend interface and header-only helpers"),
    ("trainer/backend", ["trainer/backend/*"], ["common"],
     "backends compute; they know no model, input or PS"),
    ("trainer", ["trainer/*"],
     ["common", "storage", "sharding", "features", "ps/types", "ps/client", "proto",
      "trainer/backend"], "a trainer reaches the PS only through ps/client"),
    ("datatools", ["datatools/*"], ["common", "storage", "features", "proto"],
     "brook data knows no trainer"),
    ("chief/job", ["chief/job/*"],
     ["common", "storage", "features", "trainer", "ps/types", "proto"],
     "the job spec is read below the chief: it names the trainer's options, no RPC or PS"),
    ("chief/core", ["chief/core/*"], ["common", "storage", "sharding", "proto"],
     "queue, leases and their store know no RPC, PS or trainer"),
    ("chief/export", ["chief/export/*"],
     ["common", "storage", "features", "chief/job", "trainer", "trainer/backend", "ps/client",
      "ps/types", "ps", "ps/local_client", "proto"],
     "export reads checkpoints (the PS core's format) and scores in process; no RPC"),
    ("chief/client", ["chief/client/*"], ["common", "common/rpc", "security", "proto", "grpc"],
     "the chief's client links no chief"),
    ("chief/service", ["chief/service/*"],
     ["common", "common/rpc", "security", "metrics", "storage", "sharding", "features", "chief/*",
      "ps/client", "ps/types", "trainer", "trainer/backend", "proto", "grpc", "prometheus"],
     "the chief service reaches the PS only through ps/client"),
    ("worker", ["worker/*"],
     ["common", "security", "storage", "sharding", "features", "chief/client", "chief/job",
      "chief/export", "ps/client", "ps/local_client", "ps/types", "trainer", "trainer/backend",
      "proto"], "a worker is a trainer under a chief"),
    ("serving/http", ["serving/http/*"], ["common"],
     "the HTTP server (Boost.Beast) knows no API, model or RPC"),
    ("serving/rpc", ["serving/rpc/*"],
     ["common", "common/rpc", "metrics", "serving", "proto", "grpc"],
     "brook.v1.Predict is a thin adapter over the serving core"),
    ("serving/server", ["serving/server/*"],
     ["common", "common/rpc", "security", "metrics", "serving", "serving/*", "ps/client",
      "ps/types", "storage", "proto", "grpc", "prometheus"],
     "`brook serve` assembled: transports, metrics, the follower's PS client, the data dir's lock"),
    ("serving", ["serving/*"],
     ["common", "storage", "features", "chief/job", "chief/export", "trainer", "trainer/backend",
      "ps", "ps/types", "ps/client", "ps/local_client", "proto"],
     "the served model, versions, batching and the REST API in process; no network inside"),
    ("bench", ["bench/*"], ["*"], "bench may use anything below cli/ and worker/"),
    ("cli", ["cli/*"], ["*"], "the brook binary may use anything"),
]
# Never included from these, whatever `may_include` says ("*" included).
NOT_BELOW = {"bench": ["cli", "worker", "tests", "trainer/backend/cuda"],
             "cli": ["tests", "trainer/backend/cuda"]}
# Includes allowed across the layers above: (including file, included path).
EXCEPTIONS = [("trainer/backend/backend_loader.cc", "trainer/backend/cuda/*"),
              ("trainer/backend/backend_loader.h", "trainer/backend/cuda/cuda_plugin.h")]

# No header in these folders includes a generated .pb.h or prometheus/: headers forward-declare
# the messages they name. Their .cc files include a .pb.h only if PB_ALLOWED lists them.
CORE_FOLDERS = ["ps/*", "chief/core/*", "chief/job/*", "trainer/*", "storage/*", "datatools/*",
                "features/*", "common/*", "serving/*"]
NOT_CORE = ["ps/rpc/*", "ps/client/*", "ps/wire/*", "common/rpc/*", "serving/rpc/*",
            "serving/server/*"]
PB_ALLOWED = [  # state stores, checkpoint files, codecs, what reads or writes tf.Example
    "ps/config_codec.cc", "ps/parameter_server.cc", "ps/parameter_server_durability.cc", "ps/internal/checkpoint_files.cc",
    "chief/core/*_state.cc", "chief/core/chief_state_store.cc", "trainer/input/example_parser*.cc",
    "datatools/csv_convert.cc", "datatools/data_stats.cc", "serving/json_examples.cc",
]

# Quoted includes that are third-party: anyone may use them (but see the grpc/prometheus layers).
THIRD_PARTY = ("absl/", "grpcpp/", "grpc/", "rocksdb/", "yaml-cpp/", "prometheus/", "gtest/",
               "gmock/", "benchmark/", "nlohmann/", "CLI/", "Eigen/", "unsupported/Eigen/",
               "google/protobuf/", "boost/", "openssl/", "cuda", "cublas")
GENERATED = ["common/version_gen.h"]  # written into the build tree by cmake/version.cmake
SOURCE_EXTENSIONS = (".h", ".cc", ".cu", ".cuh")
SKIPPED_DIRS = ("build", "tests/fuzz/corpus/", "proto/", ".")
INCLUDE = re.compile(r'\s*#\s*include\s*([<"])([^>"]+)[>"]')


def matches(path, globs):
    return any(fnmatch.fnmatchcase(path, g) for g in globs)


def layer_of(path):
    for name, globs, _, _ in LAYERS:
        if matches(path, globs):
            return name
    return None


def may_include(src, src_layer, inc, inc_layer):
    if inc_layer is None or inc_layer == src_layer:
        return True
    if any(fnmatch.fnmatchcase(src, f) and fnmatch.fnmatchcase(inc, i) for f, i in EXCEPTIONS):
        return True
    if inc_layer in NOT_BELOW.get(src_layer, []):
        return False
    allowed = next(rule[2] for rule in LAYERS if rule[0] == src_layer)
    return matches(inc_layer, allowed) or matches(inc, allowed)


def exists(root, inc):
    if inc.endswith(".pb.h"):  # generated from proto/<name>.proto
        stem = inc[:-len(".grpc.pb.h")] if inc.endswith(".grpc.pb.h") else inc[:-len(".pb.h")]
        return os.path.isfile(os.path.join(root, "proto", stem + ".proto"))
    return inc in GENERATED or os.path.isfile(os.path.join(root, inc))


def git(root, *args):
    try:
        return subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                              check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None


def sources(root):
    top = git(root, "rev-parse", "--show-toplevel")
    if top and os.path.realpath(top.strip()) == os.path.realpath(root):  # tracked or new files
        listed = git(root, "ls-files", "--cached", "--others", "--exclude-standard").split("\n")
    else:  # not a checkout of its own (a copy, a test's tree): every file under root
        listed = [os.path.relpath(os.path.join(d, f), root).replace(os.sep, "/")
                  for d, _, files in os.walk(root) for f in files]
    return sorted(p for p in set(listed) if p.endswith(SOURCE_EXTENSIONS)
                  and not p.startswith(SKIPPED_DIRS) and os.path.isfile(os.path.join(root, p)))


def check_file(root, src):
    """Yields (line number, include, from, to, rule) for each forbidden include of src."""
    src_layer = layer_of(src)
    if src_layer is None:  # a new folder: its rules go into LAYERS before it passes
        yield 1, src, "?", "?", "in no layer: add its folder to LAYERS in check_includes.py"
        return
    core = matches(src, CORE_FOLDERS) and not matches(src, NOT_CORE)
    with open(os.path.join(root, src), encoding="utf-8", errors="replace") as f:
        for number, line in enumerate(f, 1):
            m = INCLUDE.match(line)
            if not m:
                continue
            quoted, inc = m.group(1) == '"', m.group(2)
            inc_layer = layer_of(inc)
            shown = f'"{inc}"' if quoted else f"<{inc}>"
            if quoted and not inc.startswith(THIRD_PARTY) and not exists(root, inc):
                yield number, shown, src_layer, "(missing)", "no such file (stale include?)"
                continue
            if src_layer == "tests":
                continue
            if core and inc_layer in ("proto", "prometheus"):
                if src.endswith((".h", ".cuh")):
                    yield (number, shown, src_layer, inc_layer,
                           "no generated header or prometheus/ in a core header")
                    continue
                if inc_layer == "proto" and not matches(src, PB_ALLOWED):
                    yield (number, shown, src_layer, inc_layer,
                           "a core .cc includes a .pb.h only if PB_ALLOWED lists it")
                    continue
            if not may_include(src, src_layer, inc, inc_layer):
                why = next(rule[3] for rule in LAYERS if rule[0] == src_layer)
                yield number, shown, src_layer, inc_layer, why


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--root", default=os.path.join(os.path.dirname(__file__), "..", ".."),
                        help="the source tree to check (default: this checkout)")
    root = os.path.abspath(parser.parse_args().root)
    files = sources(root)
    count = 0
    for src in files:
        for number, inc, src_layer, inc_layer, rule in check_file(root, src):
            print(f"{src}:{number}: {inc} crosses {src_layer} -> {inc_layer}: {rule}")
            count += 1
    print(f"check_includes: {count} violation(s) in {len(files)} files")
    return 1 if count else 0


if __name__ == "__main__":
    sys.exit(main())
