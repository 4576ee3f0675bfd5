"""Ask a person before a call runs: policycheck's approval_required verdict
mapped onto pydantic-ai's deferred tool calls, over the sidecar.

Standard library only. Usage:
python3 approvals.py SIDECAR_URL HISTORY.json [CONTEXT.json]
(the history ends with the model response whose calls are to be judged;
the context, such as the user's group, goes with every request).
"""
import json
import sys
import urllib.request


def decide(url, history, context, approvals=None):
    """POST /v1/decide; approvals is DeferredToolResults.approvals."""
    body = {"history": history, "context": context}
    if approvals is not None:
        body["approvals"] = approvals
    request = urllib.request.Request(
        url + "/v1/decide",
        data=json.dumps(body).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def deferred_tool_requests(history, decision):
    """The calls that need a person's yes, as DeferredToolRequests: the
    response's tool-call parts, and per tool_call_id what the approver is
    asked and the digest that binds the answer to this very call."""
    parts = {p["tool_call_id"]: p for p in history[-1]["parts"] if p["part_kind"] == "tool-call"}
    requests = {"calls": [], "approvals": [], "metadata": {}}
    for call in decision["calls"]:
        if call["verdict"] == "approval_required":
            requests["approvals"].append(parts[call["tool_call_id"]])
            requests["metadata"][call["tool_call_id"]] = {
                "question": call["message"],
                "args": call["args"],
                "digest": call["digest"],
            }
    return requests


def ask_a_person(requests):
    """Stands in for the approval UI: Ana approves each transfer, capping
    the amount at 4000, and the answer carries the digest she was shown."""
    approvals = {}
    for part in requests["approvals"]:
        meta = requests["metadata"][part["tool_call_id"]]
        args = dict(meta["args"], amount=min(meta["args"]["amount"], 4000))
        approvals[part["tool_call_id"]] = {
            "kind": "tool-approved",
            "override_args": args,
            "digest": meta["digest"],
            "approvers": ["ana"],
        }
    return {"calls": {}, "approvals": approvals, "metadata": {}}


def outcome(history, decision):
    """What the agent does with each call: run it (with the arguments the
    decision returns when an approval applied, an approver's override
    included; else the model's), tell the model it was refused, or wait
    for a person."""
    parts = {p["tool_call_id"]: p for p in history[-1]["parts"] if p["part_kind"] == "tool-call"}
    out = {"execute": [], "refused": [], "waiting": []}
    for call in decision["calls"]:
        if call["verdict"] == "execute":
            args = call.get("args", parts[call["tool_call_id"]]["args"])
            out["execute"].append({"tool_call_id": call["tool_call_id"], "args": args})
        elif call["verdict"] == "approval_required":
            out["waiting"].append(call["tool_call_id"])
        else:
            out["refused"].append({"tool_call_id": call["tool_call_id"], "message": call["message"]})
    return out


def main(url, history_file, context_file=None):
    with open(history_file) as f:
        history = json.load(f)
    context = {}
    if context_file is not None:
        with open(context_file) as f:
            context = json.load(f)
    first = decide(url, history, context)
    requests = deferred_tool_requests(history, first)
    results = ask_a_person(requests)
    # Resume with the same history and the person's answers.
    second = decide(url, history, context, results["approvals"])
    # A harness bug that edits the arguments after approval: the digest no
    # longer matches, so the approval does not apply.
    tampered = json.loads(json.dumps(history))
    for part in tampered[-1]["parts"]:
        if part.get("tool_call_id") in results["approvals"]:
            part["args"]["amount"] = 9000
    third = decide(url, tampered, context, results["approvals"])
    print(json.dumps({
        "requests": requests,
        "results": results,
        "resumed": outcome(history, second),
        # A decision lists "approvals" only when an approval was sent.
        "approvals": second.get("approvals", []),
        "tampered": outcome(tampered, third),
        "tampered_why": [a["why"] for a in third.get("approvals", [])],
    }, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(*sys.argv[1:4])
