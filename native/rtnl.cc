// rtnetlink for service addresses, off the JavaScript thread:
//   rtnlLink(name, {kind?, up?}, netns?)   look a link up by name; create it (e.g. kind "dummy") and/or
//                                          set it up when asked; -> {ifindex, created, up}
//   rtnlLinkDelete(name, {kind?}, netns?)  delete a link by name (only when its kind is `kind`, if given);
//                                          -> {deleted, kind} (absent: deleted false, kind "")
//   rtnlAddrs(ifindex, netns?)             the addresses of one link (0: every link) as records
//   rtnlLinks(netns?)                      every link: [{name, ifindex, flags, master, kind}]
//   rtnlAddrApply(records, netns?)         add (replace) / delete addresses; failures by record index
// Address records (24 bytes, little-endian): u32 ifindex, u8 family, u8 prefixlen, u8 op (apply: 1 add,
// 2 delete) or scope (dump), u8 flags (dump: low ifa_flags), 16 bytes address. Mirrored by src/native/rtnl.ts.
#include "netlink_batch.h"
#include "promise_worker.h"

#include <linux/if.h>
#include <linux/if_addr.h>
#include <linux/if_link.h>
#include <linux/rtnetlink.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <vector>

namespace kpng {

namespace {

constexpr size_t kAddrRec = 24;

int GetLink(int fd, const std::string& name, int* ifindex, unsigned* flags, std::string* kind = nullptr) {
  NlMessages m;
  m.Begin(RTM_GETLINK, 0);
  ifinfomsg ifi = {};
  ifi.ifi_family = AF_UNSPEC;
  m.Payload(&ifi, sizeof(ifi));
  m.PutStr(IFLA_IFNAME, name);
  *ifindex = 0;
  return RunRequest(fd, m, [&](const nlmsghdr* h) {
    if (h->nlmsg_type != RTM_NEWLINK) return;
    const ifinfomsg* r = (const ifinfomsg*)NLMSG_DATA(h);
    *ifindex = r->ifi_index;
    *flags = r->ifi_flags;
    if (!kind) return;
    ForEachAttr((const uint8_t*)r + NLMSG_ALIGN(sizeof(ifinfomsg)), h->nlmsg_len - NLMSG_HDRLEN - NLMSG_ALIGN(sizeof(ifinfomsg)),
                [&](const NlAttrView& a) {
                  if (a.type() != IFLA_LINKINFO) return;
                  ForEachAttr(a.data(), a.len(), [&](const NlAttrView& i) {
                    if (i.type() == IFLA_INFO_KIND) *kind = std::string((const char*)i.data(), strnlen((const char*)i.data(), i.len()));
                  });
                });
  });
}

// Deletes a link by name. The kind check keeps a clean-up from removing a link of the same name that
// someone else made for another purpose (e.g. a veth called kube-ipvs0).
class LinkDeleteWorker : public PromiseWorker {
 public:
  LinkDeleteWorker(Napi::Env env, std::string name, std::string kind, std::string netns)
      : PromiseWorker(env), name_(std::move(name)), wantKind_(std::move(kind)), netns_(std::move(netns)) {}

 private:
  void Execute() override {
    UniqueFd fd(OpenNetlinkSocket(NETLINK_ROUTE, netns_, 0, 0));
    if (fd < 0) { err_ = -fd; what_ = "rtnetlink socket"; return; }
    int ifindex = 0;
    unsigned flags = 0;
    err_ = GetLink(fd, name_, &ifindex, &flags, &kind_);
    if (err_ == ENODEV) { err_ = 0; return; }
    if (err_) { what_ = "link " + name_; return; }
    if (!wantKind_.empty() && kind_ != wantKind_) return;
    NlMessages m;
    m.Begin(RTM_DELLINK, 0);
    ifinfomsg ifi = {};
    ifi.ifi_family = AF_UNSPEC;
    ifi.ifi_index = ifindex;
    m.Payload(&ifi, sizeof(ifi));
    err_ = RunRequest(fd, m, [](const nlmsghdr*) {});
    if (err_ == ENODEV) { err_ = 0; return; }  // gone in between: what was asked holds
    if (err_) what_ = "deleting link " + name_;
    else deleted_ = true;
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object r = Napi::Object::New(env);
    r.Set("deleted", Napi::Boolean::New(env, deleted_));
    r.Set("kind", Napi::String::New(env, kind_));
    return r;
  }

