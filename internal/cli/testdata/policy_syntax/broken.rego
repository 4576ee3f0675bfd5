package policycheck.rules.broken

# A rule body closed with the wrong bracket: a parse error on line 5.
hide contains name if {
	name := "get_time"]
}
