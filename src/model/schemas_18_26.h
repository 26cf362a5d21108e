// ONNX operator schemas for opsets 18 to 26, which Debian's libonnx 1.12 (opset 17) lacks: every op version whose
// inputs, outputs or attributes changed after opset 17, and the new ops. The registry answers a node at opset N with
// the latest schema whose since_version is <= N, so an op whose later versions only widened its type lists needs
// nothing here; one whose signature changed would otherwise be checked against its opset-17 schema and refused (or,
// worse, inferred with its old meaning).
//
// Each schema carries its inputs, outputs, attributes and a type-and-shape inference function of our own. Shapes the
// function cannot compute (a value known only at run time) are left unknown, never guessed: output shapes plan
// memory and are compiled into AotCpu kernels.
#pragma once

namespace epctx {

// Widens libonnx's version range of the default domain to 26 and registers the schemas. Idempotent and thread-safe
// (std::call_once); call before the ONNX checker or shape inference reads a model.
void RegisterNewerOpsetSchemas();

}  // namespace epctx
