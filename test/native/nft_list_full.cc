// The tests' full nftables listing: one table's chains, sets with their capacity and elements (keys,
// data, verdicts, timeouts, comments), and rules with handles, comments and expressions. Decoded by
// test/helpers/nft-list.ts; product code never lists sets, so none of this is in the product addon.
#include "test_native.h"
#include "netlink_batch.h"
#include "promise_worker.h"

#include <linux/netfilter/nf_tables.h>

#include <libmnl/libmnl.h>
#include <libnftnl/set.h>

#include <vector>

namespace kpng {

namespace {

struct Span {
  uint32_t off = 0, len = 0;
  bool set = false;
};
struct ElemRec {
  Span key, keyEnd, data;
  bool hasVerdict = false;
  int32_t verdict = 0;
  std::string chain, comment;
  uint64_t timeout = 0, expires = 0;
  uint32_t flags = 0;
};
struct SetRec {
  uint32_t family = 0;
  std::string table, name, comment;
  uint64_t handle = 0, timeout = 0;
  uint32_t flags = 0, keyType = 0, keyLen = 0, dataType = 0, dataLen = 0, size = 0;
  bool isMap = false, hasTimeout = false;
  std::vector<uint8_t> blob;  // every element's bytes; elements are views into it
  std::vector<ElemRec> elems;
};

Span Put(std::vector<uint8_t>& blob, const void* p, uint32_t len) {
  Span s;
  s.off = blob.size();
  s.len = len;
  s.set = true;
  blob.insert(blob.end(), (const uint8_t*)p, (const uint8_t*)p + len);
  return s;
}

void ParseSet(const nlmsghdr* m, const std::string& table, std::vector<SetRec>& out) {
  nftnl_set* s = nftnl_set_alloc();
  if (nftnl_set_nlmsg_parse(m, s) == 0 && Str(nftnl_set_get_str(s, NFTNL_SET_TABLE)) == table) {
    SetRec r;
    r.family = nftnl_set_get_u32(s, NFTNL_SET_FAMILY);
    r.table = table;
    r.name = Str(nftnl_set_get_str(s, NFTNL_SET_NAME));
    r.handle = nftnl_set_get_u64(s, NFTNL_SET_HANDLE);
    r.flags = nftnl_set_get_u32(s, NFTNL_SET_FLAGS);
    r.keyType = nftnl_set_get_u32(s, NFTNL_SET_KEY_TYPE);
    r.keyLen = nftnl_set_get_u32(s, NFTNL_SET_KEY_LEN);
    if (nftnl_set_is_set(s, NFTNL_SET_DATA_TYPE)) {
      r.isMap = true;
      r.dataType = nftnl_set_get_u32(s, NFTNL_SET_DATA_TYPE);
      r.dataLen = nftnl_set_get_u32(s, NFTNL_SET_DATA_LEN);
    }
    // The capacity given at creation (NFTA_SET_DESC_SIZE); 0 when none was.
    if (nftnl_set_is_set(s, NFTNL_SET_DESC_SIZE)) r.size = nftnl_set_get_u32(s, NFTNL_SET_DESC_SIZE);
    if (nftnl_set_is_set(s, NFTNL_SET_TIMEOUT)) {
      r.hasTimeout = true;
      r.timeout = nftnl_set_get_u64(s, NFTNL_SET_TIMEOUT);
    }
    if (nftnl_set_is_set(s, NFTNL_SET_USERDATA)) {
      uint32_t len;
      const void* ud = nftnl_set_get_data(s, NFTNL_SET_USERDATA, &len);
      r.comment = UdataComment(ud, len, 7);
    }
    out.push_back(std::move(r));
  }
  nftnl_set_free(s);
}

void ParseElems(const nlmsghdr* m, SetRec& set) {
  nftnl_set* s = nftnl_set_alloc();
  if (nftnl_set_elems_nlmsg_parse(m, s) == 0) {
    nftnl_set_elems_iter* it = nftnl_set_elems_iter_create(s);
    for (nftnl_set_elem* e = nftnl_set_elems_iter_next(it); e; e = nftnl_set_elems_iter_next(it)) {
      ElemRec r;
      uint32_t len;
      const void* p;
      if ((p = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY, &len))) r.key = Put(set.blob, p, len);
      if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_KEY_END) && (p = nftnl_set_elem_get(e, NFTNL_SET_ELEM_KEY_END, &len)))
        r.keyEnd = Put(set.blob, p, len);
      if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_DATA) && (p = nftnl_set_elem_get(e, NFTNL_SET_ELEM_DATA, &len)))
        r.data = Put(set.blob, p, len);
      if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_VERDICT)) {
        r.hasVerdict = true;
        r.verdict = (int32_t)nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_VERDICT);
        if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_CHAIN)) r.chain = Str(nftnl_set_elem_get_str(e, NFTNL_SET_ELEM_CHAIN));
      }
      if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_TIMEOUT)) r.timeout = nftnl_set_elem_get_u64(e, NFTNL_SET_ELEM_TIMEOUT);
      if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_EXPIRATION))
        r.expires = nftnl_set_elem_get_u64(e, NFTNL_SET_ELEM_EXPIRATION);
      if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_FLAGS)) r.flags = nftnl_set_elem_get_u32(e, NFTNL_SET_ELEM_FLAGS);
      if (nftnl_set_elem_is_set(e, NFTNL_SET_ELEM_USERDATA) && (p = nftnl_set_elem_get(e, NFTNL_SET_ELEM_USERDATA, &len)))
        r.comment = UdataComment(p, len, 0);
      set.elems.push_back(std::move(r));
    }
    nftnl_set_elems_iter_destroy(it);
  }
  nftnl_set_free(s);
}

