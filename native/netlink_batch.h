// Plain (non-transactional) netlink batches and dumps, shared by the IPVS (generic netlink) and
// rtnetlink parts of the addon. Messages are built into one buffer, sent in chunks of a few dozen KiB
// (one sendmsg each; the kernel handles a chunk's messages one after the other, synchronously, and
// keeps going after an error), and every error ack is mapped back to the message's index.
#pragma once
#include "common.h"

#include <linux/netlink.h>

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace kpng {

// Opens a netlink socket of `proto` inside netns (when given), bound, with capped acks and ext-ack.
// Returns fd or -errno.
int OpenNetlinkSocket(int proto, const std::string& netns, int rcvbuf = 4 << 20, int sndbuf = 1 << 20);

// Messages appended one after the other; index i is the i-th message added.
class NlMessages {
 public:
  // Starts a message; returns its header. Attributes go through Put* until the next Begin.
  nlmsghdr* Begin(uint16_t type, uint16_t flags);
  // Appends raw payload bytes (e.g. a genlmsghdr, an ifaddrmsg) to the current message.
  void Payload(const void* p, size_t n);
  void Put(uint16_t type, const void* p, size_t n);
  void PutU16(uint16_t type, uint16_t v) { Put(type, &v, 2); }
  void PutU32(uint16_t type, uint32_t v) { Put(type, &v, 4); }
  void PutStr(uint16_t type, const std::string& s) { Put(type, s.c_str(), s.size() + 1); }
  // Nested attributes: Nest returns a token for End.
  size_t Nest(uint16_t type);
  void End(size_t token);

  size_t count() const { return offs_.size(); }
  size_t bytes() const { return buf_.size(); }
  nlmsghdr* At(size_t i) { return (nlmsghdr*)(buf_.data() + offs_[i]); }
  void Clear() { buf_.clear(); offs_.clear(); }

 private:
  void Grow(size_t n);
  nlmsghdr* Cur() { return (nlmsghdr*)(buf_.data() + offs_.back()); }
  std::vector<uint8_t> buf_;
  std::vector<size_t> offs_;
};

struct NlFailure {
  int64_t index;  // message index, -1 when not attributable
  int err;
  std::string message;  // the kernel's ext-ack text, if any
};

struct NlSendResult {
  int sysErr = 0;        // transport error (errno), 0 when every chunk went out
  std::string sysWhat;
  bool overflow = false;  // the receive buffer overran: some errors may be missing
  bool incomplete = false;  // a chunk's final ack never came
  std::vector<NlFailure> failures;
};

// Sends every message (seq = index + base), chunk by chunk, each chunk's last message asking for an ACK.
NlSendResult SendBatch(int fd, NlMessages& msgs, size_t chunkBytes = 48 << 10);

// Runs one dump request (its flags get NLM_F_REQUEST | NLM_F_DUMP) and calls onMsg for every reply
// message of type `want`. Returns 0 or an errno (the kernel's error, EINTR when the dump was interrupted
// by a change: the caller may retry).
int RunDump(int fd, NlMessages& req, const std::function<void(const nlmsghdr*)>& onMsg);

// Sends one request and waits for its reply/ack; onMsg sees non-error replies. Returns 0 or an errno.
int RunRequest(int fd, NlMessages& req, const std::function<void(const nlmsghdr*)>& onMsg);

// Attribute iteration over [p, end).
struct NlAttrView {
  const nlattr* a;
  uint16_t type() const { return a->nla_type & NLA_TYPE_MASK; }
  const uint8_t* data() const { return (const uint8_t*)a + NLA_HDRLEN; }
  size_t len() const { return a->nla_len - NLA_HDRLEN; }
  uint16_t u16() const { uint16_t v = 0; memcpy(&v, data(), len() < 2 ? len() : 2); return v; }
  uint32_t u32() const { uint32_t v = 0; memcpy(&v, data(), len() < 4 ? len() : 4); return v; }
};
void ForEachAttr(const void* p, size_t n, const std::function<void(const NlAttrView&)>& f);

// A JS result object for NlSendResult (failed[] with index/errno/code/message, overflow, incomplete).
Napi::Object SendResultToJs(Napi::Env env, const NlSendResult& r, size_t messages, size_t bytes, double ms);

}  // namespace kpng
