// The registry of loaded objects behind the numbers ebpfOpen returns, ebpfClose, and the argument
// checks every eBPF call shares. Calls in flight hold their own reference to an object, so a close
// while one runs ends the descriptors once it is done.
#include "ebpf.h"

#include <mutex>

namespace kpng {
namespace ebpf {

namespace {

std::mutex g_mu;
std::map<int, std::shared_ptr<Loaded>> g_handles;
int g_next = 1;

std::shared_ptr<Loaded> Find(int h) {
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_handles.find(h);
  return it == g_handles.end() ? nullptr : it->second;
}

class CloseWorker : public PromiseWorker {
 public:
  CloseWorker(Napi::Env env, int handle) : PromiseWorker(env), handle_(handle) {}

 private:
  void Execute() override {
    // Descriptors close here (the last reference), off the JS thread.
    TakeHandle(handle_);
  }
  Napi::Value Result(Napi::Env env) override { return env.Undefined(); }

  int handle_;
};

}  // namespace

int AddHandle(std::shared_ptr<Loaded> st) {
  std::lock_guard<std::mutex> lk(g_mu);
  int h = g_next++;
  g_handles[h] = std::move(st);
  return h;
}

std::shared_ptr<Loaded> TakeHandle(int h) {
  std::shared_ptr<Loaded> st;
  std::lock_guard<std::mutex> lk(g_mu);
  auto it = g_handles.find(h);
  if (it != g_handles.end()) { st = it->second; g_handles.erase(it); }
  return st;
}

bool StringProp(Napi::Env env, Napi::Object o, const char* name, bool required, std::string* out) {
  Napi::Value v = o.Get(name);
  if (v.IsUndefined() || v.IsNull()) {
    if (!required) return true;
  } else if (v.IsString()) {
    *out = v.As<Napi::String>().Utf8Value();
    if (!out->empty() && (*out)[0] == '/') return true;
  }
  Napi::TypeError::New(env, std::string(name) + ": an absolute path string").ThrowAsJavaScriptException();
  return false;
}

int HandleArg(const Napi::CallbackInfo& info, std::shared_ptr<Loaded>* st) {
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(info.Env(), "handle: the number returned by ebpfOpen").ThrowAsJavaScriptException();
    return -1;
  }
  int h = info[0].As<Napi::Number>().Int32Value();
  if (st) {
    *st = Find(h);
    if (!*st) { Napi::Error::New(info.Env(), "ebpf handle " + std::to_string(h) + " is closed").ThrowAsJavaScriptException(); return -1; }
  }
  return h;
}

}  // namespace ebpf

Napi::Value EbpfClose(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int h = ebpf::HandleArg(info, nullptr);
  if (h < 0) return env.Undefined();
  return (new ebpf::CloseWorker(env, h))->Start();
}

}  // namespace kpng
