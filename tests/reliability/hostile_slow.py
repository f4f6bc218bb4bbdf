#!/usr/bin/env python3
"""hostile_slow.py MODE PORT N MAX_S [SRC]: N slow clients; prints how long each was kept.

  head  sends a request line, then one header byte every 0.5 s, never the blank line
  body  sends a POST /api/v1/sessions head with Content-Length 10 MB, then one body byte
        every 0.5 s
Each connection comes from SRC (default 127.0.0.1). Waits until the server closed every
connection or MAX_S seconds passed, then prints one line per connection: the seconds it
stayed open ("open" when the server never closed it) and what the server answered, if
anything. "ready" goes to stderr once every head is sent. Exit status 0 in all cases: the
calling script judges the numbers.
"""
import socket
import sys
import time


def main():
    mode, port, n, max_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    src = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1"
    conns = []
    t0 = time.monotonic()
    for _ in range(n):
        s = socket.socket()
        s.bind((src, 0))
        try:
            s.connect(("127.0.0.1", port))
            if mode == "head":
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            else:
                s.sendall(b"POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n{")
            s.setblocking(False)
            conns.append([s, None, b""])
        except OSError as e:
            conns.append([None, 0.0, ("refused: %s" % e).encode()])
    sys.stderr.write("ready\n")  # every head is sent: the caller may go on
    sys.stderr.flush()
    while time.monotonic() - t0 < max_s and any(c[1] is None for c in conns):
        for c in conns:
            if c[1] is not None:
                continue
            try:
                got = c[0].recv(4096)
                if not got:
                    c[1] = time.monotonic() - t0
                    continue
                c[2] += got
            except BlockingIOError:
                pass
            except OSError:
                c[1] = time.monotonic() - t0
                continue
            try:
                c[0].send(b"a")
            except BlockingIOError:
                pass
            except OSError:
                c[1] = time.monotonic() - t0
        time.sleep(0.5)
    for c in conns:
        first = c[2].split(b"\r\n", 1)[0].decode("latin-1")
        print("%s %s" % ("open" if c[1] is None else "%.1f" % c[1], first or "-"))
        if c[0]:
            c[0].close()


if __name__ == "__main__":
    main()
