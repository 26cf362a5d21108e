#include "providers/aotcpu/binary/share.h"

#include <cstring>
#include <set>

namespace epctx {
namespace aotcpu {

GenerationGroup& GenerationGroup::Instance() {
  static GenerationGroup* group = new GenerationGroup();  // never destroyed: sessions may outlive static teardown
  return *group;
}

std::string GenerationGroup::Join(const std::string& binary_path_if_new, bool* started) {
  std::lock_guard<std::mutex> lock(mu_);
  *started = binary_path_.empty();
  if (*started) binary_path_ = binary_path_if_new;
  return binary_path_;
}

bool GenerationGroup::Active() const {
  std::lock_guard<std::mutex> lock(mu_);
  return !binary_path_.empty();
}

CheckResult GenerationGroup::Stage(uint64_t session, std::vector<GraphInput> graphs,
                                   std::vector<TensorInput> tensors) {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> names;
  for (const GraphInput& g : graphs_) names.insert(g.name);
  for (const auto& kv : staged_)
    for (const GraphInput& g : kv.second.graphs) names.insert(g.name);
  for (const GraphInput& g : graphs)
    if (!names.insert(g.name).second)
      return CheckResult::Fail("graph '" + g.name + "' is already in this weight-sharing group (two models with the "
                               "same partition names: set ep.context_node_name_prefix per model)");
  // Drop tensors the group already holds byte for byte; the graphs then name the existing tensor.
  std::map<std::string, std::string> renamed;
  std::vector<TensorInput> kept;
  for (TensorInput& t : tensors) {
    const uint64_t h = ContextBinaryHash(t.bytes.data(), t.bytes.size());
    std::string existing;
    auto range = by_hash_.equal_range(h);
    for (auto it = range.first; it != range.second && existing.empty(); ++it) {
      const TensorInput& o = tensors_[it->second];
      if (o.bytes.size() == t.bytes.size() && o.dtype == t.dtype && o.dims == t.dims && o.layout == t.layout &&
          std::memcmp(o.bytes.data(), t.bytes.data(), t.bytes.size()) == 0)
        existing = o.name;
    }
    if (existing.empty()) {
      kept.push_back(std::move(t));
    } else {
      deduplicated_ += t.bytes.size();
      renamed[t.name] = existing;
    }
  }
  for (GraphInput& g : graphs)
    for (std::string& n : g.tensor_names) {
      auto it = renamed.find(n);
      if (it != renamed.end()) n = it->second;
    }
  Staged& s = staged_[session];
  for (GraphInput& g : graphs) s.graphs.push_back(std::move(g));
  for (TensorInput& t : kept) s.tensors.push_back(std::move(t));
  return CheckResult::Ok();
}

void GenerationGroup::Commit(uint64_t session) {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = staged_.find(session);
  if (it == staged_.end()) return;
  for (GraphInput& g : it->second.graphs) graphs_.push_back(std::move(g));
  for (TensorInput& t : it->second.tensors) {
    by_hash_.emplace(ContextBinaryHash(t.bytes.data(), t.bytes.size()), tensors_.size());
    tensors_.push_back(std::move(t));
  }
  staged_.erase(it);
}

ContextBinaryContents GenerationGroup::Contents(uint64_t session) const {
  std::lock_guard<std::mutex> lock(mu_);
  ContextBinaryContents c;
  c.graphs = graphs_;
  c.tensors = tensors_;
  auto it = staged_.find(session);
  if (it != staged_.end()) {
    c.graphs.insert(c.graphs.end(), it->second.graphs.begin(), it->second.graphs.end());
    c.tensors.insert(c.tensors.end(), it->second.tensors.begin(), it->second.tensors.end());
  }
  return c;
}

void GenerationGroup::Clear() {
  std::lock_guard<std::mutex> lock(mu_);
  binary_path_.clear();
  graphs_.clear();
  tensors_.clear();
  by_hash_.clear();
  staged_.clear();
  layouts_.clear();
  deduplicated_ = 0;
}

bool GenerationGroup::FindLayout(uint64_t source_hash, dnnl::memory::desc* out) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = layouts_.find(source_hash);
  if (it == layouts_.end()) return false;
  *out = it->second;
  return true;
}

void GenerationGroup::RecordLayout(uint64_t source_hash, const dnnl::memory::desc& layout) {
  std::lock_guard<std::mutex> lock(mu_);
  layouts_.emplace(source_hash, layout);
}

uint64_t GenerationGroup::deduplicated_bytes() const {
  std::lock_guard<std::mutex> lock(mu_);
  return deduplicated_;
}

InferenceWorkspace& InferenceWorkspace::Instance() {
  static InferenceWorkspace* ws = new InferenceWorkspace();
  return *ws;
}

bool InferenceWorkspace::TakeAll(const std::vector<std::string>& names,
                                 std::vector<std::shared_ptr<SharedBinary>>* out) {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> distinct(names.begin(), names.end());
  if (distinct.size() != names.size()) return false;
  for (const std::string& n : names)
    if (!graphs_.count(n)) return false;
  out->clear();
  for (const std::string& n : names) {
    out->push_back(graphs_[n]);
    graphs_.erase(n);
  }
  return true;
}

void InferenceWorkspace::Offer(const std::shared_ptr<SharedBinary>& binary, const std::vector<std::string>& used) {
  std::lock_guard<std::mutex> lock(mu_);
  std::set<std::string> taken(used.begin(), used.end());
  for (const GraphView& g : binary->reader->graphs()) {
    const std::string name(g.name);
    if (!taken.count(name)) graphs_.emplace(name, binary);  // present already: that copy stays
  }
}

size_t InferenceWorkspace::size() const {
  std::lock_guard<std::mutex> lock(mu_);
  return graphs_.size();
}

}  // namespace aotcpu
}  // namespace epctx
