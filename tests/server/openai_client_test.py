#!/usr/bin/env python3
"""`kvplan serve` driven by the official `openai` Python client (and raw HTTP where a client would
refuse to send the request), on 127.0.0.1:

  - completions: greedy text identical to `kvplan generate` with the same plan and prefill pieces;
  - two-turn conversations (completions on stories260K, chat on SmolLM2): the second turn is served
    from the first turn's stored prefix (usage.prompt_tokens_details.cached_tokens and the
    /metrics prefix hits show it) and gives the tokens `kvplan generate` computes from scratch;
  - streaming: the deltas add up to the non-streamed text; stop strings; include_usage;
  - bad requests: malformed JSON, unknown model, prompt longer than the context, negative
    max_tokens, oversize body: a 4xx JSON error each, and the server goes on;
  - a client that disconnects mid-stream: its generation is cancelled and its sequence freed;
  - 16 concurrent clients for a bounded time: every request answered in full;
  - SIGTERM: the request in flight finishes, then the process exits 0.

  openai_client_test.py --kvplan build/kvplan --stories MODEL --smollm2 MODEL --repo ROOT
"""
import argparse
import http.client
import json
import os
import re
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import traceback
import urllib.error
import urllib.request

import openai

ARGS = None
SMOLLM2 = "SmolLM2-135M-Instruct.Q4_1"  # the served model id: the file's stem
STORY = ("Once upon a time, there was a little girl named Lily. She loved to play outside in the "
         "park with her friends. One day, she saw a big red ball under a tree. She ran to get it, "
         "but a small dog took the ball first. Lily was sad, but then the dog came back and gave "
         "her the ball. They played together all day long.")


