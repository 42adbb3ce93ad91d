/* The part of libmnl's API that libnftnl and the addon call, written for kpng's portable prebuilds.
 *
 * A prebuild links libnftnl statically (Debian's libnftnl.a) and needs libmnl's functions beside it. This
 * file provides them against libmnl's public header (libmnl/libmnl.h, from the libmnl-dev package), so a
 * prebuild needs no libmnl source; hack/prebuild/deps.sh compiles it into the prebuild's libmnl.a. The
 * host build links the system's libmnl.so and does not use this file.
 *
 * Semantics follow the API's documentation: attributes and messages are 4-byte aligned, padding is
 * zeroed, validation sets errno and returns -1, callbacks return MNL_CB_ERROR/STOP/OK. */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <libmnl/libmnl.h>

/* ---- messages ---- */

struct nlmsghdr *mnl_nlmsg_put_header(void *buf) {
  struct nlmsghdr *nlh = buf;
  memset(nlh, 0, MNL_NLMSG_HDRLEN);
  nlh->nlmsg_len = MNL_NLMSG_HDRLEN;
  return nlh;
}

void *mnl_nlmsg_get_payload_tail(const struct nlmsghdr *nlh) {
  return (char *)nlh + MNL_ALIGN(nlh->nlmsg_len);
}

void *mnl_nlmsg_put_extra_header(struct nlmsghdr *nlh, size_t size) {
  char *extra = mnl_nlmsg_get_payload_tail(nlh);
  size_t padded = MNL_ALIGN(size);
  memset(extra, 0, padded);
  nlh->nlmsg_len += padded;
  return extra;
}

void *mnl_nlmsg_get_payload(const struct nlmsghdr *nlh) {
  return (char *)nlh + MNL_NLMSG_HDRLEN;
}

void *mnl_nlmsg_get_payload_offset(const struct nlmsghdr *nlh, size_t offset) {
  return (char *)nlh + MNL_NLMSG_HDRLEN + MNL_ALIGN(offset);
}

size_t mnl_nlmsg_get_payload_len(const struct nlmsghdr *nlh) {
  return nlh->nlmsg_len - MNL_NLMSG_HDRLEN;
}

bool mnl_nlmsg_ok(const struct nlmsghdr *nlh, int len) {
  return len >= (int)sizeof(struct nlmsghdr) && nlh->nlmsg_len >= sizeof(struct nlmsghdr) &&
         (int)nlh->nlmsg_len <= len;
}

struct nlmsghdr *mnl_nlmsg_next(const struct nlmsghdr *nlh, int *len) {
  *len -= MNL_ALIGN(nlh->nlmsg_len);
  return (struct nlmsghdr *)((char *)nlh + MNL_ALIGN(nlh->nlmsg_len));
}

bool mnl_nlmsg_seq_ok(const struct nlmsghdr *nlh, unsigned int seq) {
  return nlh->nlmsg_seq == 0 || seq == 0 || nlh->nlmsg_seq == seq;
}

bool mnl_nlmsg_portid_ok(const struct nlmsghdr *nlh, unsigned int portid) {
  return nlh->nlmsg_pid == 0 || portid == 0 || nlh->nlmsg_pid == portid;
}

/* ---- batches: several messages in one caller-owned buffer ---- */

struct mnl_nlmsg_batch {
  char *buf;
  size_t limit;   /* the buffer's size */
  size_t used;    /* bytes of the messages accepted so far */
  bool overflow;  /* the message at buf + used did not fit: batch_reset moves it to the front */
};

struct mnl_nlmsg_batch *mnl_nlmsg_batch_start(void *buf, size_t limit) {
  struct mnl_nlmsg_batch *b = calloc(1, sizeof(*b));
  if (b == NULL) return NULL;
  b->buf = buf;
  b->limit = limit;
  return b;
}

void mnl_nlmsg_batch_stop(struct mnl_nlmsg_batch *b) { free(b); }

