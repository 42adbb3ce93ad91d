// nftables batch transport: decodes the compact batch built in TypeScript (src/native/encode.ts),
// encodes it with libnftnl into ONE netlink transaction (NFNL_MSG_BATCH_BEGIN ... END, a single
// sendmsg: nfnetlink only treats the messages of one skb as one transaction), sends it from a worker
// thread and maps every kernel error back to the op (and element) that caused it.
#include "common.h"
#include "netlink_batch.h"
#include "promise_worker.h"

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
#include <libnftnl/flowtable.h>
#include <libnftnl/rule.h>
#include <libnftnl/set.h>
#include <libnftnl/table.h>

#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <vector>

namespace kpng {

namespace {

// Newer than the system uapi headers (kernel >= 6.3).
constexpr uint16_t kMsgDestroyTable = 26, kMsgDestroyChain = 27, kMsgDestroyRule = 28, kMsgDestroySet = 29,
                   kMsgDestroySetElem = 30, kMsgDestroyFlowtable = 32;

enum Op : uint8_t { OP_ADD = 1, OP_CREATE, OP_DELETE, OP_DESTROY, OP_FLUSH, OP_INSERT, OP_REPLACE };
enum Kind : uint8_t { K_TABLE = 1, K_CHAIN, K_SET, K_ELEMENTS, K_RULE, K_FLOWTABLE };
enum Tag : uint8_t { T_ATTR = 1, T_EXPR, T_EXPR_ATTR, T_ELEM };

constexpr size_t kElemListMax = 60000;  // NFTA_SET_ELEM_LIST_ELEMENTS nla_len is 16 bits

struct MsgInfo {
  size_t off;          // offset of the nlmsghdr in the batch buffer
  uint32_t op;         // op index in the request
  uint32_t firstElem;  // first element index carried by this message (element ops)
  uint8_t kind;
};

struct Failure {
  int64_t index;    // op index, -1 for the batch as a whole
  int64_t element;  // element index or -1
  int err;
  std::string message;
};

struct Item {
  uint8_t tag, id;
  uint16_t len;
  const uint8_t* data;
};

class BodyReader {
 public:
  BodyReader(const uint8_t* p, size_t n) : p_(p), end_(p + n) {}
  // Returns 1 on item, 0 at end, -1 on malformed input.
  int Next(Item* it) {
    if (p_ == end_) return 0;
    if (end_ - p_ < 4) return -1;
    it->tag = p_[0];
    it->id = p_[1];
    memcpy(&it->len, p_ + 2, 2);
    if ((size_t)(end_ - p_ - 4) < it->len) return -1;
    it->data = p_ + 4;
    p_ += 4 + it->len;
    return 1;
  }

 private:
  const uint8_t* p_;
  const uint8_t* end_;
};

class BatchBuilder {
 public:
  std::vector<char> buf;
  size_t len = 0;
  std::vector<MsgInfo> msgs;
  uint32_t seq0 = 0;
  std::string error;
  uint32_t errorIndex = 0;

  // Starts small and doubles: most batches (changes) are a few KiB, and a zeroed 1 MiB per batch
  // cost page faults and a memset every time.
  explicit BatchBuilder(uint32_t seq) : seq0(seq) { buf.resize(1 << 16); }

  char* Reserve(size_t n) {
    if (len + n > buf.size()) buf.resize(std::max(buf.size() * 2, len + n));
    return buf.data() + len;
  }
  uint32_t NextSeq() const { return seq0 + 1 + (uint32_t)msgs.size(); }

  nlmsghdr* StartMsg(uint16_t type, uint8_t family, uint16_t flags, uint32_t op, uint8_t kind, uint32_t firstElem,
                     size_t room) {
    char* p = Reserve(room);
    memset(p, 0, sizeof(nlmsghdr) + sizeof(nfgenmsg));
    uint32_t seq = NextSeq();
    msgs.push_back({len, op, firstElem, kind});
    return nftnl_nlmsg_build_hdr(p, type, family, flags, seq);
  }
  void EndMsg(nlmsghdr* nlh) { len += NLMSG_ALIGN(nlh->nlmsg_len); }