class Server:
    """`kvplan serve` on a free port; stopped (SIGTERM) by stop(), which returns the exit code."""

    def __init__(self, model, *flags):
        self.proc = subprocess.Popen(
            [ARGS.kvplan, "serve", "--model", model, "--port", "0", "--threads", "1", *flags],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://[0-9.]+:\d+)", line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"kvplan serve did not start: {line!r} {self.proc.stderr.read()}")
        self.url = m.group(1)
        self.port = int(self.url.rsplit(":", 1)[1])
        self.client = openai.OpenAI(base_url=self.url + "/v1", api_key="unused", max_retries=0,
                                    timeout=120)

    def get(self, path):
        with urllib.request.urlopen(self.url + path, timeout=30) as r:
            return r.status, r.read().decode()

    def post_raw(self, path, body, content_type="application/json"):
        """(status, parsed JSON body) of a POST with `body` bytes as they are."""
        req = urllib.request.Request(self.url + path, data=body,
                                     headers={"Content-Type": content_type})
        try:
            with urllib.request.urlopen(req, timeout=60) as r:
                return r.status, json.loads(r.read())
        except urllib.error.HTTPError as e:
            return e.code, json.loads(e.read())

    def metrics(self):
        status, text = self.get("/metrics")
        assert status == 200
        values = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                values[name] = float(value)
        return values

    def stop(self, timeout=60):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            raise AssertionError("kvplan serve did not exit within a minute of SIGTERM")
        self.stderr = self.proc.stderr.read()
        return code


def generate(model, *flags):
    """The text `kvplan generate` prints (without its trailing newline)."""
    out = subprocess.run([ARGS.kvplan, "generate", "--model", model, "--threads", "1", *flags],
                         check=True, capture_output=True, text=True).stdout
    assert out.endswith("\n")
    return out[:-1]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def stories_plan():
    return os.path.join(ARGS.repo, "data/reference/stories260k/plan-360.json")


def smollm2_plan():
    return os.path.join(ARGS.repo, "data/reference/smollm2-135m/plan-6480.json")


# --- the tests: each gets a running server -------------------------------------------------------

def test_completion_matches_generate(s):
    r = s.client.completions.create(model="stories260K", prompt="Once upon a time", max_tokens=24,
                                    temperature=0)
    ref = generate(ARGS.stories, "--plan", stories_plan(), "--chunk-tokens", "32",
                   "--prompt", "Once upon a time", "--max-tokens", "24")
    check(r.choices[0].text == ref[len("Once upon a time"):],
          f"served {r.choices[0].text!r}, kvplan generate {ref!r}")
    check(r.choices[0].finish_reason in ("length", "stop"), r.choices[0].finish_reason)
    check(r.usage.completion_tokens <= 24 and r.usage.prompt_tokens > 0, r.usage)


def test_two_turns_restore_the_prefix(s):
    before = s.metrics()
    first = s.client.completions.create(model="stories260K", prompt=STORY, max_tokens=16,
                                        temperature=0)
    second_prompt = STORY + first.choices[0].text + " The next day,"
    second = s.client.completions.create(model="stories260K", prompt=second_prompt,
                                         max_tokens=16, temperature=0)
    after = s.metrics()
    cached = second.usage.prompt_tokens_details.cached_tokens
    check(cached >= 32, f"second turn restored {cached} tokens; expected its first chunks")
    hits = sum(after[f'kvplan_prefix_hits_total{{tier="{t}"}}'] -
               before[f'kvplan_prefix_hits_total{{tier="{t}"}}'] for t in ("device", "host", "disk"))
    check(hits >= cached // 32, f"metrics show {hits} chunk hits for {cached} restored tokens")
    check(after["kvplan_prompt_tokens_restored_total"] -
          before["kvplan_prompt_tokens_restored_total"] == cached, "restored tokens in /metrics")
    ref = generate(ARGS.stories, "--plan", stories_plan(), "--chunk-tokens", "32",
                   "--prompt", second_prompt, "--max-tokens", "16")
    check(second.choices[0].text == ref[len(second_prompt):],
          f"restored turn served {second.choices[0].text!r}, computed {ref[len(second_prompt):]!r}")


def test_streaming(s):
    kwargs = dict(model="stories260K", prompt="Once upon a time", max_tokens=20, temperature=0)
    whole = s.client.completions.create(**kwargs).choices[0].text
    pieces, finish, usage = [], None, None
    for chunk in s.client.completions.create(stream=True, stream_options={"include_usage": True},
                                             **kwargs):
        if chunk.choices:
            pieces.append(chunk.choices[0].text)
            finish = chunk.choices[0].finish_reason or finish
        if chunk.usage:
            usage = chunk.usage
    check("".join(pieces) == whole, f"stream {''.join(pieces)!r} vs {whole!r}")
    check(len(pieces) > 3, "the stream came in pieces")
    check(finish in ("length", "stop"), f"finish_reason {finish}")
    check(usage is not None and usage.completion_tokens <= 20, f"usage {usage}")
    # A stop string ends the text before it, streamed or not.
    cut = whole.find(" a ")
    check(cut > 0, whole)
    stopped = s.client.completions.create(stop=[" a "], **kwargs).choices[0]
    check(stopped.text == whole[:cut] and stopped.finish_reason == "stop",
          f"stop: {stopped.text!r} {stopped.finish_reason}")
    streamed = "".join(c.choices[0].text for c in
                       s.client.completions.create(stream=True, stop=[" a "], **kwargs)
                       if c.choices)
    check(streamed == whole[:cut], f"streamed stop: {streamed!r}")
    # Sampling: the same seed gives the same text.
    sampled = [s.client.completions.create(model="stories260K", prompt="Once upon a time",
                                           max_tokens=20, temperature=0.9, top_p=0.9,
                                           seed=7).choices[0].text for _ in range(2)]
    check(sampled[0] == sampled[1], f"seeded sampling differs: {sampled}")


def test_bad_requests(s):
    def expect(status, body, fragment):
        got, err = s.post_raw("/v1/completions", body)
        check(got == status and fragment in err["error"]["message"],
              f"expected {status} with '{fragment}', got {got} {err}")
        check("\n" not in err["error"]["message"], "one-line reason")

    expect(400, b'{"model": "stories260K", "prompt": ', "not valid JSON")
    expect(400, b'[1, 2]', "JSON object")
    expect(400, json.dumps({"model": "stories260K", "prompt": "x", "max_tokens": -3}).encode(),
           "max_tokens")
    expect(400, json.dumps({"model": "stories260K", "prompt": [1] * 5000}).encode(), "context")
    expect(400, json.dumps({"model": "stories260K", "prompt": "x", "temperature": "hot"}).encode(),
           "temperature")
    expect(400, json.dumps({"model": "stories260K", "prompt": "x", "n": 2}).encode(), "n:")
    try:
        s.client.completions.create(model="no-such-model", prompt="x", max_tokens=2)
        raise AssertionError("an unknown model was served")
    except openai.NotFoundError as e:
        check("no-such-model" in str(e), str(e))
    try:
        s.client.completions.create(model="stories260K", prompt="x", max_tokens=-1)
        raise AssertionError("negative max_tokens was served")
    except openai.BadRequestError as e:
        check("max_tokens" in str(e), str(e))
    try:
        s.client.chat.completions.create(model="stories260K",
                                         messages=[{"role": "user", "content": "hi"}])
        raise AssertionError("a chat request was served without a chat template")
    except openai.BadRequestError as e:
        check("chat template" in str(e), str(e))
    big = json.dumps({"model": "stories260K", "prompt": "x" * (80 << 10)}).encode()
    expect(413, big, "larger than")
    status, _ = s.get("/health")
    check(status == 200, "healthy after the bad requests")
    check(s.client.completions.create(model="stories260K", prompt="Once", max_tokens=2,
                                      temperature=0).choices[0].text, "serves after them")


def test_disconnect_cancels(s):
    before = s.metrics()
    conn = http.client.HTTPConnection("127.0.0.1", s.port, timeout=30)
    body = json.dumps({"model": SMOLLM2, "prompt": "Once upon a time", "max_tokens": 200,
                       "temperature": 0, "stream": True})
    conn.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
    resp = conn.getresponse()
    check(resp.status == 200, resp.status)
    resp.fp.readline()  # the first event
    conn.sock.shutdown(socket.SHUT_RDWR)
    conn.close()
    deadline = time.time() + 30
    while time.time() < deadline:
        m = s.metrics()
        if (m['kvplan_requests_finished_total{reason="cancelled"}'] >
                before['kvplan_requests_finished_total{reason="cancelled"}'] and
                m["kvplan_running_requests"] == 0 and m["kvplan_kv_memory_used_bytes"] == 0):
            generated = m["kvplan_generated_tokens_total"] - before["kvplan_generated_tokens_total"]
            check(generated < 200, f"the cancelled request generated {generated} tokens")
            return
        time.sleep(0.1)
    raise AssertionError(f"the disconnected stream was not cancelled: {s.metrics()}")


def test_concurrent_clients(s):
    before = s.metrics()
    deadline = time.time() + 8
    sent, answered, errors = [0] * 16, [0] * 16, []

    def client(i):
        c = openai.OpenAI(base_url=s.url + "/v1", api_key="unused", max_retries=0, timeout=120)
        n = 0
        while time.time() < deadline:
            tokens = 4 + (i + n) % 12
            try:
                sent[i] += 1
                if (i + n) % 2:
                    text, finish = "", None
                    for ch in c.completions.create(model="stories260K", prompt=f"Story {i} {n}:",
                                                   max_tokens=tokens, temperature=0.8,
                                                   seed=i * 1000 + n, stream=True):
                        if ch.choices:
                            text += ch.choices[0].text
                            finish = ch.choices[0].finish_reason or finish
                    ok = finish in ("length", "stop")
                else:
                    r = c.completions.create(model="stories260K", prompt=f"Story {i} {n}:",
                                             max_tokens=tokens, temperature=0.8, seed=i * 1000 + n)
                    ok = (r.choices[0].finish_reason in ("length", "stop") and
                          r.usage.completion_tokens <= tokens)
                answered[i] += ok
                if not ok:
                    errors.append(f"client {i} request {n}: no finish")
            except Exception as e:  # noqa: BLE001 - every failure is a lost request
                errors.append(f"client {i} request {n}: {e!r}")
            n += 1

    threads = [threading.Thread(target=client, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    after = s.metrics()
    check(not errors, f"{len(errors)} lost: {errors[:3]}")
    check(sum(answered) == sum(sent) and sum(sent) >= 16, f"sent {sum(sent)}, answered {sum(answered)}")
    accepted = after["kvplan_requests_total"] - before["kvplan_requests_total"]
    check(accepted == sum(sent), f"engine accepted {accepted} of {sum(sent)}")
    check(after["kvplan_running_requests"] == 0 and after["kvplan_waiting_requests"] == 0,
          "nothing left running")
    print(f"  16 clients, 8 s: {sum(sent)} requests, all answered", flush=True)


def test_chat_two_turns(s):
    if True:
        system = ("You are a careful assistant. Answer in one short sentence. " * 6).strip()
        turn1 = [{"role": "system", "content": system},
                 {"role": "user", "content": "What is the capital of France?"}]
        first = s.client.chat.completions.create(model=SMOLLM2,
                                                 messages=turn1, max_tokens=12, temperature=0)
        answer = first.choices[0].message.content
        check(first.choices[0].message.role == "assistant" and answer, first)
        turn2 = turn1 + [{"role": "assistant", "content": answer},
                         {"role": "user", "content": "And of Italy?"}]
        before = s.metrics()
        second = s.client.chat.completions.create(model=SMOLLM2,
                                                  messages=turn2, max_tokens=12, temperature=0)
        after = s.metrics()
        cached = second.usage.prompt_tokens_details.cached_tokens
        check(cached >= 64, f"turn 2 restored {cached} tokens")
        hits = sum(after[f'kvplan_prefix_hits_total{{tier="{t}"}}'] -
                   before[f'kvplan_prefix_hits_total{{tier="{t}"}}'] for t in ("device", "host", "disk"))
        check(hits * 32 >= cached, f"{hits} chunk hits")
        with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
            json.dump(turn2, f)
        try:
            ref = generate(ARGS.smollm2, "--plan", smollm2_plan(), "--chunk-tokens", "32",
                           "--messages", f.name, "--max-tokens", "12")
        finally:
            os.unlink(f.name)
        check(second.choices[0].message.content == ref,
              f"restored turn 2 {second.choices[0].message.content!r}, generate {ref!r}")
        # Streaming chat: role first, then the same content.
        chunks = list(s.client.chat.completions.create(model=SMOLLM2,
                                                       messages=turn2, max_tokens=12,
                                                       temperature=0, stream=True))
        check(chunks[0].choices[0].delta.role == "assistant", chunks[0])
        content = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        check(content == ref, f"streamed chat {content!r}")
        print(f"  chat turn 2: {cached} of {second.usage.prompt_tokens} prompt tokens restored",
              flush=True)


def test_sigterm_drains(s):
    """Last: SIGTERM while a request streams; it finishes, new requests are refused, exit 0."""
    result, first = {}, threading.Event()

    def long_request():
        text = ""
        for ch in s.client.completions.create(model=SMOLLM2, prompt="Once upon a time",
                                              max_tokens=48, temperature=0, stream=True):
            first.set()
            if ch.choices:
                text += ch.choices[0].text
                result["finish"] = ch.choices[0].finish_reason or result.get("finish")
        result["text"] = text

    t = threading.Thread(target=long_request)
    t.start()
    check(first.wait(timeout=60), "the request did not start")
    s.proc.send_signal(signal.SIGTERM)
    time.sleep(0.2)
    try:
        s.client.completions.create(model=SMOLLM2, prompt="Once", max_tokens=2)
        raise AssertionError("a request was served after SIGTERM")
    except (openai.APIStatusError, openai.APIConnectionError) as e:
        check(getattr(e, "status_code", 503) == 503, str(e))
    t.join(timeout=120)
    code = s.stop()
    check(code == 0, f"exit code {code}: {s.stderr}")
    check(result.get("finish") == "length",
          f"the request in flight did not finish: {result}")


def main():
    global ARGS
    p = argparse.ArgumentParser()
    p.add_argument("--kvplan", required=True)
    p.add_argument("--stories", required=True)
    p.add_argument("--smollm2", required=True)
    p.add_argument("--repo", required=True)
    ARGS = p.parse_args()
    failures = 0
    s = Server(ARGS.stories, "--plan", stories_plan(), "--chunk-tokens", "32", "--max-body",
               "64KiB")
    try:
        for test in (test_completion_matches_generate, test_two_turns_restore_the_prefix,
                     test_streaming, test_bad_requests, test_concurrent_clients):
            failures += run(test, s)
    finally:
        code = s.stop()
        if code != 0:
            print(f"FAIL: exit code {code} after SIGTERM\n{s.stderr}")
            failures += 1
    s = Server(ARGS.smollm2, "--plan", smollm2_plan(), "--chunk-tokens", "32")
    try:
        for test in (test_chat_two_turns, test_disconnect_cancels, test_sigterm_drains):
            failures += run(test, s)
    finally:
        s.stop()
    print("all passed" if failures == 0 else f"{failures} failed")
    return 1 if failures else 0


def run(test, *args):
    start = time.time()
    try:
        test(*args)
        print(f"ok   {test.__name__} ({time.time() - start:.1f} s)", flush=True)
        return 0
    except Exception:  # noqa: BLE001
        print(f"FAIL {test.__name__}\n{traceback.format_exc()}", flush=True)
        return 1


if __name__ == "__main__":
    sys.exit(main())
