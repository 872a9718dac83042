#!/usr/bin/env python3
"""Writes seed inputs for ps_request_fuzzer into DIR: request sequences a
trainer would send (create a table, push, pull it back, dense variables, the
batched step RPCs) and a few that must fail (bad lengths, wrong route).

Input layout (ps_request_fuzzer.cc): per request 1 method byte, u16 LE
length, the serialized brook.v1 request. Usage: make_seeds_ps_request.py DIR [SHARED_DATA]
"""
import struct
import sys

from seed_util import f32, f64, floats, keys, ld, varint, vi, write_seeds

# The method bytes, in ps_request_fuzzer.cc's order.
(CREATE_TABLE, DROP_TABLE, PULL, PULL_RAW, PUSH, CREATE_DENSE, PULL_DENSE, PUSH_DENSE,
 PULL_BATCH, PUSH_BATCH, STATS, HEALTH) = range(12)

SGD, ADAGRAD, ADAM, FTRL = 1, 2, 3, 4


def req(method, body=b""):
    return bytes([method]) + struct.pack("<H", len(body)) + body


def optimizer_config(opt):
    # Every field the kind uses: the server validates what arrives (a client
    # fills the defaults in; 0 is not "unset" for epsilon or beta).
    o = vi(1, opt) + f32(2, 0.1)
    if opt in (ADAGRAD, FTRL):
        o += f32(3, 0.1)
    if opt == ADAM:
        o += f32(4, 0.9) + f32(5, 0.999) + f32(6, 1e-8)
    if opt == FTRL:
        o += f32(7, 0.01) + f32(8, 0.01) + f32(10, -0.5)
    return o


UNIFORM = vi(1, 3) + f32(3, -0.05) + f32(4, 0.05)


def table_config(name, dim, opt=ADAGRAD, extra=b""):
    return ld(1, ld(1, name) + vi(2, dim) + vi(3, 42) + ld(4, UNIFORM) +
              ld(5, optimizer_config(opt)) + extra)


def dense_config(name, shape, opt=ADAM):
    return ld(1, ld(1, name) + ld(2, b"".join(varint(d) for d in shape)) + vi(3, 7) +
              ld(4, UNIFORM) + ld(5, optimizer_config(opt)))


def pull(table, ks, dim=0, route=b""):
    return ld(1, table) + ld(2, keys(*ks)) + (vi(3, dim) if dim else b"") + route


def push(table, ks, dim, client=7, seq=1, step=1, scale=0.0):
    grads = floats(*[0.01 * (i + 1) for i in range(len(ks) * dim)])
    body = ld(1, table) + ld(2, keys(*ks)) + ld(3, grads) + vi(4, client) + vi(5, seq) + vi(6, step)
    return body + (f32(8, scale) if scale else b"")


def pull_dense(name, n=0):
    return ld(1, name) + (vi(2, n) if n else b"")


def push_dense(name, n, client=7, seq=1, step=1):
    return ld(1, name) + ld(2, floats(*[0.5] * n)) + vi(3, client) + vi(4, seq) + vi(5, step)


def main(out_dir):
    ks = [1, 2, 3, 1 << 40, (1 << 64) - 1]
    seeds = {
        # One table's life: create, push, pull (both paths), stats, drop.
        "table_roundtrip": b"".join([
            req(CREATE_TABLE, table_config("emb", 4)),
            req(PUSH, push("emb", ks, 4)),
            req(PULL, pull("emb", ks + [99], 4)),
            req(PULL_RAW, pull("emb", ks, 4)),
            req(PULL, pull("emb", [5, 6])),  # dim 0: the server looks it up
            req(STATS),
            req(PUSH, push("emb", ks, 4)),  # same client and sequence: a duplicate
            req(DROP_TABLE, ld(1, "emb")),
            req(PULL, pull("emb", [1], 4)),  # gone: NOT_FOUND
            req(HEALTH),
        ]),
        # A trainer step: a table and a dense variable through the batch RPCs.
        "batch_step": b"".join([
            req(CREATE_TABLE, table_config("C1", 2, SGD)),
            req(CREATE_TABLE, table_config("C1_wide", 1, FTRL)),
            req(CREATE_DENSE, dense_config("mlp/w0", [3, 2])),
            req(PULL_BATCH, ld(1, pull("C1", [10, 11], 2)) + ld(1, pull("C1_wide", [10], 1)) +
                ld(2, pull_dense("mlp/w0", 6))),
            req(PUSH_BATCH, ld(1, push("C1", [10, 11], 2, client=0, seq=1, step=0)) +
                ld(1, push("C1_wide", [10], 1, client=0, seq=2, step=0)) +
                ld(2, ld(1, "mlp/w0") + ld(2, floats(*[0.1] * 6)) + vi(4, 3)) +
                vi(3, 5) + vi(4, 3) + f32(5, 0.5)),
            req(PULL_DENSE, pull_dense("mlp/w0")),
            req(PUSH_DENSE, push_dense("mlp/w0", 6, client=5, seq=2, step=4)),
            req(PULL_DENSE, pull_dense("mlp/w0", 6)),
            req(STATS),
        ]),
        # Admission, TTL, clipping and the bad-gradient policy; NaN grads.
        "policies": b"".join([
            req(CREATE_TABLE, table_config(
                "t", 3, ADAM, vi(6, 1 << 20) + vi(7, 2) + vi(8, 10) + f64(9, 60.0) + vi(10, 2) +
                f32(11, 1.0) + vi(12, 1000))),
            req(PUSH, ld(1, "t") + ld(2, keys(4, 5)) + ld(3, floats(1, float("nan"), 3, 4, 5, 6)) +
                vi(6, 100)),
            req(PUSH, push("t", [4, 5], 3, client=0, step=200)),
            req(PULL, pull("t", [4, 5, 6], 3)),
        ]),
        # Requests that must be refused, each with a status.
        "errors": b"".join([
            req(CREATE_TABLE, table_config("e", 0)),  # dim 0
            req(CREATE_TABLE, table_config("e", 2)),
            req(PULL, ld(1, "e") + ld(2, b"\x01\x02\x03") + vi(3, 2)),  # keys not x8
            req(PUSH, ld(1, "e") + ld(2, keys(1, 2)) + ld(3, floats(1, 2, 3))),  # not keys x dim
            req(PULL, pull("e", [1], 2, route=ld(4, vi(1, 1) + vi(2, 2)))),  # wrong shard
            req(PULL, pull("e", [1], 1 << 30)),  # reply past the limit
            req(PULL_DENSE, pull_dense("nope")),
            req(CREATE_DENSE, dense_config("d", [0])),
            req(PUSH_BATCH, ld(1, push("e", [1], 2, client=9)) + vi(3, 8)),  # client ids differ
        ]),
    }
    write_seeds(out_dir, seeds)


if __name__ == "__main__":
    main(sys.argv[1])
