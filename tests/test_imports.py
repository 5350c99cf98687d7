"""The house reads one way: no caopd module imports, even lazily inside a function, a module that imports it back.

The graph is read from the sources (every `import`/`from ... import` of a caopd module anywhere in a file, relative or
absolute), not from what one run happens to import, so a lazy import that would close a circle fails here before it
fails for a user on the path that reaches it."""
import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1]/'caopd'
MAX_LINES = 700  # issue 31: a module that outgrows this has two jobs; split it where the seam is


def _modules() -> list[str]:
    return sorted(p.stem for p in PACKAGE.glob('*.py') if not p.stem.startswith('_'))


def imports_of(module:str) -> set[str]:
    "The caopd modules that `module`'s source imports anywhere (top level or inside a function)."
    tree, out = ast.parse((PACKAGE/f'{module}.py').read_text()), set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            if node.level:  # from .x import y, from . import x
                if node.module: out.add(node.module.split('.')[0])
                else: out.update(a.name for a in node.names)
            elif node.module == 'caopd': out.update(a.name for a in node.names)
            elif node.module and node.module.startswith('caopd.'): out.add(node.module.split('.')[1])
        elif isinstance(node, ast.Import):
            out.update(a.name.split('.')[1] for a in node.names if a.name.startswith('caopd.'))
        elif (isinstance(node, ast.Call) and getattr(node.func, 'attr', getattr(node.func, 'id', None)) == 'import_module'
              and node.args and isinstance(node.args[0], ast.Constant) and str(node.args[0].value).startswith('caopd.')):
            out.add(node.args[0].value.split('.')[1])
    return out & set(_modules()) - {module}


def find_cycle(graph:dict[str, set[str]]) -> list[str] | None:
    "One import circle of `graph` as a path that ends where it starts, or None."
    state, stack = {}, []
    def visit(m):
        state[m] = 'open'; stack.append(m)
        for n in sorted(graph[m]):
            if state.get(n) == 'open': return stack[stack.index(n):] + [n]
            if n not in state and (c := visit(n)): return c
        state[m] = 'done'; stack.pop()
    for m in sorted(graph):
        if m not in state and (c := visit(m)): return c


def test_find_cycle_finds_a_circle_and_only_one():
    test = {'a': {'b'}, 'b': {'c'}, 'c': set()}
    assert find_cycle(test) is None
    assert find_cycle({**test, 'c': {'a'}}) == ['a', 'b', 'c', 'a']


def test_imports_of_sees_lazy_and_relative_imports():
    assert 'runfolder' in imports_of('runs')  # top level
    assert 'trainer' in imports_of('smoke')  # only inside functions there


def test_no_import_circle():
    graph = {m: imports_of(m) for m in _modules()}
    cycle = find_cycle(graph)
    assert cycle is None, f"import circle: {' -> '.join(cycle)} (move what both need into a module below both)"


def test_modules_stay_small():
    sizes = {m: len((PACKAGE/f'{m}.py').read_text().splitlines()) for m in _modules()}
    assert not {m: n for m, n in sizes.items() if n >= MAX_LINES}, f"modules of {MAX_LINES}+ lines: split them"


# Names that moved to their own modules (issue 31), importable from the old module for one release (CHANGELOG).
MOVED = {
    ('runs', 'runfolder'): 'RunFolder is_run load_run RUN_IDENTITY OVERRIDES_NOT_IDENTITY REPLACED run_identity identity_diff '
                           'run_folder diff_text',
    ('evaluate', 'runfolder'): 'RunMismatchError',
    ('train', 'arguments'): 'PRESETS ROLLOUT_SAMPLING PAPER_NODE_GPUS RunArguments OFF DTYPES RUN_RULES check_run node_gpus '
                            'resolve_settings cli_args recipe_path RECIPE_ENV parse_args',
    ('train', 'plan'): 'plan_node OPTIMIZER_PLANS plan_overrides run_memory_plan check_plan server_plan plan_row plan_text NODES '
                       'recipe_runs nodes_markdown plans_markdown',
    ('train', 'runs'): 'grid_plans nodes_report',
    ('evaluate', 'generation'): 'generate generate_vllm generate_openai GENERATE_TOP_K OPENAI_PREFIX DEFAULT_OPENAI_URL '
                                'API_RETRY_DELAY api_base_url openai_client BACKENDS resolve_backend',
    ('evaluate', 'testing'): 'ScriptedAPI',
    ('trainer', 'testing'): 'script_rollouts',
    ('trainer', 'estimators'): 'empirical_confidence SHRINKAGE_MIN_PROMPTS shrinkage_prior target_denominator wilson_halfwidth '
                               'needs_more_rollouts spread_requests',
    ('trainer', 'sharding'): 'is_sharded tied_names full_state_dict save_ema_teacher load_ema_teacher broadcast_teacher_from_rank0',
    ('figures', 'tables'): 'paper_dir paper_table ENTITY_COLUMNS METRIC_TITLES METHOD_NAMES METHOD_COLORS SETTING_COLORS '
                           'SOURCE_SYMBOLS method_color wide_table entity_names model_size ACCURACY_KEYS log_metric',
    ('figures', 'saving'): 'save_figure figure_from_html png_from_html save_table',
    ('figures', 'io'): 'markdown_table',
    ('data', 'provenance'): 'repo_root KEY_PACKAGES git_commit environment_record CREDENTIAL_ENVS CredentialError '
                            'credential_fields check_no_credentials',
}


