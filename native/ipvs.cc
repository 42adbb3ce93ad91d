// IPVS over generic netlink (family "IPVS", include/uapi/linux/ip_vs.h), off the JavaScript thread.
//   ipvsApply(records, netns?)   services and destinations added / changed / deleted, flush
//   ipvsDump(dests, netns?)      every virtual service (and its destinations with connection counts)
//   ipvsConfig(set|null, netns?) the TCP / TCP FIN / UDP timeouts
//   ipvsInfo(netns?)             version and connection table size (tells whether IPVS is there)
// Ops and dump results cross N-API as fixed 104-byte records in one Buffer (layout below, mirrored by
// src/native/ipvs.ts): no per-field object access for 100k destinations. IPVS has no transactions;
// each message stands alone and every refused one is reported by its record index.
#include "netlink_batch.h"
#include "promise_worker.h"

#include <linux/genetlink.h>
#include <linux/ip_vs.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <vector>

namespace kpng {

namespace {

// Record layout (little-endian). kind: an IPVS_CMD_* for ops; 1 = service, 2 = destination in dumps
// (each service's destinations follow it).
constexpr size_t kRec = 104;
enum : size_t {
  R_KIND = 0, R_AF = 1, R_PROTO = 2, R_DAF = 3, R_PORT = 4, R_DPORT = 6, R_ADDR = 8, R_DADDR = 24,
  R_FWMARK = 40, R_FLAGS = 44, R_TIMEOUT = 48, R_NETMASK = 52, R_WEIGHT = 56, R_FWD = 60, R_UTHRESH = 64,
  R_LTHRESH = 68, R_ACTIVE = 72, R_INACTIVE = 76, R_PERSIST = 80, R_SCHED = 88,
};
enum : uint8_t { DUMP_SERVICE = 1, DUMP_DEST = 2 };

template <typename T> T Get(const uint8_t* r, size_t off) { T v; memcpy(&v, r + off, sizeof(T)); return v; }
template <typename T> void Set(uint8_t* r, size_t off, T v) { memcpy(r + off, &v, sizeof(T)); }

// Resolves the "IPVS" generic netlink family id. 0 when absent (module not loaded).
int ResolveFamily(int fd, uint16_t* id) {
  NlMessages req;
  req.Begin(GENL_ID_CTRL, 0);
  genlmsghdr g = {CTRL_CMD_GETFAMILY, 1, 0};
  req.Payload(&g, sizeof(g));
  req.PutStr(CTRL_ATTR_FAMILY_NAME, IPVS_GENL_NAME);
  *id = 0;
  int err = RunRequest(fd, req, [&](const nlmsghdr* h) {
    ForEachAttr((const uint8_t*)NLMSG_DATA(h) + GENL_HDRLEN, h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN,
                [&](const NlAttrView& a) { if (a.type() == CTRL_ATTR_FAMILY_ID) *id = a.u16(); });
  });
  if (err == 0 && *id == 0) err = ENOENT;
  return err;
}

void BeginCmd(NlMessages& m, uint16_t family, uint8_t cmd, uint16_t flags = 0) {
  m.Begin(family, flags);
  genlmsghdr g = {cmd, IPVS_GENL_VERSION, 0};
  m.Payload(&g, sizeof(g));
}

// The service's identity (and with `full`, its settings) as IPVS_CMD_ATTR_SERVICE.
void PutService(NlMessages& m, const uint8_t* r, bool full) {
  size_t nest = m.Nest(IPVS_CMD_ATTR_SERVICE);
  m.PutU16(IPVS_SVC_ATTR_AF, r[R_AF]);
  uint32_t fwmark = Get<uint32_t>(r, R_FWMARK);
  if (fwmark) {
    m.PutU32(IPVS_SVC_ATTR_FWMARK, fwmark);
  } else {
    m.PutU16(IPVS_SVC_ATTR_PROTOCOL, r[R_PROTO]);
    m.Put(IPVS_SVC_ATTR_ADDR, r + R_ADDR, 16);
    m.PutU16(IPVS_SVC_ATTR_PORT, htons(Get<uint16_t>(r, R_PORT)));
  }
  if (full) {
    char sched[IP_VS_SCHEDNAME_MAXLEN + 1] = {};
    memcpy(sched, r + R_SCHED, IP_VS_SCHEDNAME_MAXLEN);
    m.PutStr(IPVS_SVC_ATTR_SCHED_NAME, sched);
    ip_vs_flags f = {Get<uint32_t>(r, R_FLAGS), ~0u};
    m.Put(IPVS_SVC_ATTR_FLAGS, &f, sizeof(f));
    m.PutU32(IPVS_SVC_ATTR_TIMEOUT, Get<uint32_t>(r, R_TIMEOUT));
    m.PutU32(IPVS_SVC_ATTR_NETMASK, Get<uint32_t>(r, R_NETMASK));
  }
  m.End(nest);
}

void PutDest(NlMessages& m, const uint8_t* r, bool full) {
  size_t nest = m.Nest(IPVS_CMD_ATTR_DEST);
  m.Put(IPVS_DEST_ATTR_ADDR, r + R_DADDR, 16);
  m.PutU16(IPVS_DEST_ATTR_PORT, htons(Get<uint16_t>(r, R_DPORT)));
  if (r[R_DAF]) m.PutU16(IPVS_DEST_ATTR_ADDR_FAMILY, r[R_DAF]);
  if (full) {
    m.PutU32(IPVS_DEST_ATTR_FWD_METHOD, Get<uint32_t>(r, R_FWD));
    m.PutU32(IPVS_DEST_ATTR_WEIGHT, Get<uint32_t>(r, R_WEIGHT));
    m.PutU32(IPVS_DEST_ATTR_U_THRESH, Get<uint32_t>(r, R_UTHRESH));
    m.PutU32(IPVS_DEST_ATTR_L_THRESH, Get<uint32_t>(r, R_LTHRESH));
  }
  m.End(nest);
}

// Builds one message per record; returns "" or what is wrong with record *bad.
std::string BuildOps(const uint8_t* data, size_t n, uint16_t family, NlMessages& m, size_t* bad) {
  for (size_t i = 0; i < n; i++) {
    const uint8_t* r = data + i * kRec;
    *bad = i;
    uint8_t cmd = r[R_KIND];
    if (cmd != IPVS_CMD_FLUSH && r[R_AF] != AF_INET && r[R_AF] != AF_INET6) return "address family must be 2 or 10";
    switch (cmd) {
      case IPVS_CMD_NEW_SERVICE:
      case IPVS_CMD_SET_SERVICE:
      case IPVS_CMD_DEL_SERVICE:
        BeginCmd(m, family, cmd);
        PutService(m, r, cmd != IPVS_CMD_DEL_SERVICE);
        break;
      case IPVS_CMD_NEW_DEST:
      case IPVS_CMD_SET_DEST:
      case IPVS_CMD_DEL_DEST:
        BeginCmd(m, family, cmd);
        PutService(m, r, false);
        PutDest(m, r, cmd != IPVS_CMD_DEL_DEST);
        break;
      case IPVS_CMD_FLUSH:
        BeginCmd(m, family, cmd);
        break;
      default:
        return "unknown op " + std::to_string(cmd);
    }
  }
  return "";
}

class ApplyWorker : public PromiseWorker {
 public:
  ApplyWorker(Napi::Env env, Napi::Buffer<uint8_t> input, std::string netns)
      : PromiseWorker(env), netns_(std::move(netns)) {
    ref_ = Napi::Persistent(input.As<Napi::Object>());
    data_ = input.Data();
    count_ = input.Length() / kRec;
  }