  // Copies an attribute value into a zero-padded, NUL-terminated scratch buffer (libnftnl setters
  // memcpy the attribute's natural width and strdup strings).
  const void* Scratch(const Item& it) {
    scratch_.assign(it.len + 16, 0);
    memcpy(scratch_.data(), it.data, it.len);
    return scratch_.data();
  }

  bool Fail(uint32_t index, const std::string& msg) {
    error = msg;
    errorIndex = index;
    return false;
  }

  bool Build(const uint8_t* p, size_t n) {
    if (n < 12) return Fail(0, "batch too short");
    uint32_t magic, version, count;
    memcpy(&magic, p, 4);
    memcpy(&version, p + 4, 4);
    memcpy(&count, p + 8, 4);
    if (magic != 0x42504e4b || version != 1) return Fail(0, "bad batch header");
    // BATCH_BEGIN
    char* b = Reserve(64);
    nftnl_batch_begin(b, seq0);
    len += NLMSG_ALIGN(((nlmsghdr*)b)->nlmsg_len);
    size_t off = 12;
    for (uint32_t i = 0; i < count; i++) {
      if (n - off < 8) return Fail(i, "truncated record");
      uint8_t op = p[off], kind = p[off + 1], family = p[off + 2];
      uint32_t blen;
      memcpy(&blen, p + off + 4, 4);
      if (n - off - 8 < blen) return Fail(i, "truncated record body");
      const uint8_t* body = p + off + 8;
      off += 8 + blen;
      bool ok = false;
      switch (kind) {
        case K_TABLE: ok = Table(i, op, family, body, blen); break;
        case K_CHAIN: ok = Chain(i, op, family, body, blen); break;
        case K_SET: ok = Set(i, op, family, body, blen); break;
        case K_ELEMENTS: ok = Elements(i, op, family, body, blen); break;
        case K_RULE: ok = Rule(i, op, family, body, blen); break;
        case K_FLOWTABLE: ok = Flowtable(i, op, family, body, blen); break;
        default: return Fail(i, "unknown object kind");
      }
      if (!ok) return false;
    }
    if (off != n) return Fail(count, "trailing bytes after last record");
    // Ask for an ACK on the last command message only: its arrival proves the kernel processed
    // (and reported errors for) the whole batch; errors are always reported.
    if (!msgs.empty()) ((nlmsghdr*)(buf.data() + msgs.back().off))->nlmsg_flags |= NLM_F_ACK;
    b = Reserve(64);
    nftnl_batch_end(b, NextSeq());
    len += NLMSG_ALIGN(((nlmsghdr*)b)->nlmsg_len);
    return true;
  }

 private:
  std::vector<uint8_t> scratch_;

  template <typename Obj, typename SetFn>
  bool Attrs(uint32_t i, Obj* o, SetFn set, const uint8_t* body, size_t blen) {
    BodyReader r(body, blen);
    Item it;
    int rc;
    while ((rc = r.Next(&it)) == 1) {
      if (it.tag != T_ATTR) return Fail(i, "unexpected item in object");
      if (set(o, it.id, Scratch(it), it.len) < 0) return Fail(i, "bad attribute " + std::to_string(it.id));
    }
    return rc == 0 ? true : Fail(i, "malformed record");
  }

  // Message type and flags of an add / create / delete / destroy of a table, chain or set.
  static bool ObjectMsg(uint8_t op, uint16_t new_t, uint16_t del_t, uint16_t destroy_t, uint16_t* type, uint16_t* flags) {
    *flags = 0;
    switch (op) {
      case OP_ADD: *type = new_t; *flags = NLM_F_CREATE; return true;
      case OP_CREATE: *type = new_t; *flags = NLM_F_CREATE | NLM_F_EXCL; return true;
      case OP_DELETE: *type = del_t; return true;
      case OP_DESTROY: *type = destroy_t; return true;
      default: return false;
    }
  }

