// iptables-legacy (x_tables) read and chain removal through the kernel's sockopt interface on a raw
// socket, off the JavaScript thread. No iptables binary, no libiptc. Only what the clean-up needs:
//   iptLegacyTables(family, netns?)               table names from /proc/net/ip{,6}_tables_names, or
//                                                 null when the kernel has no legacy x_tables
//   iptLegacyList(family, table, netns?)          chains (rule counts) and the rules that jump or goto
//                                                 to another chain
//   iptLegacyRemoveChains(family, table, names, netns?)
//                                                 ONE IPT_SO_SET_REPLACE without those user chains and
//                                                 without every rule elsewhere that jumps to them
// family is 4 (iptables) or 6 (ip6tables).
//
// Layout of a table blob as iptables makes it (libiptc's compile): each builtin chain's rules then its
// policy (the underflow); each user chain as an ERROR entry naming it, its rules, a RETURN entry; a
// last ERROR entry named "ERROR". A standard target's verdict >= 0 is the byte offset of the entry it
// jumps to (for a user chain: the entry after its ERROR head), so removing entries means recomputing
// every such offset, hook_entry[] and underflow[].
//
// A table not listed in the names file is never queried: IPT_SO_GET_INFO on it would instantiate it
// (register its hooks) in the namespace.
#include "netns_worker.h"

#include <netinet/in.h>
#include <sys/file.h>
#include <sys/socket.h>

#include <linux/netfilter/x_tables.h>
#include <linux/netfilter_ipv4/ip_tables.h>
#include <linux/netfilter_ipv6/ip6_tables.h>

#include <algorithm>
#include <cstdio>
#include <set>
#include <vector>