 private:
  void Execute() override {
    double t0 = NowMs();
    UniqueFd fd(OpenNetlinkSocket(NETLINK_GENERIC, netns_));
    if (fd < 0) { err_ = -fd; what_ = "generic netlink socket"; return; }
    uint16_t family;
    if (int e = ResolveFamily(fd, &family)) {
     
      err_ = e;
      what_ = e == ENOENT ? "IPVS is not available (no \"IPVS\" generic netlink family: load the ip_vs module)" : "resolving the IPVS family";
      return;
    }
    NlMessages msgs;
    buildError_ = BuildOps(data_, count_, family, msgs, &bad_);
    if (!buildError_.empty()) { err_ = EINVAL; what_ = "ipvsApply: record " + std::to_string(bad_) + ": " + buildError_; return; }
    result_ = SendBatch(fd, msgs);
    if (result_.sysErr) { err_ = result_.sysErr; what_ = result_.sysWhat; }
   
    messages_ = msgs.count();
    bytes_ = msgs.bytes();
    ms_ = NowMs() - t0;
  }

  Napi::Value Result(Napi::Env env) override { return SendResultToJs(env, result_, messages_, bytes_, ms_); }

  Napi::ObjectReference ref_;
  const uint8_t* data_;
  size_t count_;
  std::string netns_;
  std::string buildError_;
  size_t bad_ = 0;
  NlSendResult result_;
  size_t messages_ = 0, bytes_ = 0;
  double ms_ = 0;
};

// Service attributes (IPVS_CMD_ATTR_SERVICE's content) into a record.
void ParseService(const uint8_t* p, size_t n, uint8_t* r) {
  r[R_KIND] = DUMP_SERVICE;
  ForEachAttr(p, n, [&](const NlAttrView& a) {
    switch (a.type()) {
      case IPVS_SVC_ATTR_AF: r[R_AF] = (uint8_t)a.u16(); break;
      case IPVS_SVC_ATTR_PROTOCOL: r[R_PROTO] = (uint8_t)a.u16(); break;
      case IPVS_SVC_ATTR_ADDR: memcpy(r + R_ADDR, a.data(), a.len() < 16 ? a.len() : 16); break;
      case IPVS_SVC_ATTR_PORT: Set<uint16_t>(r, R_PORT, ntohs(a.u16())); break;
      case IPVS_SVC_ATTR_FWMARK: Set<uint32_t>(r, R_FWMARK, a.u32()); break;
      case IPVS_SVC_ATTR_SCHED_NAME: memcpy(r + R_SCHED, a.data(), std::min(a.len(), (size_t)IP_VS_SCHEDNAME_MAXLEN)); break;
      case IPVS_SVC_ATTR_FLAGS: Set<uint32_t>(r, R_FLAGS, a.u32()); break;
      case IPVS_SVC_ATTR_TIMEOUT: Set<uint32_t>(r, R_TIMEOUT, a.u32()); break;
      case IPVS_SVC_ATTR_NETMASK: Set<uint32_t>(r, R_NETMASK, a.u32()); break;
    }
  });
}

void ParseDest(const uint8_t* p, size_t n, uint8_t* r) {
  r[R_KIND] = DUMP_DEST;
  ForEachAttr(p, n, [&](const NlAttrView& a) {
    switch (a.type()) {
      case IPVS_DEST_ATTR_ADDR: memcpy(r + R_DADDR, a.data(), a.len() < 16 ? a.len() : 16); break;
      case IPVS_DEST_ATTR_PORT: Set<uint16_t>(r, R_DPORT, ntohs(a.u16())); break;
      case IPVS_DEST_ATTR_ADDR_FAMILY: r[R_DAF] = (uint8_t)a.u16(); break;
      case IPVS_DEST_ATTR_FWD_METHOD: Set<uint32_t>(r, R_FWD, a.u32()); break;
      case IPVS_DEST_ATTR_WEIGHT: Set<uint32_t>(r, R_WEIGHT, a.u32()); break;
      case IPVS_DEST_ATTR_U_THRESH: Set<uint32_t>(r, R_UTHRESH, a.u32()); break;
      case IPVS_DEST_ATTR_L_THRESH: Set<uint32_t>(r, R_LTHRESH, a.u32()); break;
      case IPVS_DEST_ATTR_ACTIVE_CONNS: Set<uint32_t>(r, R_ACTIVE, a.u32()); break;
      case IPVS_DEST_ATTR_INACT_CONNS: Set<uint32_t>(r, R_INACTIVE, a.u32()); break;
      case IPVS_DEST_ATTR_PERSIST_CONNS: Set<uint32_t>(r, R_PERSIST, a.u32()); break;
    }
  });
}

// Calls f(content of the top-level attribute `type`) for a genl reply message.
void TopAttr(const nlmsghdr* h, uint16_t type, const std::function<void(const uint8_t*, size_t)>& f) {
  ForEachAttr((const uint8_t*)NLMSG_DATA(h) + GENL_HDRLEN, h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN,
              [&](const NlAttrView& a) { if (a.type() == type) f(a.data(), a.len()); });
}

// A dump, retried when a concurrent change interrupted it.
int DumpRetry(int fd, const std::function<void(NlMessages&)>& build, const std::function<void()>& reset,
              const std::function<void(const nlmsghdr*)>& onMsg) {
  int err = 0;
  for (int attempt = 0; attempt < 5; attempt++) {
    NlMessages req;
    build(req);
    reset();
    err = RunDump(fd, req, onMsg);
    if (err != EINTR) return err;
  }
  return err;
}

class DumpWorker : public PromiseWorker {
 public:
  // subset: dump only the destinations of the given service records (no service dump).
  DumpWorker(Napi::Env env, bool dests, bool subset, std::vector<uint8_t> only, std::string netns)
      : PromiseWorker(env), dests_(dests), subset_(subset), services_(std::move(only)), netns_(std::move(netns)) {}

