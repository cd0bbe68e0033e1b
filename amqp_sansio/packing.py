"""The big-endian layouts every codec packs numbers with (network order:
AMQP's, in every version).  Compiled once; the codecs bind what they use."""

from __future__ import annotations

__all__ = ["S_b", "S_h", "S_H", "S_i", "S_I", "S_q", "S_Q", "S_f", "S_d"]

import struct

S_b = struct.Struct("!b")  # int8
S_h = struct.Struct("!h")  # int16
S_H = struct.Struct("!H")  # uint16
S_i = struct.Struct("!i")  # int32
S_I = struct.Struct("!I")  # uint32
S_q = struct.Struct("!q")  # int64
S_Q = struct.Struct("!Q")  # uint64
S_f = struct.Struct("!f")  # float32
S_d = struct.Struct("!d")  # float64
