#!/usr/bin/env python3
"""held_requests.py PORT N: N requests held open at once through a proxy on 127.0.0.1:PORT
(docker/ci.sh's connection-limit check, issue 53). Each sends the head and the first bytes of
a 2 KB PUT body, waits 4 s (its connection to the upstream stays open meanwhile, as an
upload's or a long poll's does), sends the rest, and reads the status. Prints each status
with its count ("422:71": every one answered by firstpass: 422, a baseline of no session; a 502
is the proxy's: the upstream reset the connection)."""
import socket
import sys
import threading
import time

port, n = int(sys.argv[1]), int(sys.argv[2])
body = b'{"session_id": 999999999' + b" " * 1900 + b"}"
got = []


def one(i):
    try:
        s = socket.create_connection(("127.0.0.1", port), 30)
        s.settimeout(60)
        s.sendall(b"PUT /api/v1/baselines/conn-%d HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                  b"Content-Length: %d\r\nConnection: close\r\n\r\n" % (i, len(body)) + body[:100])
        time.sleep(4)
        s.sendall(body[100:])
        got.append(s.recv(64).split(b" ")[1].decode())
    except Exception as e:  # a reset or a timeout counts as its name
        got.append(type(e).__name__)


ts = [threading.Thread(target=one, args=(i,)) for i in range(n)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(" ".join("%s:%d" % (k, got.count(k)) for k in sorted(set(got))))
