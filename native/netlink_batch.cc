// See netlink_batch.h.
#include "netlink_batch.h"

#include <sys/socket.h>

#include <atomic>

namespace kpng {

int OpenNetlinkSocket(int proto, const std::string& netns, int rcvbuf, int sndbuf) {
  int fd;
  {
    NetnsGuard g(netns);
    if (g.error()) return -g.error();
    fd = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, proto);
    if (fd < 0) return -errno;
  }
  sockaddr_nl sa = {};
  sa.nl_family = AF_NETLINK;
  if (bind(fd, (sockaddr*)&sa, sizeof(sa)) < 0) {
    int e = errno;
    close(fd);
    return -e;
  }
  int one = 1;
  setsockopt(fd, SOL_NETLINK, NETLINK_EXT_ACK, &one, sizeof(one));
  setsockopt(fd, SOL_NETLINK, NETLINK_CAP_ACK, &one, sizeof(one));
  if (rcvbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_RCVBUFFORCE, &rcvbuf, sizeof(rcvbuf)) < 0)
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof(rcvbuf));
  if (sndbuf > 0 && setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
  return fd;
}

void NlMessages::Grow(size_t n) { buf_.resize(buf_.size() + NLMSG_ALIGN(n), 0); }

nlmsghdr* NlMessages::Begin(uint16_t type, uint16_t flags) {
  offs_.push_back(buf_.size());
  Grow(NLMSG_HDRLEN);
  nlmsghdr* h = Cur();
  h->nlmsg_len = NLMSG_HDRLEN;
  h->nlmsg_type = type;
  h->nlmsg_flags = NLM_F_REQUEST | flags;
  return h;
}

void NlMessages::Payload(const void* p, size_t n) {
  size_t at = buf_.size();
  Grow(n);
  memcpy(buf_.data() + at, p, n);
  Cur()->nlmsg_len = buf_.size() - offs_.back();
}

void NlMessages::Put(uint16_t type, const void* p, size_t n) {
  size_t at = buf_.size();
  Grow(NLA_HDRLEN + n);
  nlattr* a = (nlattr*)(buf_.data() + at);
  a->nla_type = type;
  a->nla_len = NLA_HDRLEN + n;
  if (n) memcpy(buf_.data() + at + NLA_HDRLEN, p, n);
  Cur()->nlmsg_len = buf_.size() - offs_.back();
}

size_t NlMessages::Nest(uint16_t type) {
  size_t at = buf_.size();
  Put(type | NLA_F_NESTED, nullptr, 0);
  return at;
}

void NlMessages::End(size_t token) {
  nlattr* a = (nlattr*)(buf_.data() + token);
  a->nla_len = buf_.size() - token;
}

namespace {

uint32_t NextSeqBase() {
  static std::atomic<uint32_t> counter{(uint32_t)time(nullptr) << 8};
  return counter.fetch_add(1u << 22);  // room for 4M messages per batch
}

// Reads the error's ext-ack message (NLMSGERR_ATTR_MSG), if any.
std::string ExtAckMessage(const nlmsghdr* nlh) {
  const nlmsgerr* e = (const nlmsgerr*)NLMSG_DATA(nlh);
  if (!(nlh->nlmsg_flags & NLM_F_ACK_TLVS)) return "";
  size_t hdr = NLMSG_HDRLEN + sizeof(nlmsgerr);
  if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) hdr += e->msg.nlmsg_len - NLMSG_HDRLEN;
  if (hdr >= nlh->nlmsg_len) return "";
  std::string out;
  ForEachAttr((const char*)nlh + hdr, nlh->nlmsg_len - hdr, [&](const NlAttrView& a) {
    if (a.type() == NLMSGERR_ATTR_MSG) out.assign((const char*)a.data(), strnlen((const char*)a.data(), a.len()));
  });
  return out;
}

bool SendAll(int fd, const uint8_t* p, size_t n, NlSendResult* r) {
  sockaddr_nl dst = {};
  dst.nl_family = AF_NETLINK;
  for (;;) {
    ssize_t sent = sendto(fd, p, n, 0, (sockaddr*)&dst, sizeof(dst));
    if (sent < 0 && errno == EINTR) continue;
    if (sent < 0 || (size_t)sent != n) {
      r->sysErr = sent < 0 ? errno : EMSGSIZE;
      r->sysWhat = "sendmsg of " + std::to_string(n) + " bytes";
      return false;
    }
    return true;
  }
}

}  // namespace

