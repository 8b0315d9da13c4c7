#!/usr/bin/env python3
"""Opens N idle connections to 127.0.0.1:PORT and holds them until stdin closes.

Each connection first does one exchange so the server has set it up completely (raw echo: one
8-byte frame echoed back; resp: PING answered +PONG), then stays idle. Prints "ready N" once
all are open. Used by `benches/run.sh idle-memory` to measure a server's RSS per idle connection.

Usage: idle_conns.py PORT N echo|resp
"""
import resource
import socket
import struct
import sys


def exchange(s, proto):
    if proto == "echo":
        msg = struct.pack("<I", 8) + b"idle-mem"
        s.sendall(msg)
        want = len(msg)
    else:
        s.sendall(b"PING\r\n")
        want = len(b"+PONG\r\n")
    got = b""
    while len(got) < want:
        chunk = s.recv(want - len(got))
        if not chunk:
            raise ConnectionError("server closed the connection")
        got += chunk


def main():
    port, n, proto = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < n + 64:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(hard, n + 1024), hard))
    conns = []
    for _ in range(n):
        s = socket.create_connection(("127.0.0.1", port))
        exchange(s, proto)
        conns.append(s)
    print(f"ready {len(conns)}", flush=True)
    sys.stdin.read()


if __name__ == "__main__":
    main()
