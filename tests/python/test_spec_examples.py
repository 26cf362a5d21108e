"""Every Python example of spec/ep-context-design.md, run with `import epctx as ort` and epctx's EP names.

Each test body is the spec's code with only these changes (marked `# adapted:`): the import, the EP name
(AotCpuExecutionProvider; the example EP package `onnxruntime_ep_contoso_ai` becomes the epctx package, whose
get_library_path() / get_ep_names() name the AotCpu library), the plugin-EP lines the spec leaves as comments
switched on, free-dimension overrides for the decoder (AotCpu compiles static shapes), and two fixes of the spec's
weight-sharing example (its undefined `num_models` and `onnxrt` names). Then the outputs are compared with numpy /
the source models."""
import os
import shutil

import numpy as np
import onnx
import pytest

import epctx as ort  # adapted: import onnxruntime as ort
from conftest import AOT, assert_outputs_close, decoder_feeds, mlp_model, mlp_reference


# The spec's handler writes through a buffered Python file that is flushed only when its `with` block ends, after
# compile_to_stream returned; like ONNX Runtime, the compile API records the returned location without requiring
# the file to hold the bytes yet (it checks the byte size and the path rules).
def test_compile_from_file_to_stream_with_initializer_handler(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = mlp_model(seed=5, with_cpu_tail=True)  # AotCpu takes the MLP; a Mod with initializer A stays on CPU
    onnx.save(model, "input_model.onnx")
    handled = []

    # ---- the spec's example ----
    input_model_path = "input_model.onnx"
    output_model_path = "output_model.onnx"
    output_initializer_file_path = "output_model.bin"

    with open(output_model_path, "wb") as output_model_fd, \
         open(output_initializer_file_path, "wb") as output_initializer_fd:

        # Custom function that ORT calls (one or more times) to stream out the model bytes in chunks.
        # This example function simply writes the output model to a file.
        def output_model_write_func(buffer: bytes):
            output_model_fd.write(buffer)

        # Custom function that ORT calls to determine where to store each ONNX initializer in the output model.
        #
        # Note: the `external_info` argument denotes the location of the initializer in the original input model.
        # An implementation may choose to directly return the received `external_info` to use the same external weights.
        def output_model_onnx_initializer_handler(
            initializer_name: str,
            initializer_value: ort.OrtValue,
            external_info: ort.OrtExternalInitializerInfo | None,
        ) -> ort.OrtExternalInitializerInfo | None:
          handled.append((initializer_name, external_info))  # adapted: recorded for the checks below
          byte_size = initializer_value.tensor_size_in_bytes()

          if byte_size < 64:
              return None  # Store small initializer within output model.

          # Else, write the initializer to a new external file and return its location to ORT
          value_np = initializer_value.numpy()
          file_offset = output_initializer_fd.tell()
          output_initializer_fd.write(value_np.tobytes())
          return ort.OrtExternalInitializerInfo(output_initializer_file_path, file_offset, byte_size)

        session_options = ort.SessionOptions()

        # Set the EP to use in this session.
        #
        # Example for plugin EP:
        ort.register_execution_provider_library("aotcpu_spec1", ort.get_library_path("aotcpu"))  # adapted
        ep_devices = ort.get_ep_devices()
        selected_ep_device = next((ep_device for ep_device in ep_devices if ep_device.ep_name == AOT), None)

        ep_options = {}
        session_options.add_provider_for_devices([selected_ep_device], ep_options)
        #
        # Example for legacy "provider-bridge" EP:
        #    ep_options = {}
        #    session_options.add_provider("SomeEp", ep_options)

        # Compile the model
        model_compiler = ort.ModelCompiler(
            session_options,
            input_model_path,
            embed_compiled_data_into_model=True,
            get_initializer_location_func=output_model_onnx_initializer_handler,
        )
        model_compiler.compile_to_stream(output_model_write_func)

    assert os.path.exists(output_model_path) == True
    # ---- end of the example ----

    # A (1 KiB, on the CPU EP's Mod) went to output_model.bin; "zero" (4 bytes) stayed inline; the MLP's weights
    # are in the embedded context (no initializer of the output model).
    assert sorted(n for n, _ in handled) == ["A", "zero"] and all(e is None for _, e in handled)
    assert os.path.getsize(output_initializer_file_path) == 8 * 32 * 4
    out = onnx.load(output_model_path, load_external_data=False)
    ops = [n.op_type for n in out.graph.node]
    assert "EPContext" in ops and "Mod" in ops
    a = next(t for t in out.graph.initializer if t.name == "A")
    assert a.data_location == onnx.TensorProto.EXTERNAL
    assert not [f for f in os.listdir(".") if f.endswith("_aotcpu.bin")]  # embed mode 1: no context binary
    x = np.random.default_rng(1).standard_normal((8, 64)).astype(np.float32)
    sess = ort.InferenceSession(output_model_path, session_options)
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], mlp_reference(model, x), rtol=1e-4, atol=1e-5)
    del sess, model_compiler
    ort.unregister_execution_provider_library("aotcpu_spec1")


