// The base of the addon's asynchronous calls: kernel work runs on a libuv pool thread (Execute), and
// the call's promise settles on the JS thread once it is done, with the worker's result or with the
// errno-based error every call rejects with ({message: "<what>: <strerror>", errno, code}, plus the
// fields a worker adds). One place for that, so every call's failures have the same shape.
#pragma once
#include "common.h"

#include <string>
#include <utility>

namespace kpng {

class PromiseWorker : public Napi::AsyncWorker {
 public:
  // Queues the worker and returns its promise. The worker deletes itself once the promise settled.
  Napi::Promise Start() {
    Napi::Promise p = deferred_.Promise();
    Queue();
    return p;
  }

 protected:
  // `what`: what failed when Execute sets err_ alone (workers with one failure description).
  explicit PromiseWorker(Napi::Env env, std::string what = "")
      : Napi::AsyncWorker(env), what_(std::move(what)), deferred_(Napi::Promise::Deferred::New(env)) {}

  // The value the promise resolves with (JS thread; only when err_ is 0).
  virtual Napi::Value Result(Napi::Env env) = 0;
  // Fields beside message/errno/code on a rejection (JS thread; only when err_ is set).
  virtual void AddErrorFields(Napi::Object /*error*/) {}

  // Set by Execute on failure: an errno, and what was being done.
  int err_ = 0;
  std::string what_;

 private:
  void OnOK() override {
    Napi::Env env = Env();
    if (err_) {
      Napi::Error e = MakeErrnoError(env, err_, what_);
      AddErrorFields(e.Value());
      deferred_.Reject(e.Value());
      return;
    }
    deferred_.Resolve(Result(env));
  }
  // Only reached through SetError, which no worker calls (no C++ exceptions); a promise never hangs.
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

  Napi::Promise::Deferred deferred_;
};

}  // namespace kpng
