# METADATA
# title: Vault filter tests
# description: rotate_key for administrators only; every other tool kept.
package policycheck.capabilities.vault_test

import data.policycheck.capabilities.vault

tools := [
	{"name": "get_time", "capability": null, "defer_loading": false},
	{"name": "secret_op", "capability": "vault", "defer_loading": true},
	{"name": "rotate_key", "capability": "vault", "defer_loading": true},
]

test_prepare_tools[note] if {
	cases := {
		"admins keep every tool": {"context": {"group": "admin"}, "want": {"get_time", "secret_op", "rotate_key"}},
		"support loses rotate_key": {"context": {"group": "support"}, "want": {"get_time", "secret_op"}},
		"no group loses rotate_key": {"context": {}, "want": {"get_time", "secret_op"}},
	}
	some note, tc in cases
	vault.prepare_tools == tc.want with input as {"tools": tools, "context": tc.context, "active_capabilities": ["vault"]}
}