NlSendResult SendBatch(int fd, NlMessages& msgs, size_t chunkBytes) {
  NlSendResult r;
  const uint32_t base = NextSeqBase();
  for (size_t i = 0; i < msgs.count(); i++) msgs.At(i)->nlmsg_seq = base + (uint32_t)i;
  RecvBuffer<uint8_t> rbuf(1 << 17);
  size_t i = 0;
  while (i < msgs.count()) {
    // A chunk: consecutive messages up to chunkBytes (at least one).
    size_t j = i;
    size_t bytes = 0;
    while (j < msgs.count() && (j == i || bytes + msgs.At(j)->nlmsg_len <= chunkBytes)) bytes += NLMSG_ALIGN(msgs.At(j++)->nlmsg_len);
    nlmsghdr* last = msgs.At(j - 1);
    last->nlmsg_flags |= NLM_F_ACK;
    if (!SendAll(fd, (const uint8_t*)msgs.At(i), bytes, &r)) return r;
    // The kernel handled the chunk inside sendmsg: every reply is queued (or was dropped on overrun)
    // by now, so a non-blocking drain suffices and can never hang.
    const uint32_t lastSeq = last->nlmsg_seq;
    bool done = false;
    for (;;) {
      ssize_t n = recv(fd, rbuf.data(), rbuf.size(), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == ENOBUFS) { r.overflow = true; continue; }
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        r.sysErr = errno;
        r.sysWhat = "recv";
        return r;
      }
      int left = (int)n;
      for (const nlmsghdr* h = (const nlmsghdr*)rbuf.data(); NLMSG_OK(h, left); h = NLMSG_NEXT(h, left)) {
        if (h->nlmsg_type != NLMSG_ERROR) continue;
        const nlmsgerr* e = (const nlmsgerr*)NLMSG_DATA(h);
        uint32_t seq = e->msg.nlmsg_seq;
        if (seq == lastSeq) done = true;
        if (e->error == 0) continue;
        int64_t idx = (seq - base) < msgs.count() ? (int64_t)(seq - base) : -1;
        r.failures.push_back({idx, -e->error, ExtAckMessage(h)});
      }
    }
    if (!done) r.incomplete = true;
    i = j;
  }
  return r;
}

namespace {

int Exchange(int fd, NlMessages& req, bool dump, const std::function<void(const nlmsghdr*)>& onMsg) {
  nlmsghdr* h = req.At(0);
  h->nlmsg_flags |= dump ? NLM_F_DUMP : NLM_F_ACK;
  h->nlmsg_seq = NextSeqBase();
  NlSendResult r;
  if (!SendAll(fd, (const uint8_t*)h, h->nlmsg_len, &r)) return r.sysErr;
  RecvBuffer<uint8_t> rbuf(1 << 17);
  int err = 0;
  for (;;) {
    ssize_t n = recv(fd, rbuf.data(), rbuf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    int left = (int)n;
    for (const nlmsghdr* m = (const nlmsghdr*)rbuf.data(); NLMSG_OK(m, left); m = NLMSG_NEXT(m, left)) {
      if (m->nlmsg_seq != h->nlmsg_seq) continue;
      if (m->nlmsg_flags & NLM_F_DUMP_INTR) err = EINTR;
      if (m->nlmsg_type == NLMSG_DONE) return err;
      if (m->nlmsg_type == NLMSG_ERROR) {
        const nlmsgerr* e = (const nlmsgerr*)NLMSG_DATA(m);
        return e->error ? -e->error : err;
      }
      onMsg(m);
    }
  }
}

}  // namespace

int RunDump(int fd, NlMessages& req, const std::function<void(const nlmsghdr*)>& onMsg) {
  return Exchange(fd, req, true, onMsg);
}

int RunRequest(int fd, NlMessages& req, const std::function<void(const nlmsghdr*)>& onMsg) {
  return Exchange(fd, req, false, onMsg);
}

void ForEachAttr(const void* p, size_t n, const std::function<void(const NlAttrView&)>& f) {
  const uint8_t* cur = (const uint8_t*)p;
  const uint8_t* end = cur + n;
  while (end - cur >= (ptrdiff_t)NLA_HDRLEN) {
    const nlattr* a = (const nlattr*)cur;
    if (a->nla_len < NLA_HDRLEN || a->nla_len > end - cur) break;
    f(NlAttrView{a});
    cur += NLA_ALIGN(a->nla_len);
  }
}

Napi::Object SendResultToJs(Napi::Env env, const NlSendResult& r, size_t messages, size_t bytes, double ms) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("messages", Napi::Number::New(env, (double)messages));
  o.Set("bytes", Napi::Number::New(env, (double)bytes));
  o.Set("ms", Napi::Number::New(env, ms));
  o.Set("overflow", Napi::Boolean::New(env, r.overflow));
  o.Set("incomplete", Napi::Boolean::New(env, r.incomplete));
  Napi::Array failed = Napi::Array::New(env, r.failures.size());
  for (size_t k = 0; k < r.failures.size(); k++) {
    const NlFailure& f = r.failures[k];
    Napi::Object x = Napi::Object::New(env);
    x.Set("index", Napi::Number::New(env, (double)f.index));
    x.Set("errno", Napi::Number::New(env, f.err));
    x.Set("code", Napi::String::New(env, ErrnoName(f.err)));
    if (!f.message.empty()) x.Set("message", Napi::String::New(env, f.message));
    failed[k] = x;
  }
  o.Set("failed", failed);
  return o;
}

}  // namespace kpng
