#!/usr/bin/env python3
"""Validates JSON documents with NVIDIA Polar's own pydantic models (NVIDIA-NeMo/ProRL-Agent-Server).

    python3 scripts/check-polar-models.py --polar-src CHECKOUT/src TaskResult:result.json doc.json
    producer | python3 scripts/check-polar-models.py --polar-src CHECKOUT/src

A positional argument is MODEL:PATH (the file holds one document of that model) or PATH (the file
holds {"model": MODEL, "data": DOCUMENT}). With no positional argument, every non-empty stdin line
is {"model": MODEL, "data": DOCUMENT}. Prints one `SOURCE: MODEL: LOC: MESSAGE` line per problem
and exits 1 if there is any, 2 on a usage or import error, 0 when Polar accepts every document.

Only Polar's four model modules are loaded (polar/{rollout,trajectory,runtime,agent}/models.py).
The package __init__ files are not run: polar/rollout/__init__.py imports the rollout manager,
which needs httpx (and the others pull in the runtime and harness factories). The model modules
themselves need pydantic 2 and the standard library only (Python >= 3.11, for enum.StrEnum).
Validation is pydantic's default (lax) mode on the parsed JSON, as FastAPI does for a request body.
Contract pinned in fixtures/polar-api/contract.json. Standard library + pydantic only.
"""
import argparse
import importlib
import json
import sys
import types
from pathlib import Path

PACKAGES = ('polar', 'polar.agent', 'polar.runtime', 'polar.trajectory', 'polar.rollout')
MODULES = ('polar.rollout.models', 'polar.trajectory.models', 'polar.runtime.models', 'polar.agent.models')
# The models that cross the rollout API (and their parts); any other pydantic model in the four
# modules can be named too.
WIRE = (
    'TaskRequest', 'TaskStatus', 'TaskResult', 'SessionResult', 'SessionTiming', 'Trajectory', 'Trace',
    'RuntimeSpec', 'PrepareAction', 'ExecInput', 'AgentSpec', 'MCPServerSpec', 'StrategySpec',
    'EvaluatorSpec', 'EvalResult', 'SessionDispatchRequest',
)


def load_models(src: str) -> dict:
    root = Path(src).resolve() / 'polar'
    if not (root / 'rollout' / 'models.py').is_file():
        raise SystemExit(f'check-polar-models: {root}/rollout/models.py not found (give the src folder of a Polar checkout)')
    # Bare package objects: submodules resolve through __path__, the __init__ files never run.
    for name in PACKAGES:
        package = types.ModuleType(name)
        package.__path__ = [str(root.joinpath(*name.split('.')[1:]))]
        package.__package__ = name
        sys.modules[name] = package
    from pydantic import BaseModel

    models = {}
    for module_name in MODULES:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001 - reported, not swallowed
            raise SystemExit(f'check-polar-models: importing {module_name} failed: {type(exc).__name__}: {exc}') from exc
        for attr, value in vars(module).items():
            if isinstance(value, type) and issubclass(value, BaseModel) and value.__module__ == module_name:
                models.setdefault(attr, value)
    missing = [name for name in ('TaskRequest', 'TaskStatus', 'TaskResult', 'SessionResult', 'Trajectory', 'Trace') if name not in models]
    if missing:
        raise SystemExit(f'check-polar-models: this checkout has no {", ".join(missing)}')
    return models


def documents(args: list[str]):
    """Yields (source, model name, document); a broken input yields (source, None, message)."""
    if not args:
        for number, line in enumerate(sys.stdin, 1):
            if line.strip():
                yield from tagged(f'stdin:{number}', line)
        return
    for arg in args:
        name, sep, path = arg.partition(':')
        if sep and name and not Path(arg).exists():
            try:
                yield arg, name, json.loads(Path(path).read_text())
            except (OSError, ValueError) as exc:
                yield arg, None, f'unreadable: {exc}'
            continue
        try:
            text = Path(arg).read_text()
        except OSError as exc:
            yield arg, None, f'unreadable: {exc}'
            continue
        yield from tagged(arg, text)


def tagged(source: str, text: str):
    try:
        doc = json.loads(text)
    except ValueError as exc:
        yield source, None, f'not JSON: {exc}'
        return
    if not isinstance(doc, dict) or not isinstance(doc.get('model'), str) or 'data' not in doc:
        yield source, None, 'expected {"model": NAME, "data": DOCUMENT}'
        return
    yield source, doc['model'], doc['data']


def problems(model, data) -> list[str]:
    from pydantic import ValidationError

    try:
        model.model_validate(data)
    except ValidationError as exc:
        out = []
        for error in exc.errors(include_url=False):
            loc = '.'.join(str(part) for part in error.get('loc', ())) or '(model)'
            out.append(f'{loc}: {error.get("msg")}')
        return out
    return []


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    parser.add_argument('--polar-src', required=True, help='the src folder of a Polar checkout')
    parser.add_argument('--list', action='store_true', help='list the model names this checkout defines, then exit')
    parser.add_argument('inputs', nargs='*', help='MODEL:PATH or PATH holding {"model", "data"}; none: JSONL on stdin')
    options = parser.parse_args()
    try:
        models = load_models(options.polar_src)
    except SystemExit as exc:
        print(exc, file=sys.stderr)
        return 2
    if options.list:
        for name in sorted(models):
            print(f'{name}{"" if name in WIRE else "  (not on the rollout API)"}')
        return 0
    failed = False
    count = 0
    for source, name, data in documents(options.inputs):
        count += 1
        if name is None:
            print(f'{source}: {data}')
            failed = True
            continue
        model = models.get(name)
        if model is None:
            print(f'{source}: {name}: not a model of this checkout (try --list)')
            failed = True
            continue
        for line in problems(model, data):
            print(f'{source}: {name}: {line}')
            failed = True
    if count == 0:
        print('check-polar-models: no documents', file=sys.stderr)
        return 2
    return 1 if failed else 0


if __name__ == '__main__':
    sys.exit(main())
