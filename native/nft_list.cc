// nftables listing over netlink dumps (tables; one table's chains, sets with elements, rules with
// handles, comments and expressions), on a worker thread, decoded with libnftnl.
#include "common.h"

#include <arpa/inet.h>
#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <linux/netlink.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include <atomic>
#include <functional>
#include <vector>

namespace kpng {

namespace {

// Comment (NUL-terminated string) of a libnftnl userdata TLV blob.
std::string UdataComment(const void* data, uint32_t len, uint8_t type) {
  const uint8_t* p = (const uint8_t*)data;
  uint32_t i = 0;
  while (data && i + 2 <= len) {
    uint8_t t = p[i], l = p[i + 1];
    if (i + 2 + l > len) break;
    if (t == type && l > 0) return std::string((const char*)p + i + 2, strnlen((const char*)p + i + 2, l));
    i += 2 + l;
  }
  return "";
}

// Sends a dump request built by `build` and feeds every reply message to `cb`. Returns 0 or errno.
int Dump(int fd, uint16_t type, uint8_t family, uint32_t seq, const std::function<void(nlmsghdr*)>& build,
         const std::function<void(const nlmsghdr*)>& cb) {
  std::vector<char> req(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = nftnl_nlmsg_build_hdr(req.data(), type, family, NLM_F_DUMP, seq);
  if (build) build(nlh);
  sockaddr_nl dst = {};
  dst.nl_family = AF_NETLINK;
  if (sendto(fd, nlh, nlh->nlmsg_len, 0, (sockaddr*)&dst, sizeof(dst)) < 0) return errno;
  std::vector<char> buf(1 << 17);
  for (;;) {
    ssize_t n = recv(fd, buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    int left = (int)n;
    for (nlmsghdr* m = (nlmsghdr*)buf.data(); mnl_nlmsg_ok(m, left); m = mnl_nlmsg_next(m, &left)) {
      if (m->nlmsg_seq != seq) continue;
      if (m->nlmsg_type == NLMSG_DONE) return 0;
      if (m->nlmsg_type == NLMSG_ERROR) {
        nlmsgerr* e = (nlmsgerr*)mnl_nlmsg_get_payload(m);
        if (e->error) return -e->error;
        continue;
      }
      cb(m);
    }
  }
}

struct TableRec {
  uint32_t family;
  std::string name, comment;
  uint64_t handle;
  uint32_t flags;
};
struct ChainRec {
  uint32_t family;
  std::string table, name, type, dev, comment;
  uint64_t handle;
  bool base = false, hasPolicy = false;
  uint32_t hooknum = 0, policy = 0;
  int32_t prio = 0;
};
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
  uint32_t family;
  std::string table, name, comment;
  uint64_t handle, timeout = 0;
  uint32_t flags, keyType, keyLen, dataType = 0, dataLen = 0, size = 0;
  bool isMap = false, hasTimeout = false;
  std::vector<uint8_t> blob;
  std::vector<ElemRec> elems;
};
struct ExprRec {
  std::string name;
  std::vector<std::pair<uint16_t, std::vector<uint8_t>>> attrs;
};
struct RuleRec {
  uint32_t family;
  std::string table, chain, comment;
  uint64_t handle;
  std::vector<ExprRec> exprs;
};

Span Put(std::vector<uint8_t>& blob, const void* p, uint32_t len) {
  Span s;
  s.off = blob.size();
  s.len = len;
  s.set = true;
  blob.insert(blob.end(), (const uint8_t*)p, (const uint8_t*)p + len);
  return s;
}

std::string Str(const char* s) { return s ? s : ""; }

int DumpTables(int fd, uint32_t seq, std::vector<TableRec>& out) {
  return Dump(fd, NFT_MSG_GETTABLE, NFPROTO_UNSPEC, seq, nullptr, [&](const nlmsghdr* m) {
    nftnl_table* t = nftnl_table_alloc();
    if (nftnl_table_nlmsg_parse(m, t) == 0) {
      TableRec r;
      r.family = nftnl_table_get_u32(t, NFTNL_TABLE_FAMILY);
      r.name = Str(nftnl_table_get_str(t, NFTNL_TABLE_NAME));
      r.handle = nftnl_table_get_u64(t, NFTNL_TABLE_HANDLE);
      r.flags = nftnl_table_get_u32(t, NFTNL_TABLE_FLAGS);
      if (nftnl_table_is_set(t, NFTNL_TABLE_USERDATA)) {
        uint32_t len;
        const void* ud = nftnl_table_get_data(t, NFTNL_TABLE_USERDATA, &len);
        r.comment = UdataComment(ud, len, 0);
      }
      out.push_back(std::move(r));
    }
    nftnl_table_free(t);
  });
}

Napi::Object TableToJs(Napi::Env env, const TableRec& t) {
  Napi::Object o = Napi::Object::New(env);
  o.Set("family", Napi::Number::New(env, t.family));
  o.Set("name", t.name);
  o.Set("handle", Napi::Number::New(env, (double)t.handle));
  o.Set("flags", Napi::Number::New(env, t.flags));
  if (!t.comment.empty()) o.Set("comment", t.comment);
  return o;
}

uint32_t SeqBase() {
  static std::atomic<uint32_t> s{(uint32_t)time(nullptr)};
  return s.fetch_add(1024);
}

class ListTablesWorker : public Napi::AsyncWorker {
 public:
  ListTablesWorker(Napi::Env env, std::string netns)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), netns_(std::move(netns)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }
  void Execute() override {
    UniqueFd fd(OpenNetfilterSocket(netns_, 1 << 20, 0));
    if (fd < 0) { err_ = -fd; return; }
    err_ = DumpTables(fd, SeqBase(), tables_);
  }
  void OnOK() override {
    Napi::Env env = Env();
    if (err_) { deferred_.Reject(MakeErrnoError(env, err_, "list tables").Value()); return; }
    Napi::Array a = Napi::Array::New(env, tables_.size());
    for (size_t i = 0; i < tables_.size(); i++) a[i] = TableToJs(env, tables_[i]);
    deferred_.Resolve(a);
  }

 private:
  Napi::Promise::Deferred deferred_;
  std::string netns_;
  int err_ = 0;
  std::vector<TableRec> tables_;
};

class ListWorker : public Napi::AsyncWorker {
 public:
  ListWorker(Napi::Env env, uint32_t family, std::string table, bool elements, std::string netns)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), family_(family),
        table_(std::move(table)), elements_(elements), netns_(std::move(netns)) {}
  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    UniqueFd fd(OpenNetfilterSocket(netns_, 8 << 20, 0));
    if (fd < 0) { err_ = -fd; what_ = "netlink socket"; return; }
    uint32_t seq = SeqBase();
    std::vector<TableRec> tables;
    if ((err_ = DumpTables(fd, seq++, tables))) { what_ = "dump tables"; return; }
    for (auto& t : tables)
      if (t.family == family_ && t.name == table_) { table_rec_ = t; found_ = true; }
    if (!found_) { err_ = ENOENT; what_ = "table " + table_; return; }

