#!/usr/bin/python3
"""Mailbox and remote command runner between the two guests of run2.sh.

    pair-agent.py serve BIND_IP PEER_IP PORT INBOX
    pair-agent.py rsh PEER_IP PORT CMD [ARGS...]

`serve` (started by lib.sh's vm_pair_topology in each guest) listens on
BIND_IP:PORT (the guest's address on the link) and answers only PEER_IP.
A connection's first line says what it wants:

  POST <text>     append <text> to INBOX, answer "OK" (vm_pair_post: bash's
                  /dev/tcp, no process started; vm_pair_wait polls INBOX)
  EXEC <json>     run the argv list <json> (cwd /, stdin /dev/null, the
                  guest's environment) and stream its output back in frames
                  of 1 type byte + 4-byte big-endian length + data:
                  b"o" stdout, b"e" stderr, b"x" exit status (signed; -N
                  for signal N).  If the connection drops, the command's
                  process group is killed.

`rsh` is the client of EXEC: `pair-agent.py rsh PEER PORT CMD...` behaves
like `ssh -n PEER CMD...` (output, exit status; 128+N for signal N; 255 if
the peer cannot be reached), which is what a launcher such as Open MPI's
mpirun needs (`--mca plm_rsh_agent`, see tests/vm/README.md).
"""
import json
import os
import selectors
import signal
import socket
import struct
import subprocess
import sys
import threading


def read_line(conn, limit=65536):
    buf = b""
    while not buf.endswith(b"\n"):
        c = conn.recv(1)
        if not c or len(buf) >= limit:
            return None
        buf += c
    return buf[:-1].decode("utf-8", "replace")


def frame(kind, data):
    return kind + struct.pack(">I", len(data)) + data


def handle_exec(conn, argv):
    try:
        p = subprocess.Popen(argv, cwd="/", stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                             start_new_session=True)
    except OSError as e:
        conn.sendall(frame(b"e", ("pair-agent: %s: %s\n" % (argv[0], e)).encode()))
        conn.sendall(frame(b"x", struct.pack(">i", 127)))
        return
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ, b"o")
    sel.register(p.stderr, selectors.EVENT_READ, b"e")
    sel.register(conn, selectors.EVENT_READ, None)
    streams = 2
    try:
        while streams:
            for key, _ in sel.select():
                if key.data is None:  # the client went away (or sent junk)
                    if not conn.recv(4096):
                        raise ConnectionError
                    continue
                data = os.read(key.fd, 65536)
                if not data:
                    sel.unregister(key.fileobj)
                    streams -= 1
                    continue
                conn.sendall(frame(key.data, data))
        rc = p.wait()
        conn.sendall(frame(b"x", struct.pack(">i", rc)))
    except OSError:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.wait()


def serve(bind_ip, peer_ip, port, inbox):
    lock = threading.Lock()
    srv = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    srv.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    srv.bind((bind_ip, port))
    srv.listen(16)

    def one(conn, addr):
        with conn:
            if addr[0] != peer_ip:
                return
            line = read_line(conn)
            if line is None:
                return
            if line.startswith("POST "):
                with lock, open(inbox, "a") as f:
                    f.write(line[5:] + "\n")
                conn.sendall(b"OK\n")
            elif line.startswith("EXEC "):
                handle_exec(conn, json.loads(line[5:]))

    print("pair-agent: serving %s:%d for %s" % (bind_ip, port, peer_ip), flush=True)
    while True:
        conn, addr = srv.accept()
        threading.Thread(target=one, args=(conn, addr), daemon=True).start()


def recv_exact(s, n):
    buf = b""
    while len(buf) < n:
        c = s.recv(n - len(buf))
        if not c:
            raise ConnectionError("connection closed")
        buf += c
    return buf


def rsh(peer, port, argv):
    try:
        s = socket.create_connection((peer, port), timeout=30)
        s.settimeout(None)
        s.sendall(("EXEC %s\n" % json.dumps(argv)).encode())
        while True:
            kind = recv_exact(s, 1)
            (n,) = struct.unpack(">I", recv_exact(s, 4))
            data = recv_exact(s, n)
            if kind == b"x":
                (rc,) = struct.unpack(">i", data)
                return rc if rc >= 0 else 128 - rc
            out = sys.stdout if kind == b"o" else sys.stderr
            out.buffer.write(data)
            out.flush()
    except OSError as e:
        print("pair-agent rsh %s: %s" % (peer, e), file=sys.stderr)
        return 255


def main():
    a = sys.argv[1:]
    if len(a) == 5 and a[0] == "serve":
        serve(a[1], a[2], int(a[3]), a[4])
    elif len(a) >= 4 and a[0] == "rsh":
        sys.exit(rsh(a[1], int(a[2]), a[3:]))
    else:
        sys.exit(__doc__.split("\n\n")[1])


main()
