#include "providers/aotcpu/reader/describe.h"

#include <cstring>
#include <string_view>

#include "providers/aotcpu/binary/context_binary.h"
#include "providers/aotcpu/binary/dynamic_records.h"
#include "providers/aotcpu/runtime/program.h"

namespace epctx::aotcpu_reader {

namespace {

uint64_t LoadU64(const uint8_t* p) {
  uint64_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
uint32_t LoadU32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}

void DescribeDynamic(const aotcpu::ParsedDynamicGraph& parsed, GraphDescription* g) {
  for (const std::string& name : parsed.inputs) {
    DynamicInput io;
    io.name = name;
    const int v = parsed.graph.Find(name);
    if (v >= 0) {
      const aotcpu::Value& val = parsed.graph.v(v);
      io.known = true;
      io.dtype = val.dtype;
      for (size_t k = 0; k < val.dims.size(); ++k) {
        const std::string sym = k < val.dim_symbols.size() ? val.dim_symbols[k] : std::string();
        DynamicDim d;
        d.size = val.dims[k];
        if (val.dims[k] < 0) {
          d.symbol = sym.empty() ? name + ":" + std::to_string(k) : sym;
          g->symbols.insert(d.symbol);
        }
        io.dims.push_back(d);
      }
    }
    g->dynamic_inputs.push_back(io);
  }
  g->dynamic = true;
  g->dynamic_outputs = parsed.outputs;
  g->node_count = parsed.graph.nodes.size();
  g->packed_weights = parsed.packed.size();
  for (const auto& profile : parsed.shapes.profiles) {
    std::vector<std::pair<std::string, std::vector<int64_t>>> p;
    for (size_t i = 0; i < profile.size() && i < parsed.inputs.size(); ++i) p.emplace_back(parsed.inputs[i], profile[i]);
    g->shape_profiles.push_back(p);
  }
  g->shape_ranges = parsed.shapes.ranges;
}

void DescribeProgram(const aotcpu::Program& p, bool with_steps, GraphDescription* g) {
  for (const aotcpu::IoInfo& io : p.inputs) g->inputs.push_back({io.name, io.dtype, io.dims});
  for (const aotcpu::IoInfo& io : p.outputs) g->outputs.push_back({io.name, io.dtype, io.dims});
  g->arena_bytes = p.arena_bytes;
  g->step_count = p.steps.size();
  for (const aotcpu::Step& st : p.steps) ++g->steps_by_kind[aotcpu::StepKindName(static_cast<uint32_t>(st.kind))];
  if (with_steps)
    for (const aotcpu::Step& st : p.steps) g->steps.push_back(aotcpu::DescribeStep(st));
}

}  // namespace

bool HasContextBinaryMagic(const void* data, uint64_t size) {
  return size >= sizeof(aotcpu::kContextBinaryMagic) &&
         std::memcmp(data, aotcpu::kContextBinaryMagic, sizeof(aotcpu::kContextBinaryMagic)) == 0;
}

BinaryDescription DescribeContextBinary(const void* bytes, uint64_t size, bool with_steps) {
  const uint8_t* data = static_cast<const uint8_t*>(bytes);
  BinaryDescription b;
  b.size = size;
  // The validator first: nothing below reads a byte it has not checked.
  aotcpu::ContextBinaryReader reader;
  const aotcpu::CheckResult r = reader.Open(size ? data : nullptr, static_cast<size_t>(size));
  if (!r.ok) {
    b.invalid = r.reason;
    return b;
  }
  b.valid = true;
  b.major = reader.major();
  b.minor = reader.minor();
  const aotcpu::CompatInfo& c = reader.compat();
  b.epctx_version = c.epctx_version;
  b.onednn_version = c.onednn_version;
  b.isa = c.isa;
  b.options = c.options;
  // The section table, read from the validated header (the reader indexes sections but does not expose them).
  const uint32_t section_count = LoadU32(data + 20);
  const uint64_t table = LoadU64(data + 24);
  for (uint32_t i = 0; i < section_count; ++i) {
    const uint8_t* e = data + table + uint64_t{32} * i;
    const uint32_t type = LoadU32(e);
    b.sections.push_back({aotcpu::SectionTypeName(type), type, LoadU64(e + 8), LoadU64(e + 16)});
  }
  std::set<const unsigned char*> distinct;
  for (const aotcpu::TensorView& t : reader.tensors()) {
    b.tensor_bytes += t.length;
    if (distinct.insert(t.data).second) b.distinct_bytes += t.length;
  }
  b.tensor_count = reader.tensors().size();
  b.distinct_tensors = distinct.size();
  for (const aotcpu::GraphView& gv : reader.graphs()) {
    GraphDescription g;
    g.name = std::string(gv.name);
    for (uint32_t t : gv.tensor_indices) g.weight_bytes += reader.tensors()[t].length;
    g.weight_count = gv.tensor_indices.size();
    g.records_bytes = gv.records.size();
    if (gv.records.size() >= 8 && gv.records.substr(0, 7) == "AOTDYN1") {  // a partition for every input shape
      std::vector<aotcpu::WeightRef> tensors;
      for (uint32_t t : gv.tensor_indices) tensors.push_back({reader.tensors()[t].data, reader.tensors()[t].length});
      aotcpu::ParsedDynamicGraph parsed;
      const aotcpu::CheckResult dr = aotcpu::ParseDynamicGraph(gv.records, tensors, &parsed);
      g.parsed = dr.ok;
      if (dr.ok) DescribeDynamic(parsed, &g);
      else g.error = dr.reason;
    } else {
      aotcpu::Program p;
      const aotcpu::CheckResult pr =
          aotcpu::ParseProgram(gv.records, static_cast<uint32_t>(gv.tensor_indices.size()), &p);
      g.parsed = pr.ok;
      if (pr.ok) DescribeProgram(p, with_steps, &g);
      else g.error = pr.reason;
    }
    b.graphs.push_back(std::move(g));
  }
  return b;
}

}  // namespace epctx::aotcpu_reader
