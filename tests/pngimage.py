"""Decoding the PNG screenshots Chromium writes (8-bit RGB or RGBA, not interlaced), with zlib and numpy.

Enough of the PNG specification (chunks, zlib, the five row filters) to look at the pixels a
test took, without an image library.
"""

from __future__ import annotations

import struct
import zlib
from pathlib import Path

import numpy as np
import numpy.typing as npt

SIGNATURE = b"\x89PNG\r\n\x1a\n"
CHANNELS = {0: 1, 2: 3, 4: 2, 6: 4}  # colour type -> samples per pixel


def read_png(path: Path) -> npt.NDArray[np.uint8]:
    """The image as a (height, width, channels) array."""
    data = path.read_bytes()
    if not data.startswith(SIGNATURE):
        raise ValueError(f"{path}: not a PNG file")
    pos, compressed, header = len(SIGNATURE), bytearray(), None
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        body = data[pos + 8 : pos + 8 + length]
        pos += 12 + length
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            compressed += body
    if header is None:
        raise ValueError(f"{path}: no IHDR chunk")
    width, height, depth, colour, _, _, interlace = header
    if depth != 8 or interlace or colour not in CHANNELS:
        raise ValueError(f"{path}: only 8-bit, non-interlaced PNGs are decoded here")
    channels = CHANNELS[colour]
    stride = width * channels
    raw = zlib.decompress(bytes(compressed))
    rows = np.zeros((height, stride), dtype=np.uint8)
    previous = bytes(stride)
    for y in range(height):
        kind = raw[y * (stride + 1)]
        line = raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)]
        current = _unfilter(kind, line, previous, channels)
        rows[y] = np.frombuffer(current, dtype=np.uint8)
        previous = current
    return rows.reshape(height, width, channels)


def _unfilter(kind: int, line: bytes, previous: bytes, bpp: int) -> bytes:
    if kind == 0:
        return line
    if kind == 2:
        return bytes((a + b) & 0xFF for a, b in zip(line, previous))
    out = bytearray(line)
    for x in range(len(out)):
        left = out[x - bpp] if x >= bpp else 0
        up = previous[x]
        if kind == 1:
            predictor = left
        elif kind == 3:
            predictor = (left + up) >> 1
        elif kind == 4:
            up_left = previous[x - bpp] if x >= bpp else 0
            estimate = left + up - up_left
            pa, pb, pc = abs(estimate - left), abs(estimate - up), abs(estimate - up_left)
            predictor = left if pa <= pb and pa <= pc else (up if pb <= pc else up_left)
        else:
            raise ValueError(f"unknown PNG filter {kind}")
        out[x] = (out[x] + predictor) & 0xFF
    return bytes(out)
