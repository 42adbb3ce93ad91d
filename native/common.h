// Shared helpers of the kpng native addon: network-namespace switching for the calling (worker)
// thread, errno names, and the netlink socket setup used by every subsystem.
#pragma once
#include <napi.h>

#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <string.h>
#include <unistd.h>

#include <memory>
#include <string>

namespace kpng {

// Owns a file descriptor: closed when the owner goes out of scope, on every path. Negative values
// (errors, -errno) are held but never closed. Converts to int for system calls.
class UniqueFd {
 public:
  explicit UniqueFd(int fd = -1) : fd_(fd) {}
  ~UniqueFd() { reset(); }
  UniqueFd(UniqueFd&& o) noexcept : fd_(o.release()) {}
  UniqueFd& operator=(UniqueFd&& o) noexcept { if (this != &o) { reset(); fd_ = o.release(); } return *this; }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  operator int() const { return fd_; }
  int get() const { return fd_; }
  // Gives up ownership (the caller closes).
  int release() { int f = fd_; fd_ = -1; return f; }
  void reset(int fd = -1) { if (fd_ >= 0) close(fd_); fd_ = fd; }

 private:
  int fd_;
};

// Switches the calling thread into the network namespace at `path` for the guard's lifetime.
// Sockets opened meanwhile stay bound to that namespace after the guard restores the original.
// Worker threads are pooled, so the original namespace is always restored.
class NetnsGuard {
 public:
  explicit NetnsGuard(const std::string& path) {
    if (path.empty()) return;
    orig_.reset(open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
    if (orig_ < 0) { err_ = errno; return; }
    UniqueFd target(open(path.c_str(), O_RDONLY | O_CLOEXEC));
    if (target < 0) { err_ = errno; orig_.reset(); return; }
    if (setns(target, CLONE_NEWNET) != 0) { err_ = errno; orig_.reset(); }
  }
  ~NetnsGuard() {
    if (orig_ >= 0) setns(orig_, CLONE_NEWNET);
  }
  int error() const { return err_; }
  NetnsGuard(const NetnsGuard&) = delete;
  NetnsGuard& operator=(const NetnsGuard&) = delete;

 private:
  UniqueFd orig_;
  int err_ = 0;
};

// The errno's symbolic name ("ENOENT"), "E<number>" for one without a name. A table of the Linux
// names (the aliases EWOULDBLOCK, EDEADLOCK, ENOTSUP print as EAGAIN, EDEADLK, EOPNOTSUPP) rather than
// glibc's strerrorname_np(): that arrived in glibc 2.32, and the prebuilds load on 2.28.
inline std::string ErrnoName(int e) {
#define N(x) case x: return #x;
  switch (e) {
    N(EPERM) N(ENOENT) N(ESRCH) N(EINTR) N(EIO) N(ENXIO) N(E2BIG) N(ENOEXEC) N(EBADF) N(ECHILD) N(EAGAIN)
    N(ENOMEM) N(EACCES) N(EFAULT) N(ENOTBLK) N(EBUSY) N(EEXIST) N(EXDEV) N(ENODEV) N(ENOTDIR) N(EISDIR)
    N(EINVAL) N(ENFILE) N(EMFILE) N(ENOTTY) N(ETXTBSY) N(EFBIG) N(ENOSPC) N(ESPIPE) N(EROFS) N(EMLINK)
    N(EPIPE) N(EDOM) N(ERANGE) N(EDEADLK) N(ENAMETOOLONG) N(ENOLCK) N(ENOSYS) N(ENOTEMPTY) N(ELOOP) N(ENOMSG)
    N(EIDRM) N(ECHRNG) N(EL2NSYNC) N(EL3HLT) N(EL3RST) N(ELNRNG) N(EUNATCH) N(ENOCSI) N(EL2HLT) N(EBADE)
    N(EBADR) N(EXFULL) N(ENOANO) N(EBADRQC) N(EBADSLT) N(EBFONT) N(ENOSTR) N(ENODATA) N(ETIME) N(ENOSR)
    N(ENONET) N(ENOPKG) N(EREMOTE) N(ENOLINK) N(EADV) N(ESRMNT) N(ECOMM) N(EPROTO) N(EMULTIHOP) N(EDOTDOT)
    N(EBADMSG) N(EOVERFLOW) N(ENOTUNIQ) N(EBADFD) N(EREMCHG) N(ELIBACC) N(ELIBBAD) N(ELIBSCN) N(ELIBMAX)
    N(ELIBEXEC) N(EILSEQ) N(ERESTART) N(ESTRPIPE) N(EUSERS) N(ENOTSOCK) N(EDESTADDRREQ) N(EMSGSIZE)
    N(EPROTOTYPE) N(ENOPROTOOPT) N(EPROTONOSUPPORT) N(ESOCKTNOSUPPORT) N(EOPNOTSUPP) N(EPFNOSUPPORT)
    N(EAFNOSUPPORT) N(EADDRINUSE) N(EADDRNOTAVAIL) N(ENETDOWN) N(ENETUNREACH) N(ENETRESET) N(ECONNABORTED)
    N(ECONNRESET) N(ENOBUFS) N(EISCONN) N(ENOTCONN) N(ESHUTDOWN) N(ETOOMANYREFS) N(ETIMEDOUT) N(ECONNREFUSED)
    N(EHOSTDOWN) N(EHOSTUNREACH) N(EALREADY) N(EINPROGRESS) N(ESTALE) N(EUCLEAN) N(ENOTNAM) N(ENAVAIL)
    N(EISNAM) N(EREMOTEIO) N(EDQUOT) N(ENOMEDIUM) N(EMEDIUMTYPE) N(ECANCELED) N(ENOKEY) N(EKEYEXPIRED)
    N(EKEYREVOKED) N(EKEYREJECTED) N(EOWNERDEAD) N(ENOTRECOVERABLE) N(ERFKILL) N(EHWPOISON)
  }
#undef N
  return "E" + std::to_string(e);
}

// The optional netns argument at `index`: absent/undefined means the process's own namespace; any
// other non-string is a TypeError (returns false with the exception pending).
inline bool NetnsArg(const Napi::CallbackInfo& info, size_t index, std::string* out) {
  if (info.Length() <= index || info[index].IsUndefined() || info[index].IsNull()) { out->clear(); return true; }
  if (!info[index].IsString()) {
    Napi::TypeError::New(info.Env(), "netns: a path string such as /var/run/netns/NAME").ThrowAsJavaScriptException();
    return false;
  }
  *out = info[index].As<Napi::String>().Utf8Value();
  return true;
}

// Error as a plain JS object carrying errno/code (the TS layer turns it into an Error).
inline Napi::Error MakeErrnoError(Napi::Env env, int err, const std::string& what) {
  Napi::Error e = Napi::Error::New(env, what + ": " + strerror(err));
  e.Value().Set("errno", Napi::Number::New(env, err));
  e.Value().Set("code", Napi::String::New(env, ErrnoName(err)));
  return e;
}

// A buffer for netlink replies, left uninitialised: a zeroed one (std::vector<char>(n)) of 128 KiB
// or more is a fresh mapping that the zeroing faults in page by page on every call, while recv()
// touches only what arrives.
template <typename T>
class RecvBuffer {
 public:
  explicit RecvBuffer(size_t n) : p_(new T[n]), n_(n) {}
  T* data() { return p_.get(); }
  size_t size() const { return n_; }

