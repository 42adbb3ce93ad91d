// Shared helpers of the kpng native addon: network-namespace switching for the calling (worker)
// thread, errno names, and the netlink socket setup used by every subsystem.
#pragma once
#include <napi.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include <string>

namespace kpng {

// Switches the calling thread into the network namespace at `path` for the guard's lifetime.
// Sockets opened meanwhile stay bound to that namespace after the guard restores the original.
// Worker threads are pooled, so the original namespace is always restored.
class NetnsGuard {
 public:
  explicit NetnsGuard(const std::string& path) {
    if (path.empty()) return;
    orig_ = open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
    if (orig_ < 0) { err_ = errno; return; }
    int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) { err_ = errno; close(orig_); orig_ = -1; return; }
    if (setns(fd, CLONE_NEWNET) != 0) { err_ = errno; close(orig_); orig_ = -1; }
    close(fd);
  }
  ~NetnsGuard() {
    if (orig_ >= 0) {
      setns(orig_, CLONE_NEWNET);
      close(orig_);
    }
  }
  int error() const { return err_; }
  NetnsGuard(const NetnsGuard&) = delete;
  NetnsGuard& operator=(const NetnsGuard&) = delete;

 private:
  int orig_ = -1;
  int err_ = 0;
};

inline std::string ErrnoName(int e) {
  const char* n = strerrorname_np(e);
  return n ? std::string(n) : "E" + std::to_string(e);
}

// Error as a plain JS object carrying errno/code (the TS layer turns it into an Error).
inline Napi::Error MakeErrnoError(Napi::Env env, int err, const std::string& what) {
  Napi::Error e = Napi::Error::New(env, what + ": " + strerror(err));
  e.Value().Set("errno", Napi::Number::New(env, err));
  e.Value().Set("code", Napi::String::New(env, ErrnoName(err)));
  return e;
}

inline double NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

// Opens a NETLINK_NETFILTER socket (inside netns when given), with ext-ack and capped acks.
// Returns fd or -errno.
int OpenNetfilterSocket(const std::string& netns, int rcvbuf, int sndbuf);

Napi::Value NftApply(const Napi::CallbackInfo& info);
Napi::Value NftList(const Napi::CallbackInfo& info);
Napi::Value NftListTables(const Napi::CallbackInfo& info);
Napi::Value ConntrackDelete(const Napi::CallbackInfo& info);
Napi::Value IpvsApply(const Napi::CallbackInfo& info);
Napi::Value IpvsDump(const Napi::CallbackInfo& info);
Napi::Value IpvsConfig(const Napi::CallbackInfo& info);
Napi::Value IpvsInfo(const Napi::CallbackInfo& info);
Napi::Value RtnlLink(const Napi::CallbackInfo& info);
Napi::Value RtnlAddrs(const Napi::CallbackInfo& info);
Napi::Value RtnlAddrApply(const Napi::CallbackInfo& info);
Napi::Value Sysctl(const Napi::CallbackInfo& info);

}  // namespace kpng
