// Every N-API call of the binding goes through Js, and every status is checked in one place (check): the first
// failure is remembered (`failed`), so a caller builds or reads a whole value and looks once. An entry point JS
// called throws; the request path answers the kernel EIO.
#pragma once

#include <node_api.h>
#include <stdint.h>
#include <string.h>

#include <string>
#include <vector>

namespace nas {

class Js {
 public:
  explicit Js(napi_env env) : env(env) {}
  napi_env env;
  bool failed = false;

  bool check(napi_status status) {
    if (status != napi_ok) failed = true;
    return status == napi_ok;
  }

  // Values made.
  napi_value undefined() { napi_value v = nullptr; check(napi_get_undefined(env, &v)); return v; }
  napi_value null() { napi_value v = nullptr; check(napi_get_null(env, &v)); return v; }
  napi_value boolean(bool b) { napi_value v = nullptr; check(napi_get_boolean(env, b, &v)); return v; }
  napi_value number(double d) { napi_value v = nullptr; check(napi_create_double(env, d, &v)); return v; }
  napi_value string(const std::string& s) {
    napi_value v = nullptr;
    check(napi_create_string_utf8(env, s.data(), s.size(), &v));
    return v;
  }
  napi_value bigint(uint64_t u) { napi_value v = nullptr; check(napi_create_bigint_uint64(env, u, &v)); return v; }
  napi_value object() { napi_value v = nullptr; check(napi_create_object(env, &v)); return v; }
  napi_value array() { napi_value v = nullptr; check(napi_create_array(env, &v)); return v; }
  napi_value buffer_copy(const void* data, size_t size) {
    napi_value v = nullptr;
    check(napi_create_buffer_copy(env, size, data, nullptr, &v));
    return v;
  }
  napi_value function(const char* name, napi_callback cb, void* data = nullptr) {
    napi_value v = nullptr;
    check(napi_create_function(env, name, NAPI_AUTO_LENGTH, cb, data, &v));
    return v;
  }
  void set(napi_value object, const char* key, napi_value v) { check(napi_set_named_property(env, object, key, v)); }
  void set_at(napi_value array, uint32_t i, napi_value v) { check(napi_set_element(env, array, i, v)); }

  // Values read. A missing or mistyped value reads as the fallback without marking a failure: optional fields.
  napi_value get(napi_value object, const char* key) {
    napi_value v = nullptr;
    check(napi_get_named_property(env, object, key, &v));
    return v;
  }
  napi_value at(napi_value array, uint32_t i) { napi_value v = nullptr; check(napi_get_element(env, array, i, &v)); return v; }
  napi_valuetype type(napi_value v) {
    napi_valuetype t = napi_undefined;
    if (v) check(napi_typeof(env, v, &t));
    return t;
  }
  bool present(napi_value v) { napi_valuetype t = type(v); return t != napi_undefined && t != napi_null; }
  bool is_array(napi_value v) { bool is = false; if (v) check(napi_is_array(env, v, &is)); return is; }
  uint32_t length(napi_value array) { uint32_t n = 0; check(napi_get_array_length(env, array, &n)); return n; }
  double to_number(napi_value v, double fallback = 0) {
    double d = fallback;
    return type(v) == napi_number && check(napi_get_value_double(env, v, &d)) ? d : fallback;
  }
  bool to_bool(napi_value v, bool fallback = false) {
    bool b = fallback;
    return type(v) == napi_boolean && check(napi_get_value_bool(env, v, &b)) ? b : fallback;
  }
  // A string; a value that is not one marks a failure.
  std::string text(napi_value v) {
    size_t len = 0;
    if (!check(napi_get_value_string_utf8(env, v, nullptr, 0, &len))) return std::string();
    std::string out(len, '\0');
    check(napi_get_value_string_utf8(env, v, out.data(), len + 1, &len));
    return out;
  }
  // A 64-bit id as JS holds it exactly: a BigInt.
  uint64_t to_id(napi_value v) {
    uint64_t u = 0;
    bool lossless = false;
    return check(napi_get_value_bigint_uint64(env, v, &u, &lossless)) && lossless ? u : 0;
  }
  // A Float64Array's words; false (no failure marked) when the value is not one.
  bool doubles(napi_value v, const double** out, size_t* count) {
    napi_typedarray_type t;
    void* data = nullptr;
    size_t length = 0;
    bool typed = false;
    if (!present(v) || !check(napi_is_typedarray(env, v, &typed)) || !typed) return false;
    if (!check(napi_get_typedarray_info(env, v, &t, &length, &data, nullptr, nullptr))) return false;
    if (t != napi_float64_array) return false;
    *out = static_cast<const double*>(data);
    *count = length;
    return true;
  }
  bool bytes(napi_value v, void** data, size_t* size) {
    bool is = false;
    return present(v) && check(napi_is_buffer(env, v, &is)) && is && check(napi_get_buffer_info(env, v, data, size));
  }
  std::vector<std::string> strings(napi_value array) {
    std::vector<std::string> out;
    uint32_t n = is_array(array) ? length(array) : 0;
    out.reserve(n);
    for (uint32_t i = 0; i < n; i++) out.push_back(text(at(array, i)));
    return out;
  }

  // An entry point's arguments: false (and a TypeError thrown) when fewer than `want` came.
  bool args(napi_callback_info info, size_t want, napi_value* argv, const char* usage) {
    size_t argc = want;
    if (!check(napi_get_cb_info(env, info, &argc, argv, nullptr, nullptr)) || argc < want) {
      fail(usage);
      return false;
    }
    return true;
  }
  // Throw an Error; returns what an entry point returns after it.
  napi_value fail(const std::string& message, const char* code = nullptr) {
    check(napi_throw_error(env, code, message.c_str()));
    return nullptr;
  }
  // A JS error for errno `err` about `what`, with .code and .errno as Node's fs errors have them.
  napi_value throw_errno(int err, const std::string& what) {
    napi_value error = nullptr;
    check(napi_create_error(env, nullptr, string(std::string(strerror(err)) + ", " + what), &error));
    const char* name = strerrorname_np(err);
    set(error, "code", string(name ? name : "EIO"));
    set(error, "errno", number(-err));
    check(napi_throw(env, error));
    return nullptr;
  }
};

}  // namespace nas
