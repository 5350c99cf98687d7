"The project's own hygiene: notebooks are clean, and the package is exactly what the notebooks export."
import filecmp, json, shutil, subprocess, sys
from pathlib import Path
from conftest import ROOT

def _copy_project(dest:Path) -> Path:
    "A throwaway copy of what nbdev reads and writes: settings.ini, nbs/ and caopd/."
    shutil.copy(ROOT/'settings.ini', dest/'settings.ini')
    shutil.copytree(ROOT/'nbs', dest/'nbs')
    shutil.copytree(ROOT/'caopd', dest/'caopd', ignore=shutil.ignore_patterns('__pycache__'))
    return dest

def _changed(a:Path, b:Path, pattern:str) -> list[str]:
    "Files matching `pattern` that differ between trees `a` and `b`, or exist in only one of them."
    fa = {p.relative_to(a) for p in a.rglob(pattern) if '__pycache__' not in p.parts}
    fb = {p.relative_to(b) for p in b.rglob(pattern) if '__pycache__' not in p.parts}
    return sorted(str(p) for p in fa ^ fb) + sorted(str(p) for p in fa & fb if not filecmp.cmp(a/p, b/p, shallow=False))

def _nbdev(cmd:str, cwd:Path):
    "Run one of nbdev's console scripts (they sit beside the interpreter) in `cwd`."
    res = subprocess.run([str(Path(sys.executable).parent/f'nbdev_{cmd}')], cwd=cwd, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]

def test_notebooks_are_clean(tmp_path):
    proj = _copy_project(tmp_path)
    _nbdev('clean', proj)
    dirty = _changed(ROOT/'nbs', proj/'nbs', '*.ipynb')
    assert not dirty, f'run `.ci/env nbdev_clean` and commit: not clean: {dirty}'

def test_package_matches_notebooks(tmp_path):
    proj = _copy_project(tmp_path)
    _nbdev('export', proj)
    stale = _changed(ROOT/'caopd', proj/'caopd', '*.py')
    assert not stale, f'run `.ci/env nbdev_export` and commit: caopd/ differs from the notebooks in {stale}'


def test_readme_papermill_commands_create_their_output_folder():
    """papermill does not create the output notebook's folder: every papermill command of the README and of the pages
    in docs/ makes it first (mkdir -p)."""
    import re, shlex
    pages = [ROOT/'README.md', *sorted((ROOT/'docs').glob('*.md'))]
    lines = [l for p in pages for l in p.read_text().replace('\\\n', ' ').splitlines()]
    cmds = [l.replace('`', ' ') for l in lines if re.search(r'\bpapermill nbs/\S+\.ipynb', l)]  # a code span too
    assert len(cmds) > 5, 'the README and docs/ show no papermill command'
    for line in cmds:
        words = shlex.split(line)
        out = Path(words[words.index('papermill') + 2])
        made = [Path(w) for i, w in enumerate(words) if i and words[i - 1] == '-p' and words[i - 2] == 'mkdir']
        # mkdir -p M creates M and its parents: the output folder must be one of them
        assert out.parent == Path('.') or any(out.parent == m or out.parent in m.parents for m in made), \
            f'{line}: mkdir -p {out.parent} first'


def test_notebooks_are_numbered_in_the_order_they_import_each_other():
    "A library notebook's number comes after the numbers of the notebooks whose modules its module imports, and the README lists them in that order."
    import re
    module_of = {}
    for nb in sorted((ROOT/'nbs').glob('*.ipynb')):
        cells = json.loads(nb.read_text())['cells']
        m = re.search(r'#\|\s*default_exp\s+(\w+)', '\n'.join(''.join(c['source']) for c in cells if c['cell_type'] == 'code'))
        if m: module_of[m.group(1)] = nb.stem
    late = []
    for mod, stem in module_of.items():
        src = (ROOT/'caopd'/f'{mod}.py').read_text()
        imported = set(re.findall(r'from \.(\w+) import', src)) | set(re.findall(r'(?:from|import) caopd\.(\w+)', src))
        late += [(stem, module_of[i]) for i in imported if i in module_of and i != mod and module_of[i] > stem]
    assert late == [], f'notebook imports a later one (renumber it): {late}'
    readme = (ROOT/'README.md').read_text()  # its table is generated (tests/readme_tables.py), checked current by cog
    listed = re.findall(r'^\| \[\w+\]\(nbs/(\w+)\.ipynb\) \| `caopd', readme, re.M)
    assert listed == sorted(module_of.values()), listed
