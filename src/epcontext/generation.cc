#include "epcontext/generation.h"

namespace epctx {

GenerationOptions GenerationOptions::FromConfig(const std::map<std::string, std::string>& entries) {
  auto get = [&](const char* key) {
    auto it = entries.find(key);
    return it == entries.end() ? std::string() : it->second;
  };
  GenerationOptions o;
  o.output_path = get("ep.context_file_path");
  o.external_initializers_file = get("ep.context_model_external_initializers_file_name");
  return o;
}

}  // namespace epctx
