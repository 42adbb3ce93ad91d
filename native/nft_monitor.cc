// nf_tables change notifications (the NFNLGRP_NFTABLES multicast group, what `nft monitor` reads),
// watched from a thread of its own: each transaction another process commits is reported to JS with
// the committer's pid and command name (the NFT_MSG_NEWGEN message that ends every transaction's
// notifications) and, per table, how many objects of each kind it added or deleted. kpng's backends
// use it to notice tampering with their tables at once instead of at the next periodic resync.
//
// nftMonitor(callback, netns?) -> { pause(), resume(), close() }
//   callback({ pid, comm, changes: [{ family, table, kind, count }] }) or callback({ overflow: true })
//   when the socket's buffer overflowed (some notifications were lost). pause()/resume() leave and
//   rejoin the group around the caller's own transactions: the kernel then builds no notification for
//   them (one per set element: a full sync would flood the socket), and a transaction of another
//   process committed meanwhile goes unseen.
#include "common.h"

#include <linux/netfilter/nfnetlink.h>
#include <linux/netfilter/nf_tables.h>
#include <linux/netlink.h>
#include <arpa/inet.h>
#include <poll.h>
#include <stdio.h>
#include <sys/eventfd.h>
#include <sys/socket.h>

#include <atomic>
#include <map>
#include <thread>
#include <tuple>
#include <vector>

namespace kpng {

namespace {

// Message types (nf_tables.h's enum; DESTROY* are newer than some headers).
const char* KindName(int type) {
  switch (type) {
    case NFT_MSG_NEWTABLE: return "table+";
    case NFT_MSG_DELTABLE: return "table-";
    case NFT_MSG_NEWCHAIN: return "chain+";
    case NFT_MSG_DELCHAIN: return "chain-";
    case NFT_MSG_NEWRULE: return "rule+";
    case NFT_MSG_DELRULE: return "rule-";
    case NFT_MSG_NEWSET: return "set+";
    case NFT_MSG_DELSET: return "set-";
    case NFT_MSG_NEWSETELEM: return "element+";
    case NFT_MSG_DELSETELEM: return "element-";
    case 18: return "object+";      // NFT_MSG_NEWOBJ
    case 20: return "object-";      // NFT_MSG_DELOBJ
    case 22: return "flowtable+";   // NFT_MSG_NEWFLOWTABLE
    case 24: return "flowtable-";   // NFT_MSG_DELFLOWTABLE
    case 26: return "table-";       // NFT_MSG_DESTROYTABLE
    case 27: return "chain-";       // NFT_MSG_DESTROYCHAIN
    case 28: return "rule-";        // NFT_MSG_DESTROYRULE
    case 29: return "set-";         // NFT_MSG_DESTROYSET
    case 30: return "element-";     // NFT_MSG_DESTROYSETELEM
    case 31: return "object-";      // NFT_MSG_DESTROYOBJ
    case 32: return "flowtable-";   // NFT_MSG_DESTROYFLOWTABLE
    default: return nullptr;
  }
}

constexpr int kGroup = 7;  // NFNLGRP_NFTABLES

// Whether the committing task is a thread of this process (the kernel reports the thread's id).
bool OwnTask(uint32_t pid) {
  if (pid == static_cast<uint32_t>(getpid())) return true;
  char path[48];
  snprintf(path, sizeof(path), "/proc/self/task/%u", pid);
  return access(path, F_OK) == 0;
}

struct Change { int family; std::string table; std::string kind; int count; };
struct Event { bool overflow = false; uint32_t pid = 0; std::string comm; std::vector<Change> changes; };

// The first attribute of type `want` in [p, end), or nullptr.
const nlattr* FindAttr(const char* p, const char* end, int want) {
  while (p + sizeof(nlattr) <= end) {
    auto* a = reinterpret_cast<const nlattr*>(p);
    if (a->nla_len < sizeof(nlattr) || p + a->nla_len > end) return nullptr;
    if ((a->nla_type & NLA_TYPE_MASK) == want) return a;
    p += NLA_ALIGN(a->nla_len);
  }
  return nullptr;
}

std::string AttrString(const nlattr* a) {
  const char* s = reinterpret_cast<const char*>(a) + NLA_HDRLEN;
  size_t n = a->nla_len - NLA_HDRLEN;
  return std::string(s, strnlen(s, n));
}

struct Monitor {
  UniqueFd sock;
  UniqueFd stop;
  std::thread thread;
  Napi::ThreadSafeFunction tsfn;
  std::atomic<bool> closed{false};

