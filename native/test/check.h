// A small test harness for the binding's C++ (no package): TEST registers a case, CHECK and CHECK_EQ record a
// failure with its line and go on, main.cc runs every case and exits non-zero when any check failed.
#pragma once

#include <cstdio>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

namespace check {

struct Case {
  const char* name;
  std::function<void()> body;
};

inline std::vector<Case>& cases() {
  static std::vector<Case> all;
  return all;
}

inline int& failures() {
  static int count = 0;
  return count;
}

struct Register {
  Register(const char* name, std::function<void()> body) { cases().push_back({name, std::move(body)}); }
};

inline void fail(const char* file, int line, const std::string& what) {
  failures()++;
  std::printf("  FAILED %s:%d: %s\n", file, line, what.c_str());
}

template <typename T>
std::string show(const T& value) {
  std::ostringstream out;
  out << value;
  return out.str();
}
inline std::string show(std::nullptr_t) { return "nullptr"; }

}  // namespace check

#define CHECK_CAT2(a, b) a##b
#define CHECK_CAT(a, b) CHECK_CAT2(a, b)
#define TEST(name)                                                                 \
  static void CHECK_CAT(test_, __LINE__)();                                        \
  static check::Register CHECK_CAT(register_, __LINE__)(name, CHECK_CAT(test_, __LINE__)); \
  static void CHECK_CAT(test_, __LINE__)()

#define CHECK(cond)                                                  \
  do {                                                               \
    if (!(cond)) check::fail(__FILE__, __LINE__, "CHECK(" #cond ")"); \
  } while (0)

#define CHECK_EQ(actual, expected)                                                                         \
  do {                                                                                                     \
    const auto& a_ = (actual);                                                                             \
    const auto& e_ = (expected);                                                                           \
    if (!(a_ == e_))                                                                                       \
      check::fail(__FILE__, __LINE__, #actual " == " #expected ": got " + check::show(a_) + ", expected " + \
                                          check::show(e_));                                                \
  } while (0)
