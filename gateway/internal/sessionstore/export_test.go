package sessionstore

// SessionKeys and IDKey name the Redis keys of a session and of its
// public id's index, for the tests that place them on a cluster's nodes.
var (
	SessionKeys = sessionKeys
	IDKey       = idKey
)
