"The format warm-up as a stage: tool-use rows, skipped rows recorded, and the warmed checkpoint as the next model."
import json, os, warnings

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore', category=FutureWarning)

import pytest

from caopd.data import fixtures_dir, load_domain
from caopd.models import load_tokenizer, tiny_model
from caopd.warmup import FormatWarmupConfig, MissingDemonstrationError, format_warmup, warmup_dataset


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp('tiny')
    tiny_model(save_to=path)
    return str(path)


def tooluse_rows():
    return [dict(r) for r in load_domain('tooluse', 'test', data_dir=fixtures_dir())]


def test_tooluse_stage_skips_rows_without_demonstration(tiny, tmp_path):
    rows = tooluse_rows()[:3]
    rows[1]['privileged_context'] = ''
    with pytest.raises(MissingDemonstrationError, match=repr(rows[1]['id'])):
        format_warmup(tiny, rows, tmp_path / 'raise', max_steps=1, per_device_train_batch_size=2)
    with pytest.warns(UserWarning, match='skipped 1 row'):
        ck = format_warmup(tiny, rows, tmp_path / 'run', max_steps=1, per_device_train_batch_size=2,
                           warmup_mask='format', on_missing='skip', disable_tqdm=True)
    record = json.loads((tmp_path / 'run' / 'warmup.json').read_text())
    assert (record['n_rows'], record['n_prompts'], record['skipped'], record['mask']) == (3, 2, 1, 'format')
    assert (ck / 'config.json').is_file() and (ck / 'tokenizer_config.json').is_file()
    assert (tmp_path / 'run' / 'warmup_log.jsonl').is_file()


def test_checkpoint_is_the_next_stage_model(tiny, tmp_path):
    rows = load_domain('chemistry', 'all', data_dir=fixtures_dir()).select(range(2))
    first = format_warmup(tiny, rows, tmp_path / 'a', max_steps=1, per_device_train_batch_size=2, disable_tqdm=True)
    second = format_warmup(str(first), rows, tmp_path / 'b', checkpoint=tmp_path / 'ck', max_steps=1,
                           per_device_train_batch_size=2, disable_tqdm=True)
    assert second == tmp_path / 'ck' and (second / 'config.json').is_file()
    assert json.loads((tmp_path / 'b' / 'warmup.json').read_text())['model'] == str(first)


def test_value_tokens_never_carry_loss_on_any_row():
    tok = load_tokenizer('smollm2-135m-instruct')
    rows = list(load_domain('chemistry', 'all', data_dir=fixtures_dir())) + tooluse_rows()
    for mask in ('value', 'format'):
        ds = warmup_dataset(rows, tok, mask)
        for row in ds:
            trained = tok.decode([i for i, m in zip(row['input_ids'], row['completion_mask']) if m])
            assert 'Confidence: ' in trained and '1.0' not in trained.split('Confidence:')[-1], (mask, row['id'])


def test_args_and_overrides_are_exclusive(tiny, tmp_path):
    args = FormatWarmupConfig(output_dir=str(tmp_path / 't'))
    with pytest.raises(TypeError, match='not both'):
        format_warmup(tiny, [], tmp_path, args=args, max_steps=1)


def test_graded_mask_trains_each_rows_graded_value_on_every_domain(tiny, tmp_path):
    "Under 'graded' (ours) every row's value is its `graded_value`, carries loss, and is never 0 or 1; a run can ask for it."
    from caopd.train import RunArguments
    from caopd.warmup import graded_value
    tok = load_tokenizer('smollm2-135m-instruct')
    rows = (list(load_domain('chemistry', 'all', data_dir=fixtures_dir())) + tooluse_rows()
            + list(load_domain('arithmetic', 'train').select(range(16))))
    ds = warmup_dataset(rows, tok, 'graded')
    assert len(ds) == len(rows)
    for row in ds:
        trained = tok.decode([i for i, m in zip(row['input_ids'], row['completion_mask']) if m])
        assert trained.endswith(f"Confidence: {graded_value(row['id'])}{tok.eos_token}"), row['id']
    format_warmup(tiny, rows[:4], tmp_path / 'run', max_steps=1, per_device_train_batch_size=2, warmup_mask='graded',
                  disable_tqdm=True)
    assert json.loads((tmp_path / 'run' / 'warmup.json').read_text())['mask'] == 'graded'
    assert RunArguments(format_warmup='graded').format_warmup == 'graded'
    with pytest.raises(ValueError, match='graded'):
        RunArguments(format_warmup='grade')