 private:
  void Execute() override {
    double t0 = NowMs();
    UniqueFd fd(OpenNetlinkSocket(NETLINK_GENERIC, netns_));
    if (fd < 0) { err_ = -fd; what_ = "generic netlink socket"; return; }
    uint16_t family;
    if ((err_ = ResolveFamily(fd, &family))) {
      what_ = err_ == ENOENT ? "IPVS is not available (no \"IPVS\" generic netlink family: load the ip_vs module)" : "resolving the IPVS family";
     
      return;
    }
    std::vector<uint8_t> services;
    if (subset_) {
      // A destination dump of a missing service is just empty: ask for each service first (ESRCH: gone).
      for (size_t i = 0; i < services_.size() && !err_; i += kRec) {
        NlMessages m;
        BeginCmd(m, family, IPVS_CMD_GET_SERVICE);
        PutService(m, services_.data() + i, false);
        size_t mark = services.size();
        int e = RunRequest(fd, m, [&](const nlmsghdr* h) {
          TopAttr(h, IPVS_CMD_ATTR_SERVICE, [&](const uint8_t* p, size_t n) {
            services.resize(mark + kRec, 0);
            ParseService(p, n, services.data() + mark);
          });
        });
        if (e && e != ESRCH && e != ENOENT) { err_ = e; what_ = "IPVS get service"; }
      }
      if (err_) return;
    }
    if (!subset_) err_ = DumpRetry(
        fd, [&](NlMessages& m) { BeginCmd(m, family, IPVS_CMD_GET_SERVICE); }, [&] { services.clear(); },
        [&](const nlmsghdr* h) {
          TopAttr(h, IPVS_CMD_ATTR_SERVICE, [&](const uint8_t* p, size_t n) {
            services.resize(services.size() + kRec, 0);
            ParseService(p, n, services.data() + services.size() - kRec);
          });
        });
    if (err_) { what_ = "IPVS service dump"; return; }
    size_t nsvc = services.size() / kRec;
    out_.reserve(services.size());
    for (size_t i = 0; i < nsvc && !err_; i++) {
      const uint8_t* svc = services.data() + i * kRec;
      out_.insert(out_.end(), svc, svc + kRec);
      if (!dests_) continue;
      size_t mark = out_.size();
      err_ = DumpRetry(
          fd,
          [&](NlMessages& m) {
            BeginCmd(m, family, IPVS_CMD_GET_DEST);
            PutService(m, svc, false);
          },
          [&] { out_.resize(mark); },
          [&](const nlmsghdr* h) {
            TopAttr(h, IPVS_CMD_ATTR_DEST, [&](const uint8_t* p, size_t n) {
              out_.resize(out_.size() + kRec, 0);
              uint8_t* r = out_.data() + out_.size() - kRec;
              memcpy(r, svc, kRec);  // the destination record carries its service's identity
              ParseDest(p, n, r);
            });
          });
      // The service went away between the two dumps: skip it, it is no longer there.
      if (err_ == ESRCH || err_ == ENOENT) { out_.resize(mark - kRec); err_ = 0; }
      if (err_) what_ = "IPVS destination dump";
    }
   
    ms_ = NowMs() - t0;
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object r = Napi::Object::New(env);
    r.Set("records", Napi::Buffer<uint8_t>::Copy(env, out_.data(), out_.size()));
    r.Set("ms", Napi::Number::New(env, ms_));
    return r;
  }