  std::string name_, wantKind_, netns_, kind_;
  bool deleted_ = false;
};

class LinkWorker : public PromiseWorker {
 public:
  LinkWorker(Napi::Env env, std::string name, std::string kind, bool up, std::string netns)
      : PromiseWorker(env), name_(std::move(name)), kind_(std::move(kind)), up_(up), netns_(std::move(netns)) {}

 private:
  void Execute() override {
    UniqueFd fd(OpenNetlinkSocket(NETLINK_ROUTE, netns_, 0, 0));
    if (fd < 0) { err_ = -fd; what_ = "rtnetlink socket"; return; }
    unsigned flags = 0;
    err_ = GetLink(fd, name_, &ifindex_, &flags);
    if (err_ == ENODEV && !kind_.empty()) {
      NlMessages m;
      m.Begin(RTM_NEWLINK, NLM_F_CREATE | NLM_F_EXCL);
      ifinfomsg ifi = {};
      ifi.ifi_family = AF_UNSPEC;
      m.Payload(&ifi, sizeof(ifi));
      m.PutStr(IFLA_IFNAME, name_);
      size_t li = m.Nest(IFLA_LINKINFO);
      m.PutStr(IFLA_INFO_KIND, kind_);
      m.End(li);
      err_ = RunRequest(fd, m, [](const nlmsghdr*) {});
      if (err_ == 0) { created_ = true; err_ = GetLink(fd, name_, &ifindex_, &flags); }
      else what_ = "creating " + kind_ + " link " + name_;
    }
    if (err_ && what_.empty()) what_ = "link " + name_;
    if (!err_ && up_ && !(flags & IFF_UP)) {
      NlMessages m;
      m.Begin(RTM_NEWLINK, 0);
      ifinfomsg ifi = {};
      ifi.ifi_family = AF_UNSPEC;
      ifi.ifi_index = ifindex_;
      ifi.ifi_flags = IFF_UP;
      ifi.ifi_change = IFF_UP;
      m.Payload(&ifi, sizeof(ifi));
      err_ = RunRequest(fd, m, [](const nlmsghdr*) {});
      if (err_) what_ = "setting " + name_ + " up";
      else flags |= IFF_UP;
    }
    isUp_ = flags & IFF_UP;
   
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object r = Napi::Object::New(env);
    r.Set("ifindex", Napi::Number::New(env, ifindex_));
    r.Set("created", Napi::Boolean::New(env, created_));
    r.Set("up", Napi::Boolean::New(env, isUp_));
    return r;
  }

  std::string name_, kind_;
  bool up_;
  std::string netns_;
  int ifindex_ = 0;
  bool created_ = false, isUp_ = false;
};

struct LinkRow {
  std::string name, kind;
  int ifindex = 0;
  unsigned flags = 0;
  int master = 0;
};

// Every link of the namespace, for choices made by what the node has (the flowtable's devices).
class LinksWorker : public PromiseWorker {
 public:
  LinksWorker(Napi::Env env, std::string netns)
      : PromiseWorker(env, "link dump"), netns_(std::move(netns)) {}

 private:
  void Execute() override {
    UniqueFd fd(OpenNetlinkSocket(NETLINK_ROUTE, netns_, 0, 0));
    if (fd < 0) { err_ = -fd; return; }
    for (int attempt = 0; attempt < 5; attempt++) {  // EINTR: the dump changed under us, start again
      rows_.clear();
      NlMessages m;
      m.Begin(RTM_GETLINK, 0);
      ifinfomsg ifi = {};
      ifi.ifi_family = AF_UNSPEC;
      m.Payload(&ifi, sizeof(ifi));
      err_ = RunDump(fd, m, [&](const nlmsghdr* h) {
        if (h->nlmsg_type != RTM_NEWLINK) return;
        const ifinfomsg* r = (const ifinfomsg*)NLMSG_DATA(h);
        LinkRow row;
        row.ifindex = r->ifi_index;
        row.flags = r->ifi_flags;
        ForEachAttr((const uint8_t*)r + NLMSG_ALIGN(sizeof(ifinfomsg)), h->nlmsg_len - NLMSG_HDRLEN - NLMSG_ALIGN(sizeof(ifinfomsg)),
                    [&](const NlAttrView& a) {
                      if (a.type() == IFLA_IFNAME) row.name = std::string((const char*)a.data(), strnlen((const char*)a.data(), a.len()));
                      else if (a.type() == IFLA_MASTER && a.len() >= 4) memcpy(&row.master, a.data(), 4);
                      else if (a.type() == IFLA_LINKINFO)
                        ForEachAttr(a.data(), a.len(), [&](const NlAttrView& i) {
                          if (i.type() == IFLA_INFO_KIND) row.kind = std::string((const char*)i.data(), strnlen((const char*)i.data(), i.len()));
                        });
                    });
        rows_.push_back(std::move(row));
      });
      if (err_ != EINTR) break;
    }
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Array out = Napi::Array::New(env, rows_.size());
    for (size_t i = 0; i < rows_.size(); i++) {
      Napi::Object o = Napi::Object::New(env);
      o.Set("name", rows_[i].name);
      o.Set("ifindex", rows_[i].ifindex);
      o.Set("flags", rows_[i].flags);
      o.Set("master", rows_[i].master);
      o.Set("kind", rows_[i].kind);
      out.Set(i, o);
    }
    return out;
  }

