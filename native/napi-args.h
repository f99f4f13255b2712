// The N-API arguments and errors every JS entry point of the binding reads and throws (addon.cc, system.cc).
#pragma once

#include <node_api.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <string>

namespace nas {

inline napi_value fail(napi_env env, const std::string& message, const char* code = nullptr) {
  napi_throw_error(env, code, message.c_str());
  return nullptr;
}

inline std::string text(napi_env env, napi_value v) {
  size_t len = 0;
  if (napi_get_value_string_utf8(env, v, nullptr, 0, &len) != napi_ok) return std::string();
  std::string out(len, '\0');
  napi_get_value_string_utf8(env, v, out.data(), len + 1, &len);
  return out;
}

inline double number(napi_env env, napi_value v, double fallback = 0) {
  double out;
  return napi_get_value_double(env, v, &out) == napi_ok ? out : fallback;
}

// A 64-bit id (a node id, private ones from 2^62) as JS holds it exactly: a decimal string. A double steps by
// 1,024 up there, so 2^62+1 and 2^62+2 would read back as one id. A number is taken too (ids below 2^53).
inline napi_value id_value(napi_env env, uint64_t id) {
  napi_value v;
  std::string s = std::to_string(id);
  napi_create_string_utf8(env, s.data(), s.size(), &v);
  return v;
}

inline uint64_t id_of(napi_env env, napi_value v) {
  napi_valuetype type;
  if (napi_typeof(env, v, &type) != napi_ok) return 0;
  if (type == napi_number) return static_cast<uint64_t>(number(env, v));
  if (type != napi_string) return 0;
  std::string s = text(env, v);
  char* end = nullptr;
  unsigned long long id = strtoull(s.c_str(), &end, 10);
  return end && *end == '\0' && !s.empty() ? static_cast<uint64_t>(id) : 0;
}

inline napi_value property(napi_env env, napi_value object, const char* name) {
  napi_value out = nullptr;
  napi_get_named_property(env, object, name, &out);
  return out;
}

// A JS error for errno `err` about `what`, with .code and .errno as Node's fs errors have them.
inline void throw_errno(napi_env env, int err, const std::string& what) {
  napi_value error, message, code, errnum;
  std::string msg = std::string(strerror(err)) + ", " + what;
  napi_create_string_utf8(env, msg.c_str(), NAPI_AUTO_LENGTH, &message);
  napi_create_error(env, nullptr, message, &error);
  const char* name = strerrorname_np(err);
  napi_create_string_utf8(env, name ? name : "EIO", NAPI_AUTO_LENGTH, &code);
  napi_set_named_property(env, error, "code", code);
  napi_create_int32(env, -err, &errnum);
  napi_set_named_property(env, error, "errno", errnum);
  napi_throw(env, error);
}

}  // namespace nas
