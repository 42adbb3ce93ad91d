// The clean-up's part of the eBPF backend (kpng --cleanup): every pinned link detached, so the
// programs leave the cgroup, then every pin and the directory removed. Refused while a running kpng
// holds the directory's lock.
#include "ebpf.h"

#include <dirent.h>
#include <fcntl.h>

namespace kpng {
namespace ebpf {

namespace {

class CleanupWorker : public PromiseWorker {
 public:
  CleanupWorker(Napi::Env env, std::string pinDir) : PromiseWorker(env), pinDir_(std::move(pinDir)) {}

 private:
  void Execute() override {
    // A running kpng holds the directory's lock: detaching its links under it would turn its socket LB
    // off behind its back (it would only notice at its next look).
    UniqueFd lock(open(pinDir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    long pid = 0;
    if (lock >= 0 && (err_ = LockPinDir(lock, &pid))) {
      what_ = "clean-up of " + pinDir_ + ": a running kpng holds it" + (pid ? " (pid " + std::to_string(pid) + ")" : "") + "; stop it first";
      return;
    }
    DIR* d = opendir(pinDir_.c_str());
    if (!d) { if (errno != ENOENT) { err_ = errno; what_ = "open " + pinDir_; } return; }
    std::vector<std::string> names;
    while (dirent* e = readdir(d)) {
      std::string n = e->d_name;
      if (n != "." && n != "..") names.push_back(n);
    }
    closedir(d);
    for (const std::string& n : names) {
      std::string p = pinDir_ + "/" + n;
      if (n.rfind("link_", 0) == 0) {
        // Detach now: other descriptors of the link (a running kpng) would otherwise keep it attached.
        UniqueFd fd(bpf_obj_get(p.c_str()));
        if (fd >= 0) bpf_link_detach(fd);
      }
      if (unlink(p.c_str()) != 0) { err_ = errno; what_ = "unlink " + p; return; }
      removed_.push_back(n);
    }
    if (rmdir(pinDir_.c_str()) != 0 && errno != ENOENT) { err_ = errno; what_ = "rmdir " + pinDir_; }
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Array a = Napi::Array::New(env, removed_.size());
    for (size_t i = 0; i < removed_.size(); i++) a[i] = Napi::String::New(env, removed_[i]);
    return a;
  }

  std::string pinDir_;
  std::vector<std::string> removed_;
};

}  // namespace
}  // namespace ebpf

using namespace ebpf;

Napi::Value EbpfCleanup(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsObject()) {
    Napi::TypeError::New(env, "ebpfCleanup({pinDir})").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::string pinDir;
  if (!StringProp(env, info[0].As<Napi::Object>(), "pinDir", true, &pinDir)) return env.Undefined();
  return (new CleanupWorker(env, pinDir))->Start();
}

}  // namespace kpng
