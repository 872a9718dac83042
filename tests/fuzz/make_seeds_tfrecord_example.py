#!/usr/bin/env python3
"""Writes seed inputs for tfrecord_example_fuzzer into DIR.

Seeds are built at run time (not committed copies of ../shared/data): the first
records of TensorFlow's Criteo sample file, re-framed, under each reader-option
byte; the same compressed with GZIP and ZLIB; a few hand-made Examples; and
truncated and bit-flipped variants. Input layout: 1 option byte + file bytes
(option byte: bits 0-1 compression 0 none/1 gzip/2 zlib, bit 2 skip_corrupt).
"""
import gzip, os, struct, sys, zlib

def _crc_table():
    poly, table = 0x82F63B78, []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table

TABLE = _crc_table()

def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF

def mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def frame(rec):
    n = struct.pack("<Q", len(rec))
    return n + struct.pack("<I", mask(crc32c(n))) + rec + struct.pack("<I", mask(crc32c(rec)))

def read_records(path, limit):
    out, data, off = [], open(path, "rb").read(), 0
    while off + 12 <= len(data) and len(out) < limit:
        (n,) = struct.unpack_from("<Q", data, off)
        out.append(data[off + 12: off + 12 + n])
        off += 16 + n
    return out

def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)

def ld(field, payload):
    return varint(field << 3 | 2) + varint(len(payload)) + payload

def feature(name, kind, payload):
    return ld(1, ld(1, name.encode()) + ld(2, ld(kind, payload)))

def example(*features):
    return ld(1, b"".join(features))

def main(out_dir, shared_data):
    os.makedirs(out_dir, exist_ok=True)
    records = []
    criteo = os.path.join(shared_data, "tfrecord", "criteo_sample.te.tfrecords")
    if os.path.exists(criteo):
        records += read_records(criteo, 3)
    floats = struct.pack("<f", 1.5)
    records += [
        example(feature("label", 2, ld(1, struct.pack("<f", 1.0))),
                feature("I1", 2, ld(1, floats)),
                feature("I4", 3, ld(1, varint(3) + varint(4))),
                feature("C1", 3, ld(1, varint(7) + varint(8))),
                feature("B1", 1, ld(1, b"abc") + ld(1, b"de"))),
        example(feature("label", 3, ld(1, varint(0)))),
        b"",
    ]
    plain = b"".join(frame(r) for r in records)
    variants = {
        "plain": bytes([0]) + plain,
        "gzip": bytes([1]) + gzip.compress(plain),
        "zlib": bytes([2]) + zlib.compress(plain),
        "skip_truncated": bytes([4]) + plain[: len(plain) * 2 // 3],
        "skip_flipped": bytes([4]) + plain[:40] + bytes([plain[40] ^ 0x10]) + plain[41:],
        "small_buffer": bytes([0xF8]) + plain,
    }
    for name, data in variants.items():
        with open(os.path.join(out_dir, "seed_" + name), "wb") as f:
            f.write(data)

if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
