// kpng socket-level load balancing (cgroup v2 sock_addr programs).
//
// connect4/6 and sendmsg4/6 rewrite a service address to one of its backends before the socket talks
// to the network, so the packets themselves need no NAT and no conntrack entry. recvmsg4/6 and
// getpeername4/6 translate the backend back to the service address, so an application (UDP above all)
// sees replies from the address it used.
//
// Maps (layouts mirrored by src/backend/ebpf/maps.ts):
//   kpng_svc   (addr, port, proto, family, slot) -> svc_value. Slot 0 holds the count of backends,
//              the affinity timeout, the service id and flags; slots 1..count hold backend ids.
//              Userspace writes backends first, then slots, then slot 0 (the count), and removes in
//              the opposite order, so a reader never follows a slot to nothing.
//   kpng_be    backend id -> (addr, port, family).
//   kpng_rev   (socket cookie, backend addr, port) -> service addr, port. Written here at connect /
//              sendmsg, read at recvmsg / getpeername. Keyed by socket so two services sharing a
//              backend never answer for each other.
//   kpng_aff   (netns cookie, service id) -> backend id + last use, for ClientIP affinity: the client
//              of a socket-level decision is its network namespace (a pod, or the node).
//   kpng_gone  (backend, service address, protocol) triples just removed from services, filled by
//              userspace before it runs the iter/tcp and iter/udp programs below, which destroy the
//              sockets this program connected to such a backend for such a service.
// One read-only constant, set by the loader before each load (never pinned, so a restart sets it anew):
//   kpng_host_netns  0, or the host network namespace's cookie: connect4/6 and sendmsg4/6 then leave
//                    sockets of every other network namespace (pods) to the nft part's DNAT.
#include <linux/bpf.h>
#include <linux/in.h>
#include <linux/in6.h>
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_endian.h>

#define ECONNREFUSED 111
#define AF_V4 4
#define AF_V6 6
#define SVC_FLAG_REFUSE 1
// Service-map entries (slot 0 + one per backend, per service address) and backends. Not preallocated,
// but the kernel allocates the hash buckets (16 bytes per entry, rounded to a power of two) up front:
// the loader sets both from --ebpf-map-entries before loading (default 262144 = 4 MiB of buckets each).
#define MAX_SVC_ENTRIES 262144
#define MAX_BACKENDS 262144

struct svc_key {
    __u8 addr[16];   // IPv4: first 4 bytes, rest zero
    __be16 port;
    __u8 proto;      // IPPROTO_TCP / IPPROTO_UDP / IPPROTO_SCTP
    __u8 family;     // AF_V4 / AF_V6
    __u16 slot;
    __u16 pad;
};

struct svc_value {
    __u32 backend_id;   // slots >= 1
    __u32 count;        // slot 0
    __u32 affinity_s;   // slot 0: ClientIP affinity timeout, seconds (0: none)
    __u32 svc_id;       // slot 0: affinity key
    __u32 flags;        // slot 0: SVC_FLAG_*
};

struct backend {
    __u8 addr[16];
    __be16 port;
    __u8 family;
    __u8 pad;
};

struct rev_key {
    __u64 cookie;
    __u8 addr[16];
    __be16 port;
    __u8 family;
    __u8 pad;
    __u32 pad2;
};

struct rev_value {
    __u8 addr[16];
    __be16 port;
    __u16 pad;
};

struct aff_key {
    __u64 netns;
    __u32 svc_id;
    __u32 pad;
};

struct aff_value {
    __u64 last_ns;
    __u32 backend_id;
    __u32 pad;
};

struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, MAX_SVC_ENTRIES); __uint(map_flags, BPF_F_NO_PREALLOC);
         __type(key, struct svc_key); __type(value, struct svc_value); } kpng_svc SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, MAX_BACKENDS); __uint(map_flags, BPF_F_NO_PREALLOC);
         __type(key, __u32); __type(value, struct backend); } kpng_be SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 65536);
         __type(key, struct rev_key); __type(value, struct rev_value); } kpng_rev SEC(".maps");
