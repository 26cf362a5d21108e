// The AotCpu plugin's one result type. The plugin must not use the runtime's Status (it is written only against the
// EP C ABI), so every stage (ir/, capability/, plan/, lower/, runtime/, binary/) returns this; the EP turns a failed
// one into an EpctxStatus at the ABI (plugin/). Standard library only: any stage and the fuzz targets
// may include it.
#ifndef EPCTX_PROVIDERS_AOTCPU_CHECK_RESULT_H_
#define EPCTX_PROVIDERS_AOTCPU_CHECK_RESULT_H_

#include <string>
#include <utility>

namespace epctx {
namespace aotcpu {

// `reason` is empty when ok, otherwise one precise sentence naming the field, the offending values and the limit,
// e.g. "section 3 (WEIGHTS) [offset 8192, length 4096] extends past the end of the file (10000 bytes)". The EP wraps
// a load failure as INVALID_GRAPH "Failed to load from EpContext model. <file>: <reason>".
struct CheckResult {
  bool ok = true;
  std::string reason;
  static CheckResult Ok() { return {}; }
  static CheckResult Fail(std::string why) { return {false, std::move(why)}; }
};

}  // namespace aotcpu
}  // namespace epctx

#endif  // EPCTX_PROVIDERS_AOTCPU_CHECK_RESULT_H_
