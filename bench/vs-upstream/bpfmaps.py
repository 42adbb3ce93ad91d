#!/usr/bin/env python3
# Reads kpng's pinned socket-LB maps through the bpf(2) syscall (ctypes; no bpftool), so the benchmark
# sees the eBPF backend's work in the kernel the way nfgen.py sees nftables commits.
#   python3 bpfmaps.py wait-vips PINDIR       reads addresses (one line, space-separated) on stdin, waits
#                                             for the service map's first entry (one cheap syscall every
#                                             2 ms), then scans the map in batches (BPF_MAP_LOOKUP_BATCH)
#                                             until each has an entry (pausing as long as a scan), then
#                                             prints "all SCAN_MS" (the last scan's time);
#                                             "have N" every 10 s meanwhile
#   python3 bpfmaps.py backends PINDIR [MS]   "be ID ADDR" for every backend added from now on, polling
#                                             the next backend id every MS ms (kpng never reuses ids and
#                                             writes a new backend before the slots that point to it)
#   python3 bpfmaps.py dump PINDIR            one JSON line per service address of the service map (cluster,
#                                             external and LB IPs, node ports on node addresses alike: the
#                                             map does not say which), read in batches:
#                                             {"addr", "port", "proto": "TCP"|"UDP"|"SCTP"|number, "count",
#                                              "affinity": seconds, "refuse": bool, "backends": ["ip:port", ...]
#                                              in slot order, "missing": [slots 1..count without an entry or
#                                              whose backend id is not in the backend map]}
# Layouts: native/bpf/sock_lb.bpf.c (struct svc_key, struct backend).
import ctypes, ipaddress, os, struct, sys, time

SYS_BPF = 321  # x86_64
BPF_MAP_LOOKUP_ELEM, BPF_MAP_GET_NEXT_KEY, BPF_OBJ_GET, BPF_MAP_LOOKUP_BATCH = 1, 4, 7, 24
ENOENT = 2
SVC_KEY, SVC_VALUE, BE_VALUE = 24, 20, 20
AF_V4, AF_V6 = 4, 6

libc = ctypes.CDLL(None, use_errno=True)
libc.syscall.restype = ctypes.c_long


def bpf(cmd, attr):
    r = libc.syscall(SYS_BPF, cmd, ctypes.byref(attr), ctypes.sizeof(attr))
    return r, ctypes.get_errno()


def obj_get(path):
    attr = (ctypes.c_uint8 * 128)()
    p = ctypes.create_string_buffer(path.encode())
    struct.pack_into('=Q', attr, 0, ctypes.addressof(p))
    fd, err = bpf(BPF_OBJ_GET, attr)
    if fd < 0:
        raise OSError(err, f'{os.strerror(err)}: {path}')
    return fd


def lookup(fd, key, vsize):
    kb = ctypes.create_string_buffer(key, len(key))
    vb = ctypes.create_string_buffer(vsize)
    attr = (ctypes.c_uint8 * 128)()
    struct.pack_into('=IIQQQ', attr, 0, fd, 0, ctypes.addressof(kb), ctypes.addressof(vb), 0)
    r, _ = bpf(BPF_MAP_LOOKUP_ELEM, attr)
    return vb.raw if r == 0 else None


def keys(fd, ksize):
    cur = None
    nb = ctypes.create_string_buffer(ksize)
    while True:
        attr = (ctypes.c_uint8 * 128)()
        kb = ctypes.create_string_buffer(cur, ksize) if cur is not None else None
        struct.pack_into('=IIQQ', attr, 0, fd, 0, ctypes.addressof(kb) if kb is not None else 0, ctypes.addressof(nb))
        r, _ = bpf(BPF_MAP_GET_NEXT_KEY, attr)
        if r != 0:
            return
        cur = nb.raw
        yield cur


def batches(fd, ksize, vsize, chunk=16384):
    """The map's keys, a chunk of them (bytes) per BPF_MAP_LOOKUP_BATCH call: a few syscalls for the
    whole map instead of two per key."""
    for ks, _ in entry_batches(fd, ksize, vsize, chunk):
        yield ks


def entry_batches(fd, ksize, vsize, chunk=16384):
    """The map's keys and values, a chunk of each (bytes) per BPF_MAP_LOOKUP_BATCH call."""
    kb = ctypes.create_string_buffer(ksize * chunk)
    vb = ctypes.create_string_buffer(vsize * chunk)
    token_in, token_out = ctypes.create_string_buffer(16), ctypes.create_string_buffer(16)
    first = True
    while True:
        attr = (ctypes.c_uint8 * 128)()
        struct.pack_into('=QQQQIIQQ', attr, 0, 0 if first else ctypes.addressof(token_in), ctypes.addressof(token_out),
                         ctypes.addressof(kb), ctypes.addressof(vb), chunk, fd, 0, 0)
        r, err = bpf(BPF_MAP_LOOKUP_BATCH, attr)
        n = struct.unpack_from('=I', attr, 32)[0]
        if r != 0 and err != ENOENT:
            raise OSError(err, os.strerror(err))
        yield kb.raw[:n * ksize], vb.raw[:n * vsize]
        if r != 0:
            return
        ctypes.memmove(token_in, token_out, 16)
        first = False