def test_initializer_handler_reusing_the_source_external_data(tmp_path, decoder_dir):
    """The spec's second snippet (return external_info) on the decoder, whose weights are external data: compiled
    with no EP, every initializer goes through the handler and keeps pointing into decoder.weights."""
    for f in ("prefill.onnx", "decoder.weights"):
        shutil.copy(decoder_dir / f, tmp_path / f)
    seen = {}

    # ---- the spec's snippet ----
    def output_model_onnx_initializer_handler(
        initializer_name: str,
        initializer_value: ort.OrtValue,
        external_info: ort.OrtExternalInitializerInfo | None,
    ) -> ort.OrtExternalInitializerInfo | None:
      seen[initializer_name] = (external_info, initializer_value.tensor_size_in_bytes())  # adapted: recorded
      # The `external_info` argument denotes the location of the initializer in the original input model (if not None).
      # Return it directly to use the same external initializer file.
      return external_info
    # ---- end ----

    compiler = ort.ModelCompiler(ort.SessionOptions(), str(tmp_path / "prefill.onnx"),
                                 get_initializer_location_func=output_model_onnx_initializer_handler)
    out_path = tmp_path / "prefill_reuse.onnx"
    compiler.compile_to_file(str(out_path))
    external = {n: e for n, (e, _) in seen.items() if e is not None}
    assert "wte" in external and external["wte"].filepath == "decoder.weights"
    assert all(e.byte_size == size for e, size in seen.values() if e is not None)
    out = onnx.load(str(out_path), load_external_data=False)
    locations = {t.name: {kv.key: kv.value for kv in t.external_data} for t in out.graph.initializer
                 if t.data_location == onnx.TensorProto.EXTERNAL}
    assert set(locations) == set(external)
    assert all(v["location"] == "decoder.weights" for v in locations.values())
    assert os.path.getsize(out_path) < 64 * 1024  # no weight copied into the model
    prefill, _ = decoder_feeds()
    want = ort.InferenceSession(str(tmp_path / "prefill.onnx")).run(None, prefill)
    assert_outputs_close(ort.InferenceSession(str(out_path)).run(None, prefill), want)