namespace kpng {

namespace {

const char* const kHookNames[NF_INET_NUMHOOKS] = {"PREROUTING", "INPUT", "FORWARD", "OUTPUT", "POSTROUTING"};

// The per-family structures and sockopt numbers (ip_tables.h, ip6_tables.h): same layouts, other names.
struct V4 {
  using Entry = ipt_entry;
  using GetInfo = ipt_getinfo;
  using GetEntries = ipt_get_entries;
  using Replace = ipt_replace;
  static constexpr int kDomain = AF_INET, kLevel = SOL_IP;
  static constexpr int kGetInfo = IPT_SO_GET_INFO, kGetEntries = IPT_SO_GET_ENTRIES;
  static constexpr int kReplace = IPT_SO_SET_REPLACE, kAddCounters = IPT_SO_SET_ADD_COUNTERS;
  static constexpr const char* kNames = "/proc/thread-self/net/ip_tables_names";
  static bool IsGoto(const Entry* e) { return e->ip.flags & IPT_F_GOTO; }
};
struct V6 {
  using Entry = ip6t_entry;
  using GetInfo = ip6t_getinfo;
  using GetEntries = ip6t_get_entries;
  using Replace = ip6t_replace;
  static constexpr int kDomain = AF_INET6, kLevel = SOL_IPV6;
  static constexpr int kGetInfo = IP6T_SO_GET_INFO, kGetEntries = IP6T_SO_GET_ENTRIES;
  static constexpr int kReplace = IP6T_SO_SET_REPLACE, kAddCounters = IP6T_SO_SET_ADD_COUNTERS;
  static constexpr const char* kNames = "/proc/thread-self/net/ip6_tables_names";
  static bool IsGoto(const Entry* e) { return e->ipv6.flags & IP6T_F_GOTO; }
};

// A failure: errno and what was being done.
struct Failure {
  int err = 0;
  std::string what;
  bool set(int e, std::string w) { err = e; what = std::move(w); return false; }
};

enum class Kind { kHead, kRule, kFoot, kEnd };

struct ParsedEntry {
  uint32_t off = 0, size = 0;
  int chain = -1;  // index in Table::chains; -1 for the table's last ERROR entry
  Kind kind = Kind::kRule;
  bool standard = false, isGoto = false;
  int32_t verdict = 0;
  int target = -1;  // entry index a verdict >= 0 jumps to
};

struct ParsedChain {
  std::string name;
  int hook = -1;  // builtin: its hook; user chain: -1
  size_t first = 0, last = 0;  // entry indices, head (user) / first rule (builtin) .. foot
  uint32_t rules() const { return uint32_t(last - first) - (hook < 0 ? 1 : 0); }
};

struct Jump {
  std::string chain, target;
  uint32_t index;  // rule number in its chain, from 1 (iptables --line-numbers)
  bool isGoto;
};

// One table as read: the info, the entries blob (8-byte aligned, as the kernel lays it) and its parse.
struct Table {
  std::string name;
  uint32_t validHooks = 0, numEntries = 0, size = 0;
  uint32_t hookEntry[NF_INET_NUMHOOKS] = {}, underflow[NF_INET_NUMHOOKS] = {};
  std::vector<uint64_t> storage;
  uint8_t* blob = nullptr;
  std::vector<ParsedEntry> entries;
  std::vector<ParsedChain> chains;
};

// The names file of the family, read in the calling thread's namespace. *absent: the file does not
// exist (no legacy x_tables in this kernel): not a failure.
bool ReadTableNames(const char* path, std::vector<std::string>* out, bool* absent, Failure* f) {
  *absent = false;
  FILE* fp = fopen(path, "re");
  if (!fp) {
    if (errno == ENOENT) { *absent = true; return true; }
    return f->set(errno, std::string("open ") + path);
  }
  char line[64];
  while (fgets(line, sizeof(line), fp)) {
    std::string n(line);
    while (!n.empty() && (n.back() == '\n' || n.back() == '\r')) n.pop_back();
    if (!n.empty()) out->push_back(n);
  }
  fclose(fp);
  return true;
}

// Refuses (ENOENT) a table the names file does not list, so GET_INFO never instantiates one.
template <typename T>
bool CheckListed(const std::string& table, Failure* f) {
  std::vector<std::string> names;
  bool absent = false;
  if (!ReadTableNames(T::kNames, &names, &absent, f)) return false;
  if (absent || std::find(names.begin(), names.end(), table) == names.end()) {
    return f->set(ENOENT, "legacy table " + table + " not present");
  }
  return true;
}

// Walks the blob into entries and chains; EPROTO for a layout iptables would not make.
template <typename T>
bool Parse(Table* t, Failure* f) {
  const std::string bad = "unexpected layout of legacy table " + t->name;
  std::vector<uint32_t> offsets;
  for (uint32_t off = 0; off < t->size;) {
    if (t->size - off < sizeof(typename T::Entry)) return f->set(EPROTO, bad);
    const auto* e = reinterpret_cast<const typename T::Entry*>(t->blob + off);
    if (e->next_offset < sizeof(typename T::Entry) + sizeof(xt_entry_target) || e->next_offset > t->size - off ||
        e->target_offset < sizeof(typename T::Entry) || e->target_offset + sizeof(xt_entry_target) > e->next_offset) {
      return f->set(EPROTO, bad);
    }
    const auto* tg = reinterpret_cast<const xt_entry_target*>(t->blob + off + e->target_offset);
    if (tg->u.target_size < sizeof(xt_entry_target) || e->target_offset + tg->u.target_size > e->next_offset) return f->set(EPROTO, bad);
    const std::string tname(tg->u.user.name, strnlen(tg->u.user.name, sizeof(tg->u.user.name)));
    ParsedEntry pe;
    pe.off = off;
    pe.size = e->next_offset;
    pe.standard = tname == XT_STANDARD_TARGET && tg->u.target_size >= sizeof(xt_standard_target);
    if (pe.standard) pe.verdict = reinterpret_cast<const xt_standard_target*>(tg)->verdict;
    pe.isGoto = T::IsGoto(e);
    int hook = -1;
    for (int h = 0; h < NF_INET_NUMHOOKS && hook < 0; h++) {
      if ((t->validHooks & (1u << h)) && t->hookEntry[h] == off) hook = h;
    }
    const bool error = tname == XT_ERROR_TARGET && tg->u.target_size >= sizeof(xt_error_target);
    std::string ename;
    if (error) {
      const auto* et = reinterpret_cast<const xt_error_target*>(tg);
      ename.assign(et->errorname, strnlen(et->errorname, sizeof(et->errorname)));
    }
    // A new chain starts here: the previous one ended with the entry before (its policy / RETURN).
    auto start = [&](std::string name, int h) {
      if (!t->chains.empty()) t->chains.back().last = t->entries.size() - 1;
      ParsedChain c;
      c.name = std::move(name);
      c.hook = h;
      c.first = t->entries.size();
      t->chains.push_back(std::move(c));
    };
    if (hook >= 0) {
      start(kHookNames[hook], hook);
      pe.kind = Kind::kRule;
    } else if (error && ename == XT_ERROR_TARGET && off + e->next_offset == t->size) {
      if (!t->chains.empty()) t->chains.back().last = t->entries.size() - 1;
      pe.kind = Kind::kEnd;
    } else if (error) {
      start(ename, -1);
      pe.kind = Kind::kHead;
    } else if (t->chains.empty()) {
      return f->set(EPROTO, bad);
    }
    if (pe.kind != Kind::kEnd) pe.chain = int(t->chains.size() - 1);
    offsets.push_back(off);
    t->entries.push_back(pe);
    off += e->next_offset;
  }
  if (t->entries.size() != t->numEntries || t->entries.empty() || t->entries.back().kind != Kind::kEnd) return f->set(EPROTO, bad);
  // Every valid hook must start a chain (its entry is an entry's start).
  size_t builtins = std::count_if(t->chains.begin(), t->chains.end(), [](const ParsedChain& c) { return c.hook >= 0; });
  if (builtins != size_t(__builtin_popcount(t->validHooks & ((1u << NF_INET_NUMHOOKS) - 1)))) return f->set(EPROTO, bad);
  for (ParsedChain& c : t->chains) {
    // A user chain is at least its head and RETURN; a builtin's last entry is its underflow (policy).
    if (c.hook < 0 ? c.last <= c.first : t->entries[c.last].off != t->underflow[c.hook]) return f->set(EPROTO, bad);
    t->entries[c.last].kind = Kind::kFoot;
  }
  for (ParsedEntry& pe : t->entries) {
    if (!pe.standard || pe.verdict < 0) continue;
    auto it = std::lower_bound(offsets.begin(), offsets.end(), uint32_t(pe.verdict));
    if (it == offsets.end() || *it != uint32_t(pe.verdict)) return f->set(EPROTO, bad);
    pe.target = int(it - offsets.begin());
  }
  return true;
}

// GET_INFO then GET_ENTRIES, parsed. EAGAIN: the table changed size between the two (read again).
template <typename T>
bool ReadTable(int fd, const std::string& name, Table* t, Failure* f) {
  typename T::GetInfo info = {};
  snprintf(info.name, sizeof(info.name), "%s", name.c_str());
  socklen_t len = sizeof(info);
  if (getsockopt(fd, T::kLevel, T::kGetInfo, &info, &len) != 0) return f->set(errno, "legacy table " + name + ": get info");
  const size_t total = sizeof(typename T::GetEntries) + info.size;
  t->storage.assign((total + 7) / 8, 0);
  auto* ge = reinterpret_cast<typename T::GetEntries*>(t->storage.data());
  snprintf(ge->name, sizeof(ge->name), "%s", name.c_str());
  ge->size = info.size;
  len = socklen_t(total);
  if (getsockopt(fd, T::kLevel, T::kGetEntries, ge, &len) != 0) return f->set(errno, "legacy table " + name + ": get entries");
  t->name = name;
  t->validHooks = info.valid_hooks;
  t->numEntries = info.num_entries;
  t->size = info.size;
  memcpy(t->hookEntry, info.hook_entry, sizeof(t->hookEntry));
  memcpy(t->underflow, info.underflow, sizeof(t->underflow));
  t->blob = reinterpret_cast<uint8_t*>(ge->entrytable);
  t->entries.clear();
  t->chains.clear();
  return Parse<T>(t, f);
}

// Every rule (not a head, foot or policy) that jumps or goes to another chain; optionally only to `to`.
std::vector<Jump> Jumps(const Table& t, const std::vector<bool>* to = nullptr, const std::vector<bool>* from = nullptr) {
  std::vector<Jump> out;
  for (const ParsedChain& c : t.chains) {
    for (size_t i = c.first; i <= c.last; i++) {
      const ParsedEntry& e = t.entries[i];
      if (e.kind != Kind::kRule || e.target < 0) continue;
      int tc = t.entries[e.target].chain;
      if (tc < 0 || tc == e.chain) continue;  // fall-through to the next rule, not a jump
      if (to && !(*to)[tc]) continue;
      if (from && (*from)[e.chain]) continue;
      out.push_back({c.name, t.chains[tc].name, uint32_t(i - c.first) + (c.hook < 0 ? 0 : 1), e.isGoto});
    }
  }
  return out;
}

struct RemoveResult {
  std::vector<std::string> chains;
  std::vector<Jump> jumps;
  bool countersRestored = true;
  int attempts = 0;
};

// Builds and commits the table without the doomed chains and the jumps to them. false with
// f->err == EAGAIN: the table changed since it was read.
template <typename T>
bool ReplaceWithout(int fd, const Table& t, const std::set<std::string>& names, RemoveResult* r, Failure* f) {
  std::vector<bool> doomed(t.chains.size(), false);
  r->chains.clear();
  for (size_t c = 0; c < t.chains.size(); c++) {
    if (t.chains[c].hook < 0 && names.count(t.chains[c].name)) { doomed[c] = true; r->chains.push_back(t.chains[c].name); }
  }
  r->jumps = Jumps(t, &doomed, &doomed);
  if (r->chains.empty() && r->jumps.empty()) return true;

  const size_t n = t.entries.size();
  std::vector<bool> keep(n);
  for (size_t i = 0; i < n; i++) {
    const ParsedEntry& e = t.entries[i];
    bool jumpsAway = e.kind == Kind::kRule && e.target >= 0 && t.entries[e.target].chain >= 0 && doomed[t.entries[e.target].chain];
    keep[i] = !(e.chain >= 0 && doomed[e.chain]) && !jumpsAway;
  }
  // Where an old offset lands now: the first kept entry at or after it (the last ERROR is always kept;
  // a hook entry that was a removed jump now starts at the chain's next rule).
  std::vector<uint32_t> newOff(n);
  std::vector<size_t> nextKept(n);
  uint32_t size = 0, count = 0;
  for (size_t i = 0; i < n; i++) if (keep[i]) { newOff[i] = size; size += t.entries[i].size; count++; }
  for (size_t i = n; i-- > 0;) nextKept[i] = keep[i] ? i : nextKept[i + 1];
  auto landing = [&](size_t i) { return newOff[nextKept[i]]; };
  auto indexAt = [&](uint32_t off) {
    return size_t(std::lower_bound(t.entries.begin(), t.entries.end(), off, [](const ParsedEntry& e, uint32_t o) { return e.off < o; }) - t.entries.begin());
  };

  const size_t total = sizeof(typename T::Replace) + size;
  std::vector<uint64_t> storage((total + 7) / 8, 0);
  auto* rep = reinterpret_cast<typename T::Replace*>(storage.data());
  snprintf(rep->name, sizeof(rep->name), "%s", t.name.c_str());
  rep->valid_hooks = t.validHooks;
  rep->num_entries = count;
  rep->size = size;
  for (int h = 0; h < NF_INET_NUMHOOKS; h++) {
    bool valid = t.validHooks & (1u << h);
    rep->hook_entry[h] = valid ? landing(indexAt(t.hookEntry[h])) : t.hookEntry[h];
    rep->underflow[h] = valid ? landing(indexAt(t.underflow[h])) : t.underflow[h];
  }
  // The kernel requires the old entry count and somewhere to put the old counters.
  std::vector<xt_counters> oldCounters(t.numEntries);
  rep->num_counters = t.numEntries;
  rep->counters = oldCounters.data();
  uint8_t* out = reinterpret_cast<uint8_t*>(rep->entries);
  for (size_t i = 0; i < n; i++) {
    if (!keep[i]) continue;
    const ParsedEntry& e = t.entries[i];
    uint8_t* dst = out + newOff[i];
    memcpy(dst, t.blob + e.off, e.size);
    if (e.standard && e.target >= 0) {
      auto* te = reinterpret_cast<typename T::Entry*>(dst);
      reinterpret_cast<xt_standard_target*>(dst + te->target_offset)->verdict = int32_t(landing(size_t(e.target)));
    }
  }
  if (setsockopt(fd, T::kLevel, T::kReplace, rep, socklen_t(total)) != 0) return f->set(errno, "legacy table " + t.name + ": replace");

  // The replaced table starts at zero: give the kept entries their counters back, as iptables does
  // (values of the moment of the replace). A failure here loses counters, not rules.
  const size_t ctotal = sizeof(xt_counters_info) + count * sizeof(xt_counters);
  std::vector<uint64_t> cstorage((ctotal + 7) / 8, 0);
  auto* ci = reinterpret_cast<xt_counters_info*>(cstorage.data());
  snprintf(ci->name, sizeof(ci->name), "%s", t.name.c_str());
  ci->num_counters = count;
  for (size_t i = 0, k = 0; i < n; i++) if (keep[i]) ci->counters[k++] = oldCounters[i];
  r->countersRestored = setsockopt(fd, T::kLevel, T::kAddCounters, ci, socklen_t(ctotal)) == 0;
  return true;
}

// iptables-legacy (and kube-proxy, the kubelet through it) holds this lock around each read and
// replace of a table; holding it too keeps our replace from undoing one of theirs (the kernel's EAGAIN
// only notices a change in the number of entries). Released when the fd closes.
class XtablesLock {
 public:
  // false: another process held it for all of `ms`.
  bool Acquire(int ms) {
    fd_.reset(open("/run/xtables.lock", O_CREAT | O_RDONLY | O_CLOEXEC, 0600));
    if (fd_ < 0) return true;  // no lock file to share (read-only /run): the kernel's check alone
    for (int waited = 0;; waited += 50) {
      if (flock(fd_, LOCK_EX | LOCK_NB) == 0 || errno != EWOULDBLOCK) return true;
      if (waited >= ms) return false;
      usleep(50 * 1000);
    }
  }