void *mnl_nlmsg_batch_current(struct mnl_nlmsg_batch *b) { return b->buf + b->used; }

/* Accepts the message built at the current position; false when it does not fit (the batch is full). */
bool mnl_nlmsg_batch_next(struct mnl_nlmsg_batch *b) {
  const struct nlmsghdr *nlh = mnl_nlmsg_batch_current(b);
  if (b->used + nlh->nlmsg_len > b->limit) {
    b->overflow = true;
    return false;
  }
  b->used += nlh->nlmsg_len;
  return true;
}

/* Empties the batch; a message that did not fit moves to the front and becomes the first one. */
void mnl_nlmsg_batch_reset(struct mnl_nlmsg_batch *b) {
  if (b->overflow) {
    const struct nlmsghdr *nlh = mnl_nlmsg_batch_current(b);
    size_t len = nlh->nlmsg_len;
    memmove(b->buf, nlh, len);
    b->used = len;
    b->overflow = false;
  } else {
    b->used = 0;
  }
}

size_t mnl_nlmsg_batch_size(struct mnl_nlmsg_batch *b) { return b->used; }
void *mnl_nlmsg_batch_head(struct mnl_nlmsg_batch *b) { return b->buf; }
bool mnl_nlmsg_batch_is_empty(struct mnl_nlmsg_batch *b) { return b->used == 0; }

/* ---- attributes ---- */

uint16_t mnl_attr_get_type(const struct nlattr *attr) { return attr->nla_type & NLA_TYPE_MASK; }
uint16_t mnl_attr_get_len(const struct nlattr *attr) { return attr->nla_len; }
uint16_t mnl_attr_get_payload_len(const struct nlattr *attr) { return attr->nla_len - MNL_ATTR_HDRLEN; }
void *mnl_attr_get_payload(const struct nlattr *attr) { return (char *)attr + MNL_ATTR_HDRLEN; }

uint8_t mnl_attr_get_u8(const struct nlattr *attr) { return *(const uint8_t *)mnl_attr_get_payload(attr); }
uint16_t mnl_attr_get_u16(const struct nlattr *attr) { return *(const uint16_t *)mnl_attr_get_payload(attr); }
uint32_t mnl_attr_get_u32(const struct nlattr *attr) { return *(const uint32_t *)mnl_attr_get_payload(attr); }
/* 64-bit payloads are only 4-byte aligned in a message. */
uint64_t mnl_attr_get_u64(const struct nlattr *attr) {
  uint64_t v;
  memcpy(&v, mnl_attr_get_payload(attr), sizeof(v));
  return v;
}
const char *mnl_attr_get_str(const struct nlattr *attr) { return mnl_attr_get_payload(attr); }

bool mnl_attr_ok(const struct nlattr *attr, int len) {
  return len >= (int)sizeof(struct nlattr) && attr->nla_len >= sizeof(struct nlattr) && (int)attr->nla_len <= len;
}

struct nlattr *mnl_attr_next(const struct nlattr *attr) {
  return (struct nlattr *)((char *)attr + MNL_ALIGN(attr->nla_len));
}

int mnl_attr_type_valid(const struct nlattr *attr, uint16_t maxtype) {
  if (mnl_attr_get_type(attr) > maxtype) {
    errno = EOPNOTSUPP;
    return -1;
  }
  return 1;
}

/* The payload length a type fixes, 0 when it fixes none. */
static size_t fixed_len(enum mnl_attr_data_type type) {
  switch (type) {
    case MNL_TYPE_U8: return sizeof(uint8_t);
    case MNL_TYPE_U16: return sizeof(uint16_t);
    case MNL_TYPE_U32: return sizeof(uint32_t);
    case MNL_TYPE_U64:
    case MNL_TYPE_MSECS: return sizeof(uint64_t);
    default: return 0;
  }
}

