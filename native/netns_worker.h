// A PromiseWorker whose whole job runs inside a network namespace given by path: for work that is
// not one netlink socket (those are opened in the namespace by OpenNetlinkSocket and need no more),
// such as /proc/sys entries or the sockopts of a raw socket, which belong to the namespace of the
// thread that opens them. The pool thread is switched back afterwards: libuv reuses it.
#pragma once
#include "promise_worker.h"

#include <string>
#include <utility>

namespace kpng {

class NetnsWorker : public PromiseWorker {
 protected:
  // netns: a path such as /var/run/netns/NAME ("": stay in the thread's own); enterWhat: the
  // rejection's `what` when the namespace cannot be entered.
  NetnsWorker(Napi::Env env, std::string netns, std::string enterWhat)
      : PromiseWorker(env), netns_(std::move(netns)), enterWhat_(std::move(enterWhat)) {}

  // The job, on the pool thread, inside the namespace.
  virtual void ExecuteInNetns() = 0;

  const std::string& netns() const { return netns_; }

 private:
  void Execute() final {
    NetnsGuard guard(netns_);
    if (guard.error()) { err_ = guard.error(); what_ = enterWhat_; return; }
    ExecuteInNetns();
  }

  std::string netns_, enterWhat_;
};

}  // namespace kpng
