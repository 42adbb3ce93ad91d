/* Drives native/mnl/mnl.c (the libmnl API of the portable prebuilds) the way libnftnl and the addon do,
 * linked with the system's static libnftnl.a, against the real kernel: a batch that makes a table, a
 * base chain, a set with elements and a rule; dumps parsed back through libnftnl (attribute parsing and
 * validation); a refused batch; a batch buffer that overflows. Run inside a fresh network namespace by
 * test/e2e/mnl-shim.test.ts, which compares what it prints with `nft list`. */
#include <arpa/inet.h>
#include <errno.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#define TABLE "mnlt"
static char buf[1 << 16];
static struct mnl_socket *nl;
static unsigned int portid;

static void die(const char *what) {
  fprintf(stderr, "%s: %s\n", what, strerror(errno));
  exit(1);
}

/* Reads replies until the kernel has answered `seq` (ack, error or dump done). */
static int wait_for(unsigned int seq, mnl_cb_t cb, void *data) {
  char rbuf[1 << 16];
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(nl, rbuf, sizeof(rbuf));
    if (n < 0) die("recvfrom");
    int ret = mnl_cb_run(rbuf, (size_t)n, seq, portid, cb, data);
    if (ret <= MNL_CB_STOP) return ret;
  }
}

static void add_expr(struct nftnl_rule *r, const char *name, void (*set)(struct nftnl_expr *)) {
  struct nftnl_expr *e = nftnl_expr_alloc(name);
  if (set) set(e);
  nftnl_rule_add_expr(r, e);
}
static void set_payload(struct nftnl_expr *e) {
  nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_BASE, NFT_PAYLOAD_NETWORK_HEADER);
  nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_DREG, NFT_REG_1);
  nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_OFFSET, 16);
  nftnl_expr_set_u32(e, NFTNL_EXPR_PAYLOAD_LEN, 4);
}
static void set_lookup(struct nftnl_expr *e) {
  nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SREG, NFT_REG_1);
  nftnl_expr_set_str(e, NFTNL_EXPR_LOOKUP_SET, "addrs");
  nftnl_expr_set_u32(e, NFTNL_EXPR_LOOKUP_SET_ID, 1);
}
static void set_accept(struct nftnl_expr *e) {
  nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_DREG, NFT_REG_VERDICT);
  nftnl_expr_set_u32(e, NFTNL_EXPR_IMM_VERDICT, NF_ACCEPT);
}

/* Starts an IPv4 nf_tables message asking for an ack at the batch's current position. */
static struct nlmsghdr *begin(struct mnl_nlmsg_batch *b, uint16_t type, uint16_t flags, unsigned int *seq) {
  return nftnl_nlmsg_build_hdr(mnl_nlmsg_batch_current(b), type, NFPROTO_IPV4, flags | NLM_F_ACK, (*seq)++);
}