static int fail(int err) {
  errno = err;
  return -1;
}

/* Checks the payload against `type`; `want` > 0 also asks for exactly that length. */
static int validate(const struct nlattr *attr, enum mnl_attr_data_type type, size_t want) {
  size_t len = mnl_attr_get_payload_len(attr);
  const char *p = mnl_attr_get_payload(attr);
  if (len < want) return fail(ERANGE);
  if (want > 0 && len > want) return fail(ERANGE);
  switch (type) {
    case MNL_TYPE_FLAG:
      if (len != 0) return fail(ERANGE);
      break;
    case MNL_TYPE_STRING:
      if (len == 0) return fail(ERANGE);
      break;
    case MNL_TYPE_NUL_STRING:
      if (len == 0) return fail(ERANGE);
      if (p[len - 1] != '\0') return fail(EINVAL);
      break;
    case MNL_TYPE_NESTED:
      /* Empty is fine; otherwise there is room for at least one attribute header. */
      if (len != 0 && len < MNL_ATTR_HDRLEN) return fail(ERANGE);
      break;
    default:
      break;
  }
  return 0;
}

int mnl_attr_validate(const struct nlattr *attr, enum mnl_attr_data_type type) {
  if (type >= MNL_TYPE_MAX) return fail(EINVAL);
  return validate(attr, type, fixed_len(type));
}

int mnl_attr_validate2(const struct nlattr *attr, enum mnl_attr_data_type type, size_t len) {
  if (type >= MNL_TYPE_MAX) return fail(EINVAL);
  return validate(attr, type, len);
}

/* Calls cb on each attribute in [payload, payload + len) until it returns STOP or ERROR. */
int mnl_attr_parse_payload(const void *payload, size_t len, mnl_attr_cb_t cb, void *data) {
  const struct nlattr *attr = payload;
  int left = (int)len;
  while (mnl_attr_ok(attr, left)) {
    int ret = cb(attr, data);
    if (ret <= MNL_CB_STOP) return ret;
    left -= MNL_ALIGN(attr->nla_len);
    attr = mnl_attr_next(attr);
  }
  return MNL_CB_OK;
}

int mnl_attr_parse(const struct nlmsghdr *nlh, unsigned int offset, mnl_attr_cb_t cb, void *data) {
  const char *start = mnl_nlmsg_get_payload_offset(nlh, offset);
  const char *end = (const char *)nlh + nlh->nlmsg_len;
  if (end < start) return MNL_CB_OK;
  return mnl_attr_parse_payload(start, (size_t)(end - start), cb, data);
}

int mnl_attr_parse_nested(const struct nlattr *nested, mnl_attr_cb_t cb, void *data) {
  return mnl_attr_parse_payload(mnl_attr_get_payload(nested), mnl_attr_get_payload_len(nested), cb, data);
}

void mnl_attr_put(struct nlmsghdr *nlh, uint16_t type, size_t len, const void *data) {
  struct nlattr *attr = mnl_nlmsg_get_payload_tail(nlh);
  size_t total = MNL_ATTR_HDRLEN + len;
  attr->nla_type = type;
  attr->nla_len = (uint16_t)total;
  if (len > 0) memcpy(mnl_attr_get_payload(attr), data, len);
  memset((char *)attr + total, 0, MNL_ALIGN(total) - total);
  nlh->nlmsg_len += MNL_ALIGN(total);
}

void mnl_attr_put_u8(struct nlmsghdr *nlh, uint16_t type, uint8_t v) { mnl_attr_put(nlh, type, sizeof(v), &v); }
void mnl_attr_put_u16(struct nlmsghdr *nlh, uint16_t type, uint16_t v) { mnl_attr_put(nlh, type, sizeof(v), &v); }
void mnl_attr_put_u32(struct nlmsghdr *nlh, uint16_t type, uint32_t v) { mnl_attr_put(nlh, type, sizeof(v), &v); }
void mnl_attr_put_u64(struct nlmsghdr *nlh, uint16_t type, uint64_t v) { mnl_attr_put(nlh, type, sizeof(v), &v); }
void mnl_attr_put_str(struct nlmsghdr *nlh, uint16_t type, const char *s) { mnl_attr_put(nlh, type, strlen(s), s); }
void mnl_attr_put_strz(struct nlmsghdr *nlh, uint16_t type, const char *s) { mnl_attr_put(nlh, type, strlen(s) + 1, s); }