  bool Table(uint32_t i, uint8_t op, uint8_t family, const uint8_t* body, size_t blen) {
    if (op == OP_FLUSH) return FlushRules(i, family, body, blen, false);
    nftnl_table* t = nftnl_table_alloc();
    bool ok = Attrs(i, t, nftnl_table_set_data, body, blen);
    if (ok) {
      uint16_t type, flags;
      if (!ObjectMsg(op, NFT_MSG_NEWTABLE, NFT_MSG_DELTABLE, kMsgDestroyTable, &type, &flags)) { nftnl_table_free(t); return Fail(i, "bad op for table"); }
      nlmsghdr* nlh = StartMsg(type, family, flags, i, K_TABLE, 0, 4096 + 4 * blen);
      nftnl_table_nlmsg_build_payload(nlh, t);
      EndMsg(nlh);
    }
    nftnl_table_free(t);
    return ok;
  }

  // flush table / flush chain: DELRULE naming the table (and chain).
  bool FlushRules(uint32_t i, uint8_t family, const uint8_t* body, size_t blen, bool chain) {
    BodyReader r(body, blen);
    Item it;
    std::string table, name;
    while (r.Next(&it) == 1) {
      std::string v((const char*)it.data, strnlen((const char*)it.data, it.len));
      if (chain ? it.id == NFTNL_CHAIN_TABLE : it.id == NFTNL_TABLE_NAME) table = v;
      if (chain && it.id == NFTNL_CHAIN_NAME) name = v;
    }
    nftnl_rule* rule = nftnl_rule_alloc();
    nftnl_rule_set_str(rule, NFTNL_RULE_TABLE, table.c_str());
    if (chain) nftnl_rule_set_str(rule, NFTNL_RULE_CHAIN, name.c_str());
    nlmsghdr* nlh = StartMsg(NFT_MSG_DELRULE, family, 0, i, chain ? K_CHAIN : K_TABLE, 0, 4096 + 2 * blen);
    nftnl_rule_nlmsg_build_payload(nlh, rule);
    EndMsg(nlh);
    nftnl_rule_free(rule);
    return true;
  }

  bool Chain(uint32_t i, uint8_t op, uint8_t family, const uint8_t* body, size_t blen) {
    if (op == OP_FLUSH) return FlushRules(i, family, body, blen, true);
    nftnl_chain* c = nftnl_chain_alloc();
    nftnl_chain_set_u32(c, NFTNL_CHAIN_FAMILY, family);
    bool ok = Attrs(i, c, nftnl_chain_set_data, body, blen);
    if (ok) {
      uint16_t type, flags;
      if (!ObjectMsg(op, NFT_MSG_NEWCHAIN, NFT_MSG_DELCHAIN, kMsgDestroyChain, &type, &flags)) { nftnl_chain_free(c); return Fail(i, "bad op for chain"); }
      nlmsghdr* nlh = StartMsg(type, family, flags, i, K_CHAIN, 0, 4096 + 4 * blen);
      nftnl_chain_nlmsg_build_payload(nlh, c);
      EndMsg(nlh);
    }
    nftnl_chain_free(c);
    return ok;
  }

