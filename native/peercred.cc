// Peer credentials of a connected unix socket (SO_PEERCRED): who is on the other end of a
// connection to one of kpng's sockets, for the aggregator's log. One getsockopt on a descriptor
// Node already owns: no I/O, so it runs on the calling thread.
//   peerCredentials(fd) -> {pid, uid, gid}
#include "common.h"

#include <sys/socket.h>

namespace kpng {

Napi::Value PeerCredentials(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 1 || !info[0].IsNumber()) {
    Napi::TypeError::New(env, "peerCredentials(fd: number)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  int fd = info[0].As<Napi::Number>().Int32Value();
  ucred c = {};
  socklen_t len = sizeof(c);
  if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &c, &len) < 0) {
    MakeErrnoError(env, errno, "getsockopt(SO_PEERCRED)").ThrowAsJavaScriptException();
    return env.Undefined();
  }
  Napi::Object o = Napi::Object::New(env);
  o.Set("pid", Napi::Number::New(env, c.pid));
  o.Set("uid", Napi::Number::New(env, c.uid));
  o.Set("gid", Napi::Number::New(env, c.gid));
  return o;
}

}  // namespace kpng
