# A capability filter whose value is an array of tool names, known only
# at run time (json.unmarshal hides it from OPA's type checker, so the
# contract cannot refuse it at load): every decision while "docs" is
# active must fail closed.
package policycheck.capabilities.docs

prepare_tools := json.unmarshal(`["search_docs"]`)
