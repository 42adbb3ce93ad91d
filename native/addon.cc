// kpng native addon entry point: exports the nftables transport, listing and conntrack cleanup, IPVS
// (generic netlink), ipset destroy (clean-up), rtnetlink links/addresses, sysctls, the eBPF socket load balancer (libbpf), unix
// socket peer credentials, plus the libnftnl attribute ids the TypeScript encoder relies on (checked by a test).
#include "common.h"

#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

namespace kpng {

static Napi::Object Constants(Napi::Env env) {
  Napi::Object c = Napi::Object::New(env);
#define C(name) c.Set(#name, Napi::Number::New(env, name))
  C(NFTNL_TABLE_NAME); C(NFTNL_TABLE_FLAGS); C(NFTNL_TABLE_USERDATA);
  C(NFTNL_CHAIN_NAME); C(NFTNL_CHAIN_TABLE); C(NFTNL_CHAIN_HOOKNUM); C(NFTNL_CHAIN_PRIO); C(NFTNL_CHAIN_POLICY);
  C(NFTNL_CHAIN_TYPE); C(NFTNL_CHAIN_DEV); C(NFTNL_CHAIN_USERDATA);
  C(NFTNL_SET_TABLE); C(NFTNL_SET_NAME); C(NFTNL_SET_FLAGS); C(NFTNL_SET_KEY_TYPE); C(NFTNL_SET_KEY_LEN);
  C(NFTNL_SET_DATA_TYPE); C(NFTNL_SET_DATA_LEN); C(NFTNL_SET_ID); C(NFTNL_SET_POLICY); C(NFTNL_SET_DESC_SIZE);
  C(NFTNL_SET_TIMEOUT); C(NFTNL_SET_GC_INTERVAL); C(NFTNL_SET_USERDATA); C(NFTNL_SET_DESC_CONCAT);
  C(NFTNL_RULE_TABLE); C(NFTNL_RULE_CHAIN); C(NFTNL_RULE_HANDLE); C(NFTNL_RULE_POSITION); C(NFTNL_RULE_USERDATA);
  C(NFTNL_EXPR_PAYLOAD_DREG); C(NFTNL_EXPR_PAYLOAD_SREG); C(NFTNL_EXPR_NG_OFFSET); C(NFTNL_EXPR_META_SREG);
  C(NFTNL_EXPR_CMP_DATA); C(NFTNL_EXPR_RANGE_TO_DATA); C(NFTNL_EXPR_IMM_CHAIN); C(NFTNL_EXPR_CTR_BYTES);
  C(NFTNL_EXPR_BITWISE_XOR); C(NFTNL_EXPR_NAT_FLAGS); C(NFTNL_EXPR_LOOKUP_FLAGS); C(NFTNL_EXPR_DYNSET_SET_ID);
  C(NFTNL_EXPR_LOG_LEVEL); C(NFTNL_EXPR_CT_SREG); C(NFTNL_EXPR_LIMIT_FLAGS); C(NFTNL_EXPR_REJECT_CODE);
  C(NFTNL_EXPR_MASQ_REG_PROTO_MAX); C(NFTNL_EXPR_FIB_FLAGS);
#undef C
  return c;
}

}  // namespace kpng

static Napi::Object InitKpng(Napi::Env env, Napi::Object exports) {
  using namespace kpng;
  exports.Set("nftApply", Napi::Function::New(env, NftApply, "nftApply"));
  exports.Set("nftCloseSockets", Napi::Function::New(env, NftCloseSockets, "nftCloseSockets"));
  exports.Set("nftList", Napi::Function::New(env, NftList, "nftList"));
  exports.Set("nftListTables", Napi::Function::New(env, NftListTables, "nftListTables"));
  exports.Set("conntrackDelete", Napi::Function::New(env, ConntrackDelete, "conntrackDelete"));
  exports.Set("ipvsApply", Napi::Function::New(env, IpvsApply, "ipvsApply"));
  exports.Set("ipvsDump", Napi::Function::New(env, IpvsDump, "ipvsDump"));
  exports.Set("ipvsConfig", Napi::Function::New(env, IpvsConfig, "ipvsConfig"));
  exports.Set("ipvsInfo", Napi::Function::New(env, IpvsInfo, "ipvsInfo"));
  exports.Set("rtnlLink", Napi::Function::New(env, RtnlLink, "rtnlLink"));
  exports.Set("rtnlLinkDelete", Napi::Function::New(env, RtnlLinkDelete, "rtnlLinkDelete"));
  exports.Set("ipsetDestroy", Napi::Function::New(env, IpsetDestroy, "ipsetDestroy"));
  exports.Set("rtnlAddrs", Napi::Function::New(env, RtnlAddrs, "rtnlAddrs"));
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
  exports.Set("constants", Constants(env));
  exports.Set("abi", Napi::Number::New(env, 1));
  return exports;
}

NODE_API_MODULE(kpng_native, InitKpng)