bool mnl_attr_put_check(struct nlmsghdr *nlh, size_t buflen, uint16_t type, size_t len, const void *data) {
  if (nlh->nlmsg_len + MNL_ATTR_HDRLEN + MNL_ALIGN(len) > buflen) return false;
  mnl_attr_put(nlh, type, len, data);
  return true;
}

struct nlattr *mnl_attr_nest_start(struct nlmsghdr *nlh, uint16_t type) {
  struct nlattr *start = mnl_nlmsg_get_payload_tail(nlh);
  start->nla_type = NLA_F_NESTED | type;
  start->nla_len = MNL_ATTR_HDRLEN;
  nlh->nlmsg_len += MNL_ATTR_HDRLEN;
  return start;
}

void mnl_attr_nest_end(struct nlmsghdr *nlh, struct nlattr *start) {
  start->nla_len = (uint16_t)((char *)mnl_nlmsg_get_payload_tail(nlh) - (char *)start);
}

void mnl_attr_nest_cancel(struct nlmsghdr *nlh, struct nlattr *start) {
  nlh->nlmsg_len -= (uint32_t)((char *)mnl_nlmsg_get_payload_tail(nlh) - (char *)start);
}

/* ---- replies: a buffer of messages from recvfrom, through callbacks ---- */

int mnl_cb_run2(const void *buf, size_t numbytes, unsigned int seq, unsigned int portid, mnl_cb_t cb_data,
                void *data, mnl_cb_t *cb_ctl_array, unsigned int cb_ctl_array_len) {
  const struct nlmsghdr *nlh = buf;
  int left = (int)numbytes;
  int ret = MNL_CB_OK;
  while (mnl_nlmsg_ok(nlh, left)) {
    if (!mnl_nlmsg_portid_ok(nlh, portid)) return fail(ESRCH);
    if (!mnl_nlmsg_seq_ok(nlh, seq)) return fail(EPROTO);
    /* The dump changed while it was read: the caller decides whether to retry. */
    if (nlh->nlmsg_flags & NLM_F_DUMP_INTR) return fail(EINTR);
    if (nlh->nlmsg_type >= NLMSG_MIN_TYPE) {
      if (cb_data) {
        ret = cb_data(nlh, data);
        if (ret <= MNL_CB_STOP) return ret;
      }
    } else if (cb_ctl_array && nlh->nlmsg_type < cb_ctl_array_len && cb_ctl_array[nlh->nlmsg_type]) {
      ret = cb_ctl_array[nlh->nlmsg_type](nlh, data);
      if (ret <= MNL_CB_STOP) return ret;
    } else {
      switch (nlh->nlmsg_type) {
        case NLMSG_ERROR: {
          const struct nlmsgerr *err = mnl_nlmsg_get_payload(nlh);
          if (nlh->nlmsg_len < mnl_nlmsg_size(sizeof(struct nlmsgerr))) return fail(EBADMSG);
          /* error 0 is an acknowledgement: the request is done. */
          if (err->error == 0) return MNL_CB_STOP;
          return fail(err->error < 0 ? -err->error : err->error);
        }
        case NLMSG_DONE:
          return MNL_CB_STOP;
        default:
          ret = MNL_CB_OK;
          break;
      }
    }
    nlh = mnl_nlmsg_next(nlh, &left);
  }
  return ret;
}

