#!/usr/bin/env python3
"""Lists what NeMo-RL's own source reads of a run's config, for fixtures/nemo-rl/contract.json.

Run against a NeMo-RL checkout (python3 extract.py RL_CHECKOUT > accesses.json). It records facts
only (key paths, file:line, the enclosing function and the `if` tests around each read), never
code. Two kinds of fact:

- unguarded reads: `cfg["k"]` on a config dict (a `.get("k")` or `"k" in cfg` is guarded and left
  out). A name is known to hold a config section from its annotation (PolicyConfig, DataConfig, ...),
  from its parameter name, or from an assignment out of another known section.
- TypedDict fields that pydantic requires when the entry point builds MasterConfig(**config)
  (fields not marked NotRequired, in classes not declared total=False).

The output is raw: a person reads each read that the merged config lacks and decides whether the
run polar starts reaches it (contract.json records that decision as `when`). Standard library only.
"""
import ast
import json
import sys
from pathlib import Path

# Annotations and parameter names that hold a config section, as a key path from the root.
SECTIONS = {
    'MasterConfig': [], 'PolicyConfig': ['policy'], 'GenerationConfig': ['policy', 'generation'],
    'VllmConfig': ['policy', 'generation'], 'DataConfig': ['data'], 'ClusterConfig': ['cluster'],
    'LoggerConfig': ['logger'], 'GRPOLoggerConfig': ['logger'], 'CheckpointingConfig': ['checkpointing'],
    'ClippedPGLossConfig': ['loss_fn'], 'NLLLossConfig': ['loss_fn'], 'TokenizerConfig': ['policy', 'tokenizer'],
}
NAMES = {
    'master_config': [], 'policy_config': ['policy'], 'generation_config': ['policy', 'generation'],
    'data_config': ['data'], 'cluster_config': ['cluster'], 'logger_config': ['logger'],
    'checkpointing_config': ['checkpointing'], 'loss_config': ['loss_fn'], 'env_configs': ['env'],
    'grpo_config': ['grpo'], 'sft_config': ['sft'], 'vllm_cfg': ['policy', 'generation', 'vllm_cfg'],
}


def ann_name(node):
    if node is None:
        return None
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Attribute):
        return node.attr
    return None


class Scan(ast.NodeVisitor):
    def __init__(self, rel, reads, writes, root_names, self_attrs):
        self.rel = rel
        self.reads = reads
        self.writes = writes
        self.root_names = root_names
        self.env = [{}]
        self.tests = []
        self.func = []
        self.self_attrs = dict(self_attrs)

    def path_of(self, node):
        if isinstance(node, ast.Name):
            for scope in reversed(self.env):
                if node.id in scope:
                    return scope[node.id]
            return None
        if isinstance(node, ast.Attribute):
            if isinstance(node.value, ast.Name) and node.value.id == 'self':
                return self.self_attrs.get(node.attr)
            base = self.path_of(node.value)
            # Attribute access is pydantic (MasterConfig, GRPOConfig): the model fills defaults.
            return None if base is None else base + [node.attr]
        if isinstance(node, ast.Subscript):
            base = self.path_of(node.value)
            key = node.slice
            if base is not None and isinstance(key, ast.Constant) and isinstance(key.value, str):
                return base + [key.value]
            return None
        if isinstance(node, ast.Call):
            f = node.func
            if isinstance(f, ast.Name) and f.id == 'cast' and len(node.args) == 2:
                return self.path_of(node.args[1])
            if isinstance(f, ast.Attribute) and f.attr == 'get' and node.args and isinstance(node.args[0], ast.Constant):
                base = self.path_of(f.value)
                return None if base is None else base + [node.args[0].value]
        return None

    def visit_FunctionDef(self, node):
        scope = {}
        for a in node.args.args + node.args.kwonlyargs:
            name = ann_name(a.annotation)
            if name in SECTIONS:
                scope[a.arg] = list(SECTIONS[name])
            elif a.arg in NAMES:
                scope[a.arg] = list(NAMES[a.arg])
            elif a.arg in self.root_names:
                scope[a.arg] = []
        self.env.append(scope)
        self.func.append(node.name)
        saved = self.tests
        self.tests = []
        self.generic_visit(node)
        self.tests = saved
        self.func.pop()
        self.env.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node):
        self.visit(node.value)
        p = self.path_of(node.value)
        for t in node.targets:
            if isinstance(t, ast.Name) and p is not None:
                self.env[-1][t.id] = p
            elif isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id == 'self' and p is not None:
                self.self_attrs[t.attr] = p
            elif not isinstance(t, ast.Name):
                self.visit(t)

    def visit_AnnAssign(self, node):
        if node.value is not None:
            self.visit(node.value)
            p = self.path_of(node.value)
            name = ann_name(node.annotation)
            if p is None and name in SECTIONS:
                p = list(SECTIONS[name])
            if isinstance(node.target, ast.Name) and p is not None:
                self.env[-1][node.target.id] = p

    def visit_If(self, node):
        self.visit(node.test)
        self.tests.append(ast.unparse(node.test))
        for s in node.body:
            self.visit(s)
        self.tests[-1] = f'not ({self.tests[-1]})'
        for s in node.orelse:
            self.visit(s)
        self.tests.pop()

    def visit_IfExp(self, node):
        self.visit(node.test)
        self.tests.append(ast.unparse(node.test))
        self.visit(node.body)
        self.tests[-1] = f'not ({self.tests[-1]})'
        self.visit(node.orelse)
        self.tests.pop()

    def visit_BoolOp(self, node):
        # `"k" in cfg and cfg["k"]`: each operand runs only when the ones before it held (or failed, for `or`).
        pushed = 0
        for v in node.values:
            self.visit(v)
            text = ast.unparse(v)
            self.tests.append(text if isinstance(node.op, ast.And) else f'not ({text})')
            pushed += 1
        del self.tests[len(self.tests) - pushed:]

    def visit_Subscript(self, node):
        if isinstance(node.ctx, ast.Store):
            base = self.path_of(node.value)
            key = node.slice
            if base is not None and isinstance(key, ast.Constant) and isinstance(key.value, str):
                self.writes.append({'key': '.'.join(base + [key.value]), 'file': self.rel, 'line': node.lineno, 'function': '.'.join(self.func) or '<module>'})
        if isinstance(node.ctx, ast.Load):
            base = self.path_of(node.value)
            key = node.slice
            if base is not None and isinstance(key, ast.Constant) and isinstance(key.value, str):
                self.reads.append({
                    'key': '.'.join(base + [key.value]),
                    'file': self.rel,
                    # The key's own line: a subscript split over lines starts a line or two above it.
                    'line': key.lineno,
                    'function': '.'.join(self.func) or '<module>',
                    'if': list(self.tests),
                    # A read behind a membership test of the same key is guarded too.
                    'guarded': any(f"'{key.value}' in " in t and not t.startswith('not (') for t in self.tests),
                })
        self.generic_visit(node)