 private:
  UniqueFd fd_;
};

enum class Op { kTables, kList, kRemove };

class LegacyWorker : public NetnsWorker {
 public:
  LegacyWorker(Napi::Env env, Op op, int family, std::string table, std::set<std::string> names, const std::string& netns)
      : NetnsWorker(env, netns, "setns " + netns), op_(op), family_(family), table_(std::move(table)), names_(std::move(names)) {}

 private:
  void ExecuteInNetns() override {
    if (family_ == 4) Run<V4>();
    else Run<V6>();
    err_ = fail_.err;
    what_ = fail_.what;
  }

  Napi::Value Result(Napi::Env env) override {
    if (op_ == Op::kTables) {
      if (absent_) return env.Null();
      Napi::Array a = Napi::Array::New(env, tableNames_.size());
      for (uint32_t i = 0; i < tableNames_.size(); i++) a.Set(i, tableNames_[i]);
      return a;
    }
    Napi::Object o = Napi::Object::New(env);
    if (op_ == Op::kList) {
      Napi::Array chains = Napi::Array::New(env, table_t_.chains.size());
      for (uint32_t i = 0; i < table_t_.chains.size(); i++) {
        const ParsedChain& c = table_t_.chains[i];
        Napi::Object co = Napi::Object::New(env);
        co.Set("name", c.name);
        co.Set("builtin", c.hook >= 0);
        co.Set("rules", c.rules());
        chains.Set(i, co);
      }
      o.Set("chains", chains);
      o.Set("jumps", JumpsToJs(env, Jumps(table_t_)));
    } else {
      Napi::Array chains = Napi::Array::New(env, removed_.chains.size());
      for (uint32_t i = 0; i < removed_.chains.size(); i++) chains.Set(i, removed_.chains[i]);
      o.Set("chains", chains);
      o.Set("jumps", JumpsToJs(env, removed_.jumps));
      o.Set("countersRestored", removed_.countersRestored);
      o.Set("attempts", removed_.attempts);
    }
    return o;
  }