def changelog_entry(old:str, new:str) -> str:
    "The CHANGELOG bullet that starts with `caopd.<old>` -> `caopd.<new>`, up to the next bullet or blank line."
    lines, out = (PACKAGE.parent/'CHANGELOG.md').read_text().splitlines(), []
    for i, line in enumerate(lines):
        if line.startswith(f'  - `caopd.{old}` -> `caopd.{new}`:'):
            out = [line]
            for nxt in lines[i + 1:]:
                if not nxt.strip() or nxt.lstrip().startswith('- '): break
                out.append(nxt)
            break
    return ' '.join(out)


@pytest.mark.parametrize('old,new', list(MOVED))
def test_moved_names_work_from_both_places_and_the_changelog_says_where(old, new):
    import importlib
    entry = changelog_entry(old, new)
    assert entry, f'CHANGELOG.md has no bullet "  - `caopd.{old}` -> `caopd.{new}`: ..."'
    for name in MOVED[old, new].split():
        assert getattr(importlib.import_module(f'caopd.{old}'), name) is getattr(importlib.import_module(f'caopd.{new}'), name)
        assert f'`{name}`' in entry, f'CHANGELOG.md does not say that caopd.{old}.{name} moved to caopd.{new}'


NEW_HOME = {(old, name): new for (old, new), names in MOVED.items() for name in names.split()}  # (old, name) -> new


def old_path_imports(text:str) -> list[str]:
    "'caopd.<old>.<name> (now caopd.<new>)' for each `from caopd.<old> import <name>` in `text` of a name that moved."
    try: tree = ast.parse(text)
    except SyntaxError: return []  # a notebook cell with IPython magics
    return [f'caopd.{node.module[6:]}.{a.name} (now caopd.{NEW_HOME[node.module[6:], a.name]})' for node in ast.walk(tree)
            if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('caopd.')
            for a in node.names if (node.module[6:], a.name) in NEW_HOME]


def test_our_code_imports_moved_names_from_their_new_module():
    "Tests, benchmarks and notebooks import each moved name from where it lives now, so the old paths can go next release."
    import json
    root = PACKAGE.parent
    texts = {str(p.relative_to(root)): p.read_text() for d in ('tests', 'nbs') for p in (root/d).rglob('*.py')}
    texts.update({f'{p.relative_to(root)} cell {i}': ''.join(c['source']) for p in (root/'nbs').rglob('*.ipynb')
                  for i, c in enumerate(json.loads(p.read_text())['cells']) if c['cell_type'] == 'code'})
    del texts['tests/test_imports.py']  # this file names the old paths on purpose
    assert old_path_imports('from caopd.runs import RunFolder, runs_table') == ['caopd.runs.RunFolder (now caopd.runfolder)']
    found = {where: hits for where, text in texts.items() if (hits := old_path_imports(text))}
    assert not found, f'imports of moved names from their old module: {found}'


def test_readme_lists_every_module_notebook_in_reading_order():
    "README's table of the notebooks names each module notebook and its module, in the order nbdev reads them."
    import json, re
    nbs = sorted((PACKAGE.parent/'nbs').glob('*.ipynb'))
    have = []
    for p in nbs:
        cells = json.loads(p.read_text())['cells']
        exp = [''.join(c['source']).split()[-1] for c in cells if ''.join(c['source']).startswith('#| default_exp')]
        if exp: have.append((f'nbs/{p.name}', f'caopd.{exp[0]}'))
    readme = (PACKAGE.parent/'README.md').read_text()
    listed = re.findall(r'^\| `(nbs/[^`]+\.ipynb)` \| `(caopd\.\w+)` \|', readme, re.M)
    assert listed == have
    assert {m for _, m in have} == {f'caopd.{m}' for m in _modules()}  # every module has its notebook