  // A flowtable: its attributes as for other objects, except the devices, one ATTR item each
  // (libnftnl takes them as one NULL-terminated array).
  bool Flowtable(uint32_t i, uint8_t op, uint8_t family, const uint8_t* body, size_t blen) {
    nftnl_flowtable* f = nftnl_flowtable_alloc();
    nftnl_flowtable_set_u32(f, NFTNL_FLOWTABLE_FAMILY, family);
    std::vector<std::string> devices;
    BodyReader r(body, blen);
    Item it;
    int rc;
    bool ok = true;
    while (ok && (rc = r.Next(&it)) == 1) {
      if (it.tag != T_ATTR) ok = Fail(i, "unexpected item in flowtable");
      else if (it.id == NFTNL_FLOWTABLE_DEVICES) devices.emplace_back((const char*)it.data, strnlen((const char*)it.data, it.len));
      else if (nftnl_flowtable_set_data(f, it.id, Scratch(it), it.len) < 0) ok = Fail(i, "bad flowtable attribute " + std::to_string(it.id));
    }
    if (ok && rc != 0) ok = Fail(i, "malformed record");
    if (ok && !devices.empty()) {
      std::vector<const char*> names;
      for (const std::string& d : devices) names.push_back(d.c_str());
      names.push_back(nullptr);
      if (nftnl_flowtable_set_array(f, NFTNL_FLOWTABLE_DEVICES, names.data()) < 0) ok = Fail(i, "bad flowtable devices");
    }
    if (ok) {
      uint16_t type, flags;
      if (!ObjectMsg(op, NFT_MSG_NEWFLOWTABLE, NFT_MSG_DELFLOWTABLE, kMsgDestroyFlowtable, &type, &flags)) {
        nftnl_flowtable_free(f);
        return Fail(i, "bad op for flowtable");
      }
      nlmsghdr* nlh = StartMsg(type, family, flags, i, K_FLOWTABLE, 0, 4096 + 4 * blen);
      nftnl_flowtable_nlmsg_build_payload(nlh, f);
      EndMsg(nlh);
    }
    nftnl_flowtable_free(f);
    return ok;
  }

  bool Set(uint32_t i, uint8_t op, uint8_t family, const uint8_t* body, size_t blen) {
    if (op == OP_FLUSH) return ElementsImpl(i, op, family, body, blen);
    nftnl_set* s = nftnl_set_alloc();
    nftnl_set_set_u32(s, NFTNL_SET_FAMILY, family);
    bool ok = Attrs(i, s, nftnl_set_set_data, body, blen);
    if (ok) {
      uint16_t type, flags;
      if (!ObjectMsg(op, NFT_MSG_NEWSET, NFT_MSG_DELSET, kMsgDestroySet, &type, &flags)) { nftnl_set_free(s); return Fail(i, "bad op for set"); }
      nlmsghdr* nlh = StartMsg(type, family, flags, i, K_SET, 0, 8192 + 4 * blen);
      nftnl_set_nlmsg_build_payload(nlh, s);
      EndMsg(nlh);
    }
    nftnl_set_free(s);
    return ok;
  }

  bool Elements(uint32_t i, uint8_t op, uint8_t family, const uint8_t* body, size_t blen) {
    return ElementsImpl(i, op, family, body, blen);
  }

