#!/usr/bin/env python3
"""Writes seed inputs for example_parser_fuzzer into DIR: serialized
tf.train.Example records (no framing) after a spec-selector byte (0 the
Criteo-like spec, 1 the strict/int64-label one, 2 the Adult-like one; see
example_parser_fuzzer.cc). Sources: the first records of TensorFlow's Criteo
sample file (../shared/data) and hand-made Examples that fill, omit and
mistype each spec's features, packed and unpacked.
Usage: make_seeds_example_parser.py DIR SHARED_DATA
"""
import os
import struct
import sys

from seed_util import ld, read_records, varint, write_seeds

BYTES, FLOATS, INT64S = 1, 2, 3  # the oneof field numbers of tf.train.Feature


def feature(name, kind, payload):
    # Features.feature is map<string, Feature>: entries {1: key, 2: value}.
    return ld(1, ld(1, name.encode()) + ld(2, ld(kind, payload)))


def floats(*fs):
    return ld(1, struct.pack("<%df" % len(fs), *fs))  # packed


def int64s(*vs):
    return ld(1, b"".join(varint(v) for v in vs))  # packed


def int64s_unpacked(*vs):
    return b"".join(varint(1 << 3) + varint(v) for v in vs)


def bytes_list(*bs):
    return b"".join(ld(1, b) for b in bs)


def example(*features):
    return ld(1, b"".join(features))


def main(out_dir, shared_data):
    seeds = {}
    criteo = os.path.join(shared_data, "tfrecord", "criteo_sample.te.tfrecords")
    if os.path.exists(criteo):
        for i, r in enumerate(read_records(criteo, 3)):
            seeds["criteo_%d" % i] = bytes([0]) + r
    seeds.update({
        "spec0_full": bytes([0]) + example(
            feature("label", FLOATS, floats(1.0)), feature("I1", FLOATS, floats(1.5)),
            feature("I2", FLOATS, floats(-2.0)), feature("I3", FLOATS, floats(float("nan"))),
            feature("I4", INT64S, int64s(3, -4)), feature("C1", INT64S, int64s(7, 8, 1 << 62)),
            feature("C2", INT64S, int64s_unpacked(9)), feature("C3", INT64S, int64s()),
            feature("B1", BYTES, bytes_list(b"abc", b"de", b"", b"toolong"))),
        "spec0_label_int_only": bytes([0]) + example(feature("label", INT64S, int64s(0))),
        "spec0_mismatch": bytes([0]) + example(
            feature("label", FLOATS, floats(0.0)), feature("I1", INT64S, int64s(1)),
            feature("unknown", BYTES, bytes_list(b"x"))),
        "spec1_full": bytes([1]) + example(
            feature("y", INT64S, int64s(1)), feature("f", FLOATS, floats(1, 2, 3)),
            feature("ids", INT64S, int64s(1, 2, 3)), feature("s", BYTES, bytes_list(b"k"))),
        "spec1_mismatch_default": bytes([1]) + example(
            feature("y", FLOATS, floats(0.0)), feature("f", FLOATS, floats(1, 2)),
            feature("ids", BYTES, bytes_list(b"1")), feature("s", BYTES, bytes_list())),
        "spec2_adult": bytes([2]) + example(
            feature("income", FLOATS, floats(1.0)), feature("age", FLOATS, floats(39.0)),
            feature("workclass", BYTES, bytes_list(b"State-gov")),
            feature("marital-status", BYTES, bytes_list(b"Never-married")),
            feature("native-country", BYTES, bytes_list(b"United-States", b"x"))),
        "empty_example": bytes([0]),
    })
    write_seeds(out_dir, seeds)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