    err_ = Dump(fd, NFT_MSG_GETCHAIN, family_, seq++, nullptr, [&](const nlmsghdr* m) {
      nftnl_chain* c = nftnl_chain_alloc();
      if (nftnl_chain_nlmsg_parse(m, c) == 0 && Str(nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE)) == table_) {
        ChainRec r;
        r.family = nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY);
        r.table = table_;
        r.name = Str(nftnl_chain_get_str(c, NFTNL_CHAIN_NAME));
        r.handle = nftnl_chain_get_u64(c, NFTNL_CHAIN_HANDLE);
        if (nftnl_chain_is_set(c, NFTNL_CHAIN_HOOKNUM)) {
          r.base = true;
          r.hooknum = nftnl_chain_get_u32(c, NFTNL_CHAIN_HOOKNUM);
          r.prio = nftnl_chain_get_s32(c, NFTNL_CHAIN_PRIO);
          r.type = Str(nftnl_chain_get_str(c, NFTNL_CHAIN_TYPE));
          if (nftnl_chain_is_set(c, NFTNL_CHAIN_DEV)) r.dev = Str(nftnl_chain_get_str(c, NFTNL_CHAIN_DEV));
        }
        if (nftnl_chain_is_set(c, NFTNL_CHAIN_POLICY)) {
          r.hasPolicy = true;
          r.policy = nftnl_chain_get_u32(c, NFTNL_CHAIN_POLICY);
        }
        if (nftnl_chain_is_set(c, NFTNL_CHAIN_USERDATA)) {
          uint32_t len;
          const void* ud = nftnl_chain_get_data(c, NFTNL_CHAIN_USERDATA, &len);
          r.comment = UdataComment(ud, len, 0);
        }
        chains_.push_back(std::move(r));
      }
      nftnl_chain_free(c);
    });
    if (err_) { what_ = "dump chains"; return; }

    err_ = Dump(fd, NFT_MSG_GETSET, family_, seq++,
                [&](nlmsghdr* nlh) { mnl_attr_put_strz(nlh, NFTA_SET_TABLE, table_.c_str()); },
                [&](const nlmsghdr* m) {
                  nftnl_set* s = nftnl_set_alloc();
                  if (nftnl_set_nlmsg_parse(m, s) == 0 && Str(nftnl_set_get_str(s, NFTNL_SET_TABLE)) == table_) {
                    SetRec r;
                    r.family = nftnl_set_get_u32(s, NFTNL_SET_FAMILY);
                    r.table = table_;
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
                    sets_.push_back(std::move(r));
                  }
                  nftnl_set_free(s);
                });
    if (err_) { what_ = "dump sets"; return; }

    if (elements_) {
      for (auto& set : sets_) {
        err_ = Dump(fd, NFT_MSG_GETSETELEM, family_, seq++,
                    [&](nlmsghdr* nlh) {
                      mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, table_.c_str());
                      mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set.name.c_str());
                    },
                    [&](const nlmsghdr* m) { ParseElems(m, set); });
        if (err_) { what_ = "dump elements of set " + set.name; return; }
      }
    }

    err_ = Dump(fd, NFT_MSG_GETRULE, family_, seq++,
                [&](nlmsghdr* nlh) { mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, table_.c_str()); },
                [&](const nlmsghdr* m) { ParseRule(m); });
    if (err_) what_ = "dump rules";
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

  void ParseRule(const nlmsghdr* m) {
    nftnl_rule* r = nftnl_rule_alloc();
    if (nftnl_rule_nlmsg_parse(m, r) == 0 && Str(nftnl_rule_get_str(r, NFTNL_RULE_TABLE)) == table_) {
      RuleRec rec;
      rec.family = nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY);
      rec.table = table_;
      rec.chain = Str(nftnl_rule_get_str(r, NFTNL_RULE_CHAIN));
      rec.handle = nftnl_rule_get_u64(r, NFTNL_RULE_HANDLE);
      if (nftnl_rule_is_set(r, NFTNL_RULE_USERDATA)) {
        uint32_t len;
        const void* ud = nftnl_rule_get_data(r, NFTNL_RULE_USERDATA, &len);
        rec.comment = UdataComment(ud, len, 0);
      }
      nftnl_expr_iter* it = nftnl_expr_iter_create(r);
      for (nftnl_expr* e = nftnl_expr_iter_next(it); e; e = nftnl_expr_iter_next(it)) {
        ExprRec x;
        x.name = Str(nftnl_expr_get_str(e, NFTNL_EXPR_NAME));
        for (uint16_t id = 1; id <= 12; id++) {
          if (x.name == "dynset" && id >= 7) break;  // nested expressions: pointers, not values
          if (!nftnl_expr_is_set(e, id)) continue;
          uint32_t len = 0;
          const void* p = nftnl_expr_get(e, id, &len);
          if (!p) continue;
          x.attrs.emplace_back(id, std::vector<uint8_t>((const uint8_t*)p, (const uint8_t*)p + len));
        }
        rec.exprs.push_back(std::move(x));
      }
      nftnl_expr_iter_destroy(it);
      rules_.push_back(std::move(rec));
    }
    nftnl_rule_free(r);
  }

  void OnOK() override {
    Napi::Env env = Env();
    if (err_) {
      deferred_.Reject(MakeErrnoError(env, err_, what_).Value());
      return;
    }
    Napi::Object out = Napi::Object::New(env);
    out.Set("table", TableToJs(env, table_rec_));
    Napi::Array chains = Napi::Array::New(env, chains_.size());
    for (size_t i = 0; i < chains_.size(); i++) {
      const ChainRec& c = chains_[i];
      Napi::Object o = Napi::Object::New(env);
      o.Set("family", Napi::Number::New(env, c.family));
      o.Set("table", c.table);
      o.Set("name", c.name);
      o.Set("handle", Napi::Number::New(env, (double)c.handle));
      if (c.base) {
        o.Set("hooknum", Napi::Number::New(env, c.hooknum));
        o.Set("priority", Napi::Number::New(env, c.prio));
        o.Set("type", c.type);
        if (!c.dev.empty()) o.Set("device", c.dev);
      }
      if (c.hasPolicy) o.Set("policy", Napi::Number::New(env, c.policy));
      if (!c.comment.empty()) o.Set("comment", c.comment);
      chains[i] = o;
    }
    out.Set("chains", chains);
    Napi::Array sets = Napi::Array::New(env, sets_.size());
    for (size_t i = 0; i < sets_.size(); i++) {
      const SetRec& s = sets_[i];
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
      sets[i] = o;
    }
    out.Set("sets", sets);
    Napi::Array rules = Napi::Array::New(env, rules_.size());
    for (size_t i = 0; i < rules_.size(); i++) {
      const RuleRec& r = rules_[i];
      Napi::Object o = Napi::Object::New(env);
      o.Set("family", Napi::Number::New(env, r.family));
      o.Set("table", r.table);
      o.Set("chain", r.chain);
      o.Set("handle", Napi::Number::New(env, (double)r.handle));
      if (!r.comment.empty()) o.Set("comment", r.comment);
      Napi::Array exprs = Napi::Array::New(env, r.exprs.size());
      for (size_t k = 0; k < r.exprs.size(); k++) {
        Napi::Object xo = Napi::Object::New(env);
        xo.Set("name", r.exprs[k].name);
        Napi::Object attrs = Napi::Object::New(env);
        for (auto& a : r.exprs[k].attrs)
          attrs.Set(Napi::Number::New(env, a.first), Napi::Buffer<uint8_t>::Copy(env, a.second.data(), a.second.size()));
        xo.Set("attrs", attrs);
        exprs[k] = xo;
      }
      o.Set("exprs", exprs);
      rules[i] = o;
    }
    out.Set("rules", rules);
    deferred_.Resolve(out);
  }

 private:
  Napi::Promise::Deferred deferred_;
  uint32_t family_;
  std::string table_;
  bool elements_;
  std::string netns_;
  int err_ = 0;
  std::string what_;
  bool found_ = false;
  TableRec table_rec_;
  std::vector<ChainRec> chains_;
  std::vector<SetRec> sets_;
  std::vector<RuleRec> rules_;
};

}  // namespace

// nftListTables(netns?: string): Promise<{family, name, handle, flags, comment?}[]>
Napi::Value NftListTables(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string netns;
  if (!NetnsArg(info, 0, &netns)) return info.Env().Undefined();
  auto* w = new ListTablesWorker(env, netns);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

// nftList(family: number, table: string, elements: boolean, netns?: string): Promise<raw listing>
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
  auto* w = new ListWorker(env, info[0].As<Napi::Number>().Uint32Value(), info[1].As<Napi::String>().Utf8Value(),
                           elements, netns);
  Napi::Promise p = w->Promise();
  w->Queue();
  return p;
}

}  // namespace kpng
