// Kernel parameters under /proc/sys, read and written from a worker thread inside a network namespace
// (net.* entries belong to the namespace of the thread that opens them).
//   sysctl([[name, value|null], ...], netns?) -> [{name, before, after, error?}]
// name: "net/ipv4/vs/conntrack" (slashes or dots); value null only reads.
#include "netns_worker.h"

#include <vector>

namespace kpng {

namespace {

struct Entry {
  std::string name, value, before, after, error;
  bool write = false;
};

std::string ReadFd(int fd) {
  char buf[256];
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n < 0) return "";
  while (n > 0 && (buf[n - 1] == '\n' || buf[n - 1] == ' ')) n--;
  return std::string(buf, n);
}

class SysctlWorker : public NetnsWorker {
 public:
  SysctlWorker(Napi::Env env, std::vector<Entry> entries, std::string netns)
      : NetnsWorker(env, std::move(netns), "setns"), entries_(std::move(entries)) {}

 private:
  void ExecuteInNetns() override {
    for (Entry& e : entries_) {
      std::string path = "/proc/sys/" + e.name;
      for (char& c : path) if (c == '.') c = '/';
      if (e.name.find("..") != std::string::npos) { e.error = "bad name"; continue; }
      int fd = open(path.c_str(), (e.write ? O_RDWR : O_RDONLY) | O_CLOEXEC);
      if (fd < 0) { e.error = ErrnoName(errno); continue; }
      e.before = ReadFd(fd);
      e.after = e.before;
      if (e.write && e.before != e.value) {
        if (pwrite(fd, e.value.c_str(), e.value.size(), 0) < 0) e.error = ErrnoName(errno);
        else e.after = ReadFd(fd);
      }
      close(fd);
    }
  }

  Napi::Value Result(Napi::Env env) override {
    Napi::Array out = Napi::Array::New(env, entries_.size());
    for (size_t i = 0; i < entries_.size(); i++) {
      const Entry& e = entries_[i];
      Napi::Object o = Napi::Object::New(env);
      o.Set("name", e.name);
      o.Set("before", e.before);
      o.Set("after", e.after);
      if (!e.error.empty()) o.Set("error", e.error);
      out[i] = o;
    }
    return out;
  }

  std::vector<Entry> entries_;
};

}  // namespace

Napi::Value Sysctl(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsArray()) {
    Napi::TypeError::New(env, "sysctl([[name, value|null], ...], netns?)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Array a = info[0].As<Napi::Array>();
  std::vector<Entry> entries;
  for (uint32_t i = 0; i < a.Length(); i++) {
    Napi::Value v = a[i];
    if (!v.IsArray()) {
      Napi::TypeError::New(env, "sysctl: each entry is [name, value | null]").ThrowAsJavaScriptException();
      return env.Undefined();
    }
    Napi::Array pair = v.As<Napi::Array>();
    Entry e;
    e.name = pair.Get((uint32_t)0).ToString().Utf8Value();
    Napi::Value val = pair.Get((uint32_t)1);
    if (val.IsString() || val.IsNumber()) { e.write = true; e.value = val.ToString().Utf8Value(); }
    entries.push_back(std::move(e));
  }
  std::string netns;
  if (!NetnsArg(info, 1, &netns)) return env.Undefined();
  return (new SysctlWorker(env, std::move(entries), netns))->Start();
}

}  // namespace kpng
