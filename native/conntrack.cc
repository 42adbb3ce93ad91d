// Conntrack cleanup over ctnetlink, on a worker thread: dump the family's entries once, keep those
// matching any of the filters (all given fields of a filter must match), delete them by original tuple
// + id (+ zone) in one netlink batch. kube-proxy does this when a UDP endpoint goes away (entries whose
// reply source is the endpoint), when a UDP service IP/port appears (entries to the service with no
// endpoint yet), and after a full sync (DNATed entries whose reply source is no longer an endpoint:
// `keep`). The messages are built here rather than through libnetfilter_conntrack, so the addon links
// no conntrack library at all.
#include "common.h"
#include "netlink_batch.h"
#include "promise_worker.h"

#include <arpa/inet.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nfnetlink_conntrack.h>
#include <netinet/in.h>

#include <array>
#include <vector>

namespace kpng {

namespace {

struct CtFilter {
  uint8_t family = AF_INET;
  uint8_t proto = IPPROTO_UDP;
  bool hasOrigDst = false, hasReplySrc = false, hasDport = false, hasReplySport = false;
  uint8_t origDst[16] = {}, replySrc[16] = {};
  uint16_t dport = 0, replySport = 0;  // network order
  // When set: only DNATed entries (reply source != original destination) whose reply source is none of these.
  bool hasKeep = false;
  std::vector<std::array<uint8_t, 16>> keep;
};

// The fields of one dumped entry the filters look at, and the raw attributes that name it for a delete.
struct CtEntry {
  uint8_t proto = 0;
  bool hasOrigDst = false, hasReplySrc = false, hasDport = false, hasReplySport = false;
  uint8_t origDst[16] = {}, replySrc[16] = {};
  uint16_t dport = 0, replySport = 0;  // network order
  const nlattr* tupleOrig = nullptr;
  const nlattr* id = nullptr;
  const nlattr* zone = nullptr;
};

// The original tuple's destination address and port, or the reply tuple's source address and port.
void ReadTuple(const NlAttrView& tuple, bool v6, bool orig, CtEntry* e) {
  const uint16_t addrAttr = v6 ? (orig ? CTA_IP_V6_DST : CTA_IP_V6_SRC) : (orig ? CTA_IP_V4_DST : CTA_IP_V4_SRC);
  const size_t alen = v6 ? 16 : 4;
  ForEachAttr(tuple.data(), tuple.len(), [&](const NlAttrView& a) {
    if (a.type() == CTA_TUPLE_IP) {
      ForEachAttr(a.data(), a.len(), [&](const NlAttrView& ip) {
        if (ip.type() != addrAttr || ip.len() != alen) return;
        memcpy(orig ? e->origDst : e->replySrc, ip.data(), alen);
        (orig ? e->hasOrigDst : e->hasReplySrc) = true;
      });
    } else if (a.type() == CTA_TUPLE_PROTO) {
      ForEachAttr(a.data(), a.len(), [&](const NlAttrView& pa) {
        if (pa.type() == CTA_PROTO_NUM && pa.len() >= 1) {
          if (orig) e->proto = pa.data()[0];
        } else if (pa.type() == (orig ? CTA_PROTO_DST_PORT : CTA_PROTO_SRC_PORT) && pa.len() == 2) {
          memcpy(orig ? &e->dport : &e->replySport, pa.data(), 2);
          (orig ? e->hasDport : e->hasReplySport) = true;
        }
      });
    }
  });
}

bool ParseEntry(const nlmsghdr* h, bool v6, CtEntry* e) {
  if (h->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) return false;
  const uint8_t* p = (const uint8_t*)NLMSG_DATA(h) + NLMSG_ALIGN(sizeof(nfgenmsg));
  size_t n = h->nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof(nfgenmsg)));
  ForEachAttr(p, n, [&](const NlAttrView& a) {
    switch (a.type()) {
      case CTA_TUPLE_ORIG: e->tupleOrig = a.a; ReadTuple(a, v6, true, e); break;
      case CTA_TUPLE_REPLY: ReadTuple(a, v6, false, e); break;
      case CTA_ID: e->id = a.a; break;
      case CTA_ZONE: e->zone = a.a; break;
      default: break;
    }
  });
  return e->tupleOrig != nullptr;
}

