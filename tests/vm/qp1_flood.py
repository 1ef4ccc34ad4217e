#!/usr/bin/env python3
"""Hostile datagrams to QP1 (the GSI QP) from a raw socket, run by
tests/vm/qp1.sh inside the guest.

    qp1_flood.py IFNAME DST_MAC KIND COUNT [KIND COUNT ...]

KINDs (MBCF DGRAM frames, docs/protocol.md 2 and include/mbcf/wire.h):
  oversized  a 1000-byte datagram to QP1: more than any MAD (256 B)
  broadcast  the same, to ff:ff:ff:ff:ff:ff
  truncated  a DGRAM header cut at byte 40 (shorter than its 72 bytes)
  shortpay   a header announcing 256 payload bytes with 100 present
  junkmad    256 random bytes to QP1 with its Q_Key: a MAD the MAD layer
             must judge and drop
Frames leave as fast as the socket takes them; prints "sent KIND N" per
kind.  Only to DST_MAC (a device of this guest) or broadcast on IFNAME, a
veth of the guest's own namespace.
"""
import os
import socket
import struct
import sys

ETHERTYPE = 0x88B5
VERSION = 2
OP_DGRAM = 0x14
GSI_QKEY = 0x80010000
HDR = 72


def mac(s):
    return bytes(int(x, 16) for x in s.split(":"))


def dgram(dst_qpn, payload, paylen=None):
    """A DGRAM header (big-endian fields) and its payload."""
    h = bytearray(HDR)
    h[0], h[1] = VERSION, OP_DGRAM
    struct.pack_into(">II", h, 4, dst_qpn, 0x123456)
    struct.pack_into(">H", h, 20, len(payload) if paylen is None else paylen)
    struct.pack_into(">III", h, 24, GSI_QKEY, 0, 6 << 28)
    h[36] = 64
    h[40:56] = bytes.fromhex("fe800000000000000000000000000001")
    h[56:72] = bytes.fromhex("fe800000000000000000000000000002")
    return bytes(h) + payload


def frame(kind, rnd):
    if kind in ("oversized", "broadcast"):
        return dgram(1, bytes(1000))
    if kind == "truncated":
        return dgram(1, b"")[:40]
    if kind == "shortpay":
        return dgram(1, bytes(100), paylen=256)
    if kind == "junkmad":
        return dgram(1, rnd(256))
    raise SystemExit("unknown kind " + kind)


def main():
    ifname, dst = sys.argv[1], mac(sys.argv[2])
    s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW)
    s.bind((ifname, 0))
    src = s.getsockname()[4]
    args = sys.argv[3:]
    for kind, count in zip(args[::2], args[1::2]):
        to = b"\xff" * 6 if kind == "broadcast" else dst
        eth = to + src + struct.pack(">H", ETHERTYPE)
        sent = 0
        for _ in range(int(count)):
            f = eth + frame(kind, os.urandom)
            while True:
                try:
                    s.send(f)
                    break
                except BlockingIOError:
                    continue
                except OSError as e:  # a full queue: try again, count exact
                    if e.errno != 105:
                        raise
            sent += 1
        print("sent", kind, sent, flush=True)


if __name__ == "__main__":
    main()
