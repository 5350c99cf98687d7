"""Packaging, nbdev 2's way: the name, version, requirements, extras and console scripts are read from settings.ini.

`pyproject.toml` only names the build backend (setuptools); settings.ini is the one place that lists requirements.
"""
import shutil
from configparser import ConfigParser
from pathlib import Path

import setuptools
from setuptools.command.build_py import build_py

HERE = Path(__file__).resolve().parent
_cfg = ConfigParser(delimiters=['='])
_cfg.read(HERE/'settings.ini', encoding='utf-8')
cfg = _cfg['DEFAULT']
LIB = cfg['lib_path']

def requirements(key:str) -> list[str]:
    "The requirements (or paths) listed under `key` in settings.ini (space separated, no spaces inside one)."
    return cfg.get(key, '').split()

# What the package reads at run time from outside caopd/ in a checkout (settings.ini's `package_data`: checkout paths).
# A source checkout (and an editable install) reads them in place; a wheel carries a copy at caopd/_data/<path>, where
# `caopd.data.shipped_path` looks when there is no checkout. No copy is ever committed into caopd/.
PACKAGE_DATA = requirements('package_data')

class build_py_with_data(build_py):
    "setuptools' `build_py` that also copies `PACKAGE_DATA` into `<lib>/_data/` of the build (not for editable installs)."
    def run(self):
        super().run()
        if getattr(self, 'editable_mode', False): return
        for rel in PACKAGE_DATA:
            src, dest = HERE/rel, Path(self.build_lib)/LIB/'_data'/rel
            if dest.is_dir(): shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            if src.is_dir(): shutil.copytree(src, dest, ignore=shutil.ignore_patterns('__pycache__', '.*'))
            else: shutil.copy2(src, dest)

LICENSES = {'apache2': 'Apache-2.0', 'mit': 'MIT', 'gpl2': 'GPL-2.0-only', 'gpl3': 'GPL-3.0-only', 'bsd3': 'BSD-3-Clause'}
STATUSES = ['1 - Planning', '2 - Pre-Alpha', '3 - Alpha', '4 - Beta', '5 - Production/Stable', '6 - Mature', '7 - Inactive']
PY_VERSIONS = ['3.10', '3.11', '3.12', '3.13', '3.14']
readme = HERE/'README.md'

setuptools.setup(
    name=cfg['lib_name'],
    version=cfg['version'],
    description=cfg['description'],
    long_description=readme.read_text(encoding='utf-8') if readme.exists() else cfg['description'],
    long_description_content_type='text/markdown',
    author=cfg['author'],
    author_email=cfg['author_email'],
    license=LICENSES.get(cfg['license'], cfg['license']),
    keywords=cfg['keywords'].split(),
    url=cfg['git_url'],
    project_urls={'Documentation': cfg['doc_host'] + cfg['doc_baseurl'], 'Source': cfg['git_url']},
    classifiers=['Development Status :: ' + STATUSES[int(cfg['status']) - 1],
                 'Intended Audience :: ' + cfg['audience'].title(),
                 'Natural Language :: ' + cfg['language'].title()]
                + ['Programming Language :: Python :: ' + v for v in PY_VERSIONS[PY_VERSIONS.index(cfg['min_python']):]],
    python_requires='>=' + cfg['min_python'],
    packages=setuptools.find_packages(include=[LIB, LIB + '.*']),
    install_requires=requirements('requirements') + requirements('pip_requirements'),
    extras_require={'dev': requirements('dev_requirements'), 'vllm': requirements('vllm_requirements'),
                    'slurm': requirements('slurm_requirements')},
    entry_points={'console_scripts': cfg.get('console_scripts', '').split(),
                  'nbdev': [f"{cfg['lib_name']}={LIB}._modidx:d"]},
    cmdclass={'build_py': build_py_with_data},
    zip_safe=False,
)