 private:
  std::unique_ptr<T[]> p_;
  size_t n_;
};

inline double NowMs() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

Napi::Value NftApply(const Napi::CallbackInfo& info);
Napi::Value NftCloseSockets(const Napi::CallbackInfo& info);
Napi::Value NftListChains(const Napi::CallbackInfo& info);
Napi::Value NftListTables(const Napi::CallbackInfo& info);
Napi::Value NftMonitor(const Napi::CallbackInfo& info);
Napi::Value ConntrackDelete(const Napi::CallbackInfo& info);
Napi::Value IpvsApply(const Napi::CallbackInfo& info);
Napi::Value IpvsDump(const Napi::CallbackInfo& info);
Napi::Value IpvsConfig(const Napi::CallbackInfo& info);
Napi::Value IpvsInfo(const Napi::CallbackInfo& info);
Napi::Value RtnlLink(const Napi::CallbackInfo& info);
Napi::Value RtnlLinkDelete(const Napi::CallbackInfo& info);
Napi::Value IpsetDestroy(const Napi::CallbackInfo& info);
// iptables_legacy.cc (x_tables through get/setsockopt: the clean-up of iptables-legacy rules)
Napi::Value IptLegacyTables(const Napi::CallbackInfo& info);
Napi::Value IptLegacyList(const Napi::CallbackInfo& info);
Napi::Value IptLegacyRemoveChains(const Napi::CallbackInfo& info);
Napi::Value RtnlAddrs(const Napi::CallbackInfo& info);
Napi::Value RtnlLinks(const Napi::CallbackInfo& info);
Napi::Value RtnlAddrApply(const Napi::CallbackInfo& info);
Napi::Value Sysctl(const Napi::CallbackInfo& info);
Napi::Value EbpfOpen(const Napi::CallbackInfo& info);
Napi::Value EbpfMapApply(const Napi::CallbackInfo& info);
Napi::Value EbpfMapDump(const Napi::CallbackInfo& info);
Napi::Value EbpfDestroySockets(const Napi::CallbackInfo& info);
Napi::Value EbpfSevered(const Napi::CallbackInfo& info);
Napi::Value EbpfActivate(const Napi::CallbackInfo& info);
Napi::Value EbpfClose(const Napi::CallbackInfo& info);
Napi::Value EbpfCleanup(const Napi::CallbackInfo& info);
Napi::Value PeerCredentials(const Napi::CallbackInfo& info);
Napi::Value MallocTune(const Napi::CallbackInfo& info);
Napi::Value MallocTrim(const Napi::CallbackInfo& info);

}  // namespace kpng
