"""A tiny PNG reader (zlib only) for screenshot checks: 8-bit RGB/RGBA, non-interlaced."""

from __future__ import annotations

import struct
import zlib


def decode(data: bytes) -> tuple[int, int, int, bytes]:
    """(width, height, channels, raw pixel bytes) of a PNG produced by Chromium."""
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("not a PNG file")
    pos, idat = 8, []
    width = height = channels = 0
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos:pos + 4])
        kind = data[pos + 4:pos + 8]
        body = data[pos + 8:pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            width, height, depth, color, _, _, interlace = struct.unpack(">IIBBBBB", body)
            if depth != 8 or color not in (2, 6) or interlace:
                raise ValueError(f"unsupported PNG (depth {depth}, color {color}, interlace {interlace})")
            channels = 3 if color == 2 else 4
        elif kind == b"IDAT":
            idat.append(body)
        elif kind == b"IEND":
            break
    raw = zlib.decompress(b"".join(idat))
    stride = width * channels
    out = bytearray(height * stride)
    prev = bytearray(stride)
    i = 0
    for y in range(height):
        ftype = raw[i]
        line = bytearray(raw[i + 1:i + 1 + stride])
        i += 1 + stride
        for x in range(stride):
            a = line[x - channels] if x >= channels else 0
            b = prev[x]
            c = prev[x - channels] if x >= channels else 0
            if ftype == 1:
                line[x] = (line[x] + a) & 0xFF
            elif ftype == 2:
                line[x] = (line[x] + b) & 0xFF
            elif ftype == 3:
                line[x] = (line[x] + ((a + b) >> 1)) & 0xFF
            elif ftype == 4:
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                pred = a if pa <= pb and pa <= pc else (b if pb <= pc else c)
                line[x] = (line[x] + pred) & 0xFF
        out[y * stride:(y + 1) * stride] = line
        prev = line
    return width, height, channels, bytes(out)


def luminance_stats(data: bytes, step: int = 7) -> tuple[float, int]:
    """(variance of luminance, number of distinct sampled colours) over a pixel sample."""
    width, height, ch, px = decode(data)
    values = []
    colours = set()
    for y in range(0, height, step):
        for x in range(0, width, step):
            o = (y * width + x) * ch
            r, g, b = px[o], px[o + 1], px[o + 2]
            colours.add((r, g, b))
            values.append(0.299 * r + 0.587 * g + 0.114 * b)
    mean = sum(values) / len(values)
    return sum((v - mean) ** 2 for v in values) / len(values), len(colours)
