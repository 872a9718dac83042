#!/usr/bin/env python3
"""Tests check_includes.py on a tiny fake tree: it flags exactly the forbidden includes."""
import os
import subprocess
import sys
import tempfile
import unittest

CHECKER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "check_includes.py")

# path -> includes. Each kind of rule has one allowed and one forbidden include; the forbidden
# ones are listed in FORBIDDEN by (file, line). Line n of a file is its n-th include.
TREE = {
    "proto/brook/v1/ps.proto": [],
    "common/hash.h": [],
    "common/rpc/channel.cc": ["<grpcpp/grpcpp.h>"],  # common/rpc may use gRPC
    "common/hash.cc": ['"common/hash.h"', "<grpcpp/grpcpp.h>"],  # common may not
    "ps/table.h": ['"common/hash.h"', '"brook/v1/ps.pb.h"'],  # .pb.h in a core header
    "ps/config_codec.cc": ['"brook/v1/ps.pb.h"'],  # a listed codec
    "ps/table.cc": ['"ps/table.h"', '"brook/v1/ps.grpc.pb.h"'],  # an unlisted core .cc
    "ps/rpc/ps_service.h": ['"brook/v1/ps.pb.h"', '"ps/table.h"'],  # an adapter: both fine
    "ps/client/ps_client.h": [],
    "trainer/trainer.cc": ['"ps/client/ps_client.h"', '"ps/table.h"'],  # layer crossing
    "trainer/model.cc": ['"common/hash.h"', '"common/gone.h"'],  # stale include
    "trainer/backend/cuda/plugin.h": [],
    "trainer/backend/backend_loader.cc": ['"trainer/backend/cuda/plugin.h"'],  # the exception
    "trainer/backend/cpu.cc": ['"trainer/backend/cuda/plugin.h"'],  # not the exception
    "tests/testing/fake.h": [],
    "tests/unit/table_test.cc": ['"tests/testing/fake.h"', '"ps/table.h"'],  # tests: anything
    "cli/main.cc": ['"trainer/trainer.cc"', '"tests/testing/fake.h"'],  # no test code in cli
    "newfolder/thing.cc": [],  # in no layer
}
FORBIDDEN = {
    ("common/hash.cc", 2), ("ps/table.h", 2), ("ps/table.cc", 2), ("trainer/trainer.cc", 2),
    ("trainer/model.cc", 2), ("trainer/backend/cpu.cc", 1), ("cli/main.cc", 2),
    ("newfolder/thing.cc", 0),
}


def write_tree(root, tree):
    for path, includes in tree.items():
        os.makedirs(os.path.join(root, os.path.dirname(path)), exist_ok=True)
        with open(os.path.join(root, path), "w") as f:
            f.write("// fake\n" + "".join(f"#include {i}\n" for i in includes))


def run_checker(root):
    return subprocess.run([sys.executable, CHECKER, "--root", root], capture_output=True,
                          text=True)


class CheckIncludesTest(unittest.TestCase):
    def test_flags_exactly_the_forbidden_includes(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, TREE)
            result = run_checker(root)
        self.assertEqual(result.returncode, 1, result.stdout + result.stderr)
        flagged = set()
        for line in result.stdout.splitlines()[:-1]:
            path, number, _ = line.split(":", 2)
            # The file line of the n-th include is n + 1 (the first line is a comment).
            flagged.add((path, int(number) - 1))
            self.assertIn(" crosses ", line)
        self.assertEqual(flagged, FORBIDDEN, result.stdout)
        self.assertIn(f"{len(FORBIDDEN)} violation(s)", result.stdout.splitlines()[-1])

    def test_names_the_layers_and_the_rule(self):
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, TREE)
            out = run_checker(root).stdout
        self.assertIn('trainer/trainer.cc:3: "ps/table.h" crosses trainer -> ps: ', out)
        self.assertIn('trainer/model.cc:3: "common/gone.h" crosses trainer -> (missing): ', out)
        self.assertIn('ps/table.h:3: "brook/v1/ps.pb.h" crosses ps -> proto: ', out)
        self.assertIn("common/hash.cc:3: <grpcpp/grpcpp.h> crosses common -> grpc: ", out)
        self.assertIn("newfolder/thing.cc:1: newfolder/thing.cc crosses ? -> ?: in no layer", out)

    def test_a_clean_tree_passes(self):
        clean = {path: [i for n, i in enumerate(includes, 1) if (path, n) not in FORBIDDEN]
                 for path, includes in TREE.items() if not path.startswith("newfolder/")}
        with tempfile.TemporaryDirectory() as root:
            write_tree(root, clean)
            result = run_checker(root)
        self.assertEqual(result.returncode, 0, result.stdout + result.stderr)
        self.assertIn("0 violation(s) in 16 files", result.stdout)


if __name__ == "__main__":
    unittest.main()