bool Matches(const CtEntry& e, const CtFilter& f) {
  if (e.proto != f.proto) return false;
  const size_t n = f.family == AF_INET6 ? 16 : 4;
  if (f.hasOrigDst && (!e.hasOrigDst || memcmp(e.origDst, f.origDst, n) != 0)) return false;
  if (f.hasReplySrc && (!e.hasReplySrc || memcmp(e.replySrc, f.replySrc, n) != 0)) return false;
  if (f.hasDport && (!e.hasDport || e.dport != f.dport)) return false;
  if (f.hasReplySport && (!e.hasReplySport || e.replySport != f.replySport)) return false;
  if (f.hasKeep) {
    if (!e.hasReplySrc || !e.hasOrigDst || memcmp(e.replySrc, e.origDst, n) == 0) return false;  // not DNATed
    for (const auto& k : f.keep) if (memcmp(e.replySrc, k.data(), n) == 0) return false;
  }
  return true;
}

const uint16_t kCtGet = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_GET;
const uint16_t kCtNew = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_NEW;
const uint16_t kCtDelete = (NFNL_SUBSYS_CTNETLINK << 8) | IPCTNL_MSG_CT_DELETE;

void PutNfgen(NlMessages& m, uint8_t family) {
  nfgenmsg g = {};
  g.nfgen_family = family;
  g.version = NFNETLINK_V0;
  m.Payload(&g, sizeof(g));
}

// Copies a dumped attribute (nested ones included) into the message being built.
void PutRaw(NlMessages& m, const nlattr* a) {
  m.Put(a->nla_type, (const uint8_t*)a + NLA_HDRLEN, a->nla_len - NLA_HDRLEN);
}

class ConntrackDeleteWorker : public PromiseWorker {
 public:
  ConntrackDeleteWorker(Napi::Env env, std::vector<CtFilter> f, std::string netns)
      : PromiseWorker(env), f_(std::move(f)), netns_(std::move(netns)) {}

 private:
  void Execute() override {
    const uint8_t family = f_.empty() ? AF_INET : f_[0].family;
    const bool v6 = family == AF_INET6;
    int fd0 = OpenNetlinkSocket(NETLINK_NETFILTER, netns_);
    if (fd0 < 0) { err_ = -fd0; what_ = "conntrack socket"; return; }
    UniqueFd fd(fd0);
    // The dump request's family makes the kernel skip the other family's entries.
    NlMessages req;
    req.Begin(kCtGet, 0);
    PutNfgen(req, family);
    NlMessages del;
    int e = RunDump(fd.get(), req, [&](const nlmsghdr* h) {
      if (h->nlmsg_type != kCtGet && h->nlmsg_type != kCtNew) return;
      scanned_++;
      CtEntry ent;
      if (!ParseEntry(h, v6, &ent)) return;
      for (const CtFilter& f : f_) {
        if (!Matches(ent, f)) continue;
        del.Begin(kCtDelete, 0);
        PutNfgen(del, family);
        PutRaw(del, ent.tupleOrig);
        if (ent.zone) PutRaw(del, ent.zone);
        if (ent.id) PutRaw(del, ent.id);
        break;
      }
    });
    if (e) { err_ = e; what_ = "conntrack dump"; return; }
    if (del.count() == 0) return;
    NlSendResult r = SendBatch(fd.get(), del);
    if (r.sysErr) { err_ = r.sysErr; what_ = "conntrack delete: " + r.sysWhat; return; }
    // ENOENT: the entry went meanwhile (it expired, or someone else removed it), not an error.
    for (const NlFailure& f : r.failures) {
      if (f.err != ENOENT && !err_) { err_ = f.err; what_ = "conntrack delete"; }
    }
    deleted_ = del.count() - r.failures.size();
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object r = Napi::Object::New(env);
    r.Set("deleted", Napi::Number::New(env, (double)deleted_));
    r.Set("scanned", Napi::Number::New(env, (double)scanned_));
    return r;
  }

  std::vector<CtFilter> f_;
  std::string netns_;
  size_t deleted_ = 0, scanned_ = 0;
};

bool Bytes(Napi::Value v, uint8_t* out, size_t n) {
  if (!v.IsBuffer() && !v.IsTypedArray()) return false;
  Napi::Uint8Array a = v.As<Napi::Uint8Array>();
  if (a.ByteLength() != n) return false;
  memcpy(out, a.Data(), n);
  return true;
}


