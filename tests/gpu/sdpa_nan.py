"""pytorch/pytorch#196678 on this GPU: cuDNN's SDPA backward with an explicit mask at sequence lengths of 64 modulo 128,
with cuDNN's SDPA on (torch's default) and off (what caopd.guards.guard_attention does where the versions are affected),
then two bfloat16 training steps of the embedded model through transformers' SDPA attention at such a length, each
way. Prints one JSON line per case. Run on a GPU: `python tests/gpu/sdpa_nan.py`."""
import json, math
import torch, torch.nn.functional as F
from caopd.guards import attention_backends, cuda_runtime, cudnn_sdpa_affected


def repro(L, D=64):
    "The report's 12-line repro: every logit about -120, so every query row's logsumexp is below -88.7."
    torch.manual_seed(0)
    q = torch.randn(1, 1, L, D, device='cuda', dtype=torch.bfloat16) * 0.1
    k = torch.randn(1, 1, L, D, device='cuda', dtype=torch.bfloat16) * 0.1
    v = torch.randn(1, 1, L, D, device='cuda', dtype=torch.bfloat16)
    q[..., 0], k[..., 0] = 1.0, -120 * math.sqrt(D)
    q.requires_grad_(); k.requires_grad_(); v.requires_grad_()
    mask = torch.ones(L, L, dtype=torch.bool, device='cuda').tril()[None, None]
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask)
    out.backward(torch.randn_like(out))
    return int((~torch.isfinite(q.grad)).sum())


def model_steps(L=192, steps=2):
    "Two bf16 (autocast) steps of SmolLM2-135M on left-padded rows of length L with an explicit mask: non-finite grads per step."
    from caopd.models import load_model
    model, tok = load_model('smollm2-135m-instruct', dtype=torch.float32, device='cuda:0')
    model.config._attn_implementation = 'sdpa'
    opt = torch.optim.AdamW(model.parameters(), lr=1e-5)
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(0, len(tok), (4, L), generator=g).cuda()
    mask = torch.ones_like(ids); mask[0, :40] = 0; mask[1, :7] = 0  # TRL pads prompts on the left
    bad = []
    for _ in range(steps):
        with torch.autocast('cuda', dtype=torch.bfloat16):
            loss = model(input_ids=ids, attention_mask=mask, labels=ids.masked_fill(mask == 0, -100)).loss
        loss.backward()
        bad.append(sum(int((~p.grad.isfinite()).sum()) for p in model.parameters() if p.grad is not None))
        opt.step(); opt.zero_grad()
    return dict(loss_finite=bool(loss.isfinite()), nonfinite_grads_per_step=bad)


rt = cuda_runtime()
print(json.dumps(dict(device=torch.cuda.get_device_name(), **rt, affected=cudnn_sdpa_affected(rt['torch'], rt['cudnn']))))
for cudnn in (True, False):
    torch.backends.cuda.enable_cudnn_sdp(cudnn)
    print(json.dumps(dict(cudnn_sdp=cudnn, backends=attention_backends(),
                          repro_nonfinite_grad_q={L: repro(L) for L in (192, 256, 704, 768)},
                          smollm2_bf16_steps_L192=model_steps())), flush=True)