struct { __uint(type, BPF_MAP_TYPE_LRU_HASH); __uint(max_entries, 65536);
         __type(key, struct aff_key); __type(value, struct aff_value); } kpng_aff SEC(".maps");

struct gone_key {
    __u8 addr[16];      // the backend, laid out like struct backend
    __be16 port;
    __u8 family;
    __u8 pad;
    __u8 vip[16];       // the service address the socket asked for
    __be16 vport;
    __u8 proto;         // IPPROTO_TCP / IPPROTO_UDP: the iterator that may destroy the socket
    __u8 pad2;
};

struct { __uint(type, BPF_MAP_TYPE_HASH); __uint(max_entries, 65536); __uint(map_flags, BPF_F_NO_PREALLOC);
         __type(key, struct gone_key); __type(value, __u8); } kpng_gone SEC(".maps");

// The loader sets it before the load (a .rodata constant: the verifier drops the check when it is 0).
const volatile __u64 kpng_host_netns = 0;

// Whether connect4/6 and sendmsg4/6 leave this socket alone: a host-network-namespace-only socket LB
// and a socket of another network namespace (a pod's), which then reaches services through nft.
static __always_inline int bypassed(struct bpf_sock_addr *ctx) {
    return kpng_host_netns && bpf_get_netns_cookie(ctx) != kpng_host_netns;
}

enum verdict { PASS, REWRITTEN, REFUSE };

// Picks a backend for (key without slot); fills *out. PASS when the address is no service.
static __always_inline enum verdict pick(struct bpf_sock_addr *ctx, struct svc_key *key, struct backend *out) {
    key->slot = 0;
    struct svc_value *head = bpf_map_lookup_elem(&kpng_svc, key);
    if (!head) return PASS;
    __u32 count = head->count;   // read once: userspace may rewrite slot 0 meanwhile
    if ((head->flags & SVC_FLAG_REFUSE) || count == 0) return REFUSE;

    struct aff_key ak = {};
    __u64 now = 0;
    if (head->affinity_s) {
        ak.netns = bpf_get_netns_cookie(ctx);
        ak.svc_id = head->svc_id;
        now = bpf_ktime_get_ns();
        struct aff_value *av = bpf_map_lookup_elem(&kpng_aff, &ak);
        if (av && now - av->last_ns <= (__u64)head->affinity_s * 1000000000ULL) {
            // Backend ids are never reused, so an id still present is still one of this service's.
            struct backend *b = bpf_map_lookup_elem(&kpng_be, &av->backend_id);
            if (b) {
                av->last_ns = now;
                *out = *b;
                return REWRITTEN;
            }
        }
    }

    key->slot = (bpf_get_prandom_u32() % count) + 1;
    __u32 affinity_s = head->affinity_s;
    struct svc_value *slot = bpf_map_lookup_elem(&kpng_svc, key);
    if (!slot) return REFUSE;   // the count shrank under us: refuse once rather than leak to the VIP
    __u32 id = slot->backend_id;
    struct backend *b = bpf_map_lookup_elem(&kpng_be, &id);
    if (!b) return REFUSE;
    *out = *b;
    if (affinity_s) {
        struct aff_value nv = { .last_ns = now, .backend_id = id };
        bpf_map_update_elem(&kpng_aff, &ak, &nv, BPF_ANY);
    }
    return REWRITTEN;
}

static __always_inline void remember(struct bpf_sock_addr *ctx, const struct backend *b, const __u8 *vip, __be16 vport) {
    struct rev_key rk = {};
    rk.cookie = bpf_get_socket_cookie(ctx);
    __builtin_memcpy(rk.addr, b->addr, 16);
    rk.port = b->port;
    rk.family = b->family;
    struct rev_value rv = {};
    __builtin_memcpy(rv.addr, vip, 16);
    rv.port = vport;
    // Unconnected UDP passes here on every datagram: write only what changed.
    struct rev_value *cur = bpf_map_lookup_elem(&kpng_rev, &rk);
    if (cur && cur->port == rv.port) {
        __u32 a[4], b[4];   // compared as words: the bpf target has no memcmp
        __builtin_memcpy(a, cur->addr, 16);
        __builtin_memcpy(b, rv.addr, 16);
        if (a[0] == b[0] && a[1] == b[1] && a[2] == b[2] && a[3] == b[3]) return;
    }
    bpf_map_update_elem(&kpng_rev, &rk, &rv, BPF_ANY);
}

