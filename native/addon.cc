// kpng native addon entry point: exports the nftables transport and change monitor, the clean-up's listing and conntrack
// cleanup, IPVS (generic netlink), ipset destroy and iptables-legacy chain removal (clean-up),
// rtnetlink links/addresses, sysctls, the eBPF socket load balancer (libbpf), unix socket peer
// credentials. What only tests use is in the test addon (test/native/), which is never packed.
#include "common.h"

static Napi::Object InitKpng(Napi::Env env, Napi::Object exports) {
  using namespace kpng;
  exports.Set("nftApply", Napi::Function::New(env, NftApply, "nftApply"));
  exports.Set("nftCloseSockets", Napi::Function::New(env, NftCloseSockets, "nftCloseSockets"));
  exports.Set("nftListChains", Napi::Function::New(env, NftListChains, "nftListChains"));
  exports.Set("nftListTables", Napi::Function::New(env, NftListTables, "nftListTables"));
  exports.Set("nftMonitor", Napi::Function::New(env, NftMonitor, "nftMonitor"));
  exports.Set("conntrackDelete", Napi::Function::New(env, ConntrackDelete, "conntrackDelete"));
  exports.Set("ipvsApply", Napi::Function::New(env, IpvsApply, "ipvsApply"));
  exports.Set("ipvsDump", Napi::Function::New(env, IpvsDump, "ipvsDump"));
  exports.Set("ipvsConfig", Napi::Function::New(env, IpvsConfig, "ipvsConfig"));
  exports.Set("ipvsInfo", Napi::Function::New(env, IpvsInfo, "ipvsInfo"));
  exports.Set("rtnlLink", Napi::Function::New(env, RtnlLink, "rtnlLink"));
  exports.Set("rtnlLinkDelete", Napi::Function::New(env, RtnlLinkDelete, "rtnlLinkDelete"));
  exports.Set("ipsetDestroy", Napi::Function::New(env, IpsetDestroy, "ipsetDestroy"));
  exports.Set("iptLegacyTables", Napi::Function::New(env, IptLegacyTables, "iptLegacyTables"));
  exports.Set("iptLegacyList", Napi::Function::New(env, IptLegacyList, "iptLegacyList"));
  exports.Set("iptLegacyRemoveChains", Napi::Function::New(env, IptLegacyRemoveChains, "iptLegacyRemoveChains"));
  exports.Set("rtnlAddrs", Napi::Function::New(env, RtnlAddrs, "rtnlAddrs"));
  exports.Set("rtnlLinks", Napi::Function::New(env, RtnlLinks, "rtnlLinks"));
  exports.Set("rtnlAddrApply", Napi::Function::New(env, RtnlAddrApply, "rtnlAddrApply"));
  exports.Set("sysctl", Napi::Function::New(env, Sysctl, "sysctl"));
  exports.Set("ebpfOpen", Napi::Function::New(env, EbpfOpen, "ebpfOpen"));
  exports.Set("ebpfMapApply", Napi::Function::New(env, EbpfMapApply, "ebpfMapApply"));
  exports.Set("ebpfMapDump", Napi::Function::New(env, EbpfMapDump, "ebpfMapDump"));
  exports.Set("ebpfDestroySockets", Napi::Function::New(env, EbpfDestroySockets, "ebpfDestroySockets"));
  exports.Set("ebpfSevered", Napi::Function::New(env, EbpfSevered, "ebpfSevered"));
  exports.Set("ebpfActivate", Napi::Function::New(env, EbpfActivate, "ebpfActivate"));
  exports.Set("ebpfClose", Napi::Function::New(env, EbpfClose, "ebpfClose"));
  exports.Set("ebpfCleanup", Napi::Function::New(env, EbpfCleanup, "ebpfCleanup"));
  exports.Set("peerCredentials", Napi::Function::New(env, PeerCredentials, "peerCredentials"));
  exports.Set("mallocTune", Napi::Function::New(env, MallocTune, "mallocTune"));
  exports.Set("mallocTrim", Napi::Function::New(env, MallocTrim, "mallocTrim"));
  exports.Set("abi", Napi::Number::New(env, 1));
  return exports;
}

NODE_API_MODULE(kpng_native, InitKpng)
