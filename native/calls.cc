// Requests on the JS thread: a Call becomes the arguments of the JS dispatcher (src/fuse-ops/native.ts), which
// answers it through reply (replies.cc).
#include <stdlib.h>

#include <string>

#include "replies.h"
#include "table.h"

namespace nas {

static napi_value num(napi_env env, double v) {
  napi_value out;
  napi_create_double(env, v, &out);
  return out;
}

static napi_value str(napi_env env, const std::string& s) {
  napi_value out;
  napi_create_string_utf8(env, s.data(), s.size(), &out);
  return out;
}

static void free_bytes(napi_env, void* data, void*) { free(data); }

void deliver(napi_env env, napi_value dispatch, void* context, void* data) {
  (void)context;
  Call* c = static_cast<Call*>(data);
  if (!env) {  // the JS side is going away: nothing will answer
    fuse_reply_err(c->req, EIO);
    free(c->data);
    delete c;
    return;
  }
  napi_value args[10];
  napi_get_undefined(env, &args[3]);
  args[4] = args[5] = args[3];
  args[0] = num(env, c->op);
  args[1] = num(env, static_cast<double>(reinterpret_cast<uintptr_t>(c)));
  args[2] = str(env, c->path);
  double fh = c->has_fi ? static_cast<double>(c->fi.fh) : -1;
  switch (c->op) {
    case SETATTR: {
      napi_value buffer, array;
      double* w;
      napi_create_arraybuffer(env, 8 * sizeof(double), reinterpret_cast<void**>(&w), &buffer);
      w[0] = c->set.st_mode;
      w[1] = c->set.st_uid;
      w[2] = c->set.st_gid;
      w[3] = c->set.st_size;
      w[4] = c->set.st_atim.tv_sec;
      w[5] = c->set.st_atim.tv_nsec;
      w[6] = c->set.st_mtim.tv_sec;
      w[7] = c->set.st_mtim.tv_nsec;
      napi_create_typedarray(env, napi_float64_array, 8, buffer, 0, &array);
      args[3] = num(env, c->valid);
      args[4] = array;
      args[5] = num(env, fh);
      break;
    }
    case READ: {
      napi_value buffer;
      void* bytes;
      napi_create_buffer(env, c->size, &bytes, &buffer);
      c->data = static_cast<char*>(bytes);
      napi_create_reference(env, buffer, 1, &c->buffer);
      args[3] = num(env, fh);
      args[4] = buffer;
      args[5] = num(env, static_cast<double>(c->off));
      break;
    }
    case WRITE: {
      napi_value buffer;
      napi_create_external_buffer(env, c->size, c->data, free_bytes, nullptr, &buffer);
      c->data = nullptr;  // the buffer owns the bytes now
      args[3] = num(env, fh);
      args[4] = buffer;
      args[5] = num(env, static_cast<double>(c->off));
      break;
    }
    case RENAME: args[3] = str(env, c->path2); args[4] = num(env, c->a); break;
    case LINK: args[3] = str(env, c->path2); break;
    case SYMLINK: args[3] = str(env, c->text); break;
    case RELEASE: args[3] = num(env, fh); args[4] = num(env, c->a); break;
    case OPENDIR: args[3] = num(env, fh); break;
    case FSYNC: args[3] = num(env, fh); args[4] = num(env, c->a); break;
    default: args[3] = num(env, c->a); args[4] = num(env, c->b); break;
  }
  args[6] = num(env, c->ctx.uid);
  args[7] = num(env, c->ctx.gid);
  args[8] = num(env, c->ctx.pid);
  args[9] = num(env, c->ctx.umask);
  napi_value global, result;
  napi_get_global(env, &global);
  if (napi_call_function(env, global, dispatch, 10, args, &result) != napi_ok) {
    // A dispatcher that throws leaves the call unanswered: answer it here, once.
    napi_value error;
    napi_get_and_clear_last_exception(env, &error);
    finish(env, c, -EIO, nullptr, nullptr, 0);
  }
}

}  // namespace nas