static __always_inline int refuse(void) {
    // connect() / sendmsg() fail at once with ECONNREFUSED instead of EPERM.
    bpf_set_retval(-ECONNREFUSED);
    return 0;
}

// Balances an IPv4 service address (ip, with ctx's port and protocol). Returns 1: not a service,
// leave it; 0: refused (the return value is set); 2: *b is the backend, remembered for the way back.
static __always_inline int balance4(struct bpf_sock_addr *ctx, __u32 ip, struct backend *b) {
    struct svc_key k = {};
    __builtin_memcpy(k.addr, &ip, 4);
    k.port = (__be16)ctx->user_port;
    k.proto = (__u8)ctx->protocol;
    k.family = AF_V4;
    enum verdict v = pick(ctx, &k, b);
    if (v == PASS) return 1;
    if (v == REFUSE || b->family != AF_V4) return refuse();
    remember(ctx, b, k.addr, k.port);
    return 2;
}

static __always_inline int fwd4(struct bpf_sock_addr *ctx) {
    if (bypassed(ctx)) return 1;
    struct backend b = {};
    int r = balance4(ctx, ctx->user_ip4, &b);
    if (r != 2) return r;
    __u32 nip;
    __builtin_memcpy(&nip, b.addr, 4);
    ctx->user_ip4 = nip;
    ctx->user_port = b.port;
    return 1;
}

// A dual-stack (AF_INET6) socket talking to an IPv4 address uses ::ffff:a.b.c.d: it is balanced as the
// IPv4 service and rewritten to the IPv4-mapped form of the IPv4 backend. What remember() keeps is in
// the IPv4 form, as for an IPv4 socket: the kernel sends an unconnected datagram to a mapped address
// through the IPv4 path (udp_sendmsg: sendmsg4, fwd4), so rev6 and the UDP iterator look a mapped
// address up in its IPv4 form.
static __always_inline int is_v4mapped(const __u32 *w) {
    return w[0] == 0 && w[1] == 0 && w[2] == bpf_htonl(0x0000ffff);
}

static __always_inline int fwd6mapped(struct bpf_sock_addr *ctx, const __u32 *w) {
    struct backend b = {};
    int r = balance4(ctx, w[3], &b);
    if (r != 2) return r;
    __u32 mw[4] = { 0, 0, bpf_htonl(0x0000ffff), 0 };
    __builtin_memcpy(&mw[3], b.addr, 4);
    ctx->user_ip6[0] = mw[0]; ctx->user_ip6[1] = mw[1]; ctx->user_ip6[2] = mw[2]; ctx->user_ip6[3] = mw[3];
    ctx->user_port = b.port;
    return 1;
}

static __always_inline int fwd6(struct bpf_sock_addr *ctx) {
    if (bypassed(ctx)) return 1;
    struct svc_key k = {};
    __u32 w[4];
    w[0] = ctx->user_ip6[0]; w[1] = ctx->user_ip6[1]; w[2] = ctx->user_ip6[2]; w[3] = ctx->user_ip6[3];
    if (is_v4mapped(w)) return fwd6mapped(ctx, w);
    __builtin_memcpy(k.addr, w, 16);
    k.port = (__be16)ctx->user_port;
    k.proto = (__u8)ctx->protocol;
    k.family = AF_V6;
    struct backend b = {};
    enum verdict v = pick(ctx, &k, &b);
    if (v == PASS) return 1;
    if (v == REFUSE || b.family != AF_V6) return refuse();
    remember(ctx, &b, k.addr, k.port);
    __builtin_memcpy(w, b.addr, 16);
    ctx->user_ip6[0] = w[0]; ctx->user_ip6[1] = w[1]; ctx->user_ip6[2] = w[2]; ctx->user_ip6[3] = w[3];
    ctx->user_port = b.port;
    return 1;
}

