"""caopd: Calibration-Aware On-Policy Distillation, the code companion of "The Illusion of Certainty: Decoupling
Capability and Calibration in On-Policy Distillation".

CaOPD trains a model with TRL's on-policy self-distillation (SDFT, SDPO) and writes the student's own success rate
over the confidence it is taught to state. Where to start:

- `caopd.CaOPDSDFTTrainer(model, reward_funcs=[verifier], args=caopd.CaOPDSDFTConfig(...), train_dataset=rows)`
  (and `CaOPDSDPOTrainer`): TRL's trainers with CaOPD's step; your verifier is a TRL reward function.
- `caopd.evaluate(model, dataset=rows, verifier=verifier, out='folder')`: sample, verify and report calibration
  (ECE, Brier, AUROC, ...) with bootstrap intervals.
- `caopd-train` and `papermill nbs/train.ipynb ...`: one run of the paper end to end; `caopd-evaluate --help`.

help(caopd.evaluate) and help(caopd.CaOPDSDFTTrainer) list their arguments; the README and docs/ (docs/your-task.md:
CaOPD in your TRL script) say the rest.
"""
__version__ = "0.1.0"
# Hand-written (nbdev manages only `__version__` above). What a user reaches for first, importable from the top as
# TRL's are (`from caopd import CaOPDSDFTTrainer`). Lazy, like transformers and TRL: `import caopd` (and every console
# script's --help) imports no torch, TRL or transformers; a name's module is imported when the name is first used.

import logging as _logging, sys as _sys

class _Console(_logging.Handler):
    "Info to stdout (as `print` did), warnings and errors to stderr: whatever sys.stdout and sys.stderr are at the time."
    def emit(self, record):
        try:
            stream = _sys.stderr if record.levelno >= _logging.WARNING else _sys.stdout
            stream.write(self.format(record) + '\n'); stream.flush()
        except Exception: self.handleError(record)

# caopd's modules say what they do through `logging.getLogger(__name__)`, under the logger 'caopd': the message alone,
# info on stdout and warnings on stderr. `logging.getLogger('caopd').setLevel(logging.WARNING)` silences all but the
# warnings; a handler added to that logger receives them elsewhere (they do not propagate: a root handler would print
# them twice).
_log = _logging.getLogger(__name__)
if not _log.handlers:
    _handler = _Console(); _handler.setFormatter(_logging.Formatter('%(message)s')); _log.addHandler(_handler)
    _log.setLevel(_logging.INFO); _log.propagate = False

_LAZY = {  # module -> the names it offers at the top
    'caopd.trainer': ('CaOPDSDFTTrainer', 'CaOPDSDPOTrainer'),
    'caopd.estimators': ('empirical_confidence',),
    'caopd.config': ('CaOPDConfig', 'CaOPDSDFTConfig', 'CaOPDSDPOConfig'),
    'caopd.loss': ('caopd_loss',),
    'caopd.baselines': ('build_trainer', 'method_config'),
    'caopd.confidence': ('parse_confidence', 'format_confidence', 'rewrite_confidence'),
    'caopd.metrics': ('calibration_report',),
    'caopd.data': ('load_domain',),
    'caopd.models': ('load_model',),
    'caopd.runfolder': ('load_run',),
    'caopd.runs': ('runs_table',),
    'caopd.arguments': ('RunArguments',),
    'caopd.evaluation': ('evaluate',),
}
_WHERE = {name: module for module, names in _LAZY.items() for name in names}
__all__ = [*_WHERE]

def __getattr__(name:str):
    import importlib, importlib.util
    if name not in _WHERE and not name.startswith('_') and importlib.util.find_spec(f'{__name__}.{name}') is not None:
        return importlib.import_module(f'{__name__}.{name}')  # a module, as after `import caopd.models`: caopd.models
    if name not in _WHERE:
        raise AttributeError(f"module 'caopd' has no attribute {name!r}; the top-level names are {__all__}, "
                             f"the rest live in caopd's modules (caopd.trainer, caopd.evaluation, ...)")
    value = getattr(importlib.import_module(_WHERE[name]), name)
    globals()[name] = value  # the next look-up does not come here
    return value

def __dir__(): return sorted({*globals(), *__all__})