  std::string netns_;
  std::vector<LinkRow> rows_;
};

class AddrsWorker : public PromiseWorker {
 public:
  AddrsWorker(Napi::Env env, int ifindex, std::string netns)
      : PromiseWorker(env, "address dump"), ifindex_(ifindex), netns_(std::move(netns)) {}

 private:
  void Execute() override {
    UniqueFd fd(OpenNetlinkSocket(NETLINK_ROUTE, netns_, 0, 0));
    if (fd < 0) { err_ = -fd; return; }
    for (int attempt = 0; attempt < 5; attempt++) {
      out_.clear();
      NlMessages m;
      m.Begin(RTM_GETADDR, 0);
      ifaddrmsg ifa = {};
      ifa.ifa_family = AF_UNSPEC;
      m.Payload(&ifa, sizeof(ifa));
      err_ = RunDump(fd, m, [&](const nlmsghdr* h) {
        if (h->nlmsg_type != RTM_NEWADDR) return;
        const ifaddrmsg* a = (const ifaddrmsg*)NLMSG_DATA(h);
        if (ifindex_ && (int)a->ifa_index != ifindex_) return;
        out_.resize(out_.size() + kAddrRec, 0);
        uint8_t* r = out_.data() + out_.size() - kAddrRec;
        uint32_t idx = a->ifa_index;
        memcpy(r, &idx, 4);
        r[4] = a->ifa_family;
        r[5] = a->ifa_prefixlen;
        r[6] = a->ifa_scope;
        r[7] = (uint8_t)a->ifa_flags;
        // IFA_LOCAL is the address itself (IFA_ADDRESS is the peer on point-to-point links); IPv6 has only IFA_ADDRESS.
        bool local = false;
        ForEachAttr((const uint8_t*)a + NLMSG_ALIGN(sizeof(ifaddrmsg)), h->nlmsg_len - NLMSG_HDRLEN - NLMSG_ALIGN(sizeof(ifaddrmsg)),
                    [&](const NlAttrView& x) {
                      if (x.type() == IFA_LOCAL || (x.type() == IFA_ADDRESS && !local)) {
                        memcpy(r + 8, x.data(), x.len() < 16 ? x.len() : 16);
                        if (x.type() == IFA_LOCAL) local = true;
                      }
                    });
      });
      if (err_ != EINTR) break;
    }
   
  }

  Napi::Value Result(Napi::Env env) override {
    return Napi::Buffer<uint8_t>::Copy(env, out_.data(), out_.size());
  }

  int ifindex_;
  std::string netns_;
  std::vector<uint8_t> out_;
};

class AddrApplyWorker : public PromiseWorker {
 public:
  AddrApplyWorker(Napi::Env env, Napi::Buffer<uint8_t> input, std::string netns)
      : PromiseWorker(env), netns_(std::move(netns)) {
    ref_ = Napi::Persistent(input.As<Napi::Object>());
    data_ = input.Data();
    count_ = input.Length() / kAddrRec;
  }

