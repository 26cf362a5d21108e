#!/usr/bin/python3
"""A/B of AotCpu's partition cost rule (providers/aotcpu/capability/partition_cost.h,
docs/aotcpu.md "Partitions that pay").

  bench/partition_cost_ab.py islands [--threads 1] [--reps 3]   the island models the rule's constants come from
  bench/partition_cost_ab.py zoo [--threads 1] [--reps 3] [--only a,b]   the zoo: partitions, JIT and _ctx.onnx runs

islands: x [1, N] -> (Sin -> island) x 20 -> Sin, each island one Relu or Relu, Mul, Add (Sin is not compiled by
AotCpu, so every island is a partition), N = 128 and 4096; per model the CPU EP alone, AotCpu with the rule off
(partition_switch_us=0) and on (default), interleaved; prints each run's steady-state median in ms.
zoo: for each model of tests/zoo/zoo.json (cases in build/zoo/cases), before (rule off) and after (default):
partitions and nodes left on the CPU EP, then session creation, first run and steady state of a JIT session and of
a session from the _ctx.onnx `epctx compile` wrote, medians over --reps processes. Measures only; asserts nothing.
Needs Debian's python3 with onnx and numpy, and a built build/bin/epctx.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
EPCTX = os.path.join(ROOT, 'build', 'bin', 'epctx')
RULE_OFF = ['-i', 'partition_switch_us|0']


def perf(args):
    out = subprocess.run([EPCTX, 'perf', '--json'] + args, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def island_model(path, n, ops):
    import numpy as np
    import onnx
    from onnx import TensorProto, helper, numpy_helper
    nodes, cur = [], 'x'
    for i in range(20):
        nodes.append(helper.make_node('Sinh', [cur], [f's{i}']))  # an op AotCpu leaves on the CPU EP
        cur = f's{i}'
        for k, op in enumerate(ops):
            out = f'{op}{i}_{k}'
            nodes.append(helper.make_node(op, [cur, 'c'] if op in ('Mul', 'Add') else [cur], [out]))
            cur = out
    nodes.append(helper.make_node('Sinh', [cur], ['y']))
    io = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, [1, n])
    graph = helper.make_graph(nodes, 'islands', [io('x')], [io('y')],
                              [numpy_helper.from_array(np.full([1, n], 0.5, np.float32), 'c')])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid('', 13)])
    model.ir_version = 8
    onnx.save(model, path)


def islands(a):
    with tempfile.TemporaryDirectory() as d:
        for n in (128, 4096):
            for ops in (['Relu'], ['Relu', 'Mul', 'Add']):
                path = os.path.join(d, f'{"_".join(ops)}_{n}.onnx')
                island_model(path, n, ops)
                sides = {'cpu': [], 'rule off': ['-e', 'aotcpu'] + RULE_OFF, 'rule on': ['-e', 'aotcpu']}
                times = {k: [] for k in sides}
                for _ in range(a.reps):
                    for side, extra in sides.items():
                        times[side].append(perf(extra + ['-I', '-x', a.threads, '-r', '2000', path])['run_ms_median'])
                print(f'{"+".join(ops):14s} N={n:5d} ' + '  '.join(f'{k} {v}' for k, v in times.items()), flush=True)


def zoo(a):
    models = json.load(open(os.path.join(ROOT, 'tests', 'zoo', 'zoo.json')))['models']
    only = set(a.only.split(',')) if a.only else None
    with tempfile.TemporaryDirectory(prefix='partition_cost_') as out:
        for m in models:
            zoo_model(a, m, only, out)


def zoo_model(a, m, only, out):
    """One zoo model: before/after partitions, then --reps JIT and _ctx.onnx perf runs per side."""
    case = os.path.join(ROOT, 'build', 'zoo', 'cases', m['name'])
    if (only and m['name'] not in only) or m.get('skip') or not os.path.isdir(case):
        return
    shapes = [x for p in m.get('pins', []) for x in ('-f', p)]
    shapes += [x for s in m.get('input_shapes', []) for x in ('--input-shape', s)]
    inputs = ['--inputs', os.path.join(case, 'test_data_set_0')]
    runs = '30' if m['name'].startswith('ppocr_v4') else '300'
    sides = {'before': RULE_OFF, 'after': []}
    row = {}
    for side, rule in sides.items():
        ctx = os.path.join(out, f'{m["name"]}_{side}_ctx.onnx')
        subprocess.run([EPCTX, 'compile', '-e', 'aotcpu'] + rule + shapes + [os.path.join(case, 'model.onnx'),
                       '-o', ctx], check=True, capture_output=True)
        verbose = subprocess.run([EPCTX, 'perf', '-e', 'aotcpu', '-r', '1', '-v'] + rule + shapes + inputs +
                                 [os.path.join(case, 'model.onnx')], capture_output=True, text=True).stdout
        parts = re.search(r'\((\d+) partitions? on plugin', verbose)
        left = re.search(r'nodes left on the CPU EP: (\d+)', verbose)
        row[side] = {'partitions': parts.group(1) if parts else '0', 'left': left.group(1) if left else '0',
                     'jit': [], 'ctx': [], 'ctx_path': ctx}
    for _ in range(a.reps):
        for side, rule in sides.items():
            common = ['-e', 'aotcpu', '-x', a.threads, '-r', runs] + inputs
            row[side]['jit'].append(perf(common + rule + shapes + [os.path.join(case, 'model.onnx')]))
            row[side]['ctx'].append(perf(common + [row[side]['ctx_path']]))
    for side in sides:
        r = row[side]
        med = lambda kind, key: statistics.median(x[key] for x in r[kind])
        print(f'{m["name"]:20s} {side:6s} partitions {r["partitions"]} left on CPU {r["left"]:>3s}' +
              ''.join(f' | {kind} create {med(kind, "session_creation_ms"):.2f} first {med(kind, "first_run_ms"):.3f}'
                      f' steady {med(kind, "run_ms_median"):.3f}' for kind in ('jit', 'ctx')), flush=True)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument('what', choices=['islands', 'zoo'])
    p.add_argument('--threads', default='1')
    p.add_argument('--reps', type=int, default=3)
    p.add_argument('--only', default='')
    a = p.parse_args()
    islands(a) if a.what == 'islands' else zoo(a)


if __name__ == '__main__':
    main()