// recvmsg and getpeername translate only sockets connect/sendmsg balanced (their cookie is in kpng_rev),
// so they need no bypass check: one balanced before a restart that turned the bypass on keeps its
// translation.
static __always_inline int rev4(struct bpf_sock_addr *ctx) {
    struct rev_key rk = {};
    rk.cookie = bpf_get_socket_cookie(ctx);
    __u32 ip = ctx->user_ip4;
    __builtin_memcpy(rk.addr, &ip, 4);
    rk.port = (__be16)ctx->user_port;
    rk.family = AF_V4;
    struct rev_value *rv = bpf_map_lookup_elem(&kpng_rev, &rk);
    if (!rv) return 1;
    __builtin_memcpy(&ip, rv->addr, 4);
    ctx->user_ip4 = ip;
    ctx->user_port = rv->port;
    return 1;
}

static __always_inline int rev6(struct bpf_sock_addr *ctx) {
    struct rev_key rk = {};
    rk.cookie = bpf_get_socket_cookie(ctx);
    __u32 w[4];
    w[0] = ctx->user_ip6[0]; w[1] = ctx->user_ip6[1]; w[2] = ctx->user_ip6[2]; w[3] = ctx->user_ip6[3];
    rk.port = (__be16)ctx->user_port;
    if (is_v4mapped(w)) {
        // Kept in IPv4 form (see fwd6mapped); answered in the mapped form.
        __u32 ip = w[3];
        __builtin_memcpy(rk.addr, &ip, 4);
        rk.family = AF_V4;
        struct rev_value *rv4 = bpf_map_lookup_elem(&kpng_rev, &rk);
        if (!rv4) return 1;
        __builtin_memcpy(&ip, rv4->addr, 4);
        ctx->user_ip6[3] = ip;
        ctx->user_port = rv4->port;
        return 1;
    }
    __builtin_memcpy(rk.addr, w, 16);
    rk.family = AF_V6;
    struct rev_value *rv = bpf_map_lookup_elem(&kpng_rev, &rk);
    if (!rv) return 1;
    __builtin_memcpy(w, rv->addr, 16);
    ctx->user_ip6[0] = w[0]; ctx->user_ip6[1] = w[1]; ctx->user_ip6[2] = w[2]; ctx->user_ip6[3] = w[3];
    ctx->user_port = rv->port;
    return 1;
}

SEC("cgroup/connect4")     int kpng_connect4(struct bpf_sock_addr *ctx)     { return fwd4(ctx); }
SEC("cgroup/sendmsg4")     int kpng_sendmsg4(struct bpf_sock_addr *ctx)     { return fwd4(ctx); }
SEC("cgroup/recvmsg4")     int kpng_recvmsg4(struct bpf_sock_addr *ctx)     { return rev4(ctx); }
SEC("cgroup/getpeername4") int kpng_getpeername4(struct bpf_sock_addr *ctx) { return rev4(ctx); }
SEC("cgroup/connect6")     int kpng_connect6(struct bpf_sock_addr *ctx)     { return fwd6(ctx); }
SEC("cgroup/sendmsg6")     int kpng_sendmsg6(struct bpf_sock_addr *ctx)     { return fwd6(ctx); }
SEC("cgroup/recvmsg6")     int kpng_recvmsg6(struct bpf_sock_addr *ctx)     { return rev6(ctx); }
SEC("cgroup/getpeername6") int kpng_getpeername6(struct bpf_sock_addr *ctx) { return rev6(ctx); }