  // Element messages are written with libmnl directly: the element attributes arrive pre-encoded
  // (see encode.ts), so each element costs one memcpy. Messages are split below 64 KiB.
  bool ElementsImpl(uint32_t i, uint8_t op, uint8_t family, const uint8_t* body, size_t blen) {
    std::string table, set;
    uint32_t setId = 0;
    bool hasSetId = false;
    BodyReader r(body, blen);
    Item it;
    int rc;
    std::vector<Item> elems;
    while ((rc = r.Next(&it)) == 1) {
      if (it.tag == T_ATTR) {
        std::string v((const char*)it.data, strnlen((const char*)it.data, it.len));
        if (it.id == NFTNL_SET_TABLE) table = v;
        else if (it.id == NFTNL_SET_NAME) set = v;
        else if (it.id == NFTNL_SET_ID && it.len == 4) { memcpy(&setId, it.data, 4); hasSetId = true; }
      } else if (it.tag == T_ELEM) {
        if (it.len < 4 || (it.len & 3) || it.len > 4096) return Fail(i, "malformed element");
        elems.push_back(it);
      } else {
        return Fail(i, "unexpected item in element op");
      }
    }
    if (rc != 0) return Fail(i, "malformed record");
    uint16_t type, flags = 0;
    switch (op) {
      case OP_ADD: type = NFT_MSG_NEWSETELEM; flags = NLM_F_CREATE; break;
      case OP_CREATE: type = NFT_MSG_NEWSETELEM; flags = NLM_F_CREATE | NLM_F_EXCL; break;
      case OP_DELETE: type = NFT_MSG_DELSETELEM; break;
      case OP_DESTROY: type = kMsgDestroySetElem; break;
      case OP_FLUSH: type = NFT_MSG_DELSETELEM; break;
      default: return Fail(i, "bad op for elements");
    }
    auto start = [&](uint32_t first) {
      nlmsghdr* nlh = StartMsg(type, family, flags, i, K_ELEMENTS, first, kElemListMax + 8192 + table.size() + set.size());
      mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_TABLE, table.c_str());
      if (!set.empty()) mnl_attr_put_strz(nlh, NFTA_SET_ELEM_LIST_SET, set.c_str());
      if (hasSetId) mnl_attr_put_u32(nlh, NFTA_SET_ELEM_LIST_SET_ID, htonl(setId));
      return nlh;
    };
    if (op == OP_FLUSH) {  // no element list = all elements
      EndMsg(start(0));
      return true;
    }
    if (elems.empty()) return true;  // nothing to send (an empty DELSETELEM would flush the set)
    nlmsghdr* nlh = nullptr;
    nlattr* list = nullptr;
    size_t listBytes = 0;
    for (uint32_t e = 0; e < elems.size(); e++) {
      size_t need = 4 + elems[e].len;
      if (nlh && listBytes + need > kElemListMax) {
        mnl_attr_nest_end(nlh, list);
        EndMsg(nlh);
        nlh = nullptr;
      }
      if (!nlh) {
        nlh = start(e);
        list = mnl_attr_nest_start(nlh, NFTA_SET_ELEM_LIST_ELEMENTS);
        listBytes = 0;
      }
      nlattr* a = mnl_attr_nest_start(nlh, NFTA_LIST_ELEM);
      memcpy(mnl_nlmsg_get_payload_tail(nlh), elems[e].data, elems[e].len);
      nlh->nlmsg_len += elems[e].len;
      mnl_attr_nest_end(nlh, a);
      listBytes += need;
    }
    mnl_attr_nest_end(nlh, list);
    EndMsg(nlh);
    return true;
  }

