// Requests handed to JS (calls.cc) and JS's answers to them (replies.cc), on the JS thread.
#pragma once
#include <node_api.h>

#include "nasfuse.h"

namespace nas {
// The threadsafe function's call_js: hands a Call to the JS dispatcher as one request object.
void deliver(napi_env env, napi_value dispatch, void* context, void* data);
// A Call JS holds by id, still unanswered (JS thread only); take_call also forgets it: it is answered once.
Call* pending_call(uint32_t id);
Call* take_call(uint32_t id);
// JS's answer to a Call: `result` 0 or a negative errno; `answer` the object its op's answer kind (protocol.h)
// reads. Replies to the kernel once, tells the table and the cache what they learn, frees the Call.
void finish(napi_env env, Call* c, int result, napi_value answer);
}  // namespace nas
