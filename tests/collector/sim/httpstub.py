#!/usr/bin/env python3
"""httpstub.py MODE [DIR] -- a stand-in firstpass server for the simulation.

    httpstub.py 201 DIR     stores each POST body as DIR/<n>.json.gz, answers 201 {"id":n,...}
    httpstub.py blackhole   accepts connections and reads, never answers

Prints its port on the first line of stdout, then serves until killed.
"""
import os
import socket
import sys
import threading


def serve_201(conn, outdir, counter):
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return
        data += chunk
    head, body = data.split(b"\r\n\r\n", 1)
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(body) < length:
        chunk = conn.recv(65536)
        if not chunk:
            return
        body += chunk
    with counter[1]:
        counter[0] += 1
        n = counter[0]
    with open(os.path.join(outdir, "%d.json.gz" % n), "wb") as f:
        f.write(body)
    reply = b'{"id":%d,"url":"/api/v1/sessions/%d"}' % (n, n)
    conn.sendall(b"HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nContent-Length: %d\r\n"
                 b"Connection: close\r\n\r\n%s" % (len(reply), reply))
    conn.close()


def blackhole(conn):
    try:
        while conn.recv(65536):
            pass
    except OSError:
        pass


def main():
    mode = sys.argv[1]
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(16)
    print(s.getsockname()[1], flush=True)
    counter = [0, threading.Lock()]
    while True:
        c, _ = s.accept()
        if mode == "201":
            t = threading.Thread(target=serve_201, args=(c, sys.argv[2], counter), daemon=True)
        else:
            t = threading.Thread(target=blackhole, args=(c,), daemon=True)
        t.start()


if __name__ == "__main__":
    main()