 private:
  void Execute() override {
    double t0 = NowMs();
    NlMessages m;
    for (size_t i = 0; i < count_; i++) {
      const uint8_t* r = data_ + i * kAddrRec;
      uint32_t idx;
      memcpy(&idx, r, 4);
      uint8_t fam = r[4], op = r[6];
      if ((fam != AF_INET && fam != AF_INET6) || (op != 1 && op != 2)) {
        err_ = EINVAL;
        what_ = "rtnlAddrApply: record " + std::to_string(i) + ": family must be 2|10 and op 1 (add) | 2 (delete)";
        return;
      }
      m.Begin(op == 1 ? RTM_NEWADDR : RTM_DELADDR, op == 1 ? NLM_F_CREATE | NLM_F_REPLACE : 0);
      ifaddrmsg ifa = {};
      ifa.ifa_family = fam;
      ifa.ifa_prefixlen = r[5];
      ifa.ifa_index = idx;
      m.Payload(&ifa, sizeof(ifa));
      size_t alen = fam == AF_INET ? 4 : 16;
      m.Put(IFA_LOCAL, r + 8, alen);
      m.Put(IFA_ADDRESS, r + 8, alen);
      // No duplicate address detection: a service address must be usable at once.
      if (op == 1 && fam == AF_INET6) m.PutU32(IFA_FLAGS, IFA_F_NODAD);
    }
    UniqueFd fd(OpenNetlinkSocket(NETLINK_ROUTE, netns_));
    if (fd < 0) { err_ = -fd; what_ = "rtnetlink socket"; return; }
    result_ = SendBatch(fd, m);
    if (result_.sysErr) { err_ = result_.sysErr; what_ = result_.sysWhat; }
   
    messages_ = m.count();
    bytes_ = m.bytes();
    ms_ = NowMs() - t0;
  }

  Napi::Value Result(Napi::Env env) override { return SendResultToJs(env, result_, messages_, bytes_, ms_); }

  Napi::ObjectReference ref_;
  const uint8_t* data_;
  size_t count_;
  std::string netns_;
  NlSendResult result_;
  size_t messages_ = 0, bytes_ = 0;
  double ms_ = 0;
};

}  // namespace

Napi::Value RtnlLink(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::TypeError::New(env, "rtnlLink(name, {kind?, up?}, netns?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string kind;
  bool up = false;
  if (info.Length() > 1 && info[1].IsObject()) {
    Napi::Object o = info[1].As<Napi::Object>();
    if (!o.Get("kind").IsUndefined() && !o.Get("kind").IsString()) {
      Napi::TypeError::New(env, "rtnlLink: kind is a link kind string such as \"dummy\"").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    if (o.Get("kind").IsString()) kind = o.Get("kind").As<Napi::String>().Utf8Value();
    up = o.Get("up").ToBoolean().Value();
  }
  std::string netns;
  if (!NetnsArg(info, 2, &netns)) return env.Undefined();
  return (new LinkWorker(env, info[0].As<Napi::String>().Utf8Value(), kind, up, netns))->Start();
}

Napi::Value RtnlLinkDelete(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsString()) {
    Napi::TypeError::New(env, "rtnlLinkDelete(name, {kind?}, netns?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string kind;
  if (info.Length() > 1 && info[1].IsObject()) {
    Napi::Value k = info[1].As<Napi::Object>().Get("kind");
    if (!k.IsUndefined() && !k.IsString()) {
      Napi::TypeError::New(env, "rtnlLinkDelete: kind is a link kind string such as \"dummy\"").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    if (k.IsString()) kind = k.As<Napi::String>().Utf8Value();
  }
  std::string netns;
  if (!NetnsArg(info, 2, &netns)) return env.Undefined();
  return (new LinkDeleteWorker(env, info[0].As<Napi::String>().Utf8Value(), kind, netns))->Start();
}

Napi::Value RtnlAddrs(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() > 0 && !info[0].IsNumber() && !info[0].IsUndefined()) {
    Napi::TypeError::New(env, "rtnlAddrs(ifindex: number (0: every link), netns?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int ifindex = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().Int32Value() : 0;
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new AddrsWorker(env, ifindex, netns))->Start();
}

Napi::Value RtnlLinks(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string netns;
  if (!NetnsArg(info, 0, &netns)) return env.Undefined();
  return (new LinksWorker(env, netns))->Start();
}

Napi::Value RtnlAddrApply(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsBuffer() || info[0].As<Napi::Buffer<uint8_t>>().Length() % kAddrRec != 0) {
    Napi::TypeError::New(env, "rtnlAddrApply(records: Buffer of 24-byte records, netns?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new AddrApplyWorker(env, info[0].As<Napi::Buffer<uint8_t>>(), netns))->Start();
}

}  // namespace kpng
