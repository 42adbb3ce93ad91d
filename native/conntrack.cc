// Conntrack cleanup over ctnetlink (libnetfilter_conntrack), on a worker thread: dump the family's
// entries once, keep those matching any of the filters (all given fields of a filter must match),
// delete them by tuple + id. kube-proxy does this when a UDP endpoint goes away (entries whose reply
// source is the endpoint), when a UDP service IP/port appears (entries to the service with no endpoint
// yet), and after a full sync (DNATed entries whose reply source is no longer an endpoint: `keep`).
#include "common.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <libnetfilter_conntrack/libnetfilter_conntrack.h>

#include <array>
#include <memory>
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

bool AddrEq(const nf_conntrack* ct, bool v6, int attr4, int attr6, const uint8_t* want) {
  const void* p = nfct_get_attr(ct, (nf_conntrack_attr)(v6 ? attr6 : attr4));
  return p && memcmp(p, want, v6 ? 16 : 4) == 0;
}

bool Matches(const nf_conntrack* ct, const CtFilter& f) {
  if (nfct_get_attr_u8(ct, ATTR_L3PROTO) != f.family) return false;
  if (nfct_get_attr_u8(ct, ATTR_L4PROTO) != f.proto) return false;
  bool v6 = f.family == AF_INET6;
  if (f.hasOrigDst && !AddrEq(ct, v6, ATTR_ORIG_IPV4_DST, ATTR_ORIG_IPV6_DST, f.origDst)) return false;
  if (f.hasReplySrc && !AddrEq(ct, v6, ATTR_REPL_IPV4_SRC, ATTR_REPL_IPV6_SRC, f.replySrc)) return false;
  if (f.hasDport && nfct_get_attr_u16(ct, ATTR_ORIG_PORT_DST) != f.dport) return false;
  if (f.hasReplySport && nfct_get_attr_u16(ct, ATTR_REPL_PORT_SRC) != f.replySport) return false;
  if (f.hasKeep) {
    size_t n = v6 ? 16 : 4;
    const void* rs = nfct_get_attr(ct, (nf_conntrack_attr)(v6 ? ATTR_REPL_IPV6_SRC : ATTR_REPL_IPV4_SRC));
    const void* od = nfct_get_attr(ct, (nf_conntrack_attr)(v6 ? ATTR_ORIG_IPV6_DST : ATTR_ORIG_IPV4_DST));
    if (!rs || !od || memcmp(rs, od, n) == 0) return false;  // not DNATed
    for (const auto& k : f.keep) if (memcmp(rs, k.data(), n) == 0) return false;
  }
  return true;
}

struct DumpCtx {
  const std::vector<CtFilter>* filters;
  std::vector<nf_conntrack*> matches;
  size_t seen = 0;
};

int DumpCb(enum nf_conntrack_msg_type, struct nf_conntrack* ct, void* data) {
  DumpCtx* c = (DumpCtx*)data;
  c->seen++;
  for (const CtFilter& f : *c->filters) {
    if (Matches(ct, f)) { c->matches.push_back(nfct_clone(ct)); break; }
  }
  return NFCT_CB_CONTINUE;
}

class ConntrackDeleteWorker : public Napi::AsyncWorker {
 public:
  ConntrackDeleteWorker(Napi::Env env, std::vector<CtFilter> f, std::string netns)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), f_(std::move(f)), netns_(std::move(netns)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    std::unique_ptr<nfct_handle, int (*)(nfct_handle*)> owned(nullptr, nfct_close);
    {
      NetnsGuard g(netns_);
      if (g.error()) { err_ = g.error(); what_ = "setns"; return; }
      owned.reset(nfct_open(CONNTRACK, 0));
    }
    nfct_handle* h = owned.get();
    if (!h) { err_ = errno; what_ = "nfct_open"; return; }
    DumpCtx ctx{&f_, {}, 0};
    nfct_callback_register(h, NFCT_T_ALL, DumpCb, &ctx);
    nfct_filter_dump* fd = nfct_filter_dump_create();
    nfct_filter_dump_set_attr_u8(fd, NFCT_FILTER_DUMP_L3NUM, f_.empty() ? AF_INET : f_[0].family);
    if (nfct_query(h, NFCT_Q_DUMP_FILTER, fd) < 0) { err_ = errno; what_ = "conntrack dump"; }
    nfct_filter_dump_destroy(fd);
    nfct_callback_unregister(h);
    for (nf_conntrack* ct : ctx.matches) {
      if (!err_) {
        if (nfct_query(h, NFCT_Q_DESTROY, ct) == 0) deleted_++;
        else if (errno != ENOENT) { err_ = errno; what_ = "conntrack delete"; }
      }
      nfct_destroy(ct);
    }
    scanned_ = ctx.seen;
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_) { deferred_.Reject(MakeErrnoError(env, err_, what_).Value()); return; }
    Napi::Object r = Napi::Object::New(env);
    r.Set("deleted", Napi::Number::New(env, (double)deleted_));
    r.Set("scanned", Napi::Number::New(env, (double)scanned_));
    deferred_.Resolve(r);
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::vector<CtFilter> f_;
  std::string netns_;
  int err_ = 0;
  std::string what_;
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
  auto* w = new ConntrackDeleteWorker(env, std::move(filters), netns);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

}  // namespace kpng
