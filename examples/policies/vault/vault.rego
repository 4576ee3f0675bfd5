# METADATA
# title: Vault filter
# description: Non-admins never see the vault's rotate_key.
package policycheck.capabilities.vault

import data.policycheck.lib

admin_only := {"rotate_key"}

# METADATA
# title: prepare_tools
# description: Every tool, minus the vault's admin tools for non-admins.
prepare_tools := lib.names(input.tools) if input.context.group == "admin"

else := lib.names(input.tools) - admin_only
