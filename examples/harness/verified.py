"""A whole agent run against a sidecar started with --evidence verified:
each receipt the sidecar signs for an executed call is kept in the tool
return's metadata (pydantic-ai keeps a ToolReturnPart's metadata in the
history and never sends it to the model), where the sidecar finds it on
the next request and vouches for the search or the load it answers.

Standard library only. Usage:
python3 verified.py SIDECAR_URL [CONTEXT.json]
"""
import copy
import json
import sys
import urllib.request

# The model's responses, scripted: search, call what the search revealed,
# load a capability, call its tool.
MODEL = [
    ("search_tools", "tool-search", "s1", {"queries": ["docs"]}),
    ("search_docs", None, "c1", {"query": "refund policy"}),
    ("load_capability", "capability-load", "l1", {"id": "vault"}),
    ("secret_op", None, "c2", {"name": "payments-api-key"}),
]

# What running each tool returns, as its tool-return's content.
TOOLS = {
    "search_tools": {"discovered_tools": [{"name": "search_docs"}]},
    "search_docs": "Refunds are issued within 14 days.",
    "load_capability": {"instructions": "Vault loaded."},
    "secret_op": "s3cr3t",
}


def decide(url, history, context):
    request = urllib.request.Request(
        url + "/v1/decide",
        data=json.dumps({"history": history, "context": context}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request) as response:
        return json.load(response)


def run(url, context):
    history = [{"kind": "request", "parts": [
        {"part_kind": "user-prompt", "content": "Find the refund policy, then read the payments API key."}]}]
    verdicts = []
    for tool, kind, call_id, args in MODEL:
        history.append({"kind": "response", "parts": [{
            "part_kind": "tool-call", "tool_name": tool, "tool_kind": kind,
            "tool_call_id": call_id, "args": args}]})
        decision = decide(url, history, context)
        call = decision["calls"][0]
        verdicts.append([tool, call["verdict"]])
        if call["verdict"] != "execute":
            break
        # Run the tool; keep the receipt with its return.
        history.append({"kind": "request", "parts": [{
            "part_kind": "tool-return", "tool_name": tool, "tool_kind": kind,
            "tool_call_id": call_id, "content": TOOLS[tool],
            "metadata": {"policycheck_receipt": call["receipt"]}}]})
    return history, verdicts


def main(url, context_file=None):
    context = {}
    if context_file is not None:
        with open(context_file) as f:
            context = json.load(f)
    history, verdicts = run(url, context)
    # The same run with the receipts left out: the search and the load
    # count for nothing, and the last call is refused.
    stripped = copy.deepcopy(history[:-1])
    for message in stripped:
        for part in message["parts"]:
            part.pop("metadata", None)
    last = decide(url, stripped, context)
    print(json.dumps({
        "verdicts": verdicts,
        "without_receipts": [[c["tool"], c["verdict"]] for c in last["calls"]],
        "unverified_evidence": last.get("unverified_evidence", []),
    }, indent=1, sort_keys=True))


if __name__ == "__main__":
    main(*sys.argv[1:3])
