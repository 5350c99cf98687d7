"""Issue 61, item 1: a setting is declared once. One line added to the table of settings (`caopd.settings.SETTINGS`)
reaches caopd-train's help, the run arguments and their checks, the presets, the record (settings.json), the run's
identity and the method's TRL config, with nothing else edited."""
import json, subprocess, sys, textwrap

from conftest import ROOT

# a fresh interpreter adds one row before caopd's modules that derive from the table load, then follows the setting;
# weight_decay is a field of TRL's configs that caopd sets nowhere else (TRL's default: 0.0)
ADDED = textwrap.dedent("""
    import caopd.settings as table
    from caopd.cli import real
    table.SETTINGS += (table.Setting('weight_decay', float, 'AdamW weight decay, a test setting', (real(0), 'the decay'),
                                     cpu=0.01, paper=0.1, identity=True, trl=True),)

    import contextlib, io, json, tempfile
    from caopd.arguments import RunArguments, parse_args, resolve_settings
    from caopd.cli import Refusal
    from caopd.runfolder import RunFolder, run_identity
    from caopd.run_config import build_trl_config, trl_config_fields
    with contextlib.redirect_stdout(io.StringIO()) as help, contextlib.suppress(SystemExit): parse_args(['--help'])
    given = parse_args(['--preset', 'cpu', '--weight_decay', '0.05'])
    settings = resolve_settings(given)
    folder = RunFolder(tempfile.mkdtemp())
    try: RunArguments(weight_decay=-1); refused = ''
    except Refusal as e: refused = str(e)
    print(json.dumps(dict(
        help=help.getvalue(), given=given.weight_decay, refused=refused,
        presets=[resolve_settings(RunArguments(preset='cpu')).weight_decay,
                 resolve_settings(RunArguments(preset='paper', model='Qwen3-8B', dry_run=True)).weight_decay],
        record=settings.record()['weight_decay'], identity=run_identity(settings.record()).get('weight_decay'),
        trl=trl_config_fields(settings, folder).get('weight_decay'),
        config=build_trl_config(settings, folder).weight_decay)))
""")

def test_a_setting_added_in_one_line_reaches_help_record_identity_and_trl_config():
    res = subprocess.run([sys.executable, '-c', ADDED], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    out = json.loads(res.stdout.strip().splitlines()[-1])
    assert '--weight_decay' in out['help'] and 'AdamW weight decay, a test setting' in out['help']
    assert (out['given'], out['record'], out['identity'], out['trl'], out['config']) == (0.05, 0.05, 0.05, 0.05, 0.05)
    assert out['presets'] == [0.01, 0.1]  # None (not given) takes the preset's value
    assert 'weight_decay=-1' in out['refused'], out['refused']  # checked with the others, before any work

def test_the_derived_forms_agree_with_the_table():
    "What the table says of each setting is what the dataclasses, the presets, the checks, the identity and the TRL config do."
    import dataclasses
    from caopd.arguments import PRESETS, RUN_RULES, RunArguments, RunSettings
    from caopd.runfolder import RUN_IDENTITY
    from caopd.settings import SETTINGS, UNSET
    args, recorded = {f.name: f for f in dataclasses.fields(RunArguments)}, {f.name for f in dataclasses.fields(RunSettings)}
    for s in SETTINGS:
        assert (s.name in args) == s.argument and (s.name in recorded) == (s.record_type() is not None), s.name
        assert (s.name in RUN_IDENTITY) == s.identity and (s.name in RUN_RULES) == bool(s.argument and s.rule), s.name
        if s.argument: assert (args[s.name].default, args[s.name].metadata['help']) == (s.default, s.help), s.name
        for p in PRESETS: assert PRESETS[p].get(s.name, UNSET) == getattr(s, p), (p, s.name)
