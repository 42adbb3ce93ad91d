// nf_tables netlink dumps and their records (nft_dump.h).
#include "nft_dump.h"

#include <linux/netfilter.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netfilter/nfnetlink.h>
#include <sys/socket.h>

#include <libmnl/libmnl.h>
#include <libnftnl/chain.h>
#include <libnftnl/common.h>
#include <libnftnl/expr.h>
#include <libnftnl/rule.h>
#include <libnftnl/table.h>

#include <atomic>
#include <ctime>

namespace kpng {

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

uint32_t NftSeqBase() {
  static std::atomic<uint32_t> s{(uint32_t)time(nullptr)};
  return s.fetch_add(1024);
}

int NftDump(int fd, uint16_t type, uint8_t family, uint32_t seq, const std::function<void(nlmsghdr*)>& build,
            const std::function<void(const nlmsghdr*)>& cb) {
  std::vector<char> req(MNL_SOCKET_BUFFER_SIZE);
  nlmsghdr* nlh = nftnl_nlmsg_build_hdr(req.data(), type, family, NLM_F_DUMP, seq);
  if (build) build(nlh);
  sockaddr_nl dst = {};
  dst.nl_family = AF_NETLINK;
  if (sendto(fd, nlh, nlh->nlmsg_len, 0, (sockaddr*)&dst, sizeof(dst)) < 0) return errno;
  RecvBuffer<char> buf(1 << 17);
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

int DumpTables(int fd, uint32_t seq, std::vector<TableRec>& out) {
  return NftDump(fd, NFT_MSG_GETTABLE, NFPROTO_UNSPEC, seq, nullptr, [&](const nlmsghdr* m) {
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

int FindTable(int fd, uint32_t seq, uint32_t family, const std::string& name, TableRec* out) {
  std::vector<TableRec> tables;
  if (int err = DumpTables(fd, seq, tables)) return err;
  for (auto& t : tables)
    if (t.family == family && t.name == name) { *out = t; return 0; }
  return ENOENT;
}

int DumpChains(int fd, uint32_t seq, uint32_t family, const std::string& table, std::vector<ChainRec>& out) {
  return NftDump(fd, NFT_MSG_GETCHAIN, family, seq, nullptr, [&](const nlmsghdr* m) {
    nftnl_chain* c = nftnl_chain_alloc();
    if (nftnl_chain_nlmsg_parse(m, c) == 0 && Str(nftnl_chain_get_str(c, NFTNL_CHAIN_TABLE)) == table) {
      ChainRec r;
      r.family = nftnl_chain_get_u32(c, NFTNL_CHAIN_FAMILY);
      r.table = table;
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
      out.push_back(std::move(r));
    }
    nftnl_chain_free(c);
  });
}

namespace {

void ParseRule(const nlmsghdr* m, const std::string& table, std::vector<RuleRec>& out) {
  nftnl_rule* r = nftnl_rule_alloc();
  if (nftnl_rule_nlmsg_parse(m, r) == 0 && Str(nftnl_rule_get_str(r, NFTNL_RULE_TABLE)) == table) {
    RuleRec rec;
    rec.family = nftnl_rule_get_u32(r, NFTNL_RULE_FAMILY);
    rec.table = table;
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
    out.push_back(std::move(rec));
  }
  nftnl_rule_free(r);
}

}  // namespace

int DumpRules(int fd, uint32_t seq, uint32_t family, const std::string& table, std::vector<RuleRec>& out) {
  return NftDump(fd, NFT_MSG_GETRULE, family, seq,
                 [&](nlmsghdr* nlh) { mnl_attr_put_strz(nlh, NFTA_RULE_TABLE, table.c_str()); },
                 [&](const nlmsghdr* m) { ParseRule(m, table, out); });
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

Napi::Object ChainToJs(Napi::Env env, const ChainRec& c) {
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
  return o;
}

Napi::Object RuleToJs(Napi::Env env, const RuleRec& r) {
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
  return o;
}

}  // namespace kpng
