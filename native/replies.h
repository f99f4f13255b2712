#pragma once
#include "nasfuse.h"

namespace nas {
// The threadsafe function's call_js: hands a Call to the JS dispatcher (replies.cc).
void deliver(napi_env env, napi_value dispatch, void* context, void* data);
// JS's answer to a Call: result is 0, a byte count or handle, or a negative errno; value and extra as the op
// needs them; flag bit 0 keeps the page cache on open; fd: an opened file's descriptor on disk, which the
// binding then reads through (-1: none). Frees the Call.
void finish(napi_env env, Call* c, double result, napi_value value, napi_value extra, int flag, int fd = -1);
}  // namespace nas