  template <typename T>
  void Run() {
    if (op_ == Op::kTables) {
      ReadTableNames(T::kNames, &tableNames_, &absent_, &fail_);
      return;
    }
    if (!CheckListed<T>(table_, &fail_)) return;
    UniqueFd fd(socket(T::kDomain, SOCK_RAW | SOCK_CLOEXEC, IPPROTO_RAW));
    if (fd < 0) { fail_.set(errno, "raw socket"); return; }
    XtablesLock lock;
    if (op_ == Op::kRemove && !lock.Acquire(5000)) { fail_.set(ETIMEDOUT, "/run/xtables.lock held by another process for 5 s"); return; }
    // EAGAIN: the table changed between GET_INFO and GET_ENTRIES, or (replace) since it was read: the
    // kernel refuses a replace whose num_counters no longer matches. Read (and plan) again.
    for (int attempt = 1; attempt <= 3; attempt++) {
      fail_ = Failure();
      removed_.attempts = attempt;
      if (!ReadTable<T>(fd, table_, &table_t_, &fail_)) { if (fail_.err == EAGAIN) continue; return; }
      if (op_ == Op::kList) return;
      if (ReplaceWithout<T>(fd, table_t_, names_, &removed_, &fail_) || fail_.err != EAGAIN) return;
    }
  }

