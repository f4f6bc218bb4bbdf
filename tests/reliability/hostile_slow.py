#!/usr/bin/env python3
"""hostile_slow.py MODE PORT N MAX_S [SRC]: N slow clients; prints how long each was kept.

  head  sends a request line, then one header byte every 0.5 s, never the blank line
  body  sends a POST /api/v1/sessions head with Content-Length 10 MB, then one body byte
        every 0.5 s
  read  sends GET $READ_PATH (default /api/v1/sessions/1/trace), then reads the reply at
        $READ_RATE bytes a second (default 0: never reads), with a receive buffer of
        $READ_RCVBUF bytes (default 16384; 0: the system's)
Each connection comes from SRC (default 127.0.0.1). Waits until the server closed every
connection or MAX_S seconds passed, then prints one line per connection: the seconds it
stayed open ("open" when the server never closed it), what the server answered, if
anything (its status line), "bytes=N" received and "complete=1" when a chunked reply ended
with its last chunk (a download cut short does not). "ready" goes to stderr once every
head is sent. Exit status 0 in all cases: the calling script judges the numbers.
"""
import os
import socket
import sys
import time


def main():
    mode, port, n, max_s = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
    src = sys.argv[5] if len(sys.argv) > 5 else "127.0.0.1"
    rate = float(os.environ.get("READ_RATE", "0"))
    path = os.environ.get("READ_PATH", "/api/v1/sessions/1/trace").encode()
    rcvbuf = int(os.environ.get("READ_RCVBUF", "16384"))  # 0: the system's default
    conns = []
    t0 = time.monotonic()
    for _ in range(n):
        s = socket.socket()
        s.bind((src, 0))
        if mode == "read" and rcvbuf:  # before connect: the window it advertises stays small
            s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, rcvbuf)
        try:
            s.connect(("127.0.0.1", port))
            if mode == "head":
                s.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            elif mode == "read":
                s.sendall(b"GET " + path + b" HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            else:
                s.sendall(b"POST /api/v1/sessions HTTP/1.1\r\nHost: x\r\nContent-Length: 10000000\r\n\r\n{")
            s.setblocking(False)
            conns.append([s, None, b"", 0, b""])
        except OSError as e:
            conns.append([None, 0.0, ("refused: %s" % e).encode(), 0, b""])
    sys.stderr.write("ready\n")  # every head is sent: the caller may go on
    sys.stderr.flush()
    tick = 0.1 if mode == "read" else 0.5
    while time.monotonic() - t0 < max_s and any(c[1] is None for c in conns):
        for c in conns:
            if c[1] is not None:
                continue
            if mode == "read":
                read_some(c, rate, t0)
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
        time.sleep(tick)
    for c in conns:
        first = c[2].split(b"\r\n", 1)[0].decode("latin-1")
        print("%s %s bytes=%d complete=%d" % ("open" if c[1] is None else "%.1f" % c[1], first or "-", c[3],
                                             int(c[4].endswith(b"\r\n0\r\n\r\n"))))
        if c[0]:
            c[0].close()


def peer_closed(s):
    """1 when the server has closed its side (TCP state CLOSE_WAIT or CLOSE, from TCP_INFO's
    first byte): a slow reader would see the EOF only after reading what is buffered."""
    try:
        return s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 8)[0] in (7, 8)
    except OSError:
        return True


def read_some(c, rate, t0):
    """read mode: takes what the rate allows by now (the status line and the last bytes
    kept); an EOF, a reset or the server's close (peer_closed) marks the connection closed.
    A reply read to its end is closed by the server too (Connection: close)."""
    try:
        if peer_closed(c[0]):
            c[1] = time.monotonic() - t0
            c[0].settimeout(5)  # what it had sent before closing: to tell a cut reply from a whole one
            while True:
                got = c[0].recv(65536)
                if not got:
                    return
                c[2] = (c[2] + got)[:200]
                c[3] += len(got)
                c[4] = (c[4] + got)[-16:]
        want = int(rate * (time.monotonic() - t0)) - c[3]
        while want > 0:
            got = c[0].recv(min(want, 65536))
            if not got:
                c[1] = time.monotonic() - t0
                return
            if len(c[2]) < 200:
                c[2] = (c[2] + got)[:200]
            c[3] += len(got)
            c[4] = (c[4] + got)[-16:]
            want -= len(got)
    except BlockingIOError:
        pass
    except OSError:
        c[1] = time.monotonic() - t0


if __name__ == "__main__":
    main()
