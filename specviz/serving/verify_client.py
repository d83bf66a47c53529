"""Have a vLLM server verify a draft: ONE /v1/completions request, its answer read by verify.parse_response.

    verify_draft(server.url, server.model, tokenizer, "The weather today is", " sunny")   # SmolLM2's tokenizer
    GET  /v1/models        -> the model is served there; its max_model_len (prompt + draft + 1 must fit)
    POST /v1/completions   request_body(server.model, prompt ids + draft ids, top_k=5):
        {"model": server.model, "prompt": [504, 3947, 1834, 314, 12926],  # "The", " weather", " today", " is" + " sunny"
         "max_tokens": 1, "temperature": 0, "prompt_logprobs": 5, "logprobs": 5,
         "return_token_ids": true, "return_tokens_as_token_ids": true, "stream": false}
    -> verify.DraftVerification (num_accepted, correction or bonus, discarded, per position the target's top 5)

The prompt and the draft go as token ids with `max_tokens=1`, `temperature=0`, `prompt_logprobs=top_k`
and `logprobs=top_k`: vLLM scores every prompt position in that single prefill, so one request gives
the target's choice at every draft position and the token after the whole draft (verify.py says how
they become a verdict). Every failure (no server there, another model, too long, an HTTP error, an
answer that is not vLLM's) raises verify.VerifyError saying what to change.
"""

from __future__ import annotations

import httpx

from ..verify import DraftVerification, VerifyError, parse_response
from .recording import token_decoder

DEFAULT_TOP_K = 5  # the target's alternatives shown per position


def verify_draft(
    url: str, model: str, tokenizer, prompt: str, draft: str | list[int], top_k: int = DEFAULT_TOP_K,
    timeout_s: float = 60,
) -> DraftVerification:
    """Have the target at `url` verify `draft` after `prompt` greedily; one /v1/completions request.

    Example: verify_draft(server.url, server.model, tok, "The weather today is", " sunny and warm outside")
    -> num_accepted=2, correction=" clear", discarded=[" outside"] for a target whose greedy tokens
    after the prompt are " sunny", " and", " clear".

    Tokenization: the prompt is tokenized as the server would tokenize a text prompt (with the
    tokenizer's special tokens, e.g. BOS) and the draft separately without special tokens, keeping
    its own leading space; the ids are concatenated. This is intended: a drafter proposes token ids
    that follow the prompt's ids, it never re-tokenizes the joined text. So prompt + draft ids can
    differ from tokenizing the joined string (a merge across the boundary, or a SentencePiece
    tokenizer adding its prefix space to the draft); type the draft with the space it needs.
    Texts shown to users are tokenizer.decode([id]) of single ids. `draft` may also be a list of
    token ids (e.g. a drafter's real proposal), used as is; then `.draft` holds their decoded text.

    Raises VerifyError for an empty prompt or draft, top_k < 1, prompt + draft longer than the
    server's max model length, a server that cannot be reached, or one that answers with an error.
    """
    if top_k < 1:
        raise VerifyError(f"top_k must be at least 1 (got {top_k}): the argmax needs the top token")
    if not draft:
        raise VerifyError("the draft is empty: type the continuation you want the target to verify")
    prompt_ids = list(tokenizer.encode(prompt))
    if isinstance(draft, str):
        draft_ids = list(tokenizer.encode(draft, add_special_tokens=False))
    else:
        draft_ids = [int(t) for t in draft]
        draft = tokenizer.decode(draft_ids)
    if not draft_ids:
        raise VerifyError(f"the draft {draft!r} has no tokens: type the continuation you want verified")
    if not prompt_ids:
        raise VerifyError("the prompt is empty: the target needs at least one prompt token to predict the draft")
    ids = prompt_ids + draft_ids
    url = url.rstrip("/")
    decode = token_decoder(tokenizer)

    with httpx.Client(timeout=httpx.Timeout(timeout_s, connect=min(10.0, timeout_s))) as client:
        max_len = _max_model_len(client, url, model)
        # vLLM needs room for the one generated token: prompt length must stay below max_model_len.
        if max_len is not None and len(ids) + 1 > max_len:
            raise VerifyError(
                f"prompt ({len(prompt_ids)} tokens) + draft ({len(draft_ids)} tokens) + 1 generated token "
                f"= {len(ids) + 1} tokens, more than the server's max model length of {max_len}: "
                "shorten the prompt or the draft (or restart the server with a larger --max-model-len)"
            )
        body = request_body(model, ids, top_k)
        data = _post(client, f"{url}/v1/completions", body, timeout_s)

    return parse_response(data, model=model, prompt=prompt, draft=draft, prompt_ids=prompt_ids,
                          draft_ids=draft_ids, top_k=top_k, decode=decode)


def request_body(model: str, token_ids: list[int], top_k: int) -> dict:
    """The /v1/completions body: score every position of prompt + draft, generate one token after it."""
    return {
        "model": model,
        "prompt": token_ids,               # token ids: the server does not re-tokenize or add BOS
        "max_tokens": 1,
        "temperature": 0,
        "prompt_logprobs": top_k,          # per prompt position: top_k + the actual token, keyed by id
        "logprobs": top_k,                 # the generated token's top_k alternatives
        "return_token_ids": True,          # the generated token as an id
        "return_tokens_as_token_ids": True,  # logprobs keyed "token_id:N", not by (ambiguous) text
        "stream": False,
    }



def _max_model_len(client: httpx.Client, url: str, model: str) -> int | None:
    """The served model's max_model_len from GET /v1/models; VerifyError if it is not served there."""
    data = _get(client, f"{url}/v1/models")
    models = data.get("data") or []
    for card in models:
        if card.get("id") == model:
            return card.get("max_model_len")
    served = ", ".join(repr(c.get("id")) for c in models) or "none"
    raise VerifyError(f"the server at {url} does not serve model {model!r} (it serves: {served}): pick one of those")


def _get(client: httpx.Client, url: str) -> dict:
    return _call(lambda: client.get(url), url, client.timeout.read)


def _post(client: httpx.Client, url: str, body: dict, timeout_s: float) -> dict:
    return _call(lambda: client.post(url, json=body), url, timeout_s)


def _call(send, url: str, timeout_s) -> dict:
    base = url.split("/v1/")[0]
    try:
        r = send()
    except httpx.ConnectError as e:
        raise VerifyError(f"cannot connect to the vLLM server at {base} ({e}): start the server or fix the URL") from e
    except httpx.TimeoutException as e:
        raise VerifyError(
            f"the vLLM server at {base} did not answer within {timeout_s} s: it may be busy or stuck; "
            "try again, shorten the prompt, or raise timeout_s"
        ) from e
    except httpx.HTTPError as e:
        raise VerifyError(f"request to the vLLM server at {base} failed ({type(e).__name__}: {e})") from e
    if r.status_code != 200:
        raise VerifyError(f"the vLLM server at {base} answered HTTP {r.status_code}: {_error_message(r)}")
    try:
        return r.json()
    except ValueError as e:
        raise VerifyError(f"the server at {base} did not answer JSON: is it a vLLM OpenAI-compatible server?") from e


def _error_message(r: httpx.Response) -> str:
    try:
        err = r.json()
    except ValueError:
        return r.text[:500] or "(empty body)"
    if isinstance(err, dict):
        inner = err.get("error", err)
        if isinstance(inner, dict) and inner.get("message"):
            return str(inner["message"])[:500]
        if isinstance(err.get("detail"), str):
            return err["detail"][:500]
    return str(err)[:500]