// Destroying sockets connected to removed backends (kernel >= 6.5), so that a client sees an error and
// reconnects through connect4/6 to a live backend. Only sockets this program balanced (their cookie and
// peer are in kpng_rev) for a (backend, service, protocol) triple in kpng_gone: a backend that still
// serves another service keeps that service's sockets. The kernel types are declared with the fields
// used only; CO-RE relocates them against the running kernel's BTF. The loader leaves both iterators
// out on a kernel without bpf_sock_destroy (hence __weak: the object still loads there).
struct sock_common {
    __be32 skc_daddr;
    __be16 skc_dport;
    unsigned short skc_family;
    volatile unsigned char skc_state;
    struct in6_addr skc_v6_daddr;
} __attribute__((preserve_access_index));
struct sock { struct sock_common __sk_common; } __attribute__((preserve_access_index));
struct udp_sock;
struct bpf_iter_meta { void *seq; } __attribute__((preserve_access_index));
struct bpf_iter__udp { struct bpf_iter_meta *meta; struct udp_sock *udp_sk; } __attribute__((preserve_access_index));
struct bpf_iter__tcp { struct bpf_iter_meta *meta; struct sock_common *sk_common; } __attribute__((preserve_access_index));

extern int bpf_sock_destroy(struct sock_common *sk) __ksym __weak;

// A client socket past connect() and not yet closed: ESTABLISHED, SYN_SENT, FIN_WAIT1/2, CLOSE_WAIT,
// LAST_ACK (full sockets; the iterator also shows listeners, request and time-wait sockets).
#define TCP_CLIENT_STATES ((1 << 1) | (1 << 2) | (1 << 4) | (1 << 5) | (1 << 8) | (1 << 9))

// Destroys sk when kpng_gone names its peer for the service it was balanced to; writes one byte to
// the iterator's output per socket destroyed (userspace counts them).
static __always_inline int destroy_gone(struct bpf_iter_meta *meta, struct sock_common *sk, __u8 proto) {
    struct rev_key rk = {};
    struct gone_key gk = {};
    unsigned short fam = sk->skc_family;
    if (fam == 2) {            // AF_INET
        __u32 ip = sk->skc_daddr;
        __builtin_memcpy(gk.addr, &ip, 4);
        gk.family = AF_V4;
    } else if (fam == 10) {    // AF_INET6
        __u32 w[4];
        w[0] = sk->skc_v6_daddr.in6_u.u6_addr32[0]; w[1] = sk->skc_v6_daddr.in6_u.u6_addr32[1];
        w[2] = sk->skc_v6_daddr.in6_u.u6_addr32[2]; w[3] = sk->skc_v6_daddr.in6_u.u6_addr32[3];
        if (is_v4mapped(w)) {
            // A dual-stack socket balanced to an IPv4 backend: kept in IPv4 form (fwd6mapped).
            __u32 ip = w[3];
            __builtin_memcpy(gk.addr, &ip, 4);
            gk.family = AF_V4;
        } else {
            __builtin_memcpy(gk.addr, w, 16);
            gk.family = AF_V6;
        }
    } else {
        return 0;
    }
    gk.port = sk->skc_dport;
    if (!gk.port) return 0;
    rk.cookie = bpf_get_socket_cookie(sk);
    __builtin_memcpy(rk.addr, gk.addr, 16);
    rk.port = gk.port;
    rk.family = gk.family;
    struct rev_value *rv = bpf_map_lookup_elem(&kpng_rev, &rk);
    if (!rv) return 0;          // not a socket this program balanced
    __builtin_memcpy(gk.vip, rv->addr, 16);
    gk.vport = rv->port;
    gk.proto = proto;

    if (!bpf_map_lookup_elem(&kpng_gone, &gk)) return 0;
    if (bpf_sock_destroy(sk) == 0) {
        char one = 1;
        bpf_seq_write(meta->seq, &one, 1);
    }
    return 0;
}

SEC("iter/udp")
int kpng_destroy_udp(struct bpf_iter__udp *ctx) {
    struct sock *sk = (struct sock *)ctx->udp_sk;
    if (!sk) return 0;
    return destroy_gone(ctx->meta, &sk->__sk_common, 17);
}

SEC("iter/tcp")
int kpng_destroy_tcp(struct bpf_iter__tcp *ctx) {
    struct sock_common *sk = ctx->sk_common;
    if (!sk) return 0;
    unsigned char state = sk->skc_state;
    if (state > 15 || !((1 << state) & TCP_CLIENT_STATES)) return 0;
    return destroy_gone(ctx->meta, sk, 6);
}

char LICENSE[] SEC("license") = "Dual BSD/GPL";