/* One transaction; returns 0 or the errno of the first refused message. */
static int send_batch(unsigned int *seq, int with_bad_rule) {
  struct mnl_nlmsg_batch *b = mnl_nlmsg_batch_start(buf, sizeof(buf));
  struct nlmsghdr *nlh;
  nftnl_batch_begin(mnl_nlmsg_batch_current(b), (*seq)++);
  mnl_nlmsg_batch_next(b);

  struct nftnl_table *t = nftnl_table_alloc();
  nftnl_table_set_str(t, NFTNL_TABLE_NAME, TABLE);
  nlh = begin(b, NFT_MSG_NEWTABLE, NLM_F_CREATE, seq);
  nftnl_table_nlmsg_build_payload(nlh, t);
  mnl_nlmsg_batch_next(b);
  nftnl_table_free(t);

  struct nftnl_chain *c = nftnl_chain_alloc();
  nftnl_chain_set_str(c, NFTNL_CHAIN_TABLE, TABLE);
  nftnl_chain_set_str(c, NFTNL_CHAIN_NAME, "out");
  nftnl_chain_set_str(c, NFTNL_CHAIN_TYPE, "filter");
  nftnl_chain_set_u32(c, NFTNL_CHAIN_HOOKNUM, NF_INET_LOCAL_OUT);
  nftnl_chain_set_s32(c, NFTNL_CHAIN_PRIO, -7);
  nftnl_chain_set_u32(c, NFTNL_CHAIN_POLICY, NF_ACCEPT);
  nlh = begin(b, NFT_MSG_NEWCHAIN, NLM_F_CREATE, seq);
  nftnl_chain_nlmsg_build_payload(nlh, c);
  mnl_nlmsg_batch_next(b);
  nftnl_chain_free(c);

  struct nftnl_set *s = nftnl_set_alloc();
  nftnl_set_set_str(s, NFTNL_SET_TABLE, TABLE);
  nftnl_set_set_str(s, NFTNL_SET_NAME, "addrs");
  nftnl_set_set_u32(s, NFTNL_SET_FAMILY, NFPROTO_IPV4);
  nftnl_set_set_u32(s, NFTNL_SET_KEY_TYPE, 7); /* ipv4_addr */
  nftnl_set_set_u32(s, NFTNL_SET_KEY_LEN, 4);
  nftnl_set_set_u32(s, NFTNL_SET_ID, 1);
  nftnl_set_set_u64(s, NFTNL_SET_TIMEOUT, 3600000); /* u64 attributes both ways */
  nftnl_set_set_u32(s, NFTNL_SET_FLAGS, NFT_SET_TIMEOUT);
  const char *addrs[] = {"10.0.0.1", "10.0.0.2", "192.168.7.9"};
  for (size_t i = 0; i < 3; i++) {
    struct nftnl_set_elem *e = nftnl_set_elem_alloc();
    struct in_addr a;
    inet_pton(AF_INET, addrs[i], &a);
    nftnl_set_elem_set(e, NFTNL_SET_ELEM_KEY, &a, sizeof(a));
    nftnl_set_elem_add(s, e);
  }
  nlh = begin(b, NFT_MSG_NEWSET, NLM_F_CREATE, seq);
  nftnl_set_nlmsg_build_payload(nlh, s);
  mnl_nlmsg_batch_next(b);
  nlh = begin(b, NFT_MSG_NEWSETELEM, NLM_F_CREATE, seq);
  nftnl_set_elems_nlmsg_build_payload(nlh, s);
  mnl_nlmsg_batch_next(b);
  nftnl_set_free(s);

  struct nftnl_rule *r = nftnl_rule_alloc();
  nftnl_rule_set_str(r, NFTNL_RULE_TABLE, TABLE);
  nftnl_rule_set_str(r, NFTNL_RULE_CHAIN, with_bad_rule ? "missing" : "out");
  add_expr(r, "payload", set_payload);
  add_expr(r, "lookup", set_lookup);
  add_expr(r, "counter", NULL);
  add_expr(r, "immediate", set_accept);
  nlh = begin(b, NFT_MSG_NEWRULE, NLM_F_CREATE | NLM_F_APPEND, seq);
  nftnl_rule_nlmsg_build_payload(nlh, r);
  mnl_nlmsg_batch_next(b);
  nftnl_rule_free(r);

  nftnl_batch_end(mnl_nlmsg_batch_current(b), (*seq)++);
  mnl_nlmsg_batch_next(b);
  if (mnl_socket_sendto(nl, mnl_nlmsg_batch_head(b), mnl_nlmsg_batch_size(b)) < 0) die("sendto");
  mnl_nlmsg_batch_stop(b);
  /* nfnetlink handles the batch inside sendmsg: its acks and errors are queued by now, and the
     socket's receive timeout ends the reading. */
  int err = 0;
  char rbuf[1 << 16];
  for (;;) {
    ssize_t n = mnl_socket_recvfrom(nl, rbuf, sizeof(rbuf));
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n < 0) die("recvfrom");
    if (mnl_cb_run(rbuf, (size_t)n, 0, portid, NULL, NULL) < 0 && err == 0) err = errno;
  }
  return err;
}

static int chain_cb(const struct nlmsghdr *nlh, void *data) {
  (void)data;
  struct nftnl_chain *c = nftnl_chain_alloc();
  if (nftnl_chain_nlmsg_parse(nlh, c) < 0) die("chain parse");
  printf("chain %s %s hook=%u prio=%d policy=%u\n", nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE),
         nftnl_chain_get_str(c, NFTNL_CHAIN_NAME), nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM),
         nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO), nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY));
  nftnl_chain_free(c);
  return MNL_CB_OK;
}

static int expr_cb(struct nftnl_expr *e, void *data) {
  printf("%s%s", *(int *)data ? "," : "", nftnl_expr_get_str(e, NFTNL_EXPR_NAME));
  *(int *)data = 1;
  return 0;
}

