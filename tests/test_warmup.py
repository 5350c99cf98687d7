"The format warm-up as a stage: tool-use rows, skipped rows recorded, and the warmed checkpoint as the next model."
import json, os, re, warnings

os.environ.setdefault('TRL_EXPERIMENTAL_SILENCE', '1')
warnings.filterwarnings('ignore', category=FutureWarning)

import pytest

from caopd.data import load_domain
from caopd.sources import fixtures_dir
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


STATED = ('1.0', '0', '0.35', '85%', '0.125', '.5')  # values as demonstrations may state them
VALUE = re.compile(r'Confidence:[ \t]*(\d*\.?\d+%?)')  # the stated value, found apart from caopd.confidence


def value_token_flags(row:dict, prompt_len:int, tok) -> tuple[str, list[int], list[int]]:
    """The completion's value as decoded, the loss flags of the completion tokens that hold any of its characters,
    and the flags of the tokens around it (the one before it and eos). Token j covers the characters between where
    the decoded suffix from j and from j + 1 start, so a token that merges the value with a neighbour counts."""
    ids, flags = row['input_ids'][prompt_len:], row['completion_mask'][prompt_len:]
    assert ids[-1] == tok.eos_token_id, row['id']
    text = tok.decode(ids[:-1])
    lo, hi = list(VALUE.finditer(text))[-1].span(1)
    on, end, j = [], len(text), len(ids) - 2
    while end > lo:
        tail = tok.decode(ids[j:-1])
        assert text.endswith(tail), (row['id'], tail)
        start = len(text) - len(tail)
        if start < hi: on.append(flags[j])
        end, j = start, j - 1
    return text[lo:hi], on, [flags[j], flags[-1]]


@pytest.mark.parametrize('mask', ['value', 'format', 'graded'])
def test_value_tokens_carry_loss_only_under_graded(mask):
    """Whatever a demonstration states, no token holding a character of its confidence value carries loss under
    'value' and 'format', and every one does under 'graded', which states the row's graded value; the tokens around
    the value (the label's last one, eos) are trained under every mask. Every fixture row of both paper domains, and arithmetic rows, each stating
    each of `STATED` (the fixtures all say 1.0)."""
    from caopd.warmup import graded_value, warmup_prompt_ids
    tok = load_tokenizer('smollm2-135m-instruct')
    rows = (list(load_domain('chemistry', 'all', data_dir=fixtures_dir())) + tooluse_rows()
            + list(load_domain('arithmetic', 'train').select(range(4))))
    stating = []
    for row in rows:
        demo = row['privileged_context']
        assert demo.endswith('Confidence: 1.0'), (row['id'], demo[-40:])
        stating += [dict(row, id=f"{row['id']}/{v}", privileged_context=demo[:-len('1.0')] + v) for v in STATED]
    ds = warmup_dataset(stating, tok, mask)
    assert len(ds) == len(stating)
    for src, row in zip(stating, ds):
        assert row['id'] == src['id']
        p = len(warmup_prompt_ids(src['prompt'], tok))
        assert not any(row['completion_mask'][:p]), row['id']  # the prompt never carries loss
        value, on, around = value_token_flags(row, p, tok)
        assert on, (row['id'], value)
        if mask == 'graded':
            assert float(value) == graded_value(src['id']) and all(on), (row['id'], value, on)
        else:
            assert not any(on), (mask, row['id'], value, on)
        assert all(around), (mask, row['id'], value, around)  # the label's last token and eos are trained


def test_args_and_overrides_are_exclusive(tiny, tmp_path):
    args = FormatWarmupConfig(output_dir=str(tmp_path / 't'))
    with pytest.raises(TypeError, match='not both'):
        format_warmup(tiny, [], tmp_path, args=args, max_steps=1)


def test_graded_mask_trains_each_rows_graded_value_on_every_domain(tiny, tmp_path):
    "Under 'graded' (ours) every row's value is its `graded_value`, carries loss, and is never 0 or 1; a run can ask for it."
    from caopd.arguments import RunArguments
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