  bool dests_, subset_;
  std::vector<uint8_t> services_;
  std::string netns_;
  std::vector<uint8_t> out_;
  double ms_ = 0;
};

// Config (set when given, then read) and info, one small worker.
class ConfigWorker : public PromiseWorker {
 public:
  ConfigWorker(Napi::Env env, bool info, bool set, uint32_t tcp, uint32_t fin, uint32_t udp, std::string netns)
      : PromiseWorker(env), info_(info), set_(set), netns_(std::move(netns)) {
    v_[0] = tcp; v_[1] = fin; v_[2] = udp;
  }

 private:
  void Execute() override {
    UniqueFd fd(OpenNetlinkSocket(NETLINK_GENERIC, netns_));
    if (fd < 0) { err_ = -fd; what_ = "generic netlink socket"; return; }
    uint16_t family;
    if ((err_ = ResolveFamily(fd, &family))) {
      what_ = err_ == ENOENT ? "IPVS is not available (no \"IPVS\" generic netlink family: load the ip_vs module)" : "resolving the IPVS family";
     
      return;
    }
    if (set_) {
      NlMessages m;
      BeginCmd(m, family, IPVS_CMD_SET_CONFIG);
      m.PutU32(IPVS_CMD_ATTR_TIMEOUT_TCP, v_[0]);
      m.PutU32(IPVS_CMD_ATTR_TIMEOUT_TCP_FIN, v_[1]);
      m.PutU32(IPVS_CMD_ATTR_TIMEOUT_UDP, v_[2]);
      if ((err_ = RunRequest(fd, m, [](const nlmsghdr*) {}))) { what_ = "IPVS set config"; return; }
    }
    NlMessages m;
    BeginCmd(m, family, info_ ? IPVS_CMD_GET_INFO : IPVS_CMD_GET_CONFIG);
    err_ = RunRequest(fd, m, [&](const nlmsghdr* h) {
      ForEachAttr((const uint8_t*)NLMSG_DATA(h) + GENL_HDRLEN, h->nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN, [&](const NlAttrView& a) {
        if (info_ && a.type() == IPVS_INFO_ATTR_VERSION) v_[0] = a.u32();
        if (info_ && a.type() == IPVS_INFO_ATTR_CONN_TAB_SIZE) v_[1] = a.u32();
        if (!info_ && a.type() >= IPVS_CMD_ATTR_TIMEOUT_TCP && a.type() <= IPVS_CMD_ATTR_TIMEOUT_UDP)
          v_[a.type() - IPVS_CMD_ATTR_TIMEOUT_TCP] = a.u32();
      });
    });
    if (err_) what_ = info_ ? "IPVS get info" : "IPVS get config";
   
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object r = Napi::Object::New(env);
    if (info_) {
      r.Set("version", Napi::String::New(env, std::to_string(v_[0] >> 16) + "." + std::to_string((v_[0] >> 8) & 0xff) + "." + std::to_string(v_[0] & 0xff)));
      r.Set("connTableSize", Napi::Number::New(env, v_[1]));
    } else {
      r.Set("tcp", Napi::Number::New(env, v_[0]));
      r.Set("tcpFin", Napi::Number::New(env, v_[1]));
      r.Set("udp", Napi::Number::New(env, v_[2]));
    }
    return r;
  }