  bool Rule(uint32_t i, uint8_t op, uint8_t family, const uint8_t* body, size_t blen) {
    nftnl_rule* rule = nftnl_rule_alloc();
    nftnl_rule_set_u32(rule, NFTNL_RULE_FAMILY, family);
    nftnl_expr* cur = nullptr;
    BodyReader r(body, blen);
    Item it;
    int rc;
    bool ok = true;
    while (ok && (rc = r.Next(&it)) == 1) {
      switch (it.tag) {
        case T_ATTR:
          if (nftnl_rule_set_data(rule, it.id, Scratch(it), it.len) < 0) ok = Fail(i, "bad rule attribute");
          break;
        case T_EXPR: {
          if (cur) nftnl_rule_add_expr(rule, cur);
          std::string name((const char*)it.data, it.len);
          cur = nftnl_expr_alloc(name.c_str());
          if (!cur) ok = Fail(i, "unknown expression " + name);
          break;
        }
        case T_EXPR_ATTR:
          if (!cur) ok = Fail(i, "expression attribute before expression");
          else if (nftnl_expr_set(cur, it.id, Scratch(it), it.len) < 0)
            ok = Fail(i, "bad expression attribute " + std::to_string(it.id));
          break;
        default: ok = Fail(i, "unexpected item in rule");
      }
    }
    if (ok && rc != 0) ok = Fail(i, "malformed record");
    if (cur) {
      if (ok) nftnl_rule_add_expr(rule, cur);
      else nftnl_expr_free(cur);
    }
    if (ok) {
      uint16_t type, flags = 0;
      switch (op) {
        case OP_ADD: type = NFT_MSG_NEWRULE; flags = NLM_F_CREATE | NLM_F_APPEND; break;
        case OP_INSERT: type = NFT_MSG_NEWRULE; flags = NLM_F_CREATE; break;
        case OP_REPLACE: type = NFT_MSG_NEWRULE; flags = NLM_F_REPLACE; break;
        case OP_DELETE: type = NFT_MSG_DELRULE; break;
        case OP_DESTROY: type = kMsgDestroyRule; break;
        default: nftnl_rule_free(rule); return Fail(i, "bad op for rule");
      }
      // libnftnl's encoding of a rule is well below 4x the compact form (+ headers)
      nlmsghdr* nlh = StartMsg(type, family, flags, i, K_RULE, 0, 4096 + 4 * blen);
      nftnl_rule_nlmsg_build_payload(nlh, rule);
      EndMsg(nlh);
    }
    nftnl_rule_free(rule);
    return ok;
  }
};

// Iterates the netlink attributes in [start, end).
#define KPNG_FOR_ATTR(a, start, end)                                                                   \
  for (const nlattr* a = (const nlattr*)(start);                                                      \
       (const char*)a + sizeof(nlattr) <= (const char*)(end) && a->nla_len >= sizeof(nlattr) &&       \
       (const char*)a + a->nla_len <= (const char*)(end);                                             \
       a = (const nlattr*)((const char*)a + NLA_ALIGN(a->nla_len)))

// Element index inside an element message whose attribute at `offset` the kernel rejected.
int64_t ElementAtOffset(const char* msg, uint32_t offset) {
  const nlmsghdr* nlh = (const nlmsghdr*)msg;
  int64_t idx = 0;
  KPNG_FOR_ATTR(attr, msg + NLMSG_HDRLEN + NLMSG_ALIGN(sizeof(nfgenmsg)), msg + nlh->nlmsg_len) {
    if ((attr->nla_type & NLA_TYPE_MASK) != NFTA_SET_ELEM_LIST_ELEMENTS) continue;
    KPNG_FOR_ATTR(e, (const char*)attr + NLA_HDRLEN, (const char*)attr + attr->nla_len) {
      uint32_t start = (const char*)e - msg, end = start + e->nla_len;
      if (offset >= start && offset < end) return idx;
      idx++;
    }
  }
  return -1;
}

// Idle nf_tables sockets kept for the next batch. Closing a NETLINK_NETFILTER socket right after a
// commit is slow: the kernel's release notifier (nft_rcv_nl_event) flushes the commit's deferred
// destroy work, which waits for an RCU grace period (most of a one-endpoint change's time when the
// socket was closed each time). A socket is taken by one batch at a time and given back only when
// its replies were read to the end. Keyed by the namespace's path and inode (a deleted and re-created
// namespace with the same name is another namespace); bounded, because an idle socket keeps its
// namespace alive.
class SocketPool {
 public:
  static SocketPool& Get() {
    static SocketPool* pool = new SocketPool();  // never destroyed: worker threads may outlive statics
    return *pool;
  }
  // Returns an fd (>= 0) or -errno; `key` identifies the namespace for Put.
  int Take(const std::string& netns, std::string* key) {
    *key = Key(netns);
    if (key->empty()) return -ENOENT;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto it = idle_.begin(); it != idle_.end(); ++it) {
        if (it->key != *key) continue;
        int fd = it->fd;
        idle_.erase(it);
        return fd;
      }
    }
    return OpenNetlinkSocket(NETLINK_NETFILTER, netns, 4 << 20, 0);
  }
  void Put(const std::string& key, int fd) {
    int evict = -1;
    {
      std::lock_guard<std::mutex> lock(mu_);
      idle_.push_back({key, fd});
      if (idle_.size() > kMaxIdle) { evict = idle_.front().fd; idle_.pop_front(); }
    }
    if (evict >= 0) close(evict);
  }
  // Closes every idle socket (lets deleted namespaces go).
  size_t CloseAll() {
    std::deque<Entry> old;
    {
      std::lock_guard<std::mutex> lock(mu_);
      old.swap(idle_);
    }
    for (auto& e : old) close(e.fd);
    return old.size();
  }

 private:
  struct Entry { std::string key; int fd; };
  static constexpr size_t kMaxIdle = 4;
  std::mutex mu_;
  std::deque<Entry> idle_;

  static std::string Key(const std::string& netns) {
    struct stat st;
    if (stat(netns.empty() ? "/proc/self/ns/net" : netns.c_str(), &st) != 0) return "";
    return netns + "|" + std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  }
};