int mnl_cb_run(const void *buf, size_t numbytes, unsigned int seq, unsigned int portid, mnl_cb_t cb_data,
               void *data) {
  return mnl_cb_run2(buf, numbytes, seq, portid, cb_data, data, NULL, 0);
}

size_t mnl_nlmsg_size(size_t len) { return len + MNL_NLMSG_HDRLEN; }

/* ---- sockets ---- */

struct mnl_socket {
  int fd;
  struct sockaddr_nl addr;  /* as bound, read back with getsockname */
};

struct mnl_socket *mnl_socket_open2(int bus, int flags) {
  struct mnl_socket *nl = calloc(1, sizeof(*nl));
  if (nl == NULL) return NULL;
  nl->fd = socket(AF_NETLINK, SOCK_RAW | flags, bus);
  if (nl->fd < 0) {
    int e = errno;
    free(nl);
    errno = e;
    return NULL;
  }
  return nl;
}

struct mnl_socket *mnl_socket_open(int bus) { return mnl_socket_open2(bus, 0); }

struct mnl_socket *mnl_socket_fdopen(int fd) {
  struct mnl_socket *nl = calloc(1, sizeof(*nl));
  socklen_t len = sizeof(nl->addr);
  if (nl == NULL) return NULL;
  nl->fd = fd;
  if (getsockname(fd, (struct sockaddr *)&nl->addr, &len) < 0) {
    int e = errno;
    free(nl);
    errno = e;
    return NULL;
  }
  return nl;
}

int mnl_socket_bind(struct mnl_socket *nl, unsigned int groups, pid_t pid) {
  socklen_t len = sizeof(nl->addr);
  memset(&nl->addr, 0, sizeof(nl->addr));
  nl->addr.nl_family = AF_NETLINK;
  nl->addr.nl_groups = groups;
  nl->addr.nl_pid = (uint32_t)pid;
  if (bind(nl->fd, (struct sockaddr *)&nl->addr, sizeof(nl->addr)) < 0) return -1;
  if (getsockname(nl->fd, (struct sockaddr *)&nl->addr, &len) < 0) return -1;
  if (len != sizeof(nl->addr) || nl->addr.nl_family != AF_NETLINK) return fail(EINVAL);
  return 0;
}

int mnl_socket_get_fd(const struct mnl_socket *nl) { return nl->fd; }
unsigned int mnl_socket_get_portid(const struct mnl_socket *nl) { return nl->addr.nl_pid; }

ssize_t mnl_socket_sendto(const struct mnl_socket *nl, const void *buf, size_t len) {
  static const struct sockaddr_nl kernel = {.nl_family = AF_NETLINK};
  return sendto(nl->fd, buf, len, 0, (const struct sockaddr *)&kernel, sizeof(kernel));
}

ssize_t mnl_socket_recvfrom(const struct mnl_socket *nl, void *buf, size_t size) {
  struct sockaddr_nl from;
  struct iovec iov = {.iov_base = buf, .iov_len = size};
  struct msghdr msg = {.msg_name = &from, .msg_namelen = sizeof(from), .msg_iov = &iov, .msg_iovlen = 1};
  ssize_t n = recvmsg(nl->fd, &msg, 0);
  if (n < 0) return n;
  if (msg.msg_flags & MSG_TRUNC) return fail(ENOSPC);
  if (msg.msg_namelen != sizeof(from)) return fail(EINVAL);
  return n;
}

int mnl_socket_setsockopt(const struct mnl_socket *nl, int type, void *buf, socklen_t len) {
  return setsockopt(nl->fd, SOL_NETLINK, type, buf, len);
}

int mnl_socket_getsockopt(const struct mnl_socket *nl, int type, void *buf, socklen_t *len) {
  return getsockopt(nl->fd, SOL_NETLINK, type, buf, len);
}

int mnl_socket_close(struct mnl_socket *nl) {
  int ret = close(nl->fd);
  free(nl);
  return ret;
}