static int rule_cb(const struct nlmsghdr *nlh, void *data) {
  (void)data;
  struct nftnl_rule *r = nftnl_rule_alloc();
  if (nftnl_rule_nlmsg_parse(nlh, r) < 0) die("rule parse");
  int first = 0;
  printf("rule %s %s exprs=", nftnl_rule_get_str(r, NFTNL_RULE_TABLE), nftnl_rule_get_str(r, NFTNL_RULE_CHAIN));
  nftnl_expr_foreach(r, expr_cb, &first);
  printf(" handle>0=%d\n", nftnl_rule_get_u64(r, NFTNL_RULE_HANDLE) > 0);
  nftnl_rule_free(r);
  return MNL_CB_OK;
}

static int elem_cb(struct nftnl_set_elem *e, void *data) {
  (void)data;
  uint32_t len = 0;
  const void *key = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len);
  char text[INET_ADDRSTRLEN] = "?";
  if (len == 4) inet_ntop(AF_INET, key, text, sizeof(text));
  printf("elem %s\n", text);
  return 0;
}

static int set_cb(const struct nlmsghdr *nlh, void *data) {
  struct nftnl_set *s = data;
  if (nftnl_set_elems_nlmsg_parse(nlh, s) < 0) die("set elements parse");
  return MNL_CB_OK;
}

static void dump(uint16_t type, mnl_cb_t cb, void *data, unsigned int *seq, struct nftnl_set *set) {
  struct nlmsghdr *nlh = nftnl_nlmsg_build_hdr(buf, type, NFPROTO_IPV4, NLM_F_DUMP, *seq);
  if (set) nftnl_set_elems_nlmsg_build_payload(nlh, set);
  if (mnl_socket_sendto(nl, nlh, nlh->nlmsg_len) < 0) die("sendto");
  if (wait_for((*seq)++, cb, data) < 0) die("dump");
}

/* A 40-byte batch buffer takes one 36-byte message; the second overflows and becomes the first. */
static void batch_overflow(void) {
  char small[64];
  struct mnl_nlmsg_batch *b = mnl_nlmsg_batch_start(small, 40);
  for (unsigned int i = 1; i <= 2; i++) {
    struct nlmsghdr *nlh = mnl_nlmsg_put_header(mnl_nlmsg_batch_current(b));
    nlh->nlmsg_seq = i;
    mnl_attr_put_u64(nlh, 1, 0x0102030405060708ULL);
    mnl_attr_put_u32(nlh, 2, 9);
    int fits = mnl_nlmsg_batch_next(b);
    printf("batch msg %u len=%u fits=%d size=%zu\n", i, nlh->nlmsg_len, fits, mnl_nlmsg_batch_size(b));
  }
  mnl_nlmsg_batch_reset(b);
  const struct nlmsghdr *head = mnl_nlmsg_batch_head(b);
  const struct nlattr *a = mnl_nlmsg_get_payload(head);
  printf("batch reset size=%zu first-seq=%u u64=%llx valid=%d\n", mnl_nlmsg_batch_size(b), head->nlmsg_seq,
         (unsigned long long)mnl_attr_get_u64(a), mnl_attr_validate(a, MNL_TYPE_U64));
  errno = 0;
  int ret = mnl_attr_validate(a, MNL_TYPE_U8);
  printf("validate u64-as-u8=%d erange=%d\n", ret, errno == ERANGE);
  mnl_nlmsg_batch_stop(b);
}

int main(void) {
  unsigned int seq = 1;
  nl = mnl_socket_open(NETLINK_NETFILTER);
  if (nl == NULL) die("socket");
  if (mnl_socket_bind(nl, 0, MNL_SOCKET_AUTOPID) < 0) die("bind");
  portid = mnl_socket_get_portid(nl);
  struct timeval tv = {.tv_sec = 0, .tv_usec = 300000};
  setsockopt(mnl_socket_get_fd(nl), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  printf("portid>0=%d\n", portid > 0);

  int err = send_batch(&seq, 1);
  printf("bad batch: %s\n", err ? strerror(err) : "accepted");
  err = send_batch(&seq, 0);
  printf("good batch: %s\n", err ? strerror(err) : "accepted");

  dump(NFT_MSG_GETCHAIN, chain_cb, NULL, &seq, NULL);
  dump(NFT_MSG_GETRULE, rule_cb, NULL, &seq, NULL);
  struct nftnl_set *s = nftnl_set_alloc();
  nftnl_set_set_str(s, NFTNL_SET_TABLE, TABLE);
  nftnl_set_set_str(s, NFTNL_SET_NAME, "addrs");
  dump(NFT_MSG_GETSETELEM, set_cb, s, &seq, s);
  nftnl_set_elem_foreach(s, elem_cb, NULL);
  nftnl_set_free(s);

  batch_overflow();
  mnl_socket_close(nl);
  return 0;
}
