#!/usr/bin/env python3
"""Direct transcription of Lamping & Veach's JumpConsistentHash (arXiv:1406.2294),
used to produce the reference values pinned in sharding_test.cc."""
import sys

def jump(key, buckets):
    b, j = -1, 0
    while j < buckets:
        b = j
        key = (key * 2862933555777941757 + 1) & 0xFFFFFFFFFFFFFFFF
        j = int((b + 1) * (float(1 << 31) / float((key >> 33) + 1)))
    return b

if __name__ == "__main__":
    for k, n in [(0, 10), (1, 10), (0xDEADBEEF, 100), (0xFFFFFFFFFFFFFFFF, 1000)]:
        print(k, n, jump(k, n))
