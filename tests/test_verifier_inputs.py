"""Issue 63: a verifier of one's own, given what it must not return, is refused in one line that names it, in training
(CaOPD on SDFT and on SDPO) and in evaluation alike (`caopd.verifiers.checked_rewards`, the one check both use); a
column it needs and the rows lack is refused before the first generation; `None` where it cannot tell counts as wrong."""
import logging, warnings

import pytest

from caopd.cli import Refusal

# what the verifier returns for n completions, and what the refusal says of it (the table, row by row)
BAD = {
    'one value for n completions': (lambda n: [1.0], 'returned 1 values for'),
    'None for each': (lambda n: [None] * n, 'returned None for all'),
    'None': (lambda n: None, 'returned NoneType None for'),
    "'yes'": (lambda n: ['yes'] * n, "returned 'yes' (str) for completion 1 of"),
    "'1'": (lambda n: ['1'] * n, "returned '1' (str) for completion 1 of"),
    'n - 1 values': (lambda n: [1.0] * (n - 1), 'values for'),
}
TEXTS = ['<reasoning>\nIt is an amide.\n</reasoning>\n<answer>\nA\n</answer>\nConfidence: 0.9'] * 4


def verifier_returning(make):
    def my_verifier(completions, answer, **kwargs): return make(len(completions))
    return my_verifier


@pytest.fixture(scope='module')
def tiny(tmp_path_factory):
    from transformers.utils import logging as hf_logging
    from caopd.data import load_domain
    from caopd.sources import fixtures_dir
    from caopd.models import tiny_model
    hf_logging.disable_progress_bar()
    logging.getLogger('trl').setLevel(logging.ERROR)
    folder = tmp_path_factory.mktemp('tiny')
    model, tok = tiny_model(seed=0, save_to=folder/'model')
    rows = load_domain('chemistry', 'train', data_dir=fixtures_dir()).select(range(2))
    return folder, model, tok, rows


def trainer(tiny, method, verifier):
    from caopd.config import CaOPDSDFTConfig, CaOPDSDPOConfig
    from caopd.trainer import CaOPDSDFTTrainer, CaOPDSDPOTrainer
    from caopd.testing import script_rollouts
    folder, _, tok, rows = tiny
    cls, cfg = dict(sdft=(CaOPDSDFTTrainer, CaOPDSDFTConfig), sdpo=(CaOPDSDPOTrainer, CaOPDSDPOConfig))[method]
    args = cfg(output_dir=str(folder/'out'), use_cpu=True, bf16=False, gradient_checkpointing=False, report_to='none',
               disable_tqdm=True, save_strategy='no', per_device_train_batch_size=8, num_generations=4,
               max_completion_length=8, seed=0)
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', category=FutureWarning)
        t = cls(str(folder/'model'), verifier, args, train_dataset=rows, processing_class=tok)
    script_rollouts(t, TEXTS)
    t.model.train()
    return t, [rows[0]] * 4 + [rows[1]] * 4


@pytest.mark.parametrize('method', ['sdft', 'sdpo'])
@pytest.mark.parametrize('case', sorted(BAD))
def test_training_refuses_what_a_verifier_must_not_return(tiny, method, case):
    make, says = BAD[case]
    t, batch = trainer(tiny, method, verifier_returning(make))
    with pytest.raises(Refusal) as e:
        t._prepare_training_batch(batch)
    message = str(e.value)
    assert '\n' not in message and 'the verifier my_verifier' in message and says in message, message
    assert 'it must return a list of' in message or 'cannot tell' in message, message


@pytest.mark.parametrize('method', ['sdft', 'sdpo'])
def test_training_refuses_a_column_the_rows_lack_before_the_model_loads(tiny, method):
    def capital(completions, capital_city, **kwargs): return [0.0] * len(completions)
    with pytest.raises(Refusal, match="the verifier capital needs the column 'capital_city', which the rows lack"):
        trainer(tiny, method, capital)


def test_training_counts_a_none_as_wrong(tiny):
    "A verifier that cannot tell for some completions: those count as wrong (the paper's R is 1 only for a verified answer)."
    t, batch = trainer(tiny, 'sdft', verifier_returning(lambda n: [None, 1.0] * (n // 2)))
    out = t._prepare_training_batch(batch)
    assert out['mu_hat'].view(2, 4).mean(1).tolist() == [0.5, 0.5]  # two of each prompt's four right, two counted wrong


def evaluate(tiny, verifier, tmp_path, **kw):
    from caopd.evaluation import evaluate as run
    _, model, tok, rows = tiny
    return run((model, tok), name='tiny', dataset=rows, verifier=verifier, out=str(tmp_path/'eval'), max_new_tokens=4,
               progress=False, **kw)


@pytest.mark.parametrize('case', sorted(set(BAD) - {'one value for n completions'}))  # one at a time: one value is right
def test_evaluation_refuses_what_a_verifier_must_not_return(tiny, case, tmp_path):
    make, says = BAD[case]
    with pytest.raises(Refusal) as e:
        evaluate(tiny, verifier_returning(make), tmp_path)
    message = str(e.value)
    assert '\n' not in message and 'the verifier my_verifier' in message and says in message, message


def test_evaluation_refuses_a_column_or_a_name_before_generating(tiny, tmp_path, monkeypatch):
    import caopd.evaluation
    monkeypatch.setattr(caopd.evaluation, 'generate', lambda *a, **k: pytest.fail('generated before refusing'), raising=False)
    def capital(completions, capital_city, **kwargs): return [0.0] * len(completions)
    with pytest.raises(Refusal, match="evaluate: the verifier capital needs the column 'capital_city'"):
        evaluate(tiny, capital, tmp_path)
    with pytest.raises(Refusal, match="evaluate: verifier='good' is not a function"):
        evaluate(tiny, 'good', tmp_path)
    assert not (tmp_path/'eval'/'records.jsonl').exists()


def test_evaluation_refuses_a_model_without_its_tokenizer_in_one_line(tiny, tmp_path):
    _, model, tok, rows = tiny
    from caopd.evaluation import evaluate as run
    with pytest.raises(Refusal) as e:
        run(model, dataset=rows, verifier=verifier_returning(lambda n: [1.0] * n), out=str(tmp_path/'eval'))
    assert str(e.value).startswith('evaluate: model is a LlamaForCausalLM instance') and '\n' not in str(e.value)
