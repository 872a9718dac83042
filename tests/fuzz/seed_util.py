"""Helpers the make_seeds_*.py scripts share: protobuf wire encoding by hand
(no python protobuf needed), TFRecord framing with CRC32C, and writing seeds."""
import os
import struct


def _crc_table():
    poly, table = 0x82F63B78, []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data):
    c = 0xFFFFFFFF
    for b in data:
        c = _TABLE[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def mask(c):
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def frame(rec):
    """One TFRecord frame: u64 length, masked CRC of it, data, masked CRC of data."""
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
    if v < 0:
        v += 1 << 64  # int64 fields: two's complement, 10 bytes
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
    """A length-delimited field (bytes, string, message, packed list)."""
    if isinstance(payload, str):
        payload = payload.encode()
    return varint(field << 3 | 2) + varint(len(payload)) + payload


def vi(field, value):
    """A varint field (ints, bools, enums)."""
    return varint(field << 3) + varint(int(value))


def f32(field, value):
    """A fixed32 float field."""
    return varint(field << 3 | 5) + struct.pack("<f", value)


def f64(field, value):
    """A fixed64 double field."""
    return varint(field << 3 | 1) + struct.pack("<d", value)


def keys(*ks):
    return struct.pack("<%dQ" % len(ks), *ks)


def floats(*fs):
    return struct.pack("<%df" % len(fs), *fs)


def write_seeds(out_dir, seeds):
    os.makedirs(out_dir, exist_ok=True)
    for name, data in seeds.items():
        with open(os.path.join(out_dir, "seed_" + name), "wb") as f:
            f.write(data)
