#!/usr/bin/env python3
"""Writes seed inputs for tfrecord_reader_fuzzer into DIR.

Seeds are built at run time (not committed copies of ../shared/data): the first
records of TensorFlow's Criteo sample file, re-framed, under several option
bytes; the same compressed with GZIP and ZLIB; empty and large records; and
truncated and bit-flipped variants for skip_corrupt. Input layout
(tfrecord_reader_fuzzer.cc): option byte (bits 0-1 compression 0 none/1 gzip/
2 zlib, bit 2 skip_corrupt, bit 3 no data CRC check, bit 4 also read as a
file), buffer byte (16 + 16 * b bytes), file bytes.
Usage: make_seeds_tfrecord_reader.py DIR SHARED_DATA
"""
import gzip
import os
import sys
import zlib

from seed_util import frame, read_records, write_seeds


def main(out_dir, shared_data):
    records = []
    criteo = os.path.join(shared_data, "tfrecord", "criteo_sample.te.tfrecords")
    if os.path.exists(criteo):
        records += read_records(criteo, 3)
    records += [b"", b"x", bytes(range(256)) * 4]
    plain = b"".join(frame(r) for r in records)
    flipped = plain[:40] + bytes([plain[40] ^ 0x10]) + plain[41:]
    seeds = {
        "plain": bytes([0x00, 0xFF]) + plain,
        "plain_file": bytes([0x10, 0x00]) + plain,  # mmap, small buffer
        "gzip": bytes([0x11, 0x20]) + gzip.compress(plain),
        "zlib": bytes([0x12, 0x04]) + zlib.compress(plain),
        "gzip_two_members": bytes([0x01, 0x10]) + gzip.compress(plain[:100]) + gzip.compress(plain[100:]),
        "skip_truncated": bytes([0x14, 0x08]) + plain[: len(plain) * 2 // 3],
        "skip_flipped": bytes([0x14, 0x02]) + flipped,
        "no_crc_flipped": bytes([0x18, 0x40]) + flipped,
        "empty_file": bytes([0x10, 0x00]),
    }
    write_seeds(out_dir, seeds)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
