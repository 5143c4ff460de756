#!/usr/bin/env python3
"""Turns .memtrace files into seeds for the chunks fuzz target (tests/fuzz/chunks_fuzz.c):
each chunk's payload, decompressed, as a record `type:u8 len:u16le payload`, after a
control byte (1: END chunk appended by the target) and a version byte (0: 1.0).
Chunks longer than 65535 bytes, and the END chunk, are left out.

    tests/fuzz/chunks-seed.py OUT_DIR FILE.memtrace...
"""
import os
import struct
import sys
import zlib


def records(path):
    data = open(path, "rb").read()
    if data[:8] != b"MEMTRACE" or len(data) < 16:
        return None
    out, off, ended = bytearray(), 16, False
    while off + 20 <= len(data):
        kind, _, _, stored_len, raw_len = struct.unpack_from("<BBHII", data, off)
        stored = data[off + 20:off + 20 + stored_len]
        off += 20 + stored_len
        try:
            raw = zlib.decompress(stored)
        except zlib.error:
            break
        if kind == 7:
            ended = True
            break
        if len(raw) > 0xFFFF:
            continue
        out += struct.pack("<BH", kind, len(raw)) + raw
    return bytes([1 if ended else 0, 0]) + bytes(out)


def main():
    if len(sys.argv) < 3:
        sys.exit("usage: chunks-seed.py OUT_DIR FILE.memtrace...")
    for path in sys.argv[2:]:
        seed = records(path)
        if seed is None:
            print("chunks-seed: %s: not a memtrace file, skipped" % path, file=sys.stderr)
            continue
        name = os.path.basename(os.path.dirname(path)) if os.path.basename(path) == "input.memtrace" \
            else os.path.splitext(os.path.basename(path))[0]
        with open(os.path.join(sys.argv[1], name), "wb") as f:
            f.write(seed)


if __name__ == "__main__":
    main()