// One filter from a JS object; false (with a JS exception pending) when it is malformed.
bool ParseFilter(Napi::Env env, Napi::Value v, CtFilter* f) {
  if (!v.IsObject()) { Napi::TypeError::New(env, "conntrack filter: an object").ThrowAsJavaScriptException(); return false; }
  Napi::Object o = v.As<Napi::Object>();
  if (!o.Get("family").IsNumber() || !o.Get("proto").IsNumber()) {
    Napi::TypeError::New(env, "conntrack filter: family and proto are numbers").ThrowAsJavaScriptException();
    return false;
  }
  f->family = o.Get("family").As<Napi::Number>().Uint32Value() == 10 ? AF_INET6 : AF_INET;
  f->proto = (uint8_t)o.Get("proto").As<Napi::Number>().Uint32Value();
  size_t alen = f->family == AF_INET6 ? 16 : 4;
  if (o.Has("origDst") && !o.Get("origDst").IsUndefined()) {
    if (!Bytes(o.Get("origDst"), f->origDst, alen)) {
      Napi::TypeError::New(env, "origDst: address bytes of the family").ThrowAsJavaScriptException();
      return false;
    }
    f->hasOrigDst = true;
  }
  if (o.Has("replySrc") && !o.Get("replySrc").IsUndefined()) {
    if (!Bytes(o.Get("replySrc"), f->replySrc, alen)) {
      Napi::TypeError::New(env, "replySrc: address bytes of the family").ThrowAsJavaScriptException();
      return false;
    }
    f->hasReplySrc = true;
  }
  if (o.Has("dport") && o.Get("dport").IsNumber()) {
    f->hasDport = true;
    f->dport = htons((uint16_t)o.Get("dport").As<Napi::Number>().Uint32Value());
  }
  if (o.Has("replySport") && o.Get("replySport").IsNumber()) {
    f->hasReplySport = true;
    f->replySport = htons((uint16_t)o.Get("replySport").As<Napi::Number>().Uint32Value());
  }
  if (o.Has("keepReplySrc") && !o.Get("keepReplySrc").IsUndefined()) {
    if (!o.Get("keepReplySrc").IsArray()) {
      Napi::TypeError::New(env, "keepReplySrc: an array of address bytes").ThrowAsJavaScriptException();
      return false;
    }
    Napi::Array a = o.Get("keepReplySrc").As<Napi::Array>();
    f->hasKeep = true;
    for (uint32_t i = 0; i < a.Length(); i++) {
      std::array<uint8_t, 16> k{};
      if (!Bytes(a.Get(i), k.data(), alen)) {
        Napi::TypeError::New(env, "keepReplySrc: address bytes of the family").ThrowAsJavaScriptException();
        return false;
      }
      f->keep.push_back(k);
    }
  }
  return true;
}

}  // namespace

// conntrackDelete(filter | filter[], netns?): Promise<{deleted, scanned}>, one dump for all filters
// (which must share one family). filter: {family: 2|10, proto: number, origDst?: Uint8Array,
// replySrc?: Uint8Array, dport?: number, replySport?: number, keepReplySrc?: Uint8Array[]}.
Napi::Value ConntrackDelete(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) {
    Napi::TypeError::New(env, "conntrackDelete(filter | filter[], netns?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::vector<CtFilter> filters;
  if (info[0].IsArray()) {
    Napi::Array a = info[0].As<Napi::Array>();
    for (uint32_t i = 0; i < a.Length(); i++) {
      CtFilter f;
      if (!ParseFilter(env, a.Get(i), &f)) return env.Undefined();
      if (!filters.empty() && f.family != filters[0].family) {
        Napi::TypeError::New(env, "conntrackDelete: all filters of one call share one family").ThrowAsJavaScriptException();
        return env.Undefined();
      }
      filters.push_back(std::move(f));
    }
  } else {
    CtFilter f;
    if (!ParseFilter(env, info[0], &f)) return env.Undefined();
    filters.push_back(std::move(f));
  }
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new ConntrackDeleteWorker(env, std::move(filters), netns))->Start();
}

}  // namespace kpng