  bool info_, set_;
  uint32_t v_[3] = {0, 0, 0};
  std::string netns_;
};

}  // namespace

// ipvsApply(records: Buffer, netns?): Promise<{messages, bytes, ms, failed[], overflow, incomplete}>
Napi::Value IpvsApply(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsBuffer() || info[0].As<Napi::Buffer<uint8_t>>().Length() % kRec != 0) {
    Napi::TypeError::New(env, "ipvsApply(records: Buffer of 104-byte records, netns?: string)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new ApplyWorker(env, info[0].As<Napi::Buffer<uint8_t>>(), netns))->Start();
}

// ipvsDump(dests: boolean | Buffer of service records (only their destinations), netns?): Promise<{records, ms}>
Napi::Value IpvsDump(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::vector<uint8_t> only;
  bool subset = info.Length() > 0 && info[0].IsBuffer();
  if (subset) {
    Napi::Buffer<uint8_t> b = info[0].As<Napi::Buffer<uint8_t>>();
    if (b.Length() % kRec != 0) {
      Napi::TypeError::New(env, "ipvsDump(dests: boolean | Buffer of 104-byte service records, netns?)").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    only.assign(b.Data(), b.Data() + b.Length());
  } else if (info.Length() > 0 && !info[0].IsBoolean() && !info[0].IsUndefined()) {
    Napi::TypeError::New(env, "ipvsDump(dests: boolean | Buffer of 104-byte service records, netns?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new DumpWorker(env, subset || (info.Length() > 0 && info[0].ToBoolean().Value()), subset, std::move(only), netns))->Start();
}

// ipvsConfig(set: {tcp, tcpFin, udp} | null, netns?): Promise<{tcp, tcpFin, udp}>  (seconds; 0 = unchanged)
Napi::Value IpvsConfig(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  bool set = info.Length() > 0 && info[0].IsObject();
  if (info.Length() > 0 && !set && !info[0].IsNull() && !info[0].IsUndefined()) {
    Napi::TypeError::New(env, "ipvsConfig(set: {tcp, tcpFin, udp} | null, netns?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  uint32_t v[3] = {0, 0, 0};
  if (set) {
    Napi::Object o = info[0].As<Napi::Object>();
    const char* keys[3] = {"tcp", "tcpFin", "udp"};
    for (int i = 0; i < 3; i++) {
      Napi::Value x = o.Get(keys[i]);
      if (x.IsNumber()) v[i] = x.As<Napi::Number>().Uint32Value();
    }
  }
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new ConfigWorker(env, false, set, v[0], v[1], v[2], netns))->Start();
}

// ipvsInfo(netns?): Promise<{version, connTableSize}>
Napi::Value IpvsInfo(const Napi::CallbackInfo& info) {
  std::string netns;
  if (!NetnsArg(info, 0, &netns)) return info.Env().Undefined();
  return (new ConfigWorker(info.Env(), true, false, 0, 0, 0, netns))->Start();
}

}  // namespace kpng
