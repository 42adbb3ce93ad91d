// ipset over nfnetlink (subsystem NFNL_SUBSYS_IPSET, include/uapi/linux/netfilter/ipset/ip_set.h), off
// the JavaScript thread. Only what a clean-up needs:
//   ipsetDestroy(names[], netns?)   destroy sets by name, one message each; failures by name index
//                                   (ENOENT: no such set; 4100 IPSET_ERR_BUSY: still referenced)
// ipset has no transactions: each message stands alone, like IPVS (netlink_batch.h).
#include "netlink_batch.h"
#include "promise_worker.h"

#include <linux/netfilter/ipset/ip_set.h>
#include <linux/netfilter/nfnetlink.h>
#include <sys/socket.h>

#include <string>
#include <vector>

namespace kpng {

namespace {

class DestroyWorker : public PromiseWorker {
 public:
  DestroyWorker(Napi::Env env, std::vector<std::string> names, std::string netns)
      : PromiseWorker(env), names_(std::move(names)), netns_(std::move(netns)) {}

 private:
  void Execute() override {
    double t0 = NowMs();
    UniqueFd fd(OpenNetlinkSocket(NETLINK_NETFILTER, netns_, 0, 0));
    if (fd < 0) { err_ = -fd; what_ = "nfnetlink socket"; return; }
    NlMessages msgs;
    for (const std::string& n : names_) {
      // NLM_F_EXCL: an absent set is ENOENT (without it the kernel answers 0, as for `ipset -exist`), so
      // the caller can tell what it destroyed from what was not there.
      msgs.Begin((NFNL_SUBSYS_IPSET << 8) | IPSET_CMD_DESTROY, NLM_F_EXCL);
      nfgenmsg g = {};
      g.nfgen_family = AF_INET;  // not read by DESTROY; what the ipset tool sends
      g.version = NFNETLINK_V0;
      msgs.Payload(&g, sizeof(g));
      uint8_t proto = IPSET_PROTOCOL;
      msgs.Put(IPSET_ATTR_PROTOCOL, &proto, 1);
      msgs.PutStr(IPSET_ATTR_SETNAME, n);
    }
    result_ = SendBatch(fd, msgs);
    if (result_.sysErr) { err_ = result_.sysErr; what_ = result_.sysWhat; }
    messages_ = msgs.count();
    bytes_ = msgs.bytes();
    ms_ = NowMs() - t0;
  }

  Napi::Value Result(Napi::Env env) override { return SendResultToJs(env, result_, messages_, bytes_, ms_); }

  std::vector<std::string> names_;
  std::string netns_;
  NlSendResult result_;
  size_t messages_ = 0, bytes_ = 0;
  double ms_ = 0;
};

}  // namespace

Napi::Value IpsetDestroy(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "ipsetDestroy(names: string[] (1..31 characters each), netns?)";
  if (info.Length() < 1 || !info[0].IsArray()) {
    Napi::TypeError::New(env, usage).ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array a = info[0].As<Napi::Array>();
  std::vector<std::string> names;
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value v = a.Get(i);
    std::string n = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
    if (n.empty() || n.size() >= IPSET_MAXNAMELEN) {
      Napi::TypeError::New(env, usage).ThrowAsJavaScriptException();
      return env.Undefined();
    }
    names.push_back(std::move(n));
  }
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new DestroyWorker(env, std::move(names), netns))->Start();
}

}  // namespace kpng
