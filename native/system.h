// The binding's JS entry points that are not FUSE (system.cc).
#pragma once

#include <node_api.h>

namespace nas {

// Adds notify, lutimens, exec, openBeneath, pidNamespaces, becomeSubreaper and reapChild to the module's exports.
void define_system(napi_env env, napi_value exports);

}  // namespace nas
