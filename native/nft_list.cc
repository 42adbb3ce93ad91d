// What kpng's clean-up reads of nf_tables (src/cleanup/nft-listing.ts): every table, and one table's
// chains and rules (no sets: a clean-up removes chains and the rules that jump to them), on a worker
// thread. The full listing with sets and elements is the test addon's (test/native/).
#include "nft_dump.h"
#include "netlink_batch.h"
#include "promise_worker.h"

#include <vector>

namespace kpng {

namespace {

class ListTablesWorker : public PromiseWorker {
 public:
  ListTablesWorker(Napi::Env env, std::string netns) : PromiseWorker(env, "list tables"), netns_(std::move(netns)) {}

 private:
  void Execute() override {
    UniqueFd fd(OpenNetlinkSocket(NETLINK_NETFILTER, netns_, 1 << 20, 0));
    if (fd < 0) { err_ = -fd; return; }
    err_ = DumpTables(fd, NftSeqBase(), tables_);
  }
  Napi::Value Result(Napi::Env env) override {
    Napi::Array a = Napi::Array::New(env, tables_.size());
    for (size_t i = 0; i < tables_.size(); i++) a[i] = TableToJs(env, tables_[i]);
    return a;
  }

  std::string netns_;
  std::vector<TableRec> tables_;
};

class ListChainsWorker : public PromiseWorker {
 public:
  ListChainsWorker(Napi::Env env, uint32_t family, std::string table, std::string netns)
      : PromiseWorker(env), family_(family), table_(std::move(table)), netns_(std::move(netns)) {}

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
    if ((err_ = DumpRules(fd, seq++, family_, table_, rules_))) what_ = "dump rules";
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Object out = Napi::Object::New(env);
    out.Set("table", TableToJs(env, table_rec_));
    Napi::Array chains = Napi::Array::New(env, chains_.size());
    for (size_t i = 0; i < chains_.size(); i++) chains[i] = ChainToJs(env, chains_[i]);
    out.Set("chains", chains);
    Napi::Array rules = Napi::Array::New(env, rules_.size());
    for (size_t i = 0; i < rules_.size(); i++) rules[i] = RuleToJs(env, rules_[i]);
    out.Set("rules", rules);
    return out;
  }

  uint32_t family_;
  std::string table_;
  std::string netns_;
  TableRec table_rec_;
  std::vector<ChainRec> chains_;
  std::vector<RuleRec> rules_;
};

}  // namespace

// nftListTables(netns?: string): Promise<{family, name, handle, flags, comment?}[]>
Napi::Value NftListTables(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  std::string netns;
  if (!NetnsArg(info, 0, &netns)) return env.Undefined();
  return (new ListTablesWorker(env, netns))->Start();
}

// nftListChains(family: number, table: string, netns?: string): Promise<{table, chains, rules}>
Napi::Value NftListChains(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 2 || !info[0].IsNumber() || !info[1].IsString()) {
    Napi::TypeError::New(env, "nftListChains(family: number, table: string, netns?: string)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string netns;
  if (!NetnsArg(info, 2, &netns)) return env.Undefined();
  return (new ListChainsWorker(env, info[0].As<Napi::Number>().Uint32Value(), info[1].As<Napi::String>().Utf8Value(), netns))->Start();
}

}  // namespace kpng
