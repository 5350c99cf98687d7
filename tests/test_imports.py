"""The house reads one way: no caopd module imports, even lazily inside a function, a module that imports it back.

The graph is read from the sources (every `import`/`from ... import` of a caopd module anywhere in a file, relative or
absolute), not from what one run happens to import, so a lazy import that would close a circle fails here before it
fails for a user on the path that reaches it."""
import ast
from pathlib import Path


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
    listed = re.findall(r'^\| \[\w+\]\((nbs/[^)]+\.ipynb)\) \| `(caopd\.\w+)` \|', readme, re.M)
    assert listed == have
    assert {m for _, m in have} == {f'caopd.{m}' for m in _modules()}  # every module has its notebook
