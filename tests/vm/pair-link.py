#!/usr/bin/python3
"""The wire between the two guests of tests/vm/run2.sh.

    pair-link.py FD_A FD_B CMD [ARGS...]

Makes two UDP sockets on 127.0.0.1, each bound to a port the kernel picks
(port 0: free by construction, no race with parallel runs, nothing to
retry) and connect()ed to the other, so each receives only what the other
sends.  Puts them on file descriptors FD_A and FD_B and execs CMD with them
inherited; QEMU takes one each as `-netdev dgram,local.type=fd,local.str=FD`
and sends every Ethernet frame of its NIC as one datagram to the other.
MBCF_PAIR_LINK="127.0.0.1:PA 127.0.0.1:PB" tells CMD the ports (for logs).

No SO_REUSEADDR (QEMU's own inet dgram/socket backends set it, so a port
collision between parallel runs would go unnoticed there: both binds succeed
and frames go astray).  Receive buffers of 1 MiB: a TCG guest that is
descheduled for a while should not lose a window's worth of frames.
"""
import os
import socket
import sys

BUF = 1 << 20


def main():
    if len(sys.argv) < 4:
        sys.exit(__doc__.split("\n\n")[1])
    fds = int(sys.argv[1]), int(sys.argv[2])
    socks = []
    for _ in fds:
        s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        for opt, force in ((socket.SO_RCVBUF, 33), (socket.SO_SNDBUF, 32)):
            try:  # SO_RCVBUFFORCE / SO_SNDBUFFORCE (root) pass rmem_max
                s.setsockopt(socket.SOL_SOCKET, force, BUF)
            except OSError:
                s.setsockopt(socket.SOL_SOCKET, opt, BUF)
        s.bind(("127.0.0.1", 0))
        socks.append(s)
    socks[0].connect(socks[1].getsockname())
    socks[1].connect(socks[0].getsockname())
    os.environ["MBCF_PAIR_LINK"] = " ".join(
        "%s:%d" % s.getsockname() for s in socks)
    for s, fd in zip(socks, fds):
        os.dup2(s.fileno(), fd)  # dup2 makes the new fd inheritable
        s.close()
    os.execvp(sys.argv[3], sys.argv[3:])


main()
