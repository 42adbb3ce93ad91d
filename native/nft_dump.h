// nf_tables netlink dumps shared by the product listing (nft_list.cc: tables, and one table's chains and
// rules for the clean-up) and the test addon's full listing (test/native/): requests, replies decoded
// with libnftnl into plain records on a worker thread, records turned into JS objects on the JS thread.
#pragma once
#include "common.h"

#include <linux/netlink.h>

#include <cstdint>
#include <functional>
#include <string>
#include <utility>
#include <vector>

namespace kpng {

struct TableRec {
  uint32_t family = 0;
  std::string name, comment;
  uint64_t handle = 0;
  uint32_t flags = 0;
};
struct ChainRec {
  uint32_t family = 0;
  std::string table, name, type, dev, comment;
  uint64_t handle = 0;
  bool base = false, hasPolicy = false;
  uint32_t hooknum = 0, policy = 0;
  int32_t prio = 0;
};
struct ExprRec {
  std::string name;
  std::vector<std::pair<uint16_t, std::vector<uint8_t>>> attrs;
};
struct RuleRec {
  uint32_t family = 0;
  std::string table, chain, comment;
  uint64_t handle = 0;
  std::vector<ExprRec> exprs;
};

// Comment (NUL-terminated string) of a libnftnl userdata TLV blob.
std::string UdataComment(const void* data, uint32_t len, uint8_t type);
inline std::string Str(const char* s) { return s ? s : ""; }

// A sequence number range of its own for each listing (1024 numbers), so replies never mix.
uint32_t NftSeqBase();

// Sends a dump request built by `build` and feeds every reply message to `cb`. Returns 0 or errno.
int NftDump(int fd, uint16_t type, uint8_t family, uint32_t seq, const std::function<void(nlmsghdr*)>& build,
            const std::function<void(const nlmsghdr*)>& cb);

int DumpTables(int fd, uint32_t seq, std::vector<TableRec>& out);
// The table `name` of `family`: 0, ENOENT when there is none, or the dump's errno.
int FindTable(int fd, uint32_t seq, uint32_t family, const std::string& name, TableRec* out);
int DumpChains(int fd, uint32_t seq, uint32_t family, const std::string& table, std::vector<ChainRec>& out);
// Rules with their expressions' attributes as raw bytes (decoded in TypeScript).
int DumpRules(int fd, uint32_t seq, uint32_t family, const std::string& table, std::vector<RuleRec>& out);

Napi::Object TableToJs(Napi::Env env, const TableRec& t);
Napi::Object ChainToJs(Napi::Env env, const ChainRec& c);
Napi::Object RuleToJs(Napi::Env env, const RuleRec& r);

}  // namespace kpng
