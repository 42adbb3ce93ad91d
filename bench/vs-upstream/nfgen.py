#!/usr/bin/env python3
# Prints the nf_tables generation id of this network namespace ("gen N") each time it changes,
# polling NFT_MSG_GETGEN over netlink every INTERVAL ms. A generation is one committed transaction,
# so this sees every commit of whichever process makes it, without subscribing to nf_tables events
# (a listener would make the kernel build a notification for every object of every transaction).
#   ip netns exec NS python3 nfgen.py [INTERVAL_MS]
import socket, struct, sys, time

NETLINK_NETFILTER = 12
NFNL_SUBSYS_NFTABLES = 10
NFT_MSG_GETGEN, NFT_MSG_NEWGEN = 16, 15
NLM_F_REQUEST = 1
NFTA_GEN_ID = 1

def main():
    interval = float(sys.argv[1]) / 1000 if len(sys.argv) > 1 else 0.002
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, NETLINK_NETFILTER)
    s.bind((0, 0))
    seq, last = 0, None
    while True:
        seq += 1
        # nlmsghdr (len, type, flags, seq, pid) + nfgenmsg (family, version, res_id)
        msg = struct.pack('=IHHII', 20, (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_GETGEN, NLM_F_REQUEST, seq, 0) + struct.pack('=BBH', 0, 0, 0)
        s.send(msg)
        data = s.recv(65536)
        gen = None
        off = 0
        while off + 16 <= len(data):
            ln, typ = struct.unpack_from('=IH', data, off)
            if ln < 16:
                break
            if typ == (NFNL_SUBSYS_NFTABLES << 8) | NFT_MSG_NEWGEN:
                a = off + 20
                while a + 4 <= off + ln:
                    alen, atype = struct.unpack_from('=HH', data, a)
                    if alen < 4:
                        break
                    if atype & 0x3fff == NFTA_GEN_ID:
                        gen = struct.unpack_from('>I', data, a + 4)[0]
                    a += (alen + 3) & ~3
            off += (ln + 3) & ~3
        if gen is not None and gen != last:
            last = gen
            sys.stdout.write('gen %d\n' % gen)
            sys.stdout.flush()
        time.sleep(interval)

try:
    main()
except (KeyboardInterrupt, BrokenPipeError):
    pass