def typed_dict_required(root):
    """Required TypedDict fields per class name (with the class names their fields hold)."""
    found = {}
    for f in sorted(root.joinpath('nemo_rl').rglob('*.py')):
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.ClassDef):
                found.setdefault(node.name, (f, node))
    classes = {}
    # A TypedDict may subclass another declared in a later file: repeat until nothing new is found.
    while True:
        added = False
        for name, (f, node) in found.items():
            bases = [ann_name(b) for b in node.bases]
            if name in classes or ('TypedDict' not in bases and not any(b in classes for b in bases)):
                continue
            total = all(not (k.arg == 'total' and isinstance(k.value, ast.Constant) and k.value.value is False) for k in node.keywords)
            fields = []
            for s in node.body:
                if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name):
                    text = ast.unparse(s.annotation)
                    required = not text.startswith('NotRequired[') and (total or text.startswith('Required['))
                    fields.append({'name': s.target.id, 'required': required, 'type': text, 'line': s.lineno})
            classes[name] = {'file': str(f.relative_to(root)), 'line': node.lineno, 'bases': [b for b in bases if b != 'TypedDict'], 'fields': fields}
            added = True
        if not added:
            return classes


def main():
    root = Path(sys.argv[1])
    files = sys.argv[2:] or [
        'examples/nemo_gym/run_grpo_nemo_gym.py', 'nemo_rl/algorithms/grpo.py', 'nemo_rl/environments/nemo_gym.py',
        'nemo_rl/experience/rollouts.py', 'nemo_rl/models/generation/vllm/vllm_worker_async.py',
        'nemo_rl/models/generation/vllm/vllm_worker.py', 'nemo_rl/models/generation/vllm/vllm_generation.py',
        'nemo_rl/models/generation/__init__.py', 'nemo_rl/models/policy/lm_policy.py', 'nemo_rl/utils/checkpoint.py',
        'nemo_rl/utils/logger.py', 'nemo_rl/distributed/virtual_cluster.py', 'nemo_rl/data/utils.py',
        'examples/run_sft.py', 'nemo_rl/algorithms/sft.py', 'nemo_rl/data/datasets/response_datasets/oai_format_dataset.py',
        'nemo_rl/data/datasets/response_datasets/nemogym_dataset.py',
    ]
    reads = []
    writes = []
    for rel in files:
        tree = ast.parse(root.joinpath(rel).read_text())
        # Entry points name the whole config `config`.
        # The async vLLM worker inherits `self.cfg` (the generation section) from vllm_worker.py.
        seeds = {'cfg': ['policy', 'generation']} if rel.startswith('nemo_rl/models/generation/vllm/') else {}
        # Policy workers keep the policy section as `self.cfg` (set in base_policy_worker.py).
        if rel.startswith('nemo_rl/models/policy/workers/'):
            seeds = {'cfg': ['policy']}
        Scan(rel, reads, writes, {'config'} if rel.startswith('examples/') else set(), seeds).visit(tree)
    json.dump({'reads': reads, 'writes': writes, 'typed_dicts': typed_dict_required(root)}, sys.stdout, indent=1)


if __name__ == '__main__':
    main()
