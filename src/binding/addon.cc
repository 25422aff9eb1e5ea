// The addon's entry point: context-aware (NODE_MODULE_INIT), so it loads in
// worker_threads and in several realms, each with its own AddonData. It only
// registers: each wrapped object and group of functions lives in its own
// file and exports itself.
#include <node.h>

#include "addon_data.h"
#include "framer_wrap.h"
#include "functions.h"
#include "native_channel.h"
#include "native_listener.h"

NODE_MODULE_INIT(/* exports, module, context */) {
  using namespace procwire;
  v8::Isolate* isolate = v8::Isolate::GetCurrent();
  AddonData* data = new AddonData(isolate);
  node::AddEnvironmentCleanupHook(isolate, AddonData::Teardown, data);

  InitFunctions(data, context, exports);
  InitFramerWrap(data, context, exports);
  InitNativeChannel(data, context, exports);
  InitNativeListener(data, context, exports);
}
