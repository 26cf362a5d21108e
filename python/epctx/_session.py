"""epctx.InferenceSession: ONNX Runtime's Python InferenceSession (argument handling, provider list
normalization) over the native session in epctx.capi._epctx."""
import collections.abc
import json
import os
import warnings

from epctx.capi import _epctx as C


def _normalize_providers(providers, provider_options, available):
    """ONNX Runtime's check_and_normalize_provider_args: names (or (name, options) tuples) in priority order;
    unavailable names are dropped with a warning, duplicates ignored with a warning, options become strings."""
    if providers is None:
        return [], []
    chosen = collections.OrderedDict()

    def add(name, options):
        if name not in available:
            warnings.warn(f"Specified provider '{name}' is not in available provider names."
                          f"Available providers: '{', '.join(available)}'")
            return
        if name in chosen:
            warnings.warn(f"Duplicate provider '{name}' encountered, ignoring.")
            return
        chosen[name] = {str(k): str(v) for k, v in options.items()}

    if not isinstance(providers, collections.abc.Sequence) or isinstance(providers, str):
        raise ValueError("'providers' should be a sequence.")
    if provider_options is not None:
        if not isinstance(provider_options, collections.abc.Sequence):
            raise ValueError("'provider_options' should be a sequence.")
        if len(providers) != len(provider_options):
            raise ValueError("'providers' and 'provider_options' should be the same length if both are given.")
        if not all(isinstance(p, str) for p in providers):
            raise ValueError("Only string values for 'providers' are supported if 'provider_options' is given.")
        if not all(isinstance(o, dict) for o in provider_options):
            raise ValueError("'provider_options' values must be dicts.")
        for name, options in zip(providers, provider_options):
            add(name, options)
    else:
        for p in providers:
            if isinstance(p, str):
                add(p, {})
            elif isinstance(p, tuple) and len(p) == 2 and isinstance(p[0], str) and isinstance(p[1], dict):
                add(p[0], p[1])
            else:
                raise ValueError("'providers' values must be either strings or (string, dict) tuples.")
    return list(chosen.keys()), list(chosen.values())


def _check_run_options(run_options):
    if run_options is not None and not isinstance(run_options, C.RunOptions):
        raise TypeError(f"run_options must be an epctx.RunOptions or None, not '{type(run_options).__name__}'")
    return run_options


class InferenceSession:
    """Loads a model (path or serialized bytes) and runs it.

    providers: names or (name, options) tuples in priority order, added after any EP the session options already
    hold (add_provider_for_devices, add_provider); CPUExecutionProvider runs whatever no other EP takes.
    With providers=None the session options decide (no EP: the CPU EP; a selection policy: automatic selection).
    """

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        if isinstance(path_or_bytes, (str, os.PathLike)):
            self._model = os.fspath(path_or_bytes)
        elif isinstance(path_or_bytes, bytes):
            self._model = path_or_bytes
        else:
            raise TypeError(f"Unable to load from type '{type(path_or_bytes)}'")
        # ONNX Runtime's keyword arguments: enable_fallback (epctx has no fallback EP chain: a failing EP raises,
        # as ONNX Runtime does for every EP but TensorRT/CUDA); disabled_optimizers (epctx's optimizer is the
        # graph optimization level only, so there is nothing to disable by name).
        for k in kwargs:
            if k not in ("enable_fallback", "disabled_optimizers"):
                raise TypeError(f"InferenceSession() got an unexpected keyword argument '{k}'")
        if kwargs.get("disabled_optimizers"):
            raise ValueError("epctx has no named graph optimizers to disable")
        self._sess_options_initial = sess_options
        self._create(providers, provider_options)

    def _create(self, providers, provider_options):
        names, options = _normalize_providers(providers, provider_options, C.get_available_providers())
        self._sess = C.InferenceSession(self._sess_options_initial, self._model, names, options)
        self._provider_options = dict(zip(names, options))
        self._inputs_meta = self._sess.inputs_meta
        self._outputs_meta = self._sess.outputs_meta
        self._overridable_initializers = self._sess.overridable_initializers
        self._model_meta = self._sess.model_meta

    def get_session_options(self):
        "The options the session was created with (a copy, with the requested providers added)."
        return self._sess.session_options

    def get_inputs(self):
        "The model's inputs as NodeArg (name, type, shape), overridable initializers excluded."
        return self._inputs_meta

    def get_outputs(self):
        "The model's outputs as NodeArg."
        return self._outputs_meta

    def get_overridable_initializers(self):
        "The graph inputs that have an initializer (a default a run may override) as NodeArg, in model order."
        return self._overridable_initializers

    def get_modelmeta(self):
        "The model's metadata: producer_name, graph_name, domain, description, graph_description, version, "
        "custom_metadata_map."
        return self._model_meta

    def get_providers(self):
        "The session's execution providers in priority order (CPUExecutionProvider last)."
        return self._sess.get_providers()

    def get_provider_options(self):
        "Every provider of the session (get_providers() order) with the options given for it in providers= "
        "({} for the others, CPUExecutionProvider included), as ONNX Runtime lists all registered providers."
        return {ep: dict(self._provider_options.get(ep, {})) for ep in self.get_providers()}

    def set_providers(self, providers=None, provider_options=None):
        "Re-creates the session with other providers."
        self._create(providers, provider_options)

    def run(self, output_names, input_feed, run_options=None):
        """Runs the model: input_feed maps input names to numpy arrays (or array-likes, or OrtValues; str/bytes/
        object arrays for tensor(string) inputs); returns the outputs named in output_names (all when None or
        empty) as numpy arrays (dtype object for strings; lists for sequences). run_options: a RunOptions (its
        terminate flag, set from another thread, stops the run)."""
        return self._sess.run(list(output_names) if output_names else None, dict(input_feed),
                              _check_run_options(run_options))

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        "Like run() with OrtValue inputs and outputs."
        return self._sess.run_with_ort_values(list(output_names) if output_names else None,
                                              dict(input_dict_ort_values), _check_run_options(run_options))

    def end_profiling(self):
        "Writes the profile (SessionOptions.enable_profiling) and returns its file name."
        return self._sess.end_profiling()

    def set_ep_dynamic_options(self, options):
        "Options for the session's plugin EPs after creation (string keys and values)."
        self._sess.set_ep_dynamic_options(options)

    # epctx additions

    def get_partition_assignments(self):
        "epctx: {fused node name: EP name} for every partition an EP other than the CPU EP took."
        return self._sess.get_partition_assignments()

    def get_session_report(self):
        "epctx: what session creation did (phases, partitions, EPContext loads and writes, nodes left on the CPU EP "
        "with each EP's reason in 'left_on_cpu', free input dims in 'free_dims') as a dict."
        return json.loads(self._sess.get_session_report())