uint32_t NextSeqBase() {
  static std::atomic<uint32_t> counter{(uint32_t)time(nullptr) << 8};
  return counter.fetch_add(1u << 22);  // room for 4M messages per batch
}

class ApplyWorker : public PromiseWorker {
 public:
  ApplyWorker(Napi::Env env, Napi::Buffer<uint8_t> input, std::string netns)
      : PromiseWorker(env), netns_(std::move(netns)) {
    inputRef_ = Napi::Persistent(input.As<Napi::Object>());
    data_ = input.Data();
    size_ = input.Length();
    queuedAt_ = NowMs();
  }

 private:
  void Execute() override {
    double t0 = NowMs();
    queueMs_ = t0 - queuedAt_;
    BatchBuilder b(NextSeqBase());
    if (!b.Build(data_, size_)) {
      buildFailed_ = true;
      buildIndex_ = b.errorIndex;
      err_ = EINVAL;
      what_ = "invalid batch (op " + std::to_string(buildIndex_) + "): " + b.error;
      return;
    }
    messages_ = b.msgs.size() + 2;
    bytes_ = b.len;
    buildMs_ = NowMs() - t0;
    std::string poolKey;
    UniqueFd fd(SocketPool::Get().Take(netns_, &poolKey));
    if (fd < 0) {
      err_ = -fd;
      what_ = "netlink socket";
      return;
    }
    int sndbuf = (int)std::min<size_t>(b.len + 65536, INT32_MAX / 2);
    if (setsockopt(fd, SOL_SOCKET, SO_SNDBUFFORCE, &sndbuf, sizeof(sndbuf)) < 0)
      setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &sndbuf, sizeof(sndbuf));
    // A pooled socket was drained when given back; anything still queued is not ours.
    RecvBuffer<char> rbuf(1 << 18);
    while (recv(fd, rbuf.data(), rbuf.size(), MSG_DONTWAIT) > 0) {}
    sockaddr_nl dst = {};
    dst.nl_family = AF_NETLINK;
    ssize_t sent = sendto(fd, b.buf.data(), b.len, 0, (sockaddr*)&dst, sizeof(dst));
    if (sent < 0 || (size_t)sent != b.len) {
      err_ = sent < 0 ? errno : EMSGSIZE;
      what_ = "sendmsg of " + std::to_string(b.len) + " bytes";
      return;
    }
    // nfnetlink processes the batch synchronously inside sendmsg: every reply is queued by now.
    uint32_t beginSeq = b.seq0, lastSeq = b.seq0 + (uint32_t)b.msgs.size();
    bool done = b.msgs.empty();
    for (;;) {
      ssize_t n = recv(fd, rbuf.data(), rbuf.size(), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR) continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) break;
        if (errno == ENOBUFS) { overflow_ = true; continue; }
        err_ = errno;
        what_ = "recv";
        break;
      }
      int left = (int)n;
      for (nlmsghdr* nlh = (nlmsghdr*)rbuf.data(); mnl_nlmsg_ok(nlh, left); nlh = mnl_nlmsg_next(nlh, &left)) {
        if (nlh->nlmsg_type != NLMSG_ERROR) continue;
        nlmsgerr* e = (nlmsgerr*)mnl_nlmsg_get_payload(nlh);
        uint32_t seq = e->msg.nlmsg_seq;
        int err = -e->error;
        if (seq == lastSeq || seq == beginSeq) done = true;
        if (err == 0) continue;
        Failure f{-1, -1, err, ""};
        uint32_t offs = 0;
        bool hasOffs = false;
        if (nlh->nlmsg_flags & NLM_F_ACK_TLVS) {
          size_t hdr = sizeof(nlmsghdr) + sizeof(nlmsgerr);
          if (!(nlh->nlmsg_flags & NLM_F_CAPPED)) hdr += e->msg.nlmsg_len - sizeof(nlmsghdr);
          KPNG_FOR_ATTR(a, (const char*)nlh + hdr, (const char*)nlh + nlh->nlmsg_len) {
            const char* v = (const char*)a + NLA_HDRLEN;
            if (a->nla_type == NLMSGERR_ATTR_MSG) f.message.assign(v, strnlen(v, a->nla_len - NLA_HDRLEN));
            if (a->nla_type == NLMSGERR_ATTR_OFFS) { memcpy(&offs, v, 4); hasOffs = true; }
          }
        }
        if (seq > beginSeq && seq <= lastSeq) {
          const MsgInfo& m = b.msgs[seq - beginSeq - 1];
          f.index = m.op;
          if (m.kind == K_ELEMENTS && hasOffs) {
            int64_t rel = ElementAtOffset(b.buf.data() + m.off, offs);
            if (rel >= 0) f.element = m.firstElem + rel;
          }
        }
        failures_.push_back(std::move(f));
      }
    }
    if (!done && failures_.empty() && !err_) incomplete_ = true;
    ms_ = NowMs() - t0;
    // Reuse only a socket whose conversation ended cleanly; others are closed (off the JS thread).
    if (done && !overflow_ && !err_) SocketPool::Get().Put(poolKey, fd.release());
    finishedAt_ = NowMs();
  }

  // A batch that could not be built names the op that failed.
  void AddErrorFields(Napi::Object error) override {
    if (buildFailed_) error.Set("index", Napi::Number::New(Env(), buildIndex_));
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object r = Napi::Object::New(env);
    r.Set("messages", Napi::Number::New(env, (double)messages_));
    r.Set("bytes", Napi::Number::New(env, (double)bytes_));
    r.Set("ms", Napi::Number::New(env, ms_));
    r.Set("buildMs", Napi::Number::New(env, buildMs_));
    // Hand-off delays: queued -> a worker thread started it; it finished -> back on the JS thread.
    r.Set("queueMs", Napi::Number::New(env, queueMs_));
    r.Set("returnMs", Napi::Number::New(env, NowMs() - finishedAt_));
    r.Set("overflow", Napi::Boolean::New(env, overflow_));
    r.Set("incomplete", Napi::Boolean::New(env, incomplete_));
    Napi::Array failed = Napi::Array::New(env, failures_.size());
    for (size_t k = 0; k < failures_.size(); k++) {
      const Failure& f = failures_[k];
      Napi::Object o = Napi::Object::New(env);
      o.Set("index", Napi::Number::New(env, (double)f.index));
      if (f.element >= 0) o.Set("element", Napi::Number::New(env, (double)f.element));
      o.Set("errno", Napi::Number::New(env, f.err));
      o.Set("code", Napi::String::New(env, ErrnoName(f.err)));
      if (!f.message.empty()) o.Set("message", Napi::String::New(env, f.message));
      failed[k] = o;
    }
    r.Set("failed", failed);
    return r;
  }

  Napi::ObjectReference inputRef_;
  const uint8_t* data_ = nullptr;
  size_t size_ = 0;
  std::string netns_;
  bool buildFailed_ = false;
  uint32_t buildIndex_ = 0;
  size_t messages_ = 0, bytes_ = 0;
  double ms_ = 0, buildMs_ = 0;
  double queuedAt_ = 0, queueMs_ = 0, finishedAt_ = 0;
  bool overflow_ = false, incomplete_ = false;
  std::vector<Failure> failures_;
};

}  // namespace

// nftCloseSockets(): number of idle pooled sockets closed (lets deleted namespaces be freed).
Napi::Value NftCloseSockets(const Napi::CallbackInfo& info) {
  return Napi::Number::New(info.Env(), (double)SocketPool::Get().CloseAll());
}

// nftApply(batch: Buffer, netns?: string): Promise<{messages, bytes, ms, failed[], overflow, incomplete}>
Napi::Value NftApply(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsBuffer()) {
    Napi::TypeError::New(env, "nftApply(batch: Buffer, netns?: string)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new ApplyWorker(env, info[0].As<Napi::Buffer<uint8_t>>(), netns))->Start();
}

}  // namespace kpng
