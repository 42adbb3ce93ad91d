// glibc malloc tuning for a long-running agent. Node's threads (the libuv pool that runs this addon's
// kernel batches, V8's platform workers) each get a malloc arena, and glibc raises its trim and mmap
// thresholds after large frees, so memory freed after a batch or a list response stays resident.
// mallocTune() fixes the thresholds (and may cap arenas); mallocTrim() returns free pages of every
// arena to the kernel (in a worker: it walks each arena's free chunks). Without glibc both are no-ops.
#include "promise_worker.h"

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace kpng {

// mallocTune({ trimThreshold?, mmapThreshold?, arenaMax? }) -> { applied: string[] }: the parameters
// set (none without glibc). Setting a threshold turns glibc's dynamic adjustment of both off.
Napi::Value MallocTune(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Array applied = Napi::Array::New(env);
  if (info.Length() < 1 || !info[0].IsObject()) {
    Napi::TypeError::New(env, "mallocTune(options) expects an object").ThrowAsJavaScriptException();
    return env.Undefined();
  }
#if defined(__GLIBC__)
  Napi::Object o = info[0].As<Napi::Object>();
  struct { const char* name; int param; } params[] = {
      {"trimThreshold", M_TRIM_THRESHOLD}, {"mmapThreshold", M_MMAP_THRESHOLD}, {"arenaMax", M_ARENA_MAX}};
  uint32_t n = 0;
  for (auto& p : params) {
    Napi::Value v = o.Get(p.name);
    if (!v.IsNumber()) continue;
    int x = v.As<Napi::Number>().Int32Value();
    if (x > 0 && mallopt(p.param, x) == 1) applied.Set(n++, Napi::String::New(env, p.name));
  }
#endif
  Napi::Object r = Napi::Object::New(env);
  r.Set("applied", applied);
  return r;
}

class TrimWorker : public PromiseWorker {
 public:
  explicit TrimWorker(Napi::Env env) : PromiseWorker(env) {}

 private:
  void Execute() override {
#if defined(__GLIBC__)
    released_ = malloc_trim(0) == 1;
#endif
  }
  Napi::Value Result(Napi::Env env) override { return Napi::Boolean::New(env, released_); }

  bool released_ = false;
};

// mallocTrim() -> Promise<boolean>: whether any memory went back to the kernel.
Napi::Value MallocTrim(const Napi::CallbackInfo& info) {
  return (new TrimWorker(info.Env()))->Start();
}

}  // namespace kpng