  static Napi::Array JumpsToJs(Napi::Env env, const std::vector<Jump>& jumps) {
    Napi::Array a = Napi::Array::New(env, jumps.size());
    for (uint32_t i = 0; i < jumps.size(); i++) {
      Napi::Object j = Napi::Object::New(env);
      j.Set("chain", jumps[i].chain);
      j.Set("target", jumps[i].target);
      j.Set("index", jumps[i].index);
      j.Set("goto", jumps[i].isGoto);
      a.Set(i, j);
    }
    return a;
  }

  Op op_;
  int family_;
  std::string table_;
  std::set<std::string> names_;
  Failure fail_;
  bool absent_ = false;
  std::vector<std::string> tableNames_;
  Table table_t_;
  RemoveResult removed_;
};

// Arguments common to the three calls: family (4|6) at 0, a table name at 1 when `withTable`.
bool FamilyTableArgs(const Napi::CallbackInfo& info, bool withTable, const char* usage, int* family, std::string* table) {
  Napi::Env env = info.Env();
  double fam = info.Length() > 0 && info[0].IsNumber() ? info[0].As<Napi::Number>().DoubleValue() : 0;
  if (fam != 4 && fam != 6) { Napi::TypeError::New(env, usage).ThrowAsJavaScriptException(); return false; }
  *family = int(fam);
  if (!withTable) return true;
  *table = info.Length() > 1 && info[1].IsString() ? info[1].As<Napi::String>().Utf8Value() : "";
  if (table->empty() || table->size() >= XT_TABLE_MAXNAMELEN) { Napi::TypeError::New(env, usage).ThrowAsJavaScriptException(); return false; }
  return true;
}

}  // namespace

Napi::Value IptLegacyTables(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int family;
  std::string table, netns;
  if (!FamilyTableArgs(info, false, "iptLegacyTables(family: 4 | 6, netns?)", &family, &table)) return env.Undefined();
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new LegacyWorker(env, Op::kTables, family, "", {}, netns))->Start();
}

