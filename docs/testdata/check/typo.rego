package policycheck.rules.transfers

deny contains {"reason": "transfers are off", "message": "Transfers are switched off."} if {
	input.call.tool == "transfer_fund"
	input.context.transfers_off
}
