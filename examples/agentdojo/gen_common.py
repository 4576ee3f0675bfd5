"""Shared builders for the AgentDojo-style runs (see README.md).

generate.py describes every run in a few lines; this module turns a run
into a pydantic-ai history (the wire format of docs/semantics.md, with
every key pydantic-ai writes), a suite's registry and its manifest.
"""

import datetime
import json
import os

BASE = datetime.datetime(2026, 5, 4, 9, 0, 0, tzinfo=datetime.timezone.utc)


def _ts(i):
    return (BASE + datetime.timedelta(seconds=i)).strftime("%Y-%m-%dT%H:%M:%SZ")


class Clock:
    def __init__(self):
        self.i = 0

    def next(self):
        self.i += 1
        return _ts(self.i)


def _request(parts, ts, run_id):
    return {"parts": parts, "timestamp": ts, "instructions": None, "kind": "request",
            "run_id": run_id, "conversation_id": "conv-" + run_id, "metadata": None,
            "state": "complete"}


def _response(parts, ts, run_id):
    return {"parts": parts,
            "usage": {"input_tokens": 0, "cache_write_tokens": 0, "cache_read_tokens": 0,
                      "output_tokens": 0, "input_audio_tokens": 0, "cache_audio_read_tokens": 0,
                      "output_audio_tokens": 0, "details": {}, "cost": None},
            "model_name": "claude-sonnet", "timestamp": ts, "kind": "response",
            "provider_name": "anthropic", "provider_url": None, "provider_details": None,
            "provider_response_id": None, "finish_reason": None, "run_id": run_id,
            "conversation_id": "conv-" + run_id, "metadata": None, "state": "complete"}


def _call(tool, args, cid):
    return {"tool_name": tool, "args": args, "tool_call_id": cid, "tool_kind": None, "id": None,
            "provider_name": None, "provider_details": None, "part_kind": "tool-call"}


def _return(tool, content, cid, ts):
    return {"tool_name": tool, "content": content, "tool_call_id": cid, "tool_kind": None,
            "metadata": None, "timestamp": ts, "outcome": "success", "part_kind": "tool-return"}


def _text(s):
    return {"content": s, "id": None, "provider_name": None, "provider_details": None,
            "part_kind": "text"}


def history(run_id, system, user, steps, final, summary=None, resume=None):
    """A history: the system and user prompts, then each step (a response
    of calls, a request of their returns), then, when summary is given, a
    response holding a compaction part (the summary) and a request with
    resume as the user's next prompt, then the final response: the calls
    being judged. Returns (messages, [(tool_call_id, tool, expect)])."""
    clock = Clock()
    msgs = [_request([
        {"content": system, "timestamp": clock.next(), "dynamic_ref": None, "part_kind": "system-prompt"},
        {"content": user, "timestamp": clock.next(), "part_kind": "user-prompt"},
    ], clock.next(), run_id)]
    n = 0
    for step in steps:
        calls, rets = [], []
        for tool, args, content in step:
            n += 1
            cid = "%s-%d" % (run_id, n)
            calls.append(_call(tool, args, cid))
            rets.append(_return(tool, content, cid, clock.next()))
        msgs.append(_response(calls, clock.next(), run_id))
        msgs.append(_request(rets, clock.next(), run_id))
    if summary is not None:
        msgs.append(_response([
            {"content": summary, "id": None, "provider_name": "anthropic", "provider_details": None,
             "part_kind": "compaction"}], clock.next(), run_id))
        msgs.append(_request([{"content": resume, "timestamp": clock.next(), "part_kind": "user-prompt"}],
                             clock.next(), run_id))
    parts, judged = [], []
    for tool, args, expect in final:
        n += 1
        cid = "%s-%d" % (run_id, n)
        parts.append(_call(tool, args, cid))
        judged.append({"tool_call_id": cid, "tool": tool, "expect": expect})
    msgs.append(_response(parts, clock.next(), run_id))
    return msgs, judged


def s(**props):
    """An object schema: each property a type name ("string", "number",
    "integer", "boolean", "strings"), optional when it ends in "?"."""
    p, req = {}, []
    for k, v in props.items():
        opt = v.endswith("?")
        v = v.rstrip("?")
        if v == "strings":
            p[k] = {"type": "array", "items": {"type": "string"}}
        else:
            p[k] = {"type": v}
        if not opt:
            req.append(k)
    out = {"type": "object", "properties": p, "additionalProperties": False}
    if req:
        out["required"] = req
    return out


def write_suite(root, suite, header, tools, runs, system):
    """Writes <suite>/registry.yaml, <suite>/histories/<id>.json and
    <suite>/manifest.json. tools: [(name, description, labels, schema,
    intended)]; runs: dicts with id, class, source_shape, user, steps,
    final, and optionally summary, resume, injection."""
    d = os.path.join(root, suite)
    os.makedirs(os.path.join(d, "histories"), exist_ok=True)
    lines = ["# " + l if l else "#" for l in header.strip().split("\n")]
    lines.append("# integrity, confidentiality, clearance, consequential: the flow labels the")
    lines.append("# stock library reads (policies/lib/integrity.rego, docs/registry.md).")
    lines.append("# Generated by examples/agentdojo/generate.py: edit there and rerun it.")
    lines.append("tools:")
    for name, desc, labels, schema, intended in tools:
        lines.append("  - name: " + name)
        lines.append("    description: " + json.dumps(desc))
        if labels:
            lines.append("    labels: [" + ", ".join(labels) + "]")
        for field in ("integrity", "confidentiality", "clearance"):
            if field in intended:
                lines.append("    %s: %s" % (field, intended[field]))
        if "consequential" in labels:
            lines.append("    consequential: true")
        lines.append("    parameters_json_schema: " + json.dumps(schema))
    with open(os.path.join(d, "registry.yaml"), "w") as f:
        f.write("\n".join(lines) + "\n")
    manifest = {"suite": suite,
                "note": "Generated by examples/agentdojo/generate.py. expect: benign (should execute) or injected (should be stopped: any verdict but execute). intended_labels: the integrity, confidentiality and clearance of each tool, which registry.yaml carries (issue 47 item 3; a tool that sets none has the registry's defaults).",
                "intended_labels": {name: intended for name, _, _, _, intended in tools},
                "runs": []}
    seen = set()
    for r in runs:
        assert r["id"] not in seen, r["id"]
        seen.add(r["id"])
        msgs, judged = history(r["id"], system, r["user"], r["steps"], r["final"],
                               r.get("summary"), r.get("resume"))
        path = "histories/%s.json" % r["id"]
        with open(os.path.join(d, path), "w") as f:
            json.dump(msgs, f, indent=1, ensure_ascii=False)
            f.write("\n")
        manifest["runs"].append({"id": r["id"], "history": path, "class": r["class"],
                                 "source_shape": r.get("source_shape"),
                                 "user_task": r["user"], "injection": r.get("injection"),
                                 "calls": judged})
    with open(os.path.join(d, "manifest.json"), "w") as f:
        json.dump(manifest, f, indent=1, ensure_ascii=False)
        f.write("\n")
