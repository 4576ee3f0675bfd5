"""Writes the AgentDojo-style runs of examples/agentdojo (README.md):
for each suite, registry.yaml, histories/<run>.json and manifest.json.
Run from anywhere: python3 examples/agentdojo/generate.py"""

import os
import sys

sys.dont_write_bytecode = True

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

from gen_common import write_suite  # noqa: E402
import suite_banking  # noqa: E402
import suite_slack  # noqa: E402
import suite_travel  # noqa: E402
import suite_workspace  # noqa: E402

HEADER = """The {suite} suite's registry for the AgentDojo-style evaluation
(examples/agentdojo/README.md). Plain tools, each with its
parameters_json_schema. Labels: consequential (the call changes
something), external (its arguments leave the user's hands), secret (its
returns are confidential: examples/policies/exfiltration reads secret
and external), untrusted (its returns carry text a third party wrote:
examples/agentdojo/policies/untrusted reads untrusted and consequential)."""

for mod, name in [(suite_banking, "banking"), (suite_slack, "slack"), (suite_workspace, "workspace"), (suite_travel, "travel")]:
    write_suite(HERE, name, HEADER.format(suite=name), mod.TOOLS, mod.RUNS, mod.SYSTEM)