  void Run() {
    RecvBuffer<char> buf(256 * 1024);
    // The current transaction's changes, keyed by (family, table, kind).
    std::map<std::tuple<int, std::string, std::string>, int> tx;
    pollfd fds[2] = {{sock.get(), POLLIN, 0}, {stop.get(), POLLIN, 0}};
    while (true) {
      if (poll(fds, 2, -1) < 0) { if (errno == EINTR) continue; break; }
      if (fds[1].revents) break;
      ssize_t n = recv(sock.get(), buf.data(), buf.size(), MSG_DONTWAIT);
      if (n < 0) {
        if (errno == EINTR || errno == EAGAIN) continue;
        if (errno == ENOBUFS) { tx.clear(); Send(new Event{true}); continue; }
        break;
      }
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf.data()); NLMSG_OK(h, n); h = NLMSG_NEXT(h, n)) {
        if ((h->nlmsg_type >> 8) != NFNL_SUBSYS_NFTABLES || h->nlmsg_len < NLMSG_LENGTH(sizeof(nfgenmsg))) continue;
        int type = h->nlmsg_type & 0xff;
        auto* g = static_cast<const nfgenmsg*>(NLMSG_DATA(h));
        const char* attrs = reinterpret_cast<const char*>(g) + NLMSG_ALIGN(sizeof(nfgenmsg));
        const char* end = reinterpret_cast<const char*>(h) + h->nlmsg_len;
        if (type == NFT_MSG_NEWGEN) {
          const nlattr* pid = FindAttr(attrs, end, NFTA_GEN_PROC_PID);
          const nlattr* comm = FindAttr(attrs, end, NFTA_GEN_PROC_NAME);
          uint32_t p = pid && pid->nla_len >= NLA_HDRLEN + 4 ? ntohl(*reinterpret_cast<const uint32_t*>(reinterpret_cast<const char*>(pid) + NLA_HDRLEN)) : 0;
          if (!tx.empty() && !OwnTask(p)) {
            auto* e = new Event{false, p, comm ? AttrString(comm) : ""};
            for (auto& [k, c] : tx) e->changes.push_back(Change{std::get<0>(k), std::get<1>(k), std::get<2>(k), c});
            Send(e);
          }
          tx.clear();
          continue;
        }
        const char* kind = KindName(type);
        // Every object message names its table in attribute 1 (NFTA_TABLE_NAME, NFTA_CHAIN_TABLE, ...).
        const nlattr* table = kind ? FindAttr(attrs, end, 1) : nullptr;
        if (table) tx[{g->nfgen_family, AttrString(table), kind}]++;
      }
    }
  }

  void Send(Event* e) {
    if (closed.load() || tsfn.NonBlockingCall(e, Deliver) != napi_ok) delete e;
  }

  static void Deliver(Napi::Env env, Napi::Function cb, Event* e) {
    std::unique_ptr<Event> owned(e);
    if (!env || !cb) return;
    Napi::Object o = Napi::Object::New(env);
    if (e->overflow) {
      o.Set("overflow", true);
    } else {
      o.Set("pid", e->pid);
      o.Set("comm", e->comm);
      Napi::Array list = Napi::Array::New(env, e->changes.size());
      for (size_t i = 0; i < e->changes.size(); i++) {
        Napi::Object c = Napi::Object::New(env);
        c.Set("family", e->changes[i].family);
        c.Set("table", e->changes[i].table);
        c.Set("kind", e->changes[i].kind);
        c.Set("count", e->changes[i].count);
        list.Set(i, c);
      }
      o.Set("changes", list);
    }
    cb.Call({o});
  }

  void Membership(bool join) {
    int g = kGroup;
    setsockopt(sock.get(), SOL_NETLINK, join ? NETLINK_ADD_MEMBERSHIP : NETLINK_DROP_MEMBERSHIP, &g, sizeof(g));
  }

  void Close() {
    if (closed.exchange(true)) return;
    uint64_t one = 1;
    if (write(stop.get(), &one, sizeof(one)) < 0) { /* the thread also ends when the socket fails */ }
    if (thread.joinable()) thread.join();
    tsfn.Release();
  }
};

}  // namespace

Napi::Value NftMonitor(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsFunction()) {
    Napi::TypeError::New(env, "nftMonitor(callback, netns?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  auto m = std::make_shared<Monitor>();
  {
    NetnsGuard ns(netns);
    if (ns.error()) { MakeErrnoError(env, ns.error(), "nftMonitor: netns " + netns).ThrowAsJavaScriptException(); return env.Undefined(); }
    m->sock.reset(socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_NETFILTER));
  }
  if (m->sock < 0) { MakeErrnoError(env, errno, "nftMonitor: socket").ThrowAsJavaScriptException(); return env.Undefined(); }
  sockaddr_nl addr{};
  addr.nl_family = AF_NETLINK;
  if (bind(m->sock, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) { MakeErrnoError(env, errno, "nftMonitor: bind").ThrowAsJavaScriptException(); return env.Undefined(); }
  // Room for a burst of another process's changes; overflow is reported, not fatal.
  int rcv = 4 << 20;
  if (setsockopt(m->sock, SOL_SOCKET, SO_RCVBUFFORCE, &rcv, sizeof(rcv)) != 0) setsockopt(m->sock, SOL_SOCKET, SO_RCVBUF, &rcv, sizeof(rcv));
  int g = kGroup;
  if (setsockopt(m->sock, SOL_NETLINK, NETLINK_ADD_MEMBERSHIP, &g, sizeof(g)) != 0) { MakeErrnoError(env, errno, "nftMonitor: join NFNLGRP_NFTABLES").ThrowAsJavaScriptException(); return env.Undefined(); }
  m->stop.reset(eventfd(0, EFD_CLOEXEC));
  if (m->stop < 0) { MakeErrnoError(env, errno, "nftMonitor: eventfd").ThrowAsJavaScriptException(); return env.Undefined(); }
  m->tsfn = Napi::ThreadSafeFunction::New(env, info[0].As<Napi::Function>(), "kpng nftMonitor", 0, 1);
  // The monitor never keeps the process alive by itself.
  m->tsfn.Unref(env);
  m->thread = std::thread([m] { m->Run(); });

  Napi::Object handle = Napi::Object::New(env);
  handle.Set("pause", Napi::Function::New(env, [m](const Napi::CallbackInfo&) { if (!m->closed) m->Membership(false); }, "pause"));
  handle.Set("resume", Napi::Function::New(env, [m](const Napi::CallbackInfo&) { if (!m->closed) m->Membership(true); }, "resume"));
  handle.Set("close", Napi::Function::New(env, [m](const Napi::CallbackInfo&) { m->Close(); }, "close"));
  return handle;
}

}  // namespace kpng
