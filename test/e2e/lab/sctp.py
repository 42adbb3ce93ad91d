#!/usr/bin/env python3
# SCTP for the lab (Node has no SCTP sockets): one-to-one style sockets, as a TCP client would use them.
#   sctp.py serve NAME PORT            accepts on 0.0.0.0:PORT, answers "NAME PEER_IP" and closes; prints
#                                      "ready" once listening.
#   sctp.py probe HOST PORT COUNT MS   COUNT sequential connections, one JSON line each (lab.ts's
#                                      ProbeResult): {"ok": true, "name", "peer", "ms"} or {"ok": false, "err", "ms"}.
import json
import socket
import sys
import time


def serve(name, port):
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(('0.0.0.0', port))
    s.listen(16)
    print('ready', flush=True)
    while True:
        c, peer = s.accept()
        try:
            c.sendall(f'{name} {peer[0]}'.encode())
        finally:
            c.close()


def probe(host, port, count, ms):
    for _ in range(count):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_SCTP)
        s.settimeout(ms / 1000)
        t0 = time.monotonic()
        try:
            s.connect((host, port))
            name, peer = s.recv(256).decode().split(' ')
            out = {'ok': True, 'name': name, 'peer': peer}
        except socket.timeout:
            out = {'ok': False, 'err': 'timeout'}
        except OSError as e:
            out = {'ok': False, 'err': {111: 'ECONNREFUSED', 113: 'EHOSTUNREACH'}.get(e.errno, str(e))}
        finally:
            s.close()
        out['ms'] = round((time.monotonic() - t0) * 1000, 3)
        print(json.dumps(out), flush=True)


if __name__ == '__main__':
    if sys.argv[1] == 'serve':
        serve(sys.argv[2], int(sys.argv[3]))
    else:
        probe(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
