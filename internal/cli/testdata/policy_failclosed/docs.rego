# A capability filter that returns an array instead of a set of tool
# names: every decision while "docs" is active must fail closed.
package policycheck.capabilities.docs

prepare_tools := ["search_docs"]