Napi::Object SetToJs(Napi::Env env, const SetRec& s) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", Napi::Number::New(env, s.family));
  o.Set("table", s.table);
  o.Set("name", s.name);
  o.Set("handle", Napi::Number::New(env, (double)s.handle));
  o.Set("flags", Napi::Number::New(env, s.flags));
  o.Set("keyType", Napi::Number::New(env, s.keyType));
  o.Set("keyLen", Napi::Number::New(env, s.keyLen));
  if (s.isMap) {
    o.Set("dataType", Napi::Number::New(env, s.dataType));
    o.Set("dataLen", Napi::Number::New(env, s.dataLen));
  }
  if (s.hasTimeout) o.Set("timeout", Napi::Number::New(env, (double)s.timeout));
  if (s.size) o.Set("size", Napi::Number::New(env, s.size));
  if (!s.comment.empty()) o.Set("comment", s.comment);
  Napi::ArrayBuffer ab = Napi::ArrayBuffer::New(env, s.blob.size());
  if (!s.blob.empty()) memcpy(ab.Data(), s.blob.data(), s.blob.size());
  auto view = [&](const Span& sp) { return Napi::Uint8Array::New(env, sp.len, ab, sp.off); };
  Napi::Array elems = Napi::Array::New(env, s.elems.size());
  for (size_t k = 0; k < s.elems.size(); k++) {
    const ElemRec& e = s.elems[k];
    Napi::Object eo = Napi::Object::New(env);
    if (e.key.set) eo.Set("key", view(e.key));
    if (e.keyEnd.set) eo.Set("keyEnd", view(e.keyEnd));
    if (e.data.set) eo.Set("data", view(e.data));
    if (e.hasVerdict) {
      eo.Set("verdictCode", Napi::Number::New(env, e.verdict));
      if (!e.chain.empty()) eo.Set("chain", e.chain);
    }
    if (e.flags) eo.Set("flags", Napi::Number::New(env, e.flags));
    if (e.timeout) eo.Set("timeout", Napi::Number::New(env, (double)e.timeout));
    if (e.expires) eo.Set("expires", Napi::Number::New(env, (double)e.expires));
    if (!e.comment.empty()) eo.Set("comment", e.comment);
    elems[k] = eo;
  }
  o.Set("elements", elems);
  return o;
}

class ListWorker : public PromiseWorker {
 public:
  ListWorker(Napi::Env env, uint32_t family, std::string table, bool elements, std::string netns)
      : PromiseWorker(env), family_(family), table_(std::move(table)), elements_(elements), netns_(std::move(netns)) {}

 private:
  void Execute() override {
    UniqueFd fd(OpenNetlinkSocket(NETLINK_NETFILTER, netns_, 8 << 20, 0));
    if (fd < 0) { err_ = -fd; what_ = "netlink socket"; return; }
    uint32_t seq = NftSeqBase();
    if ((err_ = FindTable(fd, seq++, family_, table_, &table_rec_))) {
      what_ = err_ == ENOENT ? "table " + table_ : "dump tables";
      return;
    }
    if ((err_ = DumpChains(fd, seq++, family_, table_, chains_))) { what_ = "dump chains"; return; }
    err_ = NftDump(fd, NFT_MSG_GETSET, family_, seq++,
                   [&](nlmsghdr* nlh) { mnl_attr_put_strz(nlh, NFTA_SET_TABLE, table_.c_str()); },
                   [&](const nlmsghdr* m) { ParseSet(m, table_, sets_); });
    if (err_) { what_ = "dump sets"; return; }
    if (elements_) {
      for (auto& set : sets_) {
        err_ = NftDump(fd, NFT_MSG_GETSETELEM, family_, seq++,
                       [&](nlmsghdr* nlh) {
                         mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, table_.c_str());
                         mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set.name.c_str());
                       },
                       [&](const nlmsghdr* m) { ParseElems(m, set); });
        if (err_) { what_ = "dump elements of set " + set.name; return; }
      }
    }
    if ((err_ = DumpRules(fd, seq++, family_, table_, rules_))) what_ = "dump rules";
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object out = Napi::Object::New(env);
    out.Set("table", TableToJs(env, table_rec_));
    Napi::Array chains = Napi::Array::New(env, chains_.size());
    for (size_t i = 0; i < chains_.size(); i++) chains[i] = ChainToJs(env, chains_[i]);
    out.Set("chains", chains);
    Napi::Array sets = Napi::Array::New(env, sets_.size());
    for (size_t i = 0; i < sets_.size(); i++) sets[i] = SetToJs(env, sets_[i]);
    out.Set("sets", sets);
    Napi::Array rules = Napi::Array::New(env, rules_.size());
    for (size_t i = 0; i < rules_.size(); i++) rules[i] = RuleToJs(env, rules_[i]);
    out.Set("rules", rules);
    return out;
  }

  uint32_t family_;
  std::string table_;
  bool elements_;
  std::string netns_;
  TableRec table_rec_;
  std::vector<ChainRec> chains_;
  std::vector<SetRec> sets_;
  std::vector<RuleRec> rules_;
};

}  // namespace

// nftList(family: number, table: string, elements?: boolean, netns?: string): Promise<raw listing>
Napi::Value NftList(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsString()) {
    Napi::TypeError::New(env, "nftList(family: number, table: string, elements?: boolean, netns?: string)")
        .ThrowAsJavaScriptException();
    return env.Undefined();
  }
  bool elements = info.Length() < 3 || !info[2].IsBoolean() || info[2].As<Napi::Boolean>().Value();
  std::string netns;
  if (!NetnsArg(info, 3, &netns)) return env.Undefined();
  return (new ListWorker(env, info[0].As<Napi::Number>().Uint32Value(), info[1].As<Napi::String>().Utf8Value(), elements,
                         netns))->Start();
}

}  // namespace kpng
