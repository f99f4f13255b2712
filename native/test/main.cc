// Runs every TEST of the binding's C++ unit tests (native/test/run.sh builds and runs this, plain and sanitized).
#include "check.h"

int main() {
  for (const check::Case& c : check::cases()) {
    int before = check::failures();
    c.body();
    std::printf("%s %s\n", check::failures() == before ? "ok  " : "FAIL", c.name);
  }
  std::printf("%zu cases, %d failed checks\n", check::cases().size(), check::failures());
  return check::failures() == 0 ? 0 : 1;
}
