// Entry point of the test addon (test/helpers/test-native.ts loads it): the full nftables listing and
// the libnftnl attribute ids the TypeScript encoder relies on, checked against the headers by a test.
#include "test_native.h"

#include <libnftnl/chain.h>
#include <libnftnl/expr.h>
#include <libnftnl/flowtable.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

namespace kpng {

Napi::Object NftnlConstants(Napi::Env env) {
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
  C(NFTNL_FLOWTABLE_NAME); C(NFTNL_FLOWTABLE_TABLE); C(NFTNL_FLOWTABLE_HOOKNUM); C(NFTNL_FLOWTABLE_PRIO);
  C(NFTNL_FLOWTABLE_DEVICES); C(NFTNL_FLOWTABLE_FLAGS);
  C(NFTNL_EXPR_BYTEORDER_DREG); C(NFTNL_EXPR_BYTEORDER_SREG); C(NFTNL_EXPR_BYTEORDER_OP); C(NFTNL_EXPR_BYTEORDER_LEN);
  C(NFTNL_EXPR_BYTEORDER_SIZE); C(NFTNL_EXPR_FLOW_TABLE_NAME);
#undef C
  return c;
}

}  // namespace kpng

static Napi::Object InitKpngTest(Napi::Env env, Napi::Object exports) {
  exports.Set("nftList", Napi::Function::New(env, kpng::NftList, "nftList"));
  exports.Set("constants", kpng::NftnlConstants(env));
  return exports;
}

NODE_API_MODULE(kpng_test_native, InitKpngTest)