def wait_vips(pin):
    want = set()
    for a in sys.stdin.readline().split():
        ip = ipaddress.ip_address(a)
        want.add(ip.packed.ljust(16, b'\0') + bytes([AF_V4 if ip.version == 4 else AF_V6]))
    path = os.path.join(pin, 'kpng_svc')
    while not os.path.exists(path):
        time.sleep(0.002)
    # Until the first entry is written, one BPF_MAP_GET_NEXT_KEY every 2 ms: no scan takes CPU from
    # the start being measured. kpng writes a full sync's entries in a few batched updates right after
    # each other, so the scans below begin when it is writing them.
    fd = obj_get(path)
    try:
        while next(keys(fd, SVC_KEY), None) is None:
            time.sleep(0.002)
    finally:
        os.close(fd)
    last = time.monotonic()
    while True:
        t0 = time.monotonic()
        fd = obj_get(path)
        have = set()
        try:
            for chunk in batches(fd, SVC_KEY, SVC_VALUE):
                for a, family, slot in struct.iter_unpack('=16s3xBH2x', chunk):
                    if slot == 0:
                        have.add(a + bytes([family]))
        finally:
            os.close(fd)
        t1 = time.monotonic()
        if want <= have:
            print(f'all {(t1 - t0) * 1000:.1f}', flush=True)
            return
        if t1 - last > 10:
            last = t1
            print(f'have {len(want & have)}', flush=True)
        # A pause as long as the scan (at least 5 ms): back to back, the scans took a whole core from
        # the proxy being measured (a scan grows with the map). The answer is then late by at
        # most two scans and a pause.
        time.sleep(max(0.005, t1 - t0))


def addr(raw, family):
    return str(ipaddress.IPv4Address(raw[:4])) if family == AF_V4 else str(ipaddress.IPv6Address(raw[:16]))


def backends(pin, interval):
    fd = obj_get(os.path.join(pin, 'kpng_be'))
    nxt = 1 + max((struct.unpack('=I', k)[0] for k in keys(fd, 4)), default=0)
    print('ready', flush=True)
    while True:
        v = lookup(fd, struct.pack('=I', nxt), BE_VALUE)
        if v is None:
            # An id allocated and never written (a plan replaced before it was applied) would stop
            # this reader: look a few ids ahead before waiting.
            ahead = next((i for i in range(nxt + 1, nxt + 9) if lookup(fd, struct.pack('=I', i), BE_VALUE)), None)
            if ahead is None:
                time.sleep(interval)
                continue
            nxt = ahead
            v = lookup(fd, struct.pack('=I', nxt), BE_VALUE)
        print(f'be {nxt} {addr(v, v[18])}', flush=True)
        nxt += 1


PROTO_NAMES = {6: 'TCP', 17: 'UDP', 132: 'SCTP'}
SVC_FLAG_REFUSE = 1


def entries(path, ksize, vsize):
    """Every (key, value) of a pinned map, as bytes."""
    fd = obj_get(path)
    try:
        out = []
        for ks, vs in entry_batches(fd, ksize, vsize):
            out.extend((ks[i:i + ksize], vs[i // ksize * vsize:(i // ksize + 1) * vsize]) for i in range(0, len(ks), ksize))
        return out
    finally:
        os.close(fd)


def hostport(raw, family, port):
    a = addr(raw, family)
    return f'[{a}]:{port}' if family == AF_V6 else f'{a}:{port}'


def dump(pin):
    """Every service address of the service map with its backends in slot order (see the top)."""
    import json
    be = {}
    for k, v in entries(os.path.join(pin, 'kpng_be'), 4, BE_VALUE):
        raw, port, family = struct.unpack_from('=16s2sB', v)
        be[struct.unpack('=I', k)[0]] = hostport(raw, family, int.from_bytes(port, 'big'))
    heads, slots = {}, {}
    for k, v in entries(os.path.join(pin, 'kpng_svc'), SVC_KEY, SVC_VALUE):
        # struct svc_key: addr[16], port (network order), proto, family, slot, pad
        raw, port, proto, family, slot = struct.unpack_from('=16s2sBBH', k)
        svc = (raw, int.from_bytes(port, 'big'), proto, family)
        if slot == 0:
            heads[svc] = struct.unpack('=IIIII', v)  # backend_id, count, affinity_s, svc_id, flags
        else:
            slots[(svc, slot)] = struct.unpack_from('=I', v)[0]
    for svc, (_, count, affinity, _, flags) in heads.items():
        raw, port, proto, family = svc
        backends, missing = [], []
        for i in range(1, count + 1):
            b = be.get(slots.get((svc, i)))
            if b is None:
                missing.append(i)
            else:
                backends.append(b)
        print(json.dumps({'addr': addr(raw, family), 'port': port, 'proto': PROTO_NAMES.get(proto, proto), 'count': count,
                          'affinity': affinity, 'refuse': bool(flags & SVC_FLAG_REFUSE), 'backends': backends, 'missing': missing}))
    sys.stdout.flush()


if __name__ == '__main__':
    mode, pin = sys.argv[1], sys.argv[2]
    if mode == 'wait-vips':
        wait_vips(pin)
    elif mode == 'dump':
        dump(pin)
    else:
        backends(pin, float(sys.argv[3]) / 1000 if len(sys.argv) > 3 else 0.002)