Napi::Value IptLegacyList(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int family;
  std::string table, netns;
  if (!FamilyTableArgs(info, true, "iptLegacyList(family: 4 | 6, table: string, netns?)", &family, &table)) return env.Undefined();
  if (!NetnsArg(info, 2, &netns)) return env.Undefined();
  return (new LegacyWorker(env, Op::kList, family, table, {}, netns))->Start();
}

Napi::Value IptLegacyRemoveChains(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "iptLegacyRemoveChains(family: 4 | 6, table: string, chains: string[] (1..29 characters each), netns?)";
  int family;
  std::string table, netns;
  if (!FamilyTableArgs(info, true, usage, &family, &table)) return env.Undefined();
  if (info.Length() < 3 || !info[2].IsArray()) { Napi::TypeError::New(env, usage).ThrowAsJavaScriptException(); return env.Undefined(); }
  Napi::Array a = info[2].As<Napi::Array>();
  std::set<std::string> names;
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value v = a.Get(i);
    std::string n = v.IsString() ? v.As<Napi::String>().Utf8Value() : "";
    if (n.empty() || n.size() >= XT_FUNCTION_MAXNAMELEN) { Napi::TypeError::New(env, usage).ThrowAsJavaScriptException(); return env.Undefined(); }
    names.insert(std::move(n));
  }
  if (!NetnsArg(info, 3, &netns)) return env.Undefined();
  return (new LegacyWorker(env, Op::kRemove, family, table, std::move(names), netns))->Start();
}

}  // namespace kpng