def test_cross_compile_for_a_virtual_device(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    model = mlp_model(seed=7)
    onnx.save(model, "input_model.onnx")

    # ---- the spec's example ----
    import epctx as ort  # adapted: import onnxruntime as ort
    import epctx as contoso_ep  # adapted: import onnxruntime_ep_contoso_ai as contoso_ep

    # An application uses a registration name that ends in ".virtual" to signal that virtual devices are allowed.
    ep_lib_registration_name = "contoso_ep_lib.virtual"
    ort.register_execution_provider_library(ep_lib_registration_name, contoso_ep.get_library_path())

    # Set the EP to use for compilation
    ep_name = contoso_ep.get_ep_names()[0]
    ep_devices = ort.get_ep_devices()
    selected_ep_device = next((ep_device for ep_device in ep_devices
                               if ep_device.ep_name == ep_name and ep_device.device.metadata["is_virtual"] == "1"), None)
    # adapted: AotCpu offers virtual devices only for the levels below the host among avx2 and avx512_core
    # (docs/aotcpu.md), so an avx2-only host (e.g. AMD Zen 3) has none to cross-compile for.
    host_isa = next(d.ep_metadata["isa"] for d in ep_devices
                    if d.ep_name == ep_name and d.device.metadata.get("is_virtual", "0") != "1")
    if selected_ep_device is None and host_isa in ("sse41", "avx", "avx2"):
        pytest.skip(f"host ISA {host_isa}: AotCpu has no lower virtual level (avx2/avx512_core) to cross-compile for")
    assert selected_ep_device is not None, "Did not find ep device for target EP"

    ep_options = {}  # EP-specific options
    session_options = ort.SessionOptions()
    session_options.add_provider_for_devices([selected_ep_device], ep_options)

    # Compile the model
    model_compiler = ort.ModelCompiler(
        session_options,
        "input_model.onnx",
        # ... other options ...
    )
    model_compiler.compile_to_file("output_model.onnx")

    # Unregister the library using the same registration name specified earlier.
    # Must only unregister a library after all `ModelCompiler` objects that use the library have been released.
    del model_compiler
    ort.unregister_execution_provider_library(ep_lib_registration_name)
    # ---- end of the example ----

    target_isa = next(d for d in ep_devices if d.ep_name == ep_name and d.device.metadata["is_virtual"] == "1")
    target_isa = target_isa.ep_metadata["isa"]
    info = ort.get_compatibility_info_from_model("output_model.onnx", AOT)
    assert info is not None and info.endswith("isa=" + target_isa)
    assert os.path.exists("output_model_aotcpu.bin")
    # The host (a higher ISA) runs the cross-compiled binary; the EP says recompiling would be better.
    host = [d for d in ort.get_ep_devices() if d.ep_name == AOT] or None
    if host is None:
        ort.register_execution_provider_library("aotcpu_host", ort.get_library_path())
        host = [d for d in ort.get_ep_devices() if d.ep_name == AOT]
    real = [d for d in host if d.device.metadata["is_virtual"] == "0"][:1]  # one factory's device
    assert ort.get_model_compatibility_for_ep_devices(real, info) == \
        ort.OrtCompiledModelCompatibility.EP_SUPPORTED_PREFER_RECOMPILATION
    x = np.random.default_rng(2).standard_normal((8, 64)).astype(np.float32)
    sess = ort.InferenceSession("output_model.onnx", providers=[AOT])
    np.testing.assert_allclose(sess.run(None, {"x": x})[0], mlp_reference(model, x), rtol=1e-4, atol=1e-5)


def test_weight_sharing_compile_of_the_decoder(tmp_path, monkeypatch, decoder_dir):
    monkeypatch.chdir(tmp_path)
    for src, dst in (("prefill.onnx", "input_model_0.onnx"), ("decode.onnx", "input_model_1.onnx"),
                     ("decoder.weights", "decoder.weights")):
        shutil.copy(decoder_dir / src, dst)

    # ---- the spec's example ----
    import epctx as ort  # adapted: import onnxruntime as ort
    import epctx as contoso_ep  # adapted: import onnxruntime_ep_contoso_ai as contoso_ep

    ep_lib_registration_name = "contoso_ep_lib"
    ort.register_execution_provider_library(ep_lib_registration_name, contoso_ep.get_library_path())

    # The models that share resources
    input_models = ["input_model_0.onnx", "input_model_1.onnx"]
    output_models = ["output_model_0.onnx", "output_model_1.onnx"]

    # Set the EP to use for compilation
    ep_devices = ort.get_ep_devices()
    selected_ep_device = next((ep_device for ep_device in ep_devices if ep_device.ep_name == contoso_ep.get_ep_names()[0]), None)
    assert selected_ep_device is not None, "Did not find ep device for target EP"

    ep_options = {}  # EP-specific options
    session_options = ort.SessionOptions()
    session_options.add_provider_for_devices([selected_ep_device], ep_options)
    session_options.add_free_dimension_override_by_name("seq", 16)  # adapted: static shapes for AotCpu
    session_options.add_free_dimension_override_by_name("past", 16)  # adapted

    # Set option that tells EP to share resources (e.g., weights) across sessions.
    session_options.add_session_config_entry("ep.share_ep_contexts", "1")

    # Compile individual models
    num_models = len(input_models)  # adapted: the spec uses num_models without defining it
    for i in range(len(input_models)):
        if i == num_models - 1:
            # Tell EP that this is the last compiling session that will be sharing resources.
            session_options.add_session_config_entry("ep.stop_share_ep_contexts", "1")

        model_compiler = ort.ModelCompiler(  # adapted: the spec says onnxrt.ModelCompiler
            session_options,
            input_models[i],
            # ... other options ...
        )
        model_compiler.compile_to_file(output_models[i])

    # Unregister the library using the same registration name specified earlier.
    # Must only unregister a library after all `ModelCompiler` objects that use the library have been released.
    del model_compiler
    ort.unregister_execution_provider_library(ep_lib_registration_name)
    # ---- end of the example ----

    # Two ctx models and one binary named after the first (source) model, holding the weights once.
    assert sorted(f for f in os.listdir(".") if f.endswith(".bin")) == ["input_model_0_aotcpu.bin"]
    weights = os.path.getsize("decoder.weights")
    assert os.path.getsize("input_model_0_aotcpu.bin") <= 1.05 * weights
    for m in output_models:
        nodes = onnx.load(m, load_external_data=False).graph.node
        assert [n.op_type for n in nodes] == ["EPContext"]
        ref = [a for a in nodes[0].attribute if a.name == "ep_cache_context"][0].s
        assert ref == b"input_model_0_aotcpu.bin"
    # Both graphs run from the shared binary (sessions with ep.share_ep_contexts=1) and match the source models.
    prefill, decode = decoder_feeds(seq=16, past=16)
    so = ort.SessionOptions()
    so.add_session_config_entry("ep.share_ep_contexts", "1")
    so.add_provider(AOT)
    s0 = ort.InferenceSession("output_model_0.onnx", so)
    s1 = ort.InferenceSession("output_model_1.onnx", so)
    assert_outputs_close(s0.run(None, prefill), ort.InferenceSession("input_model_0.onnx").run(None, prefill))
    assert_outputs_close(s1.run(None, decode), ort.InferenceSession("input_model_1.onnx").run(None, decode))
