// Requests on the JS thread: a Call becomes one request object for the JS dispatcher (src/fuse-ops/adapter.ts),
// with the fields protocol.h gives its op, and is kept under its id until JS answers it (reply, replies.cc).
#include <stdlib.h>

#include <string>
#include <unordered_map>

#include "js.h"
#include "replies.h"
#include "table.h"

namespace nas {

// Calls JS was given and has not answered, by id. Only the JS thread touches it (deliver, reply, groups), so it
// needs no lock; an id is never an address, and an answer to an id no longer here is dropped.
static std::unordered_map<uint32_t, Call*> pending;
static uint32_t next_id = 1;

static void enter(Call* c) {
  do c->id = next_id++;
  while (c->id == 0 || pending.count(c->id));
  pending[c->id] = c;
}

Call* pending_call(uint32_t id) {
  auto it = pending.find(id);
  return it == pending.end() ? nullptr : it->second;
}

Call* take_call(uint32_t id) {
  auto it = pending.find(id);
  if (it == pending.end()) return nullptr;
  Call* c = it->second;
  pending.erase(it);
  return c;
}

static void free_bytes(napi_env, void* data, void*) { free(data); }

// setattr's values, SETATTR_WORDS doubles in protocol.h's order.
static napi_value set_values(Js& js, const struct stat& s) {
  napi_value buffer = nullptr, array = nullptr;
  double* w = nullptr;
  js.check(napi_create_arraybuffer(js.env, SETATTR_WORDS * sizeof(double), reinterpret_cast<void**>(&w), &buffer));
  if (js.failed) return nullptr;
  const double values[SETATTR_WORDS] = {
      static_cast<double>(s.st_mode), static_cast<double>(s.st_uid), static_cast<double>(s.st_gid),
      static_cast<double>(s.st_size), static_cast<double>(s.st_atim.tv_sec), static_cast<double>(s.st_atim.tv_nsec),
      static_cast<double>(s.st_mtim.tv_sec), static_cast<double>(s.st_mtim.tv_nsec)};
  memcpy(w, values, sizeof values);
  js.check(napi_create_typedarray(js.env, napi_float64_array, SETATTR_WORDS, buffer, 0, &array));
  return array;
}

// A read's buffer (JS fills it; the Call keeps a reference until the reply) or a write's bytes (the buffer owns them).
static napi_value buffer(Js& js, Call* c) {
  napi_value out = nullptr;
  if (c->op == READ) {
    void* bytes = nullptr;
    if (js.check(napi_create_buffer(js.env, c->size, &bytes, &out))) {
      c->data = static_cast<char*>(bytes);
      js.check(napi_create_reference(js.env, out, 1, &c->buffer));
    }
  } else if (js.check(napi_create_external_buffer(js.env, c->size, c->data, free_bytes, nullptr, &out))) {
    c->data = nullptr;
  }
  return out;
}

static napi_value field(Js& js, Call* c, Field f) {
  switch (f) {
    case F_FH: return js.number(c->has_fi ? static_cast<double>(c->fi.fh) : -1);
    case F_VALID: return js.number(c->valid);
    case F_SET: return set_values(js, c->set);
    case F_MODE: return js.number(c->mode);
    case F_RDEV: return js.number(static_cast<double>(c->rdev));
    case F_FLAGS: return js.number(c->flags);
    case F_TARGET: return js.string(c->text);
    case F_TO: return js.string(c->path2);
    case F_BUFFER: return buffer(js, c);
    case F_OFFSET: return js.number(static_cast<double>(c->off));
    case F_WRITING: return js.boolean(c->writing);
    case F_DATASYNC: return js.boolean(c->datasync);
  }
  return js.undefined();
}

static napi_value request(Js& js, Call* c) {
  napi_value r = js.object();
  js.set(r, "op", js.number(c->op));
  js.set(r, "call", js.number(c->id));
  js.set(r, "path", js.string(c->path));
  js.set(r, "uid", js.number(c->ctx.uid));
  js.set(r, "gid", js.number(c->ctx.gid));
  js.set(r, "pid", js.number(c->ctx.pid));
  js.set(r, "umask", js.number(c->ctx.umask));
  uint32_t fields = row(c->op).fields;
  for (size_t i = 0; i < FIELD_COUNT; i++)
    if (fields & (1u << i)) js.set(r, FIELD_NAMES[i], field(js, c, static_cast<Field>(1u << i)));
  return r;
}

void deliver(napi_env env, napi_value dispatch, void* context, void* data) {
  (void)context;
  Call* c = static_cast<Call*>(data);
  if (!env) {  // the JS side is going away: nothing will answer
    fuse_reply_err(c->req, EIO);
    free(c->data);
    delete c;
    return;
  }
  Js js(env);
  enter(c);
  const uint32_t id = c->id;  // c is freed once answered, which a dispatcher may do before it throws
  napi_value req = request(js, c);
  napi_value result = nullptr;
  if (js.failed || !js.check(napi_call_function(env, js.undefined(), dispatch, 1, &req, &result))) {
    // A request that could not be made, or a dispatcher that threw: answered here, once.
    bool thrown = false;
    napi_value error;
    if (js.check(napi_is_exception_pending(env, &thrown)) && thrown) js.check(napi_get_and_clear_last_exception(env, &error));
    if (Call* unanswered = take_call(id)) finish(env, unanswered, -EIO, nullptr);
  }
}

}  // namespace nas
