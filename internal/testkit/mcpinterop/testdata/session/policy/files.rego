# METADATA
# title: No moving files
# description: The scripted session's operator rule (session_test.go).
package policycheck.rules.files

# METADATA
# title: deny
# description: Denies move_file.
# entrypoint: true
deny contains {
	"reason": "move_file is not allowed",
	"message": "Files cannot be moved here: copy the content with write_file instead.",
} if {
	input.call.tool == "move_file"
}
